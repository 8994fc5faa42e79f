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
block's buffers (BatchNorm's running statistics, spectral_norm's ``u`` and ``v``) and every later one
runs on the buffers that first forward found and puts back those it found (a copy made before the
step), so each branch counts one batch per step, as a plain forward of every branch does.
Branches that share a module (a Siamese network) update its buffers once per branch, in the order
the schedule runs the stages' first forwards; when the module's output reads what its forward
updates (spectral_norm's power iteration, a counter), that order changes the outputs and so the
gradients (BatchNorm in training mode only changes its running statistics). The plain run a step is
checked against (`execute_join`) is therefore `reference_join_step` with ``order=first_forwards(ops)``:
the stages' plain forwards in the order the schedule first runs them (a join schedule may run the
branches in any order, the DP runs its forward sweeps in the order sigma(k), ..., sigma(1)), from the
buffers the step started from (`models.buffers.from_buffers`); its gradients and the buffers it leaves
are then those of the step.

Randomness: recording the RNG state at each stage's first forward, as the chain executor does,
would draw different dropout masks than a plain forward whenever the schedule runs the branches in
another order. Instead every forward of a random stage i of branch b (first run and recomputations
alike) runs inside ``torch.random.fork_rng`` with the generator seeded by ``stage_seed(seed, b, i)``;
`reference_join_step` does the same in a plain forward/backward. Dropout masks are thus identical
across schedules and the reference, and the global RNG stream is left as it was. The random stages
(those that draw random numbers) are found before the step's runs (`JoinExecutor.random_stages`: a
plain forward without grad of every branch, outside every measured window); the other stages run
as they are, forking and seeding nothing, so without dropout the step allocates nothing for the RNG.
A forward of a random stage holds the fork's copy of the generator's state (on the CPU a 5,056 B
tensor the allocator hands out: the prediction of a step with `join` adds it during every such
forward, `join_peak_with_rng_states`; on CUDA a host tensor, none of the device memory measured).
The live-tensor tracker does not see it (its prediction, ``tracker_predicted_peak``, stays
without). A block whose drawing depends on more than its input and the training mode is not
supported.

Memory (bytes) is measured as in the chain executor: ``torch.cuda.max_memory_allocated`` on
CUDA, `models.memory.LiveTensorTracker` on CPU; the executor first copies every input a_0^b,
and parameter gradients are allocated (zeros) before the step, so weights and their gradients
are not counted, as in the join simulator. Time is measured in separate runs without the
tracker on CPU, in milliseconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.models.buffers import from_buffers, snapshot_buffers, step_modules
from memsched.models.chain.executor import (
    ChainExecutor,
    ChainRunState,
    as_blocks,
    loss_input,
    recomputed,
    with_loss_parameters,
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
    generator_states,
    gradient_close,
    measure_runs,
    peak_with_rng_states,
    zero_grads,
)
from memsched.models.memory import storage_key
from memsched.solvers.chain.schedule import FORWARD_KINDS, Op
from memsched.solvers.errors import InputError
from memsched.solvers.join import Join, JoinSchedule, JOp, simulate
from memsched.solvers.join.simulator import LOSS, Simulation
from torch import nn

__all__ = ["JoinExecutor", "JoinStepResult", "reference_join_step", "join_parameters", "execute_join",
           "stage_seed", "StageRng", "compare_input_gradients", "own_deltas", "first_forwards",
           "join_peak_with_rng_states", "rng_state_bytes"]


def stage_seed(seed: int, branch: int, stage: int) -> int:
    """The RNG seed of every forward of stage `stage` of branch `branch` in a step seeded `seed`."""
    return (int(seed) * 1_000_003 + (branch + 1) * 65_537 + stage * 257 + 12_345) % (2 ** 62)


class StageRng:
    """The ``forward(i)`` context of `models.measure.RunState`'s ``rng``, seeding each forward
    of a random stage i of this branch with `stage_seed` (see the module docstring).

    `random`: the stages of this branch that draw random numbers (`JoinExecutor.random_stages`);
    only their forwards fork the generator (each holding one copy of its state, `rng_state_bytes`,
    while it runs), the others run as they are. None: every stage forks (a plain run that does not
    know them, `reference_join_step`: forking a stage that draws nothing changes nothing)."""

    def __init__(self, device: torch.device, seed: int, branch: int, random: Iterable[int] | None = None) -> None:
        self.device = device
        self.seed = seed
        self.branch = branch
        self.random = None if random is None else frozenset(random)

    @contextlib.contextmanager
    def forward(self, i: int) -> Iterator[None]:
        """Context manager: run stage i of this branch with its own seeded RNG when it is random, so a
        recomputation draws the same dropout masks (a stage known to draw none: nothing done)."""
        if self.random is not None and i not in self.random:
            yield
            return
        cuda = self.device.type == "cuda"
        with torch.random.fork_rng(devices=[self.device] if cuda else []):
            s = stage_seed(self.seed, self.branch, i)
            torch.default_generator.manual_seed(s)
            if cuda:
                with torch.cuda.device(self.device):
                    torch.cuda.manual_seed(s)
            yield


