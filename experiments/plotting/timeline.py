"""What a schedule figure shows, independent of the problem: a `Timeline`.

A timeline is the drawing's data, computed from the problem's simulator (the one referee):

- ``memory``: one or more step functions (vertices ``times``, ``values``) of device memory
  over time, in the instance's size unit; for a chain, the memory while each op runs
  (``mem_during``) and the dip after it (``mem_after``);
- ``bars``: the operations as bars ``[start, end)`` on named rows, each with a colour
  category (``F_all``, ``recompute F_ck``, ``B``, ``forward``, ``offload`` ...);
- ``objective`` / ``peak_memory`` / ``peak_time``: the simulator's makespan (or period) and peak, as
  ``memsched simulate`` reports them, and where the peak is first reached in the drawing;
- ``failure``: for a schedule that breaks a rule, where the replay stopped and why.

A schedule over the budget is drawn up to its failing operation, whose memory while it runs is
``failure.memory`` (over the budget; the figure draws it over that operation), but its ``objective``
and ``peak_memory`` stay the whole schedule's: the simulators charge memory over the budget and go on.
Only a broken rule that ends the replay (an op whose inputs are missing) leaves numbers of the replayed
prefix alone; ``partial`` says so, and the figure's summary labels them "up to the violation".

Extension point: a problem gets its figure from, in this order,

1. an adapter registered with `register_timeline(problem, fn)` where
   ``fn(instance, schedule, budget) -> Timeline`` (chain, join, offload, graph and pipeline are
   built in, see `experiments.plotting.adapters`);
2. a duck-typed ``memory_profile(instance, schedule)`` in ``solvers.<problem>`` returning one
   dict per operation with ``op, start, end, mem_during, mem_after`` and optionally ``row``,
   ``category``, ``recompute`` (bool), ``label`` and ``overlaps`` (true for an op on a side
   stream, e.g. an offload or a prefetch, that the memory line must not follow); the violation
   comes from ``replay(instance, schedule, budget)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from memsched.solvers import registry
from memsched.solvers.errors import InputError


@dataclass(frozen=True)
class Bar:
    """One operation on the chart: ``[start, end)`` in the time unit, on row ``row``."""

    row: str
    start: float
    end: float
    category: str
    label: str = ""
    failed: bool = False


@dataclass
class MemorySeries:
    """Vertices of a memory step function (size unit); ``label`` names it when there are several."""

    times: np.ndarray
    values: np.ndarray
    label: str | None = None


@dataclass
class Failure:
    """Where a replay stopped: ``time`` (start of the failing op), the memory it reached or would
    reach (None when unknown) and the simulator's message."""

    time: float
    memory: float | None
    message: str


@dataclass
class Timeline:
    """Everything a schedule figure draws (see the module docstring)."""

    problem: str
    memory: list[MemorySeries]
    bars: list[Bar]
    rows: list[str]
    objective: float
    peak_memory: int
    peak_time: float
    budget: int | None = None
    failure: Failure | None = None
    time_unit: str | None = None
    memory_unit: str | None = None
    objective_name: str = "makespan"
    memory_title: str = "device memory"
    extra: dict[str, Any] = field(default_factory=dict)
    #: True when `objective` and `peak_memory` cover only the operations replayed before a violation that
    #: ended the replay (a broken rule), not the whole schedule
    partial: bool = False

    @property
    def end_time(self) -> float:
        """Right end of the time axis: the last bar's end or the last memory vertex."""
        ends = [b.end for b in self.bars] + [float(s.times[-1]) for s in self.memory if len(s.times)]
        if self.failure is not None:
            ends.append(self.failure.time)
        return max(ends, default=0.0)

    @property
    def plotted_peak(self) -> float:
        """Highest memory vertex drawn (equals `peak_memory` for a valid schedule)."""
        return max((float(np.max(s.values)) for s in self.memory if len(s.values)), default=0.0)

    @property
    def peak_drawn(self) -> bool:
        """True when the memory line reaches `peak_memory` (always for a valid schedule; for one drawn up to
        its violation, False when the whole schedule's peak comes at or after it)."""
        return any(len(s.values) for s in self.memory) and self.plotted_peak >= self.peak_memory


