"""Exact MILP models of memory-limited pipeline partitioning (straight pipelines): ``milp``
(contiguous stages) and ``dag-milp`` (stage boundaries at ideals of the layer DAG).

The path model of `cpsat` / `dag_cpsat` (the same candidate stages: `cpsat.contiguous_candidates`,
`dag_cpsat.dag_candidates`), stated once as a backend-neutral `LinearModel` and solved by the
MILP backends of `solvers.exact.milp_runner` (option ``backend``: SCIP by default, HiGHS, CBC).
One binary ``v[i, j, t]`` per candidate stage (i..j at position t from the end, t = 1 the last
stage) whose memory fits the budget, and one continuous variable ``p``, the period:

    sum_{j, t} v[source, j, t] = 1            sum_i v[i, sink, 1] = 1
    sum_i v[i, e, t + 1] = sum_j v[s, j, t]   for each link (e, s) and 1 <= t < T
    p >= value(i, j) * v[i, j, t]             for every candidate of value > 0
    p >= sum_{(i, j)} value(i, j) * v[i, j, t] for each position t (valid cut: one stage per position)
    minimise p

where value(i, j) = max(stage time, link time) of the simulator (time units). Objective: the
period itself (not `cpsat`'s rank): the values enter the model multiplied by a power of two
``time_scale`` (exact) that brings the largest into [512, 1024), so that the backends' absolute
tolerances (1e-6) are about 1e-9 of it. The period reported is the simulator's replay of the
chosen partition; the bound is the backend's best bound divided by ``time_scale`` and raised to
the smallest candidate value at or above it less 1e-6 scaled units (the period is always one of
the candidate values; the slack absorbs the backend's tolerance, at most ~1e-9 relative to the
largest value). ``optimal`` when that bound reaches the period, else ``feasible``.

Through the exact layer: the fast solvers (madpipe, pipedream, balance-time; dag and
dag-pipedream for ``dag-milp``) run first; the best partition is the MIP start (SCIP, and the
CBC program; HiGHS takes none) when every stage of it is a candidate, and the referee returns it
when the backend does worse or finds nothing. A backend's "infeasible" is ``infeasible`` only when
no feasible start was given and the time limit did not stop it (`milp_runner.infeasible`); the
flow rows have coefficients +-1 and the memory is checked exactly while the candidates are
enumerated, so a backend's proof is exact arithmetic on 0-1 rows. ``memory_gb`` is refused: the
model is not sized before it is built and HiGHS and CBC have no memory limit that holds.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass
from typing import Any

from ..exact.cpsat_runner import check_first
from ..exact.layer import REL_TOL, exact_solver
from ..exact.linear import LinearModel
from ..exact.milp_runner import BackendRun, check_backend_name, run_milp
from ..exact.options import Deadline, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .cpsat import (
    FAST,
    Candidate,
    _infeasible,
    contiguous_setup,
    seed_positions,
    straight_only,
    tick,
)
from .dag_cpsat import FAST as DAG_FAST
from .dag_cpsat import _infeasible as _dag_infeasible
from .dag_cpsat import dag_setup, seed_ideals
from .dag_dp import to_partition
from .instance import Pipeline
from .schedule import Partition

#: the MILP backends of ``--option backend`` (`milp_runner.run_milp`), the first the default
BACKENDS = ("scip", "highs", "cbc")
DEFAULT_BACKEND = "scip"
#: why the MILP models refuse ``memory_gb`` (`refuses`)
MILP_MEMORY = ("this model is not sized before it is built, and HiGHS and CBC have no memory limit that holds "
               "(the chain's milp takes it with SCIP)")
#: slack (in scaled time units, largest value in [512, 1024)) for the backends' tolerance on the bound
BOUND_TOL = 1e-6


@dataclass
class PathMILP:
    """The path model as a `LinearModel`: `x[n]` is the variable of candidate n, `period` that of p;
    the model's times are the instance's times multiplied by `scale` (a power of two); `values` are the
    distinct candidate values (time units), increasing."""

    model: LinearModel
    x: list[int]
    period: int
    scale: float
    values: list[float]


def time_scale(values: list[float]) -> float:
    """The power of two that brings the largest of `values` (time units, >= 0) into [512, 1024);
    1.0 when they are all 0."""
    top = max(values, default=0.0)
    if not top > 0 or not math.isfinite(top):
        return 1.0
    return math.ldexp(1.0, min(1000, max(-1000, 10 - math.frexp(top)[1])))


def stage_flow_linear(cand: list[Candidate], T: int, source: int, sink: int, links: list[tuple[int, int]],
                      deadline: Deadline | None = None, closed: list[int] | None = None) -> PathMILP:
    """The path model of the module docstring over candidates `cand` (i, j, t, value) with at most
    `T` positions, from node `source` to node `sink`, stages adjacent across each (end, start) of
    `links`; no stage at position T starts at a node of `closed` (it would need a predecessor).
    Checks `deadline` as it goes (`DeadlineExceeded` when it is spent)."""
    values = sorted({c[3] for c in cand})
    scale = time_scale(values)
    lm = LinearModel()
    x = []
    for n, (i, j, t, _) in enumerate(cand):
        tick(deadline, n)
        x.append(lm.var(0, 1, True, f"v_{i}_{j}_{t}"))
    p = lm.var(0.0, (values[-1] if values else 0.0) * scale, False, "period")
    starts: dict[tuple[int, int], list[int]] = {}
    ends: dict[tuple[int, int], list[int]] = {}
    levels: dict[int, list[tuple[int, float]]] = {}  # position t -> (variable, scaled value > 0)
    for n, (var, (i, j, t, val)) in enumerate(zip(x, cand)):
        tick(deadline, n)
        starts.setdefault((i, t), []).append(var)
        ends.setdefault((j, t), []).append(var)
        if val > 0:
            lm.add([p, var], [1.0, -val * scale], lb=0.0)
            levels.setdefault(t, []).append((var, val * scale))
    for t in range(1, T + 1):  # one stage at most per position: the period is at least its value
        level = levels.get(t, [])
        if len(level) > 1:
            lm.add([p] + [var for var, _ in level], [1.0] + [-w for _, w in level], lb=0.0)
    lm.add([var for var, c in zip(x, cand) if c[0] == source], [1.0] * sum(c[0] == source for c in cand), 1.0, 1.0)
    last = ends.get((sink, 1), [])
    lm.add(last, [1.0] * len(last), 1.0, 1.0)
    for n, (e, s) in enumerate(links):
        tick(deadline, n)
        for t in range(1, T):
            into, out = ends.get((e, t + 1), []), starts.get((s, t), [])
            if into or out:
                lm.add(into + out, [1.0] * len(into) + [-1.0] * len(out), 0.0, 0.0)
    for K in closed or []:
        for var in starts.get((K, T), []):
            lm.ub[var] = 0.0
    lm.objective = {p: 1.0}
    return PathMILP(lm, x, p, scale, values)


def start_values(pm: PathMILP, cand: list[Candidate], chosen: set[tuple[int, int, int]] | None
                 ) -> tuple[list[float] | None, bool]:
    """(a complete MIP start, True) setting the candidates of `chosen` (i, j, t) to 1 and p to their
    largest scaled value, when every one of them is a candidate; else (None, False)."""
    if chosen is None:
        return None, False
    picked = [n for n, c in enumerate(cand) if (c[0], c[1], c[2]) in chosen]
    if len(picked) != len(chosen):
        return None, False
    values = [0.0] * pm.model.num_vars
    for n in picked:
        values[pm.x[n]] = 1.0
    values[pm.period] = max((cand[n][3] * pm.scale for n in picked), default=0.0)
    return values, True


def bound_period(pm: PathMILP, run: BackendRun) -> float:
    """The backend's bound as a period (time units): the smallest candidate value whose scaled value is
    at least the bound less `BOUND_TOL` (module docstring); the smallest value without a bound."""
    if run.bound is None:
        return pm.values[0]
    k = bisect.bisect_left([v * pm.scale for v in pm.values], run.bound - BOUND_TOL)
    return pm.values[min(k, len(pm.values) - 1)]


def chosen_stages(pm: PathMILP, cand: list[Candidate], run: BackendRun) -> list[Candidate]:
    """The candidates the backend set (value > 0.5), ordered from the first stage (largest position)."""
    assert run.values is not None
    return sorted((c for n, c in enumerate(cand) if run.values[pm.x[n]] > 0.5), key=lambda c: -c[2])


def is_path(chosen: list[Candidate], source: int, sink: int, T: int, step: int) -> bool:
    """True when `chosen` (first stage first) is a path from `source` to `sink` at positions
    len(chosen), ..., 1 (at most `T`), each stage starting at the previous one's end plus `step`
    (1 for layers, 0 for ideals): a backend's answer within its tolerance may not be one."""
    S = len(chosen)
    if not 1 <= S <= T or chosen[0][0] != source or chosen[-1][1] != sink:
        return False
    return all(c[2] == S - k for k, c in enumerate(chosen)) and all(a[1] + step == b[0]
                                                                    for a, b in zip(chosen, chosen[1:]))


