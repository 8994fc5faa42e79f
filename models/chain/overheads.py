"""Transient memory of a stage by the CPU allocator, and predictions under each memory definition.

The chain simulator charges an operation ``state + its output + its overhead`` while it runs:
o_fa[i] for F_all(i), o_fn[i] for F_ck(i) / F_n(i), o_b[i] for B(i) (docs/chain.md). What that
overhead is depends on who counts the bytes:

- `models.memory.LiveTensorTracker` counts tensors returned by aten operations: it never sees
  the scratch buffers a kernel allocates for itself (a CPU convolution's im2col / oneDNN
  workspace, a reduction's temporary), so its overheads are lower bounds of the allocator's;
- `models.alloc_probe.AllocatorProbe` counts every allocation of the CPU allocator, scratch
  buffers included: the memory a CPU run really takes.

On the CPU the profiler (`models.chain.profiler`, measured costs) charges the allocator's
overheads in the chain's fields (``fwd_overhead_all`` o_fa, ``fwd_overhead_nograd`` o_fn,
``bwd_overhead`` o_b, ``fwd_overhead`` = max(o_fa, o_fn)), measured by `probe_overheads` on one
run of each mode after the tracker's (so lazily built kernel caches are not charged), never below
the tracker's (a few bytes the tracker leaves out of a tape, such as a Python scalar wrapped into a
tensor, freed early in B would lower the probe's peak above its start), and keeps the tracker's in
``meta["overheads"]["tracker"]``. Each measurement of a step is then compared
with the prediction under its own definition: the allocator probe's peak with the chain as it
is, the tracker's peak with `tracker_chain` (the same chain with the tracker's overheads).
The sizes x are the same for both. So is xbar, except for the bytes a tape keeps that only the
allocator sees: a Python scalar in an op with a tape (``h * 1.1``) is saved by autograd as a
0-dim double tensor (8 B) that no aten op returns, so the tracker never sees it, while the
allocator holds it from F_all(i) until B(i) frees the tape. On the CPU with the probe the chain's
``tape_size`` is then the allocator's (the tracker's tape plus those bytes, `probe_overheads`'
``unseen``: what the probed F_all keeps beyond the tracker's tape) and o_fa the allocator's peak
beyond it; the tracker's tape sizes are kept as ``meta["overheads"]["tracker"]["tape_size"]``
(`TAPE_FIELD`, only where some stage has such bytes, so other profiles are unchanged), which
`tracker_chain` gives back.

Definitions (bytes, >= 0; "peak" is the probe's running maximum above the level at the start):
o_fa = peak(F_all) - xbar[i+1]; o_fn = peak(F_n) - x[i+1]; o_bh = peak(B) - x[i] (the produced
delta_i; the file's ``bwd_overhead``); the loss: o_b[L] = peak(Loss) - x[L]. With early release
(``bwd_overhead_released``, the chain's o_b, may be < 0): B(i) run by
`models.chain.executor.release_backward`, o_b = inner peak(B) - x[i], the inner peak leaving out
the level at the start (the backward frees delta_{i+1} and a_{i+1}'s data as it goes). On CUDA the profiler's
``torch.cuda.max_memory_allocated`` already sees workspaces, and a fake-tensor (shape-exact)
profile allocates nothing: neither uses the probe (the meta says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from memsched.models.memory import unique_bytes
from memsched.solvers.chain import Chain
from memsched.solvers.chain.schedule import F_ALL, LOSS, B
from memsched.solvers.join import Join
from torch import nn

__all__ = ["probe_overheads", "probe_loss_overhead", "tracker_chain", "overheads_meta", "TRACKER_FIELDS",
           "TAPE_FIELD", "UNSEEN_NOTE", "tracker_join", "predict_both", "released_loss_chain", "loss_frees_tape"]

#: the per-stage fields a profile's meta["overheads"]["tracker"] holds (lists, the loss last in bwd)
TRACKER_FIELDS = ("fwd_overhead_all", "fwd_overhead_nograd", "bwd_overhead")
#: the tracker's B(i) overheads with early release (a list like bwd_overhead, the loss's last and equal)
RELEASED_FIELD = "bwd_overhead_released"
#: the tracker's tape sizes xbar (bytes, a list of L, stage i's xbar[i+1]) in meta["overheads"]["tracker"],
#: recorded only where the allocator's differ (the chain's tape_size then holds the allocator's)
TAPE_FIELD = "tape_size"
#: what the allocator's tape sizes hold beyond the tracker's (the profile's meta["overheads"]["note"] adds it)
UNSEEN_NOTE = ("tape_size holds the bytes a tape keeps that only the allocator sees (Python scalars autograd "
               "saves as 0-dim tensors, 8 B each); the tracker's tape sizes are under tracker.tape_size")


def _leaf(a: torch.Tensor) -> torch.Tensor:
    x = a.detach()
    if x.is_floating_point() or x.is_complex():
        x.requires_grad_(True)
    return x


class _ReleasedTape:
    """A fresh F_all(i) of `block` on `a` kept as the chain executor keeps it with early release:
    ``box`` holds the output's stand-in (`_Handle`), ``data`` a_{i+1}'s data, ``grads`` a random
    delta_{i+1}; `run` drops ``data`` and runs `release_backward`, then ``dx`` is delta_i's bytes.
    ``ok`` is False when the output needs no gradient (nothing to measure)."""

    def __init__(self, block: nn.Module, a: torch.Tensor) -> None:
        from memsched.models.chain.executor import _Handle, _one
        from memsched.models.costs import is_fake

        with torch.enable_grad():
            self.x = _leaf(a)
            y = block(self.x)
        self.ok = bool(y.requires_grad and y.is_floating_point())
        # under fake tensors (a shape-exact profile) the stand-in's scalar is fake too
        self.one = y.new_zeros(()) if is_fake(y) else _one(y.device, y.dtype)
        self.data: torch.Tensor | None = y.detach()
        self.grads: list[torch.Tensor | None] = [torch.randn_like(self.data)] if self.ok else []
        self.box = [_Handle.apply(y, self.one)] if self.ok else []
        del y

    def run(self) -> int:
        """B(i) with early release; returns delta_i's bytes (0 without one)."""
        from memsched.models.chain.executor import release_backward

        self.data = None
        with torch.enable_grad():
            release_backward(self.box, self.grads, self.one)
        dx = self.x.grad if self.x.requires_grad else None
        self.x = None  # type: ignore[assignment]
        return unique_bytes(dx) if dx is not None else 0


