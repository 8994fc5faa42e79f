"""Two-stream simulator for offloading schedules (compute stream + transfer stream).

Rules (documented here, next to the code, as the design notes ask):

1. Operations are *issued* in the schedule's order; an operation never starts before the
   operation issued just before it has started. Compute operations run one at a time on the
   compute stream, transfers one at a time on the transfer stream; the two overlap.
2. Compute operations follow the chain rules (`solvers.chain.simulator`): what they need must
   be on the device, what they produce is allocated when they start (output + overhead, the
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
   The host copy stays (host memory is not limited; its peak is reported).
5. An operation with ``not_before`` t starts no earlier than t.
6. Memory is swept over time; at equal times releases come before allocations, so a schedule
   without transfers is charged exactly as by the chain simulator.

A violation names the first operation (in issue order) that breaks a logical rule, or, for
memory, the operation whose allocation first exceeds the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op
from ..chain.simulator import Violation, op_cost
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


def simulate(inst: OffloadInstance, schedule: OffloadSchedule, budget: int | None = None) -> OffloadSimulation:
    """Replay `schedule`; see the module docstring for the rules."""
    chain = inst.chain
    L = chain.length
    x, xbar = chain.x, chain.xbar

    def size(v: Value) -> int:
        return int(xbar[v[1]]) if v[0] == "abar" else int(x[v[1]])

    on_device: dict[Value, float] = {("a", 0): 0.0}  # value -> time it is complete on the device
    on_host: dict[Value, float] = {}
    last_read: dict[Value, float] = {}
    freed_at: dict[Value, float] = {}  # when the last device copy of a value was released
    done_backward: set[int] = set()
    events: list[tuple[float, int, int, int]] = []  # (time, 0 release / 1 allocate, bytes, op position)
    host_events: list[tuple[float, int]] = []
    sim = OffloadSimulation()
    compute_free = transfer_free = issue_floor = 0.0

    def fail(pos: int, op, reason: str) -> OffloadSimulation:
        sim.violation = Violation(pos, op, reason)
        _sweep(sim, events, host_events, budget, schedule, x[0], stop_at=pos)
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
                release = max(end, last_read.get(v, 0.0))
                events.append((release, 0, -size(v), pos))
                freed_at[v] = release
                del on_device[v]
            else:
                if v not in on_host:
                    return fail(pos, op, f"{op.value}_{op.index} is not on the host")
                if v in on_device:
                    return fail(pos, op, f"{op.value}_{op.index} is already on the device")
                start = max(transfer_free, issue_floor, on_host[v], freed_at.get(v, 0.0), schedule.release_time(pos))
                end = start + inst.transfer_time(size(v))
                events.append((start, 1, size(v), pos))
                on_device[v] = end
            transfer_free = end
            issue_floor = start
            sim.ops.append(TimedOp(op, "transfer", start, end))
            continue

        kind, i = op
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
        events.append((start, 1, out_size + overhead, pos))
        released = overhead
        for v in needs:
            last_read[v] = max(last_read.get(v, 0.0), end)
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
        events.append((end, 0, -released, pos))
        compute_free = end
        issue_floor = start
        sim.ops.append(TimedOp(op, "compute", start, end))

    if 0 not in done_backward:
        missing = sorted(set(range(L + 1)) - done_backward, reverse=True)
        names = ["Loss" if j == L else f"B({j})" for j in missing]
        return fail(len(schedule.ops), None, f"incomplete: missing backward {', '.join(names[:5])}")
    _sweep(sim, events, host_events, budget, schedule, x[0])
    return sim


def _sweep(sim, events, host_events, budget, schedule, initial, stop_at: int | None = None) -> None:
    mem = int(initial)
    peak = mem
    sim.timeline = [(0.0, mem)]
    # times equal up to float noise count as equal, so that releases still come first
    for t, _order, delta, pos in sorted(events, key=lambda e: (round(e[0], 9), e[1])):
        mem += delta
        sim.timeline.append((t, mem))
        if mem > peak:
            peak = mem
            if budget is not None and mem > budget and sim.violation is None and (stop_at is None or pos < stop_at):
                sim.violation = Violation(pos, schedule.ops[pos], f"memory over budget: {mem} > {budget} at t={t:.6g}")
    sim.peak_memory = peak
    host, host_peak = 0, 0
    for _, delta in sorted(host_events):
        host += delta
        host_peak = max(host_peak, host)
    sim.host_peak = host_peak


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