def check_options(_inst: Any, *, backend: str | None = None, **_: Any) -> None:
    """The ``backend`` option: None (SCIP) or one of `BACKENDS`, in any case; else `InputError` naming it."""
    check_backend_name(backend, BACKENDS)


def _solve(pm: PathMILP, cand: list[Candidate], chosen: set[tuple[int, int, int]] | None, backend: str,
           options: ExactOptions, deadline: Deadline) -> BackendRun:
    """Run `pm` on `backend` with the seed's stages `chosen` as the MIP start (``warm_start``)."""
    hint, ok = start_values(pm, cand, chosen if options.warm_start else None)
    return run_milp(pm.model, backend, deadline, options, hint=hint, hint_feasible=ok)


def _answer(solver: str, part: Partition, pm: PathMILP, run: BackendRun, budget: int | None, elapsed: float,
            scope: str, details: dict[str, Any]) -> SolveResult:
    """The result of a backend's partition `part` (evaluated): ``optimal`` when the bound reaches its period."""
    assert part.period is not None  # set by Partition.evaluated
    lower = min(bound_period(pm, run), part.period)
    status = OPTIMAL if lower >= part.period * (1 - REL_TOL) else FEASIBLE
    return SolveResult(problem="pipeline", solver=solver, status=status, objective=part.period,
                       peak_memory=part.peak_memory, lower_bound=lower, solve_time_s=elapsed, budget=budget,
                       schedule=part, scope=scope, details=details)


