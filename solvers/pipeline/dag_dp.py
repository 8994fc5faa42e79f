"""Dynamic program for DAG partitioning: stage boundaries at antichains (PipeDream's split
points), with the memory model of `solvers.pipeline.simulator`.

The states are the ideals of the layer DAG (`solvers.pipeline.lattice`); a stage is the
difference ``J \\ I`` of two nested ideals. Over the ideals I, from the whole network down,

    G(I, d) = min_{J > I, r}  max( tau(I, J, r), c(I, r), G(J, d - r) )
              subject to  M(I, J, r, n) <= budget,  n = ceil(d / r) (1F1B) or ceil(m / r) (GPipe)
    G(V, 0) = 0, and the answer is min_{d <= P} G({}, d),

where, with the stage's sums F + B (time unit), W (params, bytes):

- tau(I, J, r) = (F + B + AR) / r, AR = 4 (r - 1) W / (r * bandwidth): PipeDream's replication;
- c(I, r) = (2 cut(I) / bandwidth + 2 k(I) latency) / r: the boundary before the stage carries
  cut(I) bytes in k(I) tensors (several when it lies inside a block), both ways;
- M = ceil(weight_factor W) + n A + Q with A = cut(I) + (act of the stage's layers consumed
  inside the stage) + (input_size if the stage holds the layer that reads the input, layer 0:
  the input of the network crosses no boundary, whatever stage comes first) and
  Q = cut(I) + cut(J) (if J is not V); cut({}) = 0.

These are exactly the simulator's charges of the partition returned (a contiguous partition
of the topological order "stage by stage, layers by index inside a stage"), so the DP is
optimal among DAG partitions whose boundaries are ideals of the lattice used (all of them
unless the lattice was coarsened, see `lattice.coarsest_needed`; the scope says which). A
coarsened lattice keeps every prefix of the index order, so the contiguous partitions of that
order (`dp.partition_dp`'s) are in every scope: `dag` is never worse than `madpipe`, and
its ``min_budget`` never above `madpipe`'s, on any lattice.
Each (I, r) is one numpy step over all J > I and all d: O(N^2 min(P, V)) for N ideals (straight:
a stage takes one device and at least one of the V layers, so the device dimension stops at
`dp.useful_devices`, as in the contiguous DP), O(N^2 P^2) with replication. The contiguous DP of
`dp.py` is the special case of a chain.

A wall-clock `Deadline` (``time_limit`` of `solve_dag`, the exact layer's for `dag-cpsat`) is
checked while the contiguous DP that seeds it runs, while the lattice is built and once per
numpy step of the DP; past it `solve_dag` answers the contiguous DP's partition of the index
order as ``feasible`` (a DAG partition, not proven optimal among them; the straight DP's, which
always ends (O(L^2 min(P, L))), when the replicated one did not), ``timeout`` when that finds
nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import option_field
from ..exact.options import Deadline, DeadlineExceeded
from ..result import INFEASIBLE, OPTIMAL, SolveResult
from .dp import _defaults, partition_dp, stopped_answer, useful_devices
from .instance import Pipeline
from .interleave_dp import _seconds
from .lattice import Lattice, coarsest_needed, tick
from .schedule import Partition

INF = math.inf
#: default cap on the number of ideals before the lattice is coarsened
MAX_STATES = 5000
#: the granularity (`Lattice.granularity`) of the full lattice, every ideal: any other is coarsened
FULL_LATTICE = "all antichain splits"


def stage_tables(inst: Pipeline, lat: Lattice, i: int, max_work: float = INF) -> dict[str, Any]:
    """For the stages J \\ I, J a strict superset of ideal I = `i` with F + B <= `max_work`:
    their ideals ``J`` and arrays fb (F + B), W, wmem, stash A, buffers Q, the link time c
    (r = 1) and ``full`` (J is the whole network). Bytes (wmem, stash, buffers) are float64, as
    in `dp.stage_arrays`: ``wmem + n * stash + buffers`` never overflows, and is exact up to
    2^53 bytes, above every budget."""
    J = lat.supersets(i)
    V = inst.length
    fb = lat.work[J] - lat.work[i]
    if max_work < INF:
        keep = fb <= max_work
        J, fb = J[keep], fb[keep]
    W = lat.params[J] - lat.params[i]
    wmem = np.ceil(inst.weight_factor * W.astype(float) - 1e-9)
    empty = lat.size[i] == 0
    in_size = int(lat.cut[i])  # 0 for the empty ideal: the network's input is charged in `_input_kept`
    dead_i = lat.dead[i]
    act = inst.act.astype(np.int64)
    dead_act_J = lat.dead_act[J]
    rows = np.ix_(J, np.asarray(dead_i, dtype=np.int64))
    dead_in_i = (lat.dead_member[rows].astype(np.int64) @ act[dead_i]) if dead_i else 0
    internal = (lat.act[J] - lat.act[i]) - (dead_act_J - dead_in_i)
    stash = in_size + internal + _input_kept(inst, lat, np.asarray([i]), J)
    if inst.saved_by is not None:
        stash = _measured_stash(inst, lat, i, J)
    elif inst.saved_extra is not None:
        stash = stash + (lat.contains[:, J].T.astype(np.int64) @ inst.saved_extra) - int(
            inst.saved_extra[lat.contains[:, i]].sum())
    full = lat.size[J] == V
    out = np.where(full, 0, lat.cut[J])
    buffers = (in_size + out).astype(float)
    link = 0.0 if empty else inst.comm_time(2.0 * in_size, 2 * int(lat.messages[i]))
    return {"J": J, "fb": fb, "W": W, "wmem": wmem, "stash": np.asarray(stash, dtype=float), "buffers": buffers,
            "link": link,
            "full": full}


def _measured_stash(inst: Pipeline, lat: Lattice, i: int, J: np.ndarray) -> np.ndarray:
    """`Pipeline.stash` for the stages J \\ I (I = ideal `i`) of a measured profile: the output of
    each layer v counted once when a layer of ``saved_by[v]`` is in the stage (the pipeline's
    input when the stage holds ``input_layer``, `_input_kept`), plus ``saved_extra`` of the stage's layers."""
    V = inst.length
    member_i = lat.contains[:, i]
    stage = lat.contains[:, J].T & ~member_i[None, :]  # (|J|, V): the stage's layers
    keeps = np.zeros((V, V), dtype=np.int64)  # keeps[w, v]: layer w saves v's output
    assert inst.saved_by is not None
    for v, ws in enumerate(inst.saved_by):
        keeps[ws, v] = 1
    kept = (stage.astype(np.int64) @ keeps) > 0
    stash = kept.astype(np.int64) @ inst.act.astype(np.int64)
    if inst.saved_extra is not None:
        stash = stash + stage.astype(np.int64) @ inst.saved_extra
    return stash + _input_kept(inst, lat, np.asarray([i]), J)


