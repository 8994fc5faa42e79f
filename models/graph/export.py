"""Export the training graph of a PyTorch network (docs/graph.md, the Checkmate model).

``export_training_graph(model, ...)`` turns a zoo model (or any list of blocks with an example
input, a loss and a target) into a `solvers.graph.Graph`: forward nodes F_v, one loss node and
backward nodes B_v, saved as networkx node-link JSON by ``Graph.save``.

Forward nodes (``granularity="op"``): every block is traced by fx (`models.graph.plan.trace_block`:
``symbolic_trace`` that keeps ``torch.no_grad()`` regions and makes in-place ops out-of-place)
and run node by node on the example input (an ``fx.Interpreter``). Each fx node that computes
something (call_module / call_function / call_method) becomes F_v, except

- nodes whose value holds no tensor (shapes, sizes, devices, integers): static, dropped;
- nodes whose tensor outputs all alias the storage of their inputs (views: ``view``,
  ``transpose``, ``flatten``, ``split``, ``getitem``, ``nn.Identity``, ...): folded into the
  node that produced the storage (their consumers depend on that producer). A ``reshape`` that
  copies is a real node.

A block that fx cannot trace becomes one node (listed in ``meta["untraced_blocks"]``). With
``granularity="module"`` every block is one node (a chain-like graph, as in the rotor model).
``meta["granularity"]`` is this export's granularity (op or module); a zoo model's meta also
records ``meta["split"]``, the blocks the network was built with (`models.zoo.split`: "block",
or "layer" for ``build_model(..., granularity="layer")``), which a run rebuilds it at.
Parameters, buffers and the example input are not nodes: they are resident throughout and not
counted (the input's bytes are in ``meta["input_size"]``, parameters in
``meta["parameter_bytes"]``), as in the chain profiler. ``meta["dtype"]`` is always the dtype the
network ran at (its parameters', else the example input's: "float32" by default), as in a chain
profile's meta, so that running the graph at another dtype is refused.

Edges and sizes (Checkmate's training graph, Jain et al. MLSys 2020, cf.
`solvers.graph.generate.training_graph`): F_u -> F_v when v reads a tensor whose storage u
produced; F_p -> loss for the producer p of the network output; B_w -> B_v for every consumer
w of v whose backward yields a gradient for v's output, loss -> B_v when v produced the
output; and what B_v reads from the forward: with ``deps="checkmate"`` (default) F_v and F_u
for every input u of v; with ``deps="saved"`` only what autograd really saves
(``torch.autograd.graph.saved_tensors_hooks``): F_u when u's storage is saved, F_v when v's
output or an internal tensor (mask, statistics: the "tape", represented by the output) is.
B_v exists only when v's output requires a gradient that reaches the loss: a node behind a
gradient stop (``.detach()``, ``torch.no_grad()``) has none. An in-place op whose mutated tensor
another value read later aliases, an item assignment, or a forward that updates a parameter or
buffer itself (``self.s.mul_(2.0)``: `models.graph.plan.check_state_updates`) is bad input (`InputError`).

- ``cost_ram`` (bytes): F_v, the distinct new storages of its output (with ``ram="tape"``
  plus the internal tensors autograd saves for B_v: pooling indices, dropout masks, norm
  statistics; the chain profiler's tape, Problem 1's xbar; not the parameters' or buffers' storage,
  such as BatchNorm's running statistics: resident; ``meta["outputs"]`` then records every forward
  node's output bytes alone, which `memsched run` compares with the network's); the loss, the gradient
  of the network output; B_v, the gradients it yields for its inputs' producers (per producer
  at most that producer's output size; parameter gradients are accumulated in place and not
  counted, as in the executor).
- ``cost_cpu``: with ``cost="flops"`` MFLOP (10^6 floating-point operations), counted by
  `models.costs.OpCounter` (``torch.utils.flop_counter``'s formulas, one FLOP per output
  element for the other ops) on the node's forward (F_v) and on ``torch.autograd.grad`` of its
  output (B_v: gradients of inputs and parameters, about twice the forward for matrix products
  and convolutions), at least one per output element of the node; the loss node costs its
  forward and backward. With ``cost="roofline:<device>"`` milliseconds of the roofline model of
  `models.costs` on the same operations. Both counted models build a zoo network on fake
  tensors (``FakeTensorMode``): sizes exact, nothing allocated, nothing computed (VGG-16 at
  batch 256 in seconds). With ``cost="measured"`` milliseconds, by default (``timing="in_step"``,
  `models.graph.profile`) each node's median time over ``repeats`` store-all steps (after
  ``warmup``) of the graph executor itself, so that predictions and measured steps time the same
  code; with ``ram="tape"`` cost_ram is then the bytes the executor keeps for each node and
  ``meta["temporaries"]`` its temporaries (bytes above those while it runs: by the tensor
  tracker and, on CPU, by the allocator), their maximum also in the node's ``workspace``.
  With ``timing="isolated"`` the median wall time over
  ``repeats`` runs (after ``warmup``) of the same forward and backward calls in isolation (they
  miss the executor's work around each node: 1.5-5x below a step's on small CPU nodes).

Node order (``graph.order``): forward nodes in fx order (block after block), the loss, then the
backward nodes in reverse forward order; it is topological, so ``reference_peak`` is the peak
of a plain store-all training step. Node names: ``"<block>.<fx node name>"`` and
``"grad_<name>"``; node attribute ``backward`` is true for the loss and the B_v.
"""

