"""Profile a join network (k branches of PyTorch blocks and a joint loss) into a `solvers.join.Join`.

Per branch b, `models.chain.profiler.profile_chain` measures every block on the branch's example
input (fwd_time_all u_fa and fwd_time_nograd u_fn, fwd_time u_f their max, bwd_time u_b,
out_size x, tape_size xbar, the per-mode forward overheads fwd_overhead_all o_fa and
fwd_overhead_nograd o_fn (fwd_overhead o_f = their max), bwd_overhead o_b; ms and bytes, see
that module). The per-mode values are kept in the join file and charged by the join simulator
and solvers (F_all o_fa and u_fa, F_ck / F_n o_fn and u_fn). It needs a loss to back-propagate
from; a branch has none of its own, so a *surrogate* ``(a_L * r).sum()`` with a fixed random r of
a_L's shape is used (it yields a dense delta_L like a real loss); its costs are dropped, the
join file's loss being the real one. A branch whose output is not floating (argmax labels) gets
no gradient in the executor; its surrogate is a zero needing a gradient that reaches no block.

The joint loss is measured on the branches' outputs: ``bwd_time`` = the median time of
computing ``loss_fn(outputs, target)`` and back-propagating to every output (copies the loss may
modify in place, an integer output as is: `models.chain.executor.loss_input`, as the executor; the
executor's copies of deltas that share one gradient buffer, `models.join.executor.own_deltas`, included),
``bwd_overhead`` = the peak bytes during it beyond the produced gradients delta_{L_b}^b
(the join simulator charges ``sum_b x^b[L_b] + loss_overhead`` on top of the state).
Memory uses ``torch.cuda.max_memory_allocated`` on CUDA and `models.memory.LiveTensorTracker`
on CPU, as the executors do; on CPU the overheads charged are the allocator's (kernel scratch
buffers included, `models.chain.overheads`), the tracker's kept in ``meta["branches"][b]
["overheads"]["tracker"]`` and ``meta["loss_overheads"]["tracker"]`` (`models.chain.overheads.tracker_join`
rebuilds the join the tracker's measurements are compared with). The result is written as a memsched.join/1
file by ``Join.save``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from memsched.models.alloc_probe import AllocatorProbe
from memsched.models.chain.executor import as_blocks, loss_input
from memsched.models.chain.profiler import profile_chain, profile_meta
from memsched.models.join.executor import join_parameters, own_deltas
from memsched.models.join.zoo import JoinLossFn, JoinModel, diagnosed_join
from memsched.models.measure import MemoryWatch, Timer, median
from memsched.models.memory import storage_key, unique_bytes
from memsched.solvers.join import Join
from torch import nn

__all__ = ["profile_join", "profile_join_branches", "profile_join_loss", "profile_join_model", "surrogate_loss",
           "surrogate_weights"]


def surrogate_loss(output: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``(output * weights).sum()``: a branch's stand-in loss for profiling its chain (delta_L = weights).
    `weights` None (a branch whose output is not floating, such as argmax labels): a zero that needs
    a gradient but depends on nothing, so that no gradient reaches the branch, as when the join
    executor runs it (its integer output goes to the loss as is)."""
    if weights is None:
        return torch.zeros((), device=output.device, requires_grad=True)
    return (output * weights).sum()


def surrogate_weights(output: torch.Tensor, gen: torch.Generator) -> torch.Tensor | None:
    """The fixed random r of `surrogate_loss` for a branch's output `output` (its shape, dtype and
    device, drawn from `gen` in float32), or None when `output` is neither floating nor complex:
    no gradient can reach it."""
    if not (output.is_floating_point() or output.is_complex()):
        return None
    return torch.randn(output.shape, generator=gen, dtype=torch.float32).to(device=output.device, dtype=output.dtype)