def _input_kept(inst: Pipeline, lat: Lattice, I: np.ndarray, J: np.ndarray) -> np.ndarray:
    """Bytes of the network's input kept by the stages J \\ I (I, J: arrays of ideal indices,
    broadcast): ``input_size`` where the stage holds ``inst.input_layer`` (the one layer reading the
    input; kept unless a measured profile says it is not, ``input_saved``), else 0. The input
    crosses no boundary: it is stashed by that stage wherever the stage comes in the order."""
    if inst.saved_by is not None and not inst.input_saved:
        return np.zeros(np.broadcast(I, J).shape, dtype=np.int64)
    row = lat.contains[inst.input_layer]
    return np.where(row[J] & ~row[I], int(inst.input_size), 0).astype(np.int64)


class _LatticeArrays:
    """Per-ideal arrays shared by every stage J \\ I of `pair_tables` (N ideals, V layers):
    the maximal layers of each ideal padded with V (``deadpad``, (N, w)), ``contains`` with a
    padding row, ``dead_act[J, v]`` = act[v] when v is maximal in J (0 in the padding column),
    the stage input size in(I) = cut(I) (bytes; 0 for the empty ideal, the network's input
    being `_input_kept`), the link time c(I) for r = 1 (time unit) and the per-ideal sums of
    ``saved_extra`` (bytes)."""

    def __init__(self, inst: Pipeline, lat: Lattice) -> None:
        V, N = inst.length, lat.n
        width = max(1, max((len(d) for d in lat.dead), default=0))
        self.deadpad = np.full((N, width), V, dtype=np.int64)
        for k, d in enumerate(lat.dead):
            self.deadpad[k, : len(d)] = d
        self.contains = np.vstack([lat.contains, np.ones((1, N), dtype=bool)])
        act = np.append(inst.act.astype(np.int64), 0)
        self.dead_act = np.hstack([lat.dead_member, np.zeros((N, 1), dtype=bool)]) * act[None, :]
        self.empty = lat.size == 0
        self.in_size = np.where(self.empty, 0, lat.cut).astype(np.int64)
        self.link = np.array([0.0 if self.empty[k] else inst.comm_time(2.0 * int(self.in_size[k]),
                                                                        2 * int(lat.messages[k]))
                              for k in range(N)])
        extra = inst.saved_extra
        self.extra = lat.contains.T.astype(np.int64) @ extra if extra is not None else None


