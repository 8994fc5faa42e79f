"""The executable plan of a training graph: which fx node of which block computes each graph node.

`models.graph.export` turns every block of a network into ``torch.fx`` nodes and keeps as graph
node F_v each fx node that allocates a new storage, named ``"<block>.<fx node name>"`` (a
block fx cannot trace, or every block with ``granularity="module"``, is one node
``"<block>:<class name>"``). Both trace with `trace_block` (the grad mode of each node kept,
in-place ops made out-of-place: `functionalize`). `build_plan` traces the same blocks and classifies
every fx node by the graph's names, so that a schedule's node can be run on its own:

- ``op``: a graph forward node (its index in the graph);
- ``view``: an fx node the export folded into its producer (its tensors alias its inputs'
  storages: ``view``, ``transpose``, ``getitem``, ``flatten``, ``nn.Identity``...): evaluated
  again from its inputs whenever a consumer needs it (no new memory);
- ``static``: an fx node whose value holds no tensor (sizes, shapes): its value, computed
  once by a plain forward of the example input, is a constant of the plan;
- ``placeholder`` (the block input: the previous block's output, or the network input for
  block 0), ``get_attr`` (a parameter or buffer), ``output`` (the block output).

`Plan.resolve(ref, value_of)` evaluates an argument: view and static nodes recursively, block
inputs through the previous block, graph nodes through ``value_of(index)`` (the executor's
resident copy, or a leaf of it).
"""

from __future__ import annotations

import copy
import inspect
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.models.buffers import restore_buffers, snapshot_buffers
from memsched.models.memory import storage_key
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph
from torch import fx, nn
from torch.utils._pytree import tree_flatten

__all__ = ["Plan", "Step", "BlockRef", "NetworkInput", "build_plan", "trace_block", "node_callable", "functionalize",
           "out_of_place_module", "op_label", "plan_structure", "check_state_updates", "output_size_mismatch",
           "STATIC", "VIEW", "OP"]

STATIC, VIEW, OP = "static", "view", "op"


@dataclass
class Step:
    """One fx node of block `block` (or the whole block when `node` is None): its kind, callable,
    argument template (fx nodes inside, resolved at run time), graph index (ops) or constant
    value (static nodes), and the parameters its op uses (all of them, frozen or not: the
    executor gives a gradient to those requiring grad when B_v runs, so freezing or unfreezing
    one after the plan is made is honoured; none for a node computed without grad)."""

    block: int
    kind: str
    fn: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    index: int | None = None
    value: Any = None
    params: list[nn.Parameter] = field(default_factory=list)
    name: str = ""
    #: the buffers (non-parameter ``get_attr`` tensors) the op is handed as arguments, which it may
    #: update in place (``F.batch_norm(x, self.running_mean, ...)``): a recomputation puts them back
    buffers: list[torch.Tensor] = field(default_factory=list)
    #: bytes of the distinct new storages of the op's output on the example input (ops only), as the
    #: export records a node's output (`output_size_mismatch`)
    out_bytes: int = 0


@dataclass(frozen=True)
class BlockRef:
    """The output of block `block` when the whole block is one graph node."""

    block: int


@dataclass(frozen=True)
class NetworkInput:
    """Stands for the network input in the arguments of a whole first block."""


GRAD_ENABLED = "memsched_grad_enabled"  # node.meta key: the grad mode the node was traced under
FUNCTIONALIZED = "memsched_functionalized"  # node.meta key: an in-place op made out-of-place
UPDATED_BUFFERS = "memsched_updated_buffers"  # GraphModule.meta key: buffers the forward updated while traced
_INPLACE_OPERATORS: dict[Any, Any] = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
    operator.ipow: operator.pow, operator.imatmul: operator.matmul, operator.iand: operator.and_,
    operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift}
_NOT_MUTATING = {"requires_grad_", "share_memory_"}  # trailing "_" but the values stay


class _GradModeTracer(fx.Tracer):
    """``symbolic_trace``'s tracer that records in each node's meta the grad mode it was created
    under: fx drops ``torch.no_grad()`` blocks (and ``@torch.no_grad()`` forwards), which run
    for real while tracing."""

    def create_node(self, kind: str, target: Any, args: Any, kwargs: Any, name: str | None = None,
                    type_expr: Any = None) -> fx.Node:
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        node.meta[GRAD_ENABLED] = torch.is_grad_enabled()
        return node


