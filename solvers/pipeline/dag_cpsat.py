"""Exact CP-SAT model of memory-limited DAG partitioning (straight pipelines, stage boundaries
at antichains of the layer DAG).

The states are the ideals of the DAG (`solvers.pipeline.lattice`). One Boolean ``x[I, J, t]``
per candidate stage ``J \\ I`` at position t from the end of the pipeline (t = 1: the last
stage; a stage at position t keeps t micro-batches in flight under 1F1B, m under GPipe) whose
memory M (simulator's model, see `dag_dp`) fits the budget:

    sum_{J, t} x[{}, J, t] = 1                           (the first stage starts from nothing)
    sum_{I} x[I, V, 1] = 1, and x[I, J, 1] = 0 unless J = V, x[I, V, t] = 0 for t > 1
    sum_{I} x[I, K, t + 1] = sum_{J} x[K, J, t]   for every ideal K != {}, V and 1 <= t < P

so the chosen stages form a chain of ideals on at most P devices. The period is the largest
value max(tau, c) of a chosen stage; values are floats, so the objective is the rank ``k`` of
the period among the distinct candidate values (``k >= rank * x``, plus the valid cut
``k >= sum rank * x`` per position), minimised; the bound reported is the value of CP-SAT's
best bound rank. With ``warm_start`` the fast solvers' best DAG partition is the hint. Size:
(pairs of nested ideals) x P Booleans: meant for small DAGs and as a referee of the DP.
The time limit covers the lattice (checked while it is built, `lattice.tick`) and the candidate
stages: past it the exact layer answers ``timeout``, or the seed's schedule as ``feasible``.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from ..exact.cpsat_runner import run_cpsat
from ..exact.layer import exact_solver
from ..exact.options import CPSAT_MEMORY, Deadline, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .cpsat import Candidate, bound_value, stage_flow_model, straight_only, tick
from .dag_dp import _scope, infeasible_on_lattice, lattice_for, stage_tables, to_partition
from .dp import _defaults
from .instance import Pipeline

#: the fast solvers that seed and referee the model
FAST = ("dag", "dag-pipedream")


@refuses("dag-cpsat", "memory_gb", why=CPSAT_MEMORY)
@straight_only
@exact_solver("pipeline", "dag-cpsat", FAST)
def solve_dag_cpsat(inst: Pipeline, budget: int, *, options: ExactOptions, deadline: Deadline,
                    seed: SolveResult | None = None, devices: int | None = None, schedule: str = "1f1b",
                    micro_batches: int | None = None, max_states: int | None = None, probing: int = 0,
                    **_: Any) -> SolveResult:
    """Solve the model of the module docstring with CP-SAT (``options.workers`` threads) at CP-SAT's
    probing level `probing` (``cp_model_probing_level``): 0 by default, as in `cpsat.solve_cpsat`.
    At level 2, CP-SAT's default, its presolve merges cliques of the model's (pairs of nested ideals)
    x P Booleans without looking at the time limit: on `parallel_branches(3, 6)` (345 ideals, 4
    devices, 66,020 Booleans) that step alone ran 4.6 s past a 3.1 s limit, so a 5 s `--time-limit`
    ended after 9-10 s; at level 0 it ends at 5.2 s."""
    start = time.perf_counter()
    P, schedule, m, lat, scope, empty, full, T, cand, reachable, inner = dag_setup(
        inst, budget, devices, schedule, micro_batches, max_states, deadline)
    if not reachable:
        return _infeasible(inst, lat, budget, P, schedule, m, start, scope, deadline, max_states=max_states)
    model, x, obj, values, rank, starts = stage_flow_model(cand, T, empty, full, [(K, K) for K in inner], deadline)
    for n, K in enumerate(inner):
        tick(deadline, n)
        if starts.get((K, T)):  # a stage at position T starting from K needs a predecessor at T + 1
            model.add(sum(starts[(K, T)]) == 0)
    model.minimize(obj)
    hinted = False
    if options.warm_start and seed is not None and seed.schedule is not None:
        hinted = _hint(model, x, obj, cand, rank, lat, seed, deadline)
    run = run_cpsat(model, deadline, options, hint_feasible=hinted, extra={"cp_model_probing_level": int(probing)})
    elapsed = time.perf_counter() - start
    if run.status == INFEASIBLE:
        return _infeasible(inst, lat, budget, P, schedule, m, start, scope, deadline, max_states=max_states)
    if run.status not in (OPTIMAL, FEASIBLE):
        return SolveResult(problem="pipeline", solver="dag-cpsat", status=TIMEOUT, budget=budget,
                           solve_time_s=elapsed, scope=scope, message=f"CP-SAT: {run.backend_status}")
    solver = run.solver
    chosen = sorted((c for var, c in zip(x, cand) if solver.value(var)), key=lambda c: -c[2])
    part = to_partition(inst, lat, [(i, j, 1) for i, j, _, _ in chosen], P, schedule, m)
    assert part.period is not None
    return SolveResult(problem="pipeline", solver="dag-cpsat", status=run.status, objective=part.period,
                       peak_memory=part.peak_memory, lower_bound=min(bound_value(values, run.bound), part.period),
                       solve_time_s=elapsed, budget=budget, schedule=part, scope=scope,
                       details={"variables": len(cand), "ideals": lat.n, "distinct_values": len(values)})


def lattice_ends(lat: Any, V: int) -> tuple[int, int]:
    """The indices in `lat` of the empty ideal and of the whole DAG (`V` layers)."""
    return int(np.flatnonzero(lat.size == 0)[0]), int(np.flatnonzero(lat.size == V)[0])


def dag_candidates(inst: Pipeline, lat: Any, budget: int | None, T: int, schedule: str, m: int | None,
                   deadline: Deadline | None = None) -> list[Candidate]:
    """The candidate stages of the DAG path model, shared by `dag-cpsat` and `dag-milp`: (I, J, t,
    value) for the stage J minus I (ideals of `lat`, by index) at position t <= `T` from the end,
    the last stage (t = 1) ending at the whole DAG and no other, whose memory (bytes, t micro-batches
    in flight under 1F1B, m under GPipe) fits `budget` (None: no limit); value = max(tau, c) in the
    instance's time unit. Checks `deadline` as it goes (every `cpsat.CHECK_EVERY` candidates looked at)."""
    _, full = lattice_ends(lat, inst.length)
    cand: list[Candidate] = []
    steps = 0  # candidate stages looked at: the deadline is checked every `cpsat.CHECK_EVERY` of them
    for i in range(lat.n):
        if i == full:
            continue
        if deadline is not None:
            deadline.check()
        tab = stage_tables(inst, lat, i)
        value = np.maximum(tab["fb"], tab["link"])
        for t in range(1, T + 1):
            n = t if schedule == "1f1b" else int(m or 0)
            mem = tab["wmem"] + n * tab["stash"] + tab["buffers"]
            for k, j in enumerate(tab["J"]):
                steps += 1
                tick(deadline, steps)
                if bool(tab["full"][k]) != (t == 1):
                    continue
                if budget is not None and mem[k] > budget:
                    continue
                cand.append((i, int(j), t, float(value[k])))
    return cand