def rng_state_bytes(device: torch.device) -> int:
    """Bytes of the copy of the generators' state that ``torch.random.fork_rng`` holds during a
    forward of a random stage, in the memory a step on `device` is measured in: the CPU generator's
    state (5,056 B) on the CPU; 0 on CUDA (the states are host tensors, none of the device memory)."""
    return sum(t.numel() * t.element_size() for t in generator_states(device)
               if t is not None and t.device.type == device.type)


def join_peak_with_rng_states(sim: Simulation, ops: Sequence[JOp], random: Sequence[Iterable[int]],
                              state_bytes: int) -> int:
    """The peak (bytes) of the join simulator's replay `sim` of `ops` plus the RNG state copies a
    step holds (`StageRng`): `state_bytes` during every forward (F_all, F_ck, F_n) of a stage i of
    branch b with i in ``random[b]`` (op k counting for time k, with its peak ``mem_during``; the
    inputs before op 0). Equal to ``sim.peak_memory`` when no stage is random or `state_bytes` is 0."""
    points = [(-1.0, int(sim.initial_memory))] + [(float(k), int(st.mem_during)) for k, st in enumerate(sim.steps)]
    stages = [set(r) for r in random]
    held = [(float(k), k + 1.0, int(state_bytes)) for k, op in enumerate(ops)
            if op.kind in FORWARD_KINDS and op.stage in stages[op.branch]] if state_bytes else []
    return peak_with_rng_states(points, held)


