"""Partitions of a pipeline and the simulator that charges their period and memory.

The model (docs/pipeline.md). A partition cuts the L layers into S contiguous stages
``[first_s, last_s]``; stage s (0-based) runs on ``r_s`` replicas (1 for a straight pipeline),
``sum r_s <= P`` devices. With F, B, W the sums of fwd, bwd, params over the stage:

- stage time        tau_s = (F + B + AR_s) / r_s, where AR_s = 4 (r_s - 1) W / (r_s * bandwidth)
                    is PipeDream's allreduce of the stage's weights (0 when r_s = 1 or the
                    bandwidth is not charged);
- link time         c_s = (2 * in_s / bandwidth + 2 * k_s * latency) / r_s for s > 0, where in_s
                    is the size of everything crossing the boundary before the stage (activations
                    forward, their gradients backward; divided among the r_s replicas' links as in
                    PipeDream) and k_s the number of tensors crossing it (a boundary inside a
                    residual or inception block carries several); 0 when the bandwidth is not charged;
- period            T = max( max_s tau_s, max_s c_s )   (compute and transfers overlap);
- in flight         n_s = ceil(min(D_s, m) / r_s) for 1F1B with D_s = sum_{t >= s} r_t and m the
                    micro-batches per batch (D_s alone when m is not given: the steady state; a
                    straight pipeline: stage s of S keeps min(S - s, m) micro-batches, S - s,
                    "P - s + 1" 1-based, for the m >= P >= S the solvers require): a stage never holds
                    more micro-batches than the batch has;
                    n_s = ceil(m / r_s) for GPipe;
- stash             A_s = in_s + sum of act[l] over the layers l of the stage whose output is
                    consumed by a layer of the stage (a chain: l = first_s..last_s - 1), plus
                    ``input_size`` on the stage holding the layer that reads the network's input
                    (layer 0; stage 0 of a contiguous partition): a micro-batch leaves the inputs
                    of all the stage's layers until its backward; with a measured profile
                    (``Pipeline.saved_by``, ``saved_extra``) the tensors the stage's layers really
                    save for backward instead (`Pipeline.stash`);
- buffers           Q_s = in_s (if s > 0) + out_s (if s < S - 1): the gradient received for the
                    stage's output and the one sent for its input; in_s = cut before the stage
                    (0 for s = 0), which never holds the network's input: no stage sends it;
- memory            M_s = ceil(weight_factor * W) + n_s * A_s + Q_s  per device of stage s;
                    the peak is max_s M_s.

A DAG partition (``Partition.order`` set) is a contiguous partition of the layers taken in that
topological order: it is charged on `Pipeline.reordered(order)`, whose cuts and stashes follow
the DAG's edges. The order may start with a layer other than 0 (a second source of the DAG, such
as a constant): the network's input is still charged to the stage that holds layer 0
(``Pipeline.input_layer``), as a stash only, whatever stage comes first.

An interleaved allocation (``Partition.device_of``: several stages on one device, MadPipe's
non-contiguous allocation) keeps n_s, A_s, Q_s per stage (n_s = min(S - s, m) under 1F1B: the
micro-batches in flight at the stage; S may reach 2P, above the m >= P micro-batches the solvers
require, so the first stages of a batch of P <= m < S hold m, not S - s), and charges per device:
the period is the largest device load sum tau_s (and link time; none between consecutive stages
on the same device), the memory of a device is the sum of M_s over its stages. Its ``device_of``
indices lie in 0..P-1 (P the devices given).

Times are in the instance's time unit (ms for PipeDream profiles), sizes in bytes.

`simulate_batch` also plays one batch of m micro-batches (straight pipelines; not replicated
stages nor interleaved allocations that share a device) event by event,
for 1F1B (PipeDream-flush order: S - s - 1 warm-up forwards, then one forward one backward) and
GPipe (all forwards, then all backwards): makespan with the bubbles, and the largest number of
micro-batches each stage actually holds, which must equal n_s above (min(S - s, m) under 1F1B).
Its links are resources (one transfer at a time, forward and backward on the same link, as c_s
charges them), so its steady state (`replay_period`) is at least T; equal to T under 1F1B without
communication, it can exceed T with communication charged (1F1B's in-flight limit exposes round trips: `replay_bound`).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from .instance import Pipeline
from .schedule import SCHEDULES, Partition


@dataclass
class Evaluation:
    """The simulator's charges for a partition (see the module docstring)."""

    period: float
    peak_memory: int
    stage_times: list[float]
    link_times: list[float]
    stage_memory: list[int]
    in_flight: list[int]
    violation: str | None = None


