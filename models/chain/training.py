"""Train with a schedule: `ScheduledChain`, a module that runs the forward and backward passes
of a chain under a schedule (rotor's, the MILP's, any valid one) instead of plain autograd.

Two ways to use it, both with plain autograd's gradients:

    net = ScheduledChain(model, result)          # result = memsched.solve(chain, "50%", ...)
    loss = criterion(net(x), y)                  # a drop-in module: the forward ops of the schedule,
    loss.backward()                              # then, in backward, its recomputations and B(i)

    net = ScheduledChain(model, result, loss_fn=F.cross_entropy)
    loss = net.step(x, y)                        # the whole step, the loss inside the schedule

``net(x)`` runs the schedule's operations before its ``Loss`` and returns a_L; the backward of
that output receives delta_L and runs the operations after the ``Loss`` (as the reentrant
``torch.utils.checkpoint`` does, autograd inside a backward). That backward runs once: the
schedule frees its tapes as it goes, so a second backward through the same output
(``backward(retain_graph=True)`` then another) is refused with a RuntimeError; run the forward
again instead. ``torch.autograd.grad`` and ``backward(inputs=...)`` through it are refused with
a RuntimeError too, as the reentrant ``torch.utils.checkpoint`` refuses them, and so is
``backward(create_graph=True)`` (no double backward: the parameters' ``.grad`` would carry no
graph, so a gradient penalty cannot be built on them). An input modified in place between the
forward and the backward (``out = net(x); x.mul_(2); out.backward()``) makes the backward raise
a RuntimeError, as autograd does: the schedule recomputes from it. Under ``torch.autocast`` the
recomputations in the backward run under the autocast state of the forward (device types,
dtypes, cache), as ``torch.utils.checkpoint`` runs them, so the gradients are plain autocast
training's; the backward operations B(i) run in the backward's own state, as autograd's do. The
backward also runs every module in the training flag it had at the forward (a ``.eval()`` between
them does not recompute BatchNorm or Dropout in eval mode; ``torch.utils.checkpoint`` does). Under
``torch.no_grad()`` ``net(x)`` is the plain forward, while ``step`` computes the gradients
whatever the ambient grad mode (a training step). Bad input to a step or a forward (an input of
the wrong shape, dtype or device, a target the loss cannot take, a loss that is not a
differentiable scalar) raises `InputError` naming ``inputs``, ``target`` or ``loss_fn``. The
executor's rules apply (`models.chain.executor`): the RNG of a recomputed stage is replayed, so
dropout masks repeat. A BatchNorm in training mode updates its running statistics at the first
forward of its block in a step only (every recomputation puts them back, `kept_buffers`), so a step
leaves them as plain training does, unlike ``torch.utils.checkpoint``, which updates them at each
recomputation; offloading schedules too. The schedule keeps its memory
promise for the sizes it was solved at (the profile's batch).

Offloading schedules (`solvers.offload`: pofo, rotor-offload, offload-exact, ...; a Result of
an offloading instance, or an `OffloadSchedule`) train the same way: their ``Off`` / ``Pre``
transfers move activations and tapes to host memory and back (`models.offload.executor`: a side
CUDA stream on a GPU, synchronous copies on the CPU).
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from memsched.models.chain.executor import ChainExecutor, LossFn
from memsched.models.measure import RunState
from memsched.models.network import check_input_like, check_step_arguments
from memsched.solvers.chain import Chain, Schedule, simulate
from memsched.solvers.chain.schedule import FORWARD_KINDS, KINDS, LOSS, Op
from memsched.solvers.errors import InputError, first_line, python_spelling
from memsched.solvers.offload import OffloadInstance, OffloadSchedule, Transfer
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.schedule import OFF, PRE, VALUES
from torch import nn

__all__ = ["ScheduledChain"]


class ScheduledChain(nn.Module):
    """The blocks of `model` (an ``nn.Sequential``'s children, or a list of modules), trained
    under `schedule`: as a module (``loss_fn(net(x), y).backward()``) or by ``step(x, y)``.

    `schedule`: a chain `Schedule` or an offloading `OffloadSchedule` (or their ops), or a
    `memsched.Result` / registry `SolveResult` whose schedule and instance are taken.
    `loss_fn(output, target)`: a callable returning the scalar loss (default: the mean of the
    output, `models.network.mean_output_loss`); anything else is bad input. `chain`: the
    instance the schedule was solved for (a `Chain`, or an `OffloadInstance`); its length must be
    the number of blocks, and the schedule must replay on it (checked by the problem's simulator,
    without a budget); without one the schedule is checked on a chain of unit sizes.
    `input_grad` (a bool): `step` also computes the input's gradient (returned by
    `step_with_input_grad`); off, as a training step needs none (``net(x)`` computes it when x
    requires grad). Operations given as tuples are checked: ``(kind, stage)`` with kind one of
    F_all, F_ck, F_n, B, Loss and an int stage, ``(kind, value, index)`` with kind Off or Pre,
    value a or abar and an int index.

    The drop-in output supports one backward: ``retain_graph=True`` is not supported (the
    schedule frees its tapes during the backward; a second backward raises RuntimeError), nor
    are ``torch.autograd.grad`` and ``backward(inputs=...)`` (RuntimeError, as the reentrant
    ``torch.utils.checkpoint`` refuses them: the schedule's backward accumulates every
    parameter's ``.grad``), nor is ``backward(create_graph=True)`` (RuntimeError: no double
    backward, the gradients it accumulates carry no graph). An input modified in place between
    the forward and the backward is refused there (RuntimeError, as autograd's "modified by an
    inplace operation"). Under ``torch.autocast`` the backward's recomputations run under the
    forward's autocast state, and every module in its training flag of the forward. The trainable
    parameters are read at each forward, so parameters unfrozen (or replaced) after wrapping are trained.
    """

    def __init__(self, model: nn.Module | Sequence[nn.Module], schedule: Any, loss_fn: LossFn | None = None, *,
                 chain: Chain | None = None, input_grad: bool = False) -> None:
        super().__init__()
        from memsched.models.network import checked_blocks, checked_loss_fn, schedule_and_instance

        with python_spelling():  # a Python constructor: bad input names ``model`` (not the CLI's ``MODEL``)
            blocks = checked_blocks(model, "ScheduledChain")
        loss = checked_loss_fn(loss_fn)
        if not isinstance(input_grad, bool):
            raise InputError(f"must be True or False, got {input_grad!r}", field="input_grad")
        self.blocks = nn.ModuleList(blocks)
        schedule, chain = schedule_and_instance(schedule, chain, (Schedule, OffloadSchedule))
        if getattr(schedule, "length", None) not in (None, len(blocks)):
            raise InputError(f"the schedule is for length {schedule.length} but the model has {len(blocks)} blocks",
                             field="schedule")
        ops = _as_ops(schedule)
        if chain is not None and not isinstance(chain, (Chain, OffloadInstance)):
            raise InputError(f"the instance must be a chain or an offloading instance, got {type(chain).__name__}",
                             field="chain")
        #: offloading: the schedule moves values to host memory (`models.offload.executor`)
        self.offloads = (isinstance(schedule, OffloadSchedule) or isinstance(chain, OffloadInstance)
                         or any(isinstance(op, Transfer) for op in ops))
        given = chain.chain if isinstance(chain, OffloadInstance) else chain
        self.chain = given if given is not None else _unit_chain(len(blocks))
        if self.chain.length != len(blocks):
            raise InputError(f"the schedule's chain has {self.chain.length} stages but the model {len(blocks)} blocks",
                             field="schedule")
        if self.offloads:  # valid whatever the link's speed: any bandwidth checks the rules
            inst = chain if isinstance(chain, OffloadInstance) else OffloadInstance(self.chain, 1.0)
            replay: Any = simulate_offload(inst, OffloadSchedule(ops, len(blocks)))
        else:
            replay = simulate(self.chain, ops)  # type: ignore[arg-type]
        if not replay.valid:
            raise InputError(f"not a valid schedule of this chain: {replay.violation}", field="schedule")
        self.ops: list[Op | Transfer] = ops
        self._loss_at = next(k for k, op in enumerate(ops) if op[0] == LOSS)  # a valid schedule has one
        self._own_loss = loss_fn is not None
        self.loss_fn = loss
        self._release = None if given is None or self.offloads else given.has_release()
        self._executor = self.new_executor(input_grad)

    def new_executor(self, input_grad: bool) -> ChainExecutor:
        """The executor of this schedule's operations (the offloading one when it moves values)."""
        blocks = list(self.blocks)
        if self.offloads:
            from memsched.models.offload.executor import OffloadExecutor

            return OffloadExecutor(blocks, self.loss_fn, input_grad=input_grad)
        return ChainExecutor(blocks, self.loss_fn, input_grad=input_grad, release=self._release)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_L under the schedule: its operations before the ``Loss`` now, the rest in the backward
        of the output. Without gradients (``torch.no_grad()``), the plain forward."""
        if not isinstance(x, torch.Tensor):
            raise InputError(f"the input must be a torch.Tensor, got {type(x).__name__}", field="inputs")
        check_input_like(list(self.blocks), x, "")
        if not torch.is_grad_enabled():
            a = x
            for i, block in enumerate(self.blocks):
                try:
                    a = block(a)
                except Exception as err:  # the user's block on the user's input: bad input
                    raise InputError(f"block {i} ({type(block).__name__}) fails on its input of shape "
                                     f"{tuple(getattr(a, 'shape', ()))}: {type(err).__name__}: {first_line(err)}",
                                     field="inputs") from None
            return a
        # read now, not at construction: parameters may be unfrozen (or replaced) after wrapping
        params = [p for p in self.parameters() if p.requires_grad]
        try:
            return _ScheduledPass.apply(self, x, *params)
        except Exception as err:
            raise _input_error_or(err, self, x) from None

    def step(self, inputs: torch.Tensor, target: Any = None) -> torch.Tensor:
        """One forward/backward under the schedule; gradients accumulate into ``.grad`` as
        ``loss.backward()`` would leave them. Returns the loss (a detached scalar tensor); InputError
        under ``torch.inference_mode()``."""
        return self.step_with_input_grad(inputs, target)[0]

    def step_with_input_grad(self, inputs: torch.Tensor, target: Any = None
                             ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`step`, also returning the input's gradient delta_0 (None unless `input_grad`). InputError
        under ``torch.inference_mode()``, where no gradient can be computed."""
        if torch.is_inference_mode_enabled():
            raise InputError("ScheduledChain.step is a training step (it computes gradients) and cannot run under "
                             "torch.inference_mode(): call it outside that context")
        check_step_arguments("ScheduledChain", list(self.blocks), inputs, target, self._own_loss)
        try:
            loss, delta0 = self._executor.train_step(self.ops, inputs, target)  # grad enabled inside
        except Exception as err:
            raise _input_error_or(err, self, inputs, target, loss=True) from None
        assert loss is not None  # a valid schedule runs the loss
        return loss, delta0

    def extra_repr(self) -> str:
        """The schedule in one line, for ``print(module)``."""
        recomputed = sum(1 for op in self.ops if op[0] in FORWARD_KINDS) - len(self.blocks)
        transfers = sum(isinstance(op, Transfer) for op in self.ops)
        return f"{len(self.ops)} ops, {recomputed} forward recomputations" + (
            f", {transfers} transfers" if self.offloads else "")


_GRAD_REFUSED = ("a scheduled forward supports loss.backward() only, not torch.autograd.grad() or backward(inputs=...) "
                 "(its backward accumulates every parameter's .grad, as loss.backward() does); use loss.backward() "
                 "or the plain model")
_CREATE_GRAPH_REFUSED = ("a scheduled forward does not support backward(create_graph=True) (double backward, as a "
                         "gradient penalty needs): its backward accumulates the parameters' .grad without a graph; "
                         "use the plain model or torch.utils.checkpoint(use_reentrant=False)")

#: one autocast state, as ``torch.utils.checkpoint`` records it: (device type, enabled, dtype, cache enabled)
AutocastState = tuple[str, bool, torch.dtype, bool]


def autocast_states(device: torch.device) -> list[AutocastState]:
    """The autocast states in force now for the CPU and for `device`'s type (once when it is the CPU),
    those of the device types autocast supports: what `autocast_as` re-enters."""
    found = (_autocast_state(kind) for kind in dict.fromkeys(("cpu", device.type)))
    return [state for state in found if state is not None]


def _autocast_state(device_type: str) -> AutocastState | None:
    """The autocast state of `device_type` now, None where autocast does not support that type."""
    try:
        if not torch.amp.is_autocast_available(device_type):
            return None
        enabled, dtype = torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)
    except (AttributeError, TypeError):  # torch < 2.4: the per-device functions
        if device_type == "cpu":
            enabled, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
        elif device_type == "cuda":
            enabled, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
        else:
            return None
    return device_type, bool(enabled), dtype, torch.is_autocast_cache_enabled()