def pair_tables(inst: Pipeline, lat: Lattice, I: np.ndarray, J: np.ndarray,
                arrays: _LatticeArrays | None = None) -> dict[str, np.ndarray]:
    """`stage_tables` for many stages at once: the stages J[k] \\ I[k] (J[k] a strict superset
    of I[k]; pairs grouped by I), as arrays over the pairs: fb, W, wmem, stash, buffers (bytes,
    float64 as in `stage_tables`), link."""
    a = arrays if arrays is not None else _LatticeArrays(inst, lat)
    fb = lat.work[J] - lat.work[I]
    W = lat.params[J] - lat.params[I]
    wmem = np.ceil(inst.weight_factor * W.astype(float) - 1e-9)
    if inst.saved_by is not None:
        stash = np.empty(len(J), dtype=np.int64)
        for lo, hi in _segments(I):
            stash[lo:hi] = _measured_stash(inst, lat, int(I[lo]), J[lo:hi])
    else:
        base = J * a.dead_act.shape[1]
        dead_in_i = np.zeros(len(J), dtype=np.int64)  # act of the maximal layers of I still maximal in J
        for t in range(a.deadpad.shape[1]):
            dead_in_i += np.take(a.dead_act, base + a.deadpad[I, t])
        stash = a.in_size[I] + ((lat.act[J] - lat.act[I]) - (lat.dead_act[J] - dead_in_i))
        stash = stash + _input_kept(inst, lat, I, J)
        if a.extra is not None:
            stash = stash + a.extra[J] - a.extra[I]
    out = np.where(lat.size[J] == inst.length, 0, lat.cut[J])
    buffers = (a.in_size[I] + out).astype(float)
    return {"fb": fb, "W": W, "wmem": wmem, "stash": stash.astype(float), "buffers": buffers, "link": a.link[I]}


