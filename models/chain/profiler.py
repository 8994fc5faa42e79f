"""Profile a chain of PyTorch blocks into a `solvers.chain.Chain` (file format memsched.chain/1).

For each block i (input a_i, output a_{i+1}), in the chain's units (ms, bytes):

- ``fwd_time`` u_f: median over `repeats` (after `warmup`) of the forward *with autograd*
  (the F_all mode; F_ck / F_n run the same code without building the graph and are usually a
  little faster, so the time model is conservative for them);
- ``bwd_time`` u_b: median time of ``torch.autograd.backward(a_{i+1}, delta)`` on a fresh
  tape, parameter-gradient accumulation included;
- ``out_size`` x_{i+1}: bytes of the distinct storages of a_{i+1};
- ``tape_size`` xbar_{i+1}: bytes of the distinct storages autograd saves during the forward
  (`torch.autograd.graph.saved_tensors_hooks`), excluding the input a_i (the simulator counts
  a_i separately and keeps it resident until B(i)), parameters and buffers, plus the output;
  it is also at least the bytes the memory measurement sees retained after the forward;
- ``fwd_overhead`` o_f: peak bytes during the forward beyond its input and what it leaves
  (tape, or output without autograd), the larger of the two modes, >= 0. The simulator has
  one o_f for F_all and F_ck/F_n; taking the larger keeps every prediction an upper bound but
  over-charges F_all by up to a tape for blocks (transformers) whose no-grad intermediates are
  what autograd would save. ``meta["per_mode"]`` keeps both modes' overheads and the no-grad
  forward times for analysis;
- ``bwd_overhead`` o_b: peak bytes during the backward beyond the state before it and the
  produced delta_i, >= 0;
- the loss: ``bwd_time`` is the time of computing the loss and back-propagating to a_L,
  ``bwd_overhead`` the peak beyond delta_L.

Times use CUDA events on GPU and ``time.perf_counter`` (or the thread's CPU time) on CPU; by
default each block is timed on its own on GPU, and each op inside whole store-all steps on CPU
(``timing="in_step"``, closer to what the executor sees there). Memory uses
``torch.cuda.max_memory_allocated`` on GPU and `models.memory.LiveTensorTracker` on CPU (which
does not see kernel-internal scratch buffers: CPU overheads are lower bounds). Parameter
gradients are allocated before measuring, so weights and their gradients are not counted,
as in the executor. The input size x_0 is the bytes of the example input.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import platform
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch
from memsched.models.chain.executor import as_blocks, parameters_of
from memsched.models.memory import LiveTensorTracker, cpu_clock, storage_key, unique_bytes
from memsched.solvers.chain import Chain
from torch import nn

__all__ = ["profile_chain", "profile_model", "BlockProfile"]

BlockProfile = dict[str, Any]


class _Timer:
    """Elapsed milliseconds of a region: CUDA events on GPU, perf_counter on CPU."""

    def __init__(self, device: torch.device, clock: str = "wall") -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.now = cpu_clock(clock)

    @contextlib.contextmanager
    def region(self, out: list[float]):
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


class _Memory:
    """Live bytes and peaks: CUDA allocator statistics, or the live-tensor tracker on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.tracker: LiveTensorTracker | None = None

    @contextlib.contextmanager
    def watching(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)
            yield self
        else:
            with LiveTensorTracker() as tracker:
                self.tracker = tracker
                yield self
            self.tracker = None

    def mark(self) -> int:
        """Current live bytes; the peak window restarts here."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return int(torch.cuda.memory_allocated(self.device))
        assert self.tracker is not None
        return self.tracker.mark()

    def current(self) -> int:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            return int(torch.cuda.memory_allocated(self.device))
        assert self.tracker is not None
        return self.tracker.current

    def peak(self) -> int:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            return int(torch.cuda.max_memory_allocated(self.device))
        assert self.tracker is not None
        return self.tracker.peak


def _leaf(a: torch.Tensor) -> torch.Tensor:
    x = a.detach()
    if x.is_floating_point() or x.is_complex():
        x.requires_grad_(True)
    return x


def _saved_bytes(fn: Callable[[], torch.Tensor], exclude: set[int]) -> tuple[torch.Tensor, int]:
    """Run `fn` with autograd, returning (its output, bytes of the distinct storages autograd
    saved, excluding the storages in `exclude`, plus the output's)."""
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return t
        key = int(st._cdata)
        if key not in exclude:
            saved[key] = int(st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn()
    for t in [y]:
        st = t.untyped_storage()
        if int(st._cdata) not in exclude:
            saved[int(st._cdata)] = int(st.nbytes())
    return y, sum(saved.values())


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


def _profile_block(block: nn.Module, a: torch.Tensor, static: set[int], device: torch.device,
                   repeats: int, warmup: int, clock: str, timed: bool = True) -> BlockProfile:
    timer = _Timer(device, clock)
    mem = _Memory(device)
    exclude = static | {storage_key(a)}
    with torch.enable_grad():
        # ---- sizes and memory (one measured pass of each mode)
        with mem.watching():
            before = mem.mark()
            x = _leaf(a)
            y, tape = _saved_bytes(functools.partial(block, x), exclude)
            retained = mem.current() - before
            o_all = mem.peak() - before - max(retained, 0)
            out_size = unique_bytes(y)
            tape = max(tape, out_size, retained)
            delta = torch.randn_like(y) if y.is_floating_point() else None
            before_b = mem.mark()
            if delta is not None and y.requires_grad:
                torch.autograd.backward(y, delta)
            dx = x.grad if x.requires_grad else None
            o_b = mem.peak() - before_b - (unique_bytes(dx) if dx is not None else 0)
            del x, y, dx, delta
            before = mem.mark()
            with torch.no_grad():
                y = block(a)
            o_ng = mem.peak() - before - unique_bytes(y)
            del y
        # ---- times
        fwd: list[float] = []
        bwd: list[float] = []
        fwd_ng: list[float] = []
        for k in range(warmup + repeats if timed else 0):
            with timer.region(fwd_ng if k >= warmup else []), torch.no_grad():
                y = block(a)
            del y
            x = _leaf(a)
            sink: list[float] = fwd if k >= warmup else []
            with timer.region(sink):
                y = block(x)
            if y.requires_grad:
                delta = torch.randn_like(y)
                sink = bwd if k >= warmup else []
                with timer.region(sink):
                    torch.autograd.backward(y, delta)
            del x, y
    return {"fwd_time": _median(fwd), "bwd_time": _median(bwd), "out_size": int(out_size), "tape_size": int(tape),
            "fwd_overhead": int(max(0, o_all, o_ng)), "bwd_overhead": int(max(0, o_b)),
            "_fwd_time_no_grad": _median(fwd_ng), "_fwd_overhead_autograd": int(max(0, o_all)),
            "_fwd_overhead_no_grad": int(max(0, o_ng))}


def _profile_loss(loss_fn: Callable[[torch.Tensor, Any], torch.Tensor], a: torch.Tensor, target: Any,
                  device: torch.device, repeats: int, warmup: int, clock: str, timed: bool = True
                  ) -> dict[str, Any]:
    timer = _Timer(device, clock)
    mem = _Memory(device)
    with torch.enable_grad():
        with mem.watching():
            y = a.detach().requires_grad_(True)
            before = mem.mark()
            loss_fn(y, target).backward()
            o_b = mem.peak() - before - unique_bytes(y.grad)
            del y
        times: list[float] = []
        for k in range(warmup + repeats if timed else 0):
            y = a.detach().requires_grad_(True)
            with timer.region(times if k >= warmup else []):
                loss_fn(y, target).backward()
    return {"bwd_time": _median(times), "bwd_overhead": int(max(0, o_b))}


def _time_in_step(blocks: list[nn.Module], loss_fn: Callable[[torch.Tensor, Any], torch.Tensor],
                  x0: torch.Tensor, target: Any, device: torch.device, repeats: int, warmup: int, clock: str
                  ) -> tuple[list[float], list[float], list[float], float]:
    """Times (ms) of each op inside whole store-all steps: F_all(i), B(i), the loss, and the
    no-grad forwards (one extra pass per repeat): medians over `repeats` steps after `warmup`.

    Each op then runs with the caches, allocator and interpreter in the state a real step
    leaves them in, which isolated repetitions of one block do not reproduce on CPU (there,
    isolated timings underestimate in-step ones by 20-30% for small blocks). Needs the memory
    of a store-all step."""
    timer = _Timer(device, clock)
    L = len(blocks)
    fwd: list[list[float]] = [[] for _ in range(L)]
    bwd: list[list[float]] = [[] for _ in range(L)]
    ng: list[list[float]] = [[] for _ in range(L)]
    loss_t: list[float] = []
    for k in range(warmup + repeats):
        keep = k >= warmup
        with torch.no_grad():
            a = x0
            for i, block in enumerate(blocks):
                with timer.region(ng[i] if keep else []):
                    a = block(a)
        del a
        with torch.enable_grad():
            tapes: list[tuple[torch.Tensor, torch.Tensor] | None] = []
            a = x0.detach()
            for i, block in enumerate(blocks):
                x = _leaf(a)
                with timer.region(fwd[i] if keep else []):
                    y = block(x)
                tapes.append((x, y))
                a = y.detach()
            y = a.requires_grad_(True)
            with timer.region(loss_t if keep else []):
                loss_fn(y, target).backward()
            delta = y.grad
            del a, x, y
            for i in reversed(range(L)):
                x, y = tapes[i]  # type: ignore[misc]
                tapes[i] = None
                with timer.region(bwd[i] if keep else []):
                    if y.requires_grad:
                        torch.autograd.backward(y, delta)
                delta = x.grad
                del x, y
    return [_median(t) for t in fwd], [_median(t) for t in bwd], [_median(t) for t in ng], _median(loss_t)


def profile_meta(source: str, device: torch.device, dtype: torch.dtype, repeats: int, warmup: int) -> dict[str, Any]:
    """The provenance every profile file carries in its meta: units, source, device, dtype,
    torch and Python versions, date (UTC), repeats and warm-up runs."""
    return {
        "units": {"time": "ms", "memory": "bytes"},
        "source": source,
        "device": _device_name(device),
        "dtype": str(dtype).replace("torch.", ""),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "repeats": repeats,
        "warmup": warmup,
    }


def profile_chain(
    blocks: nn.Module | Sequence[nn.Module],
    loss_fn: Callable[[torch.Tensor, Any], torch.Tensor],
    example_input: torch.Tensor,
    target: Any,
    *,
    repeats: int = 5,
    warmup: int = 2,
    name: str = "chain",
    meta: dict[str, Any] | None = None,
    names: Sequence[str] | None = None,
    clock: str = "wall",
    timing: str | None = None,
) -> Chain:
    """Profile every block and the loss on `example_input`; see the module docstring.

    Parameter gradients are left at None afterwards; BatchNorm running statistics are
    updated by the profiling forwards (restore a state dict if that matters). `clock` (CPU
    only): "wall" or "thread" (`models.memory.cpu_clock`). `timing`: "isolated" (each block
    timed on its own, repeatedly; the memory of one block at a time) or "in_step" (each op
    timed inside whole store-all steps, see `_time_in_step`; needs store-all's memory); by
    default "in_step" on CPU and "isolated" on CUDA.
    """
    timing = timing or ("isolated" if example_input.device.type == "cuda" else "in_step")
    if timing not in ("isolated", "in_step"):
        raise ValueError(f"timing must be 'isolated' or 'in_step', got {timing!r}")
    isolated = timing == "isolated"
    blocks = as_blocks(blocks)
    device = example_input.device
    params = parameters_of(blocks)
    for p in params.values():
        p.grad = torch.zeros_like(p)
    static: set[int] = set()
    for b in blocks:
        for t in list(b.parameters()) + list(b.buffers()):
            static.add(storage_key(t))
    for p in params.values():
        static.add(storage_key(p.grad))
    stages = []
    a = example_input.detach()
    for i, block in enumerate(blocks):
        prof = _profile_block(block, a, static, device, repeats, warmup, clock, timed=isolated)
        prof["name"] = names[i] if names else f"{i}:{type(block).__name__}"
        stages.append(prof)
        with torch.no_grad():
            a = block(a).detach()
    loss = _profile_loss(loss_fn, a, target, device, repeats, warmup, clock, timed=isolated)
    del a
    if not isolated:
        fwd, bwd, ng, loss_time = _time_in_step(blocks, loss_fn, example_input.detach(), target, device, repeats,
                                                warmup, clock)
        for st, f, b, n in zip(stages, fwd, bwd, ng):
            st.update(fwd_time=f, bwd_time=b, _fwd_time_no_grad=n)
        loss["bwd_time"] = loss_time
    for p in params.values():
        p.grad = None
    dtype = next((p.dtype for p in params.values()), example_input.dtype)
    info = {
        **profile_meta("memsched models.chain.profiler", device, dtype, repeats, warmup),
        "clock": "cuda events" if device.type == "cuda" else clock,
        "timing": timing,
        "memory_method": "torch.cuda.max_memory_allocated" if device.type == "cuda" else "LiveTensorTracker",
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params.values()),
    }
    # the simulator has one u_f and one o_f per stage; the two modes' values, for analysis
    info["per_mode"] = {key: [st.pop("_" + key) for st in stages]
                        for key in ("fwd_time_no_grad", "fwd_overhead_autograd", "fwd_overhead_no_grad")}
    info.update(meta or {})
    return Chain.from_stages(unique_bytes(example_input), stages, loss, name=name, meta=info)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu:{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def profile_model(name: str, *, repeats: int = 5, warmup: int = 2, out: str | None = None, clock: str = "wall",
                  timing: str | None = None, **sizes: Any) -> tuple[Chain, Any]:
    """Build zoo model `name` (sizes as `models.zoo.build_model`), profile it, optionally save
    the chain file to `out`; returns (chain, the built `ZooModel`)."""
    from memsched.models.zoo import build_model

    model = build_model(name, **sizes)
    meta = {"model": name, **{k: v for k, v in model.config.items()}}
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=repeats,
                          warmup=warmup, name=model.label, meta=meta, clock=clock,
                          timing=timing)
    if out is not None:
        chain.save(out)
    return chain, model