from __future__ import annotations

import datetime as _dt
import operator
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from memsched.models.costs import COST_CHOICES, CostModel, OpCounter, parse_cost, shape_exact_model
from memsched.models.graph.plan import (
    FUNCTIONALIZED,
    check_state_updates,
    node_callable,
    op_label,
    out_of_place_module,
    trace_block,
)
from memsched.models.memory import CLOCKS, storage_key
from memsched.models.timing import TIMINGS
from memsched.solvers.errors import InputError, flag
from memsched.solvers.graph import Graph
from torch import fx
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["export_training_graph", "save_graph", "COSTS", "GRANULARITIES", "DEPS", "RAMS", "TIMINGS"]

COSTS = COST_CHOICES
GRANULARITIES = ("op", "module")
DEPS = ("checkmate", "saved")
RAMS = ("output", "tape")

LossFn = Callable[[torch.Tensor, Any], torch.Tensor]


@dataclass
class _Op:
    """One forward node as recorded: costs (MFLOP or ms), output bytes, dependencies."""

    name: str
    fwd_cost: float
    bwd_cost: float
    out_bytes: int
    inputs: list[int]  # producers (op indices) of the tensors it reads, first use first
    needs_grad: bool  # its output requires a gradient
    grad_bytes: dict[int, int] = field(default_factory=dict)  # producer -> bytes of the gradient B_v yields
    saved_inputs: set[int] = field(default_factory=set)  # producers whose storage autograd saves
    saves_tape: bool = False  # autograd saves its output or an internal tensor
    tape_bytes: int = 0  # bytes of the internal saved tensors (not inputs, output or parameters)