def _segments(keys: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) of the runs of equal consecutive values in `keys`."""
    cuts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    edges = [0, *cuts.tolist(), len(keys)]
    return list(zip(edges[:-1], edges[1:]))


#: pairs (I, J) handled per numpy step of `dag_partition_dp`
_CHUNK_PAIRS = 250_000


def dag_partition_dp(inst: Pipeline, lat: Lattice, devices: int, budget: int | None = None, *,
                     schedule: str = "1f1b", micro_batches: int | None = None, replication: bool = False,
                     objective: str = "period", upper: float | None = None, deadline: Deadline | None = None,
                     ) -> tuple[float, list[tuple[int, int, int]]] | None:
    """Solve the recurrence; returns (value, [(ideal I, ideal J, replicas)] per stage) or None
    when nothing fits `budget`. ``objective="memory"`` minimises the peak memory instead.
    `upper`: a period known to be reachable; stages that cannot be part of a partition of
    period <= upper (F + B above upper, times P with replication) are skipped, so the answer
    is exact whenever the optimum is <= upper (None otherwise).

    The ideals of one size do not contain one another, so they are solved together: one numpy
    step over all their pairs (I, J) and all d per replication r (ties: the smallest r, then
    the smallest index of J, wins). With `upper`, only the live states are solved: (I, d) is on
    a partition of period <= upper only if work(I) <= (P - d) upper and work(V \\ I) <= d upper
    (a stage on r devices holds at most r upper of work), usually one d per ideal.
    `deadline` is checked once per step (`DeadlineExceeded` when it is spent). The device
    dimension stops at `dp.useful_devices` (min(P, V) for straight pipelines: the same answer)."""
    m = int(micro_batches or 0)
    memory = objective == "memory"
    N = lat.n
    P = useful_devices(inst.length, int(devices), replication=replication, objective=objective, schedule=schedule,
                       micro_batches=m)  # no partition needs more devices (live: work(I) <= (P - d) upper still holds)
    G = np.full((N, P + 1), INF)
    full_idx = int(np.flatnonzero(lat.size == inst.length)[0])
    G[full_idx, 0] = 0.0
    next_j = np.full((N, P + 1), -1, dtype=np.int64)
    reps_of = np.zeros((N, P + 1), dtype=np.int64)
    limit = INF if budget is None or memory else float(budget)
    cap = INF if upper is None or memory else upper * (1 + 1e-9)
    max_work = INF if upper is None or memory else upper * (1 + 1e-9) * (P if replication else 1)
    ds = np.arange(1, P + 1)
    arrays = _LatticeArrays(inst, lat)
    unit_ar = inst.comm_time(1.0) * 4.0
    order = np.argsort(-lat.size, kind="stable")
    order = order[order != full_idx]
    live = np.ones((N, P + 1), dtype=bool)
    if cap < INF:
        total, d_col = float(lat.work[full_idx]), np.arange(P + 1)[None, :]
        tol = 1e-9 * (abs(total) + 1.0)
        work = lat.work[:, None]
        live = (work <= (P - d_col) * cap + tol) & (total - work <= d_col * cap + tol)
        G[~live] = INF
    live_any: np.ndarray = np.asarray(live.any(axis=1))
    rows_per_chunk = max(1, _CHUNK_PAIRS // max(N, 1))
    for lo, hi in _segments(lat.size[order]):
        level = order[lo:hi]
        level = level[live_any[level]]
        for c in range(0, len(level), rows_per_chunk):
            tick(deadline, 0)
            rows = level[c: c + rows_per_chunk]
            ok = lat.size[None, :] > lat.size[rows][:, None]
            if max_work < INF:
                ok &= (lat.work[None, :] - lat.work[rows][:, None]) <= max_work
            # J must have a state (J, e) of value <= cap with e < d for a live state (I, d)
            solved = G[:, :P] <= cap if cap < INF else G[:, :P] < INF
            if replication or cap == INF:
                e_min = np.where(solved.any(axis=1), solved.argmax(axis=1), P)
                d_max = P - np.argmax(live[rows][:, ::-1], axis=1)
                ok &= e_min[None, :] < d_max[:, None]
            else:
                reach = np.zeros_like(ok)
                for dv in np.flatnonzero(live[rows].any(axis=0)).tolist():
                    if dv > 0:
                        reach |= live[rows, dv][:, None] & solved[None, :, dv - 1]
                ok &= reach
            for t in range(arrays.deadpad.shape[1]):
                ok &= arrays.contains[arrays.deadpad[rows, t]]
            a, J = np.nonzero(ok)
            if len(J):
                _relax(G, next_j, reps_of, inst, lat, rows[a], J, arrays, P, ds, schedule, m, replication,
                       memory, limit, cap, unit_ar, live, deadline)
                G[rows] = np.where(live[rows], G[rows], INF)
    empty_idx = int(np.flatnonzero(lat.size == 0)[0])
    d_best = int(np.argmin(G[empty_idx, 1:])) + 1
    if not (math.isfinite(G[empty_idx, d_best]) and G[empty_idx, d_best] <= cap):
        return None
    stages: list[tuple[int, int, int]] = []
    i, d = empty_idx, d_best
    while i != full_idx:
        j, r = int(next_j[i, d]), int(reps_of[i, d])
        stages.append((i, j, r))
        i, d = j, d - r
    return float(G[empty_idx, d_best]), stages


def _relax(G: np.ndarray, next_j: np.ndarray, reps_of: np.ndarray, inst: Pipeline, lat: Lattice,
           I: np.ndarray, J: np.ndarray, arrays: _LatticeArrays, P: int, ds: np.ndarray, schedule: str,
           m: int, replication: bool, memory: bool, limit: float, cap: float, unit_ar: float,
           live: np.ndarray, deadline: Deadline | None = None) -> None:
    """G(I, d) for the ideals I of the pairs (I, J) (grouped by I, J ascending; every J already
    solved), `live` (N, P + 1): the states that can be on a partition of period <= `cap`.
    Per r and d, only the pairs whose states (I, d) and (J, d - r) are both live are evaluated.
    `deadline` is checked once per r and every `lattice.CHECK_EVERY` d (with replication, P^2 / 2
    (r, d) steps per call)."""
    GJ = G[J]
    t = pair_tables(inst, lat, I, J, arrays)
    ar = unit_ar * t["W"]
    for r in range(1, P + 1) if replication else (1,):
        dd = ds[ds >= r]
        if cap < INF:
            tau_all = (t["fb"] + ar * (r - 1) / r) / r
            row_ok = (t["link"] / r <= cap) & (tau_all <= cap)
            useful = live[I][:, dd] & (GJ[:, dd - r] <= cap) & row_ok[:, None]
        else:
            useful = GJ[:, dd - r] < INF
        tau = (t["fb"] + ar * (r - 1) / r) / r
        base = np.maximum(tau, t["link"] / r)
        fixed = t["wmem"] + t["buffers"]
        tick(deadline, 0)
        for c, d in enumerate(dd.tolist()):
            tick(deadline, c + 1)
            p = np.flatnonzero(useful[:, c])  # grouped by I, J ascending inside
            if len(p) == 0:
                continue
            n = -(-d // r) if schedule == "1f1b" else -(-m // r)
            rest = GJ[p, d - r]
            if memory:
                val = np.maximum(fixed[p] + n * t["stash"][p], rest)
            else:
                val = np.maximum(base[p], rest)
                if limit < INF:
                    val = np.where(fixed[p] + n * t["stash"][p] <= limit, val, INF)
            Ip = I[p]
            new_state = np.r_[True, Ip[1:] != Ip[:-1]]
            starts = np.flatnonzero(new_state)
            best = np.minimum.reduceat(val, starts)
            seg = np.cumsum(new_state) - 1
            first = np.minimum.reduceat(np.where(val == best[seg], np.arange(len(p)), len(p)), starts)
            ideal = Ip[starts]
            better = best < G[ideal, d]
            ideal = ideal[better]
            G[ideal, d] = best[better]
            next_j[ideal, d] = J[p[first[better]]]
            reps_of[ideal, d] = r


def to_partition(inst: Pipeline, lat: Lattice, stages: list[tuple[int, int, int]], P: int, schedule: str,
                 m: int | None) -> Partition:
    """The DAG partition of `stages` (pairs of ideals) as a `Partition` with its order:
    stage by stage, layers by index inside a stage; evaluated by the simulator."""
    order: list[int] = []
    bounds = []
    for i, j, r in stages:
        layers = sorted(set(lat.layers(j)) - set(lat.layers(i)))
        bounds.append((len(order), len(order) + len(layers) - 1, r))
        order += layers
    part = Partition.from_bounds(bounds, schedule=schedule, micro_batches=m, devices=P)
    part.order = order if order != list(range(inst.length)) else None
    return part.evaluated(inst)


def _scope(lat: Lattice, P: int, schedule: str, m: int | None, replication: bool) -> str:
    rep = "with replication" if replication else "straight pipeline"
    sched = f"GPipe m={m}" if schedule == "gpipe" else "1F1B"
    return f"DAG partitions ({lat.granularity}, {lat.n} ideals) on <= {P} devices, {rep}, {sched}"


def lattice_for(inst: Pipeline, max_states: int | None, deadline: Deadline | None = None) -> Lattice:
    """The ideal lattice used by the DAG solvers (coarsened past `max_states` ideals; None: the
    default `MAX_STATES`; a coarsened one also holds the V + 1 prefixes of the index order).
    `InputError` naming the option for anything but an integer >= 1 (2.5, "3", nan, 0:
    `interleave.positive_count`, as ``interleave-dp`` checks it); `DeadlineExceeded` once
    `deadline` is spent while it is built."""
    from .interleave import positive_count

    given = positive_count(max_states, "max_states")
    return coarsest_needed(inst, given if given is not None else MAX_STATES, deadline)[0]


def plan(inst: Pipeline, P: int, budget: int | None, *, schedule: str = "1f1b", micro_batches: int | None = None,
         replication: bool = False, max_states: int | None = None, deadline: Deadline | None = None,
         ) -> tuple[float, Partition, Lattice] | None:
    """The best DAG partition: the contiguous DP on the index order first (`dp.partition_dp`,
    a DAG partition too), whose period bounds the lattice DP (`upper`), then the lattice DP
    (`plan_after_chain`). `DeadlineExceeded` once `deadline` is spent while the contiguous DP
    runs, the lattice is built or the lattice DP runs."""
    chain = partition_dp(inst, P, budget, schedule=schedule, micro_batches=micro_batches, replication=replication,
                         deadline=deadline)
    return plan_after_chain(inst, chain, P, budget, schedule=schedule, micro_batches=micro_batches,
                            replication=replication, max_states=max_states, deadline=deadline)


def plan_after_chain(inst: Pipeline, chain: tuple[float, list[tuple[int, int, int]]] | None, P: int,
                     budget: int | None, *, schedule: str = "1f1b", micro_batches: int | None = None,
                     replication: bool = False, max_states: int | None = None, deadline: Deadline | None = None,
                     lattice: Lattice | None = None) -> tuple[float, Partition, Lattice] | None:
    """`plan` given the contiguous DP's answer `chain` ((period, bounds) or None): the lattice DP
    bounded by its period, and the better of the two, evaluated (None when neither fits `budget`);
    on `lattice` when given (`lattice_for`'s of `max_states`, already built), else built here.
    Every lattice of `lattice_for` holds the prefixes of the index order, so the contiguous
    partition lies in the scope named by the lattice (the lattice DP finds it too, up to float
    rounding of the sums). `DeadlineExceeded` once `deadline` is spent while the lattice is built
    or the lattice DP runs."""
    lat = lattice if lattice is not None else lattice_for(inst, max_states, deadline)
    upper = chain[0] if chain is not None else None
    res = dag_partition_dp(inst, lat, P, budget, schedule=schedule, micro_batches=micro_batches,
                           replication=replication, upper=upper, deadline=deadline)
    if res is not None and (chain is None or res[0] <= chain[0]):
        return res[0], to_partition(inst, lat, res[1], P, schedule, micro_batches), lat
    if chain is None:
        return None
    part = Partition.from_bounds(chain[1], schedule=schedule, micro_batches=micro_batches, devices=P)
    return chain[0], part.evaluated(inst), lat


def solve_dag(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
              micro_batches: int | None = None, replication: bool = False, max_states: int | None = None,
              time_limit: float | None = None, **_: Any) -> SolveResult:
    """Memory-aware DP over the antichain splits of the layer DAG (module docstring): the
    smallest period among DAG partitions whose every device fits `budget`. `time_limit` (s, wall
    clock, None: none) covers the lattice and the DP; past it the answer is the contiguous DP's
    partition as ``feasible`` (``timeout`` when it has none), the message saying so."""
    start = time.perf_counter()
    deadline = Deadline(_seconds(time_limit), start)
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    rep = bool(replication)
    try:  # the contiguous DP: the fallback past the time limit, and the lattice DP's bound
        chain = partition_dp(inst, P, budget, schedule=schedule, micro_batches=m, replication=rep, deadline=deadline)
    except DeadlineExceeded:  # the replicated DP (O(L^2 P^2)) is the long one: fall back on the straight one
        straight = partition_dp(inst, P, budget, schedule=schedule, micro_batches=m)  # O(L^2 min(P, L))
        return _chain_answer(inst, budget, P, schedule, m, deadline, straight)
    try:
        lat = lattice_for(inst, max_states, deadline)
        found = plan_after_chain(inst, chain, P, budget, schedule=schedule, micro_batches=m, replication=rep,
                                 max_states=max_states, deadline=deadline, lattice=lat)
    except DeadlineExceeded:
        return _chain_answer(inst, budget, P, schedule, m, deadline, chain)
    if found is None:
        return _infeasible_dag(inst, lat, budget, P, schedule, m, rep, max_states, deadline)
    value, part, lat = found
    assert part.period is not None
    return SolveResult(problem="pipeline", solver="dag", status=OPTIMAL, objective=part.period,
                       peak_memory=part.peak_memory, lower_bound=min(value, part.period),
                       solve_time_s=time.perf_counter() - start, budget=budget, schedule=part,
                       scope=_scope(lat, P, schedule, m, rep), details={"ideals": lat.n})


def _chain_answer(inst: Pipeline, budget: int | None, P: int, schedule: str, m: int | None, deadline: Deadline,
                  chain: tuple[float, list[tuple[int, int, int]]] | None) -> SolveResult:
    """`solve_dag`'s answer when `deadline` came before the lattice DP ended: the contiguous DP's
    partition `chain` of the index order (a DAG partition; the straight DP's when the replicated
    one did not end either) as ``feasible``, else ``timeout``."""
    part = None if chain is None else Partition.from_bounds(chain[1], schedule=schedule, micro_batches=m,
                                                            devices=P).evaluated(inst)
    return stopped_answer("dag", part, budget, deadline.elapsed(),
                          stop=f"the time limit of {deadline.limit:g} s came before the DAG DP ended",
                          scope=f"contiguous partitions of the index order on <= {P} devices (the DAG DP did not end)",
                          fallback="the contiguous DP's partition",
                          none_fits=f"no contiguous partition of the index order fits {budget} bytes per device")


def least_memory(inst: Pipeline, lat: Lattice, P: int, schedule: str, m: int | None, replication: bool = False,
                 deadline: Deadline | None = None) -> int | None:
    """The least per-device memory (bytes) of a DAG partition of `lat` on <= P devices: the peak
    of the memory DP's partition recomputed in integers by the simulator (the DP's float64 sums
    round past 2^53 bytes). None when there is none; `DeadlineExceeded` once `deadline` is spent."""
    need = dag_partition_dp(inst, lat, P, None, schedule=schedule, micro_batches=m, replication=replication,
                            objective="memory", deadline=deadline)
    if need is None:
        return None
    peak = to_partition(inst, lat, need[1], P, schedule, m).peak_memory
    assert peak is not None  # set by Partition.evaluated
    return int(peak)


def _infeasible_dag(inst: Pipeline, lat: Lattice, budget: int | None, P: int, schedule: str, m: int | None,
                    rep: bool, max_states: int | None, deadline: Deadline) -> SolveResult:
    """`solve_dag`'s ``infeasible`` (proven by `plan` on `lat`): `infeasible_on_lattice`."""
    return infeasible_on_lattice("dag", inst, lat, budget, P, schedule, m, rep, max_states, deadline,
                                 scope=_scope(lat, P, schedule, m, rep), elapsed=deadline.elapsed)


