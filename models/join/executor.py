"""Execute a join `JoinSchedule` for real: one training step of k branches joined at a loss.

Branch b is a chain of blocks (block i maps a_i^b to a_{i+1}^b, input a_0^b); the loss
``loss_fn([a_{L_0}^0, ..., a_{L_{k-1}}^{k-1}], target)`` joins them (docs/join.md).
Each branch keeps its own stores of activations, tapes and gradients keyed by stage, and its
forward and backward operations are those of `models.chain.executor.ChainExecutor` (the same code,
``ChainExecutor.apply`` on the branch's state):

==========  ================================================================================
op          what the executor does
==========  ================================================================================
F_all(b,i)  as the chain executor's F_all(i) on branch b: a leaf copy of a_i^b, block i with
            autograd, keeps the tape abar_{i+1}^b = (leaf, output)
F_ck(b,i)   block i of branch b under ``torch.no_grad()``; keeps a_i^b, stores a_{i+1}^b
F_n(b,i)    as F_ck, then drops the standalone a_i^b
Loss        ``y_b`` an alias of a_{L_b}^b for every b (`models.chain.executor.loss_input`: no leaf
            and no view, so the loss may modify it in place; an integer output as is);
            ``loss_fn([y_0, ..., y_{k-1}], target).backward()``; delta_{L_b}^b = the gradient
            reaching y_b (None when none does; a copy when it is a view of a buffer shared with
            other branches, `own_deltas`); drops every standalone a_{L_b}^b
B(b,i)      ``torch.autograd.backward`` on the tape abar_{i+1}^b with delta_{i+1}^b; delta_i^b
            = the leaf's grad (None for integer inputs such as token ids, and when delta_{i+1}^b
            is None: no gradient reaches this branch, nothing is back-propagated); drops abar_{i+1}^b,
            delta_{i+1}^b and the standalone a_i^b. Parameter gradients accumulate into
            ``.grad``: the branches of a Siamese network share their modules, so their
            gradients add up in the same ``.grad``, as in a plain forward/backward.
==========  ================================================================================

Buffers: as in the chain executor, the first forward of stage i of branch b in a step updates its
block's buffers (BatchNorm's running statistics) and every later one puts them back (a copy made
before the step), so each branch counts one batch per step, as a plain forward of every branch
does. Branches that share a BatchNorm (a Siamese network) update it once per branch, in the
order the schedule runs their first forwards, which may differ from the branch order of
`reference_join_step` (the running statistics then differ by momentum squared times the
difference of the two branches' batch statistics; the gradients do not differ).

Randomness: a join schedule may run the first forwards of the branches in any order (the DP
runs the forward sweeps in the order sigma(k), ..., sigma(1)), so recording the RNG state at
each stage's first forward, as the chain executor does, would draw different dropout masks
than a plain forward. Instead every forward of stage i of branch b (first run and
recomputations alike) runs inside ``torch.random.fork_rng`` with the generator seeded by
``stage_seed(seed, b, i)``; `reference_join_step` does the same in a plain forward/backward.
Dropout masks are thus identical across schedules and the reference, and the global RNG stream
is left as it was. (Without dropout this changes nothing.)

Memory (bytes) is measured as in the chain executor: ``torch.cuda.max_memory_allocated`` on
CUDA, `models.memory.LiveTensorTracker` on CPU; the executor first copies every input a_0^b,
and parameter gradients are allocated (zeros) before the step, so weights and their gradients
are not counted, as in the join simulator. Time is measured in separate runs without the
tracker on CPU, in milliseconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.models.buffers import step_modules
from memsched.models.chain.executor import (
    ChainExecutor,
    ChainRunState,
    as_blocks,
    loss_input,
    recomputed,
)
from memsched.models.chain.overheads import predict_both, tracker_join
from memsched.models.join.zoo import JoinLossFn
from memsched.models.measure import (
    OpTrace,
    RunState,
    StepMeter,
    StepResult,
    all_zero,
    compare_gradients,
    gradient_close,
    measure_runs,
    zero_grads,
)
from memsched.models.memory import storage_key
from memsched.solvers.chain.schedule import Op
from memsched.solvers.join import Join, JoinSchedule, JOp, simulate
from memsched.solvers.join.simulator import LOSS
from torch import nn

__all__ = ["JoinExecutor", "JoinStepResult", "reference_join_step", "join_parameters", "execute_join",
           "stage_seed", "StageRng", "compare_input_gradients", "own_deltas"]


def stage_seed(seed: int, branch: int, stage: int) -> int:
    """The RNG seed of every forward of stage `stage` of branch `branch` in a step seeded `seed`."""
    return (int(seed) * 1_000_003 + (branch + 1) * 65_537 + stage * 257 + 12_345) % (2 ** 62)


class StageRng:
    """The ``forward(i)`` context of `models.measure.RunState`'s ``rng``, seeding each forward
    of stage i of this branch with `stage_seed` (see the module docstring)."""

    def __init__(self, device: torch.device, seed: int, branch: int) -> None:
        self.device = device
        self.seed = seed
        self.branch = branch

    @contextlib.contextmanager
    def forward(self, i: int) -> Iterator[None]:
        """Context manager: run stage i of this branch with its own seeded RNG, so a recomputation draws the same
        dropout masks."""
        cuda = self.device.type == "cuda"
        with torch.random.fork_rng(devices=[self.device] if cuda else []):
            s = stage_seed(self.seed, self.branch, i)
            torch.default_generator.manual_seed(s)
            if cuda:
                with torch.cuda.device(self.device):
                    torch.cuda.manual_seed(s)
            yield


def join_parameters(branches: Sequence[Sequence[nn.Module]]) -> dict[str, nn.Parameter]:
    """Distinct parameters of all branches, named ``"<branch>.<block>.<name>"`` (a parameter
    shared by several branches, as in a Siamese network, once, under its first branch)."""
    out: dict[str, nn.Parameter] = {}
    seen: set[int] = set()
    for b, blocks in enumerate(branches):
        for i, block in enumerate(blocks):
            for name, p in block.named_parameters():
                if id(p) not in seen and p.requires_grad:
                    seen.add(id(p))
                    out[f"{b}.{i}.{name}"] = p
    return out


@dataclass
class JoinStepResult(StepResult):
    """One executed join training step (fields of `models.chain.executor.StepResult`; ``input_grad``
    is None and ``input_grads[b]`` is delta_0^b, None for integer inputs). ``predicted_peak`` /
    ``predicted_makespan`` are the join simulator's for the join given."""

    input_grads: list[torch.Tensor | None] = field(default_factory=list)


