"""Exact CP-SAT model for chain rematerialization: the phase model of
`solvers.chain.exact_model` stated with Booleans in `ortools.sat.python.cp_model`.

The rows of the phase model become linear constraints over Booleans (CP-SAT's presolve
turns the small ones into clauses); "at most one forward kind per slot" is an AtMostOne
constraint. The warm start (rotor DP, else the best fitting baseline) is given as a hint
(AddHint). Times with integer values are used as they are; otherwise the objective is a
floating-point one, which CP-SAT scales internally (``optimal`` then means optimal up to
its floating-point objective precision; a result whose bound is more than 1e-6 (relative)
below its makespan is reported ``feasible``).

Statuses: ``optimal`` only when CP-SAT proves it for the phase model; ``feasible`` at the time
limit with a schedule (the bound is CP-SAT's best bound: with few workers on 2 cores it
often stays near the LP bound); ``timeout`` without a schedule; ``infeasible`` when proven.
"""

from __future__ import annotations

import time
from typing import Any

from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .exact_model import PhaseModel, discretise, retry_exact_sizes, warm_start_schedule
from .instance import Chain
from .simulator import simulate

DEFAULT_TIME_LIMIT = 60.0


def solve_cpsat(chain: Chain, budget: int, *, slots: int = 500, time_limit: float | None = None,
                **options: Any) -> SolveResult:
    """See `_solve_cpsat`; when the sizes rounded up to `slots` make the budget infeasible, the
    model is solved again with exact sizes in the time left (`retry_exact_sizes`)."""
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    return retry_exact_sizes(_solve_cpsat, chain, budget, slots=slots, time_limit=limit, **options)