class _Recorder:
    """Runs ops one at a time on real tensors and records `_Op`s (see the module docstring)."""

    def __init__(self, cost: str, repeats: int, warmup: int, device: torch.device, timed: bool = True) -> None:
        self.model: CostModel = parse_cost(cost)
        self.cost = self.model.kind
        self.timed = timed and self.cost == "measured"  # time each op in isolation
        self.device = device
        self.repeats = max(1, int(repeats))
        self.warmup = max(0, int(warmup))
        self.ops: list[_Op] = []
        self.producer: dict[int, int] = {}  # storage key -> op index
        self.keep: list[Any] = []  # keeps every storage alive so that keys stay unique
        # ids of the (detached) results whose real value required grad; alive in `keep`. A result
        # of a node that needs a gradient may not carry one (``detach``, ``torch.no_grad()``).
        self.carries_grad: set[int] = set()

    def producer_of(self, t: torch.Tensor) -> int | None:
        return self.producer.get(storage_key(t)) if t.numel() else None

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def counter(self) -> OpCounter:
        return OpCounter(self.model.device)

    def counted(self, counter: OpCounter, numel: int) -> float:
        """MFLOP (at least `numel` FLOP) or roofline ms of what `counter` saw (measured: replaced later)."""
        if self.model.kind == "roofline":
            return self.model.value(counter)
        return max(counter.flops, float(numel)) / 1e6

    def _time_ms(self, fn: Callable[[], Any]) -> float:
        """Median wall time (ms) of `fn` over `repeats` runs after `warmup` (synchronised on CUDA)."""
        for _ in range(self.warmup):
            fn()
        times = []
        for _ in range(self.repeats):
            self._sync()
            start = time.perf_counter()
            fn()
            self._sync()
            times.append((time.perf_counter() - start) * 1e3)
        return float(statistics.median(times))

    def record(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               params: Sequence[torch.Tensor] = (), buffers: Sequence[torch.Tensor] = ()) -> Any:
        """Run ``fn(*args, **kwargs)``; add a node unless the result is static or a view. Returns the
        result, detached (consumers get fresh autograd leaves from `record`). `params` and `buffers`
        (BatchNorm's running statistics) are the module's own state: resident, so autograd saving
        their storage adds no tape bytes."""
        flat, spec = tree_flatten((args, kwargs))
        new_flat: list[Any] = []
        leaves: list[tuple[int, torch.Tensor]] = []  # (producer, leaf requiring grad)
        grad_params: list[torch.Tensor] = [p for p in params if p.requires_grad]
        inputs: list[int] = []
        in_keys: set[int] = set()
        for x in flat:
            if not isinstance(x, torch.Tensor):
                new_flat.append(x)
                continue
            in_keys.add(storage_key(x))
            p = self.producer_of(x)
            if p is not None and p not in inputs:
                inputs.append(p)
            if x.requires_grad:  # a parameter (recorded values are detached)
                y = x.detach().requires_grad_()
                grad_params.append(y)
            elif p is not None and id(x) in self.carries_grad and x.is_floating_point():
                y = x.detach().requires_grad_()
                leaves.append((p, y))
            else:
                y = x
            new_flat.append(y)
        a, k = tree_unflatten(new_flat, spec)
        saved: dict[int, int] = {}  # storage key -> bytes

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved[storage_key(t)] = int(t.untyped_storage().nbytes())
            return t

        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                self.counter() as fc:
            out = fn(*a, **k)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        result = tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out)
        self.keep.append((a, k, result))
        self.carries_grad.update(id(r) for t, r in zip(tree_flatten(out)[0], tree_flatten(result)[0])
                                 if isinstance(t, torch.Tensor) and t.requires_grad)
        new = {storage_key(t): t for t in outs if t.numel() and storage_key(t) not in in_keys}
        if not new:  # static (no tensor) or a view of its inputs: no node
            if grad_params and not leaves and any(t.requires_grad for t in outs):
                return out  # a view of parameters (``self.weight.t()``): consumers train them as parameters
            return result
        index = len(self.ops)
        out_keys = set(new)
        out_bytes = sum(int(t.untyped_storage().nbytes()) for t in new.values())
        numel = sum(t.numel() for t in new.values())
        fwd = self.counted(fc, numel)
        req = [t for t in outs if t.requires_grad]
        op = _Op(name, fwd, 0.0, out_bytes, inputs, needs_grad=bool(req))
        if req:
            wrt = [y for _, y in leaves] + grad_params
            seeds = [torch.ones_like(t) for t in req]
            with self.counter() as fb:
                grads = torch.autograd.grad(req, wrt, seeds, allow_unused=True, retain_graph=True)
            gnumel = sum(g.numel() for g in grads if g is not None)
            op.bwd_cost = self.counted(fb, max(gnumel, 1))
            for (p, _), g in zip(leaves, grads):
                if g is not None:
                    op.grad_bytes[p] = min(op.grad_bytes.get(p, 0) + g.numel() * g.element_size(),
                                           self.ops[p].out_bytes)
            if self.timed:
                op.bwd_cost = self._time_ms(
                    lambda: torch.autograd.grad(req, wrt, seeds, allow_unused=True, retain_graph=True))
        if self.timed:
            with torch.enable_grad():
                op.fwd_cost = self._time_ms(lambda: fn(*a, **k))
        resident = {_key(t) for t in (*grad_params, *params, *buffers)} - {None}
        for key, nbytes in saved.items():
            if key in out_keys:
                op.saves_tape = True
            elif key in in_keys:
                p = self.producer.get(key)
                if p is not None:
                    op.saved_inputs.add(p)
            elif key not in resident:
                op.saves_tape = True  # an internal tensor (mask, statistics): kept with the output
                op.tape_bytes += nbytes
        for key in out_keys:
            self.producer[key] = index
        self.ops.append(op)
        return result


