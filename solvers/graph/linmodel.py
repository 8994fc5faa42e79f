"""The linear model of the graph solvers, and how it is solved: a thin front on the exact layer.

`LinearModel` is `solvers.exact.linear.LinearModel`; `solve_milp` and `solve_cpsat_linear` run
it through `solvers.exact.milp_runner` / `cpsat_runner` (one status and bound mapping, the
wall-clock deadline) and return their `BackendRun` (status, values, objective, bound, log, wall).

`mps_exact` says whether the CBC program reads a model exactly: OR-Tools 9.15's MPS export
(`exact.cbc_cmd.export_mps`, how the model reaches the program) writes every number with 6
significant digits, so costs such as 6000.204 and sizes in bytes arrive rounded (Checkmate's CBC
then "proved" 6006.3 optimal where 5506.3 fits, and a bound above the optimum).
"""

from __future__ import annotations

import functools
import math

from ..exact.cpsat_runner import linear_to_cpsat, run_cpsat
from ..exact.linear import LinearModel
from ..exact.milp_runner import BackendRun, row_scale, run_milp
from ..exact.options import Deadline, ExactOptions
from ..exact.portfolio import run_isolated

MILP_BACKENDS = {"scip": "SCIP", "cbc": "CBC", "highs": "HIGHS"}
BACKENDS = (*MILP_BACKENDS, "cpsat")
LinearSolution = BackendRun

__all__ = ["BACKENDS", "LinearModel", "LinearSolution", "MILP_BACKENDS", "mps_exact", "solve_cpsat_linear",
           "solve_milp"]


def _deadline(deadline: Deadline | None, time_limit: float | None) -> Deadline:
    return deadline if deadline is not None else Deadline(time_limit)


def solve_milp(model: LinearModel, backend: str, *, time_limit: float | None = None, hint: list[float] | None = None,
               relax: bool = False, threads: int = 1, feasibility_only: bool = False,
               deadline: Deadline | None = None, hint_feasible: bool = False, lp_solver: str = "GLOP",
               watched: bool = False, isolate: bool = False, memory_gb: float | None = None) -> BackendRun:
    """Solve with a pywraplp backend ("scip", "cbc", "highs", or the LP relaxation with ``relax``:
    `lp_solver` "GLOP", "CLP" or "HIGHS") within `deadline` (or `time_limit` seconds from now); `watched` as
    `run_milp`'s. `isolate`: the backend runs in a child process killed (with the CBC program it
    started) just after the deadline (`portfolio.run_isolated`); `memory_gb` as `ExactOptions`'."""
    dl = _deadline(deadline, time_limit)
    options = ExactOptions(time_limit=None, workers=threads, memory_gb=memory_gb)
    if isolate and not relax and backend in MILP_BACKENDS:
        return run_isolated(model, backend, dl, options, hint=hint, hint_feasible=hint_feasible,
                            feasibility_only=feasibility_only, watched=watched)
    return run_milp(model, backend, dl, options, hint=hint, hint_feasible=hint_feasible, relax=relax,
                    feasibility_only=feasibility_only, lp_solver=lp_solver, watched=watched)


def solve_cpsat_linear(model: LinearModel, *, time_limit: float | None = None, hint: list[float] | None = None,
                       threads: int = 1, feasibility_only: bool = False, log_start: float | None = None,
                       deadline: Deadline | None = None, hint_feasible: bool = False, watched: bool = False
                       ) -> BackendRun:
    """The same linear model on CP-SAT (integer variables and row coefficients; a float
    objective is scaled to integers); `watched` as `run_cpsat`'s."""
    dl = _deadline(deadline, time_limit)
    cp, xs, offset, scale = linear_to_cpsat(model, feasibility_only=feasibility_only, hint=hint, deadline=dl)
    return run_cpsat(cp, dl, ExactOptions(time_limit=None, workers=threads), variables=xs, offset=offset,
                     scale=scale, hint_feasible=hint_feasible, stop_at_first=feasibility_only, log_start=log_start,
                     watched=watched and not feasibility_only)


#: a number the MPS export must write in full (more than 6 significant digits) to be read back exactly
_PROBE = 0.1234567890123


@functools.lru_cache(maxsize=1)
def mps_full_precision() -> bool:
    """Whether `exact.cbc_cmd.export_mps` writes numbers in full (False with OR-Tools 9.15's exporter,
    which writes 6 significant digits): a one-variable model is exported and read back."""
    from ortools.linear_solver import pywraplp

    from ..exact.cbc_cmd import export_mps

    solver = pywraplp.Solver.CreateSolver("CBC") or pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return False
    x = solver.NumVar(0.0, 1.0, "x")
    solver.Objective().SetCoefficient(x, _PROBE)
    return any(_same(tok, _PROBE) for tok in export_mps(solver).split())


def _same(token: str, value: float) -> bool:
    try:
        return float(token) == value
    except ValueError:
        return False


def _printed(value: float) -> bool:
    """Whether `value` survives 6 significant digits (``%g``, the MPS export's format)."""
    return not math.isfinite(value) or float(f"{value:g}") == value


def mps_exact(model: LinearModel) -> bool:
    """Whether the CBC program reads `model` exactly (module docstring): the export writes numbers in
    full, or every number of the model (objective, offset, bounds, and the rows as
    `exact.milp_runner` scales them, `row_scale`) survives 6 significant digits."""
    if mps_full_precision():
        return True
    if not all(_printed(float(c)) for c in model.objective.values()) or not _printed(float(model.offset)):
        return False
    if not all(_printed(float(v)) for v in model.lb) or not all(_printed(float(v)) for v in model.ub):
        return False
    for _, coef, lo, hi in model.rows:
        scale = row_scale(coef)
        if not (_printed(lo * scale) and _printed(hi * scale) and all(_printed(c * scale) for c in coef)):
            return False
    return True
