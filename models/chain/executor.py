"""Execute a chain `Schedule` for real: one training step of a sequence of PyTorch blocks.

The blocks are the chain: block i maps a_i to a_{i+1}; ``loss_fn(a_L, target)`` is the loss
(stage L). Operations follow the rules table of `solvers.chain.simulator`:

==========  ================================================================================
op          what the executor does
==========  ================================================================================
F_all(i)    ``x = a_i.detach().requires_grad_()`` (shares a_i's storage); ``y = block_i(x)``
            with autograd; keeps the tape abar_{i+1} = (x, y): y's graph holds what autograd
            saved; a_{i+1} is available as ``y.detach()``.
F_ck(i)     ``a_{i+1} = block_i(a_i)`` under ``torch.no_grad()``; keeps a_i.
F_n(i)      as F_ck, then drops the standalone a_i.
Loss        ``y = a_L.detach().requires_grad_()``; ``loss_fn(y, target).backward()``;
            delta_L = y.grad; drops the standalone a_L.
B(i)        ``torch.autograd.backward(y, delta_{i+1})`` on the tape abar_{i+1}; delta_i = x.grad
            (None for an integer input such as token ids); drops abar_{i+1}, delta_{i+1} and
            the standalone a_i. Parameter gradients accumulate into ``.grad``.
==========  ================================================================================

Randomness: the CPU (and CUDA) RNG state is recorded before the first forward of each stage
and restored, inside ``torch.random.fork_rng``, before each later forward of that stage, as
``torch.utils.checkpoint`` does: dropout masks are recomputed identically and the global RNG
stream is the same as in a plain forward/backward, so gradients match plain autograd.
BatchNorm in training mode updates its running statistics at every forward, recomputations
included (as with ``torch.utils.checkpoint``); gradients are unaffected.

Memory (bytes): on CUDA, ``torch.cuda.max_memory_allocated`` during the step minus the memory
allocated before it; on CPU, the peak of live tensor bytes allocated during the step
(`models.memory.LiveTensorTracker`). In both, the executor first copies the input a_0 (so that
it owns it and frees it when the schedule does) and parameter gradients are allocated (zeros)
before the step, so neither weights nor their gradients are counted, as in the simulator.
Time is measured in a separate run without the tracker on CPU (the tracker slows each
operation down), in milliseconds like the profiled chains.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.models.memory import LiveTensorTracker, cpu_clock
from memsched.solvers.chain import Chain, Schedule, simulate
from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op
from torch import nn

__all__ = ["ChainExecutor", "StepResult", "OpTrace", "reference_step", "compare_gradients", "execute",
           "as_blocks", "parameters_of"]

LossFn = Callable[[torch.Tensor, Any], torch.Tensor]


@dataclass
class OpTrace:
    """One executed operation: measured bytes while it ran (peak) and after it, and the
    simulator's charges for the same op (when a chain was given)."""

    op: str
    measured_during: int
    measured_after: int
    predicted_during: int | None = None
    predicted_after: int | None = None