def check_partition(inst: Pipeline, part: Partition, devices: int | None = None) -> str | None:
    """Why `part` is not a valid partition of `inst` (None when it is)."""
    if not part.stages:
        return "no stages"
    if part.schedule not in SCHEDULES:
        return f"unknown schedule {part.schedule!r}"
    expected = 0
    for k, s in enumerate(part.stages):
        if s.first != expected:
            return f"stage {k} starts at layer {s.first}, expected {expected} (stages must be contiguous)"
        if s.last < s.first:
            return f"stage {k} is empty ({s.first}..{s.last})"
        if s.replicas < 1:
            return f"stage {k} has {s.replicas} replicas"
        expected = s.last + 1
    if expected != inst.length:
        return f"the stages cover layers 0..{expected - 1}, not 0..{inst.length - 1}"
    bad = _devices_problem(part, devices if devices is not None else part.devices)
    if bad is not None:
        return bad
    if part.schedule == "gpipe" and not part.micro_batches:
        return "gpipe needs a number of micro-batches"
    return None


def _devices_problem(part: Partition, devices: int | None) -> str | None:
    """Why `part` does not fit `devices` (None: any number) or has a malformed ``device_of`` (None when
    neither): more devices used than given (the sum of the replicas, or the distinct indices of
    ``device_of``), else a ``device_of`` index past them, named with its entry ([0, 2, 0, 2] on 2 devices)."""
    dev = part.device_of
    used = part.devices_used
    if dev is not None:
        if len(dev) != len(part.stages) or min(dev, default=0) < 0:
            return "device_of must give one device index >= 0 per stage"
        if any(s.replicas != 1 for s in part.stages):
            return "an interleaved allocation (device_of) has no replicated stages"
        used = len(set(dev))
    if devices is None:
        return None
    if used > devices:
        return f"the partition uses {used} devices, only {devices} available"
    for k, d in enumerate(dev or []):
        if d >= devices:
            return (f"device_of[{k}] = {d} is out of range 0..{devices - 1} "
                    f"({devices} device{'s' if devices != 1 else ''} given)")
    return None


def in_flight_counts(part: Partition) -> list[int]:
    """n_s of the module docstring: under 1F1B ceil(min(D_s, m) / r_s), D_s the devices of stages s..S-1
    (S - s for unreplicated stages) capped by the batch's m micro-batches when the partition gives m;
    under GPipe ceil(m / r_s). Counts of micro-batches, each >= 1 when m >= 1."""
    reps = [s.replicas for s in part.stages]
    m = int(part.micro_batches or 0)
    if part.schedule == "gpipe":
        return [math.ceil(m / r) for r in reps]
    out = []
    for s in range(len(reps)):
        deep = sum(reps[s:])
        out.append(math.ceil((min(deep, m) if m > 0 else deep) / reps[s]))
    return out


def weights_memory(inst: Pipeline, W: int) -> int:
    """ceil(weight_factor * W): weights with their gradients and optimizer state."""
    return int(math.ceil(inst.weight_factor * W - 1e-9))


def stage_stashes(inst: Pipeline, part: Partition) -> list[int]:
    """A_s of each stage s of `part` (module docstring), in bytes: what one micro-batch keeps on the stage
    until its backward, ``Pipeline.stash(first_s)[last_s - first_s]`` of `inst` taken in the partition's
    ``order`` when it has one (`Pipeline.reordered`: `ValueError` if the order is not topological), with
    ``saved_by`` and ``saved_extra`` where `inst` has them. The stashes `simulate` charges."""
    if part.order is not None:
        inst = inst.reordered(list(part.order))
    return _stashes(inst, part)


def _stashes(ordered: Pipeline, part: Partition) -> list[int]:
    """A_s of each stage of `part` (bytes), `ordered` already in the partition's order (`stage_stashes`)."""
    return [int(ordered.stash(s.first)[s.last - s.first]) for s in part.stages]


