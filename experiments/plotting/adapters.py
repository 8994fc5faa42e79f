"""Built-in timeline adapters: chain and join networks (Problem 1), graph (Problem 2),
offloading (Problem 3) and pipeline partitions (Problem 4).

Each turns the problem's own simulator output into a `Timeline`; the memory drawn is the
simulator's, never recomputed here. An adapter whose package is not importable is not
registered (the generic ``memory_profile`` path of `timeline` may still apply).
"""

from __future__ import annotations

import importlib
import numbers
from typing import Any

import numpy as np
from memsched.solvers.errors import InputError

from .timeline import (
    _ADAPTERS,
    _DEFAULT_ROWS,
    CHAIN_ROWS,
    TRANSFER_ROW,
    Bar,
    Failure,
    MemorySeries,
    Timeline,
    failure_position,
    peak_time_of,
    plateau_middle,
    register_timeline,
    step_vertices,
    units_of,
)


# ---------------------------------------------------------------------------- chains
def chain_timeline(chain: Any, schedule: Any, budget: int | None = None) -> Timeline:
    """Replay with `solvers.chain.simulate`; forwards of a stage already computed once are
    recomputations (category ``recompute F_all`` / ``recompute F_ck`` / ``recompute F_n``).
    A schedule that breaks a rule is drawn up to its failing op (category ``failed``); one over the
    budget has that op's memory while it runs as ``failure.memory`` (`_over_budget_step`), which the
    figure draws over the op. The makespan and peak are the simulator's for the whole schedule
    (`_whole_numbers`)."""
    from memsched.solvers.chain.schedule import FORWARD_KINDS, LOSS, Schedule
    from memsched.solvers.chain.simulator import simulate

    ops = schedule.ops if isinstance(schedule, Schedule) else list(schedule)
    whole = simulate(chain, ops, budget)
    sim = whole.before_violation()  # drawn up to the failing op
    steps = [(s.start, s.end, float(s.mem_during), float(s.mem_after)) for s in sim.steps]
    seen: set[int] = set()
    bars = []
    for s in sim.steps:
        kind, i = s.op
        bars.append(Bar(_DEFAULT_ROWS[kind], s.start, s.end, _chain_category(kind, i, seen, FORWARD_KINDS),
                        "L" if kind == LOSS else str(i)))
    over = _over_budget_step(whole, budget)
    times, values = step_vertices(sim.initial_memory, steps)
    failure = None
    if sim.violation is not None:
        v = sim.violation
        t, mem = sim.makespan, float(over.mem_during if over else sim.final_memory)
        if v.op is not None and v.position < len(ops):
            kind, i = v.op
            duration = over.end - over.start if over else _chain_duration(chain, kind, i)
            if kind in _DEFAULT_ROWS:
                bars.append(Bar(_DEFAULT_ROWS[kind], t, t + duration, "failed",
                                "L" if kind == LOSS else str(i), failed=True))
        failure = Failure(t, mem, str(v))
    makespan, peak, partial = _whole_numbers(whole, len(ops))
    time_unit, memory_unit = units_of(chain)
    return Timeline("chain", [MemorySeries(times, values)], bars, list(CHAIN_ROWS), makespan, peak,
                    peak_time_of(steps, peak), budget, failure, time_unit, memory_unit, partial=partial)


def _over_budget_step(sim: Any, budget: int | None) -> Any | None:
    """The `Step` of the failing op of a chain or join replay `sim` (uncut) when it fails by going over
    `budget` (the simulator replays it, so its times and memory while it runs are known); None for a
    valid replay, a broken rule (the op never ran) or a violation of no op (an incomplete schedule)."""
    v = sim.violation
    if v is None or v.op is None or budget is None or v.position >= len(sim.steps):
        return None
    step = sim.steps[v.position]
    return step if step.mem_during > budget else None


