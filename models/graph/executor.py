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
            of the loss with respect to each of them.
B_v         ``torch.autograd.grad`` over F_v's tape with the incoming gradient of v's outputs
            (the sum of what the latest copies of B_w, for the consumers w of v, and of the
            loss yield for v), with respect to the leaves of v's producers and v's parameters;
            parameter gradients are accumulated into ``.grad`` (once per node, even when a
            schedule computes B_v again); its copy is the gradient for each producer u that
            has a B_u. The tape is dropped after the last B_v that uses it.
==========  ================================================================================

Randomness: the RNG state is recorded at the first computation of each forward node and
restored for its recomputations (`models.measure.RngStates`): recomputed dropout masks are
identical; when the schedule's first computations follow the file order (every solver of
`solvers.graph` does), the masks are those of a plain forward and gradients equal plain
autograd (`models.chain.executor.reference_step`).

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
(`GraphExecutor.predicted_memory`). Time: ms, measured
in separate runs on the clock the graph was profiled with; the prediction is the simulator's
makespan in the graph's time unit (``meta["units"]["time"]``: ms for ``cost="measured"``, MFLOP
for ``cost="flops"``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch
from memsched.models.chain.executor import LossFn, as_blocks, parameters_of
from memsched.models.graph.plan import Plan, build_plan
from memsched.models.measure import OpTrace, RngStates, StepMeter, StepResult, measure_runs, with_rng_states, zero_grads
from memsched.models.memory import CLOCKS, storage_key
from memsched.solvers.graph import Graph, GraphSchedule, simulate
from torch import nn
from torch.autograd.graph import get_gradient_edge, saved_tensors_hooks
from torch.utils._pytree import tree_flatten, tree_unflatten

__all__ = ["GraphExecutor", "execute_graph", "shared_storage_excess"]


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

    rng: RngStates
    copies: dict[int, tuple[int, Any]] = field(default_factory=dict)
    tapes: dict[int, Tape] = field(default_factory=dict)
    accumulated: set[int] = field(default_factory=set)
    received: set[int] = field(default_factory=set)  # ids of the parameters a B_v gave a gradient
    loss: float = float("nan")