def simulate(inst: Pipeline, part: Partition, budget: int | None = None, devices: int | None = None) -> Evaluation:
    """Period, per-stage time and memory of `part` (module docstring); a partition that is
    malformed, uses too many devices or exceeds `budget` on some device gets a `violation`."""
    if part.order is not None:
        try:
            inst = inst.reordered(list(part.order))
        except ValueError as err:
            return Evaluation(math.inf, 0, [], [], [], [], violation=str(err))
    bad = check_partition(inst, part, devices)
    if bad is not None:
        return Evaluation(math.inf, 0, [], [], [], [], violation=bad)
    S = len(part.stages)
    ns = in_flight_counts(part)
    stashes = _stashes(inst, part)
    times, links, mems = [], [], []
    for k, s in enumerate(part.stages):
        layers = range(s.first, s.last + 1)
        F = sum(float(inst.fwd[l]) for l in layers)
        B = sum(float(inst.bwd[l]) for l in layers)
        W = sum(int(inst.params[l]) for l in layers)
        r = s.replicas
        allreduce = inst.comm_time(4.0 * (r - 1) * W / r) if r > 1 else 0.0
        times.append((F + B + allreduce) / r)
        in_size = inst.input_of(s.first)
        links.append(inst.comm_time(2.0 * in_size, 2 * inst.messages_into(s.first)) / r if k > 0 else 0.0)
        buffers = (in_size if k > 0 else 0) + (int(inst.cut_sizes[s.last]) if k < S - 1 else 0)
        mems.append(weights_memory(inst, W) + ns[k] * stashes[k] + buffers)
    if part.device_of is not None:  # interleaved: a device runs all its stages; no transfer on the same device
        dev = part.device_of
        links = [0.0 if k > 0 and dev[k] == dev[k - 1] else c for k, c in enumerate(links)]
        loads: dict[int, float] = {}
        held: dict[int, int] = {}
        for k, d in enumerate(dev):
            loads[d] = loads.get(d, 0.0) + times[k]
            held[d] = held.get(d, 0) + mems[k]
        period, peak = max(max(loads.values()), max(links)), max(held.values())
        worst_what = f"device {max(held, key=lambda d: held[d])}"
    else:
        period, peak = max(max(times), max(links)), max(mems)
        worst_what = f"stage {mems.index(peak)}"
    violation = None
    if budget is not None and peak > budget:
        violation = f"{worst_what} needs {peak} bytes per device > budget {budget} bytes"
    return Evaluation(period, peak, times, links, mems, ns, violation)


# ---------------------------------------------------------------------------- one batch
@dataclass
class BatchRun:
    """One batch of m micro-batches played event by event (times in the instance's unit)."""

    makespan: float
    micro_batches: int
    max_in_flight: list[int]
    ops: list[list[tuple[str, int, float, float]]]  # per stage: (F|B, micro-batch, start, end)
    #: per stage s, its incoming link (from stage s - 1; empty for s = 0): (F|B, micro-batch, start, end) in
    #: the order the link carries them; F an activation to stage s, B its gradient back to stage s - 1.
    #: Never two at once: the intervals of one link do not overlap
    transfers: list[list[tuple[str, int, float, float]]] = field(default_factory=list)

    @property
    def bubble_fraction(self) -> float:
        """1 - busy / (S * makespan)."""
        busy = sum(e - s for stage in self.ops for _, _, s, e in stage)
        S = len(self.ops)
        return 1.0 - busy / (S * self.makespan) if self.makespan > 0 else 0.0


def stage_order(schedule: str, s: int, S: int, m: int) -> list[tuple[str, int]]:
    """The order in which stage s (0-based) of S runs the forwards F and backwards B of
    micro-batches 0..m-1: GPipe runs all forwards then all backwards (in forward order, as
    torch's ScheduleGPipe); 1F1B runs min(S - s - 1, m) warm-up forwards, then alternates."""
    if schedule == "gpipe":
        return [("F", k) for k in range(m)] + [("B", k) for k in range(m)]
    warm = min(S - s - 1, m)
    order = [("F", k) for k in range(warm)]
    f, b = warm, 0
    while f < m:
        order += [("F", f), ("B", b)]
        f += 1
        b += 1
    order += [("B", k) for k in range(b, m)]
    return order