def released_bwd_overhead(block: nn.Module, a: torch.Tensor, mark: Callable[[], int],
                          peak: Callable[[], int]) -> int | None:
    """o_b of B(i) with early release (``bwd_overhead_released``, bytes, may be < 0): the most
    bytes after the backward's first allocation or free, beyond the state before it and delta_i,
    as the chain executor runs it (`_ReleasedTape`). `mark()` opens a window whose peak leaves out
    the level at its start and returns that level; `peak()` reads the window's peak. None when
    the block's output needs no gradient."""
    tape = _ReleasedTape(block, a)
    if not tape.ok:
        return None
    before = mark()
    dx = tape.run()
    return int(peak() - before - dx)


def probe_overheads(block: nn.Module, a: torch.Tensor, tape: int, *, release: bool = True
                    ) -> tuple[int, int, int, int, int]:
    """(o_fa, o_fn, o_b, o_b released, unseen) of `block` on input `a` by the CPU allocator (module
    docstring): one F_all (its tape `tape` bytes by the tracker, xbar), one backward with a random
    delta, one no-grad forward, one F_all and backward with early release (as
    `released_bwd_overhead`: the probe's most bytes after a mark set at B's start; with `release`),
    each under its own `AllocatorProbe`. Parameter gradients should exist already (as in the
    executor's measured runs), so accumulating into them allocates nothing. Without `release` the
    fourth value is o_b. `unseen` (bytes, >= 0): what the F_all keeps by the allocator beyond `tape`
    (the Python scalars its tape saves, `UNSEEN_NOTE`); o_fa is the allocator's peak beyond
    ``tape + unseen``, the allocator's xbar."""
    from memsched.models.alloc_probe import AllocatorProbe

    with torch.enable_grad():
        x = _leaf(a)
        with AllocatorProbe() as p_all:
            y = block(x)
        unseen = int(max(0, p_all.net - tape))  # kept by the allocator beyond the tracker's tape
        o_b = 0
        if y.requires_grad and y.is_floating_point():
            delta = torch.randn_like(y)
            with AllocatorProbe() as p_b:
                torch.autograd.backward(y, delta)
            dx = x.grad if x.requires_grad else None
            o_b = p_b.peak - (unique_bytes(dx) if dx is not None else 0)
            del delta, dx
        del x, y
    with torch.no_grad(), AllocatorProbe() as p_ng:
        y = block(a)
    o_ng = p_ng.peak - unique_bytes(y)
    del y
    o_b, o_br = int(max(0, o_b)), int(max(0, o_b))
    if release:
        with AllocatorProbe() as p_br:  # started before the tape: the probe sees the release's frees
            released = _ReleasedTape(block, a)
            if released.ok:
                p_br.mark()
                dx_bytes = released.run()
        if released.ok:
            level, most = p_br.after_mark()
            o_br = min(o_b, most - level - dx_bytes)
        del released
    return int(max(0, p_all.peak - tape - unseen)), int(max(0, o_ng)), o_b, int(o_br), unseen


