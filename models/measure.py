"""The shared measuring pieces of every executor (chain, join, offload, graph) and profiler.

- `StepMeter`: one executed step's peak bytes, per-op traces (`OpTrace`) and elapsed ms;
  ``torch.cuda.max_memory_allocated`` above the bytes allocated before the step on CUDA,
  `models.memory.LiveTensorTracker` on CPU.
- `measure_runs` -> `Measured`: runs a step as often as measuring needs (the CPU tracker slows
  every op down, so CPU times never come from a watched run).
- `StepResult`: what an executor returns (loss, gradients, measured peak bytes and time in ms,
  the simulator's predicted peak and makespan).
- `Timer`, `MemoryWatch`, `median`: timing regions and live/peak bytes for profilers.
- `RunState`, `RngStates`: the resident activations a_j, tapes abar_j and gradients delta_j of
  one chain run, and the RNG states restored for recomputations; `peak_with_rng_states`,
  `chain_peak_with_rng_states`: a replay's peak plus the states a run allocates (kept states and
  the copy made during each recomputation; an allocator sees them on the CPU).
- `compare_gradients`, `gradients_match`, `zero_grads`: the gradient check against plain autograd,
  each parameter's error measured against its module's largest gradient (`module_scales`) (ok
  None, `VACUOUS_CHECK`, when every reference gradient is zero: nothing was tested).
- `measured_vs_predicted`: the comparison block of ``memsched run --json``.

Units everywhere: bytes for memory, milliseconds for time.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from memsched.models.buffers import restore_buffers, snapshot_buffers
from memsched.models.memory import LiveTensorTracker, cpu_clock
from memsched.solvers.chain.schedule import FORWARD_KINDS

__all__ = ["OpTrace", "StepResult", "Measured", "measure_runs", "StepMeter", "Timer", "MemoryWatch", "median",
           "RunState", "RngStates", "compare_gradients", "gradients_match", "VACUOUS_CHECK", "all_zero",
           "zero_grads", "measured_vs_predicted",
           "ratio", "sync", "memory_method", "tolerances", "timing_ops", "peak_with_rng_states", "with_rng_states",
           "chain_peak_with_rng_states", "generator_states", "set_generator_states", "same_generator_states"]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); a no-op on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median(xs: Sequence[float]) -> float:
    """The median of `xs` (0.0 for none)."""
    return float(statistics.median(xs)) if xs else 0.0


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is missing or b is 0."""
    if a is None or not b:
        return None
    return float(a) / float(b)


def memory_method(device: torch.device) -> str:
    """The name of the primary peak-memory measurement on `device`."""
    return "torch.cuda.max_memory_allocated" if device.type == "cuda" else "LiveTensorTracker"


class Comparison(NamedTuple):
    """One prediction and the measurement compared with it: `what` names the definition both follow
    ("tracker", "allocator", "one op at a time"; "" for the plain pair), `predicted` in the
    instance's unit (bytes; the time unit for a makespan), `measured` in bytes or ms (None when not
    measured)."""

    what: str
    predicted: float | None
    measured: float | None

    @property
    def ratio(self) -> float | None:
        """measured / predicted; None when either is missing or the prediction is 0."""
        return ratio(self.measured, self.predicted)


@dataclass
class OpTrace:
    """One executed operation: measured bytes while it ran (peak) and after it, and the
    simulator's charges for the same op (when a prediction was given)."""

    op: str
    measured_during: int
    measured_after: int
    predicted_during: int | None = None
    predicted_after: int | None = None