def trace_block(block: nn.Module) -> fx.GraphModule | None:
    """`block` traced by fx (None when fx cannot trace it), its nodes marked with their grad
    mode and its in-place ops replaced by their out-of-place versions (`functionalize`). The
    export and the plan trace blocks with it, so that both see the same nodes."""
    tracer = _GradModeTracer()
    saved = snapshot_buffers([block])
    before = [(name, t, t._version) for name, t in block.named_buffers()]
    try:
        with torch.enable_grad():
            graph = tracer.trace(block)
    except Exception:  # noqa: BLE001 (fx raises many kinds on untraceable code)
        graph = None
    updated = _updated_buffers(block, before)
    if updated:  # the trace ran those updates for real, once: put the values back
        restore_buffers(saved)
    if graph is None:
        return None
    gm = fx.GraphModule(tracer.root, graph, type(block).__name__)
    gm.meta[UPDATED_BUFFERS] = updated
    functionalize(gm)
    return gm


def _updated_buffers(block: nn.Module, before: list[tuple[str, torch.Tensor, int]]) -> list[str]:
    """The names of `block`'s buffers (`before`: name, tensor, version counter) that were updated in
    place or bound to another tensor since: a forward that does so on a buffer fx does not proxy
    (``self.s.mul_(2.0)``) runs the update while tracing and leaves no node for it."""
    now = dict(block.named_buffers())
    return [name for name, t, version in before if now.get(name) is not t or t._version != version]


def out_of_place_module(mod: nn.Module) -> nn.Module:
    """`mod` itself, or for a parameter-free module with ``inplace=True`` (``nn.ReLU(inplace=True)``,
    dropout, ...) a copy with ``inplace=False``: autograd refuses in-place ops on the leaves
    the export and the executor give a node, and the values are the same."""
    if getattr(mod, "inplace", False) is True and not any(True for _ in mod.parameters()) \
            and not any(True for _ in mod.buffers()):
        mod = copy.deepcopy(mod)
        mod.inplace = False
    return mod


def _out_of_place_function(fn: Any) -> Any:
    """The out-of-place version of the in-place function `fn` (``torch.relu_``, ``F.relu_``,
    ``Tensor.add_``, ``operator.iadd``), or None when `fn` is not one with a known version."""
    if fn in _INPLACE_OPERATORS:
        return _INPLACE_OPERATORS[fn]
    name = getattr(fn, "__name__", "")
    if not name.endswith("_") or name.endswith("__") or name in _NOT_MUTATING:
        return None
    for space in (torch, torch.nn.functional, torch.Tensor):
        if getattr(space, name, None) is fn:
            return getattr(space, name[:-1], None)
    return None


def _without_inplace_flag(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                          ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """(args, kwargs) of a call ``fn(..., inplace=True)`` with ``inplace=False``; None when the call
    is not in place."""
    if kwargs.get("inplace") is True:
        return args, {**kwargs, "inplace": False}
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):  # no Python signature (a builtin), or not bindable
        return None
    if bound.arguments.get("inplace") is not True:
        return None
    bound.arguments["inplace"] = False
    return bound.args, bound.kwargs


def _make_out_of_place(gm: fx.GraphModule, n: fx.Node) -> bool:
    """Turn `n` into the out-of-place version of its op when it is a known in-place op on its
    first argument; True when it was changed."""
    if n.op == "call_method":
        method = str(n.target)
        if not method.endswith("_") or method.endswith("__") or method in _NOT_MUTATING \
                or not hasattr(torch.Tensor, method[:-1]):
            return False
        n.target = method[:-1]
        return True
    if n.op == "call_function":
        fn = _out_of_place_function(n.target)
        if fn is not None:
            n.target = fn
            return True
        call = _without_inplace_flag(n.target, tuple(n.args), dict(n.kwargs))
        if call is None:
            return False
        n.args, n.kwargs = call
        return True
    if n.op == "call_module":
        mod = gm.get_submodule(str(n.target))
        copied = out_of_place_module(mod)
        if copied is mod:
            return False
        target = "memsched_out_of_place_" + str(n.target).replace(".", "_")
        gm.add_submodule(target, copied)
        n.target = target
        return True
    return False


