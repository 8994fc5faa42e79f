"""Execute a general-graph schedule for real: one training step of a network, node by node.

The graph is the training graph `models.graph.export` makes of the network (forward nodes F_v
= the fx nodes that allocate a storage, the loss, backward nodes B_v); `models.graph.plan`
maps each forward node back onto its fx node. A schedule is a sequence of node computations,
repeats allowed (`solvers.graph.simulator`); each computation makes a copy of the node's
output that lives until the last step that consumes it (the simulator's ``retention_end``),
then the executor drops it, as the simulator does:

==========  ================================================================================
node        what the executor does
==========  ================================================================================
F_v         the fx node's op on the latest copies of its producers (view and static fx nodes
            between them are evaluated again; they hold no new storage). Under
            ``torch.no_grad()``, unless this computation is the one B_v will use (B_v comes
            after it and before the next F_v): then with autograd, on leaves
            ``a_u.detach().requires_grad_()`` of every producer u, keeping the node's *tape*:
            the ``GradientEdge`` of its outputs and what autograd saved. Saved tensors that
            are (views of) a producer's storage are not kept: a
            ``torch.autograd.graph.saved_tensors_hooks`` handle rebuilds them at B_v from the
            producer's copy then resident (B_v depends on F_u in the Checkmate model), and the
            leaves hold no storage between F_v and B_v. The output and internal saved tensors
            (masks, statistics, pooling indices) stay with the tape.
loss        ``loss_fn`` on leaves of the network output's producers; its copy is the gradient
            of the loss with respect to each of them (a ``loss_fn`` module's own parameters
            requiring grad get theirs accumulated into ``.grad``).
B_v         ``torch.autograd.grad`` over F_v's tape with the incoming gradient of v's outputs
            (the sum of what the latest copies of B_w, for the consumers w of v, and of the
            loss yield for v), with respect to the leaves of v's producers and v's parameters
            that require grad when it runs (`check_trainable` rejects one unfrozen since the plan
            whose node has no B_v);
            parameter gradients are accumulated into ``.grad`` (once per node, even when a
            schedule computes B_v again); its copy is the gradient for each producer u that
            has a B_u. The tape is dropped after the last B_v that uses it.
==========  ================================================================================

Randomness (`FileOrderRng`): every computation of a random forward node (one that draws
random numbers: dropout), the first and each recomputation, runs under the RNG state (CPU, and
CUDA for a CUDA input) it sees in a plain forward in the file's (torch.fx) order from the
generator's state at the start of the step; the loss runs under the state after the last
random node, and the step leaves the generator as a plain forward, loss and backward leave it.
So dropout masks, and gradients, are those of plain autograd
(`models.chain.executor.reference_step`) whatever order the schedule computes them in (DTR,
``dtr-orders`` and CP-SAT often compute a later branch first). The states come from a pre-pass
before the step (`GraphExecutor.rng_order`): the first time for a training mode and input
shape, a plain forward without grad in file order on the step's input (each value dropped after
its last consumer; buffers put back), which finds the random nodes and their input shapes; after
that only the random nodes, run on zero inputs of those shapes (dropout's draws depend on the
shape only). A random node whose draws on zero inputs differ from those on its real ones
(data-dependent randomness) makes every pre-pass the plain forward (exact, a forward's cost).
`step` runs the plain forward once before its measured runs: neither the pre-pass's time nor its
memory is in the step's measurement (its transient memory is at most a forward without grad in
file order and a copy of one node's buffers, `GraphExecutor.mutated_buffers`; it holds nothing
after it but the states, a CPU state 5,056 B per random node, kept
from before the step like the parameters, and not counted); `train_step` pays it in every step
(the random nodes' ops once more on zero inputs). Within the step, setting a state costs a copy
of it per random computation; a schedule that computes a random node after the loss keeps one
more CPU state, the generator's after the loss, from the loss to the end of the step (the
allocator's prediction adds it).

Memory (bytes): `models.measure.StepMeter` (``torch.cuda.max_memory_allocated`` above the
pre-step level on CUDA, `models.memory.LiveTensorTracker` on CPU; `models.alloc_probe` as the
independent CPU method). As in the graph model, parameters, their gradients (allocated before
the step) and the network input are not counted. The simulator charges each copy its node's
cost_ram from its step to its last consumer; a run also holds, while a node runs, its
*temporaries* (a parameter's gradient before it is added into ``.grad``, the intermediate
gradients of the loss, kernel scratch buffers for the allocator). A graph exported with
measured costs (`models.graph.profile`) records them per node and method in
``meta["temporaries"]`` (their maximum over methods is the node's ``workspace`` W_v, which the
simulator and the solvers charge); the predicted peak is the maximum over steps of the
simulator's memory less W_v plus the method's temporaries of the step's node
(`GraphExecutor.predicted_memory`), where a forward computation that keeps no tape is charged its
output and its temporaries without grad, and a tape's saved tensors only until the last B_v that
uses it (the graph's ``meta["untaped"]``, ``meta["untaped_temporaries"]``, ``meta["released"]``;
`GraphExecutor.untaped_excess`); the allocator's also charges the bytes a tape keeps that only the
allocator sees (a Python scalar autograd saves as a 0-dim tensor, 8 B: ``meta["allocator_tape"]``,
`GraphExecutor.allocator_tape_bytes`). The temporaries are profiled on a node's first computation; a
later computation of B_v (or of the loss) makes no parameter gradient, so its prediction leaves the
bytes of the gradients of v's parameters (the loss: ``loss_fn``'s) out of them
(`GraphExecutor.rerun_gradient_bytes`): exact when the first computation's temporaries peak with
those gradients alive (autograd returns them together with the producers' gradients: one op per
node), otherwise the measurement may exceed it by up to those bytes. The solvers still charge W_v
on every computation (an upper bound). Time: ms, measured in separate runs, by default on the clock
the graph was profiled with (the wall clock instead of the thread's CPU time when torch runs more than
one thread; `memsched run` passes its own); the prediction is the simulator's makespan in the graph's
time unit (``meta["units"]["time"]``: ms for ``cost="measured"``, MFLOP for ``cost="flops"``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch
from memsched.models.buffers import (
    BufferSnapshot,
    buffer_entries,
    from_buffers,
    restore_buffers,
    snapshot_buffers,
    step_modules,
)
from memsched.models.chain.executor import LossFn, as_blocks, parameters_of, with_loss_parameters
from memsched.models.graph.plan import Plan, Step, build_plan, plan_structure
from memsched.models.measure import (
    OpTrace,
    RngState,
    StepMeter,
    StepResult,
    generator_states,
    measure_runs,
    same_generator_states,
    set_generator_states,
    with_rng_states,
    zero_grads,
)
from memsched.models.memory import CLOCKS, storage_key
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph, GraphSchedule, simulate
from torch import nn
from torch.autograd.graph import get_gradient_edge, saved_tensors_hooks
from torch.utils._pytree import tree_flatten, tree_unflatten

__all__ = ["GraphExecutor", "FileOrderRng", "execute_graph", "shared_storage_excess", "BufferCopies",
           "last_computations"]


def shared_storage_excess(graph: Graph, seq: Sequence[int], retention_end: Sequence[int]) -> list[int]:
    """Per step of `seq`: the bytes the simulator charges twice or more because copies share one
    storage (the graph's ``meta["passes"]``, `models.graph.profile`: a backward node whose copy
    hands on a predecessor's gradient unchanged is charged that storage again).

    A pass-through computed at step s takes the storage of the latest copy c of its predecessor
    (the simulator's rule); a chain of pass-throughs leads to the copy that made the storage (its
    root). The storage is real once while any copy of its group lives (copy s from s to
    ``retention_end[s]``), so the excess at a step is its bytes times (live copies - 1). Graphs
    without ``meta["passes"]`` have none."""
    recorded = graph.meta.get("passes") or {}
    if not recorded:
        return [0] * len(seq)
    names = {name: v for v, name in enumerate(graph.names)}
    passes = {names[v]: [(names[p], int(b)) for p, b in src.items()] for v, src in recorded.items()}
    excess = np.zeros(len(seq) + 1, dtype=np.int64)
    latest: dict[int, int] = {}
    root_of: dict[tuple[int, int], int] = {}  # (copy, bytes) -> the copy that made that storage
    members: dict[tuple[int, int], list[int]] = {}  # (root copy, bytes) -> the pass-through copies sharing it
    for s, v in enumerate(seq):
        for p, b in passes.get(v, ()):
            c = latest.get(p)
            if c is not None:
                root = root_of.get((c, b), c)
                root_of[(s, b)] = root
                members.setdefault((root, b), []).append(s)
        latest[v] = s
    for (root, b), copies in members.items():
        live = np.zeros(len(seq) + 1, dtype=np.int64)
        for c in (root, *copies):
            live[c] += 1
            live[retention_end[c] + 1] -= 1
        excess += b * np.maximum(np.cumsum(live) - 1, 0)
    return [int(e) for e in excess[:len(seq)]]


def _flat(value: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):  # the common case: no pytree walk per node
        return [value]
    return tree_flatten(value)[0]


def _grad_capable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


@dataclass(frozen=True)
class _Meta:
    """Shape, dtype and device of a tensor argument of a random node (its stand-in: zeros)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device


@dataclass
class _RandomOp:
    """A forward node that drew random numbers in the plain forward: its arguments with each
    tensor replaced by its `_Meta` (flat leaves and pytree spec) and whether its op on zeros of
    those shapes draws exactly as on its real arguments (then a pre-pass may replay it so)."""

    v: int
    leaves: list[Any]
    spec: Any
    replayable: bool = False

    def replay(self, step: Step) -> None:
        """Run the node's op on zeros of its arguments' shapes, without grad (the output is
        dropped; buffers of its module are put back)."""
        args, kwargs = tree_unflatten([torch.zeros(m.shape, dtype=m.dtype, device=m.device) if isinstance(m, _Meta)
                                       else m for m in self.leaves], self.spec)
        assert step.fn is not None
        saved = snapshot_buffers(_modules_of(step.fn))
        try:
            with torch.no_grad():
                step.fn(*args, **kwargs)
        finally:
            restore_buffers(saved)


def _modules_of(fn: Any) -> list[nn.Module]:
    """The modules whose buffers calling `fn` may update: `fn` itself, or those it closes over
    (`models.graph.plan.node_callable`'s no-grad wrapper)."""
    if isinstance(fn, nn.Module):
        return [fn]
    cells = getattr(fn, "__closure__", None) or ()
    return [c.cell_contents for c in cells if isinstance(c.cell_contents, nn.Module)]


#: A buffer a forward node may update: (module, buffer name, None) for a module's buffer (read from
#: the module when used: a forward may rebind it), (None, "", tensor) for a loose one (`Step.buffers`)
_BufferRef = tuple[nn.Module | None, str, torch.Tensor | None]


def _candidate_buffers(step: Step) -> list[_BufferRef]:
    """The buffers computing `step` may update: those of its modules (`_modules_of`) and those it
    is handed as arguments (`Step.buffers`), each tensor once."""
    assert step.fn is not None
    refs: list[_BufferRef] = []
    seen: set[int] = set()
    for mod, name, buf in buffer_entries(_modules_of(step.fn)):
        seen.add(id(buf))
        refs.append((mod, name, None))
    for t in step.buffers:
        if id(t) not in seen:
            seen.add(id(t))
            refs.append((None, "", t))
    return refs


def _buffer(ref: _BufferRef) -> torch.Tensor:
    """The tensor `ref` names now."""
    mod, name, t = ref
    if mod is not None:
        buf = mod._buffers[name]
        assert buf is not None
        return buf
    assert t is not None
    return t


def _snapshot(refs: Sequence[_BufferRef]) -> BufferSnapshot:
    """A copy of each buffer of `refs` (`restore_buffers` puts them back: values, and bindings)."""
    out: BufferSnapshot = []
    for mod, name, t in refs:
        buf = _buffer((mod, name, t))
        out.append((mod, name, buf, buf.detach().clone()))
    return out


def _snapshot_bytes(refs: Sequence[_BufferRef]) -> int:
    """Bytes a `_snapshot` of `refs` allocates (one contiguous copy per buffer)."""
    total = 0
    for ref in refs:
        buf = _buffer(ref)
        total += buf.numel() * buf.element_size()
    return total


@dataclass
class BufferCopies:
    """The two copies of the buffers a forward node's computation changes (`_snapshot`; BatchNorm's
    statistics, spectral_norm's ``u`` and ``v``: bytes b_v, a few per channel, each) that recomputing
    the node takes (`GraphExecutor._forward`), made before a run and refilled in place during it.

    Invariant inside a run: ``before`` holds the buffers as the node's first computation of the run
    found them (the values plain autograd's single forward reads); ``after`` holds them as that
    computation left them while a recomputation runs."""

    #: the buffers before the node's first computation in the run (each recomputation runs on these)
    before: BufferSnapshot
    #: the buffers after it (put back after each recomputation)
    after: BufferSnapshot


def _fits(refs: Sequence[_BufferRef], saved: BufferSnapshot) -> bool:
    """Whether `saved` (a `_snapshot`) was made of the buffers `refs` name now: the same tensors, of the
    same shapes and dtypes (a forward that rebinds a buffer makes it stale)."""
    return len(refs) == len(saved) and all(
        _buffer(ref) is buf and buf.shape == values.shape and buf.dtype == values.dtype
        for ref, (_, _, buf, values) in zip(refs, saved))


def _refill(refs: Sequence[_BufferRef], saved: BufferSnapshot) -> bool:
    """Copy the current values of the buffers `refs` into `saved` in place (nothing allocated); False,
    nothing copied, when `saved` no longer fits them (`_fits`)."""
    if not _fits(refs, saved):
        return False
    with torch.no_grad():
        for _, _, buf, values in saved:
            values.copy_(buf)
    return True


def last_computations(seq: Sequence[int], forward: Iterable[int]) -> dict[int, int]:
    """Forward node (of `forward`) that `seq` computes more than once -> the step of its last
    computation (`_forward` holds the copy of its buffers from before its first computation until then)."""
    ops = set(forward)
    count: dict[int, int] = {}
    last: dict[int, int] = {}
    for s, v in enumerate(seq):
        if v in ops:
            count[v] = count.get(v, 0) + 1
            last[v] = s
    return {v: s for v, s in last.items() if count[v] > 1}


def _changed(refs: Sequence[_BufferRef], before: BufferSnapshot, versions: Sequence[int]) -> list[_BufferRef]:
    """Those of `refs` (snapshotted in `before` at the version counters `versions`, in order) that a
    computation since changed: its module rebound it, its version counter moved, or its values
    differ (BatchNorm's kernels update the running statistics without moving their counters, so
    values are compared too; a NaN counts as a change, which only costs a copy)."""
    out: list[_BufferRef] = []
    for ref, (_, _, buf, values), version in zip(refs, before, versions):
        if _buffer(ref) is not buf or buf._version != version or not torch.equal(buf, values):
            out.append(ref)
    return out


@dataclass
class FileOrderRng:
    """The RNG state each random forward node sees in a plain forward in the file's (torch.fx)
    order (`states`: node index -> (CPU state, CUDA state or None), from the generator's state
    at the start of the step) and the state after the last of them (`final`, None when no node
    draws). `method`: how they were found, "forward" (a plain forward without grad of the step's
    input) or "replay" (the random nodes alone on zero inputs of their shapes)."""

    states: dict[int, RngState]
    final: RngState | None
    method: str


class _StepRng:
    """One run's use of a `FileOrderRng`: each random node's computation under its state, the
    loss under the final state, and at the end the generator as a plain step leaves it (the
    state after the last loss, kept from then when a random node is computed after it)."""

    def __init__(self, order: FileOrderRng, device: torch.device, seq: Sequence[int], loss: int) -> None:
        self.order, self.device = order, device
        last = max((s for s, v in enumerate(seq) if v == loss), default=len(seq))
        self.keep_at = last if any(v in order.states for v in seq[last + 1:]) else None
        self.after_loss: RngState | None = None

    @contextlib.contextmanager
    def forward(self, v: int) -> Iterator[None]:
        """Forward node v: under its recorded state when it is random (the generator then moves on)."""
        state = self.order.states.get(v)
        if state is not None:
            set_generator_states(state, self.device)
        yield

    @contextlib.contextmanager
    def loss(self, s: int) -> Iterator[None]:
        """The loss at step s: under the state after the last random node of the plain forward."""
        if self.order.final is not None:
            set_generator_states(self.order.final, self.device)
        yield
        if s == self.keep_at:
            self.after_loss = generator_states(self.device)

    def finish(self) -> None:
        """After the last step: the generator's state after the loss, when a random node ran since."""
        if self.after_loss is not None:
            set_generator_states(self.after_loss, self.device)


@dataclass
class _SavedRef:
    """A saved tensor that is (a view of) output `pos` of producer `u`: rebuilt at backward."""

    u: int
    pos: int
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


@dataclass
class Tape:
    """What F_v keeps for B_v: the gradient edges of its outputs (by flat position), the leaves
    of its producers (u -> [(position, leaf)]) and the parameters its op uses."""

    edges: dict[int, Any]
    leaves: dict[int, list[tuple[int, torch.Tensor]]]
    params: list[nn.Parameter]
    uses: int = 0


@dataclass
class _Run:
    """One run: the latest copy of each node (graph index -> (step made, value)), the tapes,
    which B_v have accumulated their parameter gradients, and the loss."""

    rng: _StepRng
    copies: dict[int, tuple[int, Any]] = field(default_factory=dict)
    tapes: dict[int, Tape] = field(default_factory=dict)
    accumulated: set[int] = field(default_factory=set)
    received: set[int] = field(default_factory=set)  # ids of the parameters a B_v (or the loss) gave a gradient
    computed: set[int] = field(default_factory=set)  # the forward nodes computed once already
    #: forward node -> the buffers its computation changes (`GraphExecutor.mutated_buffers`; None:
    #: not known for these training modes, so every buffer it may change)
    mutated: dict[int, list[_BufferRef]] | None = None
    #: forward node computed more than once in the run -> the step of its last computation (`last_computations`)
    last: dict[int, int] = field(default_factory=dict)
    #: forward node -> the copies of the buffers its computation changes (`GraphExecutor.buffer_copies_for`,
    #: made before the run and refilled in place during it)
    buffers: dict[int, BufferCopies] = field(default_factory=dict)
    loss: float = float("nan")
    #: a training step's loss as the loss function returned it (detached: its dtype and device); a
    #: measured run keeps none (no extra bytes in its peak)
    keep_loss: bool = False
    loss_tensor: torch.Tensor | None = None


@dataclass
class _DryNode:
    """What forward node v's op does with autograd (`GraphExecutor._dry_forward`): the producers
    whose storage it saves for its backward (B_v rebuilds them from their copies), the producers
    its outputs give a gradient (B_v's copy holds one for each), and whether it saves its own
    output or an internal tensor (kept by its tape until B_v)."""

    saved: list[int] = field(default_factory=list)
    grads: set[int] = field(default_factory=set)
    tape: bool = False


def _key(t: Any) -> int | None:
    """`storage_key` of a tensor, None for anything else (or a tensor without a storage)."""
    if not isinstance(t, torch.Tensor):
        return None
    try:
        return storage_key(t)
    except (RuntimeError, NotImplementedError):
        return None


def _check_links(graph: Graph, reads: dict[int, list[int]]) -> None:
    """Every graph node v in `reads` (the forward nodes, the loss, the backward nodes) has a link
    u -> v from each node u whose copy it reads (`Plan.inputs_of`: the network's own dependencies;
    `GraphExecutor._backward_reads`). A graph whose links miss one would let a schedule drop u
    before v runs: ValueError naming the first missing link (and how many), before anything runs."""
    missing = [(u, v) for v, producers in reads.items() for u in producers if u not in graph.preds[v]]
    if not missing:
        return
    u, v = missing[0]
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    raise ValueError(f"graph {graph.name!r} has no link {graph.names[u]} -> {graph.names[v]}{more}, though "
                     f"{graph.names[v]} reads {graph.names[u]}: its edges are not the network's")


class GraphExecutor:
    """Runs schedules of `graph` (exported from `blocks` by `models.graph.export`) on `blocks`
    followed by ``loss_fn(output, target)``; `example_input` has the shapes of the inputs
    the schedules will run on (it computes the plan's static values). A graph whose nodes are not
    the network's, or whose links miss a value a forward node, the loss or a backward node reads
    (`_check_links`, `_backward_reads`), raises ValueError here."""

    def __init__(self, blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, graph: Graph,
                 example_input: torch.Tensor) -> None:
        self.blocks = as_blocks(blocks)
        self.loss_fn = loss_fn
        self.graph = graph
        self._every_param = parameters_of(self.blocks, frozen=True)
        self.plan: Plan = build_plan(self.blocks, graph, example_input)
        names = {name: i for i, name in enumerate(graph.names)}
        if "loss" not in names:
            raise ValueError(f"graph {graph.name!r} has no node named 'loss'")
        self.loss = names["loss"]
        self.bwd_of = {v: names[f"grad_{s.name}"] for v, s in self.plan.ops.items() if f"grad_{s.name}" in names}
        self.fwd_of = {b: v for v, b in self.bwd_of.items()}
        self.producers = {v: self.plan.inputs_of(s) for v, s in self.plan.ops.items()}
        output_producers = self.plan.inputs_of(Step(-1, "output", args=(self.plan.output,)))
        self._candidates = {v: _candidate_buffers(s) for v, s in self.plan.ops.items()}
        # training modes -> (the plan traced in them, its `_candidates`): a forward reading
        # ``self.training`` traces to other constants in another mode (`use_modes`)
        self._plans: dict[tuple[bool, ...], tuple[Plan, dict[int, list[_BufferRef]]]] = {
            self._modes(): (self.plan, self._candidates)}
        _check_links(graph, {**self.producers, self.loss: output_producers,
                             **self._backward_reads(example_input, output_producers)})
        self.labels = [str(i) for i in graph.ids]
        # ids of the parameters that required grad when the plan was made (the graph's backward nodes follow them)
        self._planned_grad = {id(p) for p in self.params.values()}
        # (training modes, input shape, dtype, device) -> the random nodes a plain forward found
        self._random_ops: dict[tuple[Any, ...], list[_RandomOp]] = {}
        # training modes -> forward node -> the buffers a plain forward saw its computation change
        self._mutated: dict[tuple[bool, ...], dict[int, list[_BufferRef]]] = {}
        #: forward node -> the copies of its buffers for recomputing it, kept across runs (`buffer_copies_for`)
        self._buffer_copies: dict[int, BufferCopies] = {}

    def _backward_reads(self, x: torch.Tensor, outputs: Sequence[int]) -> dict[int, list[int]]:
        """B_v -> the nodes whose copies it reads (`_check_links`): the loss when v is an output's
        producer (`outputs`; the export always links it), B_w of each consumer w whose outputs give
        v a gradient (`_incoming`), F_u of each producer u whose storage v's op saves (rebuilt from
        u's copy: `_compute`'s unpack) and F_v when the op saves its output or an internal tensor
        (its tape keeps them). The last three come from one forward with autograd
        (`_dry_forward`), run only when the graph lacks one of the links they could need (every
        producer and consumer: never for an export's own ``deps="checkmate"`` graph)."""
        consumers: dict[int, list[int]] = {}
        for w, producers in self.producers.items():
            for u in producers:
                consumers.setdefault(u, []).append(w)
        loss_of = {v: [self.loss] if v in outputs else [] for v in self.bwd_of}
        could = {b: [*loss_of[v], *(self.bwd_of[w] for w in consumers.get(v, ()) if w in self.bwd_of),
                     *self.producers[v], v] for v, b in self.bwd_of.items()}
        if all(u in self.graph.preds[b] for b, needs in could.items() for u in needs):
            return {}
        dry = self._dry_forward(x)
        reads: dict[int, list[int]] = {}
        for v, b in sorted(self.bwd_of.items(), key=lambda vb: vb[1]):
            needs = list(loss_of[v])
            if dry is not None:
                needs += [self.bwd_of[w] for w in consumers.get(v, ()) if w in self.bwd_of and v in dry[w].grads]
                needs += dry[v].saved + ([v] if dry[v].tape else [])
            reads[b] = needs
        return reads

    def _dry_forward(self, x: torch.Tensor) -> dict[int, _DryNode] | None:
        """Per forward node, what its op does with autograd (`_DryNode`), from a forward of `x` in
        file order, each op on leaves of its producers' values as `_compute` runs it (each value
        dropped after its last consumer; the blocks' buffers and the generators put back). None
        when that forward raises: the links it would check are then not checked (the step reports
        such a failure itself)."""
        last_use: dict[int, int] = {}
        for v in self.plan.ops:
            for u in self.producers[v]:
                last_use[u] = v
        run = _Run(_StepRng(FileOrderRng({}, None, "forward"), x.device, [], self.loss))
        params = {_key(p) for p in self._every_param.values()}
        found: dict[int, _DryNode] = {}
        saved_buffers = snapshot_buffers(self.blocks)
        try:
            with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
                for v in self.plan.ops:
                    found[v] = self._dry_node(run, v, x, params)
                    for u in self.producers[v]:
                        if last_use[u] == v:
                            del run.copies[u]
                    if v not in last_use:
                        run.copies.pop(v, None)
        except Exception:  # noqa: BLE001 (any op may raise on a forward with autograd; the check is best effort)
            return None
        finally:
            restore_buffers(saved_buffers)
        return found

    def _dry_node(self, run: _Run, v: int, x: torch.Tensor, params: set[int | None]) -> _DryNode:
        """Forward node v's op with autograd on leaves of its producers' copies in `run` (`_dry_forward`;
        `params`: the storage keys of the blocks' parameters); leaves its output's copy in `run`."""
        step = self.plan.ops[v]
        assert step.fn is not None
        values, leaves = self._leaves(run, self.producers[v])
        owner = {k: u for u in self.producers[v] for t in _flat(values[u]) if (k := _key(t)) is not None}
        saved: set[int] = set()

        def pack(t: torch.Tensor) -> torch.Tensor:
            k = _key(t)
            if k is not None:
                saved.add(k)
            return t

        with torch.enable_grad(), saved_tensors_hooks(pack, lambda t: t):
            args = self.plan.resolve((step.args, step.kwargs), lambda u: values[u], x)
            out = step.fn(*args[0], **args[1])
        inputs = {_key(t) for t in tree_flatten(args)[0]} | params
        inputs |= {_key(_buffer(ref)) for ref in self._candidates[v]}
        node = _DryNode(saved=[u for u in self.producers[v] if any(owner.get(k) == u for k in saved)],
                        tape=any(k not in inputs for k in saved))
        req = [t for t in _flat(out) if isinstance(t, torch.Tensor) and t.requires_grad]
        wrt = [(u, leaf) for u, ls in leaves.items() for _, leaf in ls]
        if req and wrt:
            grads = torch.autograd.grad(req, [leaf for _, leaf in wrt], [torch.ones_like(t) for t in req],
                                        allow_unused=True)
            node.grads = {u for (u, _), g in zip(wrt, grads) if g is not None}
        run.copies[v] = (0, _detached(out))
        return node

    # ----------------------------------------------------------------- parameters
    @property
    def params(self) -> dict[str, nn.Parameter]:
        """The blocks' distinct parameters that require grad now, named ``"<block>.<name>"``
        (`models.chain.executor.parameters_of`, read at every call: frozen ones are left out)."""
        return {name: p for name, p in self._every_param.items() if p.requires_grad}

    @property
    def checked_params(self) -> dict[str, nn.Parameter]:
        """The parameters whose gradients a step returns and the gradient check compares: `params` and
        the loss module's own that require grad now (``"loss.<name>"``, `models.chain.executor.loss_parameters`),
        as `models.chain.executor.reference_step` names them."""
        return with_loss_parameters(self.params, self.loss_fn)

    @property
    def trained_params(self) -> set[int]:
        """ids of the parameters a step gives a gradient: those requiring grad now of the nodes
        that have a backward node, and of `loss_fn` (read at every step: freezing one after the
        plan is made is honoured)."""
        found = {id(p) for v in self.bwd_of for p in self.plan.ops[v].params if p.requires_grad}
        return found | {id(p) for p in self.loss_params()}

    def loss_params(self) -> list[nn.Parameter]:
        """The parameters requiring grad of `loss_fn` when it is a module (a learnable head, a
        temperature): the loss gives them their gradients, as ``loss.backward()`` does."""
        if not isinstance(self.loss_fn, nn.Module):
            return []
        return [p for p in self.loss_fn.parameters() if p.requires_grad]

    def check_trainable(self) -> None:
        """InputError naming ``model`` when a parameter requires grad now that did not when the
        plan was made and a forward node without a backward node uses it: the graph has no node
        that computes its gradient (plain autograd would give one), so the graph must be
        profiled and solved again."""
        for v, step in self.plan.ops.items():
            if v in self.bwd_of:
                continue
            for p in step.params:
                if p.requires_grad and id(p) not in self._planned_grad:
                    name = next(n for n, q in self._every_param.items() if q is p)
                    raise InputError(f"parameter {name} requires grad but was frozen when the graph was profiled, and "
                                     f"node {self._name(v)!r} has no backward node to compute its gradient: profile "
                                     "and solve the graph again after unfreezing it", field="model")

    # ----------------------------------------------------------------- one step
    def step(self, schedule: GraphSchedule | Sequence[int], inputs: torch.Tensor, target: Any, *, seed: int | None = 0,
             measure_memory: bool = True, measure_time: bool = True, trace: bool = False, time_repeats: int = 1,
             clock: str | None = None, independent: bool = False) -> StepResult:
        """Execute `schedule` (a `GraphSchedule` of node ids, or node indices) as one training
        step and measure it (options as `models.chain.executor.ChainExecutor.step`; `clock`
        defaults to the graph's profiling clock ``meta["clock"]``, else "wall", and to "wall" when
        that is "thread" but torch runs more than one thread now, whose work the calling thread's
        CPU time does not see, as `models.run.default_clock` picks). The graph
        simulator's replay plus each step's profiled temporaries (`predicted_memory`) gives the
        predicted peaks (bytes: ``predicted_peak`` the allocator's on CPU when the graph records
        them, ``tracker_predicted_peak`` the tracker's) and its makespan the predicted time (graph
        time unit); an invalid schedule raises ValueError before anything runs. Random nodes run
        under the RNG states of a plain forward in file order from `seed` (`FileOrderRng`; with
        `seed` None from the generator's state now, the same in every measured run), found by a
        plain forward without grad before the measured runs (`rng_order`)."""
        if clock is None:
            clock = str(self.graph.meta.get("clock", "wall")).split(" ")[0]
            clock = clock if clock in CLOCKS and (clock != "thread" or torch.get_num_threads() == 1) else "wall"
        seq = schedule.indices(self.graph) if isinstance(schedule, GraphSchedule) else [int(v) for v in schedule]
        sim, frees, tape_at, retain_at = self.prepare(seq, inputs)
        if seed is not None:
            torch.manual_seed(seed)
        rng = self.rng_order(inputs, exact=True)  # before every measured run: in none of their windows
        m = measure_runs(lambda watch, tr: self._run(seq, frees, tape_at, retain_at, inputs, target, seed, watch, tr,
                                                     clock, rng=rng),
                         cuda=inputs.device.type == "cuda", measure_memory=measure_memory, measure_time=measure_time,
                         trace=trace, time_repeats=time_repeats, independent=independent,
                         modules=step_modules(self.blocks, self.loss_fn))
        cuda = inputs.device.type == "cuda"  # the measured peak is then the allocator's
        tracker_memory = self.predicted_memory(seq, sim, "tracker")
        alloc_memory = self.predicted_memory(seq, sim, "allocator", random=rng.states)
        if len(m.traces) == len(seq):
            for t, mem in zip(m.traces, alloc_memory if cuda else tracker_memory):
                t.predicted_during = int(mem)
        grads = {name: p.grad.detach().clone() for name, p in self.checked_params.items() if p.grad is not None}
        extra = ({"tracker_predicted_peak": None if cuda else int(max(tracker_memory, default=0))}
                 if "tracker_predicted_peak" in {f.name for f in fields(StepResult)} else {})
        return StepResult(loss=m.loss, grads=grads, input_grad=None, peak_memory=int(m.peak), time_ms=m.time_ms,
                          time_runs_ms=m.times_ms, device=str(inputs.device), memory_method=m.method,
                          predicted_peak=int(max(alloc_memory if extra or cuda else tracker_memory, default=0)),
                          predicted_makespan=float(sim.makespan), trace=m.traces,
                          independent_peak=m.independent_peak, independent_method=m.independent_method, **extra)

    def predicted_memory(self, seq: list[int], sim: Any, method: str = "tracker",
                         random: Iterable[int] | None = None) -> list[int]:
        """Per step of `seq`: the simulator's memory (bytes) less the node's workspace plus its temporaries as
        profiled by `method` ("tracker" or "allocator", the graph's ``meta["temporaries"]``, see
        `models.graph.profile`; none when the graph has no such record; on a node's later computation less
        the parameter gradients only its first one makes, `rerun_gradient_bytes`), less the storages it
        charges twice (`shared_storage_excess`); for the allocator also the tapes' bytes the tracker does not
        see (`allocator_tape_bytes`) and the CPU RNG state
        (``meta["rng_state_bytes"]``) a run keeps from the last loss on when it computes a random
        node after it (`_StepRng`). `random`: the random nodes (indices; default the graph's
        ``meta["random_nodes"]``). The states of the random nodes are made before the step
        (`rng_order`) and are not in it, nor are the copies of the buffers a recomputation uses
        (`buffer_copies_for`, `buffer_copy_bytes`)."""
        meta = self.graph.meta
        records = meta.get("temporaries", {})
        temps = records.get(method, records.get("tracker", {}))  # no allocator record: the tracker's
        work = self.graph.workspace  # the simulator charged W_v; the method's own temporaries replace it
        shared = shared_storage_excess(self.graph, seq, sim.retention_end)  # charged twice by the simulator
        untaped = self.untaped_excess(seq, sim.retention_end)  # tapes dropped before their copies
        skipped = self.rerun_gradient_bytes(seq)  # a re-run makes no parameter gradient (`_backward`, `_loss`)
        unseen = self.allocator_tape_bytes(seq) if method == "allocator" else [0] * len(seq)
        kept = [int(mem) - int(work[v]) - extra - less + hidden
                for v, mem, extra, less, hidden in zip(seq, sim.memory, shared, untaped, unseen)]
        out = [k + max(0, int(temps.get(self.graph.names[v], 0)) - skip) for v, k, skip in zip(seq, kept, skipped)]
        released = (meta.get("released") or {}).get(method, {})
        if released:  # a backward node that drops its tape frees the tape's saved tensors as it runs
            _, retain_at = self._tape_plan(list(seq))
            for s, v in enumerate(seq):
                if v in self.fwd_of and s not in retain_at:
                    out[s] -= max(0, int(released.get(self.graph.names[v], 0)))
        plain = meta.get("untaped_temporaries") or {}
        if plain:  # a computation without a tape: its output and the temporaries profiled without grad
            outputs, plain_temps = meta.get("untaped") or {}, plain.get(method, plain.get("tracker", {}))
            for s in self.tapeless_steps(seq):
                name = self.graph.names[seq[s]]
                if name in outputs:
                    less = max(0, int(self.graph.cost_ram[seq[s]]) - max(0, int(outputs[name])))
                    out[s] = kept[s] - less + max(0, int(plain_temps.get(name, 0)))
        if method == "allocator":  # the state after the loss, kept when a random node is computed after it
            found = {self.graph.names.index(name) for name in meta.get("random_nodes", ())} if random is None \
                else set(random)
            last = max((s for s, v in enumerate(seq) if v == self.loss), default=len(seq))
            if any(v in found for v in seq[last + 1:]):
                state = int(meta.get("rng_state_bytes", 0))
                # taken when the loss is done, its temporaries freed: at its step, on top of what it keeps only
                out[last] = max(out[last], kept[last] + state)
                out = with_rng_states(list(enumerate(out)), [(last + 1, state)])
        return out

    def tapeless_steps(self, seq: Sequence[int]) -> list[int]:
        """The steps of `seq` that compute a forward node without a tape (no B_v uses the computation:
        `_tape_plan`; it runs under ``torch.no_grad()``)."""
        tape_at, _ = self._tape_plan(list(seq))
        return [s for s, v in enumerate(seq) if v in self.plan.ops and s not in tape_at]

    def untaped_excess(self, seq: Sequence[int], retention_end: Sequence[int]) -> list[int]:
        """Per step of `seq`: the bytes the simulator charges for forward copies' tapes that no longer
        exist. The graph's ``cost_ram`` of a forward node v is what its computation with a tape keeps
        (with ``ram="tape"``: its output and the tape's internal saved tensors, such as dropout's mask,
        layer norm's statistics, attention's weights); ``meta["untaped"]`` (`models.graph.profile`)
        records the output's bytes where they are less. The simulator charges the whole copy from its
        step s to its last consumer (`retention_end`); the executor holds the tape's part only until
        the last B_v that uses the tape (`_tape_plan`; it is dropped there), and not at all after a
        computation that keeps no tape (one no B_v uses: recomputed before B_v). Step s itself is
        not in it: `predicted_memory` charges a tapeless computation its output and its temporaries
        profiled without grad (dropout still draws its mask). Graphs without the record: zeros."""
        recorded = self.graph.meta.get("untaped") or {}
        if not recorded:
            return [0] * len(seq)
        tape_end = self._tape_ends(seq)
        excess = np.zeros(len(seq) + 1, dtype=np.int64)
        for s, v in enumerate(seq):
            name = self.graph.names[v]
            if v not in self.plan.ops or name not in recorded:
                continue
            held = min(tape_end.get(s, s), retention_end[s])  # the tape's part lives to here
            if held >= retention_end[s]:
                continue
            less = max(0, int(self.graph.cost_ram[v]) - max(0, int(recorded[name])))
            excess[held + 1] += less
            excess[retention_end[s] + 1] -= less
        return [int(e) for e in np.cumsum(excess[:len(seq)])]

    def _tape_ends(self, seq: Sequence[int]) -> dict[int, int]:
        """Forward step of `seq` -> the last backward step that uses the tape it makes (the steps that keep
        a tape, `_tape_plan`, and only those, are in it)."""
        tape_end: dict[int, int] = {}
        latest: dict[int, int] = {}
        for s, v in enumerate(seq):
            if v in self.plan.ops:
                latest[v] = s
            elif v in self.fwd_of and self.fwd_of[v] in latest:
                tape_end[latest[self.fwd_of[v]]] = s
        return tape_end

    def allocator_tape_bytes(self, seq: Sequence[int]) -> list[int]:
        """Per step of `seq`: the bytes of the tapes alive then that the CPU allocator sees and the tracker (so
        ``cost_ram``) does not, the graph's ``meta["allocator_tape"]`` (`models.graph.profile`): a Python
        scalar in an op with a tape (``h * 1.1``) is saved by autograd as a 0-dim double tensor (8 B) made by
        no op the tracker sees. A computation with a tape keeps them from its step to the last B_v that uses
        the tape (that step included: autograd frees them after the op's gradient is made); they are charged
        from the step after it (at its own step the allocator's temporaries, its rise above ``cost_ram``,
        hold them already); one without a tape keeps none. Zeros without the record."""
        recorded = self.graph.meta.get("allocator_tape") or {}
        out = np.zeros(len(seq) + 1, dtype=np.int64)
        if recorded:
            for s, end in self._tape_ends(seq).items():
                nbytes = max(0, int(recorded.get(self.graph.names[seq[s]], 0)))
                out[s + 1] += nbytes
                out[end + 1] -= nbytes
        return [int(b) for b in np.cumsum(out[:len(seq)])]

    def rerun_gradient_bytes(self, seq: Sequence[int]) -> list[int]:
        """Per step of `seq`: the bytes of parameter gradients that the step's node's profiled temporaries
        hold and this computation does not make (0 on a node's first computation). A backward node B_v
        (or the loss) gives its parameters their gradients on its first computation only (`_backward`,
        `_loss`): a later one computes the gradients for its producers alone, so the gradients of v's
        parameters that require grad now (the loss: `loss_fn`'s), each a fresh tensor of its parameter's
        size in the first computation's temporaries, are not among its temporaries."""
        done: set[int] = set()
        out = []
        for node in seq:
            params: list[nn.Parameter] = []
            if node in done:
                if node in self.fwd_of:
                    params = [p for p in self.plan.ops[self.fwd_of[node]].params if p.requires_grad]
                elif node == self.loss:
                    params = self.loss_params()
            done.add(node)
            distinct = {id(p): p for p in params}.values()
            out.append(sum(p.numel() * p.element_size() for p in distinct))
        return out

    def prepare(self, seq: list[int], x: torch.Tensor) -> tuple[Any, dict[int, list[int]], set[int], set[int]]:
        """(the simulator's replay, step -> the steps whose copies are dropped after it, the forward
        steps that keep a tape, the backward steps that retain theirs) of the node indices `seq`
        before a run on the batch `x`; ValueError when the simulator rejects `seq`; InputError when
        the blocks' training modes now trace to another graph than the plan's (`use_modes`, which
        this calls first)."""
        self.use_modes(x)
        sim = simulate(self.graph, seq)
        if not sim.valid:
            raise ValueError(f"invalid graph schedule: {sim.violation}")
        tape_at, retain_at = self._tape_plan(seq)
        frees: dict[int, list[int]] = {}
        for s, e in enumerate(sim.retention_end):
            frees.setdefault(int(e), []).append(s)
        return sim, frees, tape_at, retain_at

    def _tape_plan(self, seq: list[int]) -> tuple[set[int], set[int]]:
        """(forward steps that keep a tape: the last F_v before a B_v; backward steps after which
        another B_v uses the same tape, so autograd must retain it)."""
        tape_at: set[int] = set()
        retain_at: set[int] = set()
        last_fwd: dict[int, int] = {}
        last_bwd: dict[int, int] = {}  # v -> the previous B_v step on the current tape
        for s, node in enumerate(seq):
            if node in self.plan.ops:
                last_fwd[node] = s
                last_bwd.pop(node, None)
            elif node in self.fwd_of:
                v = self.fwd_of[node]
                if v in last_fwd:
                    tape_at.add(last_fwd[v])
                if v in last_bwd:
                    retain_at.add(last_bwd[v])
                last_bwd[v] = s
        return tape_at, retain_at

    def train_step(self, schedule: GraphSchedule | Sequence[int], inputs: torch.Tensor, target: Any) -> torch.Tensor:
        """One training step under `schedule`, nothing measured: parameter gradients accumulate
        into ``.grad`` as ``loss.backward()`` leaves them (missing ones are allocated first), and
        the RNG draws are those of a plain forward in file order from the generator's state
        (`rng_order`, its pre-pass in the step). Returns the loss, detached, as the loss function
        returned it (its dtype and device). An invalid schedule raises ValueError before anything runs."""
        seq = schedule.indices(self.graph) if isinstance(schedule, GraphSchedule) else [int(v) for v in schedule]
        _, frees, tape_at, retain_at = self.prepare(seq, inputs)
        kept: list[torch.Tensor] = []
        self._run(seq, frees, tape_at, retain_at, inputs, target, None, False, False, "wall", accumulate=True,
                  kept_loss=kept)
        return kept[0]

    def _run(self, seq: list[int], frees: dict[int, list[int]], tape_at: set[int], retain_at: set[int],
             x: torch.Tensor, target: Any, seed: int | None, watch: bool, trace: bool, clock: str,
             probe: Any = None, accumulate: bool = False, rng: FileOrderRng | None = None,
             kept_loss: list[torch.Tensor] | None = None) -> tuple[float, None, int, list[OpTrace], float]:
        """One step of `seq`; `probe` (`models.graph.profile`), when given, is told when each
        step starts (``start(s)``), when its node is computed (``computed(s, node, run, meter)``,
        before the copies it ends are dropped) and when it ends (``stop(s)``). `accumulate`:
        add to the parameter gradients already there instead of zeroing them. `rng`: the random
        nodes' states (`rng_order` from the generator's state after seeding); by default made
        here, before the step's measurement window. `kept_loss`, when given, receives the loss
        tensor (detached: a training step returns it; a measured run keeps no extra bytes). A step
        that raises leaves the gradients it allocated None again."""
        self.check_trainable()
        fresh = self._prepare_grads(accumulate)
        try:
            return self._run_steps(seq, frees, tape_at, retain_at, x, target, seed, watch, trace, clock, probe, rng,
                                   fresh, kept_loss)
        except BaseException:
            for p in fresh:
                p.grad = None
            raise

    def _run_steps(self, seq: list[int], frees: dict[int, list[int]], tape_at: set[int], retain_at: set[int],
                   x: torch.Tensor, target: Any, seed: int | None, watch: bool, trace: bool, clock: str,
                   probe: Any, rng: FileOrderRng | None, fresh: list[nn.Parameter],
                   kept_loss: list[torch.Tensor] | None = None) -> tuple[float, None, int, list[OpTrace], float]:
        """`_run` after the gradients are allocated (`fresh`: those it allocated)."""
        if seed is not None:
            torch.manual_seed(seed)
        if rng is None:
            rng = self.rng_order(x)
        last = last_computations(seq, self.plan.ops)
        run = _Run(_StepRng(rng, x.device, seq, self.loss), mutated=self._mutated.get(self._modes()), last=last,
                   buffers=self.buffer_copies_for(last), keep_loss=kept_loss is not None)
        meter = StepMeter(x.device, watch=watch, trace=trace, clock=clock)
        with meter:
            for s, node in enumerate(seq):
                if probe is not None:
                    probe.start(s)
                with meter.op(self.labels[node]):
                    if node in self.plan.ops:
                        self._forward(run, s, node, x, s in tape_at)
                    elif node == self.loss:
                        with run.rng.loss(s):
                            self._loss(run, s, x, target)
                    elif node in self.fwd_of:
                        self._backward(run, s, node, s in retain_at)
                    else:
                        raise ValueError(f"node {self.graph.ids[node]!r} is neither a forward, the loss nor a backward")
                    if probe is not None:
                        probe.computed(s, node, run, meter)
                    for made in frees.get(s, ()):
                        key = seq[made]
                        if run.copies.get(key, (None,))[0] == made:
                            del run.copies[key]
                if probe is not None:
                    probe.stop(s)
            meter.stop_clock()
            loss = run.loss
            if kept_loss is not None and run.loss_tensor is not None:
                kept_loss.append(run.loss_tensor)
            run.copies.clear()
            run.tapes.clear()
            run.rng.finish()
        for p in fresh:
            if id(p) not in run.received:
                p.grad = None
        return loss, None, meter.peak, meter.traces, meter.elapsed_ms

    # ----------------------------------------------------------------- randomness
    def rng_order(self, x: torch.Tensor, *, exact: bool = False) -> FileOrderRng:
        """The RNG state each random forward node sees in a plain forward of `x` in file order,
        from the generator's state now, which it leaves as it is (`FileOrderRng`). The first call
        for a training mode and input shape, every call with `exact`, and every call when a random
        node's draws depend on its inputs' values: a plain forward without grad in file order (each
        value dropped after its last consumer, the blocks' buffers put back), which finds the
        random nodes; otherwise only those nodes, on zero inputs of their shapes. Its memory is
        transient (nothing but the states stays)."""
        self.use_modes(x)
        devices = [x.device] if x.device.type == "cuda" else []
        key = self._mode_key(x)
        known = self._random_ops.get(key)
        with torch.random.fork_rng(devices=devices):
            if known is not None and not exact and all(r.replayable for r in known):
                return self._replay(known, x.device)
            order, self._random_ops[key] = self._plain_forward(x)
            return order

    def _modes(self) -> tuple[bool, ...]:
        """The training mode of every module of the blocks, in module order."""
        return tuple(m.training for b in self.blocks for m in b.modules())

    def use_modes(self, x: torch.Tensor) -> None:
        """Make `plan` the one traced in the blocks' training modes now, tracing and building it
        (its static values from a no-grad forward of `x`, the batch about to run, of the example's
        shapes) the first time these modes are seen; no batch is kept for this (on a GPU the
        example would hold a batch of memory for the executor's life). fx bakes ``self.training``
        into the traced code as a constant (``F.dropout(h, p, self.training)``), so a plan traced in
        one mode computes that mode's values in any other. InputError naming ``training`` when the
        trace in these modes is another graph (``if self.training: x = dropout(x)`` adds a node)
        than the plan's, which the schedule was solved on."""
        modes = self._modes()
        if modes not in self._plans:
            structure = plan_structure(self.blocks, self.graph)
            if structure != self.plan.structure:
                raise InputError(f"the network traces to another graph in {_describe_modes(modes)} "
                                 f"({_structure_difference(structure, self.plan.structure)}); build the "
                                 "ScheduledGraph (and its plan) in the mode you run it in", field="training")
            plan = build_plan(self.blocks, self.graph, x.detach())
            self._plans[modes] = plan, {v: _candidate_buffers(s) for v, s in plan.ops.items()}
        self.plan, self._candidates = self._plans[modes]

    def _mode_key(self, x: torch.Tensor) -> tuple[Any, ...]:
        """What decides which nodes draw random numbers and how many: the modules' training modes
        and the input's shape, dtype and device."""
        return self._modes(), tuple(x.shape), x.dtype, x.device

    def mutated_buffers(self, v: int) -> list[_BufferRef]:
        """The buffers that forward node v's computation changes in the blocks' training modes now,
        as the last plain forward of the pre-pass (`rng_order`) saw them: those of its modules and
        arguments (`_candidate_buffers`) whose values, version counters or bindings it changed
        (BatchNorm's statistics in training mode; none for a fixed buffer such as a projection
        matrix, or in eval mode). Before any pre-pass in these modes: every candidate."""
        known = self._mutated.get(self._modes())
        return self._candidates[v] if known is None else known.get(v, [])

    def buffer_copies_for(self, nodes: Iterable[int]) -> dict[int, BufferCopies]:
        """This executor's `BufferCopies` of the buffers that each forward node of `nodes` changes
        (`mutated_buffers`, as the blocks' training modes are now), made now for a node that has none
        or whose copies no longer fit its buffers (rebound, reshaped), and kept for later runs: `_run`
        takes them before its measured window opens (and the allocator probe's opens after a warm-up
        run), so a step's first computations and recomputations, which refill them in place, allocate
        nothing for them (`_forward`). Bytes held: `buffer_copy_bytes`."""
        for v in nodes:
            refs = self.mutated_buffers(v)
            if not refs:
                continue
            have = self._buffer_copies.get(v)
            if have is None or not (_fits(refs, have.before) and _fits(refs, have.after)):
                self._buffer_copies[v] = BufferCopies(_snapshot(refs), _snapshot(refs))
        return self._buffer_copies

    def buffer_copy_bytes(self, seq: Sequence[int]) -> int:
        """Bytes of the copies of buffers (`buffer_copies_for`) a run of `seq` uses: 2 b_v for each forward
        node v that `seq` computes more than once, b_v the bytes of the buffers its computation changes
        (`mutated_buffers`: BatchNorm's statistics, spectral_norm's ``u`` and ``v``; a few bytes per
        channel). Made before the step and kept by the executor, like the parameters: not in the step's
        measured or predicted memory."""
        return sum(2 * _snapshot_bytes(self.mutated_buffers(v)) for v in last_computations(seq, self.plan.ops))

    def _replay(self, known: list[_RandomOp], device: torch.device) -> FileOrderRng:
        """The states of the random nodes `known` (in file order) from the generator's state now:
        each node's op is run on zero inputs of its arguments' shapes (it moves the generator on)."""
        states: dict[int, RngState] = {}
        for r in known:
            states[r.v] = generator_states(device)
            r.replay(self.plan.ops[r.v])
        return FileOrderRng(states, generator_states(device) if states else None, "replay")

    def _plain_forward(self, x: torch.Tensor) -> tuple[FileOrderRng, list[_RandomOp]]:
        """A plain forward of `x` without grad, node by node in file order: the state before each
        node that moves the generator, and those nodes with their arguments' shapes."""
        device = x.device
        last_use: dict[int, int] = {}
        for v in self.plan.ops:
            for u in self.producers[v]:
                last_use[u] = v
        values: dict[int, Any] = {}
        states: dict[int, RngState] = {}
        found: list[_RandomOp] = []
        mutated: dict[int, list[_BufferRef]] = {}
        saved = snapshot_buffers(self.blocks)
        try:
            with torch.no_grad():
                for v, step in self.plan.ops.items():
                    assert step.fn is not None
                    args = self.plan.resolve((step.args, step.kwargs), values.__getitem__, x)
                    refs = self._candidates[v]
                    kept = _snapshot(refs)  # which buffers the op changes: compared after it
                    versions = [buf._version for _, _, buf, _ in kept]
                    before = generator_states(device)
                    out = step.fn(*args[0], **args[1])
                    after = generator_states(device)
                    changed = _changed(refs, kept, versions)
                    if changed:
                        mutated[v] = changed
                    del kept
                    if not same_generator_states(before, after):
                        states[v] = before
                        found.append(self._random_op(v, step, args, before, after, device))
                    for u in self.producers[v]:
                        if last_use[u] == v:
                            del values[u]
                    if v in last_use:
                        values[v] = out
                    del out, args
        finally:
            restore_buffers(saved)
        self._mutated[self._modes()] = mutated
        return FileOrderRng(states, generator_states(device) if states else None, "forward"), found

    def _random_op(self, v: int, step: Step, args: Any, before: RngState, after: RngState,
                   device: torch.device) -> _RandomOp:
        """Random node v, its arguments `args` as shapes, replayable when its op on zeros of them
        moves the generator from `before` to `after` as on `args`; leaves the generator at `after`."""
        leaves, spec = tree_flatten(args)
        op = _RandomOp(v, [_Meta(tuple(t.shape), t.dtype, t.device) if isinstance(t, torch.Tensor) else t
                           for t in leaves], spec)
        set_generator_states(before, device)
        try:
            op.replay(step)
            op.replayable = same_generator_states(generator_states(device), after)
        except Exception:  # noqa: BLE001 (an op that zeros do not suit: its draws may depend on values)
            op.replayable = False
        set_generator_states(after, device)
        return op

    def _prepare_grads(self, accumulate: bool) -> list[nn.Parameter]:
        """Allocate (zeros) before the step the gradients of the parameters a backward node may
        give one, so that the step's memory does not count them (as the simulator does not).
        Returns those that had none (all of them unless `accumulate`): a step leaves them None
        again when no B_v gives them a gradient, as ``loss.backward()`` does. Without
        `accumulate` (a measured step, compared with `reference_step`) the other parameters'
        gradients are dropped."""
        trained = self.trained_params
        if not accumulate:
            for p in self.params.values():
                if id(p) not in trained:
                    p.grad = None
        own = {id(p) for p in self.params.values()}
        params = [*self.params.values(), *(p for p in self.loss_params() if id(p) not in own)]
        fresh = [p for p in params if id(p) in trained and (p.grad is None or not accumulate)]
        zero_grads([p for p in params if id(p) in trained], keep=accumulate)
        return fresh

    # ----------------------------------------------------------------- nodes
    def _name(self, v: int) -> str:
        return self.graph.names[v] if self.graph.names and self.graph.names[v] else str(self.graph.ids[v])

    def _value(self, run: _Run, u: int) -> Any:
        copy = run.copies.get(u)
        if copy is None:
            raise RuntimeError(f"node {self._name(u)!r} is not resident")
        return copy[1]

    def _leaves(self, run: _Run, producers: list[int]
                ) -> tuple[dict[int, Any], dict[int, list[tuple[int, torch.Tensor]]]]:
        """Per producer u: its value with leaves requiring grad (when u has a B_u) and the leaves."""
        values: dict[int, Any] = {}
        leaves: dict[int, list[tuple[int, torch.Tensor]]] = {}
        for u in producers:
            value = self._value(run, u)
            if isinstance(value, torch.Tensor):  # the common case: no pytree walk per node
                if u in self.bwd_of and _grad_capable(value):
                    leaf = value.detach().requires_grad_(True)
                    leaves[u] = [(0, leaf)]
                    value = leaf
                values[u] = value
                continue
            flat, spec = tree_flatten(value)
            if u in self.bwd_of:
                out = []
                for pos, t in enumerate(flat):
                    if _grad_capable(t):
                        leaf = t.detach().requires_grad_(True)
                        leaves.setdefault(u, []).append((pos, leaf))
                        t = leaf
                    out.append(t)
                flat = out
            values[u] = tree_unflatten(flat, spec)
        return values, leaves

    def _forward(self, run: _Run, s: int, v: int, x: torch.Tensor, keep_tape: bool) -> None:
        """F_v at step s, so that the buffers evolve as in plain autograd's single forward. Of the
        buffers the node's computation changes (`mutated_buffers`: of its modules, or handed to it
        as arguments, `Step.buffers`: ``F.batch_norm(x, self.running_mean, ...)``; none for a buffer
        the op only reads, such as a fixed projection matrix): the first computation updates them as
        the plain forward does, after copying them into ``before`` when the run computes v again
        (`BufferCopies`, refilled in place); every later one (a recomputation) copies them into
        ``after``, runs on ``before`` (the values the plain forward read: spectral_norm's power
        iteration starts from the same ``u``, so its weight, output and gradients are the first
        computation's) and puts ``after`` back, also when it raises, so a step leaves them as plain
        training does. The copies are made before the run (`buffer_copies_for`): no step allocates
        them, unless a forward rebound a buffer since (then the copy is made anew)."""
        refs = self._candidates[v] if run.mutated is None else run.mutated.get(v, [])
        copies = run.buffers.get(v) if refs else None
        if v not in run.computed:
            run.computed.add(v)
            if copies is not None and v in run.last and not _refill(refs, copies.before):
                copies.before = _snapshot(refs)
            self._compute(run, s, v, x, keep_tape)
            return
        if not refs:
            self._compute(run, s, v, x, keep_tape)
            return
        before: BufferSnapshot | None = None  # without copies (not foreseen): runs on the buffers as they are
        if copies is None:
            after = _snapshot(refs)
        else:
            if not _refill(refs, copies.after):
                copies.after = _snapshot(refs)
            before, after = copies.before, copies.after
        try:
            if before is not None:
                restore_buffers(before)
            self._compute(run, s, v, x, keep_tape)
        finally:
            restore_buffers(after)

    def _compute(self, run: _Run, s: int, v: int, x: torch.Tensor, keep_tape: bool) -> None:
        step = self.plan.ops[v]
        assert step.fn is not None
        producers = self.producers[v]
        if not keep_tape:
            with run.rng.forward(v), torch.no_grad():
                args = self.plan.resolve((step.args, step.kwargs), lambda u: self._value(run, u), x)
                out = step.fn(*args[0], **args[1])
            run.copies[v] = (s, _detached(out))
            return
        values, leaves = self._leaves(run, producers)
        where = {storage_key(leaf): (u, pos) for u, ls in leaves.items() for pos, leaf in ls}
        # A producer without a backward node (no leaves) is saved as itself: the tape would pin
        # its copy after the schedule drops it. B_v depends on it, so it is resident again then.
        for u in producers:
            for pos, t in enumerate(_flat(values[u])):
                if isinstance(t, torch.Tensor) and not t.requires_grad:
                    try:
                        where.setdefault(storage_key(t), (u, pos))
                    except (RuntimeError, NotImplementedError):
                        pass

        def pack(t: torch.Tensor) -> Any:
            try:
                key = storage_key(t)
            except (RuntimeError, NotImplementedError):
                return t
            if key not in where:
                return t
            u, pos = where[key]
            return _SavedRef(u, pos, t.dtype, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))

        def unpack(h: Any) -> torch.Tensor:
            if not isinstance(h, _SavedRef):
                return h
            base = _flat(self._value(run, h.u))[h.pos].detach()
            if base.dtype != h.dtype:
                base = base.view(h.dtype)
            return base.as_strided(h.size, h.stride, h.offset)

        with run.rng.forward(v), torch.enable_grad(), saved_tensors_hooks(pack, unpack):
            args = self.plan.resolve((step.args, step.kwargs), lambda u: values[u], x)
            out = step.fn(*args[0], **args[1])
        flat = _flat(out)
        edges = {pos: get_gradient_edge(t) for pos, t in enumerate(flat)
                 if isinstance(t, torch.Tensor) and t.requires_grad}
        params = list(step.params)
        run.copies[v] = (s, _detached(out))
        del out, flat, args
        for ls in leaves.values():
            for _, leaf in ls:
                leaf.data = _empty(leaf)  # no storage until B_v
        run.tapes[v] = Tape(edges, leaves, params)

    def _loss(self, run: _Run, s: int, x: torch.Tensor, target: Any) -> None:
        sources = [u for u in self.graph.preds[self.loss] if u in self.plan.ops]
        values, leaves = self._leaves(run, sources)
        own = self.loss_params() if self.loss not in run.accumulated else []  # once, from the loss alone
        run.accumulated.add(self.loss)
        with torch.enable_grad():
            out = self.plan.resolve(self.plan.output, lambda u: values[u], x)
            loss = self.loss_fn(out, target)
            wrt = [leaf for ls in leaves.values() for _, leaf in ls]
            grads = torch.autograd.grad(loss, wrt + own, allow_unused=True) if wrt or own else ()
        run.loss = float(loss.detach())
        if run.keep_loss:
            run.loss_tensor = loss.detach()
        for p, g in zip(own, grads[len(wrt):]):
            if g is not None:
                p.grad.add_(g)  # allocated by _prepare_grads before the step
                run.received.add(id(p))
        run.copies[self.loss] = (s, _by_producer(leaves, grads[:len(wrt)]))

    def _incoming(self, run: _Run, b: int, v: int, n_out: int) -> list[torch.Tensor | None]:
        """The gradient of each flat output of v: the sum over the latest copies of the
        backward nodes (and the loss) that feed B_v."""
        total: list[torch.Tensor | None] = [None] * n_out
        for p in self.graph.preds[b]:
            if p != self.loss and p not in self.fwd_of:
                continue
            copy = run.copies.get(p)
            if copy is None:
                raise RuntimeError(f"node {self._name(p)!r} is not resident")
            for pos, g in enumerate(copy[1].get(v, ())):
                if g is not None and pos < n_out:  # past n_out: an output without a gradient edge
                    total[pos] = g if total[pos] is None else total[pos] + g
        return total

    def _backward(self, run: _Run, s: int, b: int, retain: bool) -> None:
        v = self.fwd_of[b]
        tape = run.tapes.get(v)
        if tape is None:
            raise RuntimeError(f"B of {self._name(v)!r}: no tape (its forward was not kept)")
        n_out = 1 + max(tape.edges, default=-1)
        incoming = self._incoming(run, b, v, n_out)
        outs = [(tape.edges[pos], g) for pos, g in enumerate(incoming) if pos in tape.edges and g is not None]
        for u, ls in tape.leaves.items():
            if u not in run.copies:  # not saved by the op (deps="saved" has no F_u -> B_v edge then)
                continue
            flat = _flat(run.copies[u][1])
            for pos, leaf in ls:
                leaf.data = flat[pos].detach()
        wrt = [leaf for ls in tape.leaves.values() for _, leaf in ls]
        accumulate = v not in run.accumulated
        params = [p for p in tape.params if p.requires_grad] if accumulate else []  # frozen now: no gradient
        grads: Sequence[torch.Tensor | None] = ()
        if outs and (wrt or params):
            grads = torch.autograd.grad([e for e, _ in outs], wrt + params, [g for _, g in outs],
                                        allow_unused=True, retain_graph=retain)
        for p, g in zip(params, grads[len(wrt):]):
            if g is not None:
                p.grad.add_(g)  # allocated by _prepare_grads before the step
                run.received.add(id(p))
        run.accumulated.add(v)
        result = _by_producer({u: ls for u, ls in tape.leaves.items() if u in self.bwd_of}, grads[:len(wrt)])
        for ls in tape.leaves.values():
            for _, leaf in ls:
                leaf.data = _empty(leaf)
        del grads, outs, incoming
        if not retain:
            del run.tapes[v]
        run.copies[b] = (s, result)