class _OpInterpreter(fx.Interpreter):
    """Runs a traced block (`models.graph.plan.trace_block`), sending every call_* node through
    the recorder."""

    def __init__(self, gm: fx.GraphModule, recorder: _Recorder, prefix: str) -> None:
        super().__init__(gm, garbage_collect_values=False)
        self.extra_traceback = False  # fx would append lines to our one-line InputErrors
        self.gm = gm
        self.recorder = recorder
        self.prefix = prefix
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self.order = order
        self.last_use = {n: max((order[u] for u in n.users), default=-1) for n in gm.graph.nodes}

    def run_node(self, n: fx.Node) -> Any:
        if n.op not in ("call_module", "call_function", "call_method"):
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        fn, params = node_callable(self.gm, n)
        buffers = list(self.gm.get_submodule(str(n.target)).buffers()) if n.op == "call_module" else []
        if n.target is operator.getitem and not any(isinstance(x, torch.Tensor) for x in tree_flatten(args)[0]):
            return fn(*args, **kwargs)
        if n.meta.get(FUNCTIONALIZED):
            self._check_unaliased(n)
        if n.target is operator.setitem and isinstance(args[0], torch.Tensor):  # returns None: the plan would drop it
            raise self._inplace_error(n)
        try:
            return self.recorder.record(f"{self.prefix}.{n.name}", fn, tuple(args), dict(kwargs), params, buffers)
        except RuntimeError as err:
            if "in-place" not in str(err):
                raise
            raise self._inplace_error(n) from None

    def _inplace_error(self, n: fx.Node) -> InputError:
        return InputError(f"block {self.prefix}: fx node {n.name} ({_op_name(n)}) modifies a tensor in place in a way "
                          "the graph export cannot make out-of-place: use an out-of-place op (e.g. torch.where)")

    def _check_unaliased(self, n: fx.Node) -> None:
        """The in-place op `n` (made out-of-place by `functionalize`) gives the original's values
        only when no value read after it shares the mutated tensor's storage: else InputError."""
        first = n.args[0]
        assert isinstance(first, fx.Node)
        mutated = {_key(t) for t in tree_flatten(self.env[first])[0] if isinstance(t, torch.Tensor)} - {None}
        for other, value in self.env.items():
            if other is first or self.last_use[other] <= self.order[n]:
                continue
            if any(_key(t) in mutated for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)):
                raise InputError(f"block {self.prefix}: fx node {n.name} ({_op_name(n)}) modifies in place a tensor "
                                 f"that {other.name}, read later, shares: the graph export cannot follow that; "
                                 "use the out-of-place op")


def _key(t: torch.Tensor) -> int | None:
    """`storage_key` of `t`, None for a tensor without storage (empty, or a tensor subclass without one)."""
    if not t.numel():
        return None
    try:
        return storage_key(t)
    except (RuntimeError, NotImplementedError):
        return None


def _op_name(n: fx.Node) -> str:
    """The op of fx node `n` as a user wrote it (before `functionalize`)."""
    return str(n.meta[FUNCTIONALIZED]) if FUNCTIONALIZED in n.meta else op_label(n)