def probe_loss_overhead(loss_fn: Callable[[Any, Any], torch.Tensor], outputs: Any, target: Any, *,
                        release: bool = False) -> int:
    """o_b of a loss stage by the CPU allocator: peak bytes while computing ``loss_fn(y, target)``
    and back-propagating to y (copies of `outputs`, made before: a tensor, or a list for a join's
    loss; `models.chain.executor.loss_input`, so the loss may modify them in place), beyond the
    gradients it produces. `release` (one tensor): the loss as the chain
    executor runs it (`models.chain.executor.loss_backward` on a copy of `outputs` it owns, whose
    bytes are freed after the loss's forward unless the loss saved them)."""
    from memsched.models.alloc_probe import AllocatorProbe

    if release:
        from memsched.models.chain.executor import loss_backward

        with AllocatorProbe() as probe:  # the copy is made inside: the probe sees its free only then
            box = [outputs.detach().clone()]
            size = unique_bytes(box[0])
            _, delta = loss_backward(loss_fn, box, target)
        return int(max(0, probe.peak - size - unique_bytes(delta)))
    from memsched.models.chain.executor import loss_input

    many = isinstance(outputs, (list, tuple))
    grads: list[torch.Tensor] = []
    with torch.enable_grad():  # copies (made before the probe): the loss may modify its inputs in place
        ys = [loss_input(o.detach().clone(), grads) for o in (outputs if many else [outputs])]
        with AllocatorProbe() as probe:
            loss_fn(ys if many else ys[0], target).backward()
    return int(max(0, probe.peak - unique_bytes(grads)))


def overheads_meta(method: str, tracker: dict[str, list[int]] | None = None, note: str | None = None
                   ) -> dict[str, Any]:
    """A profile's ``meta["overheads"]``: the method of the chain's overhead fields, the tracker's
    own values when they differ in method (`TRACKER_FIELDS`), and a note on what the method misses."""
    out: dict[str, Any] = {"method": method}
    if tracker is not None:
        out["tracker"] = tracker
    if note:
        out["note"] = note
    return out


