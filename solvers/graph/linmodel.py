"""The linear model of the graph solvers, and how it is solved: a thin front on the exact layer.

`LinearModel` is `solvers.exact.linear.LinearModel`; `solve_milp` and `solve_cpsat_linear` run
it through `solvers.exact.milp_runner` / `cpsat_runner` (one status and bound mapping, the
wall-clock deadline) and return their `BackendRun` (status, values, objective, bound, log, wall).
The exact options a graph solver was given reach the backend: ``threads`` (workers), ``seed``
(the backend's random seed, where it takes one), ``verbose`` (its log on stderr) and ``memory_gb``.
"""

from __future__ import annotations

from ..exact.cpsat_runner import linear_to_cpsat, run_cpsat
from ..exact.linear import LinearModel
from ..exact.milp_runner import BackendRun, run_milp
from ..exact.options import Deadline, ExactOptions
from ..exact.portfolio import run_isolated

MILP_BACKENDS = {"scip": "SCIP", "cbc": "CBC", "highs": "HIGHS"}
BACKENDS = (*MILP_BACKENDS, "cpsat")
LinearSolution = BackendRun

__all__ = ["BACKENDS", "LinearModel", "LinearSolution", "MILP_BACKENDS", "solve_cpsat_linear", "solve_milp"]


def _deadline(deadline: Deadline | None, time_limit: float | None) -> Deadline:
    return deadline if deadline is not None else Deadline(time_limit)


def _options(threads: int, seed: int, verbose: bool, memory_gb: float | None = None) -> ExactOptions:
    """The backend's `ExactOptions` (no time limit of its own: the deadline is passed apart)."""
    return ExactOptions(time_limit=None, workers=threads, seed=seed, verbose=verbose, memory_gb=memory_gb)


def solve_milp(model: LinearModel, backend: str, *, time_limit: float | None = None, hint: list[float] | None = None,
               relax: bool = False, threads: int = 1, feasibility_only: bool = False,
               deadline: Deadline | None = None, hint_feasible: bool = False, lp_solver: str = "GLOP",
               watched: bool = False, isolate: bool = False, memory_gb: float | None = None, seed: int = 0,
               verbose: bool = False) -> BackendRun:
    """Solve with a pywraplp backend ("scip", "cbc", "highs", or the LP relaxation with ``relax``:
    `lp_solver` "GLOP", "CLP" or "HIGHS") within `deadline` (or `time_limit` seconds from now); `watched` as
    `run_milp`'s. `isolate`: the backend runs in a child process killed (with the CBC program it
    started) just after the deadline (`portfolio.run_isolated`); `memory_gb`, `seed` and `verbose` as
    `ExactOptions`' (``--option seed``, ``--option verbose``: the backend's log on stderr)."""
    dl = _deadline(deadline, time_limit)
    options = _options(threads, seed, verbose, memory_gb)
    if isolate and not relax and backend in MILP_BACKENDS:
        return run_isolated(model, backend, dl, options, hint=hint, hint_feasible=hint_feasible,
                            feasibility_only=feasibility_only, watched=watched)
    return run_milp(model, backend, dl, options, hint=hint, hint_feasible=hint_feasible, relax=relax,
                    feasibility_only=feasibility_only, lp_solver=lp_solver, watched=watched)


def solve_cpsat_linear(model: LinearModel, *, time_limit: float | None = None, hint: list[float] | None = None,
                       threads: int = 1, feasibility_only: bool = False, log_start: float | None = None,
                       deadline: Deadline | None = None, hint_feasible: bool = False, watched: bool = False,
                       seed: int = 0, verbose: bool = False) -> BackendRun:
    """The same linear model on CP-SAT (integer variables and row coefficients; a float
    objective is scaled to integers); `watched` as `run_cpsat`'s; `seed` (CP-SAT's random_seed) and
    `verbose` (its search log on stderr) as `ExactOptions`'."""
    dl = _deadline(deadline, time_limit)
    cp, xs, offset, scale = linear_to_cpsat(model, feasibility_only=feasibility_only, hint=hint, deadline=dl)
    return run_cpsat(cp, dl, _options(threads, seed, verbose), variables=xs, offset=offset,
                     scale=scale, hint_feasible=hint_feasible, stop_at_first=feasibility_only, log_start=log_start,
                     watched=watched and not feasibility_only)