def export_training_graph(
    model: str | Any,
    *,
    example_input: torch.Tensor | None = None,
    loss_fn: LossFn | None = None,
    target: Any = None,
    cost: str = "flops",
    granularity: str = "op",
    deps: str = "checkmate",
    ram: str = "output",
    repeats: int = 5,
    warmup: int = 2,
    timing: str = "in_step",
    clock: str | None = None,
    name: str | None = None,
    meta: dict[str, Any] | None = None,
    out: str | Path | None = None,
    **sizes: Any,
) -> Graph:
    """The training graph of `model` (see the module docstring); saved to `out` when given.

    `model`: a zoo name (built with ``models.zoo.build_model(model, **sizes)``: batch,
    image_size, seq_len, width, depth, classes, vocab, dropout, device, seed), a built
    `models.zoo.ZooModel`, or an ``nn.Module`` / list of blocks together with `example_input`,
    `loss_fn` and `target`. `cost`: "flops" (cost_cpu in MFLOP), "roofline:<device>" (ms of
    `models.costs`'s roofline model; both build a zoo name on fake CPU tensors) or "measured"
    (ms, median of `repeats` after `warmup`: with `timing` "in_step" (default) each node's time
    inside the graph executor's store-all step, and with ``ram="tape"`` the bytes the executor
    keeps for it, `models.graph.profile`; with "isolated" each op timed on its own; `clock`
    "wall" or "thread", `models.memory.cpu_clock`, by default "thread" on a CPU with one torch
    thread, else "wall"; recorded in ``meta["clock"]``, the executor's default).
    `granularity`: "op" (one node per fx op) or "module" (one per block). `deps`: "checkmate"
    or "saved" (what a backward node reads from the forward).
    `ram`: "output" (F_v's cost_ram is its output) or "tape" (plus autograd's internal saved
    tensors: pooling indices, dropout masks, norm statistics).
    cost_ram is in bytes. BatchNorm running statistics are updated by the runs. Raises
    `InputError` for an unknown option or model, `repeats` not an int in 1..10**4, `warmup` not
    in 0..10**4, and for a zoo name whose network cannot run at these sizes (BatchNorm at batch 1
    on a 1x1 feature map: `models.network.diagnosed`, naming the model, its sizes and the block).
    """
    from memsched.models.chain.executor import as_blocks, parameters_of
    from memsched.models.chain.profiler import MAX_REPEATS
    from memsched.models.network import diagnosed
    from memsched.models.zoo import ZooModel, build_model
    from memsched.solvers.units import check_int

    repeats = check_int(repeats, "repeats", 1, MAX_REPEATS)
    warmup = check_int(warmup, "warmup", 0, MAX_REPEATS)
    for label, value, allowed in (("cost", cost, COSTS), ("granularity", granularity, GRANULARITIES),
                                  ("deps", deps, DEPS), ("ram", ram, RAMS), ("timing", timing, TIMINGS),
                                  ("clock", clock or "wall", CLOCKS)):
        if value not in allowed:
            raise InputError(f"unknown {label} {value!r} (one of {', '.join(allowed)})", field=flag(label))
    info: dict[str, Any] = {}
    if isinstance(model, str) and not parse_cost(cost).measured:
        if str(sizes.get("device", "cpu")) != "cpu":
            raise InputError(f"a counted cost model traces fake CPU tensors: leave {flag('device')} out or use cpu",
                             field=flag("device"))
        with shape_exact_model():
            built = build_model(model, **{**sizes, "device": "cpu"})
            with diagnosed(built):  # a network that cannot run at these sizes is bad input naming them
                return export_training_graph(built, cost=cost, granularity=granularity, deps=deps, ram=ram,
                                             repeats=repeats, warmup=warmup, name=name,
                                             meta={"shapes": "fake tensors (torch FakeTensorMode): nothing allocated",
                                                   **(meta or {})}, out=out)
    if isinstance(model, str):
        built = build_model(model, **sizes)
        with diagnosed(built):  # as above (BatchNorm at batch 1 on a 1x1 feature map)
            return export_training_graph(built, example_input=example_input, loss_fn=loss_fn, target=target,
                                         cost=cost, granularity=granularity, deps=deps, ram=ram, repeats=repeats,
                                         warmup=warmup, timing=timing, clock=clock, name=name, meta=meta, out=out)
    if sizes:
        raise InputError(f"sizes ({', '.join(sorted(sizes))}) apply to a zoo model name", field=sorted(sizes)[0])
    if isinstance(model, ZooModel):
        blocks = model.blocks
        example_input = model.example_input if example_input is None else example_input
        loss_fn = loss_fn or model.loss_fn
        target = model.target if target is None else target
        label = model.label
        config = dict(model.config)
        # the zoo's chain split (block|layer, `models.zoo.split`) the blocks were built at: "split", apart
        # from this export's "granularity" (op|module); a rerun rebuilds the network at it (`models.run`)
        split = config.pop("granularity", "block")
        info.update(model=model.name, **config, split=split)
    else:
        blocks = as_blocks(model)
        label = "network"
    if example_input is None or loss_fn is None:
        raise ValueError("example_input and loss_fn are needed for a network that is not a zoo model")
    if clock is None:
        clock = "thread" if example_input.device.type == "cpu" and torch.get_num_threads() == 1 else "wall"
    in_step = cost == "measured" and timing == "in_step"
    rec = _Recorder(cost, repeats, warmup, example_input.device, timed=not in_step)
    untraced: list[int] = []
    a: Any = example_input.detach()
    for i, block in enumerate(blocks):
        gm = trace_block(block) if granularity == "op" else None
        if gm is None:
            if granularity == "op":
                untraced.append(i)
            a = rec.record(f"{i}:{type(block).__name__}", out_of_place_module(block), (a,), {},
                           list(block.parameters()), list(block.buffers()))
        else:
            check_state_updates(gm, i)  # before the run: it would update the state as the executor never does
            a = _OpInterpreter(gm, rec, str(i)).run(a)
    out_tensors = [t for t in tree_flatten(a)[0] if isinstance(t, torch.Tensor)]
    sources = []
    for t in out_tensors:
        p = rec.producer_of(t)
        if p is not None and p not in sources:
            sources.append(p)
    if not sources:
        raise ValueError("the network output is not computed by any node")
    loss_cost, loss_bytes = _loss_costs(rec, loss_fn, a, target)
    params = parameters_of(blocks)
    graph_meta = {
        "source": "memsched.models.graph.export.export_training_graph",
        "units": {"time": rec.model.unit, "memory": "bytes"},
        **rec.model.meta(),
        "granularity": granularity,
        "deps": deps,
        "ram": ram,
        "dtype": _network_dtype(params, example_input),
        "input_size": int(example_input.numel() * example_input.element_size()),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params.values()),
        "torch": torch.__version__,
        "device": str(example_input.device) if example_input.device.type == "cuda"
        else f"cpu:{platform.machine()}",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **info,
    }
    if cost == "measured":
        graph_meta.update(repeats=repeats, warmup=warmup, timing=timing, clock=clock + (
            " (cuda synchronised)" if example_input.device.type == "cuda" else ""))
    if untraced:
        graph_meta["untraced_blocks"] = untraced
    graph_meta.update(meta or {})
    if ram == "tape":  # the outputs alone, exact, for `models.graph.plan.output_size_mismatch`
        graph_meta["outputs"] = {op.name: int(op.out_bytes) for op in rec.ops}
        for op in rec.ops:
            op.out_bytes += op.tape_bytes
    graph = _build_graph(rec.ops, sources, loss_cost, loss_bytes, deps,
                         name=name or f"{label}-{granularity}", meta=graph_meta)
    if in_step:
        graph = _in_step_costs(graph, blocks, loss_fn, example_input, target, repeats=repeats, warmup=warmup,
                               clock=clock, sizes=ram == "tape")
    if out is not None:
        save_graph(graph, out)
    return graph