def _no_answer(solver: str, run: BackendRun, budget: int | None, elapsed: float, scope: str, backend: str,
               why: str = "") -> SolveResult:
    """``timeout``: the backend returned no usable partition (the exact layer then returns the seed's)."""
    return SolveResult(problem="pipeline", solver=solver, status=TIMEOUT, budget=budget, solve_time_s=elapsed,
                       scope=scope, message=f"MILP ({backend}): {run.backend_status}{why}",
                       details={"backend": backend, "backend_status": run.backend_status})


@refuses("the pipeline's milp", "memory_gb", why=MILP_MEMORY)
@check_first(check_options)
@straight_only
@exact_solver("pipeline", "milp", FAST)
def solve_milp(inst: Pipeline, budget: int, *, options: ExactOptions, deadline: Deadline,
               seed: SolveResult | None = None, devices: int | None = None, schedule: str = "1f1b",
               micro_batches: int | None = None, backend: str | None = None, **_: Any) -> SolveResult:
    """Solve the contiguous path model (module docstring) with the MILP `backend` (``scip`` by default,
    ``highs``, ``cbc``; ``options.workers`` threads where the backend takes them). Status, period
    (time units) and bound as the module docstring says; scope that of `cpsat`."""
    start = time.perf_counter()
    backend = (backend or DEFAULT_BACKEND).lower()
    L = inst.length
    P, schedule, m, T, scope, cand, reachable = contiguous_setup(inst, budget, devices, schedule, micro_batches,
                                                                 deadline)
    if not reachable:
        return _infeasible(inst, budget, P, schedule, m, start, scope, solver="milp")
    # nodes are layers: a stage ending at layer l - 1 is followed by one starting at l
    pm = stage_flow_linear(cand, T, 0, L - 1, [(l - 1, l) for l in range(1, L)], deadline)
    run = _solve(pm, cand, seed_positions(seed), backend, options, deadline)
    elapsed = time.perf_counter() - start
    if run.status == INFEASIBLE:
        return _infeasible(inst, budget, P, schedule, m, start, scope, solver="milp")
    if run.values is None:
        return _no_answer("milp", run, budget, elapsed, scope, backend)
    chosen = chosen_stages(pm, cand, run)
    if not is_path(chosen, 0, L - 1, T, 1):
        return _no_answer("milp", run, budget, elapsed, scope, backend, "; its answer is not a partition")
    part = Partition.from_bounds([(i, j) for i, j, _, _ in chosen], schedule=schedule, micro_batches=m,
                                 devices=P).evaluated(inst)
    details = {"backend": backend, "backend_status": run.backend_status, "variables": len(cand),
               "distinct_values": len(pm.values), "time_scale": pm.scale}
    return _answer("milp", part, pm, run, budget, elapsed, scope, details)