@dataclass
class StepResult:
    """One executed training step.

    ``peak_memory``: measured bytes (see the module docstring); ``time_ms``: wall time of the
    step in milliseconds; ``predicted_peak`` / ``predicted_makespan``: the simulator's values
    for the chain given (bytes, and the chain's time unit, ms for profiled chains).
    ``grads``: parameter name -> gradient (a copy); ``input_grad``: delta_0 (None for integer
    inputs).
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

    @property
    def memory_ratio(self) -> float | None:
        """measured / predicted peak memory."""
        if not self.predicted_peak:
            return None
        return self.peak_memory / self.predicted_peak

    @property
    def time_ratio(self) -> float | None:
        """measured / predicted time."""
        if not self.predicted_makespan or self.time_ms is None:
            return None
        return self.time_ms / self.predicted_makespan


def as_blocks(model: nn.Module | Sequence[nn.Module]) -> list[nn.Module]:
    """The chain of a model: the children of an ``nn.Sequential``, or a list of blocks as is."""
    if isinstance(model, nn.Sequential):
        return list(model)
    if isinstance(model, nn.Module):
        return [model]
    return list(model)


def parameters_of(blocks: Sequence[nn.Module]) -> dict[str, nn.Parameter]:
    """Distinct parameters of the blocks, named ``"<block>.<name>"`` (shared ones once)."""
    out: dict[str, nn.Parameter] = {}
    seen: set[int] = set()
    for i, block in enumerate(blocks):
        for name, p in block.named_parameters():
            if id(p) not in seen and p.requires_grad:
                seen.add(id(p))
                out[f"{i}.{name}"] = p
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Measured:
    """What `measure_runs` gathered: the last run's loss and input gradient(s), peak bytes, the
    memory method, per-op traces, and the median time (ms) when timed."""

    loss: float
    input_grad: Any
    peak: int
    method: str
    traces: list[OpTrace]
    time_ms: float | None


def measure_runs(run: Callable[[bool, bool], tuple[float, Any, int, list[OpTrace], float]], *, cuda: bool,
                 measure_memory: bool, measure_time: bool, trace: bool, time_repeats: int,
                 sim_steps: Sequence[Any] | None = None) -> Measured:
    """Run one step as often as measuring needs: once with the memory watch (or trace), then
    untimed-watch runs until `time_repeats` times are taken (the tracker slows CPU ops, so CPU
    timings never come from a watched run). `run(watch, trace)` returns (loss, input gradient(s),
    peak bytes, traces, elapsed ms). The simulator's per-op charges (`sim_steps`) are attached
    to the traces."""
    out = Measured(float("nan"), None, 0, "none", [], None)
    times: list[float] = []
    if measure_memory or trace or not measure_time:
        watch = measure_memory or trace
        out.loss, out.input_grad, out.peak, out.traces, elapsed = run(watch, trace)
        out.method = ("torch.cuda.max_memory_allocated" if cuda else "LiveTensorTracker") if watch else "none"
        if cuda and measure_time and not trace:
            times.append(elapsed)
    if measure_time:
        while len(times) < max(1, time_repeats):
            out.loss, out.input_grad, _, _, elapsed = run(False, False)
            times.append(elapsed)
        out.time_ms = float(statistics.median(times))
    if sim_steps is not None:
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
        self._now = time.perf_counter if self.cuda else cpu_clock(clock)
        self._start = 0.0

    def __enter__(self) -> StepMeter:
        if self.watch and self.cuda:
            _sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        if self.tracker is not None:
            self.tracker.__enter__()
        _sync(self.device)
        self._start = self._now()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.tracker is not None:
            self.tracker.__exit__(*exc)

    @contextlib.contextmanager
    def op(self, label: str) -> Iterator[None]:
        """Trace one operation (peak while it runs, bytes after it) when tracing."""
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

    def stop_clock(self) -> None:
        _sync(self.device)
        self.elapsed_ms = (self._now() - self._start) * 1e3

    @property
    def peak(self) -> int:
        """Peak bytes over the step (0 when not watching)."""
        during = [t.measured_during for t in self.traces]
        if self.tracker is not None:
            return max([self.tracker.peak] + during)
        if self.cuda and self.watch:
            return max([torch.cuda.max_memory_allocated(self.device) - self.base] + during)
        return 0


class _RngStates:
    """RNG state recorded at the first forward of each stage, restored for recomputations."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.states: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}

    def record(self, i: int) -> None:
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        self.states[i] = (torch.get_rng_state(), cuda)

    @contextlib.contextmanager
    def forward(self, i: int) -> Iterator[None]:
        if i not in self.states:
            self.record(i)
            yield
            return
        cpu, cuda = self.states[i]
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(cpu)
            if cuda is not None:
                torch.cuda.set_rng_state(cuda, self.device)
            yield