def save_graph(graph: Graph, out: str | Path) -> None:
    """Write the exported `graph` to the graph file `out`, once it passes the file loader's rules
    (`Graph.check`: each size at most 1 PiB and their sum, each time at most `MAX_TIME`; else an
    `InputError` naming `out`, nothing written), its ``meta`` ``model`` / ``factory`` specs recorded
    relative to `out`'s folder when they name a factory file (`models.network.spec_beside`, as
    `models.chain.profiler.save_profiled` does), so that `memsched run` finds the factory again from
    anywhere. `graph` itself is left as it is (its specs stay relative to the working folder)."""
    from memsched.models.network import spec_beside
    from memsched.solvers.jsonio import write_json_atomic

    graph.check(path=str(out))
    data = graph.to_dict()
    meta = data["graph"].get("meta") or {}
    for key in ("model", "factory"):
        if isinstance(meta.get(key), str):
            meta[key] = spec_beside(meta[key], out)
    write_json_atomic(out, data)


def _in_step_costs(graph: Graph, blocks: Any, loss_fn: LossFn, example_input: torch.Tensor, target: Any, *,
                   repeats: int, warmup: int, clock: str, sizes: bool) -> Graph:
    """`graph` with cost_cpu (ms) the nodes' medians inside the executor's store-all step and,
    when `sizes`, cost_ram the bytes the executor keeps for each node (`models.graph.profile`)."""
    import dataclasses

    from memsched.models.graph.executor import GraphExecutor
    from memsched.models.graph.profile import profile_nodes, with_workspace

    executor = GraphExecutor(blocks, loss_fn, graph, example_input)
    prof = profile_nodes(executor, example_input, target, repeats=repeats, warmup=warmup, clock=clock)
    meta = {**graph.meta, "sizes": "kept by the graph executor (live-tensor tracker)" if sizes else graph.meta.get(
        "ram"), "spread_median": float(statistics.median(prof.spread)) if prof.spread else 0.0}
    if sizes:
        meta["temporaries"] = prof.temporaries(graph.names)
        meta["passes"] = prof.passes(graph.names)
        meta["untaped"] = prof.untaped(graph.names)
        meta["untaped_temporaries"] = prof.untaped_temporaries(graph.names)
        meta["released"] = prof.released(graph.names)
        meta["random_nodes"] = [graph.names[v] for v in prof.random]
        meta["rng_state_bytes"] = int(torch.get_rng_state().numel())
        if tape := prof.allocator_tape(graph.names):  # Python scalars on tapes: only the CPU allocator sees them
            meta["allocator_tape"] = tape
    out = dataclasses.replace(graph, cost_cpu=list(prof.ms), cost_ram=prof.kept if sizes else graph.cost_ram,
                              meta=meta)
    return with_workspace(out) if sizes else out