def _whole_numbers(sim: Any, n_ops: int) -> tuple[float, int, bool]:
    """(makespan, peak memory, partial) of a chain or join replay `sim` (uncut, as `replay` and
    ``memsched simulate`` give them): the whole schedule's, since memory over the budget does not stop
    the simulator; partial (True) when a broken rule ended the replay before its last op."""
    return float(sim.makespan), int(sim.peak_memory), len(sim.steps) < n_ops


def _chain_category(kind: str, i: int, seen: set[int], forward_kinds: tuple[str, ...]) -> str:
    if kind not in forward_kinds:
        return kind
    if i in seen:
        return f"recompute {kind}"
    seen.add(i)
    return kind


def _chain_duration(chain: Any, kind: str, i: int) -> float:
    L = chain.length
    if not 0 <= i <= L:
        return 0.0
    return float(chain.u_b[i] if kind in ("B", "Loss") else chain.u_f[i])


# ---------------------------------------------------------------------------- joins
def join_timeline(join: Any, schedule: Any, budget: int | None = None) -> Timeline:
    """Replay with `solvers.join.simulate`: rows "branch b fwd" / "branch b bwd" per branch
    and the shared loss; recomputations, a failing op and the whole schedule's makespan and peak as
    for chains (`chain_timeline`)."""
    from memsched.solvers.chain.schedule import FORWARD_KINDS, LOSS
    from memsched.solvers.join.schedule import JoinSchedule
    from memsched.solvers.join.simulator import simulate

    ops = schedule.ops if isinstance(schedule, JoinSchedule) else _join_ops(schedule)
    whole = simulate(join, ops, budget)
    sim = whole.before_violation()  # drawn up to the failing op
    names = [getattr(c, "name", "") or f"branch {b}" for b, c in enumerate(join.branches)]

    def row(op: Any) -> str:
        if op.kind == LOSS:
            return "loss"
        return f"{names[op.branch]} {'fwd' if op.kind in FORWARD_KINDS else 'bwd'}"

    seen: set[tuple[int, int]] = set()
    bars = []
    for s in sim.steps:
        op = s.op
        category = op.kind
        if op.kind in FORWARD_KINDS:
            if (op.branch, op.stage) in seen:
                category = f"recompute {op.kind}"
            seen.add((op.branch, op.stage))
        bars.append(Bar(row(op), s.start, s.end, category, "" if op.kind == LOSS else str(op.stage)))
    steps = [(s.start, s.end, float(s.mem_during), float(s.mem_after)) for s in sim.steps]
    over = _over_budget_step(whole, budget)
    times, values = step_vertices(sim.initial_memory, steps)
    failure = None
    if sim.violation is not None:
        v = sim.violation
        t, mem = sim.makespan, float(over.mem_during if over else steps[-1][3] if steps else sim.initial_memory)
        if v.op is not None and v.position < len(ops):
            op = v.op
            if over:
                duration = over.end - over.start
            elif op.kind == LOSS:
                duration = float(join.loss_time)
            elif 0 <= op.branch < len(join.branches) and 0 <= op.stage < join.branches[op.branch].length:
                c = join.branches[op.branch]
                duration = float(c.u_f[op.stage] if op.kind in FORWARD_KINDS else c.u_b[op.stage])
            else:
                duration = 0.0
            if op.kind == LOSS or 0 <= op.branch < len(join.branches):
                bars.append(Bar(row(op), t, t + duration, "failed", "" if op.kind == LOSS else str(op.stage),
                                failed=True))
        failure = Failure(t, mem, str(v))
    rows = [f"{n} {d}" for n in names for d in ("fwd", "bwd")] + ["loss"]
    time_unit, memory_unit = units_of(join)
    if time_unit is None and memory_unit is None and join.branches:
        time_unit, memory_unit = units_of(join.branches[0])
    makespan, peak, partial = _whole_numbers(whole, len(ops))
    return Timeline("join", [MemorySeries(times, values)], bars, rows, makespan, peak,
                    peak_time_of(steps, peak), budget, failure, time_unit, memory_unit, partial=partial)


