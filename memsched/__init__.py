"""memsched: memory-aware scheduling for training deep networks in limited memory.

One import name for the whole toolkit. Its parts live in the repository's folders and are
installed under this name:

- `memsched.solvers`: pure optimisation (instances, schedules, simulators, DPs, MILP/CP models);
  never imports torch.
- `memsched.models`: the PyTorch side (network zoo, profiler, executors, pipeline runner).
- `memsched.experiments`: the ``memsched`` command line, sweeps, benchmarks and figures.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
