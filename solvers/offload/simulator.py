"""Two-stream simulator for offloading schedules (compute stream + transfer stream).

Rules (documented here, next to the code, as the design notes ask):

1. Operations are *issued* in the schedule's order; an operation never starts before the
   operation issued just before it has started. Compute operations run one at a time on the
   compute stream, transfers one at a time on the transfer stream; the two overlap.
2. Compute operations follow the chain rules (`solvers.chain.simulator`): what they need must
   be on the device (a forward or a backward names a stage 0..L-1; the loss is stage L whatever
   its index), what they produce is allocated when they start (output + overhead, the
   overhead per mode as `chain.simulator.op_cost` charges it: o_fa[i] for F_all(i), o_fn[i] for
   F_ck(i) / F_n(i), o_b[i] for B(i) and the loss), and what they free is released when they
   end. A value being prefetched is waited for.
3. ``Off(v)`` needs v on the device and starts once v is complete; it takes
   size(v) / bandwidth + latency (no time when the host already holds a copy of v); the
   device copy is released when the copy has ended and every earlier-issued reader of v has
   finished. v is then on the host (and, in the issue order, no longer on the device).
4. ``Pre(v)`` needs v on the host; it starts once the previous device copy of v has been
   released (by an ``Off`` or by the compute operation that freed it); its device buffer is
   allocated when it starts, and v is usable when it ends.
   A host copy exists from the end of its ``Off`` (host memory is not limited; its peak is
   reported): a tape abar_{i+1}'s until B(i) ends (the backward uses the tape up, so no later
   ``Pre`` of it is valid), a standalone a_j's until the step ends (also after F_n, B or the
   loss freed its device copy: a later ``Pre(a_j)`` brings it back), as the executor
   (`models.offload.executor`) does. At equal times (as in rule 6) host releases come first.
5. An operation with ``not_before`` t starts no earlier than t.
6. Memory is swept over time; at equal times (up to a relative tolerance `TIME_RTOL`, float noise)
   the releases of operations that started earlier come first, then the operations that start at
   that time in issue order, each allocating before it releases (a zero-length operation is
   charged while it "runs", and an Off releases after a zero-length reader of its value has
   allocated), so a schedule without transfers is charged exactly as by the chain simulator,
   zero-length operations included.

A violation names the first operation (in issue order) that breaks a logical rule, or, for
memory, the operation whose allocation first exceeds the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op
from ..chain.simulator import Violation, op_cost
from ..units import memory_unit, size_unit_name
from .instance import OffloadInstance
from .schedule import OFF, OffloadSchedule, Transfer


@dataclass(frozen=True)
class TimedOp:
    """One operation as replayed: stream ("compute" or "transfer"), start and end times."""

    op: Op | Transfer
    stream: str
    start: float
    end: float


@dataclass
class OffloadSimulation:
    """Replay of an offloading schedule: timed ops, first violation, device and host peaks (bytes), and the device
    memory `timeline`."""
    ops: list[TimedOp] = field(default_factory=list)
    violation: Violation | None = None
    peak_memory: int = 0
    host_peak: int = 0
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (time, device bytes) after each event

    @property
    def valid(self) -> bool:
        """True when the replay met no violation."""
        return self.violation is None

    @property
    def makespan(self) -> float:
        """End of the last operation, compute or transfer (the chain's time unit)."""
        return max((t.end for t in self.ops), default=0.0)

    def compute_busy(self) -> float:
        """Total time the compute stream is busy."""
        return sum(t.end - t.start for t in self.ops if t.stream == "compute")


Value = tuple[str, int]  # ("a", j) | ("abar", j) | ("d", j)

#: times closer than TIME_RTOL * |t| (time unit; purely relative, no absolute floor: an instance whose times are
#: 1e-12 units is swept as finely as one of seconds) count as equal in the memory sweep (float noise of sums of
#: durations and of pinned starts); far below any real duration, so it merges no positive-length operation
TIME_RTOL = 1e-12


class MemEvent(NamedTuple):
    """A change of device memory: `delta` bytes at time `t`, caused by op #`pos` (issue order); `since` is the start
    of the operation that holds the memory up to `t` (t itself for an allocation); `sub` orders one op's events at
    the same time (0 allocation, 1 release)."""

    t: float
    since: float
    delta: int
    pos: int
    sub: int


def simulate(inst: OffloadInstance, schedule: OffloadSchedule, budget: int | None = None) -> OffloadSimulation:
    """Replay `schedule`; see the module docstring for the rules."""
    chain = inst.chain
    L = chain.length
    x, xbar = chain.x, chain.xbar
    unit = size_unit_name(memory_unit(chain))  # named in a violation's message, after the budget

    def size(v: Value) -> int:
        return int(xbar[v[1]]) if v[0] == "abar" else int(x[v[1]])

    on_device: dict[Value, float] = {("a", 0): 0.0}  # value -> time it is complete on the device
    on_host: dict[Value, float] = {}
    last_read: dict[Value, tuple[float, float, int]] = {}  # value -> (end, start, position) of its last reader
    freed_at: dict[Value, float] = {}  # when the last device copy of a value was released
    done_backward: set[int] = set()
    events: list[MemEvent] = []
    host_events: list[tuple[float, int]] = []
    sim = OffloadSimulation()
    compute_free = transfer_free = issue_floor = 0.0

    def fail(pos: int, op, reason: str) -> OffloadSimulation:
        sim.violation = Violation(pos, op, reason)
        _sweep(sim, events, host_events, budget, schedule, x[0], stop_at=pos, unit=unit)
        return sim

    def activation(j: int) -> Value | None:
        if ("a", j) in on_device:
            return ("a", j)
        if ("abar", j) in on_device:
            return ("abar", j)
        return None

    for pos, op in enumerate(schedule.ops):
        if isinstance(op, Transfer):
            v: Value = (op.value, op.index)
            if op.value == "abar" and not 1 <= op.index <= L:
                return fail(pos, op, f"abar_{op.index} does not exist")
            if op.kind == OFF:
                if v not in on_device:
                    return fail(pos, op, f"{op.value}_{op.index} is not on the device")
                start = max(transfer_free, issue_floor, on_device[v], schedule.release_time(pos))
                if v in on_host:  # a host copy exists already: only the device copy is dropped
                    end = start
                else:
                    end = start + inst.transfer_time(size(v))
                    host_events.append((end, size(v)))
                    on_host[v] = end
                events.append(_off_release(start, end, pos, -size(v), last_read.get(v)))
                release = events[-1].t
                freed_at[v] = release
                del on_device[v]
            else:
                if v not in on_host:
                    used = op.value == "abar" and op.index - 1 in done_backward
                    why = f" (B({op.index - 1}) used the tape up)" if used else ""
                    return fail(pos, op, f"{op.value}_{op.index} is not on the host{why}")
                if v in on_device:
                    return fail(pos, op, f"{op.value}_{op.index} is already on the device")
                start = max(transfer_free, issue_floor, on_host[v], freed_at.get(v, 0.0), schedule.release_time(pos))
                end = start + inst.transfer_time(size(v))
                events.append(MemEvent(start, start, size(v), pos, 0))
                on_device[v] = end
            transfer_free = end
            issue_floor = start
            sim.ops.append(TimedOp(op, "transfer", start, end))
            continue

        kind, i = op
        if kind != LOSS and not 0 <= i < L:  # as the chain simulator: F(L) or B(L) has no block to run
            return fail(pos, op, f"stage {i} outside 0..{L - 1}")
        i = L if kind == LOSS else i
        needs: list[Value] = []
        if kind in (F_ALL, F_CK, F_N):
            src = activation(i)
            if src is None:
                return fail(pos, op, f"a_{i} is not on the device")
            needs = [src]
            out: Value = ("abar", i + 1) if kind == F_ALL else ("a", i + 1)
            if out in on_device:
                return fail(pos, op, f"{out[0]}_{out[1]} is already on the device")
            out_size, overhead, duration = op_cost(chain, kind, i)  # per mode: o_fa for F_all, o_fn else
        else:
            if i in done_backward:
                return fail(pos, op, "the loss already ran" if kind == LOSS else f"B({i}) already ran")
            src = activation(i)
            if src is None:
                return fail(pos, op, f"a_{i} is not on the device")
            needs = [src]
            if kind == B:
                for v in (("abar", i + 1), ("d", i + 1)):
                    if v not in on_device:
                        return fail(pos, op, f"{'delta' if v[0] == 'd' else v[0]}_{v[1]} is not on the device")
                    needs.append(v)
            out = ("d", i)
            out_size, overhead, duration = op_cost(chain, kind, i)
        start = max([compute_free, issue_floor, schedule.release_time(pos)] + [on_device[v] for v in needs])
        end = start + duration
        events.append(MemEvent(start, start, out_size + overhead, pos, 0))
        released = overhead
        for v in needs:
            if v not in last_read or end >= last_read[v][0]:
                last_read[v] = (end, start, pos)
        on_device[out] = end
        freed: list[Value] = []
        if kind == F_N or kind == LOSS:
            freed = [("a", i)] if ("a", i) in on_device else []
        elif kind == B:
            done_backward.add(i)
            freed = [("abar", i + 1), ("d", i + 1)] + ([("a", i)] if ("a", i) in on_device else [])
        if kind == LOSS:
            done_backward.add(L)
        for v in freed:
            released += size(v)
            del on_device[v]
            freed_at[v] = end  # rule 4: a later Pre(v) waits for this release too
        if kind == B and ("abar", i + 1) in on_host:  # rule 4: the backward uses the tape's host copy up
            del on_host[("abar", i + 1)]
            host_events.append((end, -size(("abar", i + 1))))
        events.append(MemEvent(end, start, -released, pos, 1))
        compute_free = end
        issue_floor = start
        sim.ops.append(TimedOp(op, "compute", start, end))

    if 0 not in done_backward:
        missing = sorted(set(range(L + 1)) - done_backward, reverse=True)
        names = ["Loss" if j == L else f"B({j})" for j in missing]
        return fail(len(schedule.ops), None, f"incomplete: missing backward {', '.join(names[:5])}")
    _sweep(sim, events, host_events, budget, schedule, x[0], unit=unit)
    return sim


def _off_release(start: float, end: float, pos: int, delta: int, reader: tuple[float, float, int] | None) -> MemEvent:
    """The release (`delta` bytes) of a value's device copy by its Off at `pos` (rule 3): when the copy
    [start, end) has ended and the last earlier-issued reader (end, start, position) has finished, whichever comes
    later in the sweep (rule 6). Released by the copy, it belongs to the Off: a copy that started earlier releases
    before the allocations at `end`; a zero-length one (the host holds v already) starts at `end`, so it releases in
    issue order among the operations starting then, after those issued before it have allocated, even when a reader
    ends at that time too. Released at a later reader's end, or at the end of a reader ending with a copy that
    started earlier, it is tied to that reader (after its allocation when the reader has zero length)."""
    if reader is not None:
        together = _same_time(*sorted((reader[0], end)))  # the reader ends with the copy (float noise aside)
        if (reader[0] > end and not together) or (together and not _same_time(start, end)):
            return MemEvent(reader[0], reader[1], delta, reader[2], 1)
    return MemEvent(end, start, delta, pos, 1)


def _same_time(a: float, b: float) -> bool:
    """True when times a <= b are equal up to float noise: `TIME_RTOL` of the larger magnitude, with no absolute
    floor (two zeros are equal; 1e-12 and 2e-12 are not)."""
    return b - a <= TIME_RTOL * max(abs(a), abs(b))


def _time_classes(events: list[MemEvent]) -> dict[float, int]:
    """Map every event time and start to the index of its class of equal times (a class spans at most the
    tolerance from its earliest time)."""
    classes: dict[float, int] = {}
    anchor, k = None, -1
    for t in sorted({e.t for e in events} | {e.since for e in events}):
        if anchor is None or not _same_time(anchor, t):
            anchor, k = t, k + 1
        classes[t] = k
    return classes


def _sweep_order(events: list[MemEvent]) -> list[MemEvent]:
    """Events in sweep order (rule 6): by time class; in a class, first the releases of operations that started in an
    earlier class (by time), then the rest in issue order, each op's allocation before its release."""
    cls = _time_classes(events)

    def key(e: MemEvent) -> tuple[int, int, float, int]:
        if e.delta <= 0 and cls[e.since] < cls[e.t]:
            return (cls[e.t], 0, e.t, 0)
        return (cls[e.t], 1, e.pos, e.sub)

    return sorted(events, key=key)


def _sweep(sim: OffloadSimulation, events: list[MemEvent], host_events: list[tuple[float, int]], budget: int | None,
           schedule: OffloadSchedule, initial: int, stop_at: int | None = None, unit: str = "bytes") -> None:
    """Sweep device memory over `events` (rule 6) into `sim`'s timeline and peak; flag the first allocation over
    `budget` (one of an op before `stop_at`; the message names the chain's memory unit `unit` after the budget,
    `units.size_unit_name`: "bytes" without ``meta.units.memory``); host peak from `host_events` (`_host_peak`)."""
    mem = int(initial)
    peak = mem
    sim.timeline = [(0.0, mem)]
    last_t = 0.0
    for e in _sweep_order(events):
        mem += e.delta
        last_t = max(last_t, e.t)  # monotone despite the tolerance
        sim.timeline.append((last_t, mem))
        if mem > peak:
            peak = mem
            if budget is not None and mem > budget and sim.violation is None and (stop_at is None or e.pos < stop_at):
                sim.violation = Violation(e.pos, schedule.ops[e.pos],
                                          f"memory over budget: {mem} > {budget} {unit} at t={e.t:.6g}")
    sim.peak_memory = peak
    sim.host_peak = _host_peak(host_events)


def _host_peak(host_events: list[tuple[float, int]]) -> int:
    """The largest host memory (bytes) over `host_events` (time, signed bytes: a copy's arrival at its Off's end, a
    tape's release at its backward's end): at equal times (up to `TIME_RTOL`, as in rule 6) the releases first."""
    classes: dict[float, int] = {}
    anchor, k = None, -1
    for t in sorted({t for t, _ in host_events}):
        if anchor is None or not _same_time(anchor, t):
            anchor, k = t, k + 1
        classes[t] = k
    host = peak = 0
    for _, delta in sorted(host_events, key=lambda e: (classes[e[0]], e[1] > 0, e[0])):
        host += delta
        peak = max(peak, host)
    return peak


def memory_profile(inst: OffloadInstance, schedule: OffloadSchedule) -> list[dict[str, Any]]:
    """Device memory over time: one row per interval between memory events, with start and end
    (time unit) and the bytes held then (``mem_during``); the replay stops at the first
    violation of a logical rule."""
    sim = simulate(inst, schedule)
    points = sim.timeline
    rows = []
    for k, (t, mem) in enumerate(points):
        end = points[k + 1][0] if k + 1 < len(points) else max(t, sim.makespan)
        rows.append({"start": t, "end": end, "mem_during": int(mem), "mem_after": int(mem)})
    return rows