def _seed_of(seed: int | None) -> int:
    return int(torch.randint(0, 2 ** 31 - 1, (1,)).item()) if seed is None else int(seed)


class JoinExecutor:
    """Runs join schedules on `branches` (lists of blocks, one chain per branch) joined by
    ``loss_fn(outputs, target)``; one `ChainExecutor` per branch runs its forward and backward
    operations."""

    def __init__(self, branches: Sequence[nn.Module | Sequence[nn.Module]], loss_fn: JoinLossFn) -> None:
        self.branches = [as_blocks(b) for b in branches]
        if not self.branches:
            raise ValueError("a join needs at least one branch")
        self.loss_fn = loss_fn
        # the join problem charges B holding its inputs (Chain.held): no early release
        self.executors = [ChainExecutor(blocks, _no_chain_loss, release=False) for blocks in self.branches]
        self.params = join_parameters(self.branches)
        self.k = len(self.branches)  # number of branches
        self.lengths = [len(b) for b in self.branches]  # L_b of each branch

    # ----------------------------------------------------------------- one step
    def step(
        self,
        schedule: JoinSchedule | Sequence[JOp],
        inputs: Sequence[torch.Tensor],
        target: Any,
        *,
        join: Join | None = None,
        seed: int | None = 0,
        measure_memory: bool = True,
        measure_time: bool = True,
        trace: bool = False,
        time_repeats: int = 1,
        clock: str = "wall",
        independent: bool = False,
    ) -> JoinStepResult:
        """Execute `schedule` as one training step on `inputs` (one tensor per branch).

        With `join`, the schedule is first replayed by the join simulator (an invalid one raises
        `solvers.errors.InputError`, a ValueError) and its predicted peak and makespan are
        returned, with per-op predictions in the trace. Other options as
        `models.chain.executor.ChainExecutor.step`: memory and time are measured in separate runs on
        CPU; `time_repeats` timed runs, median in ms; `seed` seeds the per-stage RNG streams
        (see the module docstring; None draws one from torch's generator).
        """
        ops = list(schedule.ops if isinstance(schedule, JoinSchedule) else schedule)
        if len(inputs) != self.k:
            raise ValueError(f"{len(inputs)} inputs for {self.k} branches")
        device = inputs[0].device
        seed = _seed_of(seed)
        predicted_peak = predicted_makespan = tracker_peak = None
        sim_steps = None
        if join is not None:
            if join.lengths != self.lengths:
                raise ValueError(f"the join has branches of {join.lengths} stages, the model {self.lengths} blocks")
            predicted_peak, predicted_makespan, tracker_peak, sim_steps = predict_both(simulate, join, ops,
                                                                                      tracker_join)
        else:
            self._check_ops(ops)
        m = measure_runs(lambda watch, tr: self._run(ops, inputs, target, seed, watch, tr, clock),
                         cuda=device.type == "cuda", measure_memory=measure_memory, measure_time=measure_time,
                         trace=trace, time_repeats=time_repeats, sim_steps=sim_steps, independent=independent,
                         modules=step_modules([b for branch in self.branches for b in branch], self.loss_fn))
        grads = {name: p.grad.detach().clone() for name, p in self.params.items() if p.grad is not None}
        input_grads = m.input_grad if m.input_grad is not None else [None] * self.k
        return JoinStepResult(loss=m.loss, grads=grads, input_grad=None, peak_memory=int(m.peak), time_ms=m.time_ms,
                              device=str(device), memory_method=m.method, predicted_peak=predicted_peak,
                              predicted_makespan=predicted_makespan, trace=m.traces, input_grads=input_grads,
                              independent_peak=m.independent_peak, independent_method=m.independent_method,
                              tracker_predicted_peak=tracker_peak, time_runs_ms=m.times_ms)

    def _check_ops(self, ops: list[JOp]) -> None:
        for op in ops:
            if op.kind != LOSS and not (0 <= op.branch < self.k and 0 <= op.stage < self.lengths[op.branch]):
                raise ValueError(f"operation {op} outside the model's branches ({self.lengths} blocks)")

    def _run(self, ops: list[JOp], inputs: Sequence[torch.Tensor], target: Any, seed: int, watch: bool,
             trace: bool, clock: str = "wall"
             ) -> tuple[float, list[torch.Tensor | None], int, list[OpTrace], float]:
        """One run: (loss, delta_0^b per branch, peak bytes, per-op trace, elapsed ms)."""
        device = inputs[0].device
        zero_grads(self.params.values())
        torch.manual_seed(seed)
        states = [self._run_state(ops, device, seed, b) for b in range(len(inputs))]
        meter = StepMeter(device, watch=watch, trace=trace, clock=clock)
        with meter:
            for s, x in zip(states, inputs):
                s.acts[0] = x.detach().clone()
            for op in ops:
                with meter.op(str(op)):
                    if op.kind == LOSS:
                        self._loss(states, target)
                    else:
                        self.executors[op.branch].apply(Op(op.kind, op.stage), states[op.branch], None)
            meter.stop_clock()
            loss = states[0].loss
            input_grads = [s.grads.pop(0, None) for s in states]
            for s in states:
                s.clear()
        return loss, input_grads, meter.peak, meter.traces, meter.elapsed_ms

    def _run_state(self, ops: list[JOp], device: torch.device, seed: int, b: int) -> ChainRunState:
        """Branch b's run state: its per-stage RNG and, for each stage of it that `ops` computes more
        than once, a copy of its block's buffers (made at the first run that needs it, before the step is
        measured, and kept by the branch's executor; its recomputations put the buffers back from it:
        `models.chain.executor.kept_buffers`)."""
        again = recomputed([(op.kind, op.stage) for op in ops if op.kind != LOSS and op.branch == b])
        return ChainRunState(StageRng(device, seed, b), self.executors[b].buffer_copies_for(again))

    def _loss(self, states: list[RunState], target: Any) -> None:
        """The shared loss: an alias per branch output (`models.chain.executor.loss_input`: the
        loss may modify it in place), backward, delta_{L_b}^b = the gradient reaching it (None
        when none does, or for an integer output: B(b, L_b - 1) then back-propagates nothing), owning
        its storage (`own_deltas`)."""
        grads: list[list[torch.Tensor]] = [[] for _ in states]
        with torch.enable_grad():
            ys = [loss_input(s.available(L), g) for s, L, g in zip(states, self.lengths, grads)]
            loss = self.loss_fn(ys, target)
            del ys
            loss.backward()
        value = float(loss.detach())
        del loss
        deltas = own_deltas([g[0] if g else None for g in grads])
        del grads  # the last references to a shared gradient buffer: freed here
        for s, d, L in zip(states, deltas, self.lengths):
            s.loss = value
            s.grads[L] = d
            s.acts.pop(L, None)


