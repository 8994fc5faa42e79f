"""Dynamic programs for contiguous pipeline partitioning: PipeDream's and a memory-aware one.

Both solve, over the suffixes of the chain, the recurrence (s: a suffix starting at layer i
run on exactly d devices; its first stage is ``[i, j]`` on r replicas)

    G(i, d) = min_{j >= i, r}  max( tau(i, j, r), c(i, r), G(j + 1, d - r) )
              subject to  M(i, j, r, n) <= budget,  n = ceil(d / r) (1F1B) or ceil(m / r) (GPipe)
    G(L, 0) = 0, and the answer is min_{d <= P} G(0, d),

with tau, c and M the stage time, link time and per-device memory of
`solvers.pipeline.simulator` (a 1F1B stage knows its in-flight count from the number of devices
used by itself and the stages after it, which is why the DP runs from the end of the chain).
The DP is exact for its model: contiguous stages, at most P devices, the simulator's period
and memory. Its device dimension stops at `useful_devices` (D <= P), which leaves every
answer unchanged (proofs there): D = min(P, L) for straight pipelines (one device per stage, at
most L stages). Straight pipelines use r = 1 only (O(L^2 min(P, L)) numpy work, at most
L min(P, L) steps); with replication r ranges over 1..d (O(L^2 P^2): more replicas keep lowering
the period, so no cap below P holds for the period; the memory objective stops at 2^(L-1)
devices under 1F1B, L m under GPipe). Each (i, d) is one vectorised numpy step over all j (and
all r); `deadline`, when given, is checked once per step.

- ``pipedream`` (Narayanan et al., SOSP 2019): the recurrence without the memory constraint
  (PipeDream's optimizer minimises the period only). Its partition is then checked against the
  budget; when it fits, it is optimal for the memory-limited problem too.
- ``madpipe``: the recurrence with the memory constraint, in the spirit of MadPipe and of
  Beaumont, Eyraud-Dubois and Shilova (Euro-Par 2021), who show that the 1F1B in-flight counts
  make memory the binding constraint. MadPipe itself also considers non-contiguous allocations
  and finer 1F1B memory patterns; this DP is restricted to contiguous stages.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..exact.options import Deadline
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .instance import Pipeline
from .schedule import SCHEDULES, Partition

INF = math.inf


@dataclass
class _Prefix:
    """Prefix sums used by the DP (all arrays of length L + 1)."""

    fb: np.ndarray   # sum of fwd + bwd over layers < l
    w: np.ndarray    # sum of params over layers < l (int64)
    a: np.ndarray    # sum of act over layers < l (int64)


def _prefix(inst: Pipeline) -> _Prefix:
    z = np.zeros(1)
    return _Prefix(np.concatenate([z, np.cumsum(inst.fwd + inst.bwd)]),
                   np.concatenate([[0], np.cumsum(inst.params)]).astype(np.int64),
                   np.concatenate([[0], np.cumsum(inst.act)]).astype(np.int64))


def stage_arrays(inst: Pipeline, pre: _Prefix, i: int) -> dict[str, np.ndarray]:
    """For stages [i, j], j = i..L-1: compute time F+B, weights W (int64), and, in bytes as
    float64, weight memory, stash A and buffers Q (see the simulator's docstring).

    The byte arrays are floats so that ``wmem + n * stash + buffers`` (`stage_memory`) cannot
    overflow: the weight factor (up to 1e15) and the in-flight count n (up to 10^6) can take it
    past int64. Floats hold every integer up to 2^53 exactly, above any budget (at most
    `units.MAX_BYTES` = 2^50), so comparisons with a budget stay exact; a larger memory is
    rounded but still above every budget, i.e. infeasible."""
    L = inst.length
    j = np.arange(i, L)
    fb = pre.fb[j + 1] - pre.fb[i]
    W = pre.w[j + 1] - pre.w[i]
    wmem = np.ceil(inst.weight_factor * W.astype(float) - 1e-9)
    in_size = inst.input_of(i)
    stash = np.asarray(inst.stash(i), dtype=float)
    out = np.zeros(len(j))
    out[:-1] = inst.cut_sizes[i : L - 1]
    buffers = float(in_size if i > 0 else 0) + out
    return {"fb": fb, "W": W, "wmem": wmem, "stash": stash, "buffers": buffers}


def stage_memory(arr: dict[str, np.ndarray], n: int | np.ndarray) -> np.ndarray:
    """Per-device memory M = wmem + n stash + buffers (bytes, float64, never overflowing) of the
    stages of `stage_arrays` with n micro-batches in flight (an int, or an array broadcasting
    against the stages)."""
    return arr["wmem"] + n * arr["stash"] + arr["buffers"]


def useful_devices(length: int, devices: int, *, replication: bool = False, objective: str = "period",
                   schedule: str = "1f1b", micro_batches: int | None = None) -> int:
    """The most devices D <= `devices` (P) that `partition_dp` needs to look at: some optimal
    partition uses at most D devices, and G(i, d) for d <= D does not depend on any d > D (the
    recurrence only looks at d - r < d), so the table's first D columns, the optimum and the
    partition returned (the first d reaching the least G(0, d)) are those of the full table.

    - Straight pipelines: each stage takes one device and at least one of the L = `length`
      layers, so a partition uses at most L devices: G(0, d) is infinite for d > L; D = min(P, L).
    - Replication, ``objective="memory"``: a stage's memory depends only on its layers and its
      in-flight count n (weights are not split among replicas). Rebuild the replica counts from
      the last stage: r'_{S-1} = 1 (n = 1 whatever r is), then r'_s = min(r_s, D'_{s+1}) for 1F1B,
      where D'_{s+1} <= D_{s+1} are the devices of the stages after s. Then
      n'_s = 1 + ceil(D'_{s+1} / r'_s) <= 1 + ceil(D_{s+1} / r_s) = n_s (it is 2 when r'_s =
      D'_{s+1}, and n_s >= 2 once a stage follows), so no stage needs more memory, and
      D'_s <= 2 D'_{s+1}: at most 2^(S-1) <= 2^(L-1) devices. Under GPipe n = ceil(m / r) is 1
      for every r >= m, so r'_s = min(r_s, m) keeps every n: at most L m devices.
    - Replication, period: no cap (a stage on r replicas runs (F + B + AR) / r, lower for every
      r >= 2 added; the period keeps falling with P), D = P: O(L^2 P^2)."""
    P, L = int(devices), int(length)
    if not replication:
        return min(P, L)
    if objective != "memory":
        return P
    if schedule == "gpipe":
        return min(P, L * max(int(micro_batches or 0), 1))
    return P if L - 1 >= P.bit_length() else min(P, 2 ** (L - 1))


def partition_dp(
    inst: Pipeline,
    devices: int,
    budget: int | None = None,
    *,
    schedule: str = "1f1b",
    micro_batches: int | None = None,
    replication: bool = False,
    objective: str = "period",
    deadline: Deadline | None = None,
) -> tuple[float, list[tuple[int, int, int]]] | None:
    """Solve the recurrence; returns (value, [(first, last, replicas)]) or None when no
    partition fits `budget`. ``objective="memory"`` minimises the peak memory instead (the
    budget is then ignored): it gives the smallest budget for which a partition exists. The
    table has `useful_devices` columns (the same answer as all P); `deadline` (None: none) is
    checked once per numpy step: `DeadlineExceeded` once it is spent."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}")
    if schedule == "gpipe" and not micro_batches:
        raise ValueError("gpipe needs micro_batches")
    m = int(micro_batches or 0)  # micro-batches per batch (GPipe's in-flight count)
    L = inst.length
    if int(devices) < 1:
        raise ValueError("need at least one device")
    P = useful_devices(L, int(devices), replication=replication, objective=objective, schedule=schedule,
                       micro_batches=m)
    pre = _prefix(inst)
    G = np.full((L + 1, P + 1), INF)
    G[L, 0] = 0.0
    choice: dict[tuple[int, int], tuple[int, int]] = {}
    limit = INF if budget is None or objective == "memory" else float(budget)
    for i in range(L - 1, -1, -1):
        arr = stage_arrays(inst, pre, i)
        n_j = L - i
        ar = inst.comm_time(1.0) * 4.0 * arr["W"]  # allreduce time of the stage's weights, times r / (r - 1)
        link1 = inst.comm_time(2.0 * inst.input_of(i), 2 * inst.messages_into(i)) if i > 0 else 0.0
        if not replication:  # straight pipeline: one vectorised step per (i, d); d > L - i stages cannot fit
            base = np.maximum(arr["fb"], link1)
            for d in range(1, min(P, n_j) + 1):
                if deadline is not None:
                    deadline.check()
                n = d if schedule == "1f1b" else m
                rest = np.empty(n_j)
                rest[:-1] = G[i + 1 : L, d - 1] if d > 1 else INF
                rest[-1] = 0.0 if d == 1 else INF
                if objective == "memory":
                    val = np.maximum(stage_memory(arr, n), rest)
                else:
                    val = np.maximum(base, rest)
                    if limit < INF:
                        val = np.where(stage_memory(arr, n) <= limit, val, INF)
                k = int(np.argmin(val))
                G[i, d] = float(val[k])
                if math.isfinite(G[i, d]):
                    choice[(i, d)] = (i + k, 1)
            continue
        for d in range(1, P + 1):
            if deadline is not None:
                deadline.check()
            rs = np.arange(1, d + 1)
            ns = -(-d // rs) if schedule == "1f1b" else -(-m // rs)  # in flight per replica count
            mem = stage_memory({k: arr[k][None, :] for k in ("wmem", "stash", "buffers")}, ns[:, None])
            # the rest of the chain on d - r devices; the last layer ends the chain
            rest = np.full((len(rs), n_j), INF)
            ok = d - rs >= 1
            if n_j > 1 and ok.any():
                rest[ok, :-1] = G[i + 1 : L, d - rs[ok]].T
            rest[:, -1] = np.where(rs == d, 0.0, INF)
            if objective == "memory":
                val = np.maximum(mem, rest)
            else:
                reps = rs[:, None].astype(float)
                tau = (arr["fb"][None, :] + ar[None, :] * (reps - 1) / reps) / reps
                val = np.maximum(np.maximum(tau, link1 / reps), rest)
                if limit < INF:
                    val = np.where(mem <= limit, val, INF)
            k = int(np.argmin(val))
            ri, jk = divmod(k, n_j)
            G[i, d] = float(val[ri, jk])
            if math.isfinite(G[i, d]):
                choice[(i, d)] = (i + jk, int(rs[ri]))
    d_best = int(np.argmin(G[0, 1:])) + 1
    if not math.isfinite(G[0, d_best]):
        return None
    bounds, i, d = [], 0, d_best
    while i < L:
        j, r = choice[(i, d)]
        bounds.append((i, j, r))
        i, d = j + 1, d - r
    return float(G[0, d_best]), bounds


def min_budget(inst: Pipeline, devices: int, *, schedule: str = "1f1b", micro_batches: int | None = None,
               replication: bool = False) -> int:
    """The smallest per-device memory (bytes) for which some contiguous partition exists: the
    peak of the memory DP's partition, recomputed in integers by the simulator (the DP's float64
    sums round past 2^53 bytes; the answer is then a budget that partition truly fits)."""
    res = partition_dp(inst, devices, None, schedule=schedule, micro_batches=micro_batches,
                       replication=replication, objective="memory")
    assert res is not None
    peak = _partition(inst, res[1], int(devices), schedule, micro_batches).peak_memory
    assert peak is not None  # set by Partition.evaluated
    return int(peak)


def stopped_answer(solver: str, part: Partition | None, budget: int | None, elapsed: float, *, stop: str,
                   scope: str, fallback: str, none_fits: str) -> SolveResult:
    """The answer of a DP stopped by its time limit (`stop` says so): the fallback partition `part`
    (evaluated; `fallback` names it) as ``feasible``, not proven optimal and without a lower bound,
    or ``timeout`` when there is none (`none_fits` says what did not fit). `elapsed` in seconds."""
    if part is None:
        return SolveResult(problem="pipeline", solver=solver, status=TIMEOUT, budget=budget, solve_time_s=elapsed,
                           scope=scope, message=f"{stop}; {none_fits}")
    assert part.period is not None
    return SolveResult(problem="pipeline", solver=solver, status=FEASIBLE, objective=part.period,
                       peak_memory=part.peak_memory, solve_time_s=elapsed, budget=budget, schedule=part,
                       scope=scope, message=f"{stop}: {fallback} (not proven optimal)")


def check_micro_batches(schedule: str, micro_batches: int | None, devices: int) -> None:
    """Under 1F1B, `micro_batches` (when given) is at least `devices`, as the runner requires (it runs
    straight pipelines, S <= `devices` stages, each holding S - s micro-batches in flight). The model
    charges stage s of S min(S - s, m) in flight (`simulator.in_flight_counts`): S - s for a straight
    pipeline, and the cap matters only for interleaved allocations, whose S may reach 2 x `devices`
    stages, above m. An `InputError` naming ``micro_batches`` otherwise (GPipe charges m itself, any
    m >= 1)."""
    if schedule == "1f1b" and micro_batches is not None and int(micro_batches) < int(devices):
        raise InputError(f"under 1F1B at least as many micro-batches as devices are needed, got {micro_batches} "
                         f"for {devices} devices (the runner refuses fewer); "
                         f"give at least {devices} or leave it out", field="micro_batches")


def _defaults(devices: int | None, schedule: str, micro_batches: int | None) -> tuple[int, str, int | None]:
    if devices is None or int(devices) < 1:
        raise InputError(f"pipeline solvers need a number of devices >= 1, got {devices!r}", field="devices")
    schedule = str(schedule).lower()
    if schedule not in SCHEDULES:
        raise InputError(f"unknown schedule {schedule!r} (one of {', '.join(SCHEDULES)})", field="schedule")
    if micro_batches is not None and int(micro_batches) < 1:
        raise InputError(f"must be >= 1, got {micro_batches!r}", field="micro_batches")
    check_micro_batches(schedule, micro_batches, int(devices))
    if schedule == "gpipe" and not micro_batches:
        micro_batches = 4 * int(devices)
    return int(devices), schedule, micro_batches


def _scope(kind: str, P: int, schedule: str, m: int | None, replication: bool) -> str:
    rep = "with replication" if replication else "straight pipeline"
    sched = f"GPipe m={m}" if schedule == "gpipe" else "1F1B"
    return f"{kind}contiguous stages on <= {P} devices, {rep}, {sched}"


def _partition(inst: Pipeline, bounds: list[tuple[int, int, int]], P: int, schedule: str,
               m: int | None) -> Partition:
    return Partition.from_bounds(bounds, schedule=schedule, micro_batches=m, devices=P).evaluated(inst)


def _bound(value: float, part: Partition) -> float:
    """The DP's optimum `value` as a lower bound on the period of `part` (its simulated period):
    the two are the same number summed in different orders, so the DP's may be above by a
    rounding; the bound is never above the objective."""
    assert part.period is not None  # set by Partition.evaluated
    return min(value, part.period)


def solve_pipedream(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
                    micro_batches: int | None = None, replication: bool = False, **_: Any) -> SolveResult:
    """PipeDream's DP: the smallest period ignoring memory; then checked against the budget.
    Optimal when its partition fits (the unconstrained optimum is a lower bound); otherwise
    infeasible *for this baseline*, with the memory its partition needs (bytes per device) in
    `min_budget` and ``details["needs"]``: the smallest memory this baseline meets, not the
    smallest of any partition (`min_budget` of `madpipe`, often far below)."""
    start = time.perf_counter()
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    found = partition_dp(inst, P, None, schedule=schedule, micro_batches=m, replication=replication)
    if found is None:  # pragma: no cover - without a memory limit every chain has a partition
        raise RuntimeError("PipeDream's DP found no partition")
    value, bounds = found
    part = _partition(inst, bounds, P, schedule, m)
    elapsed = time.perf_counter() - start
    scope = _scope("", P, schedule, m, replication)
    assert part.peak_memory is not None  # set by Partition.evaluated
    if budget is not None and part.peak_memory > budget:
        return SolveResult(problem="pipeline", solver="pipedream", status=INFEASIBLE, budget=budget,
                           min_budget=part.peak_memory, solve_time_s=elapsed, scope=scope,
                           lower_bound=value,
                           message=f"PipeDream's partition ({part}) needs {part.peak_memory} bytes per device",
                           details={"unconstrained_partition": part.to_json(), "needs": part.peak_memory})
    return SolveResult(problem="pipeline", solver="pipedream", status=OPTIMAL, objective=part.period,
                       peak_memory=part.peak_memory, lower_bound=_bound(value, part), solve_time_s=elapsed,
                       budget=budget,
                       schedule=part, scope=scope)


def solve_madpipe(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
                  micro_batches: int | None = None, replication: bool = False, **_: Any) -> SolveResult:
    """Memory-aware DP: the smallest period among contiguous partitions whose every device fits
    `budget` with the in-flight counts of the schedule. Exact for this model."""
    start = time.perf_counter()
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    res = partition_dp(inst, P, budget, schedule=schedule, micro_batches=m, replication=replication)
    scope = _scope("", P, schedule, m, replication)
    if res is None:
        need = min_budget(inst, P, schedule=schedule, micro_batches=m, replication=replication)
        return SolveResult(problem="pipeline", solver="madpipe", status=INFEASIBLE, budget=budget, min_budget=need,
                           solve_time_s=time.perf_counter() - start, scope=scope,
                           message=f"no contiguous partition fits {budget} bytes per device")
    value, bounds = res
    part = _partition(inst, bounds, P, schedule, m)
    return SolveResult(problem="pipeline", solver="madpipe", status=OPTIMAL, objective=part.period,
                       peak_memory=part.peak_memory, lower_bound=_bound(value, part),
                       solve_time_s=time.perf_counter() - start, budget=budget, schedule=part, scope=scope)


__all__ = ["partition_dp", "useful_devices", "min_budget", "solve_pipedream", "solve_madpipe", "stage_arrays",
           "stage_memory"]