def _join_ops(schedule: Any) -> list[Any]:
    """A join's plain schedule as `JOp` operations (a plain (kind, branch, stage) triple becomes one, so
    that the rows and labels can name its fields); any other entry is an `InputError` naming ``schedule``."""
    from memsched.solvers.chain.schedule import KINDS
    from memsched.solvers.join.schedule import JOp

    ops = []
    for i, op in enumerate(schedule):
        if not isinstance(op, JOp):
            if not (isinstance(op, (tuple, list)) and len(op) == 3 and op[0] in KINDS):
                raise InputError(f"a join schedule holds operations (kind, branch, stage); entry {i} is {op!r}"[:300],
                                 field="schedule")
            op = JOp(*op)
        ops.append(op)
    return ops


# ---------------------------------------------------------------------------- offloading
def offload_timeline(inst: Any, schedule: Any, budget: int | None = None) -> Timeline:
    """Replay with `solvers.offload.simulate_offload` (two streams): compute ops on the chain
    rows, offloads and prefetches on a "transfers" row; the memory line is the simulator's
    sweep of allocations and releases over time (``timeline``). A schedule that breaks a rule is drawn
    up to its failing op (one over the budget: with the memory that op's allocation takes it to as
    ``failure.memory``). The makespan and peak are the simulator's for the whole schedule (memory over
    the budget does not stop it; a broken rule does: ``partial``)."""
    from memsched.solvers.offload.schedule import OFF, Transfer
    from memsched.solvers.offload.simulator import simulate as simulate_offload

    sim = simulate_offload(inst, schedule, budget)
    pos = sim.violation.position if sim.violation is not None else None
    timed = list(sim.ops)
    shown = timed if pos is None else timed[:pos]
    seen: set[int] = set()
    bars = []

    def bar(t: Any, failed: bool = False) -> Bar:
        op = t.op
        if isinstance(op, Transfer):
            category = "offload" if op.kind == OFF else "prefetch"
            return Bar(TRANSFER_ROW, t.start, t.end, "failed" if failed else category, f"{op.value}_{op.index}",
                       failed=failed)
        kind, i = op
        category = _chain_category(kind, i, seen, ("F_all", "F_ck", "F_n"))
        return Bar(_DEFAULT_ROWS[kind], t.start, t.end, "failed" if failed else category,
                   "L" if kind == "Loss" else str(i), failed=failed)

    bars = [bar(t) for t in shown]
    level = float(inst.chain.x[0])
    times, values = [0.0], [level]
    t_fail = None
    if pos is not None:
        t_fail = timed[pos].start if pos < len(timed) else max((b.end for b in bars), default=0.0)
    for t, mem in sorted(sim.timeline[1:], key=lambda e: e[0]):
        if t_fail is not None and t >= t_fail:
            break
        times += [t, t]
        values += [level, float(mem)]
        level = float(mem)
    end = t_fail if t_fail is not None else sim.makespan
    times.append(end)
    values.append(level)
    failure = None
    if sim.violation is not None:
        mem = level
        at_fail = [float(m) for t, m in sim.timeline[1:] if t_fail is not None and t == t_fail]
        if at_fail and budget is not None and max(at_fail) > budget:
            mem = max(at_fail)
        if pos is not None and pos < len(timed):
            bars.append(bar(timed[pos], failed=True))
        failure = Failure(float(t_fail or 0.0), mem, str(sim.violation))
    values_arr = np.asarray(values)
    peak = int(sim.peak_memory)  # the whole schedule's, unless a broken rule ended the replay (partial)
    peak_time = plateau_middle(times, values, peak)
    has_transfers = any(b.row == TRANSFER_ROW for b in bars) or any(isinstance(op, Transfer) for op in schedule.ops)
    rows = list(CHAIN_ROWS) + ([TRANSFER_ROW] if has_transfers else [])
    time_unit, memory_unit = units_of(inst.chain)
    return Timeline("offload", [MemorySeries(np.asarray(times), values_arr)], bars, rows, float(sim.makespan),
                    peak, peak_time, budget, failure, time_unit, memory_unit,
                    extra={"host_peak": int(sim.host_peak)}, partial=len(timed) < len(schedule.ops))


