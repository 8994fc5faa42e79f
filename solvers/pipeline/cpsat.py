"""Exact CP-SAT model of contiguous, memory-limited pipeline partitioning (straight pipelines).

Stages are indexed by their distance from the end of the pipeline: a stage at position t
(t = 1 is the last stage) holds t micro-batches in flight under 1F1B (m under GPipe), so its
memory is known once its layers and t are. One Boolean ``v[i, j, t]`` per candidate stage
(layers i..j at position t) whose memory fits the budget; the chosen stages form a path

    sum_{j, t} v[0, j, t] = 1                                   (the first stage starts at 0)
    sum_{i, t} v[i, L-1, t] = 1 and v[i, j, t] = 0 for t = 1 unless j = L-1
    sum_i v[i, l-1, t+1] = sum_j v[l, j, t]   for 1 <= l < L, 1 <= t < P   (stages are adjacent)

so at most P devices are used. The period is the largest value of a chosen stage, where the
value of (i, j) is max(stage time, link time) of `solvers.pipeline.simulator`. Float values
are exact: the objective is the rank ``k`` of the period among the distinct candidate values
(``k >= rank(i, j) * v[i, j, t]``), minimised. The proven bound is reported as the value of
CP-SAT's best bound rank. The model does not use the DP, but by default (``hint=True``) the
exact layer's seed (the best fast solver's partition, usually the memory-aware DP's) is given
to CP-SAT as a starting solution: it speeds up the search
and does not change what is proven (the optimality proof is CP-SAT's own bound). The tests run
it with ``hint=False``.

Size: about L^2 P / 2 Booleans (32 000 for 100 layers on 8 devices); the valid cuts
``k >= sum_{(i,j): position t} rank(i, j) v[i, j, t]`` (one stage at most per position)
strengthen the LP relaxation.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..exact.cpsat_runner import run_cpsat
from ..exact.layer import exact_solver
from ..exact.options import CPSAT_MEMORY, Deadline, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .dp import _defaults, _prefix, min_budget, stage_arrays
from .instance import Pipeline
from .schedule import Partition

Candidate = tuple[int, int, int, float]  # (start node i, end node j, position t, value)


def straight_only(solver: Callable[..., SolveResult]) -> Callable[..., SolveResult]:
    """Wrap an exact solver of unreplicated partitions (`exact_solver` already applied) so that a
    ``replication`` keyword never reaches its warm start: the exact layer hands the solver's
    keywords to the fast solvers that seed it, and a replicated seed (madpipe's) would be returned
    as the answer, outside the solver's scope. The seeds run straight, as the model does. The
    command line refuses ``--replication`` for such solvers (docs/pipeline.md)."""

    @functools.wraps(solver)  # keeps the exact layer's attributes and the model's signature
    def run(instance: Any, budget: Any, **kw: Any) -> SolveResult:
        kw.pop("replication", None)
        return solver(instance, budget, **kw)

    return run


#: model-building loops check the deadline once every this many steps (`tick`)
CHECK_EVERY = 1024


def tick(deadline: Deadline | None, step: int) -> None:
    """``deadline.check()`` at every `CHECK_EVERY`-th `step` (step 0 included), nothing without a
    deadline: a model build stops at the time limit by raising `DeadlineExceeded`, which the exact
    layer answers with status ``timeout`` and the seed's schedule (returned as ``feasible``)."""
    if deadline is not None and step % CHECK_EVERY == 0:
        deadline.check()


def stage_flow_model(cand: list[Candidate], T: int, source: int, sink: int, links: list[tuple[int, int]],
                     deadline: Deadline | None = None
                     ) -> tuple[Any, list[Any], Any, list[float], dict[float, int], dict[tuple[int, int], list[Any]]]:
    """The path model shared by the contiguous and the DAG CP-SAT models: one Boolean per candidate
    stage (i, j, t, value); exactly one chosen stage starts at `source`, exactly one ends at `sink`
    at position t = 1; for each (e, s) of `links` and 1 <= t < T, the stages ending at e at
    position t + 1 are as many as those starting at s at position t. The objective variable is the
    rank k of the period among the distinct values, k >= rank(value) * v, with the valid cut
    k >= sum over one position t of rank(value) * v. Returns (model, Booleans, k, the distinct
    values in increasing order, value -> rank, (i, t) -> the Booleans starting there). The build
    checks `deadline` as it goes (`DeadlineExceeded` when it is spent)."""
    from ortools.sat.python import cp_model

    values = sorted({c[3] for c in cand})
    rank = {val: k for k, val in enumerate(values)}
    model = cp_model.CpModel()
    x = []
    for n, (i, j, t, _) in enumerate(cand):
        tick(deadline, n)
        x.append(model.new_bool_var(f"v_{i}_{j}_{t}"))
    obj = model.new_int_var(0, len(values) - 1, "period_rank")
    starts: dict[tuple[int, int], list[Any]] = {}
    ends: dict[tuple[int, int], list[Any]] = {}
    levels: dict[int, list[tuple[Any, int]]] = {}  # position t -> (Boolean, rank) of its candidates of rank > 0
    for n, (var, (i, j, t, val)) in enumerate(zip(x, cand)):
        tick(deadline, n)
        starts.setdefault((i, t), []).append(var)
        ends.setdefault((j, t), []).append(var)
        if rank[val] > 0:
            model.add(obj >= rank[val] * var)
            levels.setdefault(t, []).append((var, rank[val]))
    # one stage at most per position t: the period is at least the value of the stage chosen there
    # (a valid cut that makes the LP relaxation much stronger than the per-stage constraints alone)
    for t in range(1, T + 1):
        if deadline is not None:
            deadline.check()
        level = levels.get(t, [])
        if level:
            model.add(obj >= cp_model.LinearExpr.weighted_sum([var for var, _ in level], [r for _, r in level]))
    model.add_exactly_one([var for var, c in zip(x, cand) if c[0] == source])
    model.add_exactly_one(ends.get((sink, 1), []))
    for n, (e, st) in enumerate(links):
        tick(deadline, n)
        for t in range(1, T):
            into, out = ends.get((e, t + 1), []), starts.get((st, t), [])
            if into or out:
                model.add(sum(into) == sum(out))
    return model, x, obj, values, rank, starts


def bound_value(values: list[float], bound: float | None) -> float:
    """The period (time units) of CP-SAT's best bound on the rank objective: the distinct value
    of rank ceil(bound), clamped to the ranks that exist."""
    return values[min(len(values) - 1, max(0, int(math.ceil((bound or 0.0) - 1e-9))))]


def contiguous_scope(P: int, schedule: str, m: int | None) -> str:
    """The scope of the exact models of contiguous partitioning (`cpsat`, `milp`) on `P` devices."""
    return f"contiguous stages on <= {P} devices, straight pipeline, " + (
        f"GPipe m={m}" if schedule == "gpipe" else "1F1B")


def contiguous_candidates(inst: Pipeline, budget: int | None, P: int, schedule: str, m: int | None,
                          deadline: Deadline | None = None) -> list[Candidate]:
    """The candidate stages of the contiguous path model, shared by `cpsat` and `milp`: (i, j, t,
    value) for layers i..j at position t (1 = the last stage, t <= min(P, L)) whose memory (bytes,
    t micro-batches in flight under 1F1B, m under GPipe) fits `budget` (None: no limit), where a
    stage at t = 1 ends at L - 1 and one at t > 1 leaves at least t - 1 layers after it; value is
    max(stage time, link time) in the instance's time unit. Checks `deadline` once per start layer."""
    L = inst.length
    T = min(P, L)
    pre = _prefix(inst)
    cand: list[Candidate] = []
    for i in range(L):
        if deadline is not None:
            deadline.check()
        arr = stage_arrays(inst, pre, i)
        link = inst.comm_time(2.0 * inst.input_of(i), 2 * inst.messages_into(i)) if i > 0 else 0.0
        value = np.maximum(arr["fb"], link)
        for t in range(1, T + 1):
            if i + t > L:  # t stages need at least t layers
                break
            n = t if schedule == "1f1b" else int(m or 0)  # gpipe: m micro-batches in flight
            mem = arr["wmem"] + n * arr["stash"] + arr["buffers"]
            for k in range(len(value)):
                j = i + k
                if (t == 1) != (j == L - 1):
                    continue
                if j + t - 1 > L - 1:  # the t - 1 later stages need layers
                    break
                if budget is not None and mem[k] > budget:
                    continue
                cand.append((i, j, t, float(value[k])))
    return cand


class ContiguousSetup(NamedTuple):
    """What the exact models of contiguous partitioning (`cpsat`, `milp`) start from: the devices `P`, the
    schedule and its micro-batches `m` (`dp._defaults`), the positions `T` = min(P, L), the `scope`, the
    candidate stages `cand` (`contiguous_candidates`) and whether a path can exist (`open`: a candidate
    starts at layer 0 and one is a last stage; else the answer is ``infeasible`` without a model)."""

    P: int
    schedule: str
    m: int | None
    T: int
    scope: str
    cand: list[Candidate]
    open: bool


def contiguous_setup(inst: Pipeline, budget: int | None, devices: int | None, schedule: str,
                     micro_batches: int | None, deadline: Deadline | None) -> ContiguousSetup:
    """The `ContiguousSetup` of `inst` at `budget` bytes per device (None: no limit)."""
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    cand = contiguous_candidates(inst, budget, P, schedule, m, deadline)
    reachable = any(c[0] == 0 for c in cand) and any(c[2] == 1 for c in cand)
    return ContiguousSetup(P, schedule, m, min(P, inst.length), contiguous_scope(P, schedule, m), cand, reachable)


def seed_positions(seed: SolveResult | None) -> set[tuple[int, int, int]] | None:
    """The seed's stages as (first, last, position from the end) of the contiguous path model, or None
    when there is no seed partition or it replicates a stage (outside the model)."""
    if seed is None or seed.schedule is None:
        return None
    stages = seed.schedule.stages
    if any(st.replicas != 1 for st in stages):
        return None
    S = len(stages)
    return {(st.first, st.last, S - k) for k, st in enumerate(stages)}


#: the pipeline problem's fast solvers: they seed and referee the exact model
FAST = ("madpipe", "pipedream", "balance-time")


@refuses("the pipeline's cpsat", "memory_gb", why=CPSAT_MEMORY)
@straight_only
@exact_solver("pipeline", "cpsat", FAST)
def solve_cpsat(inst: Pipeline, budget: int, *, options: ExactOptions, deadline: Deadline,
                seed: SolveResult | None = None, devices: int | None = None, schedule: str = "1f1b",
                micro_batches: int | None = None, hint: bool = True, probing: int = 0, **_: Any) -> SolveResult:
    """Solve the model of the module docstring with OR-Tools CP-SAT (``options.workers`` threads;
    CP-SAT's probing level `probing`: 0 by default, as probing spends seconds on the ~L^2 P
    Booleans). With `hint` (and ``warm_start``) the seed's partition (the best fast solver's:
    madpipe's, usually) is the hint."""
    start = time.perf_counter()
    L = inst.length
    P, schedule, m, T, scope, cand, reachable = contiguous_setup(inst, budget, devices, schedule, micro_batches,
                                                                 deadline)
    if not reachable:
        return _infeasible(inst, budget, P, schedule, m, start, scope)
    model, v, obj, values, rank, _starts = stage_flow_model(cand, T, 0, L - 1, [(l - 1, l) for l in range(1, L)],
                                                            deadline)
    model.minimize(obj)
    if hint and options.warm_start and seed is not None:
        dp_chosen = seed_positions(seed)
        if dp_chosen is not None:
            for n, (var, (i, j, t, _period)) in enumerate(zip(v, cand)):
                tick(deadline, n)
                model.add_hint(var, (i, j, t) in dp_chosen)
            worst = max((rank[c[3]] for c in cand if (c[0], c[1], c[2]) in dp_chosen), default=0)
            model.add_hint(obj, worst)
    run = run_cpsat(model, deadline, options, extra={"cp_model_probing_level": int(probing)})
    elapsed = time.perf_counter() - start
    if run.status == INFEASIBLE:
        return _infeasible(inst, budget, P, schedule, m, start, scope)
    if run.status not in (OPTIMAL, FEASIBLE):
        return SolveResult(problem="pipeline", solver="cpsat", status=TIMEOUT, budget=budget, solve_time_s=elapsed,
                           scope=scope, message=f"CP-SAT: {run.backend_status}")
    solver = run.solver
    chosen = sorted((c for var, c in zip(v, cand) if solver.value(var)), key=lambda c: c[0])
    part = Partition.from_bounds([(i, j) for i, j, _, _ in chosen], schedule=schedule, micro_batches=m,
                                 devices=P).evaluated(inst)
    lower = bound_value(values, run.bound)
    assert part.period is not None  # set by Partition.evaluated
    return SolveResult(problem="pipeline", solver="cpsat", status=run.status,
                       objective=part.period, peak_memory=part.peak_memory, lower_bound=min(lower, part.period),
                       solve_time_s=elapsed, budget=budget, schedule=part, scope=scope,
                       details={"variables": len(cand), "distinct_values": len(values)})


def _infeasible(inst: Pipeline, budget: int | None, P: int, schedule: str, m: int | None, start: float,
                scope: str, solver: str = "cpsat") -> SolveResult:
    """``infeasible`` for the contiguous model of `solver` (proven by the caller), with the smallest
    memory of a contiguous straight partition (`dp.min_budget`); `start` is the `time.perf_counter` start."""
    need = min_budget(inst, P, schedule=schedule, micro_batches=m)
    return SolveResult(problem="pipeline", solver=solver, status=INFEASIBLE, budget=budget, min_budget=need,
                       solve_time_s=time.perf_counter() - start, scope=scope,
                       message=f"no contiguous partition fits {budget} bytes per device")