def profile_join_loss(loss_fn: JoinLossFn, outputs: Sequence[torch.Tensor], target: Any, *, repeats: int = 5,
                      warmup: int = 2, clock: str = "wall", probe: bool = True) -> dict[str, Any]:
    """The joint loss's ``{"bwd_time": ms, "bwd_overhead": bytes, "tracker_overhead": bytes}`` on the
    branch outputs (see the module docstring); with `probe` on the CPU ``bwd_overhead`` is the
    allocator's (`_probe_loss_overhead`), else the tracker's."""
    device = outputs[0].device
    timer = Timer(device, clock)
    mem = MemoryWatch(device)
    with torch.enable_grad():
        with mem.watching():
            grads: list[torch.Tensor] = []
            ys = _loss_inputs(outputs, grads)
            before = mem.mark()
            loss_fn(ys, target).backward()
            grads = _owned(grads)  # as the executor: the copies' transient is the loss's
            overhead = mem.peak() - before - unique_bytes(grads)
            del ys, grads
        tracker = int(max(0, overhead))
        if probe and device.type == "cpu":  # the allocator's transients, kernel scratch included
            overhead = _probe_loss_overhead(loss_fn, outputs, target)
        times: list[float] = []
        for k in range(warmup + repeats):
            ys = _loss_inputs(outputs, [])
            with timer.region(times if k >= warmup else []):
                loss_fn(ys, target).backward()
            del ys
    return {"bwd_time": median(times), "bwd_overhead": int(max(0, overhead)), "tracker_overhead": tracker}