# ---------------------------------------------------------------------------- graphs
def graph_timeline(graph: Any, schedule: Any, budget: int | None = None) -> Timeline:
    """Replay with `solvers.graph.simulate`; step s runs for ``cost_cpu`` of its node, its
    memory is the simulator's ``memory[s]`` and drops after it by the copies whose last
    consumer is s. Rows: forward and backward nodes (graph attribute ``backward``); a node
    computed again is a recomputation. An invalid sequence is drawn up to its failing step (a node index
    out of range: no bar of its own, the failure marked where it would start; its memory, the simulator's,
    as ``failure.memory``). The makespan and peak are the simulator's, which replays every step of the
    sequence whatever its violation."""
    from memsched.solvers.graph.simulator import GraphSchedule, simulate

    seq = schedule.indices(graph) if isinstance(schedule, GraphSchedule) else _node_indices(schedule)
    sim = simulate(graph, seq, budget)
    N = len(seq)
    known = [0 <= v < graph.n for v in seq]  # a node out of range is a violation: drawn up to it, never indexed
    cpu = np.asarray([float(graph.cost_cpu[v]) if ok else 0.0 for v, ok in zip(seq, known)])
    ram = np.asarray([int(graph.cost_ram[v]) if ok else 0 for v, ok in zip(seq, known)], dtype=np.int64)
    ends = np.cumsum(cpu)
    starts = ends - cpu
    freed = np.zeros(N, dtype=np.int64)
    for c in range(N):
        freed[sim.retention_end[c]] += ram[c]
    memory = np.asarray(sim.memory, dtype=np.int64)
    after = memory - freed
    stop = N
    if sim.violation is not None:
        pos = failure_position(sim.violation)
        stop = pos if pos is not None and pos < N else N
    backward = list(getattr(graph, "backward", []) or [])
    has_rows = any(backward)
    names = list(getattr(graph, "names", []) or [])

    def row(v: int) -> str:
        if not has_rows:
            return "forward"
        return "backward" if backward[v] else "forward"

    def label(v: int) -> str:
        return str(names[v]) if v < len(names) and names[v] else str(graph.ids[v])

    seen: set[int] = set()
    bars = []
    for s in range(stop):
        v = seq[s]
        base = "backward" if row(v) == "backward" else "forward"
        bars.append(Bar(row(v), float(starts[s]), float(ends[s]), f"recompute {base}" if v in seen else base,
                        label(v)))
        seen.add(v)
    steps = [(float(starts[s]), float(ends[s]), float(memory[s]), float(after[s])) for s in range(stop)]
    times, values = step_vertices(0.0, steps)
    failure = None
    if sim.violation is not None:
        if stop < N:
            if known[stop]:
                bars.append(Bar(row(seq[stop]), float(starts[stop]), float(ends[stop]), "failed", label(seq[stop]),
                                failed=True))
            failure = Failure(float(starts[stop]), float(memory[stop]), str(sim.violation))
        else:
            failure = Failure(float(ends[-1]) if N else 0.0, float(values[-1]), str(sim.violation))
    peak = sim.peak_memory  # the simulator's for the whole sequence (it replays every step, as `simulate` says)
    time_unit, memory_unit = units_of(graph)
    rows = ["forward", "backward"] if has_rows else ["forward"]
    return Timeline("graph", [MemorySeries(times, values)], bars, rows, float(sim.makespan),
                    peak, peak_time_of(steps, peak), budget, failure, time_unit, memory_unit)