def tracker_chain(chain: Chain, tracker: dict[str, list[int]] | None = None, *, release: bool = False) -> Chain:
    """`chain` with the tracker's overheads (`tracker`, by default its ``meta["overheads"]["tracker"]``)
    and, where it records them (`TAPE_FIELD`), the tracker's tape sizes xbar: the prediction a
    `LiveTensorTracker` measurement is compared with; `chain` itself when it has none.
    B(i) charges the tracker's ``bwd_overhead_released`` when the tracker has it and `release` is
    true (the chain executor's early release), else ``bwd_overhead`` (B holding its inputs)."""
    if tracker is None and isinstance(chain.meta, dict):
        tracker = (chain.meta.get("overheads") or {}).get("tracker")
    if not tracker:
        return chain
    L = chain.length
    o_fa = np.array(list(tracker["fwd_overhead_all"][:L]) + [0], dtype=np.int64)
    o_fn = np.array(list(tracker["fwd_overhead_nograd"][:L]) + [0], dtype=np.int64)
    o_bh = np.array(list(tracker["bwd_overhead"][:L + 1]), dtype=np.int64)
    early = tracker.get(RELEASED_FIELD) if release else None
    o_b = o_bh if early is None else np.array(list(early[:L + 1]), dtype=np.int64)
    tapes = tracker.get(TAPE_FIELD)
    xbar = chain.xbar.copy() if tapes is None else np.array([0, *list(tapes)[:L], 0], dtype=np.int64)
    if any(a.shape != (L + 1,) for a in (o_fa, o_fn, o_b, o_bh)) or xbar.shape != (L + 2,):
        raise ValueError(f"meta.overheads.tracker of {chain.name!r} does not have the chain's {L} stages")
    return Chain.with_mode_overheads(chain.u_f.copy(), chain.u_b.copy(), chain.x.copy(), xbar, o_fa,
                                     o_fn, o_b, name=chain.name, stage_names=list(chain.stage_names),
                                     meta=dict(chain.meta), u_fa=chain.u_fa.copy(), u_fn=chain.u_fn.copy(),
                                     o_bh=None if early is None else o_bh)


def loss_frees_tape(ops: Sequence[Any], L: int) -> bool:
    """Whether the chain schedule `ops` (of L stages) runs B(L-1) on a tape abar_L that existed at
    `Loss`: an F_all(L-1) before the loss and none between it and B(L-1). `ChainExecutor`'s loss
    then freed a_L's data before B(L-1) (when block L-1 does not save it); after a loss on a
    standalone a_L (F_n(L-1), Loss, ..., F_all(L-1), B(L-1)) B(L-1) holds it."""
    tape = loss = False
    for op in ops:
        kind, i = op[0], op[1]
        if kind == F_ALL and i == L - 1:
            if loss:
                return False
            tape = True
        elif kind == LOSS:
            loss = True
        elif kind == B and i == L - 1:
            return tape and loss
    return False