def _updates_in_place(n: fx.Node) -> bool:
    """Whether the call_* node `n` is an in-place op on its first argument (``t.mul_(2)``,
    ``torch.relu_(t)``, ``operator.iadd``, ``inplace=True``); call_module nodes are not (a module such
    as BatchNorm updates its own buffers, which the executor handles)."""
    if n.op == "call_method":
        method = str(n.target)
        return method.endswith("_") and not method.endswith("__") and method not in _NOT_MUTATING
    if n.op == "call_function":
        return _out_of_place_function(n.target) is not None \
            or _without_inplace_flag(n.target, tuple(n.args), dict(n.kwargs)) is not None
    return False


def check_state_updates(gm: fx.GraphModule, block: int | str) -> None:
    """Refuse (`InputError`, one line naming block `block` and the tensor) a traced block whose forward
    updates a parameter or buffer in place by an op of its own (``self.s.mul_(2.0)``): fx runs such an
    update on a buffer once while tracing and records no node for it (`trace_block` puts the value
    back), and one on a parameter becomes a node whose value aliases it, folded as a view that the
    executor computes only when a consumer reads it; either way a step would not update the state
    as the module's own forward does. Modules that update their own buffers (BatchNorm's running
    statistics: one call_module node each) are run by the executor and allowed."""
    updated = gm.meta.get(UPDATED_BUFFERS) or []
    if updated:
        raise InputError(f"block {block}: its forward updates the buffer {updated[0]} in place (or rebinds it), "
                         "which the graph export cannot trace and the graph executor would never run: update it "
                         "outside forward (e.g. in the training loop after the step)")
    for n in gm.graph.nodes:
        first = n.args[0] if n.args else None
        if not isinstance(first, fx.Node) or first.op != "get_attr" or not _updates_in_place(n):
            continue
        value: Any = gm
        for part in str(first.target).split("."):
            value = getattr(value, part, None)
        kind = "parameter" if isinstance(value, nn.Parameter) else "buffer"
        raise InputError(f"block {block}: fx node {n.name} ({op_label(n)}) updates the {kind} {first.target} in "
                         "place inside forward, which the graph executor would never run: update it outside "
                         "forward (e.g. in the training loop after the step)")


def op_label(n: fx.Node) -> str:
    """The op of the call_* node `n` as a user wrote it (method, function or module path)."""
    if n.op == "call_function":
        return getattr(n.target, "__name__", str(n.target))
    return str(n.target)


def functionalize(gm: fx.GraphModule) -> None:
    """Replace, in place in `gm`, each in-place op on a computed tensor (``x.add_(y)``,
    ``torch.relu_(x)``, ``F.relu(x, inplace=True)``, ``nn.ReLU(inplace=True)``, ``x += y``)
    by its out-of-place version, and let the nodes after it that read the mutated tensor read
    its result (``node.meta[FUNCTIONALIZED]``: the original op's name). The values are those of the original
    unless another value aliases the mutated tensor (a view of it, or it a view of another
    value, read after the op): the export checks that on its real run. In-place ops on
    parameters and buffers (``get_attr``) are left as they are: `check_state_updates` refuses them."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    changed = False
    for n in list(gm.graph.nodes):
        first = n.args[0] if n.args else None
        original = op_label(n)
        if not isinstance(first, fx.Node) or first.op == "get_attr" or not _make_out_of_place(gm, n):
            continue
        n.meta[FUNCTIONALIZED] = original
        changed = True
        for user in list(first.users):
            if user is not n and order[user] > order[n]:
                user.replace_input_with(first, n)
    if changed:
        gm.recompile()


class Plan:
    """The steps of every block, the graph index -> step map, and the network output."""

    def __init__(self, blocks: Sequence[nn.Module], graph: Graph) -> None:
        self.blocks = list(blocks)
        self.graph = graph
        self.steps: dict[fx.Node | BlockRef, Step] = {}
        self.ops: dict[int, Step] = {}
        self.block_output: list[Any] = []  # per block: the fx arg of its output node (or its whole-block key)
        self.block_input: dict[fx.Node, int] = {}  # placeholder -> block
        self.output: Any = None
        #: (block, fx op, target) of every traced node in order ((block, "block", class name) for a
        #: whole block): what a trace in another training mode must repeat (`plan_structure`)
        self.structure: list[tuple[int, str, Any]] = []

    # ------------------------------------------------------------------ resolving values
    def resolve(self, ref: Any, value_of: Callable[[int], Any], network_input: Any,
                memo: dict[Any, Any] | None = None) -> Any:
        """The value of `ref` (an fx node, a whole-block key, or a container of them)."""
        memo = {} if memo is None else memo
        return fx.node.map_aggregate(ref, lambda r: self._resolve_one(r, value_of, network_input, memo))

    def _resolve_one(self, ref: Any, value_of: Callable[[int], Any], x: Any, memo: dict[Any, Any]) -> Any:
        if isinstance(ref, NetworkInput):
            return x
        if not isinstance(ref, (fx.Node, BlockRef)):
            return ref
        if ref in memo:
            return memo[ref]
        if isinstance(ref, fx.Node) and ref in self.block_input:
            b = self.block_input[ref]
            out = x if b == 0 else self.resolve(self.block_output[b - 1], value_of, x, memo)
        else:
            step = self.steps[ref]
            if step.kind == OP:
                assert step.index is not None
                out = value_of(step.index)
            elif step.kind == STATIC:
                out = step.value
            elif step.kind == "get_attr":
                out = step.value
            else:  # a view: evaluated from its inputs
                assert step.fn is not None
                args = self.resolve(step.args, value_of, x, memo)
                kwargs = self.resolve(step.kwargs, value_of, x, memo)
                out = step.fn(*args, **kwargs)
        memo[ref] = out
        return out

    def inputs_of(self, step: Step) -> list[int]:
        """Graph indices of the op nodes whose values `step`'s arguments read (through views)."""
        found: list[int] = []
        seen: set[Any] = set()

        def visit(ref: Any) -> None:
            if isinstance(ref, (fx.Node, BlockRef)):
                if ref in seen:
                    return
                seen.add(ref)
                if isinstance(ref, fx.Node) and ref in self.block_input:
                    b = self.block_input[ref]
                    if b > 0:
                        fx.node.map_aggregate(self.block_output[b - 1], visit)
                    return
                s = self.steps[ref]
                if s.kind == OP:
                    if s.index not in found:
                        found.append(int(s.index))  # type: ignore[arg-type]
                elif s.kind == VIEW:
                    fx.node.map_aggregate((s.args, s.kwargs), visit)
            return None

        fx.node.map_aggregate((step.args, step.kwargs), visit)
        return found