@dataclass
class StepResult:
    """One executed training step.

    ``peak_memory``: measured bytes (`StepMeter`); ``time_ms``: time of the step in
    milliseconds (median of the timed runs, each of which ``time_runs_ms`` holds, in the order
    run; empty when none was recorded); ``predicted_peak`` / ``predicted_makespan``: the
    simulator's values (bytes, and the instance's time unit, ms for profiled chains).
    ``grads``: parameter name -> gradient (a copy); ``input_grad``: delta_0 (None for integer
    inputs). ``independent_peak``: bytes by a second method sharing no code with the tracker
    (`models.alloc_probe`, CPU), None when not measured. ``tracker_predicted_peak``: the
    simulator's peak under the tracker's own overheads (`models.chain.overheads.tracker_chain`;
    a CPU profile charges the allocator's, kernel scratch included, in the instance), None when
    the instance has no separate tracker overheads: the tracker's peak is compared with it, the
    allocator probe's with ``predicted_peak``.
    """

    loss: float
    grads: dict[str, torch.Tensor]
    input_grad: torch.Tensor | None
    peak_memory: int
    time_ms: float | None
    device: str
    memory_method: str
    predicted_peak: int | None = None
    predicted_makespan: float | None = None
    trace: list[OpTrace] = field(default_factory=list)
    independent_peak: int | None = None
    independent_method: str | None = None
    tracker_predicted_peak: int | None = None
    time_runs_ms: tuple[float, ...] = ()

    def comparisons(self) -> dict[str, Comparison]:
        """The pairs every ratio of the step divides, the one rule of which prediction each
        measurement is compared with (`models.run` writes them as ``compared``):

        - ``time``: ``time_ms`` against ``predicted_makespan`` (the instance's time unit);
        - ``memory``: the primary method's peak (``peak_memory``: the tracker on CPU, the CUDA allocator
          on CUDA) against the prediction by its definition, ``tracker_predicted_peak`` when set
          (the tracker's overheads where a CPU profile charges the allocator's), else ``predicted_peak``;
        - ``independent``: the allocator probe's peak against ``predicted_peak``."""
        primary = "tracker" if "Tracker" in self.memory_method else "CUDA allocator"
        return {"time": Comparison("", self.predicted_makespan, self.time_ms),
                "memory": Comparison(primary, self.tracker_predicted_peak or self.predicted_peak, self.peak_memory),
                "independent": Comparison("allocator", self.predicted_peak, self.independent_peak)}

    @property
    def memory_ratio(self) -> float | None:
        """measured / predicted peak memory, each by the primary method's definition (`comparisons`)."""
        return self.comparisons()["memory"].ratio

    @property
    def independent_ratio(self) -> float | None:
        """independent (allocator probe) / predicted peak memory (`comparisons`)."""
        return self.comparisons()["independent"].ratio

    @property
    def time_ratio(self) -> float | None:
        """measured time (ms) / predicted makespan (`comparisons`), meaningful when the prediction is in
        ms (profiled chains); `models.run` converts other time units."""
        return self.comparisons()["time"].ratio


@dataclass
class Measured:
    """What `measure_runs` gathered: the last run's loss and input gradient(s), peak bytes, the
    memory method, per-op traces, and the median time (ms) when timed, of the timed runs
    ``times_ms`` (ms each, in the order run)."""

    loss: float
    input_grad: Any
    peak: int
    method: str
    traces: list[OpTrace]
    time_ms: float | None
    independent_peak: int | None = None
    independent_method: str | None = None
    times_ms: tuple[float, ...] = ()


RunFn = Callable[[bool, bool], tuple[float, Any, int, list[OpTrace], float]]

_PROBED = False
_OP_TIMES: list[tuple[str, float]] | None = None


@contextlib.contextmanager
def timing_ops() -> Iterator[list[tuple[str, float]]]:
    """While active, every `StepMeter` appends (op label, elapsed ms by the step's own clock) of each
    op it meters to the yielded list: the profilers time each op inside the executors' own steps
    (`models.chain.timing`), with their per-op work (state handling, RNG, hooks) included."""
    global _OP_TIMES
    previous, _OP_TIMES = _OP_TIMES, []
    try:
        yield _OP_TIMES
    finally:
        _OP_TIMES = previous


def probed_run() -> bool:
    """True while `measure_runs` measures a step with the independent allocator probe: an
    executor then prepares the step as for a watched run (parameter gradients allocated before
    the step), so both memory methods measure the same thing."""
    return _PROBED