class DagSetup(NamedTuple):
    """What the exact models of DAG partitioning (`dag-cpsat`, `dag-milp`) start from: the devices `P`, the
    schedule and its micro-batches `m`, the ideal lattice `lat` (`dag_dp.lattice_for`) and its `scope`, the
    indices of its `empty` ideal and of the `full` DAG, the positions `T` = min(P, V), the candidate stages
    `cand` (`dag_candidates`), whether a path can exist (`open`) and the `inner` ideals (neither end)."""

    P: int
    schedule: str
    m: int | None
    lat: Any
    scope: str
    empty: int
    full: int
    T: int
    cand: list[Candidate]
    open: bool
    inner: list[int]


def dag_setup(inst: Pipeline, budget: int | None, devices: int | None, schedule: str, micro_batches: int | None,
              max_states: int | None, deadline: Deadline | None) -> DagSetup:
    """The `DagSetup` of `inst` at `budget` bytes per device (None: no limit), on the lattice of at most
    `max_states` ideals."""
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    lat = lattice_for(inst, max_states, deadline)
    V = inst.length
    empty, full = lattice_ends(lat, V)
    T = min(P, V)
    cand = dag_candidates(inst, lat, budget, T, schedule, m, deadline)
    reachable = any(c[0] == empty for c in cand) and any(c[2] == 1 for c in cand)
    inner = [K for K in range(lat.n) if K not in (empty, full)]
    return DagSetup(P, schedule, m, lat, _scope(lat, P, schedule, m, False), empty, full, T, cand, reachable, inner)


def seed_ideals(lat: Any, seed: SolveResult | None) -> set[tuple[int, int, int]] | None:
    """The seed's DAG partition as (I, J, position from the end) over `lat`'s ideal indices, or None
    when there is none, it replicates a stage, or one of its boundaries is not an ideal of `lat`."""
    if seed is None or seed.schedule is None or any(s.replicas != 1 for s in seed.schedule.stages):
        return None
    index = {mask: k for k, mask in enumerate(lat.masks)}
    layers = seed.schedule.stage_layers()
    S, mask, chosen = len(layers), 0, set()
    for k, ls in enumerate(layers):
        new = mask | sum(1 << v for v in ls)
        if mask not in index or new not in index:
            return None
        chosen.add((index[mask], index[new], S - k))
        mask = new
    return chosen


def _hint(model: Any, x: list[Any], obj: Any, cand: list[tuple[int, int, int, float]], rank: dict[float, int],
          lat: Any, seed: SolveResult, deadline: Deadline | None = None) -> bool:
    """Hint the seed's DAG partition when its stages are ideals of `lat`; True when hinted (checks
    `deadline` as it goes)."""
    chosen = seed_ideals(lat, seed)
    if chosen is None:
        return False
    keys = {(c[0], c[1], c[2]) for c in cand}
    if not chosen <= keys:
        return False
    for n, (var, c) in enumerate(zip(x, cand)):
        tick(deadline, n)
        model.add_hint(var, (c[0], c[1], c[2]) in chosen)
    model.add_hint(obj, max(rank[c[3]] for c in cand if (c[0], c[1], c[2]) in chosen))
    return True


def _infeasible(inst: Pipeline, lat: Any, budget: int | None, P: int, schedule: str, m: int | None,
                start: float, scope: str, deadline: Deadline | None = None, *,
                max_states: int | None = None, solver: str = "dag-cpsat") -> SolveResult:
    """``infeasible`` (proven by the caller on `lat`), worded and completed as `dag`'s
    (`dag_dp.infeasible_on_lattice`); `start` is the solve's `time.perf_counter` start."""
    return infeasible_on_lattice(solver, inst, lat, budget, P, schedule, m, False, max_states, deadline,
                                 scope=scope, elapsed=lambda: time.perf_counter() - start)


__all__ = ["FAST", "dag_candidates", "lattice_ends", "seed_ideals", "solve_dag_cpsat"]
