"""The exact-solver layer: typed options and a wall-clock deadline (`options`), runners that
map OR-Tools' CP-SAT and MILP answers to one status / bound / log (`cpsat_runner`,
`milp_runner`, on models built with `linear.LinearModel` or CP-SAT directly), and the
decorator every exact solver goes through (`layer.exact_solver`): fast solvers first as a warm
start, then the model, then a referee that keeps the answer honest at exact sizes.
"""

from .options import Deadline, DeadlineExceeded, ExactOptions

__all__ = ["Deadline", "DeadlineExceeded", "ExactOptions"]
