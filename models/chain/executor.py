"""Execute a chain `Schedule` for real: one training step of a sequence of PyTorch blocks.

The blocks are the chain: block i maps a_i to a_{i+1}; ``loss_fn(a_L, target)`` is the loss
(stage L). Operations follow the rules table of `solvers.chain.simulator`:

==========  ================================================================================
op          what the executor does
==========  ================================================================================
F_all(i)    ``x = a_i.detach().requires_grad_()`` (shares a_i's storage); ``y = block_i(x)``
            with autograd; keeps the tape abar_{i+1} = (x, y): y's graph holds what autograd
            saved; a_{i+1} is available as ``y.detach()``. With early release (see B(i)) the
            tape keeps a stand-in of y without storage (`_Handle`) and a_{i+1}'s data beside it.
            The tape holds no byte of a_i, which the model counts apart (`input_hooks`: saved
            tensors sharing a_i's storage are kept as `Saved` handles of an `InputSlot`, as the
            offloading executor's, and the leaf x is emptied after the forward), so F_n(i) frees
            a_i while abar_{i+1} lives. Known limits: a saved view of a_i in another dtype stays
            shared, and a block returning its input itself keeps a_i as a_{i+1}.
F_ck(i)     ``a_{i+1} = block_i(a_i)`` under ``torch.no_grad()``; keeps a_i. A block that modifies
            its input in place is refused in every mode (`InPlaceInputError`, an `InputError`):
            a_i is kept to recompute block i from it, and autograd refuses to modify the leaf.
F_n(i)      as F_ck, then drops the standalone a_i.
Loss        ``loss_fn(a_L, target).backward()`` by `loss_backward`: the executor gives up its
            references to a_L once the loss's forward has run, so a_L's bytes are freed
            before the backward unless the loss saved a_L (cross-entropy saves its
            log-softmax, not its input); delta_L is the gradient reaching a_L. The loss reads an
            alias of a_L that is neither a leaf nor a view (`loss_input`), so it may modify it in
            place, as it may a network's output in plain autograd. The standalone
            a_L is dropped; when a_L is the output of the tape abar_L, F_all(L-1) kept the
            tape's output as a stand-in without storage (`_Handle`) and a_L's data beside
            it, which the loss gives up the same way (freed unless block L-1 saved it: a
            held B(L-1), without early release, then keeps the data it could not free to its
            end, as every held B(i) keeps a_{i+1} and the chain's o_b[L-1] charges). The
            stand-in's 0-d scalar has a_L's dtype, whatever the weights' (float64 logits from
            float32 weights): `make_standins` makes those of the usual floating and complex dtypes
            before the step, so a step allocates none (`standin_for` makes a rarer one, float8,
            at its first forward: a few bytes, once per process, no prediction counts them).
B(i)        ``torch.autograd.backward(y, delta_{i+1})`` on the tape abar_{i+1}, whose leaf x and
            input slot read the a_i resident then (`tape_input`: standalone, or the output of
            abar_i, recomputed or not); delta_i = x.grad
            (None for an integer input such as token ids); drops abar_{i+1}, delta_{i+1} and
            the standalone a_i. Parameter gradients accumulate into ``.grad``. When no gradient
            reaches a_{i+1} (delta_{i+1} None: a later block detaches its input, runs under
            ``torch.no_grad()`` or takes an integer such as an argmax), nothing is back-propagated
            and delta_i is None: blocks 0..i get no gradients, as in plain autograd, and the
            tape's graph is freed as B(i) drops it (no saved-tensor handle holds a node of it:
            `input_hooks`), as plain autograd frees a graph no backward runs. With early
            release (`release_backward`) the executor gives up its references to delta_{i+1}
            and a_{i+1}'s data *before* the backward, so autograd frees each as soon as its
            last node has run, as one ``loss.backward()`` does: B(i) then peaks below its
            start (the chain's ``bwd_overhead_released``, measured by the profiler this way).
==========  ================================================================================

Randomness: the CPU (and CUDA) RNG state is recorded before the first forward of each random
stage that the schedule computes more than once and set before each later forward of that stage,
the generator's own state copied before and put back after it, as ``torch.utils.checkpoint``
does: dropout masks are recomputed identically and the global RNG stream is the same as in a
plain forward/backward, so gradients match plain autograd (`models.measure.RngStates`). Which
stages draw random numbers `step` finds before its runs (`random_stages`: a plain forward
without grad, outside every measured window), so a measured run copies nothing for the others.
A training step (`train_step`) finds them
during the run instead (a stage's state compared before and after its first forward). A block
whose drawing depends on more than its input and the training mode (a call counter) is not
supported by `step`.
Buffers: the first forward of a stage in a step updates its block's buffers (BatchNorm's running
statistics, ``num_batches_tracked``, spectral_norm's ``u`` and ``v``) as the plain forward does;
every later one (a recomputation: F_ck, F_n or F_all of a stage computed before in the step) runs
on the buffers as they were before that first forward and puts back those it left after it
(`kept_buffers`), so a recomputation computes what the first forward computed (a block whose output
reads the buffers it updates, spectral_norm's power iteration, gets plain autograd's gradients)
and a step leaves the buffers as plain training does (``torch.utils.checkpoint`` instead updates
them at every recomputation, from the values the previous computation left). The two copies this
takes (`BufferCopies`, `ChainExecutor.buffer_copies_for`: a few bytes per BatchNorm channel each)
are made before the first run that recomputes the stage and kept by the executor for its later
runs, like the stand-ins, outside every measured window (the tracker's, CUDA's, and the allocator
probe's, which opens after a warm-up run): no measurement or prediction counts them, and a step
only copies values into them (before the stage's first forward, before each recomputation) and
back, in place, allocating nothing. A block whose buffers changed identity or shape since (a
forward that rebinds a buffer) is copied anew when the copy is refilled.

Memory (bytes): on CUDA, ``torch.cuda.max_memory_allocated`` during the step minus the memory
allocated before it; on CPU, the peak of live tensor bytes allocated during the step
(`models.memory.LiveTensorTracker`). In both, the executor first copies the input a_0 (so that
it owns it and frees it when the schedule does) and parameter gradients (the blocks' and a loss
module's own: `with_loss_parameters`) are allocated (zeros) before the step, so neither weights
nor their gradients are counted, as in the simulator.
Time is measured in a separate run without the tracker on CPU (the tracker slows each
operation down), in milliseconds like the profiled chains; a timed run starts without parameter
gradients (autograd creates them, as in a plain step after ``zero_grad(set_to_none=True)``; adding
into preallocated zeros cost 8-12% more on CPU), and with ``input_grad=False`` delta_0 is not
computed either, so store-all runs the kernels a plain forward/backward runs, plus a fixed
cost of about 0.1 ms per stage (Python per operation, autograd's engine entered once per B:
`experiments/bench_executor_overhead.py`; `experiments/bench_vs_torch.py` measures both steps).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from memsched.models.buffers import (
    BufferSnapshot,
    buffer_entries,
    from_buffers,
    restore_buffers,
    snapshot_buffers,
    step_modules,
)
from memsched.models.chain.overheads import predict_both, released_loss_chain, tracker_chain
from memsched.models.measure import (
    OpTrace,
    RngStates,
    RunState,
    StepMeter,
    StepResult,
    chain_peak_with_rng_states,
    compare_gradients,
    generator_states,
    gradients_match,
    measure_runs,
    probed_run,
    same_generator_states,
    zero_grads,
)
from memsched.models.memory import storage_key
from memsched.models.offload.values import InputSlot, Versioned, saved_input, unpack_saved
from memsched.solvers.chain import Chain, Schedule, simulate
from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, FORWARD_KINDS, LOSS, B, Op
from memsched.solvers.errors import InputError
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef

__all__ = ["ChainExecutor", "StepResult", "OpTrace", "reference_step", "compare_gradients", "check_gradients",
           "execute", "as_blocks", "parameters_of", "LossFn", "loss_backward", "release_backward", "forward_block",
           "InPlaceInputError", "loss_input", "ChainRunState", "BufferCopies", "buffer_copies", "kept_buffers",
           "recomputed", "ChainStepResult", "counted_rng_states", "block_output", "input_hooks", "release_input",
           "tape_input", "input_slots", "loss_parameters", "with_loss_parameters"]

LossFn = Callable[[torch.Tensor, Any], torch.Tensor]


def as_blocks(model: nn.Module | Sequence[nn.Module]) -> list[nn.Module]:
    """The chain of a model: the children of an ``nn.Sequential``, or a list of blocks as is."""
    if isinstance(model, nn.Sequential):
        return list(model)
    if isinstance(model, nn.Module):
        return [model]
    return list(model)


def parameters_of(blocks: Sequence[nn.Module], *, frozen: bool = False) -> dict[str, nn.Parameter]:
    """Distinct parameters of the blocks that require grad (`frozen`: every one), named
    ``"<block>.<name>"`` (shared ones once)."""
    out: dict[str, nn.Parameter] = {}
    seen: set[int] = set()
    for i, block in enumerate(blocks):
        for name, p in block.named_parameters():
            if id(p) not in seen and (frozen or p.requires_grad):
                seen.add(id(p))
                out[f"{i}.{name}"] = p
    return out


def loss_parameters(loss_fn: object, *, exclude: Iterable[nn.Parameter] = ()) -> dict[str, nn.Parameter]:
    """The distinct parameters requiring grad of `loss_fn` when it is an ``nn.Module`` (a learnable
    head, a temperature), named ``"loss.<name>"``: ``loss.backward()`` gives them gradients, so a step
    computes them and the gradient check compares them. Those in `exclude` (the network's own, shared
    with the loss: a projection tied to an embedding) are left out, named under their block. {} for a
    plain loss function."""
    if not isinstance(loss_fn, nn.Module):
        return {}
    seen = {id(p) for p in exclude}
    out: dict[str, nn.Parameter] = {}
    for name, p in loss_fn.named_parameters():
        if id(p) not in seen and p.requires_grad:
            seen.add(id(p))
            out[f"loss.{name}"] = p
    return out


def with_loss_parameters(params: dict[str, nn.Parameter], loss_fn: object) -> dict[str, nn.Parameter]:
    """`params` (the network's parameters by name) followed by the loss module's own
    (`loss_parameters`): every parameter whose gradient one training step computes."""
    return {**params, **loss_parameters(loss_fn, exclude=params.values())}


class InPlaceInputError(InputError, RuntimeError):
    """A block modifies its input in place (``nn.ReLU(inplace=True)`` as a block of its own, ``x += ...``
    on the block's input): bad input (also a RuntimeError, as the executor raised before). A schedule
    keeps a_i to recompute block i from it, and in a tape autograd would refuse to modify a leaf."""

    def __init__(self, index: int, block: nn.Module, *, what: str = "", field: str | None = None) -> None:
        """`what` (when not empty) names the network at the start of the message."""
        super().__init__(f"{what + ': ' if what else ''}block {index} ({type(block).__name__}) modifies its input in "
                         "place: in-place operations on a block's input are not supported (use the out-of-place "
                         "operation, or move it into the previous block)", field=field)


#: the start of autograd's message when an in-place operation meets a leaf that requires grad (or a view of one)
_LEAF_IN_PLACE = "leaf Variable that requires grad is being used in an in-place operation"


def forward_block(block: nn.Module, index: int, x: torch.Tensor) -> torch.Tensor:
    """``block(x)`` in the caller's grad mode, refusing a block that modifies its input x in place
    (`InPlaceInputError`): x's version counter moved (no grad, or an input without gradient), or
    autograd refused the in-place operation on the leaf x (raised before x changed)."""
    version = x._version
    try:
        y = block(x)
    except RuntimeError as err:
        if x.is_leaf and x.requires_grad and _LEAF_IN_PLACE in str(err):
            raise InPlaceInputError(index, block) from None
        raise
    if x._version != version:
        raise InPlaceInputError(index, block)
    return y


def block_output(block: nn.Module, index: int, y: Any) -> torch.Tensor:
    """`y`, the output of block `index`, when it is one tensor, else `InputError` naming ``blocks``
    with the message of `models.network`'s dry run (``memsched run``, `ScheduledChain`): a block that
    returns a tuple fails here, before the executor reads it as a tensor."""
    if not isinstance(y, torch.Tensor):
        raise InputError(f"block {index} ({type(block).__name__}) returns a {type(y).__name__}; a chain passes one "
                         "tensor from block to block", field="blocks")
    return y


class _Handle(torch.autograd.Function):
    """(y, one) -> a stand-in of y's shape holding none of y's storage (`one`, a 0-d tensor of y's
    dtype made before the step, expanded): backward(stand-in, delta) is backward(y, delta), while
    y's bytes live only as long as its data is referenced elsewhere (or saved by autograd)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, one: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return one.expand(y.shape)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: D102
        return grad, None


_ONES: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}


class _Release(torch.autograd.Function):
    """(stand-in, one, box) -> a 0-d view of `one`; its backward hands on the gradient in `box`
    (popped), so no Python reference to delta_{i+1} outlives the node that consumes it."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, one: torch.Tensor, box: list) -> torch.Tensor:  # noqa: D102
        ctx.box = box
        return one.view(())

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # noqa: D102
        return ctx.box.pop(), None, None


def release_backward(box: list[torch.Tensor], delta: list[torch.Tensor | None], one: torch.Tensor | None = None
                     ) -> None:
    """``torch.autograd.backward(y, delta_{i+1})`` for the tape output y in `box` and the gradient
    in `delta` (one tensor each, both emptied first), holding neither: autograd frees delta_{i+1}
    once y's node has consumed it and a_{i+1}'s data once no saved tensor needs it; a gradient of
    None (none reaches a_{i+1}, as when a later block detaches) back-propagates nothing. y should be a
    `_Handle` stand-in whose data the caller no longer references. Allocates nothing itself when
    `one` (a 0-d tensor of y's dtype and device; by default the process's `_one`) exists already."""
    y, grad = box.pop(), delta.pop()
    if grad is None:  # no gradient reaches a_{i+1} (a later block stops the flow): nothing to back-propagate
        return
    one = _one(y.device, y.dtype) if one is None else one
    if grad.shape != y.shape:  # nothing to release early: the plain call
        torch.autograd.backward(y, grad)
        return
    inner = [grad]
    del grad
    z = _Release.apply(y, one, inner)
    del y
    torch.autograd.backward(z, one)


def _one(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """A 0-d tensor kept for the process (made outside any measured step: no step counts it)."""
    key = (device, dtype)
    if key not in _ONES:
        _ONES[key] = torch.zeros((), device=device, dtype=dtype)
    return _ONES[key]


#: the dtypes whose stand-ins `make_standins` makes before each step: whatever a block may output besides
#: the parameters' dtype (float64 logits from float32 weights, a float16 output under autocast...)
STANDIN_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)


def make_standins(device: torch.device, dtypes: Iterable[torch.dtype] = ()) -> None:
    """Make the stand-ins (`_one`) of `STANDIN_DTYPES` and `dtypes` on `device`, before a step is measured
    (a 0-d tensor each, kept for the process: at most 16 bytes, one allocator block on CUDA, counted by no
    step). A dtype the device does not support (float64 on MPS) is skipped: no block can output it."""
    for dtype in dict.fromkeys((*dtypes, *STANDIN_DTYPES)):
        if (device, dtype) not in _ONES:
            try:
                _one(device, dtype)
            except (TypeError, RuntimeError):
                continue


def standin_for(y: torch.Tensor) -> torch.Tensor | None:
    """The stand-in scalar (`_one`) of y's device and dtype for `_Handle`: made before the step by
    `make_standins` for the usual dtypes; for another one (a float8 output) made here, inside the step, once
    per process (a 0-d tensor: at most 16 bytes, one allocator block on CUDA, which no prediction counts).
    None for a tensor that is neither floating nor complex (it never requires grad)."""
    if not (y.is_floating_point() or y.is_complex()):
        return None
    one = _ONES.get((y.device, y.dtype))
    if one is None and y.dtype not in STANDIN_DTYPES:
        one = _one(y.device, y.dtype)
    return one


def input_hooks(x: torch.Tensor, slot: InputSlot) -> contextlib.AbstractContextManager[Any]:
    """Around F_all(i)'s forward of the leaf `x` (sharing a_i's storage): saved-tensor hooks that
    keep every saved tensor sharing x's storage as a `Saved` read from `slot` at B(i)
    (`models.offload.values.saved_input`; one of another dtype is kept as it is, a known limit),
    anything else as it is with its version (`models.offload.values.Versioned`: autograd checks no
    version of a tensor a pack hook handled, so the unpack hook does); so the tape abar_{i+1} holds no
    byte of a_i, which the chain model counts apart. A saved tensor with a ``grad_fn`` (a node's own
    output: Tanh's, Sigmoid's, softmax's result) is kept detached (`_without_graph`), so the handle holds
    no node of the graph that holds the handle: no reference cycle through autograd's C++ nodes, which
    ``gc`` cannot see. The tape's graph is then freed by reference counting as soon as its output is
    dropped, also when no backward ever runs it (a B(i) that no gradient reaches, a branch the loss
    ignores). A null context for an `x` without a storage (sparse, nested: nothing to release)."""
    try:
        key = storage_key(x)
    except (RuntimeError, NotImplementedError):
        return contextlib.nullcontext()
    device = x.device

    def pack(t: torch.Tensor) -> Any:
        try:
            if storage_key(t) != key or t.device != device:
                return Versioned.of(_without_graph(t))
        except (RuntimeError, NotImplementedError):  # no storage: not a_i's
            return Versioned.of(_without_graph(t))
        return saved_input(t, x, slot)

    return torch.autograd.graph.saved_tensors_hooks(pack, unpack_saved)


def _without_graph(t: torch.Tensor) -> torch.Tensor:
    """What `input_hooks`' pack hook keeps of a saved tensor `t` that is not a_i's: `t` detached when it
    has a ``grad_fn``, else `t` itself. The alias shares t's storage (no byte allocated) and its version
    counter (`Versioned` still sees an in-place change to t); autograd's unpack gives the tensor it returns
    back its place in the graph (the node it was saved for, or the saved ``grad_fn``), as for any
    unpack hook whose result only has t's content. Invariant: a handle never references a node, so
    the graph of a tape is freed by reference counting once the tape's output is dropped (a node saving
    its own output with `t` itself would be a cycle node -> handle -> t -> node that ``gc`` cannot free
    when no backward runs the node)."""
    return t.detach() if t.grad_fn is not None else t


def release_input(x: torch.Tensor) -> None:
    """After F_all(i)'s forward: the tape's leaf `x` lets go of a_i's storage (an empty tensor of
    its dtype, no bytes), so a_i's bytes live only as long as the standalone a_i or the tape abar_i
    holding it (`tape_input` gives it back at B(i)). An `x` without a storage is left as it is."""
    with contextlib.suppress(RuntimeError, NotImplementedError):
        storage_key(x)
        x.data = torch.empty(0, dtype=x.dtype, device=x.device)


@contextlib.contextmanager
def tape_input(x: torch.Tensor, slot: InputSlot | None, a: torch.Tensor) -> Iterator[None]:
    """Around B(i): the tape's leaf `x` and its `slot` (None: a tape without hooks) read `a`, the
    a_i resident at B(i) (the standalone a_i, or the output of the tape abar_i, recomputed or not);
    the slot lets go of it afterwards, also when the backward raises."""
    if slot is None:
        yield
        return
    a = a.detach()
    x.data = a  # the leaf's gradient has a_i's shape (an x never released: the same storage again)
    slot.tensor = a
    del a
    try:
        yield
    finally:
        slot.tensor = None


def input_slots(s: RunState) -> dict[int, InputSlot]:
    """Stage j -> the `InputSlot` of the tape abar_j of the run state `s` (a `ChainRunState`'s
    ``input_slots``; kept on any other run state the same way)."""
    slots = getattr(s, "input_slots", None)
    if slots is None:
        slots = {}
        s.input_slots = slots  # type: ignore[attr-defined]
    return slots


class _Sink(torch.autograd.Function):
    """a -> an alias of a (its storage, neither a view nor a leaf: a loss may modify it in place,
    as it may a network's output), recording the gradient reaching it in `grads`; its node saves
    nothing, so a's storage is not kept alive by the graph (a leaf would be, by its AccumulateGrad
    node). `anchor` is an empty leaf that makes the output require grad."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, anchor: torch.Tensor, grads: list) -> torch.Tensor:  # noqa: D102
        ctx.grads = grads
        return a.detach()  # not `a` or a view of it: autograd would refuse in-place changes to those

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, None, None]:  # noqa: D102
        ctx.grads.append(grad)
        return None, None, None