def autocast_as(states: Sequence[AutocastState]) -> ExitStack:
    """A context that runs its body under the autocast `states` (`autocast_states`; autocast off for a
    device type recorded with it off), as ``torch.utils.checkpoint`` runs its recomputation."""
    stack = ExitStack()
    for device_type, enabled, dtype, cache in states:
        stack.enter_context(torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache))
    return stack


@contextmanager
def modes_as(modes: Sequence[tuple[nn.Module, bool]]) -> Iterator[None]:
    """Run the body with each module in its recorded training flag (`modes`: (module, training)
    pairs, as the forward ran them: a ``.eval()`` between the forward and the backward must not
    recompute BatchNorm or Dropout in eval mode); the flags found are put back afterwards."""
    found = [(module, module.training) for module, _ in modes]
    try:
        for module, training in modes:
            module.training = training
        yield
    finally:
        for module, training in found:
            module.training = training


def _check_input_unchanged(ctx: Any) -> None:
    """Refuse a backward whose forward's input was modified in place since the forward (its
    version counter moved), as autograd refuses a saved tensor modified in place: the schedule's
    recomputations read it. An input nobody references any more cannot have changed."""
    x = ctx.input_ref()
    if x is not None and x._version != ctx.input_version:
        raise RuntimeError(
            f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"the input of a scheduled forward ({x.dtype}, shape {tuple(x.shape)}) is at version {x._version}; "
            f"expected version {ctx.input_version} instead (the schedule recomputes from it in the backward: "
            f"modify a clone of it, or modify it after the backward)")


