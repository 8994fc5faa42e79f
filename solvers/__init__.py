"""memsched solvers: instances, schedules, simulators, dynamic programs and exact models.

Pure optimisation: numpy, ortools, networkx, pulp; never torch.
"""

from .errors import InfeasibleError, InputError
from .result import SolveResult

__version__ = "0.1.0"
__all__ = ["InputError", "InfeasibleError", "SolveResult", "__version__"]