def simulate_batch(inst: Pipeline, part: Partition, micro_batches: int | None = None) -> BatchRun:
    """Makespan of one batch of m micro-batches on a straight pipeline: each stage runs its ops
    in `stage_order`, an op starts when its stage is free and its input has arrived (the
    forward of the previous stage, or the backward of the next, carried over the link between them).

    Links are resources, as the link time c_s of `simulate` charges them: the link into stage s > 0
    carries each micro-batch's activations forward and their gradients backward, each transfer
    occupying it for c_s / 2 = in_s / bandwidth + k_s * latency (both directions share it, so it is
    busy c_s per micro-batch); a link carries one transfer at a time, in the order they become ready
    (when the op producing them ends), so that a transfer may wait for the link (`BatchRun.transfers`).
    Without bandwidth the transfers take no time.

    Steady state: the replay takes at least the period T of `simulate` per micro-batch (no stage runs
    faster than tau_s, no link than c_s), exactly T without communication under 1F1B. With communication
    charged it can take more: under 1F1B stage s holds at most S - s micro-batches, and each must go to
    the last stage and back (compute sum_{t >= s} tau_t, transfers sum_{t > s} c_t) before the stage
    starts another, so the replay takes at least (sum_{t >= s} tau_t + sum_{t > s} c_t) / (S - s) per
    micro-batch, which T leaves out (`replay_bound`).

    One device per stage: a partition with replicated stages, or an
    interleaved allocation (``device_of``) that puts two stages on one device, is refused
    (`InputError`): this event simulation would play its stages on devices of their own and
    report a makespan that device sharing does not allow."""
    if part.device_of is not None and len(set(part.device_of)) < len(part.stages):
        raise InputError("simulate_batch plays straight pipelines only (one device per stage); this interleaved "
                         f"allocation puts {len(part.stages)} stages on {len(set(part.device_of))} devices",
                         field="device_of")
    if part.order is not None:
        inst = inst.reordered(list(part.order))
    bad = check_partition(inst, part)
    if bad is not None:
        raise ValueError(bad)
    if any(s.replicas != 1 for s in part.stages):
        raise ValueError("simulate_batch plays straight pipelines only (no replicated stages)")
    m = int(micro_batches or part.micro_batches or 0)
    if m <= 0:
        raise ValueError("need a positive number of micro-batches")
    fw = [sum(float(inst.fwd[l]) for l in range(s.first, s.last + 1)) for s in part.stages]
    bw = [sum(float(inst.bwd[l]) for l in range(s.first, s.last + 1)) for s in part.stages]
    hop = [inst.comm_time(inst.input_of(s.first), inst.messages_into(s.first)) if k > 0 else 0.0
           for k, s in enumerate(part.stages)]
    return _play(part.schedule, fw, bw, hop, m)


def _play(schedule: str, fw: list[float], bw: list[float], hop: list[float], m: int) -> BatchRun:
    """The event replay of `simulate_batch`: stage s runs forwards of fw[s] and backwards of bw[s]
    (time unit) in `stage_order`; the link into stage s > 0 carries each transfer in hop[s], one at a
    time, in the order they become ready. Events are handled in time order, so a link is handed its
    transfers in the order of their ready times (ties in the order their ops were started)."""
    S = len(fw)
    orders = [stage_order(schedule, s, S, m) for s in range(S)]
    pos = [0] * S
    busy = [False] * S
    free = [0.0] * S
    link_free = [0.0] * S
    arrived: set[tuple[str, int, int]] = set()  # (F|B, stage, micro-batch): the op's input is at the stage
    ops: list[list[tuple[str, int, float, float]]] = [[] for _ in range(S)]
    transfers: list[list[tuple[str, int, float, float]]] = [[] for _ in range(S)]
    held = [0] * S
    max_held = [0] * S
    events: list[tuple[float, int, int, str, int]] = []  # (time, seq, stage, "end" | "F" | "B", micro-batch)
    seq = 0

    def push(t: float, s: int, what: str, k: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, s, what, k))
        seq += 1

    def try_start(s: int, now: float) -> None:
        if busy[s] or pos[s] == len(orders[s]):
            return
        kind, k = orders[s][pos[s]]
        if kind == "F" and s > 0 and ("F", s, k) not in arrived:
            return
        if kind == "B" and s < S - 1 and ("B", s, k) not in arrived:
            return
        end = now + (fw[s] if kind == "F" else bw[s])
        ops[s].append((kind, k, now, end))
        busy[s], free[s] = True, end
        held[s] += 1 if kind == "F" else -1
        max_held[s] = max(max_held[s], held[s])
        pos[s] += 1
        push(end, s, "end", k)

    def send(kind: str, link: int, to: int, k: int, now: float) -> None:
        start = max(now, link_free[link])
        link_free[link] = start + hop[link]
        transfers[link].append((kind, k, start, link_free[link]))
        push(link_free[link], to, kind, k)

    for s in range(S):
        try_start(s, 0.0)
    while events:
        now, _, s, what, k = heapq.heappop(events)
        if what == "end":
            busy[s] = False
            kind = ops[s][-1][0]
            if kind == "F" and s < S - 1:
                send("F", s + 1, s + 1, k, now)
            elif kind == "B" and s > 0:
                send("B", s, s - 1, k, now)
        else:
            arrived.add((what, s, k))
        try_start(s, now)
    if any(pos[s] < len(orders[s]) for s in range(S)):
        raise RuntimeError("pipeline schedule deadlocked")  # cannot happen for these orders
    return BatchRun(max(free), m, max_held, ops, transfers)


