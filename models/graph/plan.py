"""The executable plan of a training graph: which fx node of which block computes each graph node.

`models.graph.export` turns every block of a network into ``torch.fx`` nodes and keeps as graph
node F_v each fx node that allocates a new storage, named ``"<block>.<fx node name>"`` (a
block fx cannot trace, or every block with ``granularity="module"``, is one node
``"<block>:<class name>"``). `build_plan` traces the same blocks the same way and classifies
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

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.solvers.graph import Graph
from torch import fx, nn
from torch.utils._pytree import tree_flatten

__all__ = ["Plan", "Step", "BlockRef", "NetworkInput", "build_plan", "STATIC", "VIEW", "OP"]

STATIC, VIEW, OP = "static", "view", "op"


@dataclass
class Step:
    """One fx node of block `block` (or the whole block when `node` is None): its kind, callable,
    argument template (fx nodes inside, resolved at run time), graph index (ops) or constant
    value (static nodes), and the parameters its backward yields gradients for."""

    block: int
    kind: str
    fn: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    index: int | None = None
    value: Any = None
    params: list[nn.Parameter] = field(default_factory=list)
    name: str = ""


@dataclass(frozen=True)
class BlockRef:
    """The output of block `block` when the whole block is one graph node."""

    block: int


@dataclass(frozen=True)
class NetworkInput:
    """Stands for the network input in the arguments of a whole first block."""


def _trace(block: nn.Module) -> fx.GraphModule | None:
    try:
        return fx.symbolic_trace(block)
    except Exception:  # noqa: BLE001 (fx raises many kinds on untraceable code)
        return None


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


def _callable(gm: fx.GraphModule, n: fx.Node) -> tuple[Callable[..., Any], list[nn.Parameter]]:
    if n.op == "call_module":
        mod = gm.get_submodule(str(n.target))
        return mod, [p for p in mod.parameters() if p.requires_grad]
    if n.op == "call_function":
        return n.target, []  # type: ignore[return-value]
    method = str(n.target)

    def call(obj: Any, *a: Any, **k: Any) -> Any:
        return getattr(obj, method)(*a, **k)

    return call, []


def build_plan(blocks: Sequence[nn.Module], graph: Graph, example_input: torch.Tensor) -> Plan:
    """Trace `blocks` as `models.graph.export` does and map the graph's forward nodes onto them
    (a plain no-grad forward of `example_input` computes the static values). Raises
    ValueError when a forward node of the graph has no fx node of that name or the reverse."""
    plan = Plan(blocks, graph)
    names = {name: i for i, name in enumerate(graph.names) if not graph.backward[i]}
    env: dict[Any, Any] = {}
    a: Any = example_input.detach()
    with torch.no_grad():
        for b, block in enumerate(blocks):
            whole = f"{b}:{type(block).__name__}"
            gm = None if whole in names else _trace(block)
            if gm is None:
                if whole not in names:
                    raise ValueError(f"block {b} ({type(block).__name__}) is not a node of graph {graph.name!r}")
                key = BlockRef(b)
                prev = plan.block_output[b - 1] if b else None
                step = Step(b, OP, block, (prev,) if b else (), {}, names.pop(whole),
                            params=[p for p in block.parameters() if p.requires_grad], name=whole)
                if not b:
                    step.args = (NetworkInput(),)
                plan.steps[key] = step
                plan.ops[int(step.index)] = step  # type: ignore[arg-type]
                a = block(a)
                plan.block_output.append(key)
                continue
            for n in gm.graph.nodes:
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
                fn, params = _callable(gm, n)
                args = fx.node.map_arg(n.args, lambda m: env[m])
                kwargs = fx.node.map_arg(n.kwargs, lambda m: env[m])
                value = fn(*args, **kwargs)
                env[n] = value
                name = f"{b}.{n.name}"
                has_tensor = any(isinstance(t, torch.Tensor) for t in tree_flatten(value)[0])
                if fn is operator.getitem and not any(isinstance(t, torch.Tensor) for t in tree_flatten(args)[0]):
                    has_tensor = False
                if name in names:
                    step = Step(b, OP, fn, n.args, dict(n.kwargs), names.pop(name), params=params, name=name)
                    step.params += [v for v in tree_flatten((args, kwargs))[0]
                                    if isinstance(v, nn.Parameter) and v.requires_grad and v not in step.params]
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


