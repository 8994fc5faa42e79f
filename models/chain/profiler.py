"""Profile a chain of PyTorch blocks into a `solvers.chain.Chain` (file format memsched.chain/1).

For each block i (input a_i, output a_{i+1}), in the chain's units (ms, bytes):

- ``fwd_time_all`` u_fa: median over `repeats` (after `warmup`) of the forward *with autograd*
  (the F_all mode), and ``fwd_time_nograd`` u_fn: the same forward without autograd (F_ck /
  F_n run the same code without building the graph, usually faster); the chain simulator and
  solvers charge each mode its own time. ``fwd_time`` u_f is the larger, for tools that know one
  forward time. ``meta["per_mode"]["fwd_time_no_grad"]`` repeats u_fn for older readers;
- ``bwd_time`` u_b: median time of ``torch.autograd.backward(a_{i+1}, delta)`` on a fresh
  tape, parameter-gradient accumulation included;
- ``out_size`` x_{i+1}: bytes of the distinct storages of a_{i+1};
- ``tape_size`` xbar_{i+1}: bytes of the distinct storages autograd saves during the forward
  (`torch.autograd.graph.saved_tensors_hooks`), excluding the input a_i (the simulator counts
  a_i separately and keeps it resident until B(i)), parameters and buffers, plus the output;
  it is also at least the bytes the memory measurement sees retained after the forward. On CPU
  with measured costs it is the allocator's: plus what the probed F_all keeps beyond it (Python
  scalars autograd saves as 0-dim tensors, 8 B each, which the tracker does not see), the
  tracker's then kept as ``meta["overheads"]["tracker"]["tape_size"]``
  (`models.chain.overheads.TAPE_FIELD`);
- ``fwd_overhead_all`` o_fa and ``fwd_overhead_nograd`` o_fn: peak bytes during the forward
  beyond its input and what it leaves, with autograd (beyond the tape: F_all) and without
  (beyond the output: F_ck / F_n), >= 0; the chain simulator and solvers charge each mode its
  own (a transformer block's no-grad intermediates are what autograd saves in its tape, so one
  value for both would over-charge F_all by up to a tape). ``fwd_overhead`` o_f is the larger,
  for the problems that charge one forward overhead;
- ``bwd_overhead`` o_bh: peak bytes during the backward beyond the state before it and the
  produced delta_i, >= 0, the caller holding delta_{i+1} and the output to its end;
- ``bwd_overhead_released`` o_b (with ``release=True``): the same backward as the executor runs
  it with early release (`models.chain.executor.release_backward`: delta_{i+1} and the output's
  data given up before it starts): the most bytes after its first allocation or free, beyond
  the state before it and delta_i.
  It may be negative (B(i) frees delta_{i+1} and what only its first nodes saved before its peak),
  never below -(out_size + tape_size) and never above ``bwd_overhead`` (clamped);
- the loss: ``bwd_time`` is the time of computing the loss and back-propagating to a_L,
  ``bwd_overhead`` the peak beyond delta_L. When block L-1 does not save its output,
  ``meta["overheads"]["loss_released"]`` holds the loss as `ChainExecutor` runs it (a_L freed once
  its forward has run) and, under ``last_block``, B(L-1) after such a loss (a_L's data freed,
  delta_L held; `_last_backward`): its peak beyond the level *with* a_L's data and delta_{L-1},
  what `models.chain.overheads.released_loss_chain` charges a schedule whose loss frees the tape's
  a_L (F_all(L-1), Loss, B(L-1)); the file's own o_b[L-1] holds a_L (the offloading executor's).

Times use CUDA events on GPU and ``time.perf_counter`` (or the thread's CPU time) on CPU; by
default each block is timed on its own on GPU, and each op inside whole store-all steps on CPU
(``timing="in_step"``, closer to what the executor sees there). Memory uses
``torch.cuda.max_memory_allocated`` on GPU and `models.memory.LiveTensorTracker` on CPU for the
sizes; on CPU with measured costs the overheads (o_fa, o_fn, o_b) are then the allocator's,
kernel scratch buffers included (`models.chain.overheads.probe_overheads`, one probed run of each
mode), and the tracker's own values are kept in ``meta["overheads"]["tracker"]`` (what a
tracker measurement is compared with). The in-step times are taken inside store-all steps of
the chain executor (`models.chain.timing`). Parameter
gradients are allocated before measuring, so weights and their gradients are not counted,
as in the executor. The input size x_0 is the bytes of the example input.

Shape-exact profiles (``cost="flops"`` or ``"roofline:<device>"``, `models.costs`): the model
is built and run once on fake tensors (``FakeTensorMode``): the sizes above come from the same
LiveTensorTracker accounting, so they equal a CPU run's to the byte, while nothing is
allocated (VGG-16 at batch 256 in seconds); the times are counted FLOP or roofline ms of the
forward with autograd, the backward and the loss, stated in ``meta["cost"]``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import platform
from collections.abc import Callable, Sequence
from typing import Any

import torch
from memsched.models.chain.executor import (
    _Handle,
    _one,
    as_blocks,
    forward_block,
    loss_backward,
    loss_input,
    parameters_of,
)
from memsched.models.chain.overheads import (
    RELEASED_FIELD,
    TAPE_FIELD,
    TRACKER_FIELDS,
    UNSEEN_NOTE,
    overheads_meta,
    probe_loss_overhead,
    probe_overheads,
    released_bwd_overhead,
)
from memsched.models.costs import CostModel, is_fake, parse_cost, shape_exact_model
from memsched.models.measure import MemoryWatch as _Memory
from memsched.models.measure import Timer as _Timer
from memsched.models.measure import median as _median
from memsched.models.memory import storage_key, unique_bytes
from memsched.models.timing import TIMINGS
from memsched.solvers.chain import Chain
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, Loss, Op, Schedule
from torch import nn

__all__ = ["profile_chain", "profile_model", "shape_exact_model", "BlockProfile"]

BlockProfile = dict[str, Any]


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


def _counted(cost: CostModel | None, counts: list[float]) -> contextlib.AbstractContextManager[Any]:
    """Counts the operations of the region with `cost`'s counter, appending the cost to `counts`
    (nothing for a measured cost model)."""
    if cost is None or cost.measured:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def region():
        with cost.counter() as counter:
            yield
        counts.append(cost.value(counter))
    return region()


def _profile_block(block: nn.Module, a: torch.Tensor, static: set[int], device: torch.device,
                   repeats: int, warmup: int, clock: str, timed: bool = True,
                   cost: CostModel | None = None, probe: bool = False, release: bool = False,
                   index: int = 0) -> BlockProfile:
    """The profile of block `index` on its input `a` (the module docstring's fields). A block that
    modifies its input in place is refused (`models.chain.executor.InPlaceInputError`), as the
    executor refuses it."""
    timer = _Timer(device, clock)
    mem = _Memory(device)
    exclude = static | {storage_key(a)}
    fwd: list[float] = []
    bwd: list[float] = []
    fwd_ng: list[float] = []
    with torch.enable_grad():
        # ---- sizes and memory (one measured pass of each mode; counted costs)
        with mem.watching():
            before = mem.mark()
            x = _leaf(a)
            with _counted(cost, fwd):
                y, tape = _saved_bytes(functools.partial(forward_block, block, index, x), exclude)
            retained = mem.current() - before
            o_all = mem.peak() - before - max(retained, 0)
            out_size = unique_bytes(y)
            tape = max(tape, out_size, retained)
            delta = torch.randn_like(y) if y.is_floating_point() else None
            before_b = mem.mark()
            if delta is not None and y.requires_grad:
                with _counted(cost, bwd):
                    torch.autograd.backward(y, delta)
            dx = x.grad if x.requires_grad else None
            o_b = mem.peak() - before_b - (unique_bytes(dx) if dx is not None else 0)
            del x, y, dx, delta
            before = mem.mark()
            with torch.no_grad(), _counted(cost, fwd_ng):
                y = forward_block(block, index, a)
            o_ng = mem.peak() - before - unique_bytes(y)
            nxt = None if timed else y.detach()  # the next block's input (a counted profile runs once)
            del y
            o_br = released_bwd_overhead(block, a, lambda: mem.mark(after_start=True), mem.peak) if release else None
        floor = -(out_size + tape)  # B(i) frees at most delta_{i+1} and its tape (docs/chain.md)
        tracker = {"fwd_overhead_all": int(max(0, o_all)), "fwd_overhead_nograd": int(max(0, o_ng)),
                   "bwd_overhead": int(max(0, o_b))}
        if release:
            tracker[RELEASED_FIELD] = _released(o_br, o_b, floor)
        unseen = 0  # bytes the tape keeps that only the allocator sees (Python scalars autograd saves)
        if probe:  # the allocator's transients (kernel scratch buffers included) replace the tracker's
            p_all, p_ng, p_b, p_br, unseen = probe_overheads(block, a, tape, release=release)
            # never below the tracker's: a small allocation the tracker does not count in the tape (a
            # scalar wrapped into a tensor by `y * 2`, 8 bytes) freed early in B lowers the probe's
            # peak above its start, while the step's allocator still holds it from F on. o_fa is
            # beyond the allocator's tape (tape + unseen) and the tracker's beyond its own (tape): the
            # tracker's is compared less `unseen`, else a peak the tracker reaches before the scalars
            # are saved would charge them twice
            o_all = max(p_all, tracker["fwd_overhead_all"] - unseen)
            o_ng, o_b = (max(p, tracker[k]) for p, k in ((p_ng, "fwd_overhead_nograd"), (p_b, "bwd_overhead")))
            o_br = max(p_br, tracker[RELEASED_FIELD]) if release else p_br
        # ---- times
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
    if unseen:  # the chain's tape is the allocator's, the tracker's kept beside its overheads
        tracker[TAPE_FIELD] = int(tape)
    out = {RELEASED_FIELD: _released(o_br, o_b, floor - unseen)} if release else {}
    return {**out, "fwd_time": _median(fwd), "bwd_time": _median(bwd), "out_size": int(out_size),
            "tape_size": int(tape + unseen), "fwd_overhead": int(max(0, o_all, o_ng)), "bwd_overhead": int(max(0, o_b)),
            "_next": nxt, "_fwd_time_no_grad": _median(fwd_ng), "fwd_overhead_all": int(max(0, o_all)),
            "fwd_overhead_nograd": int(max(0, o_ng)), "_tracker": tracker}


def _released(o_br: int | None, o_b: int, floor: int) -> int:
    """``bwd_overhead_released`` from a measured release overhead `o_br` (None: nothing to release,
    the held `o_b`): clamped to [floor, max(0, o_b)], the chain format's bounds."""
    return int(min(max(0, o_b), max(floor, o_b if o_br is None else o_br)))


class _FreedOutputTape:
    """A fresh F_all of the last block `block` on `a` as `ChainExecutor` keeps it for the loss: the
    output's stand-in (`_Handle`) in ``handle``, a_L's data in ``data`` (a list, emptied by `run`)
    and a random delta_L in ``delta``. ``ok`` is False when the output needs no gradient."""

    def __init__(self, block: nn.Module, a: torch.Tensor) -> None:
        self.x = _leaf(a)
        y = block(self.x)
        self.ok = bool(y.requires_grad and y.is_floating_point())
        one = y.new_zeros(()) if is_fake(y) else _one(y.device, y.dtype)
        self.data = [y.detach()]
        self.delta = torch.randn_like(self.data[0]) if self.ok else None
        self.handle = _Handle.apply(y, one) if self.ok else None
        del y

    def run(self, before: Callable[[], Any], after: Callable[[], Any]) -> int:
        """Call `before`, drop a_L's data (the loss frees it), call `after`, then B(L-1) holding delta_L
        to its end (the executor's ``torch.autograd.backward(stand-in, delta_L)``); returns
        delta_{L-1}'s bytes."""
        before()
        self.data.clear()
        after()
        torch.autograd.backward(self.handle, self.delta)
        dx = self.x.grad if self.x.requires_grad else None
        return unique_bytes(dx) if dx is not None else 0


def _last_backward(block: nn.Module, a: torch.Tensor, device: torch.device, probe: bool) -> dict[str, int] | None:
    """B(L-1)'s held overhead (bytes, >= 0) once the loss has freed a_L, as `ChainExecutor` runs it
    when block L-1 does not save its output: F_all(L-1) keeps a stand-in and a_L's data, `Loss`
    frees the data, B(L-1) back-propagates delta_L (held to its end) through the stand-in. The peak
    after the data's free, minus the level *with* it (the chain charges xbar[L], a_L included, until
    B(L-1) ends) and delta_{L-1}: x[L] below ``bwd_overhead`` for a head that frees x[L] bytes.
    ``{"tracker": the tracker's, "bwd_overhead": the allocator probe's (with `probe`, never below
    the tracker's), else the tracker's}``; None when a_L needs no gradient."""
    mem = _Memory(device)
    with torch.enable_grad(), mem.watching():
        tape = _FreedOutputTape(block, a)
        if not tape.ok:
            return None
        levels: list[int] = []
        dx = tape.run(lambda: levels.append(mem.current()), mem.mark)  # the window from the level without a_L
        tracker = int(max(0, mem.peak() - levels[0] - dx))
        del tape
    if not probe:
        return {"tracker": tracker, "bwd_overhead": tracker}
    from memsched.models.alloc_probe import AllocatorProbe

    with torch.enable_grad(), AllocatorProbe() as p:  # started before the tape: the probe sees the data's free
        tape = _FreedOutputTape(block, a)
        dx = tape.run(p.mark, lambda: None)  # `after_mark`: the most after the data's free, the level with it
        del tape
    level, most = p.after_mark()
    return {"tracker": tracker, "bwd_overhead": int(max(0, tracker, most - level - dx))}


def _saves_output(block: nn.Module, a: torch.Tensor, static: set[int]) -> bool:
    """Whether autograd saves (a view of) the block's output during its forward (ReLU, sigmoid,
    softmax do; a linear layer does not): then the tape keeps the output's bytes whoever else
    drops them."""
    keys: set[int] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        with contextlib.suppress(RuntimeError, NotImplementedError):
            keys.add(storage_key(t))
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = block(_leaf(a))
    return storage_key(y) in keys - static


def _profile_loss(loss_fn: Callable[[torch.Tensor, Any], torch.Tensor], a: torch.Tensor, target: Any,
                  device: torch.device, repeats: int, warmup: int, clock: str, timed: bool = True,
                  cost: CostModel | None = None, probe: bool = False) -> dict[str, Any]:
    timer = _Timer(device, clock)
    mem = _Memory(device)
    times: list[float] = []
    with torch.enable_grad():
        with mem.watching():
            grads: list[torch.Tensor] = []
            y = loss_input(a.clone(), grads)  # a copy: the loss may modify its input in place
            before = mem.mark()
            with _counted(cost, times):
                loss_fn(y, target).backward()
            o_b = mem.peak() - before - unique_bytes(grads)
            del y, grads
        tracker = int(max(0, o_b))
        with mem.watching():  # the executor's loss (`loss_backward`): a_L's bytes freed after the forward
            box = [a.detach().clone()]
            before = mem.mark()
            _, delta = loss_backward(loss_fn, box, target)
            released = {"tracker": int(max(0, mem.peak() - before - unique_bytes(delta)))}
            del delta
        released["bwd_overhead"] = released["tracker"]
        if probe:
            o_b = probe_loss_overhead(loss_fn, a, target)
            released["bwd_overhead"] = probe_loss_overhead(loss_fn, a, target, release=True)
        for k in range(warmup + repeats if timed else 0):
            y = loss_input(a.clone(), [])
            with timer.region(times if k >= warmup else []):
                loss_fn(y, target).backward()
    return {"bwd_time": _median(times), "bwd_overhead": int(max(0, o_b)), "_tracker": tracker,
            "_released": released}


def no_grad_timing_schedule(L: int) -> Schedule:
    """F_ck(0) .. F_ck(L-1) (each stage's no-grad forward once, every a_i kept), the loss, then
    F_all(i) B(i) for i = L-1 .. 0: the step whose F_ck times are the profile's u_fn. Its peak is
    below store-all's (the activations and one tape at a time)."""
    ops: list[Op] = [F_ck(i) for i in range(L)] + [Loss(L)]
    for i in reversed(range(L)):
        ops += [F_all(i), Bwd(i)]
    return Schedule(ops, L)


def _time_in_step(blocks: list[nn.Module], loss_fn: Callable[[torch.Tensor, Any], torch.Tensor],
                  x0: torch.Tensor, target: Any, device: torch.device, repeats: int, warmup: int, clock: str
                  ) -> tuple[list[float], list[float], list[float], float]:
    """Times (ms) of each op inside whole steps of the chain executor: F_all(i), B(i) and the loss
    inside store-all steps, F_ck(i) (the no-grad forward, u_fn) inside steps of
    `no_grad_timing_schedule` (`models.chain.timing.op_times` on `ChainExecutor` timed runs: the
    executor's own per-op work included, for both modes alike): medians over `repeats` steps
    after `warmup`.

    Each op then runs with the caches, allocator and interpreter in the state a real step
    leaves them in, which isolated repetitions of one block do not reproduce on CPU (there,
    isolated timings underestimate in-step ones by 20-30% for small blocks). Needs the memory
    of a store-all step."""
    from memsched.models.chain.executor import ChainExecutor
    from memsched.models.chain.timing import op_times
    from memsched.solvers.chain.baselines import store_all_schedule

    L = len(blocks)
    executor = ChainExecutor(blocks, loss_fn)
    ops = list(store_all_schedule(L).ops)
    times = op_times(lambda: executor._run(ops, x0, target, None, False, False, clock), repeats=repeats,
                     warmup=warmup)
    ng_ops = list(no_grad_timing_schedule(L).ops)
    ng = op_times(lambda: executor._run(ng_ops, x0, target, None, False, False, clock), repeats=repeats,
                  warmup=warmup)
    return ([times[f"F_all({i})"] for i in range(L)], [times[f"B({i})"] for i in range(L)],
            [ng[f"F_ck({i})"] for i in range(L)], times["Loss"])


#: the most timed repetitions a profile takes (the command line's --repeats range)
MAX_REPEATS = 10**4


def _checked_repeats(repeats: Any, warmup: Any, timing: Any) -> tuple[int, int]:
    """(repeats, warmup) checked to be ints (1..`MAX_REPEATS`, 0..`MAX_REPEATS`), and `timing`
    None or one of `TIMINGS`; bad input raises `InputError` naming the argument."""
    from memsched.solvers.errors import InputError
    from memsched.solvers.units import check_int

    if timing is not None and (not isinstance(timing, str) or timing not in TIMINGS):
        raise InputError(f"unknown timing {timing!r} (one of {', '.join(TIMINGS)})", field="timing")
    return check_int(repeats, "repeats", 1, MAX_REPEATS), check_int(warmup, "warmup", 0, MAX_REPEATS)


def network_dtype(blocks: Sequence[nn.Module], example_input: torch.Tensor) -> torch.dtype:
    """The dtype a profile records as ``meta.dtype`` for the network of `blocks` on `example_input`:
    its first parameter's, else (no parameters) the input's. A factory's network is built at its own
    dtype, so `models.run` compares a rebuilt network's with the recorded one by this same rule."""
    return next((p.dtype for p in parameters_of(list(blocks)).values()), example_input.dtype)


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
    cost: str | CostModel = "measured",
    release: bool = False,
) -> Chain:
    """Profile every block and the loss on `example_input`; see the module docstring.

    `release`: also measure each B(i) with early release (``bwd_overhead_released``, and the
    tracker's under ``meta["overheads"]["tracker"]``), as `ChainExecutor` runs such a chain.

    `cost`: "measured" (times measured as described above), or a counted cost model of
    `models.costs` ("flops", "roofline:a100", ...): times are then counted on the one pass
    that measures the sizes, nothing is timed, and the blocks may hold fake tensors
    (`shape_exact_model`).

    Parameter gradients are left at None afterwards; BatchNorm running statistics are
    updated by the profiling forwards (restore a state dict if that matters). `clock` (CPU
    only): "wall" or "thread" (`models.memory.cpu_clock`). `timing`: "isolated" (each block
    timed on its own, repeatedly; the memory of one block at a time) or "in_step" (each op
    timed inside whole store-all steps, see `_time_in_step`; needs store-all's memory); by
    default "in_step" on CPU and "isolated" on CUDA. `repeats` (an int in 1..10**4), `warmup`
    (0..10**4) and `timing` are checked: bad input raises `InputError` naming them.
    """
    repeats, warmup = _checked_repeats(repeats, warmup, timing)
    model = cost if isinstance(cost, CostModel) else parse_cost(cost)
    timing = timing or ("isolated" if example_input.device.type == "cuda" else "in_step")
    isolated = timing == "isolated" or not model.measured
    timed = model.measured and isolated
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
    probe = model.measured and device.type == "cpu" and not is_fake(example_input)
    last_input = a
    for i, block in enumerate(blocks):
        last_input = a
        prof = _profile_block(block, a, static, device, repeats, warmup, clock, timed=timed, cost=model, probe=probe,
                              release=release, index=i)
        prof["name"] = names[i] if names else f"{i}:{type(block).__name__}"
        stages.append(prof)
        nxt = prof.pop("_next")
        if nxt is None:
            with torch.no_grad():
                nxt = block(a).detach()
        a = nxt
    loss = _profile_loss(loss_fn, a, target, device, repeats, warmup, clock, timed=timed, cost=model, probe=probe)
    released = loss.pop("_released")
    if blocks and _saves_output(blocks[-1], last_input, static):
        released = None  # the tape abar_L keeps a_L's bytes: the loss cannot free them
    elif blocks:  # B(L-1) runs after the loss freed a_L (`released_loss_chain` charges this)
        last = _last_backward(blocks[-1], last_input, device, probe)
        if last is not None:
            released["last_block"] = last
    fields = (*TRACKER_FIELDS, RELEASED_FIELD) if release else TRACKER_FIELDS
    tracker = {f: [st["_tracker"][f] for st in stages] for f in fields}
    if any(TAPE_FIELD in st["_tracker"] for st in stages):  # only where the allocator's tapes differ
        tracker[TAPE_FIELD] = [st["_tracker"].get(TAPE_FIELD, st["tape_size"]) for st in stages]
    tracker["bwd_overhead"].append(loss.pop("_tracker"))
    if release:
        tracker[RELEASED_FIELD].append(tracker["bwd_overhead"][-1])  # the loss releases nothing early
    for st in stages:
        del st["_tracker"]
    del a
    if not isolated:
        fwd, bwd, ng, loss_time = _time_in_step(blocks, loss_fn, example_input.detach(), target, device, repeats,
                                                warmup, clock)
        for st, f, b, n in zip(stages, fwd, bwd, ng):
            st.update(fwd_time=f, bwd_time=b, _fwd_time_no_grad=n)
        loss["bwd_time"] = loss_time
    for p in params.values():
        p.grad = None
    dtype = network_dtype(blocks, example_input)
    info = {
        **profile_meta("memsched models.chain.profiler", device, dtype, repeats, warmup),
        "clock": "cuda events" if device.type == "cuda" else clock,
        "timing": timing,
        "memory_method": "torch.cuda.max_memory_allocated" if device.type == "cuda" else "LiveTensorTracker",
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params.values()),
    }
    if not model.measured:
        fake = is_fake(example_input)
        for key in ("clock", "timing", "repeats", "warmup"):
            info.pop(key)
        info.update(model.meta(), units={"time": model.unit, "memory": "bytes"},
                    device=model.device.name if model.device is not None else "none (counted)",
                    memory_method="LiveTensorTracker" + (" on fake tensors (the sizes of a CPU run)" if fake else ""),
                    shapes="fake tensors (torch FakeTensorMode): nothing allocated" if fake else "real tensors")
    else:
        info["cost"] = "measured"
    info["overheads"] = _overheads_info(device, probe, fake=not model.measured and is_fake(example_input),
                                        tracker=tracker)
    if TAPE_FIELD in tracker:
        info["overheads"]["note"] += f"; {UNSEEN_NOTE}"
    if released is not None:
        info["overheads"]["loss_released"] = released
    # per-mode forward times: u_fa (autograd), u_fn (no grad), u_f their max; per_mode for older readers
    for st in stages:
        fa, fn = st["fwd_time"], st.pop("_fwd_time_no_grad")
        st.update(fwd_time=max(fa, fn), fwd_time_all=fa, fwd_time_nograd=fn)
    info["per_mode"] = {"fwd_time_no_grad": [st["fwd_time_nograd"] for st in stages]}
    info.update(meta or {})
    return Chain.from_stages(unique_bytes(example_input), stages, loss, name=name, meta=info)


