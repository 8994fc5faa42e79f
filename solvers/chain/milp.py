"""Exact MILP for chain rematerialization: the phase model of `solvers.chain.exact_model`,
solved through OR-Tools' linear solver wrapper (pywraplp) with an open backend.

Backends: ``"scip"`` (default), ``"highs"``, ``"cbc"`` and ``"cp-sat"`` (CP-SAT on the same
linear model). The default was chosen with `experiments/bench_chain_exact.py`
(results/bench_chain_exact.csv; random_chain(L, 0), 100 slots, 60 s, 2 shared cores): all
backends prove L <= 15 in seconds (CP-SAT fastest); at L = 20 with a tight budget only SCIP
proved optimality (29 s), HiGHS and CP-SAT stopped at gaps near 7%; at L = 30 with a tight
budget none proved it and SCIP's gap was the smallest (2.6%, CP-SAT 4.9%, HiGHS gives no
bound), while a looser L = 30 budget was proved by all (HiGHS 10 s, SCIP 11 s, CP-SAT 30 s).
CBC was left out of the timed grid: it counts CPU seconds, so under load it overran its limit
(164 s wall for a 60 s limit at L = 20).

Statuses: ``optimal`` when the backend proves it (relative gap 1e-9) for the phase model;
(HiGHS through pywraplp needs its own ``mip_rel_gap`` option and reports no usable bound
before optimality; SetHint crashes it, so it gets no warm start; CBC's time limit counts CPU
seconds);
``feasible`` when the time limit stops it with a schedule (the backend's or, failing that,
the warm start), ``lower_bound`` being the backend's best bound; ``timeout`` without any
schedule; ``infeasible`` when the backend proves that no phase-model schedule fits.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .exact_model import PhaseModel, discretise, retry_exact_sizes, warm_start_schedule
from .instance import Chain
from .simulator import simulate

BACKENDS = {"scip": "SCIP", "highs": "HIGHS", "cbc": "CBC", "cp-sat": "CP_SAT"}
DEFAULT_BACKEND = "scip"
DEFAULT_TIME_LIMIT = 60.0
REL_GAP = 1e-9


def solve_milp(chain: Chain, budget: int, *, slots: int = 500, time_limit: float | None = None,
               **options: Any) -> SolveResult:
    """See `_solve_milp`; when the sizes rounded up to `slots` make the budget infeasible, the
    model is solved again with exact sizes in the time left (`retry_exact_sizes`)."""
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    return retry_exact_sizes(_solve_milp, chain, budget, slots=slots, time_limit=limit, **options)


def _solve_milp(
    chain: Chain,
    budget: int,
    *,
    slots: int = 500,
    time_limit: float | None = None,
    warm_start: bool = True,
    backend: str | None = None,
    num_workers: int = 1,
    verbose: bool = False,
    dominance: bool = True,
    **_: Any,
) -> SolveResult:
    """Minimise the makespan (chain time unit) under `budget` (bytes) over the phase model.

    `slots` = N > 0 discretises sizes into N slots of budget/N bytes (rounded up); 0 keeps
    exact sizes. `time_limit` in seconds (default 60), warm start and model building included
    (CBC counts CPU seconds, so on a loaded machine it may run longer in wall-clock time).
    `backend`: one of BACKENDS (default SCIP). `dominance`: add the dominance rows of the model.
    """
    from ortools.linear_solver import pywraplp

    t0 = time.perf_counter()
    backend = (backend or DEFAULT_BACKEND).lower()
    if backend not in BACKENDS:
        raise ValueError(f"unknown MILP backend {backend!r} (one of {', '.join(BACKENDS)})")
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    dchain, M = discretise(chain, budget, slots)
    model = PhaseModel.build(dchain, M, dominance=dominance)
    scope = model.scope(slots) + f"; MILP ({backend})"
    name = "milp"

    def result(status: str, **kw: Any) -> SolveResult:
        return SolveResult(problem="chain", solver=name, status=status, budget=budget, scope=scope,
                           solve_time_s=time.perf_counter() - t0, details={"backend": backend, **kw.pop("details", {})},
                           **kw)

    if model.trivially_infeasible:
        return result(INFEASIBLE, message=f"no schedule fits: {model.trivially_infeasible}")

    hint_values, hint_source, hint_ok = None, "", False
    if warm_start:
        sched, hint_source = warm_start_schedule(chain, budget, slots)
        if sched is not None:
            hint_values = model.encode(sched)
            hint_ok = hint_values is not None and not model.violated(hint_values)

    solver = pywraplp.Solver.CreateSolver(BACKENDS[backend])
    if solver is None:
        raise ValueError(f"MILP backend {backend!r} is not available in this OR-Tools build")
    if verbose:
        solver.EnableOutput()
    xs = [solver.BoolVar(f"{k[0]}_{k[1]}_{k[2]}") for k in model.keys]
    inf = solver.infinity()
    for row in model.rows:
        ct = solver.Constraint(-inf if row.lo is None else row.lo, inf if row.hi is None else row.hi)
        for v, c in row.expr.terms.items():
            ct.SetCoefficient(xs[v], c)
    obj = solver.Objective()
    for v, c in model.objective.terms.items():
        obj.SetCoefficient(xs[v], c)
    obj.SetOffset(model.objective.const)
    obj.SetMinimization()
    if hint_values is not None and backend != "highs":  # SetHint crashes HiGHS in OR-Tools 9.15 (segfault)
        solver.SetHint(xs, hint_values)
    solver.SetTimeLimit(max(1, int(1000 * (limit - (time.perf_counter() - t0)))))
    if num_workers > 1:
        solver.SetNumThreads(int(num_workers))
    if backend == "highs":
        # pywraplp's HiGHS ignores RELATIVE_MIP_GAP (it stops at HiGHS' default 1e-4 and calls that
        # optimal); the option string works although the call returns False
        solver.SetSolverSpecificParametersAsString(f"mip_rel_gap={REL_GAP}")
    if backend == "cp-sat":
        solver.SetSolverSpecificParametersAsString(f"num_workers:{max(1, int(num_workers))} linearization_level:2")
    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(params.RELATIVE_MIP_GAP, REL_GAP)
    build_s = time.perf_counter() - t0
    code = solver.Solve(params)
    elapsed = time.perf_counter() - t0
    details = {"variables": len(model.keys), "constraints": len(model.rows), "build_s": round(build_s, 3),
               "warm_start": hint_source if hint_values is not None else "", "warm_start_fits": hint_ok}

    values = None
    if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        values = [1.0 if x.solution_value() > 0.5 else 0.0 for x in xs]
        if model.violated(values):  # a rounded backend answer that breaks the model: do not trust it
            values = None
    bound = None
    if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        try:
            bound = float(obj.BestBound())
        except Exception:
            bound = None
        if bound is not None and not math.isfinite(bound):
            bound = None
        if backend == "highs" and code != pywraplp.Solver.OPTIMAL:
            bound = None  # pywraplp's HiGHS reports the incumbent's value as its "best bound"
    if code == pywraplp.Solver.INFEASIBLE:
        return result(INFEASIBLE, message="no phase-model schedule fits the budget", details=details)
    source = "backend"
    if values is None and hint_ok:
        values, source = hint_values, "warm start"
    if values is None:
        return result(TIMEOUT, lower_bound=bound, message="no schedule before the time limit", details=details)
    schedule = model.decode(values)
    claimed = model.objective.value(values)
    sim = simulate(dchain, schedule, M).raise_if_invalid()
    if abs(sim.makespan - claimed) > 1e-6 * max(1.0, abs(claimed)):
        raise RuntimeError(f"phase model claims {claimed} but the simulator charges {sim.makespan}")
    proven = code == pywraplp.Solver.OPTIMAL and source == "backend"
    if proven and bound is not None and claimed - bound > 1e-6 * max(1.0, abs(claimed)):
        proven = False  # a backend that stopped at its own default gap: not a proof of optimality
    if proven:
        bound = claimed if bound is None else min(max(bound, 0.0), claimed)
    if bound is not None and bound > claimed:
        bound = claimed
    details["solution_from"] = source
    return result(OPTIMAL if proven else FEASIBLE, objective=sim.makespan, lower_bound=bound, schedule=schedule,
                  log=[(elapsed, sim.makespan, bound)], details=details)