_EMPTY: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}


def _describe_modes(modes: Sequence[bool]) -> str:
    """'training mode', 'eval mode', or 'this mix of training and eval modes' for the modules' `modes`."""
    if all(modes):
        return "training mode"
    return "eval mode" if not any(modes) else "this mix of training and eval modes"


def _structure_difference(found: Sequence[tuple[int, str, Any]], planned: Sequence[tuple[int, str, Any]]) -> str:
    """How the traced nodes `found` differ from the plan's `planned` (`Plan.structure`), in a few words."""
    if len(found) != len(planned):
        return f"{len(found)} nodes, the plan's has {len(planned)}"
    k = next(i for i, (a, b) in enumerate(zip(found, planned)) if a != b)

    def label(node: tuple[int, str, Any]) -> str:
        target = node[2]
        return f"block {node[0]} {node[1]} {getattr(target, '__name__', target)}"

    return f"node {k} is {label(found[k])}, the plan's {label(planned[k])}"


def _empty(t: torch.Tensor) -> torch.Tensor:
    """A shared empty tensor of `t`'s dtype and device (a leaf's data between F_v and B_v: no storage)."""
    key = (t.dtype, t.device)
    e = _EMPTY.get(key)
    if e is None:
        e = _EMPTY[key] = torch.empty(0, dtype=t.dtype, device=t.device)
    return e