def released_loss_chain(chain: Chain, ops: Sequence[Any] | None = None) -> Chain:
    """`chain` with the loss's overhead o_b[L] as `models.chain.executor.ChainExecutor` incurs it:
    the executor frees a_L once the loss's forward has run (`loss_backward`), so the loss charges
    ``state + x[L] + o_b[L]`` with o_b[L] measured that way (``meta["overheads"]["loss_released"]``:
    the chain's method under ``bwd_overhead``, the tracker's under ``tracker``, which replaces the
    last entry of ``meta["overheads"]["tracker"]["bwd_overhead"]``). The profiler records them only
    when they hold whether a_L is standalone or the output of the tape abar_L (block L-1 does not
    save its output); `chain` itself when the meta has none. The file's own o_b[L] holds a_L
    through the loss: an upper bound for any executor.

    When the schedule `ops` is given and its loss frees the tape's a_L (`loss_frees_tape`), B(L-1)
    then runs with a_L's data freed, while the chain goes on charging xbar[L] (a_L included) until it
    ends: ``loss_released["last_block"]`` (``bwd_overhead`` and ``tracker``, the profiler's
    `_last_backward`) is B(L-1)'s overhead measured that way, from the level with a_L's data, which
    replaces o_b[L-1] (and o_bh[L-1], each tracker list's entry L-1) when lower. Without `ops` (or
    for another schedule) B(L-1) keeps the overhead holding a_L."""
    overheads = (chain.meta.get("overheads") or {}) if isinstance(chain.meta, dict) else {}
    released = overheads.get("loss_released")
    if not isinstance(released, dict) or "bwd_overhead" not in released:
        return chain
    L = chain.length
    last = released.get("last_block") if L > 0 and ops is not None and loss_frees_tape(ops, L) else None
    last = last if isinstance(last, dict) else {}
    o_b = chain.o_b.copy()
    o_b[L] = min(int(o_b[L]), int(released["bwd_overhead"]))
    o_bh = chain.o_bh.copy()
    o_bh[L] = o_b[L]
    if "bwd_overhead" in last:
        o_b[L - 1], o_bh[L - 1] = (min(int(v[L - 1]), int(last["bwd_overhead"])) for v in (o_b, o_bh))
    meta = dict(chain.meta)
    tracker = overheads.get("tracker")
    if tracker and "tracker" in released:
        lists = {f: list(tracker[f]) for f in ("bwd_overhead", RELEASED_FIELD) if f in tracker}
        for bwd in lists.values():
            bwd[L] = min(int(bwd[L]), int(released["tracker"]))
            if "tracker" in last:
                bwd[L - 1] = min(int(bwd[L - 1]), int(last["tracker"]))
        meta["overheads"] = {**overheads, "tracker": {**tracker, **lists}}
    return Chain.with_mode_overheads(chain.u_f.copy(), chain.u_b.copy(), chain.x.copy(), chain.xbar.copy(),
                                     chain.o_fa.copy(), chain.o_fn.copy(), o_b, name=chain.name,
                                     stage_names=list(chain.stage_names), meta=meta, u_fa=chain.u_fa.copy(),
                                     u_fn=chain.u_fn.copy(), o_bh=o_bh if chain.has_release() else None)


def tracker_join(join: Join) -> Join:
    """`join` with the tracker's overheads its profile keeps in the meta (``branches[b].overheads.tracker``
    and ``loss_overheads.tracker``, `models.join.profiler`): the prediction a `LiveTensorTracker`
    measurement is compared with; `join` itself when its meta has none."""
    meta = join.meta if isinstance(join.meta, dict) else {}
    branches, loss = meta.get("branches"), meta.get("loss_overheads") or {}
    if not isinstance(branches, list) or len(branches) != join.k or loss.get("tracker") is None:
        return join
    chains = []
    for c, info in zip(join.branches, branches):
        tracker = ((info or {}).get("overheads") or {}).get("tracker")
        if not tracker:
            return join
        chains.append(tracker_chain(c, tracker))
    return Join.from_chains(chains, loss_time=join.loss_time, loss_overhead=int(loss["tracker"]), name=join.name)


def predict_both(simulate: Callable[[Any, list[Any]], Any], instance: Any, ops: list[Any],
                 tracker_view: Callable[[Any], Any]) -> tuple[int, float, int | None, Any]:
    """The predictions a measured step is compared with, for a chain or a join `instance`.

    Returns the simulator's peak (bytes) and makespan of `ops` on `instance` (the allocator's
    overheads, as profiled), the peak under the tracker's overheads (`tracker_view(instance)`,
    i.e. `tracker_chain` or `tracker_join`; None when that is `instance` itself) and the per-op
    steps of the tracker's replay (what a per-op trace is compared with). An invalid replay
    raises (`raise_if_invalid`)."""
    sim = simulate(instance, ops).raise_if_invalid()
    peak, makespan, tracker_peak = sim.peak_memory, sim.makespan, None
    by_tracker = tracker_view(instance)
    if by_tracker is not instance:
        sim = simulate(by_tracker, ops).raise_if_invalid()
        tracker_peak = sim.peak_memory
    return peak, makespan, tracker_peak, sim.steps