#: why ``min_budget`` is unknown when the least-memory DP of an ``infeasible`` answer ran out of time
LEAST_MEMORY_TIMED_OUT = "the time limit came before the least memory needed was found"


def infeasible_on_lattice(solver: str, inst: Pipeline, lat: Lattice, budget: int | None, P: int, schedule: str,
                          m: int | None, rep: bool, max_states: int | None, deadline: Deadline | None, *,
                          scope: str, elapsed: Callable[[], float]) -> SolveResult:
    """The ``infeasible`` answer of `solver` (``dag``, ``dag-cpsat``; proven by the caller on `lat`, the
    lattice of `max_states`: None for the default cap), with the least memory (bytes per device) any DAG
    partition of `lat` needs as ``min_budget`` when `least_memory` ends before `deadline`; otherwise
    None, and ``details["min_budget_note"]`` says why. Worded by `none_fits` ("on this lattice" when
    coarsened); `elapsed()` is the solve time in s, read once the answer is complete."""
    details = lattice_details(lat)
    try:
        need = least_memory(inst, lat, P, schedule, m, rep, deadline)
        note = ""
    except DeadlineExceeded:
        need, note = None, f" ({LEAST_MEMORY_TIMED_OUT})"
        details["min_budget_note"] = LEAST_MEMORY_TIMED_OUT
    return SolveResult(problem="pipeline", solver=solver, status=INFEASIBLE, budget=budget, min_budget=need,
                       solve_time_s=elapsed(), scope=scope, details=details,
                       message=none_fits(lat, budget, max_states, note))