def replay_period(inst: Pipeline, part: Partition, micro_batches: int | None = None) -> float:
    """The steady state of `simulate_batch` (time unit per micro-batch): its slope
    (makespan(2M) - makespan(M)) / M, in which fill and drain cancel, with M = max(m, 32 S) up to 22
    stages, max(m, 2^14 / S) up to 64 and max(m, 4 S) beyond (S M near 2^14 to 64 stages, then 4 S^2:
    about 1 s at 64 stages, 5 s at 128, measured); long
    batches, as the slope at small M still carries the replay's transient (to 7% at M = 2 S on random
    instances, 1.6% at 8 S, 0.4% at 32 S). At least the period T of `simulate` in the
    limit, T without communication under 1F1B; can exceed it with communication charged (`simulate_batch`)."""
    S = len(part.stages)
    M = max(int(micro_batches or part.micro_batches or 0), min(32 * S, max(4 * S, 2**14 // S)))
    return (simulate_batch(inst, part, 2 * M).makespan - simulate_batch(inst, part, M).makespan) / M


def replay_bound(inst: Pipeline, part: Partition) -> float:
    """A lower bound (time unit per micro-batch) on the steady state of `simulate_batch` for a straight
    1F1B pipeline: max(T, max_s (sum_{t >= s} tau_t + sum_{t > s} c_t) / (S - s)) with T, tau, c of
    `simulate` (see `simulate_batch`); T alone under GPipe."""
    ev = simulate(inst, part)
    bound = ev.period
    if part.schedule == "1f1b":
        S = len(ev.stage_times)
        for s in range(S):
            trip = sum(ev.stage_times[s:]) + sum(ev.link_times[s + 1:])
            bound = max(bound, trip / (S - s))
    return bound


def memory_profile(inst: Pipeline, partition: Partition) -> list[dict[str, Any]]:
    """Per stage: its layers, devices, micro-batches in flight n_s, time tau_s (the instance's time
    unit) and memory per device M_s (``mem_during``, bytes); empty when the partition is malformed.
    The ``op`` label names the stage's layers as instance indices (`Partition.stage_span`: for a DAG
    partition its layers in runs, "stage 0 [0,2]", not positions in its order), and a DAG partition's
    entries also list them (``layers``)."""
    ev = simulate(inst, partition)
    # (a malformed partition, whose order may not reach its stages' positions, has no stage times: nothing listed)
    layers = partition.stage_layers() if partition.order is not None and ev.stage_times else None
    return [{"op": f"stage {k} [{partition.stage_span(k)}]", "stage": k, "replicas": st.replicas, "in_flight": n,
             "time": t, "mem_during": int(m), **({"layers": layers[k]} if layers is not None else {})}
            for k, (st, n, t, m) in enumerate(zip(partition.stages, ev.in_flight, ev.stage_times, ev.stage_memory))]