def _detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    flat, spec = tree_flatten(value)
    return tree_unflatten([t.detach() if isinstance(t, torch.Tensor) else t for t in flat], spec)


def _by_producer(leaves: dict[int, list[tuple[int, torch.Tensor]]], grads: Sequence[torch.Tensor | None]
                 ) -> dict[int, list[torch.Tensor | None]]:
    """u -> gradient of each flat output position of u (None where none), from `grads` in the
    order of the leaves."""
    out: dict[int, list[torch.Tensor | None]] = {}
    k = 0
    for u, ls in leaves.items():
        n = 1 + max(pos for pos, _ in ls)
        row: list[torch.Tensor | None] = [None] * n
        for pos, _ in ls:
            row[pos] = grads[k] if k < len(grads) else None
            k += 1
        out[u] = row
    return out


def execute_graph(blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, graph: Graph,
                  schedule: GraphSchedule | Sequence[int], inputs: torch.Tensor, target: Any, *, seed: int = 0,
                  check: bool = True, rtol: float = 1e-4, atol: float = 1e-6, **options: Any
                  ) -> tuple[StepResult, bool | None]:
    """Run one step under `schedule`; when `check`, compare every parameter gradient with a
    plain forward/backward at the same seed. Returns (result, grad_check or None)."""
    from memsched.models.chain.executor import reference_step
    from memsched.models.measure import compare_gradients

    executor = GraphExecutor(blocks, loss_fn, graph, inputs)
    before = snapshot_buffers(step_modules(executor.blocks, loss_fn)) if check else []
    result = executor.step(schedule, inputs, target, seed=seed, **options)
    if not check:
        return result, None
    with from_buffers(before):  # plain autograd from the buffers the step started from
        _, ref, _ = reference_step(executor.blocks, loss_fn, inputs, target, seed=seed)
    return result, compare_gradients(result.grads, ref, rtol=rtol, atol=atol)[0]