def node_callable(gm: fx.GraphModule, n: fx.Node) -> tuple[Callable[..., Any], list[nn.Parameter]]:
    """(what computes the call_* node `n`, the parameters of its module, frozen or not: which
    train is read when the step runs). A node traced under ``torch.no_grad()`` (`trace_block`)
    is computed without grad: its output needs no gradient, as in the module's own forward, and
    it has no parameters to train."""
    params: list[nn.Parameter] = []
    fn: Callable[..., Any]
    if n.op == "call_module":
        mod = gm.get_submodule(str(n.target))
        fn, params = mod, list(mod.parameters())
    elif n.op == "call_function":
        fn = n.target  # type: ignore[assignment]
    else:
        method = str(n.target)

        def fn(obj: Any, *a: Any, **k: Any) -> Any:
            return getattr(obj, method)(*a, **k)
    if n.meta.get(GRAD_ENABLED, True):
        return fn, params
    inner = fn

    def without_grad(*a: Any, **k: Any) -> Any:
        with torch.no_grad():
            return inner(*a, **k)

    return without_grad, []


def _buffers_read(plan: Plan, refs: Any) -> list[torch.Tensor]:
    """The non-parameter tensors an op with the argument nodes `refs` is handed directly as
    ``get_attr`` values (registered buffers, BatchNorm's running statistics), each once."""
    found: list[torch.Tensor] = []
    for ref in tree_flatten(refs)[0]:
        step = plan.steps.get(ref) if isinstance(ref, fx.Node) else None
        value = None if step is None or step.kind != "get_attr" else step.value
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) \
                and all(value is not t for t in found):
            found.append(value)
    return found


def _parameters_read(plan: Plan, refs: Any) -> list[nn.Parameter]:
    """The parameters (frozen or not) that an op with the argument nodes `refs` reads: directly
    (``get_attr``) or through view nodes (``self.weight.t()``: the gradient reaches the parameter
    through the view), each once."""
    found: list[nn.Parameter] = []
    stack = [r for r in tree_flatten(refs)[0] if isinstance(r, fx.Node)]
    seen: set[fx.Node] = set()
    while stack:
        node = stack.pop()
        if node in seen or node not in plan.steps:
            continue
        seen.add(node)
        step = plan.steps[node]
        value = step.value
        if step.kind == "get_attr" and isinstance(value, nn.Parameter):
            if all(value is not p for p in found):
                found.append(value)
        elif step.kind == VIEW:
            stack += [r for r in tree_flatten((step.args, step.kwargs))[0] if isinstance(r, fx.Node)]
    return found