def loss_input(a: torch.Tensor, grads: list[torch.Tensor]) -> torch.Tensor:
    """What a loss reads for the output `a`: a floating (or complex) `a` as an alias of its storage
    (`_Sink`; call with grad mode on) that the loss may modify in place, the gradient reaching it
    appended to `grads`; any other `a` (an integer output) detached, as is."""
    a = a.detach()
    if not (a.is_floating_point() or a.is_complex()):
        return a
    anchor = torch.empty(0, device=a.device, requires_grad=True)
    return _Sink.apply(a, anchor, grads)


def surviving_storage(ref: StorageWeakRef) -> torch.UntypedStorage | None:
    """The storage `ref` points to while something still holds its bytes (a tensor autograd saved),
    as a new strong reference that keeps them; None once they were freed."""
    if ref.expired():
        return None
    return torch.UntypedStorage._new_with_weak_ptr(ref.cdata)


def loss_backward(loss_fn: LossFn, box: list[torch.Tensor], target: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Compute ``loss_fn(a_L, target)`` and back-propagate it to a_L: (the loss, delta_L).

    `box` holds a_L (one tensor) and is emptied: once the loss's forward has run, no reference
    of this function to a_L is left, so a_L's bytes are freed before the backward when the caller
    held no other reference and the loss did not save a_L (torch.utils.checkpoint around the
    blocks frees its last output the same way). delta_L is None when no gradient reaches a_L."""
    a = box.pop()
    grads: list[torch.Tensor] = []
    with torch.enable_grad():
        y = loss_input(a, grads)
        del a
        loss = loss_fn(y, target)
        del y
        loss.backward()
    return loss.detach(), (grads[0] if grads else None)


@dataclass
class BufferCopies:
    """The two copies of a block's buffers (`snapshot_buffers`: BatchNorm's ``running_mean``,
    ``running_var``, ``num_batches_tracked``, spectral_norm's ``u`` and ``v``: a few bytes per
    channel each) that recomputing its stage takes, made before a run and refilled in place
    (`_refill`) during it, so that a step allocates nothing for them.

    Invariant inside a run (`kept_buffers`): ``before`` holds the buffers as the stage's first
    forward of the run found them (refilled just before it), the values plain autograd's single
    forward reads; ``after`` holds them as that forward left them while a recomputation runs."""

    #: the buffers before the stage's first forward in the run (a recomputation runs on these)
    before: BufferSnapshot
    #: the buffers after it (put back after each recomputation)
    after: BufferSnapshot


def buffer_copies(blocks: Sequence[nn.Module], stages: Iterable[int]) -> dict[int, BufferCopies]:
    """The `BufferCopies` of block i (two `snapshot_buffers`) for each stage i of `stages` whose block
    has buffers: made before a run, so that recomputing stage i can run on the buffers its first
    forward saw and put back those it left without allocating anything inside the step."""
    out: dict[int, BufferCopies] = {}
    for i in sorted(set(stages)):
        before = snapshot_buffers([blocks[i]])
        if before:
            out[i] = BufferCopies(before, snapshot_buffers([blocks[i]]))
    return out


class ChainRunState(RunState):
    """The state of one chain run (`RunState`) plus what runs a recomputation on the buffers the
    stage's first forward saw and puts back those it left: the stages computed so far in the run,
    and the `buffer_copies` of the stages the run recomputes (made before it)."""

    def __init__(self, rng: Any, copies: dict[int, BufferCopies] | None = None) -> None:
        """`copies`: stage -> the copies of its block's buffers (`buffer_copies`,
        `ChainExecutor.buffer_copies_for`), refilled during the run. None: every stage whose block has
        buffers is copied at its first forward (allocated during the run: for runs nobody measures)."""
        super().__init__(rng)
        #: the stages whose block ran at least once in this run (its first forward updated the buffers)
        self.computed: set[int] = set()
        #: copy the buffers of every stage at its first forward (no copies were made before the run)
        self.copy_all = copies is None
        #: stage -> copies of its block's buffers; the dict given (an executor's, kept across its runs)
        #: itself, so a copy made during a run serves the next runs too
        self.buffer_copies: dict[int, BufferCopies] = {} if copies is None else copies
        #: stage L -> a_L's data that the loss could not free (saved by block L-1), held until B(L-1) ends
        self.kept_outputs: dict[int, torch.UntypedStorage] = {}
        #: stage j -> the slot where the tape abar_j finds its input a_{j-1} at B(j-1) (`input_hooks`)
        self.input_slots: dict[int, InputSlot] = {}

    def clear(self) -> None:
        """`RunState.clear`, the data of a_L held for B(L-1) and the tapes' input slots."""
        super().clear()
        self.kept_outputs.clear()
        self.input_slots.clear()