def _node_indices(schedule: Any) -> list[int]:
    """A graph's plain schedule as node indices: integers only (a bool, a float, a str is an `InputError`
    naming ``schedule``, as `memsched.simulate` says); indices out of range are the simulator's violation."""
    seq = list(schedule)
    for i, v in enumerate(seq):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise InputError(f"a graph schedule as a list holds node indices (ints); entry {i} is {v!r}"[:300],
                             field="schedule")
    return [int(v) for v in seq]


# ---------------------------------------------------------------------------- pipelines
def pipeline_timeline(inst: Any, partition: Any, budget: int | None = None) -> Timeline:
    """One batch of the partition played by `simulate_batch` (m micro-batches: the
    partition's, else 2 S): a row per stage (``stage s [layers]``, its layers as instance indices
    as `memory_profile` labels them: `Partition.stage_span`, ``0,2`` for a DAG stage) with its
    forwards and backwards labelled by micro-batch; one memory line per device, weights + buffers + the stash of each
    micro-batch in flight (allocated when its forward starts, freed when its backward ends),
    whose maximum is the simulator's per-stage memory once m >= S. A partition over `budget` is
    drawn up to the violation (`_up_to`): up to the forward that first takes a device over it; its
    period and peak stay the simulator's for the whole partition (``memsched simulate``'s).

    Straight pipelines only (one device per stage): `simulate_batch` has no event model of
    replicated stages (micro-batches dealt among replicas, the allreduce) nor of two stages
    sharing a device (the order a device runs them in), so such a partition (``replicas`` > 1,
    or ``device_of`` with two stages on one device: ``madpipe --replication``, the
    ``interleave*`` solvers) is an `InputError`; `simulate` still charges its period and memory. So is a
    partition `simulate` calls invalid (`check_partition`, an ``order`` that is not a topological
    permutation of the layers: `_order_problem`), as ``cannot draw this partition: <why>``.

    The title's period is the model's (`simulate`); where the replay's steady state
    (`replay_period`) is visibly slower (over `REPLAY_SHOWN`: with communication charged, or GPipe),
    ``extra["replay_period"]`` holds it and the title gives both."""
    from memsched.solvers.pipeline.simulator import check_partition, replay_period, simulate_batch, stage_stashes
    from memsched.solvers.pipeline.simulator import simulate as evaluate

    bad = _order_problem(inst, partition) or check_partition(inst, partition)
    if bad is not None:
        raise InputError(f"cannot draw this partition: {bad}")
    _check_drawable(partition)
    ev = evaluate(inst, partition, budget)
    S = len(partition.stages)
    m = int(partition.micro_batches or 2 * S)
    run = simulate_batch(inst, partition, m)
    stashes = stage_stashes(inst, partition)
    series, bars, rows = [], [], []
    for s in range(S):
        # its layers as instance indices (a DAG partition's, not positions in its order), as `memory_profile` says
        row = f"stage {s} [{partition.stage_span(s)}]"
        rows.append(row)
        stash = stashes[s]
        base = int(ev.stage_memory[s]) - int(ev.in_flight[s]) * stash  # weights + buffers (`simulate`)
        events = []
        for kind, k, start, end in run.ops[s]:
            bars.append(Bar(row, float(start), float(end), "forward" if kind == "F" else "backward", str(k)))
            events.append((float(start), stash) if kind == "F" else (float(end), -stash))
        events.sort()
        times, values, level = [0.0], [float(base)], base
        for t, delta in events:
            times += [t, t]
            values += [float(level), float(level + delta)]
            level += delta
        times.append(float(run.makespan))
        values.append(float(level))
        series.append(MemorySeries(np.asarray(times), np.asarray(values), row))
    # the title's peak is the simulator's for the whole partition, as its period, in every case (a 1F1B batch of
    # m < S micro-batches holds min(S - s, m) at stage s, as the simulator charges): marked where the largest
    # stage's line reaches it, else the figure marks the highest memory drawn (`draw._marked_peak`)
    peak, peak_stage = float(ev.peak_memory), int(np.argmax(ev.stage_memory))
    failure = None
    if ev.violation is not None and budget is not None:
        failure, series, bars = _violation(ev.violation, series, bars, rows, budget, peak_stage)
    peak_time = plateau_middle(series[peak_stage].times, series[peak_stage].values, peak)
    unit = next((name for name, scale in _time_units().items() if abs(scale - inst.time_unit) < 1e-15), None)
    extra: dict[str, Any] = {"micro_batches": m, "batch_makespan": run.makespan, "peak_stage": peak_stage}
    if inst.bandwidth is not None or partition.schedule != "1f1b":  # else the replay runs at T exactly
        replay = replay_period(inst, partition, m)
        if replay > float(ev.period) * (1.0 + REPLAY_SHOWN):  # never below T but by the estimate's error
            extra["replay_period"] = replay
    return Timeline("pipeline", series, bars, rows, float(ev.period), int(peak), peak_time, budget, failure,
                    unit, units_of(inst)[1] or "bytes", objective_name="period", memory_title="memory per device",
                    extra=extra)