def build_plan(blocks: Sequence[nn.Module], graph: Graph, example_input: torch.Tensor) -> Plan:
    """Trace `blocks` as `models.graph.export` does and map the graph's forward nodes onto them
    (a plain no-grad forward of `example_input` computes the static values). Raises
    ValueError when a forward node of the graph has no fx node of that name or the reverse.
    The blocks' buffers and torch's random generators are left as they were (that forward runs
    in the blocks' own mode: in training mode it would count an extra batch in BatchNorm's
    running statistics, and its dropouts would draw from the CPU and CUDA generators, so a step
    seeded before the plan is built would not get plain autograd's masks): the buffers are saved
    before it and restored after it, the generators forked (`torch.random.fork_rng`), also when
    it raises."""
    saved = snapshot_buffers(blocks)
    try:
        with torch.random.fork_rng(devices=_cuda_devices(blocks, example_input)):
            return _build_plan(blocks, graph, example_input)
    finally:
        restore_buffers(saved)


def plan_structure(blocks: Sequence[nn.Module], graph: Graph) -> list[tuple[int, str, Any]]:
    """`Plan.structure` of `blocks` traced now (in their training modes now), without building the
    plan: a forward may read ``self.training``, and fx bakes it in as a constant (a dropout's
    ``training`` argument) or as the nodes it traces (``if self.training: x = dropout(x)``)."""
    names = {name for i, name in enumerate(graph.names) if not graph.backward[i]}
    out: list[tuple[int, str, Any]] = []
    for b, block in enumerate(blocks):
        whole = f"{b}:{type(block).__name__}"
        gm = None if whole in names else trace_block(block)
        out += [(b, "block", type(block).__name__)] if gm is None else [(b, n.op, n.target) for n in gm.graph.nodes]
    return out


def _cuda_devices(blocks: Sequence[nn.Module], example_input: Any) -> list[torch.device]:
    """The CUDA devices whose generators a forward of `blocks` on `example_input` may draw from:
    those of the input and of every parameter and buffer (empty on a CPU-only network)."""
    tensors = [example_input] if isinstance(example_input, torch.Tensor) else []
    for block in blocks:
        tensors += [*block.parameters(), *block.buffers()]
    return sorted({t.device for t in tensors if t.device.type == "cuda"}, key=str)


def _build_plan(blocks: Sequence[nn.Module], graph: Graph, example_input: torch.Tensor) -> Plan:
    """`build_plan` without the buffer restore."""
    plan = Plan(blocks, graph)
    names = {name: i for i, name in enumerate(graph.names) if not graph.backward[i]}
    env: dict[Any, Any] = {}
    a: Any = example_input.detach()
    with torch.no_grad():
        for b, block in enumerate(blocks):
            whole = f"{b}:{type(block).__name__}"
            gm = None if whole in names else trace_block(block)
            if gm is not None:
                check_state_updates(gm, b)
            if gm is None:
                if whole not in names:
                    raise ValueError(f"block {b} ({type(block).__name__}) is not a node of graph {graph.name!r}")
                key = BlockRef(b)
                prev = plan.block_output[b - 1] if b else None
                step = Step(b, OP, out_of_place_module(block), (prev,) if b else (), {}, names.pop(whole),
                            params=list(block.parameters()), name=whole)
                if not b:
                    step.args = (NetworkInput(),)
                plan.steps[key] = step
                plan.ops[int(step.index)] = step  # type: ignore[arg-type]
                value = step.fn(a)  # type: ignore[misc]
                step.out_bytes = _new_storage_bytes(value, a)
                a = value
                plan.block_output.append(key)
                plan.structure.append((b, "block", type(block).__name__))
                continue
            for n in gm.graph.nodes:
                plan.structure.append((b, n.op, n.target))
                if n.op == "placeholder":
                    plan.block_input[n] = b
                    env[n] = a
                    continue
                if n.op == "output":
                    plan.block_output.append(n.args[0])
                    a = fx.node.map_arg(n.args[0], lambda m: env[m])
                    continue
                if n.op == "get_attr":
                    value = gm
                    for part in str(n.target).split("."):
                        value = getattr(value, part)
                    plan.steps[n] = Step(b, "get_attr", value=value)
                    env[n] = value
                    continue
                fn, params = node_callable(gm, n)
                args = fx.node.map_arg(n.args, lambda m: env[m])
                kwargs = fx.node.map_arg(n.kwargs, lambda m: env[m])
                value = fn(*args, **kwargs)
                env[n] = value
                name = f"{b}.{n.name}"
                has_tensor = any(isinstance(t, torch.Tensor) for t in tree_flatten(value)[0])
                if n.target is operator.getitem and not any(isinstance(t, torch.Tensor) for t in tree_flatten(args)[0]):
                    has_tensor = False
                if name in names:
                    step = Step(b, OP, fn, n.args, dict(n.kwargs), names.pop(name), params=params, name=name)
                    known = {id(p) for p in step.params}
                    if n.meta.get(GRAD_ENABLED, True):  # a node computed without grad trains nothing
                        step.params += [p for p in _parameters_read(plan, (n.args, n.kwargs)) if id(p) not in known]
                    step.buffers = _buffers_read(plan, (n.args, n.kwargs))
                    step.out_bytes = _new_storage_bytes(value, (args, kwargs))
                    plan.ops[int(step.index)] = step  # type: ignore[arg-type]
                elif has_tensor:
                    step = Step(b, VIEW, fn, n.args, dict(n.kwargs), name=name)
                else:
                    step = Step(b, STATIC, value=value, name=name)
                plan.steps[n] = step
    if names:
        raise ValueError(f"graph {graph.name!r} has forward nodes the network does not compute: {sorted(names)[:3]}")
    plan.output = plan.block_output[-1] if plan.block_output else None
    return plan