@refuses("dag-milp", "memory_gb", why=MILP_MEMORY)
@check_first(check_options)
@straight_only
@exact_solver("pipeline", "dag-milp", DAG_FAST)
def solve_dag_milp(inst: Pipeline, budget: int, *, options: ExactOptions, deadline: Deadline,
                   seed: SolveResult | None = None, devices: int | None = None, schedule: str = "1f1b",
                   micro_batches: int | None = None, max_states: int | None = None, backend: str | None = None,
                   **_: Any) -> SolveResult:
    """Solve the DAG path model (module docstring; nodes are the ideals of `lattice_for(inst,
    max_states)`, as `dag-cpsat`'s) with the MILP `backend`. Status, period and bound as `solve_milp`;
    scope and ``infeasible`` (with ``min_budget`` on the lattice) as `dag-cpsat`."""
    start = time.perf_counter()
    backend = (backend or DEFAULT_BACKEND).lower()
    P, schedule, m, lat, scope, empty, full, T, cand, reachable, inner = dag_setup(
        inst, budget, devices, schedule, micro_batches, max_states, deadline)

    def infeasible() -> SolveResult:
        return _dag_infeasible(inst, lat, budget, P, schedule, m, start, scope, deadline, max_states=max_states,
                               solver="dag-milp")

    if not reachable:
        return infeasible()
    pm = stage_flow_linear(cand, T, empty, full, [(K, K) for K in inner], deadline, closed=inner)
    run = _solve(pm, cand, seed_ideals(lat, seed), backend, options, deadline)
    elapsed = time.perf_counter() - start
    if run.status == INFEASIBLE:
        return infeasible()
    if run.values is None:
        return _no_answer("dag-milp", run, budget, elapsed, scope, backend)
    chosen = chosen_stages(pm, cand, run)
    if not is_path(chosen, empty, full, T, 0):
        return _no_answer("dag-milp", run, budget, elapsed, scope, backend, "; its answer is not a partition")
    part = to_partition(inst, lat, [(i, j, 1) for i, j, _, _ in chosen], P, schedule, m)
    details = {"backend": backend, "backend_status": run.backend_status, "variables": len(cand), "ideals": lat.n,
               "distinct_values": len(pm.values), "time_scale": pm.scale}
    return _answer("dag-milp", part, pm, run, budget, elapsed, scope, details)


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "PathMILP", "solve_dag_milp", "solve_milp", "stage_flow_linear"]