def measure_runs(run: RunFn, *, cuda: bool, measure_memory: bool, measure_time: bool, trace: bool,
                 time_repeats: int, sim_steps: Sequence[Any] | None = None, independent: bool = False,
                 modules: Sequence[torch.nn.Module] = ()) -> Measured:
    """Run one step as often as measuring needs: once with the memory watch (or trace), once
    under `models.alloc_probe.AllocatorProbe` when `independent` (CPU only: the second memory
    measurement, sharing no code with the tracker; after one unwatched warm-up run), then
    unwatched runs until `time_repeats` times are taken (all kept in ``times_ms``, for the step's
    ``StepResult.time_runs_ms``). `run(watch, trace)` returns (loss,
    input gradient(s), peak bytes, traces, elapsed ms). The simulator's per-op charges
    (`sim_steps`, objects with ``mem_during`` / ``mem_after``) are attached to the traces.

    Every run starts from the buffers of `modules` (BatchNorm's running statistics and batch count,
    spectral_norm's ``u``) as they were when the step was called: a training forward updates them,
    and the runs measure one step, not several, so afterwards they are as one plain step leaves
    them. The copy is made before the first run (outside every measured window) and put back in
    place (`models.buffers.restore_buffers`)."""
    out = Measured(float("nan"), None, 0, "none", [], None)
    times: list[float] = []
    start = snapshot_buffers(modules)
    done = 0

    def once(watch: bool, trace: bool) -> tuple[float, Any, int, list[OpTrace], float]:
        nonlocal done
        if done:
            restore_buffers(start)
        done += 1
        return run(watch, trace)

    if independent and not cuda:
        from memsched.models.alloc_probe import METHOD, AllocatorProbe

        global _PROBED
        _PROBED = True
        try:
            once(False, False)  # warm-up: lazily allocated kernel caches are not the step's memory
            with AllocatorProbe() as probe:
                out.loss, out.input_grad, _, _, _ = once(False, False)
        finally:
            _PROBED = False
        out.independent_peak, out.independent_method = probe.peak, METHOD
    if measure_memory or trace or not measure_time:
        watch = measure_memory or trace
        out.loss, out.input_grad, out.peak, out.traces, elapsed = once(watch, trace)
        out.method = ("torch.cuda.max_memory_allocated" if cuda else "LiveTensorTracker") if watch else "none"
        if cuda and measure_time and not trace:
            times.append(elapsed)
    if measure_time:
        while len(times) < max(1, time_repeats):
            out.loss, out.input_grad, _, _, elapsed = once(False, False)
            times.append(elapsed)
        out.time_ms = median(times)
        out.times_ms = tuple(times)
    if sim_steps is not None and len(sim_steps) == len(out.traces):
        for t, s in zip(out.traces, sim_steps):
            t.predicted_during, t.predicted_after = s.mem_during, s.mem_after
    return out


class StepMeter:
    """Measures one executed step: peak bytes (torch.cuda.max_memory_allocated above the
    bytes allocated before the step on CUDA; `LiveTensorTracker` on the CPU), per-op traces,
    and elapsed time in ms (`cpu_clock(clock)` on the CPU).

    Use as ``with meter: ...; with meter.op(label): run(op); ...; meter.stop_clock()``.
    """

    def __init__(self, device: torch.device, *, watch: bool, trace: bool, clock: str = "wall"):
        self.device, self.watch, self.trace = device, watch, trace
        self.cuda = device.type == "cuda"
        self.tracker = LiveTensorTracker() if watch and not self.cuda else None
        self.traces: list[OpTrace] = []
        self.base = 0
        self.elapsed_ms = 0.0
        self.now = time.perf_counter if self.cuda else cpu_clock(clock)
        self.start = 0.0

    def __enter__(self) -> StepMeter:
        if self.watch and self.cuda:
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        if self.tracker is not None:
            self.tracker.__enter__()
        sync(self.device)
        self.start = self.now()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.tracker is not None:
            self.tracker.__exit__(*exc)

    @contextlib.contextmanager
    def op(self, label: str) -> Iterator[None]:
        """Trace one operation (peak while it runs, bytes after it) when tracing; its time inside
        `timing_ops`."""
        times = _OP_TIMES
        if times is not None:
            sync(self.device)
            t0 = self.now()
        if self.trace:
            if self.tracker is not None:
                self.tracker.reset_peak()
            elif self.cuda:
                torch.cuda.reset_peak_memory_stats(self.device)
        yield
        if self.trace:
            if self.tracker is not None:
                self.traces.append(OpTrace(label, self.tracker.peak, self.tracker.current))
            elif self.cuda:
                self.traces.append(OpTrace(label, torch.cuda.max_memory_allocated(self.device) - self.base,
                                           torch.cuda.memory_allocated(self.device) - self.base))
        if times is not None:
            sync(self.device)
            times.append((label, (self.now() - t0) * 1e3))

    def stop_clock(self) -> None:
        """Stop the step's clock (after syncing the device)."""
        sync(self.device)
        self.elapsed_ms = (self.now() - self.start) * 1e3

    @property
    def peak(self) -> int:
        """Peak bytes over the step (0 when not watching)."""
        during = [t.measured_during for t in self.traces]
        if self.tracker is not None:
            return max([self.tracker.peak] + during)
        if self.cuda and self.watch:
            return max([torch.cuda.max_memory_allocated(self.device) - self.base] + during)
        return 0