def _refill(block: nn.Module, saved: BufferSnapshot) -> bool:
    """Copy the current values of `block`'s buffers into the copies in `saved` (in place: nothing
    allocated). False, nothing copied, when the buffers are no longer those `saved` was made of
    (rebound, added, removed, or of another shape or dtype)."""
    now = buffer_entries([block])
    if len(now) != len(saved) or any(m is not sm or n != sn or b is not sb or b.shape != v.shape
                                     or b.dtype != v.dtype for (m, n, b), (sm, sn, sb, v) in zip(now, saved)):
        return False
    with torch.no_grad():
        for _, _, buf, values in saved:
            values.copy_(buf)
    return True


@contextlib.contextmanager
def kept_buffers(block: nn.Module, i: int, s: RunState) -> Iterator[None]:
    """Around a forward of stage i (block `block`) in the run `s`, so that the buffers evolve as in
    plain autograd's single forward. The first one in a `ChainRunState` updates the buffers as a
    plain forward does, after copying them into the stage's ``before`` copy (`BufferCopies`, refilled
    in place). A later one (a recomputation) copies the buffers into ``after``, runs on ``before``
    (the buffers the first forward read: spectral_norm's power iteration starts from the same ``u``,
    so its weight is the first forward's) and puts ``after`` back, also when it raises. A copy that
    no longer fits the block's buffers (rebound by a forward) is made anew. A recomputation without
    a ``before`` copy (a stage the run's copies did not foresee) runs on the current buffers and puts
    them back. A plain `RunState` (no record of what ran) leaves the buffers to every forward."""
    if not isinstance(s, ChainRunState):
        yield
        return
    copies = s.buffer_copies.get(i)
    if i not in s.computed:
        s.computed.add(i)
        if copies is not None:
            if not _refill(block, copies.before):
                copies.before = snapshot_buffers([block])
        elif s.copy_all:
            before = snapshot_buffers([block])
            if before:
                s.buffer_copies[i] = BufferCopies(before, snapshot_buffers([block]))
        yield
        return
    if copies is None:
        after = snapshot_buffers([block])
        if not after:
            yield
            return
    else:
        if not _refill(block, copies.after):
            copies.after = snapshot_buffers([block])
        after = copies.after
        restore_buffers(copies.before)
    try:
        yield
    finally:
        restore_buffers(after)