def _network_dtype(params: Mapping[str, torch.Tensor], example_input: torch.Tensor) -> str:
    """The dtype name ("float32", "bfloat16", ...) the network runs at: its parameters' (the first
    one's), else the example input's, as the chain profiler records it (`profile_meta`)."""
    dtype = next((p.dtype for p in params.values()), example_input.dtype)
    return str(dtype).replace("torch.", "")


def _loss_costs(rec: _Recorder, loss_fn: LossFn, output: Any, target: Any) -> tuple[float, int]:
    """(cost of the loss's forward + backward, bytes of the gradient of the output)."""
    leaf = tree_map(lambda t: t.detach().requires_grad_() if isinstance(t, torch.Tensor)
                    and t.is_floating_point() else t, output)
    wrt = [t for t in tree_flatten(leaf)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    with torch.enable_grad(), rec.counter() as fc:
        loss = loss_fn(leaf, target)
        grads = torch.autograd.grad(loss, wrt, retain_graph=True)
    nbytes = sum(g.numel() * g.element_size() for g in grads)
    cost = rec.counted(fc, max(2 * sum(g.numel() for g in grads), 1))
    if rec.timed:
        def step() -> None:
            with torch.enable_grad():
                torch.autograd.grad(loss_fn(leaf, target), wrt)
        cost = rec._time_ms(step)
    return cost, int(nbytes)


def _build_graph(ops: list[_Op], sources: list[int], loss_cost: float, loss_bytes: int, deps: str, *,
                 name: str, meta: dict[str, Any]) -> Graph:
    """Forward nodes 0..m-1, the loss m, backward nodes after it in reverse forward order."""
    m = len(ops)
    consumers: list[list[int]] = [[] for _ in range(m)]
    for v, op in enumerate(ops):
        for u in op.inputs:
            consumers[u].append(v)
    has_b = [False] * m
    for v in reversed(range(m)):
        has_b[v] = ops[v].needs_grad and (v in sources or any(has_b[w] and v in ops[w].grad_bytes
                                                              for w in consumers[v]))
    loss = m
    bidx: dict[int, int] = {}
    for v in reversed(range(m)):
        if has_b[v]:
            bidx[v] = m + 1 + len(bidx)
    n = m + 1 + len(bidx)
    cpu = [op.fwd_cost for op in ops] + [loss_cost] + [0.0] * len(bidx)
    ram = [op.out_bytes for op in ops] + [loss_bytes] + [0] * len(bidx)
    names = [op.name for op in ops] + ["loss"] + [""] * len(bidx)
    backward = [False] * m + [True] * (n - m)
    edges = [(u, v) for v, op in enumerate(ops) for u in op.inputs]
    edges += [(p, loss) for p in sources]
    for v, b in bidx.items():
        op = ops[v]
        cpu[b] = op.bwd_cost
        ram[b] = sum(nb for u, nb in op.grad_bytes.items() if has_b[u])
        names[b] = f"grad_{op.name}"
        edges += [(bidx[w], b) for w in consumers[v] if w in bidx and v in ops[w].grad_bytes]
        if v in sources:
            edges.append((loss, b))
        if deps == "checkmate":
            edges.append((v, b))
            edges += [(u, b) for u in op.inputs]
        else:
            if op.saves_tape:
                edges.append((v, b))
            edges += [(u, b) for u in sorted(op.saved_inputs)]
    return Graph.from_lists(cpu, ram, edges, name=name, names=names, backward=backward, meta=meta)