def _solve_cpsat(
    chain: Chain,
    budget: int,
    *,
    slots: int = 500,
    time_limit: float | None = None,
    warm_start: bool = True,
    num_workers: int = 1,
    verbose: bool = False,
    dominance: bool = True,
    seed: int = 0,
    parameters: str = "",
    **_: Any,
) -> SolveResult:
    """Minimise the makespan (chain time unit) under `budget` (bytes) over the phase model with
    CP-SAT. `slots` = N > 0 discretises sizes into N slots (rounded up); 0 keeps exact sizes.
    `time_limit` in seconds (default 60, warm start and model building included).
    `num_workers`: CP-SAT workers (default 1: on 2 shared cores, one worker with the full LP
    relaxation, linearization_level 2, proved more than two default workers).
    `parameters`: more CP-SAT parameters as "name:value" pairs separated by spaces or commas,
    e.g. "linearization_level:1 symmetry_level:0"; they override the defaults above."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    dchain, M = discretise(chain, budget, slots)
    model = PhaseModel.build(dchain, M, dominance=dominance)
    scope = model.scope(slots) + "; CP-SAT"

    def result(status: str, **kw: Any) -> SolveResult:
        return SolveResult(problem="chain", solver="cpsat", status=status, budget=budget, scope=scope,
                           solve_time_s=time.perf_counter() - t0, details=kw.pop("details", {}), **kw)

    if model.trivially_infeasible:
        return result(INFEASIBLE, message=f"no schedule fits: {model.trivially_infeasible}")

    hint_values, hint_source, hint_ok = None, "", False
    if warm_start:
        sched, hint_source = warm_start_schedule(chain, budget, slots)
        if sched is not None:
            hint_values = model.encode(sched)
            hint_ok = hint_values is not None and not model.violated(hint_values)

    cp = cp_model.CpModel()
    xs = [cp.new_bool_var(f"{k[0]}_{k[1]}_{k[2]}") for k in model.keys]
    for row in model.rows:
        terms = [(xs[v], int(round(c))) for v, c in row.expr.terms.items()]
        expr = sum(c * x for x, c in terms)
        lo = None if row.lo is None else int(round(row.lo))
        hi = None if row.hi is None else int(round(row.hi))
        if row.name.startswith("one kind") and all(c == 1 for _, c in terms) and lo is None and hi == 1:
            cp.add_at_most_one(x for x, _ in terms)
        elif lo is not None and hi is not None and lo == hi:
            cp.add(expr == lo)
        elif lo is not None and hi is not None:
            cp.add_linear_constraint(expr, lo, hi)
        elif lo is not None:
            cp.add(expr >= lo)
        else:
            cp.add(expr <= hi)
    coefs = {v: c for v, c in model.objective.terms.items() if c != 0}
    integral = all(abs(c - round(c)) < 1e-9 for c in coefs.values())
    if integral:
        cp.minimize(sum(int(round(c)) * xs[v] for v, c in coefs.items()))
    else:
        cp.minimize(sum(c * xs[v] for v, c in coefs.items()))
    const = model.objective.const
    if hint_values is not None:
        for x, v in zip(xs, hint_values):
            cp.add_hint(x, bool(v > 0.5))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, limit - (time.perf_counter() - t0))
    solver.parameters.num_workers = max(1, int(num_workers))
    solver.parameters.random_seed = int(seed)
    solver.parameters.log_search_progress = bool(verbose)
    solver.parameters.linearization_level = 2  # the LP relaxation is what raises the bound here
    if not integral:
        solver.parameters.absolute_gap_limit = 0.0
    _set_parameters(solver.parameters, parameters)

    log: list[tuple[float, float | None, float | None]] = []

    class Progress(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            log.append((time.perf_counter() - t0, self.objective_value + const, self.best_objective_bound + const))

    build_s = time.perf_counter() - t0
    code = solver.solve(cp, Progress())
    details = {"variables": len(model.keys), "constraints": len(model.rows), "build_s": round(build_s, 3),
               "warm_start": hint_source if hint_values is not None else "", "warm_start_fits": hint_ok,
               "num_workers": solver.parameters.num_workers, "integral_objective": integral}
    if code == cp_model.INFEASIBLE:
        return result(INFEASIBLE, message="no phase-model schedule fits the budget", details=details)
    if code == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejects the model: {cp.validate()}")
    values, source = None, "backend"
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        values = [float(solver.value(x)) for x in xs]
    bound = None
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        b = solver.best_objective_bound
        bound = float(b) + const if abs(b) < 1e30 else None
    if values is None and hint_ok:
        values, source = hint_values, "warm start"
    if values is None:
        return result(TIMEOUT, lower_bound=bound, message="no schedule before the time limit", log=log,
                      details=details)
    schedule = model.decode(values)
    claimed = model.objective.value(values)
    sim = simulate(dchain, schedule, M).raise_if_invalid()
    if abs(sim.makespan - claimed) > 1e-6 * max(1.0, abs(claimed)):
        raise RuntimeError(f"phase model claims {claimed} but the simulator charges {sim.makespan}")
    proven = code == cp_model.OPTIMAL and source == "backend"
    if proven and bound is not None and claimed - bound > 1e-6 * max(1.0, abs(claimed)):
        proven = False  # proven only up to the scaling of a floating-point objective
    if proven:
        bound = claimed if bound is None else min(bound, claimed)
    if bound is not None and bound > claimed:
        bound = claimed
    details["solution_from"] = source
    log.append((time.perf_counter() - t0, sim.makespan, bound))
    return result(OPTIMAL if proven else FEASIBLE, objective=sim.makespan, lower_bound=bound, schedule=schedule,
                  log=log, details=details)


def _set_parameters(params: Any, text: str) -> None:
    """Apply "name:value" pairs (spaces or commas between them) to CP-SAT's parameters."""
    for item in text.replace(",", " ").split():
        name, _, raw = item.partition(":")
        if not hasattr(params, name):
            raise ValueError(f"unknown CP-SAT parameter {name!r}")
        current = getattr(params, name)
        if isinstance(current, bool):
            value: Any = raw.lower() in ("1", "true", "yes")
        elif isinstance(current, int):
            value = int(raw)
        elif isinstance(current, float):
            value = float(raw)
        else:
            value = raw
        setattr(params, name, value)