class _ScheduledPass(torch.autograd.Function):
    """(owner, a_0, *parameters) -> a_L by the schedule's operations before its ``Loss``; the
    backward runs the operations after it from delta_L and returns delta_0. The parameters are
    inputs only so that the output requires grad: their gradients accumulate inside the backward
    (B(i) calls autograd on its tape), so this node returns None for them."""

    @staticmethod
    def forward(ctx: Any, owner: ScheduledChain, inputs: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        """Run ops[:Loss] from a_0 (shared with `inputs`, not copied); keep the state for the backward."""
        executor = owner.new_executor(inputs.requires_grad)
        ops = owner.ops
        state = executor.new_run_state(ops, inputs.device)  # type: ignore[arg-type]
        state.acts[0] = inputs.detach()
        with torch.enable_grad():  # as in a plain step: F_all's tape and its stand-in track gradients
            for op in ops[:owner._loss_at]:
                executor.apply(op, state, None)  # type: ignore[arg-type]
        out = executor.take_output(state)  # a_L leaves the state as the Loss op would give it up
        ctx.run = (executor, state, ops[owner._loss_at + 1:])
        # the recomputations in the backward run as these forwards did (torch.utils.checkpoint's rule)
        ctx.autocast = autocast_states(inputs.device)
        ctx.modes = [(module, module.training) for module in owner.modules()]  # train/eval: also as they ran
        # no reference to the input's storage kept for this check: a weak one to the caller's tensor
        ctx.input_ref, ctx.input_version = weakref.ref(inputs), inputs._version
        return out.detach()

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        """delta_L -> the operations after the Loss (recomputations, B(i)) -> delta_0."""
        if ctx.run is None:
            raise RuntimeError("a scheduled forward supports one backward (its tapes are consumed; "
                               "retain_graph=True is not supported: run the forward again)")
        executor, state, rest = ctx.run
        ctx.run = None
        state: RunState
        if not torch.autograd._is_checkpoint_valid():  # as torch.utils.checkpoint(use_reentrant=True)
            state.clear()
            raise RuntimeError(_GRAD_REFUSED)
        if torch.is_grad_enabled():  # autograd runs a backward with grad mode on for create_graph=True only
            state.clear()
            raise RuntimeError(_CREATE_GRAPH_REFUSED)
        try:
            _check_input_unchanged(ctx)
            state.grads[executor.length] = grad_out
            with torch.enable_grad(), modes_as(ctx.modes):
                for op in rest:
                    _run_backward_op(executor, op, state, ctx.autocast)
            delta0 = state.grads.pop(0, None)
        finally:
            state.clear()
        return (None, delta0, *([None] * (len(ctx.needs_input_grad) - 2)))


def _run_backward_op(executor: ChainExecutor, op: Op | Transfer, state: RunState,
                     autocast: Sequence[AutocastState]) -> None:
    """One operation of the schedule after its ``Loss``: a forward (a recomputation) under the
    forward's `autocast` states, as plain autocast training ran it; anything else (B(i), whose tape
    follows the dtypes of its forward, and transfers) in the backward's own state, as autograd runs it."""
    if len(op) == 2 and op[0] in FORWARD_KINDS:
        with autocast_as(autocast):
            executor.apply(op, state, None)
    else:
        executor.apply(op, state, None)


def _input_error_or(err: Exception, owner: ScheduledChain, inputs: torch.Tensor, target: Any = None, *,
                    loss: bool = False) -> Exception:
    """What to raise for `err`, raised by a step (`loss`: the loss ran too) or a forward: an
    `InputError` when the user's blocks (and loss) fail on these inputs (and target) on their own
    (`models.network.step_input_error`: the plain forward and the loss, run again), else `err`
    itself (not the input's fault: a bug, kept as it is)."""
    from memsched.models.network import step_input_error

    if isinstance(err, InputError):
        return err
    blocks = list(owner.blocks)
    if loss:
        found = step_input_error(blocks, owner.loss_fn, inputs, target, "")
    else:  # the drop-in forward: the blocks only, the loss is the caller's
        found = step_input_error(blocks, lambda out, _: out.float().sum(), inputs, None, "")
    return found if found is not None else err


def _as_ops(schedule: Any) -> list[Op | Transfer]:
    """The operations of a chain or offloading schedule, or of a list of them (tuples allowed:
    (kind, stage) for compute operations, (kind, value, index) for transfers), each checked
    to be of a known kind, with an int stage or index (ranges: the simulator's check)."""
    if isinstance(schedule, (Schedule, OffloadSchedule)):
        return list(schedule.ops)
    if isinstance(schedule, (list, tuple)) and all(isinstance(op, tuple) and len(op) in (2, 3) for op in schedule):
        return [_as_op(k, op) for k, op in enumerate(schedule)]
    raise InputError(f"expected a chain or offloading schedule (a Schedule, an OffloadSchedule, their ops, or a "
                     f"solver's Result), got {type(schedule).__name__}", field="schedule")


def _as_op(k: int, op: tuple[Any, ...]) -> Op | Transfer:
    """Operation `k` of a list given as tuples, checked: (kind, stage) or (Off|Pre, a|abar, index)."""
    where = f"operation {k} {op!r}"
    if len(op) == 2:
        kind, stage = op
        if not isinstance(kind, str) or kind not in KINDS:
            raise InputError(f"{where}: unknown kind {kind!r} (one of {', '.join(KINDS)})", field="schedule")
        if isinstance(stage, bool) or not isinstance(stage, numbers.Integral):
            raise InputError(f"{where}: the stage must be an integer, got {stage!r}", field="schedule")
        return Op(kind, int(stage))
    kind, value, index = op
    if not isinstance(kind, str) or kind not in (OFF, PRE):
        raise InputError(f"{where}: unknown transfer {kind!r} (Off or Pre)", field="schedule")
    if not isinstance(value, str) or value not in VALUES:
        raise InputError(f"{where}: the value must be one of {', '.join(VALUES)}, got {value!r}", field="schedule")
    if isinstance(index, bool) or not isinstance(index, numbers.Integral):
        raise InputError(f"{where}: the index must be an integer, got {index!r}", field="schedule")
    return Transfer(kind, value, int(index))


def _unit_chain(length: int) -> Chain:
    """A chain of `length` stages (the loss apart) with unit sizes and times: enough for the
    simulator to check that a schedule is valid."""
    L = length
    return Chain(u_f=[1.0] * L + [0.0], u_b=[1.0] * (L + 1), x=[1] * (L + 1) + [0], xbar=[0] + [1] * L + [0],
                 o_f=[0] * (L + 1), o_b=[0] * (L + 1), name="unit")