def _overheads_info(device: torch.device, probe: bool, *, fake: bool, tracker: dict[str, list[int]]
                    ) -> dict[str, Any]:
    """meta["overheads"]: who measured o_fa, o_fn, o_b (`models.chain.overheads`)."""
    from memsched.models.alloc_probe import METHOD

    if probe:
        return overheads_meta(METHOD, tracker, "kernel scratch buffers included (the tracker's own values "
                                               "under 'tracker', for comparing tracker measurements)")
    if device.type == "cuda":
        return overheads_meta("torch.cuda.max_memory_allocated", note="kernel workspaces included")
    return overheads_meta("LiveTensorTracker" + (" on fake tensors" if fake else ""), note=(
        "tensor outputs only: kernel scratch buffers (CPU convolution workspaces) are not seen, a real CPU "
        "run's allocator peaks higher on convolutions; profile with measured costs on the CPU to charge them"))


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu:{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def profile_model(name: str, *, repeats: int = 5, warmup: int = 2, out: str | None = None, clock: str = "wall",
                  timing: str | None = None, cost: str = "measured", release: bool = False,
                  **sizes: Any) -> tuple[Chain, Any]:
    """Build zoo model `name` (sizes as `models.zoo.build_model`), profile it, optionally save
    the chain file to `out`; returns (chain, the built `ZooModel`). `release`: measure B(i) with
    early release too (`profile_chain`).

    With a counted `cost` ("flops", "roofline:<device>") the model is built and profiled on fake
    tensors (`shape_exact_model`): sizes exact, nothing allocated (the returned model's tensors
    are fake); `device` must then be the CPU, whose sizes are reproduced. A network that fails at
    these sizes (BatchNorm at batch 1 on a 1x1 feature map) raises `InputError` naming them
    (`models.network.diagnosed`)."""
    from memsched.models.network import diagnosed
    from memsched.models.zoo import build_model

    repeats, warmup = _checked_repeats(repeats, warmup, timing)  # before building (seconds for a large network)
    model_cost = parse_cost(cost)
    context = contextlib.nullcontext() if model_cost.measured else shape_exact_model()
    if not model_cost.measured and str(sizes.get("device", "cpu")) != "cpu":
        from memsched.solvers.errors import InputError, flag

        raise InputError(f"a counted cost model profiles fake CPU tensors: leave {flag('device')} out or use cpu",
                         field=flag("device"))
    with context:
        model = build_model(name, **{**sizes, **({} if model_cost.measured else {"device": "cpu"})})
        meta = {"model": name, **{k: v for k, v in model.config.items()}}
        with diagnosed(model):  # a network that cannot run at these sizes is bad input naming them
            chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=repeats,
                                  warmup=warmup, name=model.label, meta=meta, clock=clock,
                                  timing=timing, cost=model_cost, release=release)
    if out is not None:
        save_profiled(chain, out)
    return chain, model


def save_profiled(chain: Chain, out: str) -> None:
    """Write the profiled `chain` to the chain file `out`, its ``model`` / ``factory`` specs recorded
    relative to that file's folder when they name a factory file (`models.network.spec_beside`), so
    that `memsched run` finds the factory again from anywhere and after the folder moved."""
    from memsched.models.network import spec_beside

    for key in ("model", "factory"):
        if isinstance(chain.meta.get(key), str):
            chain.meta[key] = spec_beside(chain.meta[key], out)
    chain.save(out)