@dataclass
class ChainStepResult(StepResult):
    """A chain step's `StepResult` plus `rng_states`: the RNG states its last run kept in the memory
    it is measured in (the CPU generator's, 5,056 B each, one per recomputed stage that draws random
    numbers; none on CUDA, whose states are host tensors). ``predicted_peak`` (with a chain) adds
    them, and a copy during each recomputation of such a stage; the chain model charges none
    (`models.measure.chain_peak_with_rng_states`), so they may take an executed step above the
    budget the schedule was solved for."""

    rng_states: int = 0


def counted_rng_states(rng: RngStates | None) -> int:
    """How many of the states `rng` kept (`RngStates.kept`) hold bytes in the memory the step is
    measured in (`RngStates.state_bytes` > 0: the CPU's); 0 for None."""
    return 0 if rng is None else sum(1 for i in rng.kept if rng.state_bytes(i) > 0)


class ChainExecutor:
    """Runs schedules on `blocks` (block i: a_i -> a_{i+1}) followed by `loss_fn(a_L, target)`."""

    def __init__(self, blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, *, input_grad: bool = True,
                 release: bool | None = None) -> None:
        """`input_grad`: compute delta_0 (the gradient of the input a_0, as the chain model
        does); False skips it, as a plain training step does (a_0 then needs no gradient).
        `release`: True, each B(i) releases delta_{i+1} and a_{i+1}'s data early (`release_backward`;
        the chain's o_b); False, it holds them to its end (the chain's o_bh, `Chain.held`); None
        (the default), it releases early when the `chain` given to `step` does
        (`Chain.has_release`: a profile made with ``release=True``)."""
        self.blocks = as_blocks(blocks)
        self.loss_fn = loss_fn
        self.input_grad = input_grad
        self.release = release
        self._releasing = bool(release)  # the mode of the step being run
        #: the parameters a step gives gradients, zeroed (or set to None) before each run and compared by the
        #: gradient check: the blocks' and a loss module's own (``"loss.<name>"``, `with_loss_parameters`)
        self.params = with_loss_parameters(parameters_of(self.blocks), loss_fn)
        self._runs: list[RngStates] | None = None  # the RNG states of the runs of the `step` in progress
        #: the random stages of the `step` in progress (`random_stages`), None outside a step (found during a run)
        self._random: set[int] | None = None
        #: the RNG states the last run of the last `step` kept (what its allocator saw of them), or None
        self.last_rng: RngStates | None = None
        #: stage -> two copies of its block's buffers, made for the first run recomputing it (`buffer_copies_for`)
        self._buffer_copies: dict[int, BufferCopies] = {}

    @property
    def length(self) -> int:
        """Number of stages L+1 of the chain (blocks F^0..F^L, the loss included)."""
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
        independent: bool = False,
    ) -> ChainStepResult:
        """Execute `schedule` as one training step and measure it (a `ChainStepResult`).

        `seed` (when not None) seeds the RNGs before each run so that runs and the plain
        reference (`reference_step` with the same seed) draw the same dropout masks. On CPU,
        memory and time are measured in separate runs (the memory tracker slows operations
        down); the gradients returned are those of the last run. `trace` records per-op memory;
        `time_repeats` runs are timed and their median reported (ms); `clock` (CPU only):
        "wall" or "thread" (`models.memory.cpu_clock`); `independent` (CPU): one more run under
        `models.alloc_probe.AllocatorProbe`, reported as ``independent_peak``.
        """
        ops = list(schedule.ops if isinstance(schedule, Schedule) else schedule)
        device = inputs.device
        predicted_peak = predicted_makespan = tracker_peak = None
        sim_steps = None
        self._releasing = self.release if self.release is not None else bool(chain is not None and chain.has_release())
        if chain is not None:
            if chain.length != self.length:
                raise InputError(f"chain has {chain.length} stages, the model {self.length} blocks", field="chain")
            # this executor frees a_L once the loss's forward has run: the loss's o_b[L] as it incurs it;
            # B(i) charges o_b when it releases early, o_bh when it holds its inputs
            charged = released_loss_chain(chain if self._releasing else chain.held(), ops)
            predicted_peak, predicted_makespan, tracker_peak, sim_steps = predict_both(
                simulate, charged, ops, functools.partial(tracker_chain, release=self._releasing))
        else:
            self.check_schedule(ops)
        self._runs = []  # every run's RNG states until the step ends: freeing one would blur the probe of the next
        try:
            self._random = self.random_stages(inputs, recomputed(ops))  # before the runs: in none of their windows
            m = measure_runs(lambda watch, tr: self._run(ops, inputs, target, seed, watch, tr, clock),
                             cuda=device.type == "cuda", measure_memory=measure_memory, measure_time=measure_time,
                             trace=trace, time_repeats=time_repeats, sim_steps=sim_steps, independent=independent,
                             modules=step_modules(self.blocks, self.loss_fn))
        finally:
            runs, self._runs, self._random = self._runs, None, None
        self.last_rng = runs[-1] if runs else None
        if chain is not None and runs:  # the allocator also holds the RNG states of random recomputed stages
            with_states = chain_peak_with_rng_states(simulate(charged, ops), ops, runs[-1])
            if with_states != predicted_peak:  # the tracker does not see them: its prediction stays without
                tracker_peak, predicted_peak = tracker_peak or predicted_peak, with_states
        grads = {name: p.grad.detach().clone() for name, p in self.params.items() if p.grad is not None}
        return ChainStepResult(loss=m.loss, grads=grads, input_grad=m.input_grad, peak_memory=int(m.peak),
                               time_ms=m.time_ms, time_runs_ms=m.times_ms, device=str(device), memory_method=m.method,
                               predicted_peak=predicted_peak, predicted_makespan=predicted_makespan, trace=m.traces,
                               independent_peak=m.independent_peak, independent_method=m.independent_method,
                               tracker_predicted_peak=tracker_peak, rng_states=counted_rng_states(self.last_rng))

    def check_schedule(self, ops: list[Op]) -> None:
        """`ops` replay on a chain of this executor's length with unit sizes (the check
        `models.chain.training.ScheduledChain` makes without a chain), else `InputError`."""
        from memsched.models.chain.training import _unit_chain

        replay = simulate(_unit_chain(self.length), ops)
        if not replay.valid:
            raise InputError(f"not a valid schedule of this chain: {replay.violation}", field="schedule")

    def _run(self, ops: list[Op], inputs: torch.Tensor, target: Any, seed: int | None, watch: bool,
             trace: bool, clock: str = "wall") -> tuple[float, torch.Tensor | None, int, list[OpTrace], float]:
        """One run: (loss, delta_0, peak bytes, per-op trace, elapsed ms)."""
        device = inputs.device
        if watch or probed_run():  # gradients allocated before the step: the memory measured leaves them out
            zero_grads(self.params.values())
        else:  # a timed run: autograd creates them, as a plain step with zero_grad(set_to_none=True)
            for p in self.params.values():
                p.grad = None
        if seed is not None:
            torch.manual_seed(seed)
        state = self.new_run_state(ops, device)
        meter = StepMeter(device, watch=watch, trace=trace, clock=clock)
        with meter:
            state.acts[0] = inputs.detach().clone()
            for op in ops:
                with meter.op(str(op)):
                    self.apply(op, state, target)
            meter.stop_clock()
            loss = state.loss
            input_grad = state.grads.pop(0, None)
            state.clear()
        return loss, input_grad, meter.peak, meter.traces, meter.elapsed_ms

    def random_stages(self, inputs: torch.Tensor, stages: Iterable[int]) -> set[int]:
        """The stages among `stages` whose block draws random numbers on `inputs`: a plain forward
        without grad of blocks 0..max(stages) on a copy of `inputs`, each of `stages` between two
        copies of the generators' state (`models.measure.generator_states`). The blocks' buffers
        (BatchNorm's statistics) and the generators are put back afterwards; nothing it allocated
        stays (transient: at most a forward without grad)."""
        wanted = set(stages)
        if not wanted:
            return set()
        device = inputs.device
        found: set[int] = set()
        saved = snapshot_buffers(self.blocks)
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
                x = inputs.detach().clone()
                for i in range(max(wanted) + 1):
                    before = generator_states(device) if i in wanted else None
                    x = block_output(self.blocks[i], i, self.blocks[i](x))
                    if before is not None and not same_generator_states(before, generator_states(device)):
                        found.add(i)
                del x
        finally:
            restore_buffers(saved)
        return found

    def new_run_state(self, ops: list[Op], device: torch.device) -> ChainRunState:
        """A run state whose RNG keeps the states of the random stages `ops` computes more than once
        (those `random_stages` found during a `step`; else found during the run), with the copies of the
        buffers of those stages' blocks (`buffer_copies_for`: made now for a stage without them, before
        the step is measured, and kept by the executor)."""
        again = recomputed(ops)
        # the stand-ins of F_all's outputs (whatever their dtype, not only the parameters'), made before the
        # step is measured: without one, a_L would stay alive through the loss the prediction frees it in
        make_standins(device, [p.dtype for p in self.params.values() if p.is_floating_point()])
        rng = RngStates(device, sorted(again), self._random)
        if self._runs is not None:  # a measured step: its prediction adds the states this run keeps
            self._runs.append(rng)
        return ChainRunState(rng, self.buffer_copies_for(again))

    def buffer_copies_for(self, stages: Iterable[int]) -> dict[int, BufferCopies]:
        """This executor's copies of the buffers of its blocks (`buffer_copies`), made now for those
        of `stages` that have none yet and kept for later runs: a run state takes them before the step,
        so that a step's first forwards and recomputations, which refill them in place, allocate nothing
        (the allocator probe's window of a `step` opens before the run state is made, after a warm-up
        run). At most two copies of the buffers of every block (bytes: twice the blocks' buffer bytes, a
        few per BatchNorm channel), like the stand-ins outside every measured window."""
        missing = set(stages) - set(self._buffer_copies)
        self._buffer_copies.update(buffer_copies(self.blocks, missing))
        return self._buffer_copies

    def train_step(self, schedule: Schedule | Sequence[Op], inputs: torch.Tensor, target: Any
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One training step under `schedule`, as ``loss_fn(blocks(inputs), target).backward()``
        does it: parameter gradients accumulate into ``.grad`` (nothing is zeroed, nothing
        measured). Returns (the loss, detached; delta_0 when `input_grad`, else None). Runs with
        autograd on whatever the caller's grad mode (under ``torch.no_grad()`` too: a training step
        computes gradients)."""
        ops = list(schedule.ops if isinstance(schedule, Schedule) else schedule)
        state = self.new_run_state(ops, inputs.device)
        state.keep_loss = True
        try:
            state.acts[0] = inputs.detach().clone()
            with torch.enable_grad():
                for op in ops:
                    self.apply(op, state, target)
            return state.loss_tensor, state.grads.pop(0, None)
        finally:
            state.clear()

    def take_output(self, s: RunState) -> torch.Tensor:
        """a_L as the ``Loss`` op reads it, no longer referenced by the run state `s`: the
        standalone a_L, else the data of the tape abar_L (which stays for B(L-1))."""
        L = self.length
        a = s.acts.pop(L, None)
        held = s.tape_outputs.pop(L, None)
        if a is None:
            a = held if held is not None else s.available(L)
        return a

    # ----------------------------------------------------------------- operations
    def apply(self, op: Op, s: RunState, target: Any) -> None:
        """Run one chain operation on the run state `s` (the rules table of the module docstring)."""
        kind, i = op
        L = self.length
        if kind == F_ALL:
            x = s.available(i).detach()
            if (x.is_floating_point() or x.is_complex()) and (i > 0 or self.input_grad):
                x.requires_grad_(True)
            # a_i read from the live tape abar_i lives until B(i-1), after B(i): abar_{i+1} may hold it (no hooks)
            slot = None if (i not in s.acts and i in s.tapes) else InputSlot()
            hooks = input_hooks(x, slot) if slot is not None else contextlib.nullcontext()
            with kept_buffers(self.blocks[i], i, s), s.rng.forward(i), torch.enable_grad(), hooks:
                y = block_output(self.blocks[i], i, forward_block(self.blocks[i], i, x))
            if slot is not None and y is not x:  # the tape keeps no storage of a_i
                release_input(x)
            # a stand-in (of y's dtype, whatever the weights'): the loss may free a_L (`loss_backward`), B(i)
            # a_{i+1} (`release_backward`)
            one = standin_for(y) if (i == L - 1 or self._releasing) and y.requires_grad else None
            if one is not None:
                s.tape_outputs[i + 1] = y.detach()
                y = _Handle.apply(y, one)
            s.tapes[i + 1] = (x, y)
            if slot is not None:
                input_slots(s)[i + 1] = slot
        elif kind in (F_CK, F_N):
            x = s.available(i)
            # a_i may be needed again: refuse in-place changes to it
            with kept_buffers(self.blocks[i], i, s), s.rng.forward(i), torch.no_grad():
                y = block_output(self.blocks[i], i, forward_block(self.blocks[i], i, x))
            s.acts[i + 1] = y.detach()
            if kind == F_N:
                s.acts.pop(i, None)
        elif kind == LOSS:
            # held (no early release): a_L's data that the loss cannot free stays until B(L-1) ends
            data = None if self._releasing or not isinstance(s, ChainRunState) else s.tape_outputs.get(L)
            ref = None if data is None else StorageWeakRef(data.untyped_storage())
            del data
            box = [self.take_output(s)]  # loss_backward holds the last reference
            loss, delta = loss_backward(self.loss_fn, box, target)
            kept = None if ref is None else surviving_storage(ref)
            if kept is not None and isinstance(s, ChainRunState):
                s.kept_outputs[L] = kept
            if s.keep_loss:  # a training step returns it; a measured one keeps no extra bytes
                s.loss_tensor = loss.detach()
            s.loss = float(loss)
            s.grads[L] = delta
        elif kind == B:
            x, y = s.tapes.pop(i + 1)
            with tape_input(x, input_slots(s).pop(i + 1, None), s.available(i)):  # the a_i resident now
                if self._releasing:  # no reference to a_{i+1}'s data or delta_{i+1} left here
                    s.tape_outputs.pop(i + 1, None)
                    box = [y]
                    del y
                    if box[0].requires_grad:
                        release_backward(box, [s.grads.pop(i + 1)])
                    box.clear()
                elif y.requires_grad and s.grads.get(i + 1) is not None:  # else no gradient reaches a_{i+1}
                    torch.autograd.backward(y, s.grads[i + 1])
            s.grads[i] = x.grad if x.requires_grad else None
            s.grads.pop(i + 1, None)
            s.tape_outputs.pop(i + 1, None)
            if isinstance(s, ChainRunState):
                s.kept_outputs.pop(i + 1, None)
            s.acts.pop(i, None)
        else:
            raise ValueError(f"unknown operation {op}")


def recomputed(ops: Sequence[Any]) -> set[int]:
    """The stages that `ops` (chain or offloading operations) compute more than once."""
    counts = Counter(op[1] for op in ops if len(op) == 2 and op[0] in FORWARD_KINDS)
    return {i for i, c in counts.items() if c > 1}


# --------------------------------------------------------------------- reference and checks
def reference_step(blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, inputs: torch.Tensor, target: Any,
                   *, seed: int | None = 0) -> tuple[float, dict[str, torch.Tensor], torch.Tensor | None]:
    """A plain forward/backward through all blocks: (loss, parameter gradients, input gradient). The
    parameter gradients are the blocks' and those of `loss_fn` when it is a module with parameters
    (``"loss.<name>"``, `with_loss_parameters`), each computed from None and set to None again after."""
    blocks = as_blocks(blocks)
    params = with_loss_parameters(parameters_of(blocks), loss_fn)
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


def execute(blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, schedule: Schedule, inputs: torch.Tensor,
            target: Any, *, chain: Chain | None = None, seed: int = 0, check: bool = True,
            rtol: float = 1e-4, atol: float = 1e-6, **options: Any) -> tuple[StepResult, bool | None]:
    """Run one step under `schedule` and, when `check`, compare with plain autograd.

    Returns (result, grad_check) where grad_check is True when every parameter gradient (and
    the input's) matches the plain forward/backward with the same seed, None when unchecked.
    """
    return checked_step(ChainExecutor(blocks, loss_fn), schedule, inputs, target, seed=seed, check=check, rtol=rtol,
                        atol=atol, chain=chain, **options)


def checked_step(executor: ChainExecutor, schedule: Any, inputs: torch.Tensor, target: Any, *, seed: int, check: bool,
                 rtol: float, atol: float, **options: Any) -> tuple[Any, bool | None]:
    """``executor.step(schedule, inputs, target, seed=seed, **options)`` (any executor over a chain
    of blocks: this one, the offloading one) and, when `check`, whether its gradients match plain
    autograd at the same seed (`check_gradients`; None when unchecked)."""
    before = snapshot_buffers(step_modules(executor.blocks, executor.loss_fn)) if check else []
    result = executor.step(schedule, inputs, target, seed=seed, **options)
    if not check:
        return result, None
    with from_buffers(before):  # plain autograd from the buffers the step started from
        return result, check_gradients(result, executor.blocks, executor.loss_fn, inputs, target, seed=seed,
                                       rtol=rtol, atol=atol)[0]


def check_gradients(result: StepResult, blocks: Sequence[nn.Module], loss_fn: LossFn, inputs: torch.Tensor,
                    target: Any, *, seed: int | None, rtol: float = 1e-4, atol: float = 1e-6) -> tuple[bool, str]:
    """(every parameter gradient and the input gradient of `result` match a plain
    forward/backward of `blocks` with the same seed (`measure.gradient_close` with rtol, atol), message)."""
    _, ref, ref_input = reference_step(blocks, loss_fn, inputs, target, seed=seed)
    return gradients_match(result.grads, result.input_grad, ref, ref_input, rtol=rtol, atol=atol)