def coarsened(lat: Lattice) -> bool:
    """Whether `lat` lacks some ideals (`lattice.coarsest_needed` coarsened it): what the DAG
    solvers prove on it (``infeasible``, ``min_budget``, ``optimal``) is then about its ideals only."""
    return lat.granularity != FULL_LATTICE


def lattice_details(lat: Lattice) -> dict[str, Any]:
    """The ``details`` of an ``infeasible`` answer of `dag` or `dag-cpsat` on `lat`: its number of
    ideals, and ``coarse_lattice`` true when it is coarsened (`coarsened`: ``min_budget``, when
    set, is the least memory of the DAG partitions of this lattice, not of every DAG partition)."""
    return {"ideals": lat.n, **({"coarse_lattice": True} if coarsened(lat) else {})}


def none_fits(lat: Lattice, budget: int | None, max_states: int | None, note: str = "") -> str:
    """The message of an ``infeasible`` answer of `dag` or `dag-cpsat` on `lat` (`budget` bytes per
    device; `note` follows it): on a coarsened lattice it says the proof is about that lattice's
    DAG partitions only (named as in the scope) and suggests a larger ``max_states`` (the cap used:
    `max_states`, None for `MAX_STATES`; the full lattice has more ideals than that)."""
    if not coarsened(lat):
        return f"no DAG partition fits {budget} bytes per device{note}"
    cap = max_states if max_states is not None else MAX_STATES
    return (f"no DAG partition on this lattice ({lat.granularity}, {lat.n} ideals) fits {budget} bytes per "
            f"device{note}; the full lattice has more than {cap} ideals, and a larger {option_field('max_states')} "
            "searches a finer one, whose partitions may fit")