#: relative excess of the replay's steady state over the model period from which a pipeline timeline's
#: title gives both: above `replay_period`'s error (0.4% on random instances up to 22 stages), visible at
#: the title's four digits
REPLAY_SHOWN = 0.005


def _violation(message: str, series: list[MemorySeries], bars: list[Bar], rows: list[str], budget: int,
               largest: int) -> tuple[Failure, list[MemorySeries], list[Bar]]:
    """The failure of a partition over `budget` (the simulator's `message`, naming its `largest` stage) and
    the batch drawn up to it (`_up_to`): at the forward that first takes a device over the budget, or at
    t = 0 where a device's weights and buffers alone exceed it (no forward has started: no failing
    operation); where the batch never goes over it (m < S micro-batches under 1F1B hold fewer than the
    simulator charges), at the forward that takes the `largest` stage to its highest. Memory in bytes."""
    crossing = _first_crossing(series, budget)
    if crossing is None:  # marked where the largest stage holds the most, the forward taking it there failing
        line = series[largest]
        index = int(np.argmax(line.values))
        t, v, worst = float(line.times[index]), float(line.values[index]), largest
        message += f"; the batch drawn holds at most {int(v)} bytes on stage {largest}"
    else:
        t, v, worst, index = crossing
        if index == 0:  # the line's first vertex: weights + buffers, before any forward
            message += f"; stage {worst}'s weights and buffers alone take {int(v)} bytes"
        elif worst != largest:  # the simulator names the largest stage; the batch stops where one first goes over
            message += f"; stage {worst} goes over it first ({int(v)} bytes)"
    failure = Failure(t, v, message)
    series, bars = _up_to(series, bars, t, rows[worst], index)
    return failure, series, bars


def _first_crossing(series: list[MemorySeries], budget: int) -> tuple[float, float, int, int] | None:
    """(time, memory, device, vertex index) of the earliest point over `budget` among all devices' memory
    lines (the forward that first takes a device over it, or the line's first vertex, index 0, where the
    device's weights and buffers alone exceed it; a tie at one time goes to the lowest device), or None when
    no line goes over it. Times in the pipeline's time unit, memory in bytes."""
    firsts = []
    for k, s in enumerate(series):
        over = np.flatnonzero(s.values > budget)
        if len(over):
            i = int(over[0])
            firsts.append((float(s.times[i]), k, float(s.values[i]), i))
    if not firsts:
        return None
    t, k, v, i = min(firsts)
    return t, v, k, i