TimelineFn = Callable[[Any, Any, "int | None"], Timeline]
_ADAPTERS: dict[str, TimelineFn] = {}


def register_timeline(problem: str, fn: TimelineFn) -> None:
    """Make ``fn(instance, schedule, budget) -> Timeline`` the figure adapter of `problem`."""
    _ADAPTERS[problem] = fn


def timeline_for(problem: str, instance: Any, schedule: Any, budget: int | None = None) -> Timeline:
    """The `Timeline` of `schedule` on `instance` (adapter, else the generic memory_profile)."""
    from . import adapters  # noqa: F401  (registers the built-in adapters)

    if schedule is None:
        raise InputError("no schedule to draw")
    if problem in _ADAPTERS:
        return _ADAPTERS[problem](instance, schedule, budget)
    try:
        desc = registry.get_problem(problem)
    except ImportError:
        raise InputError(f"problem {problem!r} is not available in this installation") from None
    return profile_timeline(problem, instance, schedule, budget, desc)


# ---------------------------------------------------------------------------- shared helpers
CHAIN_ROWS = ("F_all", "F_ck / F_n", "B / loss")
TRANSFER_ROW = "transfers"
_DEFAULT_ROWS = {"F_all": "F_all", "F_ck": "F_ck / F_n", "F_n": "F_ck / F_n", "B": "B / loss", "Loss": "B / loss",
                 "offload": TRANSFER_ROW, "prefetch": TRANSFER_ROW, "transfer": TRANSFER_ROW,
                 "forward": "forward", "backward": "backward"}
_OP_NAME = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\(\s*([^)]*)\))?")
_POSITION = re.compile(r"(?:op #|step )(\d+)")


#: the memory unit of a file that names none (docs/cli.md, "Memory units": bytes when absent)
DEFAULT_MEMORY_UNIT = "bytes"
#: the time unit of a chain or join file that names none (docs/chain.md, join.md: ms); a graph's costs
#: (``cost_cpu``, ms or MFLOP, ...) have no default unit and stay unnamed
DEFAULT_TIME_UNIT = "ms"


def units_of(instance: Any) -> tuple[str | None, str]:
    """(time unit, memory unit) of `instance`: those its ``meta["units"]`` states (a join without its
    own: its first branch's), else the documented defaults: memory in `DEFAULT_MEMORY_UNIT` (bytes),
    the time of a chain or join in `DEFAULT_TIME_UNIT` (ms), of anything else None (no unit named)."""
    time_unit, memory_unit = _stated_units(instance)
    branches = getattr(instance, "branches", None)
    if branches:
        branch_time, branch_memory = _stated_units(branches[0])
        time_unit, memory_unit = time_unit or branch_time, memory_unit or branch_memory
    if time_unit is None and _timed_in_ms_by_default(instance):
        time_unit = DEFAULT_TIME_UNIT
    return time_unit, memory_unit or DEFAULT_MEMORY_UNIT


def _stated_units(instance: Any) -> tuple[str | None, str | None]:
    """(time unit, memory unit) as ``instance.meta["units"]`` states them, None where it states none."""
    meta = getattr(instance, "meta", None)
    units = meta.get("units") if isinstance(meta, dict) else None
    if not isinstance(units, dict):
        return None, None
    t, m = units.get("time"), units.get("memory")
    return (str(t) if t else None), (str(m) if m else None)


def _timed_in_ms_by_default(instance: Any) -> bool:
    """True for a chain or a join (their files' times are in ms unless ``meta.units.time`` says otherwise)."""
    from memsched.solvers.chain.instance import Chain
    from memsched.solvers.join.instance import Join

    return isinstance(instance, (Chain, Join))