def solve_dag_pipedream(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
                        micro_batches: int | None = None, replication: bool = False,
                        max_states: int | None = None, **_: Any) -> SolveResult:
    """PipeDream's planner in our model: the smallest period over antichain splits with the
    memory ignored, then checked against `budget` (infeasible for this baseline when it does
    not fit, with the memory its partition needs in `min_budget` and ``details["needs"]``: not
    the smallest memory of any DAG partition, which `dag` gives)."""
    start = time.perf_counter()
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    rep = bool(replication)
    found = plan(inst, P, None, schedule=schedule, micro_batches=m, replication=rep, max_states=max_states)
    assert found is not None  # without a memory limit the single stage always exists
    value, part, lat = found
    elapsed = time.perf_counter() - start
    scope = _scope(lat, P, schedule, m, rep)
    details = {"ideals": lat.n}
    assert part.peak_memory is not None and part.period is not None
    if budget is not None and part.peak_memory > budget:
        return SolveResult(problem="pipeline", solver="dag-pipedream", status=INFEASIBLE, budget=budget,
                           min_budget=part.peak_memory, solve_time_s=elapsed, scope=scope, lower_bound=value,
                           message=f"PipeDream's DAG partition needs {part.peak_memory} bytes per device",
                           details={**details, "unconstrained_partition": part.to_json(),
                                    "needs": part.peak_memory})
    return SolveResult(problem="pipeline", solver="dag-pipedream", status=OPTIMAL, objective=part.period,
                       peak_memory=part.peak_memory, lower_bound=min(value, part.period),
                       solve_time_s=elapsed, budget=budget, schedule=part, scope=scope, details=details)


__all__ = ["FULL_LATTICE", "LEAST_MEMORY_TIMED_OUT", "MAX_STATES", "coarsened", "dag_partition_dp",
           "infeasible_on_lattice", "lattice_details", "lattice_for", "least_memory", "none_fits", "pair_tables",
           "plan", "plan_after_chain", "solve_dag", "solve_dag_pipedream", "stage_tables", "to_partition"]