class Timer:
    """Elapsed milliseconds of a region: CUDA events on GPU, `cpu_clock(clock)` on CPU."""

    def __init__(self, device: torch.device, clock: str = "wall") -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.now = cpu_clock(clock)

    @contextlib.contextmanager
    def region(self, out: list[float]) -> Iterator[None]:
        """Append the region's elapsed ms to `out`."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            torch.cuda.synchronize(self.device)
            out.append(float(start.elapsed_time(end)))
        else:
            t0 = self.now()
            yield
            out.append((self.now() - t0) * 1e3)


class MemoryWatch:
    """Live bytes and peaks: CUDA allocator statistics, or the live-tensor tracker on CPU
    (inside ``watching()``)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.tracker: LiveTensorTracker | None = None

    @contextlib.contextmanager
    def watching(self) -> Iterator[MemoryWatch]:
        """Context manager: track allocated bytes (CUDA or the CPU tracker) while the body runs; yields self."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            yield self
        else:
            with LiveTensorTracker() as tracker:
                self.tracker = tracker
                yield self
            self.tracker = None

    def _read(self, on_cuda: Callable[[Any], int], on_cpu: Callable[[Any], int], reset: bool = False) -> int:
        """Bytes read by `on_cuda(device)` after a synchronisation (and a reset of the peak
        statistics with `reset`) on CUDA, by `on_cpu(tracker)` on CPU."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            if reset:
                torch.cuda.reset_peak_memory_stats(self.device)
            return int(on_cuda(self.device))
        assert self.tracker is not None
        return int(on_cpu(self.tracker))

    def mark(self, *, after_start: bool = False) -> int:
        """Current live bytes; the peak window restarts here. `after_start` (CPU tracker): the
        window's peak leaves out the level at its start, so it may lie below it (an operation that
        frees before it allocates); CUDA's peak statistics always include it."""
        return self._read(torch.cuda.memory_allocated, lambda t: t.mark(after_start=after_start), reset=True)

    def current(self) -> int:
        """Live bytes now."""
        return self._read(torch.cuda.memory_allocated, lambda t: t.current)

    def peak(self) -> int:
        """Peak live bytes since the last `mark`."""
        return self._read(torch.cuda.max_memory_allocated, lambda t: max(t.peak, t.current))


RngState = tuple[torch.Tensor, torch.Tensor | None]  # (CPU generator state, CUDA generator state or None)