def step_vertices(initial: float, steps: Sequence[tuple[float, float, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the memory line from (start, end, mem_during, mem_after) per sequential op:
    the memory is `mem_during` while the op runs and drops to `mem_after` at its end (the next
    op then adds its output and overhead)."""
    times, values = [0.0], [float(initial)]
    for start, end, during, after in steps:
        times += [start, end, end]
        values += [during, during, after]
    return np.asarray(times, dtype=float), np.asarray(values, dtype=float)


def peak_time_of(steps: Sequence[tuple[float, float, float, float]], peak: float) -> float:
    """Middle of the first op whose memory during reaches `peak` (0 when none does)."""
    for start, end, during, _ in steps:
        if during >= peak:
            return 0.5 * (start + end)
    return 0.0


def plateau_middle(times: Sequence[float], values: Sequence[float], peak: float) -> float:
    """Middle of the first stretch of a step line (vertices `times`, `values`) at `peak`."""
    for k, value in enumerate(values):
        if value >= peak:
            return 0.5 * (float(times[k]) + float(times[k + 1] if k + 1 < len(times) else times[k]))
    return 0.0


def failure_position(message: str | None) -> int | None:
    """The op / step index a violation message names ("op #12 ..." or "step 12 ..."), if any."""
    if not message:
        return None
    match = _POSITION.search(message)
    return int(match.group(1)) if match else None


def profile_timeline(problem: str, instance: Any, schedule: Any, budget: int | None, module: Any) -> Timeline:
    """Generic adapter over ``memory_profile`` and ``replay`` of `module` (a `Problem` descriptor or
    a problem package; module docstring, item 2)."""
    profile = list(module.memory_profile(instance, schedule))
    replay = module.replay(instance, schedule, budget)
    seen: set[tuple[str, str]] = set()
    bars, steps = [], []
    for entry in profile:
        name, arg = _split_op(str(entry.get("op", "")))
        recompute = entry.get("recompute")
        if recompute is None:
            recompute = name in ("F_all", "F_ck", "F_n", "forward") and (name[:1], arg) in seen
        seen.add((name[:1], arg))
        category = entry.get("category") or (f"recompute {name}" if recompute else name)
        row = entry.get("row") or _DEFAULT_ROWS.get(name, name)
        start, end = float(entry["start"]), float(entry["end"])
        bars.append(Bar(row, start, end, category, str(entry.get("label", arg))))
        if not entry.get("overlaps"):
            steps.append((start, end, float(entry["mem_during"]), float(entry["mem_after"])))
    initial = steps[0][2] if steps else 0.0
    if hasattr(module, "initial_memory"):
        initial = float(module.initial_memory(instance))
    times, values = step_vertices(initial, steps)
    rows = _row_order([b.row for b in bars])
    failure = None
    if replay.violation is not None:
        pos = failure_position(replay.violation)
        memory: float | None = None
        if pos is not None and pos < len(bars):
            failing: list[Bar] = []
            if pos < len(steps) and budget is not None and steps[pos][2] > budget:
                memory = steps[pos][2]  # the failing op's memory while it runs: over the budget
                b = bars[pos]
                failing = [Bar(b.row, b.start, b.end, "failed", b.label, failed=True)]
            bars, steps = bars[:pos] + failing, steps[:pos]
            times, values = step_vertices(initial, steps)
        t = steps[-1][1] if steps else 0.0
        failure = Failure(t, float(values[-1]) if memory is None else memory, str(replay.violation))
    peak = float(replay.peak_memory)  # the simulator's, the whole schedule's (as `memsched simulate` says)
    time_unit, memory_unit = units_of(instance)
    return Timeline(problem, [MemorySeries(times, values)], bars, rows, float(replay.objective), int(peak),
                    peak_time_of(steps, peak), budget, failure, time_unit, memory_unit)


def _split_op(text: str) -> tuple[str, str]:
    match = _OP_NAME.match(text)
    if not match:
        return text, ""
    return match.group(1), (match.group(2) or "").strip()


def _row_order(rows: Sequence[str]) -> list[str]:
    """Rows in the usual order (forwards, backwards, transfers), others in order of appearance."""
    known = list(CHAIN_ROWS) + ["forward", "backward", TRANSFER_ROW]
    present = list(dict.fromkeys(rows))
    return [r for r in known if r in present] + [r for r in present if r not in known]