def _new_storage_bytes(value: Any, inputs: Any) -> int:
    """Bytes of the distinct storages of `value`'s non-empty tensors that are none of `inputs`'
    storages: an op's output as the export records it (`models.graph.export`, ``out_bytes``)."""
    in_keys = {storage_key(t) for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.numel()}
    found: dict[int, int] = {}
    for t in tree_flatten(value)[0]:
        if isinstance(t, torch.Tensor) and t.numel() and storage_key(t) not in in_keys:
            found[storage_key(t)] = int(t.untyped_storage().nbytes())
    return sum(found.values())


def output_size_mismatch(plan: Plan, graph: Graph) -> tuple[str, int, int] | None:
    """(name, recorded bytes, computed bytes) of the first forward node whose output in `plan` (on its
    example input, `Step.out_bytes`) is not the one `graph` records, or None. A graph exported with
    ``ram="output"`` records it as the node's cost_ram; with ``ram="tape"`` every export records it in
    ``meta["outputs"]`` (forward node name -> bytes of its output alone). A tape graph written before
    that records it in ``meta["untaped"]`` where the executor keeps more (measured exports only), and
    else its cost_ram holds output and tape: there the output may not exceed it. A graph whose
    ``meta["ram"]`` is neither (not an export) is not checked. A ``meta["outputs"]`` that is not an
    object of node names -> whole numbers of bytes >= 0 is an `InputError` naming the entry."""
    ram = graph.meta.get("ram")
    if ram not in ("output", "tape"):
        return None
    exact: dict[str, int] = {}
    if ram == "tape":
        untaped = graph.meta.get("untaped")
        exact.update(untaped if isinstance(untaped, dict) else {})
        exact.update(_recorded_outputs(graph.meta.get("outputs")))
    for v in sorted(plan.ops):
        step = plan.ops[v]
        known = ram == "output" or step.name in exact
        recorded = int(graph.cost_ram[v] if step.name not in exact else exact[step.name])
        if (step.out_bytes != recorded) if known else (step.out_bytes > recorded):
            return step.name, recorded, step.out_bytes
    return None


def _recorded_outputs(outputs: Any) -> dict[str, int]:
    """A tape graph's ``meta["outputs"]`` (None: {}), checked: an object of whole numbers of bytes >= 0,
    else an `InputError` naming ``graph.meta.outputs`` or the entry."""
    if outputs is None:
        return {}
    if not isinstance(outputs, dict):
        raise InputError("must be an object of node names -> bytes", field="graph.meta.outputs")
    for name, value in outputs.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0 or value != int(value):
            raise InputError(f"must be an integer number of bytes >= 0, got {value!r}",
                             field=f"graph.meta.outputs.{name}")
    return {str(name): int(value) for name, value in outputs.items()}