def first_forwards(ops: Iterable[JOp]) -> list[tuple[int, int]]:
    """(branch, stage) of every stage `ops` computes, in the order of its first forward: the order
    in which a step's first forwards update the blocks' buffers (`reference_join_step`'s ``order``)."""
    out: dict[tuple[int, int], None] = {}
    for op in ops:
        if op.kind in FORWARD_KINDS:
            out.setdefault((op.branch, op.stage), None)
    return list(out)


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
    ``predicted_makespan`` are the join simulator's for the join given; ``predicted_peak`` adds the
    copies of the generator's state held during the forwards of random stages (`rng_states` of them:
    CPU only; `join_peak_with_rng_states`), which the join model does not charge and the tracker does
    not see (``tracker_predicted_peak`` stays without). ``random_stages[b]``: the stages of branch b
    found to draw random numbers (`JoinExecutor.random_stages`)."""

    input_grads: list[torch.Tensor | None] = field(default_factory=list)
    rng_states: int = 0
    random_stages: list[list[int]] = field(default_factory=list)


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
        #: the parameters a step gives gradients (zeroed before each run, compared by the gradient check): the
        #: branches' and a loss module's own (``"loss.<name>"``, `models.chain.executor.with_loss_parameters`)
        self.params = with_loss_parameters(join_parameters(self.branches), loss_fn)
        self.k = len(self.branches)  # number of branches
        self.lengths = [len(b) for b in self.branches]  # L_b of each branch
        #: the random stages of each branch (`random_stages`): found by each `step` before its runs, else at
        #: the first run (`_run` called directly, as the profiler's timing does) and kept
        self.random: list[set[int]] | None = None

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

        The schedule is first replayed by the join simulator, on `join` when given (its predicted peak,
        plus the RNG states of random stages on the CPU, and makespan are returned, with per-op
        predictions in the trace), else on a join of this model's lengths with unit sizes
        (`check_schedule`): an invalid or incomplete one raises `solvers.errors.InputError` (a
        ValueError) before anything runs. The random stages are found before the runs
        (`random_stages`). Other options as
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
            self.check_schedule(ops)
        random = self.random = self.random_stages(inputs)  # before the runs: in none of their windows
        state_bytes = rng_state_bytes(device)
        n_states = sum(1 for op in ops if op.kind in FORWARD_KINDS and op.stage in random[op.branch]) \
            if state_bytes else 0
        if join is not None and n_states:  # the allocator also holds the forks' copies of the generator's state
            with_states = join_peak_with_rng_states(simulate(join, ops), ops, random, state_bytes)
            if with_states != predicted_peak:  # the tracker does not see them: its prediction stays without
                tracker_peak, predicted_peak = tracker_peak or predicted_peak, with_states
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
                              tracker_predicted_peak=tracker_peak, time_runs_ms=m.times_ms, rng_states=n_states,
                              random_stages=[sorted(r) for r in random])

    def check_schedule(self, ops: Sequence[JOp]) -> None:
        """`ops` replay on a join of this model's branch lengths with unit sizes and times (every
        operation in range, its inputs resident, the loss and every B(b, i) exactly once, the schedule
        complete), else `InputError` naming ``schedule`` with the simulator's first violation."""
        from memsched.models.chain.training import _unit_chain

        replay = simulate(Join.from_chains([_unit_chain(L) for L in self.lengths], name="unit"), list(ops))
        if not replay.valid:
            raise InputError(f"not a valid schedule of this join: {replay.violation}", field="schedule")

    def random_stages(self, inputs: Sequence[torch.Tensor]) -> list[set[int]]:
        """The stages of each branch whose block draws random numbers on `inputs` (one tensor per
        branch): `models.chain.executor.ChainExecutor.random_stages` of every stage of each branch (a
        plain forward without grad on a copy of its input; buffers and generators put back; nothing
        it allocated stays)."""
        return [ex.random_stages(x, range(L)) for ex, x, L in zip(self.executors, inputs, self.lengths)]

    def _run(self, ops: list[JOp], inputs: Sequence[torch.Tensor], target: Any, seed: int, watch: bool,
             trace: bool, clock: str = "wall"
             ) -> tuple[float, list[torch.Tensor | None], int, list[OpTrace], float]:
        """One run: (loss, delta_0^b per branch, peak bytes, per-op trace, elapsed ms)."""
        device = inputs[0].device
        zero_grads(self.params.values())
        if self.random is None:  # a run outside `step` (the profiler's timing): found once, before the meter
            self.random = self.random_stages(inputs)
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
        """Branch b's run state: its per-stage RNG (forking for the random stages only) and, for each stage
        of it that `ops` computes more
        than once, a copy of its block's buffers (made at the first run that needs it, before the step is
        measured, and kept by the branch's executor; its recomputations put the buffers back from it:
        `models.chain.executor.kept_buffers`)."""
        again = recomputed([(op.kind, op.stage) for op in ops if op.kind != LOSS and op.branch == b])
        random = None if self.random is None else self.random[b]
        return ChainRunState(StageRng(device, seed, b, random), self.executors[b].buffer_copies_for(again))

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
def _forward_order(lengths: Sequence[int], order: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """`order` checked: every (branch, stage) of branches of `lengths` exactly once, each branch's stages in
    increasing order (None: branch by branch), else `InputError` naming ``order``."""
    if order is None:
        return [(b, i) for b, L in enumerate(lengths) for i in range(L)]
    out = [(int(b), int(i)) for b, i in order]
    nxt = [0] * len(lengths)
    for b, i in out:
        if not 0 <= b < len(lengths) or i != nxt[b]:
            raise InputError(f"({b}, {i}) out of place: each branch's stages 0..L_b-1 in order, once", field="order")
        nxt[b] += 1
    if nxt != list(lengths):
        raise InputError(f"covers {nxt} stages of branches of {list(lengths)}", field="order")
    return out


def reference_join_step(branches: Sequence[nn.Module | Sequence[nn.Module]], loss_fn: JoinLossFn,
                        inputs: Sequence[torch.Tensor], target: Any, *, seed: int = 0,
                        order: Sequence[tuple[int, int]] | None = None
                        ) -> tuple[float, dict[str, torch.Tensor], list[torch.Tensor | None]]:
    """A plain forward of every branch (each block's RNG seeded per stage as in the executor),
    the loss and one backward: (loss, parameter gradients, delta_0^b per branch). The parameter
    gradients are the branches' and a loss module's own (``"loss.<name>"``), each from None, set to None after.

    `order`: the (branch, stage) forwards in the order they run (each branch's stages in increasing
    order; `first_forwards` of a schedule: the order its first forwards update the buffers of modules
    the branches share); None, branch 0's forward first, then branch 1's, and so on. It changes the
    result only when branches share a module whose forward updates buffers its output reads
    (spectral_norm's ``u``); BatchNorm's running statistics follow it too."""
    branches = [as_blocks(b) for b in branches]
    steps = _forward_order([len(b) for b in branches], order)
    params = with_loss_parameters(join_parameters(branches), loss_fn)  # a loss module's own too: "loss.<name>"
    for p in params.values():
        p.grad = None
    torch.manual_seed(seed)
    device = inputs[0].device
    leaves: list[torch.Tensor] = []
    rngs = [StageRng(device, seed, b) for b in range(len(branches))]
    with torch.enable_grad():
        for x0 in inputs:
            x = x0.detach().clone()
            if x.is_floating_point():
                x.requires_grad_(True)
            leaves.append(x)
        acts = list(leaves)
        for b, i in steps:
            with rngs[b].forward(i):
                acts[b] = branches[b][i](acts[b])
        loss = loss_fn(acts, target)
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
    every input gradient with `reference_join_step` (same seed, the forwards in the order the
    schedule first runs them, `first_forwards`, from the buffers the step started from,
    `models.buffers.from_buffers`; the buffers the step left are put back after it):
    (result, grad_check)."""
    executor = JoinExecutor(branches, loss_fn)
    ops = list(schedule.ops if isinstance(schedule, JoinSchedule) else schedule)
    modules = step_modules([b for branch in executor.branches for b in branch], loss_fn)
    before = snapshot_buffers(modules) if check else []
    result = executor.step(ops, inputs, target, join=join, seed=seed, **options)
    if not check:
        return result, None
    with from_buffers(before):  # plain autograd from the buffers the step started from
        _, ref, ref_inputs = reference_join_step(executor.branches, loss_fn, inputs, target, seed=seed,
                                                 order=first_forwards(ops))
    ok, _ = compare_gradients(result.grads, ref, rtol=rtol, atol=atol)
    ok_in, _ = compare_input_gradients(result.input_grads, ref_inputs, rtol=rtol, atol=atol)
    return result, join_gradient_check(ok, ok_in, ref_inputs)