class GraphExecutor:
    """Runs schedules of `graph` (exported from `blocks` by `models.graph.export`) on `blocks`
    followed by ``loss_fn(output, target)``; `example_input` has the shapes of the inputs
    the schedules will run on (it computes the plan's static values)."""

    def __init__(self, blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, graph: Graph,
                 example_input: torch.Tensor) -> None:
        self.blocks = as_blocks(blocks)
        self.loss_fn = loss_fn
        self.graph = graph
        self.params = parameters_of(self.blocks)
        self.plan: Plan = build_plan(self.blocks, graph, example_input)
        names = {name: i for i, name in enumerate(graph.names)}
        if "loss" not in names:
            raise ValueError(f"graph {graph.name!r} has no node named 'loss'")
        self.loss = names["loss"]
        self.bwd_of = {v: names[f"grad_{s.name}"] for v, s in self.plan.ops.items() if f"grad_{s.name}" in names}
        self.fwd_of = {b: v for v, b in self.bwd_of.items()}
        self.producers = {v: self.plan.inputs_of(s) for v, s in self.plan.ops.items()}
        self.labels = [str(i) for i in graph.ids]
        # ids of the parameters of the nodes that have a backward node: only they can get a gradient
        self.trained_params = {id(p) for v in self.bwd_of for p in self.plan.ops[v].params}

    # ----------------------------------------------------------------- one step
    def step(self, schedule: GraphSchedule | Sequence[int], inputs: torch.Tensor, target: Any, *, seed: int | None = 0,
             measure_memory: bool = True, measure_time: bool = True, trace: bool = False, time_repeats: int = 1,
             clock: str | None = None, independent: bool = False) -> StepResult:
        """Execute `schedule` (a `GraphSchedule` of node ids, or node indices) as one training
        step and measure it (options as `models.chain.executor.ChainExecutor.step`; `clock`
        defaults to the graph's profiling clock ``meta["clock"]``, else "wall"). The graph
        simulator's replay plus each step's profiled temporaries (`predicted_memory`) gives the
        predicted peaks (bytes: ``predicted_peak`` the allocator's on CPU when the graph records
        them, ``tracker_predicted_peak`` the tracker's) and its makespan the predicted time (graph
        time unit); an invalid schedule raises ValueError before anything runs."""
        if clock is None:
            clock = str(self.graph.meta.get("clock", "wall")).split(" ")[0]
            clock = clock if clock in CLOCKS else "wall"
        seq = schedule.indices(self.graph) if isinstance(schedule, GraphSchedule) else [int(v) for v in schedule]
        sim, frees, tape_at, retain_at = self.prepare(seq)
        m = measure_runs(lambda watch, tr: self._run(seq, frees, tape_at, retain_at, inputs, target, seed, watch, tr,
                                                     clock),
                         cuda=inputs.device.type == "cuda", measure_memory=measure_memory, measure_time=measure_time,
                         trace=trace, time_repeats=time_repeats, independent=independent)
        cuda = inputs.device.type == "cuda"  # the measured peak is then the allocator's
        tracker_memory = self.predicted_memory(seq, sim, "tracker")
        alloc_memory = self.predicted_memory(seq, sim, "allocator")
        if len(m.traces) == len(seq):
            for t, mem in zip(m.traces, alloc_memory if cuda else tracker_memory):
                t.predicted_during = int(mem)
        grads = {name: p.grad.detach().clone() for name, p in self.params.items() if p.grad is not None}
        extra = ({"tracker_predicted_peak": None if cuda else int(max(tracker_memory, default=0))}
                 if "tracker_predicted_peak" in {f.name for f in fields(StepResult)} else {})
        return StepResult(loss=m.loss, grads=grads, input_grad=None, peak_memory=int(m.peak), time_ms=m.time_ms,
                          device=str(inputs.device), memory_method=m.method,
                          predicted_peak=int(max(alloc_memory if extra or cuda else tracker_memory, default=0)),
                          predicted_makespan=float(sim.makespan), trace=m.traces,
                          independent_peak=m.independent_peak, independent_method=m.independent_method, **extra)

    def predicted_memory(self, seq: list[int], sim: Any, method: str = "tracker") -> list[int]:
        """Per step of `seq`: the simulator's memory (bytes) less the node's workspace plus its temporaries as
        profiled by `method` ("tracker" or "allocator", the graph's ``meta["temporaries"]``, see
        `models.graph.profile`; none when the graph has no such record), less the storages it
        charges twice (`shared_storage_excess`); for the allocator also the CPU RNG states the
        run keeps for the random nodes it recomputes."""
        meta = self.graph.meta
        records = meta.get("temporaries", {})
        temps = records.get(method, records.get("tracker", {}))  # no allocator record: the tracker's
        work = self.graph.workspace  # the simulator charged W_v; the method's own temporaries replace it
        shared = shared_storage_excess(self.graph, seq, sim.retention_end)  # charged twice by the simulator
        out = [int(mem) - int(work[v]) + int(temps.get(self.graph.names[v], 0)) - extra
               for v, mem, extra in zip(seq, sim.memory, shared)]
        if method == "allocator":  # RNG states of recomputed random nodes, from their first computation on
            random = {self.graph.names.index(name) for name in meta.get("random_nodes", ())} & {
                v for v, c in Counter(seq).items() if c > 1}
            first = {v: s for s, v in reversed(list(enumerate(seq))) if v in random}
            out = with_rng_states(list(enumerate(out)),
                                  [(s, int(meta.get("rng_state_bytes", 0))) for s in first.values()])
        return out

    def prepare(self, seq: list[int]) -> tuple[Any, dict[int, list[int]], set[int], set[int]]:
        """(the simulator's replay, step -> the steps whose copies are dropped after it, the forward
        steps that keep a tape, the backward steps that retain theirs) of the node indices `seq`;
        ValueError when the simulator rejects `seq`."""
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

    def train_step(self, schedule: GraphSchedule | Sequence[int], inputs: torch.Tensor, target: Any) -> float:
        """One training step under `schedule`, nothing measured: parameter gradients accumulate
        into ``.grad`` as ``loss.backward()`` leaves them (missing ones are allocated first).
        Returns the loss. An invalid schedule raises ValueError before anything runs."""
        seq = schedule.indices(self.graph) if isinstance(schedule, GraphSchedule) else [int(v) for v in schedule]
        _, frees, tape_at, retain_at = self.prepare(seq)
        loss, *_ = self._run(seq, frees, tape_at, retain_at, inputs, target, None, False, False, "wall",
                             accumulate=True)
        return loss

    def _run(self, seq: list[int], frees: dict[int, list[int]], tape_at: set[int], retain_at: set[int],
             x: torch.Tensor, target: Any, seed: int | None, watch: bool, trace: bool, clock: str,
             probe: Any = None, accumulate: bool = False) -> tuple[float, None, int, list[OpTrace], float]:
        """One step of `seq`; `probe` (`models.graph.profile`), when given, is told when each
        step starts (``start(s)``), when its node is computed (``computed(s, node, run, meter)``,
        before the copies it ends are dropped) and when it ends (``stop(s)``). `accumulate`:
        add to the parameter gradients already there instead of zeroing them."""
        fresh = self._prepare_grads(accumulate)
        if seed is not None:
            torch.manual_seed(seed)
        counts = Counter(seq)
        run = _Run(RngStates(x.device, [v for v in self.plan.ops if counts[v] > 1]))
        meter = StepMeter(x.device, watch=watch, trace=trace, clock=clock)
        with meter:
            for s, node in enumerate(seq):
                if probe is not None:
                    probe.start(s)
                with meter.op(self.labels[node]):
                    if node in self.plan.ops:
                        self._forward(run, s, node, x, s in tape_at)
                    elif node == self.loss:
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
            run.copies.clear()
            run.tapes.clear()
        for p in fresh:
            if id(p) not in run.received:
                p.grad = None
        return loss, None, meter.peak, meter.traces, meter.elapsed_ms

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
        fresh = [p for p in self.params.values() if id(p) in trained and (p.grad is None or not accumulate)]
        zero_grads([p for p in self.params.values() if id(p) in trained], keep=accumulate)
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
        with torch.enable_grad():
            out = self.plan.resolve(self.plan.output, lambda u: values[u], x)
            loss = self.loss_fn(out, target)
            wrt = [leaf for ls in leaves.values() for _, leaf in ls]
            grads = torch.autograd.grad(loss, wrt, allow_unused=True) if wrt else ()
        run.loss = float(loss.detach())
        run.copies[self.loss] = (s, _by_producer(leaves, grads))

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
        params = tape.params if accumulate else []
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
    result = executor.step(schedule, inputs, target, seed=seed, **options)
    if not check:
        return result, None
    _, ref, _ = reference_step(executor.blocks, loss_fn, inputs, target, seed=seed)
    return result, compare_gradients(result.grads, ref, rtol=rtol, atol=atol)[0]