class ChainExecutor:
    """Runs schedules on `blocks` (block i: a_i -> a_{i+1}) followed by `loss_fn(a_L, target)`."""

    def __init__(self, blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn) -> None:
        self.blocks = as_blocks(blocks)
        self.loss_fn = loss_fn
        self.params = parameters_of(self.blocks)

    @property
    def length(self) -> int:
        return len(self.blocks)

    # ----------------------------------------------------------------- one step
    def step(
        self,
        schedule: Schedule | Sequence[Op],
        inputs: torch.Tensor,
        target: Any,
        *,
        chain: Chain | None = None,
        seed: int | None = 0,
        measure_memory: bool = True,
        measure_time: bool = True,
        trace: bool = False,
        time_repeats: int = 1,
        clock: str = "wall",
    ) -> StepResult:
        """Execute `schedule` as one training step and measure it.

        `seed` (when not None) seeds the RNGs before each run so that runs and the plain
        reference (`reference_step` with the same seed) draw the same dropout masks. On CPU,
        memory and time are measured in separate runs (the memory tracker slows operations
        down); the gradients returned are those of the last run. `trace` records per-op memory;
        `time_repeats` runs are timed and their median reported (ms); `clock` (CPU only):
        "wall" or "thread" (`models.memory.cpu_clock`).
        """
        ops = list(schedule.ops if isinstance(schedule, Schedule) else schedule)
        device = inputs.device
        predicted_peak = predicted_makespan = None
        sim_steps = None
        if chain is not None:
            if chain.length != self.length:
                raise ValueError(f"chain has {chain.length} stages, the model {self.length} blocks")
            sim = simulate(chain, ops).raise_if_invalid()
            predicted_peak, predicted_makespan = sim.peak_memory, sim.makespan
            sim_steps = sim.steps
        m = measure_runs(lambda watch, tr: self._run(ops, inputs, target, seed, watch, tr, clock),
                         cuda=device.type == "cuda", measure_memory=measure_memory, measure_time=measure_time,
                         trace=trace, time_repeats=time_repeats, sim_steps=sim_steps)
        grads = {name: p.grad.detach().clone() for name, p in self.params.items() if p.grad is not None}
        return StepResult(loss=m.loss, grads=grads, input_grad=m.input_grad, peak_memory=int(m.peak),
                          time_ms=m.time_ms, device=str(device), memory_method=m.method,
                          predicted_peak=predicted_peak, predicted_makespan=predicted_makespan, trace=m.traces)

    def _zero_grads(self) -> None:
        for p in self.params.values():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.zero_()

    def _run(self, ops: list[Op], inputs: torch.Tensor, target: Any, seed: int | None, watch: bool,
             trace: bool, clock: str = "wall") -> tuple[float, torch.Tensor | None, int, list[OpTrace], float]:
        """One run: (loss, delta_0, peak bytes, per-op trace, elapsed ms)."""
        device = inputs.device
        self._zero_grads()
        if seed is not None:
            torch.manual_seed(seed)
        state = _State(inputs, _RngStates(device))
        meter = StepMeter(device, watch=watch, trace=trace, clock=clock)
        with meter:
            state.acts[0] = inputs.detach().clone()
            for op in ops:
                with meter.op(str(op)):
                    self._apply(op, state, target)
            meter.stop_clock()
            loss = state.loss
            input_grad = state.grads.pop(0, None)
            state.clear()
        return loss, input_grad, meter.peak, meter.traces, meter.elapsed_ms

    # ----------------------------------------------------------------- operations
    def _apply(self, op: Op, s: _State, target: Any) -> None:
        kind, i = op
        L = self.length
        if kind == F_ALL:
            x = s.available(i).detach()
            if x.is_floating_point() or x.is_complex():
                x.requires_grad_(True)
            with s.rng.forward(i), torch.enable_grad():
                y = self.blocks[i](x)
            s.tapes[i + 1] = (x, y)
        elif kind in (F_CK, F_N):
            x = s.available(i)
            version = x._version
            with s.rng.forward(i), torch.no_grad():
                y = self.blocks[i](x)
            if x._version != version:  # a_i may be needed again: an in-place change would corrupt it
                raise RuntimeError(f"block {i} ({type(self.blocks[i]).__name__}) modifies its input in place; "
                                   "the executor needs blocks that leave a_i unchanged")
            s.acts[i + 1] = y.detach()
            if kind == F_N:
                s.acts.pop(i, None)
        elif kind == LOSS:
            y = s.available(L).detach().requires_grad_(True)
            with torch.enable_grad():
                loss = self.loss_fn(y, target)
                loss.backward()
            s.loss = float(loss.detach())
            s.grads[L] = y.grad
            s.acts.pop(L, None)
        elif kind == B:
            x, y = s.tapes[i + 1]
            delta = s.grads[i + 1]
            if y.requires_grad:
                torch.autograd.backward(y, delta)
            s.grads[i] = x.grad if x.requires_grad else None
            del s.tapes[i + 1], s.grads[i + 1]
            s.acts.pop(i, None)
        else:
            raise ValueError(f"unknown operation {op}")


class _State:
    """Resident activations a_j, tapes abar_j = (input leaf, output) and gradients delta_j."""

    def __init__(self, inputs: torch.Tensor, rng: _RngStates) -> None:
        self.acts: dict[int, torch.Tensor] = {}
        self.tapes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.grads: dict[int, torch.Tensor | None] = {}
        self.rng = rng
        self.loss = float("nan")

    def available(self, j: int) -> torch.Tensor:
        if j in self.acts:
            return self.acts[j]
        if j in self.tapes:
            return self.tapes[j][1].detach()
        raise RuntimeError(f"a_{j} is not resident")

    def clear(self) -> None:
        self.acts.clear()
        self.tapes.clear()
        self.grads.clear()