def _up_to(series: list[MemorySeries], bars: list[Bar], t: float, row: str,
           index: int) -> tuple[list[MemorySeries], list[Bar]]:
    """The batch drawn up to the violation at time `t`, vertex `index` of the line of the stage on `row`
    (`_first_crossing`). Where that vertex is the start of a forward (`index` > 0): the operations started
    before `t`, that forward as the failing operation (category ``failed``, marked `Bar.failed`: the figure
    draws the memory line on over it, from the stage's level before it to the memory it needs), the failing
    stage's line up to its level before that forward. Where it is the line's first vertex (`index` 0, t = 0:
    weights and buffers over the budget), no operation and no failing one, every line keeping its first
    vertex (weights + buffers). Otherwise every other device's memory up to `t` included; every line runs
    on to `t`."""
    kept = [b for b in bars if b.start < t]
    if index > 0:
        kept += [Bar(b.row, b.start, b.end, "failed", b.label, failed=True) for b in bars
                 if b.row == row and b.start == t and b.category == "forward"][:1]
    cut = []
    for s in series:
        if s.label == row or index == 0:  # index 0: every device at its weights + buffers, before any forward
            times, values = s.times[:max(index, 1)], s.values[:max(index, 1)]
        else:
            times, values = s.times[s.times <= t], s.values[s.times <= t]
        if len(times) and times[-1] < t:  # each device's line runs on to the violation
            times, values = np.append(times, t), np.append(values, values[-1])
        cut.append(MemorySeries(times, values, s.label))
    return cut, kept


def _order_problem(inst: Any, partition: Any) -> str | None:
    """Why the partition's layer ``order`` (a DAG partition's topological order) is not one of `inst`'s
    layers, as `solvers.pipeline.simulate` says it (`Pipeline.reordered`: not a permutation of the layers,
    not topological); None when it has none or it is one."""
    if partition.order is None:
        return None
    try:
        inst.reordered(list(partition.order))
    except (ValueError, TypeError) as err:  # TypeError: entries that do not compare (not layer indices)
        return str(err) if isinstance(err, ValueError) else "the order must be a permutation of the layers"
    return None


def _check_drawable(partition: Any) -> None:
    """`InputError` for a partition the pipeline timeline cannot play (`pipeline_timeline`)."""
    why = None
    replicated = [(k, s.replicas) for k, s in enumerate(partition.stages) if s.replicas != 1]
    if replicated:
        k, r = replicated[0]
        why = f"stage {k} is replicated on {r} devices"
    elif partition.device_of is not None and len(set(partition.device_of)) < len(partition.stages):
        why = (f"its interleaved allocation (device_of) puts {len(partition.stages)} stages on "
               f"{len(set(partition.device_of))} devices")
    if why is not None:
        raise InputError(f"cannot draw this partition: {why}; the pipeline timeline draws straight pipelines only "
                         "(one device per stage); `memsched simulate` gives its period and memory")


def _time_units() -> dict[str, float]:
    from memsched.solvers.pipeline.instance import TIME_UNITS

    return TIME_UNITS


# ---------------------------------------------------------------------------- schedules from JSON
def schedule_from_json(problem: str, data: Any, instance: Any, *, path: str = "<schedule>") -> Any:
    """The problem's schedule from JSON, read by its descriptor's ``schedule_from_json`` (a
    `memsched solve --json` output holding the schedule is accepted)."""
    from memsched.solvers import registry

    return registry.get_problem(problem).schedule_from_json(data, instance, path=path)


def _register() -> None:
    for problem, module, fn in (("chain", "memsched.solvers.chain.simulator", chain_timeline),
                                ("join", "memsched.solvers.join.simulator", join_timeline),
                                ("offload", "memsched.solvers.offload.simulator", offload_timeline),
                                ("graph", "memsched.solvers.graph.simulator", graph_timeline),
                                ("pipeline", "memsched.solvers.pipeline.simulator", pipeline_timeline)):
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        if problem not in _ADAPTERS:  # an adapter registered before this import wins
            register_timeline(problem, fn)


_register()