def own_deltas(deltas: Sequence[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """`deltas` (the gradients a joint loss sends to the branch outputs) with every one that does not own
    its storage replaced by a copy that does: a delta sharing its storage with another delta, or whose
    storage holds more bytes than the delta (a view of a larger buffer).

    A loss that concatenates or stacks the outputs (``torch.cat``, NT-Xent) gets one gradient buffer
    from autograd and every delta_{L_b}^b is a view of it; the buffer would then live until the last
    branch drops its delta, while the join simulator frees x^b[L_b] when B(b, L_b - 1) drops branch
    b's. The copies are made while the caller still holds the originals (the transient is the
    loss's: `models.join.profiler.profile_join_loss` measures it too)."""
    owners: dict[int, int] = {}
    for d in deltas:
        if d is not None:
            key = storage_key(d)
            owners[key] = owners.get(key, 0) + 1
    out: list[torch.Tensor | None] = []
    for d in deltas:
        if d is not None and (owners[storage_key(d)] > 1
                              or d.untyped_storage().nbytes() > d.numel() * d.element_size()):
            d = d.clone()
        out.append(d)
    return out


def _no_chain_loss(output: torch.Tensor, target: Any) -> torch.Tensor:  # pragma: no cover - never called
    raise RuntimeError("a join branch has no loss of its own: the join executor runs the shared loss")


# --------------------------------------------------------------------- reference and checks
def reference_join_step(branches: Sequence[nn.Module | Sequence[nn.Module]], loss_fn: JoinLossFn,
                        inputs: Sequence[torch.Tensor], target: Any, *, seed: int = 0
                        ) -> tuple[float, dict[str, torch.Tensor], list[torch.Tensor | None]]:
    """A plain forward of every branch (each block's RNG seeded per stage as in the executor),
    the loss and one backward: (loss, parameter gradients, delta_0^b per branch)."""
    branches = [as_blocks(b) for b in branches]
    params = join_parameters(branches)
    for p in params.values():
        p.grad = None
    torch.manual_seed(seed)
    device = inputs[0].device
    leaves: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    with torch.enable_grad():
        for b, (blocks, x0) in enumerate(zip(branches, inputs)):
            x = x0.detach().clone()
            if x.is_floating_point():
                x.requires_grad_(True)
            leaves.append(x)
            rng = StageRng(device, seed, b)
            a = x
            for i, block in enumerate(blocks):
                with rng.forward(i):
                    a = block(a)
            outputs.append(a)
        loss = loss_fn(outputs, target)
        loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in params.items() if p.grad is not None}
    for p in params.values():
        p.grad = None
    return float(loss.detach()), grads, [x.grad if x.requires_grad else None for x in leaves]


def compare_input_gradients(got: Sequence[torch.Tensor | None], expected: Sequence[torch.Tensor | None], *,
                            rtol: float = 1e-4, atol: float = 1e-6) -> tuple[bool, str]:
    """(every delta_0^b close to the reference's, a message naming the first branch that is not)."""
    for b, (g, e) in enumerate(zip(got, expected)):
        if e is None:
            continue
        if g is None or not gradient_close(g, e, rtol=rtol, atol=atol):
            err = "missing" if g is None else f"differs by {float((g - e).abs().max()):.3g}"
            return False, f"input gradient of branch {b} {err}"
    return True, ""


def join_gradient_check(ok: bool | None, ok_in: bool, ref_inputs: Sequence[torch.Tensor | None]) -> bool | None:
    """One verdict from the parameter check `ok` (`compare_gradients`: None when every reference
    gradient is zero) and the input check `ok_in` (`compare_input_gradients`): False when either
    failed, True when one compared something and passed, None only when nothing was compared
    (vacuous parameter gradients and every reference input gradient zero or absent)."""
    if ok is False or not ok_in:
        return False
    if ok is None and not all_zero(ref_inputs):  # the branches' input gradients were compared
        return True
    return ok


def execute_join(branches: Sequence[nn.Module | Sequence[nn.Module]], loss_fn: JoinLossFn,
                 schedule: JoinSchedule | Sequence[JOp], inputs: Sequence[torch.Tensor], target: Any, *,
                 join: Join | None = None, seed: int = 0, check: bool = True, rtol: float = 1e-4, atol: float = 1e-6,
                 **options: Any) -> tuple[JoinStepResult, bool | None]:
    """Run one step under `schedule` and, when `check`, compare every parameter gradient and
    every input gradient with `reference_join_step` (same seed): (result, grad_check)."""
    executor = JoinExecutor(branches, loss_fn)
    result = executor.step(schedule, inputs, target, join=join, seed=seed, **options)
    if not check:
        return result, None
    _, ref, ref_inputs = reference_join_step(executor.branches, loss_fn, inputs, target, seed=seed)
    ok, _ = compare_gradients(result.grads, ref, rtol=rtol, atol=atol)
    ok_in, _ = compare_input_gradients(result.input_grads, ref_inputs, rtol=rtol, atol=atol)
    return result, join_gradient_check(ok, ok_in, ref_inputs)