# --------------------------------------------------------------------- reference and checks
def reference_step(blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, inputs: torch.Tensor, target: Any,
                   *, seed: int | None = 0) -> tuple[float, dict[str, torch.Tensor], torch.Tensor | None]:
    """A plain forward/backward through all blocks: (loss, parameter gradients, input gradient)."""
    blocks = as_blocks(blocks)
    params = parameters_of(blocks)
    for p in params.values():
        p.grad = None
    if seed is not None:
        torch.manual_seed(seed)
    x = inputs.detach().clone()
    if x.is_floating_point():
        x.requires_grad_(True)
    with torch.enable_grad():
        a = x
        for block in blocks:
            a = block(a)
        loss = loss_fn(a, target)
        loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in params.items() if p.grad is not None}
    for p in params.values():
        p.grad = None
    return float(loss.detach()), grads, (x.grad if x.requires_grad else None)


def compare_gradients(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], *, rtol: float = 1e-4,
                      atol: float = 1e-6) -> tuple[bool, str]:
    """(all close, a message naming the worst parameter when not)."""
    missing = set(expected) ^ set(got)
    if missing:
        return False, f"gradients differ in which parameters they cover: {sorted(missing)[:5]}"
    worst, worst_name = 0.0, ""
    ok = True
    for name, ref in expected.items():
        g = got[name]
        if not torch.allclose(g, ref, rtol=rtol, atol=atol):
            ok = False
            err = float((g - ref).abs().max())
            if err >= worst:
                worst, worst_name = err, name
    return ok, ("" if ok else f"largest gradient difference {worst:.3g} in {worst_name}")


def execute(blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, schedule: Schedule, inputs: torch.Tensor,
            target: Any, *, chain: Chain | None = None, seed: int = 0, check: bool = True,
            rtol: float = 1e-4, atol: float = 1e-6, **options: Any) -> tuple[StepResult, bool | None]:
    """Run one step under `schedule` and, when `check`, compare with plain autograd.

    Returns (result, grad_check) where grad_check is True when every parameter gradient (and
    the input's) matches the plain forward/backward with the same seed, None when unchecked.
    """
    executor = ChainExecutor(blocks, loss_fn)
    result = executor.step(schedule, inputs, target, chain=chain, seed=seed, **options)
    if not check:
        return result, None
    return result, gradients_match(result, executor.blocks, loss_fn, inputs, target, seed=seed, rtol=rtol, atol=atol)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or not b:
        return None
    return float(a) / float(b)


def measured_vs_predicted(predicted_makespan: float, predicted_peak: int, step: StepResult,
                          store_all: StepResult) -> dict[str, Any]:
    """The `memsched run --json` comparison block: predicted {makespan, peak_memory} of the
    solver's schedule, measured {time, peak_memory} of its execution, their ratios, the same
    for the store-all schedule, and the schedule's ratios to store-all (predicted and measured)."""
    return {
        "predicted": {"makespan": float(predicted_makespan), "peak_memory": int(predicted_peak)},
        "measured": {"time": step.time_ms, "peak_memory": step.peak_memory},
        "ratio": {"memory": step.memory_ratio, "time": step.time_ratio},
        "store_all": {"predicted": {"makespan": store_all.predicted_makespan, "peak_memory": store_all.predicted_peak},
                      "measured": {"time": store_all.time_ms, "peak_memory": store_all.peak_memory}},
        "vs_store_all": {"predicted": {"time": _ratio(predicted_makespan, store_all.predicted_makespan),
                                       "memory": _ratio(predicted_peak, store_all.predicted_peak)},
                         "measured": {"time": _ratio(step.time_ms, store_all.time_ms),
                                      "memory": _ratio(step.peak_memory, store_all.peak_memory)}},
    }


def gradients_match(result: StepResult, blocks: Sequence[nn.Module], loss_fn: LossFn, inputs: torch.Tensor,
                    target: Any, *, seed: int | None, rtol: float, atol: float) -> bool:
    """True when every parameter gradient and the input gradient of `result` match a plain
    forward/backward of `blocks` with the same seed (torch.allclose with rtol, atol)."""
    _, ref, ref_input = reference_step(blocks, loss_fn, inputs, target, seed=seed)
    ok, _ = compare_gradients(result.grads, ref, rtol=rtol, atol=atol)
    if ok and ref_input is not None and result.input_grad is not None:
        ok = bool(torch.allclose(result.input_grad, ref_input, rtol=rtol, atol=atol))
    return ok