def generator_states(device: torch.device) -> RngState:
    """Copies of the CPU generator's state and, for a CUDA `device`, that device's (both host
    tensors; on the CPU a 5,056 B uint8 tensor the allocator hands out)."""
    return torch.get_rng_state(), (torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def set_generator_states(state: RngState, device: torch.device) -> None:
    """Put the generators back to `state` (`generator_states`'s): copies it in, allocates nothing."""
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def same_generator_states(a: RngState, b: RngState) -> bool:
    """True when the two `generator_states` are equal (no random number drawn between them)."""
    return torch.equal(a[0], b[0]) and (a[1] is None or b[1] is None or torch.equal(a[1], b[1]))


class RngStates:
    """RNG states of one run, as ``torch.utils.checkpoint`` handles them: the state before the
    first forward of each random stage that is computed more than once is recorded, and each later
    forward of that stage runs under it, so recomputed dropout masks are identical; the generator
    is put back after each recomputation, so its stream is that of a plain forward/backward.

    `keys`: the stages (any hashable keys) a run computes more than once (None: every stage);
    their states are kept to the end of the run, as ``torch.utils.checkpoint`` keeps them until
    its backward has run. `random`: the stages known, before the
    run, to draw random numbers (`models.chain.executor.ChainExecutor.random_stages`): only those
    are recorded, and nothing is copied for the others. None (unknown, as in a training step): the
    state is recorded at each first forward and compared with the generator's after it (two
    copies during that forward), and dropped when the stage drew nothing.

    What a run with `random` known allocates (CPU; a generator state is a 5,056 B tensor, the
    CUDA one a host tensor too): the recorded state of each random stage in `keys`, from the start
    of its first forward to the end of the run, and during each later forward of it one copy of
    the generator's state (put back after it). `held` lists exactly these."""

    def __init__(self, device: torch.device, keys: Iterable[Any] | None = None,
                 random: Iterable[Any] | None = None) -> None:
        self.device = device
        self.states: dict[Any, RngState] = {}
        self.keys = None if keys is None else set(keys)
        self.random = None if random is None else set(random)
        self.deterministic: set[Any] = set()
        self.seen: dict[Any, int] = {}  # forwards of each stage so far

    def record(self, i: Any) -> None:
        """Save the CPU (and CUDA) RNG state before the first forward of stage i."""
        self.states[i] = generator_states(self.device)

    @contextlib.contextmanager
    def forward(self, i: Any) -> Iterator[None]:
        """Context manager for stage i's forward: the first one records the RNG state (of a random
        stage; unknown randomness: recorded, and dropped when the forward draws none); the later
        ones run under it, the generator put back afterwards, so dropout masks repeat."""
        if self.keys is not None and i not in self.keys:  # computed once: nothing to restore
            yield
            return
        n = self.seen.get(i, 0)
        self.seen[i] = n + 1
        if n == 0:
            with self._first(i):
                yield
            return
        if i not in self.states:  # draws no random numbers
            yield
            return
        with self._replayed(i):
            yield

    @contextlib.contextmanager
    def _first(self, i: Any) -> Iterator[None]:
        """Stage i's first forward: record the state of a random stage (a known one without copying
        anything else; an unknown one compared after the forward, dropped when it drew nothing)."""
        if self.random is not None:
            if i in self.random:
                self.record(i)
            yield
            return
        self.record(i)
        yield
        if same_generator_states(self.states[i], generator_states(self.device)):
            del self.states[i]  # drew no random numbers: nothing to restore, 5 KB less
            self.deterministic.add(i)

    @contextlib.contextmanager
    def _replayed(self, i: Any) -> Iterator[None]:
        """A later forward of stage i under its recorded state; the generator's state is copied
        before (the copy allocated for this forward only) and put back after it."""
        stream = generator_states(self.device)
        set_generator_states(self.states[i], self.device)
        try:
            yield
        finally:
            set_generator_states(stream, self.device)
            del stream

    @property
    def kept(self) -> list[Any]:
        """The stages whose state is kept now, in recording order (after a run: the stages it
        computes more than once whose first forward drew random numbers)."""
        return list(self.states)

    def state_bytes(self, i: Any) -> int:
        """Bytes of stage i's kept state in the memory a step on `device` is measured in: the CPU
        generator's state (a uint8 tensor, 5,056 B) on the CPU, where an allocator (the probe,
        `models.alloc_probe`) counts it; 0 on CUDA, whose device memory holds none of them (both
        states are host tensors). The live-tensor tracker does not count them (``get_rng_state``
        allocates outside the dispatcher). A copy made for a recomputation has the same size."""
        return sum(t.numel() * t.element_size() for t in self.states[i]
                   if t is not None and t.device.type == self.device.type)

    def held(self, ops: Sequence[Any], starts: Sequence[float], ends: Sequence[float] | None = None
             ) -> list[tuple[float, float, int]]:
        """(from, until, bytes) of each state a run of the chain or offloading `ops` allocates
        (`starts[k]`, `ends[k]`: the start and end of op k in a replay; without `ends`, op k ends
        when op k+1 starts): each kept state from the start of its stage's first forward to the end
        of the step (until infinity), and the copy made for each later forward of a kept stage,
        during that forward. `with_rng_states` adds them to a replay's memory."""
        if ends is None:
            ends = [*starts[1:], math.inf]
        forwards: dict[Any, list[int]] = {}
        for k, op in enumerate(ops):
            if len(op) == 2 and op[0] in FORWARD_KINDS:
                forwards.setdefault(op[1], []).append(k)
        out: list[tuple[float, float, int]] = []
        for i in self.kept:
            if i not in forwards:
                continue
            ks, size = forwards[i], self.state_bytes(i)
            out.append((float(starts[ks[0]]), math.inf, size))
            out.extend((float(starts[k]), float(ends[k]), size) for k in ks[1:])
        return out


def with_rng_states(points: Iterable[tuple[float, int]], held: Iterable[tuple[float, int] | tuple[float, float, int]]
                    ) -> list[int]:
    """The bytes of each of a replay's memory `points` ((time, bytes from then on), in time order)
    plus the RNG states in `held`: (time, bytes), a state kept from that time, inclusive, to the
    end of the step; or (from, until, bytes), a state live at the points from `from` inclusive to
    `until` exclusive (at the points of time `from` when until <= from: an op of no duration), as
    `RngStates.held` gives them. What an allocator sees of a run that keeps them."""
    pts = list(points)
    times = [t for t, _ in pts]
    added = [0] * (len(pts) + 1)
    for h in held:
        start, until, size = (h[0], math.inf, h[1]) if len(h) == 2 else h
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_left(times, until) if until > start else bisect.bisect_right(times, start)
        if hi > lo:
            added[lo] += int(size)
            added[hi] -= int(size)
    return [int(mem) + extra for (_, mem), extra in zip(pts, itertools.accumulate(added))]


def peak_with_rng_states(points: Iterable[tuple[float, int]],
                         held: Iterable[tuple[float, int] | tuple[float, float, int]]) -> int:
    """The peak of `with_rng_states` (bytes)."""
    return max(with_rng_states(points, held))


def chain_peak_with_rng_states(sim: Any, ops: Sequence[Any], rng: RngStates) -> int:
    """The peak (bytes) of a chain simulator's replay `sim` (`solvers.chain.Simulation`) of `ops`,
    plus what the run's `RngStates` `rng` allocates (`RngStates.held`: each kept state from its
    stage's first forward on, a copy during each recomputation): the prediction an
    allocator's measurement of a chain step is compared with (op k counts for time k, with its
    peak ``mem_during``; the input a_0 before op 0)."""
    points = [(-1.0, int(sim.initial_memory))] + [(float(k), int(st.mem_during)) for k, st in enumerate(sim.steps)]
    starts = [float(k) for k in range(len(ops))]
    return peak_with_rng_states(points, rng.held(ops, starts, [k + 1.0 for k in starts]))


class RunState:
    """Resident activations a_j, tapes abar_j = (input leaf, output) and gradients delta_j of
    one chain run (keys: stage j), with the run's RNG context ``rng`` (an object with a
    ``forward(i)`` context manager, e.g. `RngStates`) and its loss."""

    def __init__(self, rng: Any) -> None:
        self.acts: dict[int, torch.Tensor] = {}
        self.tapes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        #: the output data of a tape whose output tensor is a stand-in without storage (chain executor)
        self.tape_outputs: dict[int, torch.Tensor] = {}
        self.grads: dict[int, torch.Tensor | None] = {}
        self.rng = rng
        self.loss = float("nan")
        #: the loss as a detached tensor, kept by the loss op when `keep_loss` (a training step;
        #: a measured step keeps only the float, so that no extra bytes are live after it)
        self.keep_loss = False
        self.loss_tensor: torch.Tensor | None = None

    def available(self, j: int) -> torch.Tensor:
        """a_j: the standalone copy, else the output of the tape abar_j."""
        if j in self.acts:
            return self.acts[j]
        if j in self.tapes:
            return self.tape_outputs[j] if j in self.tape_outputs else self.tapes[j][1].detach()
        raise RuntimeError(f"a_{j} is not resident")

    def clear(self) -> None:
        """Drop every kept activation a_i, tape abar_i and gradient of the run."""
        self.acts.clear()
        self.tapes.clear()
        self.tape_outputs.clear()
        self.grads.clear()


def tolerances(device: torch.device) -> tuple[float, float]:
    """(rtol, atol) of the gradient check: tight on CPU; looser on CUDA, whose convolution and
    attention backward kernels may accumulate in a different order from run to run."""
    return (1e-4, 1e-6) if device.type == "cpu" else (2e-3, 1e-5)


def zero_grads(params: Iterable[torch.Tensor], *, keep: bool = False) -> None:
    """Allocate (zeros) or zero every parameter gradient, so that a step's memory does not
    count them, as the simulators do not. `keep`: leave the gradients already there (a
    training step accumulates into them), allocating only the missing ones."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        elif not keep:
            p.grad.zero_()


def magnitude(t: torch.Tensor) -> float:
    """max|t| over the finite elements of `t` (0.0 when it has none): the scale a gradient check
    measures errors against, in the gradient's own units. A non-finite reference element never
    widens a tolerance (an infinite scale would pass anything); it fails the check by itself."""
    if t.numel() == 0:
        return 0.0
    return float(torch.nan_to_num(t.detach(), nan=0.0, posinf=0.0, neginf=0.0).abs().max())


def gradient_close(got: torch.Tensor, ref: torch.Tensor, *, rtol: float, atol: float,
                   scale: float | None = None) -> bool:
    """|got - ref| <= atol + rtol * scale element by element, `scale` defaulting to max|ref|
    (`magnitude`): the error relative to a real magnitude, not to each element's. A gradient summed
    in another order (a weight shared by the branches of a join, whose backward passes add into it
    in the schedule's order) differs by a few ulps of its largest terms, which an element-wise
    relative test fails wherever the sum nearly cancels; a wrong gradient (a missing or doubled
    contribution) differs on the scale of the tensor. `compare_gradients` passes its module's scale
    (`module_scales`). NaN (and an infinite reference) never passes."""
    if got.shape != ref.shape:
        return False
    if ref.numel() == 0:
        return True
    tol = atol + rtol * (magnitude(ref) if scale is None else scale)
    return bool(((got - ref).abs() <= tol).all())


def owning_module(name: str) -> str:
    """The owning module of the parameter named `name` (``"0.conv.bias"`` -> ``"0.conv"``; ``""`` for
    the root module's own parameters)."""
    return name.rpartition(".")[0]


def module_scales(expected: dict[str, torch.Tensor]) -> dict[str, float]:
    """Owning module (`owning_module`) -> the largest |gradient| among its parameters' reference gradients
    (`magnitude`, in gradient units): the scale `compare_gradients` measures each of them against.
    Why per module: a tensor's own maximum is no magnitude when its true gradient is zero by
    cancellation (a conv's bias followed by BatchNorm gets exactly 0; float32 autograd and an
    executor summing the consumers in another order leave ~1e-6 of noise each, from terms the size of
    those that make the conv's weight gradient), yet the whole model's would let a small layer's error
    hide behind a large layer's gradients. Invariant: a module's scale is at least every one of its
    tensors' own maximum, so the check is never looser than the per-tensor one where a tensor is
    the largest of its module, and a tensor's wrong value of its module's size always fails."""
    scales: dict[str, float] = {}
    for name, ref in expected.items():
        scales[owning_module(name)] = max(scales.get(owning_module(name), 0.0), magnitude(ref))
    return scales


#: the message of a gradient check that tested nothing (`compare_gradients`, `gradients_match`: ok None)
VACUOUS_CHECK = ("not checked: every gradient of plain autograd is zero (a loss with no gradient), so any "
                 "schedule's zero gradients would match")


def all_zero(tensors: Iterable[torch.Tensor | None]) -> bool:
    """True when no tensor of `tensors` (None skipped) has a nonzero element (also when there is none)."""
    return not any(t is not None and bool(t.any()) for t in tensors)


def compare_gradients(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], *, rtol: float = 1e-4,
                      atol: float = 1e-6) -> tuple[bool | None, str]:
    """(all close, a message naming the worst parameter when not). Each gradient is compared at
    ``atol + rtol * scale``, the scale being its owning module's largest reference gradient
    (`module_scales`: a conv's zero bias gradient is measured against its weight's). A parameter of `got` that
    `expected` lacks passes when its gradient is all zeros: a measured step allocates every
    gradient (zeros) before it runs, so a parameter no gradient reaches (a block before one that
    stops the gradient) keeps zeros where plain autograd leaves None. When everything matches but
    every expected gradient is zero (`gradient_close`'s tolerance is then `atol` alone, and a wrong
    executor's doubled or negated zeros match too), the comparison tested nothing: (None,
    `VACUOUS_CHECK`), never a claimed match."""
    missing = (set(expected) - set(got)) | {name for name in set(got) - set(expected) if bool(got[name].any())}
    if missing:
        return False, f"gradients differ in which parameters they cover: {sorted(missing)[:5]}"
    worst, worst_name = 0.0, ""
    ok = True
    scales = module_scales(expected)
    for name, ref in expected.items():
        g = got[name]
        if not gradient_close(g, ref, rtol=rtol, atol=atol, scale=scales[owning_module(name)]):
            ok = False
            err = float((g - ref).abs().max())
            if err >= worst:
                worst, worst_name = err, name
    if not ok:
        return False, f"largest gradient difference {worst:.3g} in {worst_name}"
    return (None, VACUOUS_CHECK) if all_zero(expected.values()) else (True, "")


def gradients_match(grads: dict[str, torch.Tensor], input_grad: torch.Tensor | None,
                    ref_grads: dict[str, torch.Tensor], ref_input: torch.Tensor | None, *, rtol: float = 1e-4,
                    atol: float = 1e-6) -> tuple[bool | None, str]:
    """Every parameter gradient and, when both exist (a floating input; the chain and offload
    executors return it, the graph executor does not), the input gradient close to the reference's:
    (ok, message when not). ok is None (with `VACUOUS_CHECK`) when every gradient compared matched
    and all of the reference's, the input's included, are zero: nothing was tested."""
    ok, msg = compare_gradients(grads, ref_grads, rtol=rtol, atol=atol)
    if ok is False or ref_input is None or input_grad is None:
        return ok, msg
    if not gradient_close(input_grad, ref_input, rtol=rtol, atol=atol):
        return False, f"input gradient differs by {float((input_grad - ref_input).abs().max()):.3g}"
    return (ok, msg) if all_zero([ref_input]) else (True, "")


def time_spread(runs: Sequence[float]) -> dict[str, Any]:
    """{time_min, time_max (ms; None without runs), time_runs (how many)} of the timed runs `runs` (ms)."""
    return {"time_min": min(runs, default=None), "time_max": max(runs, default=None), "time_runs": len(runs)}


def measured_vs_predicted(predicted_makespan: float, predicted_peak: int, step: StepResult,
                          store_all: StepResult | None) -> dict[str, Any]:
    """The `memsched run --json` comparison block: predicted {makespan, peak_memory} of the
    solver's schedule, measured {time (the median), time_min, time_max, time_runs (`time_spread`),
    peak_memory, independent_peak, independent_method} of its execution, their ratios, and (when a
    store-all step is given) the same for store-all and the schedule's ratios to it (predicted and
    measured). ``compared`` holds the pairs each ratio divides (`StepResult.comparisons`: {what,
    predicted, measured} per ``time``, ``memory``, ``independent``). The ratios to store-all compare
    like with like: each side's predicted time and memory are the ones its own ``ratio.time`` and
    ``ratio.memory`` divide (``comparisons()``: the tracker's prediction, ``tracker_predicted_peak``,
    falling back to the predicted peak, and on CPU an offloading step's one-op-at-a-time replay, as
    it runs synchronously), so ``predicted.memory`` counts neither the RNG states nor the allocator's
    kernel scratch a CPU prediction may add, as ``measured.memory`` (``peak_memory``) does not."""
    out: dict[str, Any] = {
        "predicted": {"makespan": float(predicted_makespan), "peak_memory": int(predicted_peak),
                      "tracker_peak_memory": step.tracker_predicted_peak},
        "measured": {"time": step.time_ms, **time_spread(step.time_runs_ms), "peak_memory": step.peak_memory,
                     "independent_peak": step.independent_peak, "independent_method": step.independent_method},
        "ratio": {"memory": step.memory_ratio, "time": step.time_ratio,
                  "independent_memory": step.independent_ratio},
        "compared": {name: pair._asdict() for name, pair in step.comparisons().items()},
    }
    if store_all is not None:
        out["store_all"] = {
            "predicted": {"makespan": store_all.predicted_makespan, "peak_memory": store_all.predicted_peak,
                          "tracker_peak_memory": store_all.tracker_predicted_peak},
            "measured": {"time": store_all.time_ms, "peak_memory": store_all.peak_memory}}
        mine, base = step.comparisons(), store_all.comparisons()
        out["vs_store_all"] = {
            "predicted": {"time": ratio(mine["time"].predicted, base["time"].predicted),
                          "memory": ratio(mine["memory"].predicted, base["memory"].predicted)},
            "measured": {"time": ratio(step.time_ms, store_all.time_ms),
                         "memory": ratio(step.peak_memory, store_all.peak_memory)}}
    return out