def _owned(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """`grads` as the join executor keeps them (`models.join.executor.own_deltas`: a delta sharing a
    buffer copied), the originals dropped."""
    return [g for g in own_deltas(grads) if g is not None]


def _probe_loss_overhead(loss_fn: JoinLossFn, outputs: Sequence[torch.Tensor], target: Any) -> int:
    """The joint loss's overhead by the CPU allocator (`models.chain.overheads.probe_loss_overhead` for a
    list of outputs), the executor's copies of shared deltas (`_owned`) inside the probed region."""
    grads: list[torch.Tensor] = []
    with torch.enable_grad():  # copies (made before the probe): the loss may modify its inputs in place
        ys = _loss_inputs(outputs, grads)
        with AllocatorProbe() as probe:
            loss_fn(ys, target).backward()
            grads = _owned(grads)
    return int(max(0, probe.peak - unique_bytes(grads)))


def _loss_inputs(outputs: Sequence[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """What the joint loss reads, as the join executor gives it (`models.chain.executor.loss_input`,
    call with grad mode on): a copy of each floating output that the loss may modify in place, the
    gradients reaching them appended to `grads`; an integer output as is."""
    return [loss_input(a.clone(), grads) for a in outputs]


def profile_join_branches(
    branches: Sequence[nn.Module | Sequence[nn.Module]],
    loss_fn: JoinLossFn,
    inputs: Sequence[torch.Tensor],
    target: Any,
    *,
    repeats: int = 5,
    warmup: int = 2,
    name: str = "join",
    branch_names: Sequence[str] | None = None,
    meta: dict[str, Any] | None = None,
    clock: str = "wall",
    timing: str | None = None,
) -> Join:
    """Profile each branch as a chain (`profile_chain` with `surrogate_loss`) and the joint loss.

    Parameter gradients are left at None afterwards; BatchNorm running statistics are updated
    by the profiling forwards. `timing` / `clock` as `profile_chain`.
    """
    branches = [as_blocks(b) for b in branches]
    if len(inputs) != len(branches):
        raise ValueError(f"{len(inputs)} inputs for {len(branches)} branches")
    names = list(branch_names) if branch_names else [f"branch{b}" for b in range(len(branches))]
    chains = []
    outputs: list[torch.Tensor] = []
    gen = torch.Generator().manual_seed(0)
    branch_meta = []
    for b, (blocks, x) in enumerate(zip(branches, inputs)):
        with torch.no_grad():
            a = x.detach()
            for block in blocks:
                a = block(a)
        outputs.append(a.detach())
        weights = surrogate_weights(a, gen)
        chain = profile_chain(blocks, surrogate_loss, x, weights, repeats=repeats, warmup=warmup, name=names[b],
                              clock=clock, timing=timing)
        chains.append(chain)
        branch_meta.append({"name": names[b], "per_mode": chain.meta.get("per_mode"),
                            "timing": chain.meta.get("timing"), "overheads": chain.meta.get("overheads")})
    params = join_parameters(branches)
    for p in params.values():  # as in the executor: parameter gradients exist before the loss
        p.grad = torch.zeros_like(p)
    loss = profile_join_loss(loss_fn, outputs, target, repeats=repeats, warmup=warmup, clock=clock)
    for p in params.values():
        p.grad = None
    device = inputs[0].device
    dtype = next((p.dtype for p in params.values()), inputs[0].dtype)
    info: dict[str, Any] = {
        **profile_meta("memsched models.join.profiler (profile_chain per branch with a surrogate loss; joint loss "
                       "measured on the branch outputs)", device, dtype, repeats, warmup),
        "memory_method": "torch.cuda.max_memory_allocated" if device.type == "cuda" else "LiveTensorTracker",
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params.values()),
        "shared_parameters": _shares_parameters(branches),
        "branches": branch_meta,
        "loss_overheads": {"method": (branch_meta[0]["overheads"] or {}).get("method"),
                           "tracker": loss["tracker_overhead"]},
    }
    info.update(meta or {})
    join = Join.from_chains(chains, loss_time=loss["bwd_time"], loss_overhead=loss["bwd_overhead"], name=name)
    join.meta = info
    if (timing or ("isolated" if device.type == "cuda" else "in_step")) == "in_step":
        join = _retime(join, branches, loss_fn, inputs, target, repeats=repeats, warmup=warmup, clock=clock)
    return join


def _retime(join: Join, branches: list[list[nn.Module]], loss_fn: JoinLossFn, inputs: Sequence[torch.Tensor],
            target: Any, *, repeats: int, warmup: int, clock: str) -> Join:
    """`join` with every op time (u_fa, u_b of each branch, the loss) measured inside store-all steps
    of the `JoinExecutor`, and u_fn (F_ck) inside steps that run each stage's no-grad forward once
    (`models.chain.timing`): its per-stage seeded RNG and joint loss included."""
    from memsched.models.chain.timing import op_times, retime_join
    from memsched.models.join.executor import JoinExecutor
    from memsched.solvers.join import store_all_schedule
    from memsched.solvers.join.schedule import LOSS_OP, JOp

    executor = JoinExecutor(branches, loss_fn)
    ops = list(store_all_schedule(join).ops)
    times = op_times(lambda: executor._run(ops, inputs, target, 0, False, False, clock), repeats=repeats,
                     warmup=warmup)
    # the no-grad forwards (u_fn): F_ck of every stage once, every a_i kept, then F_all B per stage
    ng_ops = [JOp("F_ck", b, i) for b, c in enumerate(join.branches) for i in range(c.length)] + [LOSS_OP]
    ng_ops += [op for b, c in enumerate(join.branches) for i in reversed(range(c.length))
               for op in (JOp("F_all", b, i), JOp("B", b, i))]
    ng = op_times(lambda: executor._run(ng_ops, inputs, target, 0, False, False, clock), repeats=repeats,
                  warmup=warmup)
    times.update({label: t for label, t in ng.items() if label.startswith("F_ck(")})
    for p in executor.params.values():
        p.grad = None
    return retime_join(join, times, "JoinExecutor")


def _shares_parameters(branches: list[list[nn.Module]]) -> bool:
    """True when some parameter appears in more than one branch (Siamese weights)."""
    owner: dict[int, int] = {}
    for b, blocks in enumerate(branches):
        for block in blocks:
            for p in block.parameters():
                key = storage_key(p)
                if owner.setdefault(key, b) != b:
                    return True
    return False


def profile_join(model: JoinModel, *, repeats: int = 5, warmup: int = 2, name: str | None = None,
                 clock: str = "wall", timing: str | None = None, meta: dict[str, Any] | None = None) -> Join:
    """Profile a built `models.join.zoo.JoinModel` into a `Join` (memsched.join/1 via ``save``). A
    branch that cannot run at these sizes (a block failing on its input) is an `InputError` naming
    the model, the branch and the block (`models.join.zoo.diagnosed_join`)."""
    info = {"model": model.name, **model.config, **(meta or {})}
    with diagnosed_join(model):
        return profile_join_branches(model.branches, model.loss_fn, model.inputs, model.target, repeats=repeats,
                                     warmup=warmup, name=name or model.label, branch_names=model.branch_names,
                                     meta=info, clock=clock, timing=timing)


def profile_join_model(name: str, *, repeats: int = 5, warmup: int = 2, out: str | None = None, clock: str = "wall",
                       timing: str | None = None, **sizes: Any) -> tuple[Join, JoinModel]:
    """Build join model `name` (sizes as `models.join.zoo.build_join_model`), profile it,
    optionally save the join file to `out`; returns (join, the built model)."""
    from memsched.models.join.zoo import build_join_model

    model = build_join_model(name, **{k: v for k, v in sizes.items() if v is not None})
    join = profile_join(model, repeats=repeats, warmup=warmup, clock=clock, timing=timing)
    if out is not None:
        join.save(out)
    return join, model

