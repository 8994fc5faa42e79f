"""Train any network under a general-graph schedule: `ScheduledGraph`, whose ``step`` runs one
training step node by node on the network's torch.fx training graph (`models.graph.executor`),
in the order a graph solver chose (Checkmate's MILP, the CP-SAT model, DTR, ...).

    graph = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph")
    plan = memsched.solve(graph, "70%", solver="checkmate")
    trainer = ScheduledGraph(net, plan, F.cross_entropy, example_input=x)
    for x, y in loader:                   # batches of the example's shapes
        opt.zero_grad()
        loss = trainer.step(x, y)         # forward, loss and backward under the schedule
        opt.step()

For a network that is not a chain (skips across its layers) this is what `ScheduledChain` is for
chains. The loss runs inside the schedule (it is a node of the graph), so there is no drop-in
``forward``; ``net(x)`` is the plain forward. The gradients are plain autograd's in any order of
computation: every computation of a random node (dropout) runs under the RNG state it sees in a
plain forward in the file's order, and the step leaves the generator as a plain step does
(`models.graph.executor.FileOrderRng`; each step first replays the random nodes' ops on zero
inputs of their shapes to find those states, and the first step after a change of training mode
runs a plain forward without grad; the first step in a mode traces the network in it, since fx bakes
``self.training`` in as a constant, and `InputError` naming ``training`` stops a step in a mode whose
trace is another graph than the plan's). The plan is built for the example's shape, dtype and device, and
every batch must have them (checked before anything runs: the plan holds the example's sizes as
constants). A short last batch needs ``DataLoader(drop_last=True)``, a second `ScheduledGraph`
built with an example of its shape (the same graph and schedule serve), or plain autograd. A step
computes gradients whatever the ambient grad mode (``torch.no_grad()`` included; under
``torch.inference_mode()`` it raises `InputError`). Bad input to a step (an input of another shape,
dtype or device than the example, a target the loss cannot take, a loss that is not a
differentiable scalar) raises `InputError` naming ``inputs``, ``target`` or ``loss_fn``.
Which parameters train is read at every step: freezing one after the plan is made leaves its
``.grad`` as plain autograd does; unfreezing one that was frozen when the graph was profiled
works where its node has a backward node, else `InputError` naming ``model`` asks for a new
profile and plan. A ``loss_fn`` that is an ``nn.Module`` with parameters (a learnable head)
gets their gradients too, and a forward node computed again (recomputation) leaves its modules'
buffers (BatchNorm's running statistics) as its first computation set them, as plain training does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from memsched.models.chain.executor import LossFn
from memsched.models.network import check_step_arguments, step_input_error
from memsched.solvers.errors import InputError, first_line, python_spelling
from memsched.solvers.graph import Graph, GraphSchedule
from torch import nn

__all__ = ["ScheduledGraph"]


class ScheduledGraph(nn.Module):
    """The blocks of `model` (an ``nn.Sequential``'s children, a list of modules, or one module)
    trained by `step` under a graph schedule.

    `schedule`: a `GraphSchedule` (or its node indices) with `graph`, or a `memsched.Result` /
    registry `SolveResult` of the graph problem, whose schedule and graph are taken. `graph`:
    the training graph exported from this model (`memsched.profile(..., problem="graph")`,
    `models.graph.export`); its node names must be the model's fx nodes. `loss_fn(output,
    target)`: a callable returning the scalar loss (default: the mean of the output; anything
    else is bad input). `example_input`: a batch of the shapes the steps will run on.
    """

    def __init__(self, model: nn.Module | Sequence[nn.Module], schedule: Any, loss_fn: LossFn | None = None, *,
                 example_input: torch.Tensor, graph: Graph | None = None) -> None:
        super().__init__()
        from memsched.models.graph.executor import GraphExecutor
        from memsched.models.network import checked_blocks, checked_loss_fn, schedule_and_instance

        with python_spelling():  # a Python constructor: bad input names ``model`` (not the CLI's ``MODEL``)
            blocks = checked_blocks(model, "ScheduledGraph")
        loss = checked_loss_fn(loss_fn)
        self.blocks = nn.ModuleList(blocks)
        schedule, graph = schedule_and_instance(schedule, graph, GraphSchedule)
        if not isinstance(graph, Graph):
            raise InputError(f"needs the training graph the schedule was solved on, got {type(graph).__name__}",
                             field="graph")
        if not isinstance(example_input, torch.Tensor):
            raise InputError(f"must be a torch.Tensor, got {type(example_input).__name__}", field="example_input")
        if isinstance(schedule, GraphSchedule):
            seq = schedule.indices(graph)
        elif isinstance(schedule, (list, tuple)) and all(isinstance(v, int) for v in schedule):
            seq = [int(v) for v in schedule]
        else:
            raise InputError(f"expected a graph schedule (a GraphSchedule, its node indices, or a graph Result), got "
                             f"{type(schedule).__name__}", field="schedule")
        self._own_loss = loss_fn is not None
        self.loss_fn = loss
        try:
            self._executor = GraphExecutor(blocks, self.loss_fn, graph, example_input)
            self._executor.prepare(seq, example_input)  # the simulator's check, before any step
        except (ValueError, KeyError, IndexError, RuntimeError) as err:  # the plan maps the graph onto the model
            raise InputError(f"the graph or schedule does not fit this model: {first_line(err) or type(err).__name__}",
                             field="schedule") from None
        self.graph = graph
        self.seq: list[int] = seq
        self._example = (tuple(example_input.shape), example_input.dtype, example_input.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The plain forward through every block (the schedule runs in `step`)."""
        for block in self.blocks:
            x = block(x)
        return x

    def step(self, inputs: torch.Tensor, target: Any = None) -> torch.Tensor:
        """One forward, loss and backward under the schedule; gradients accumulate into ``.grad``
        as ``loss.backward()`` would leave them. Returns the loss (a scalar tensor, detached, in the
        loss function's dtype and device). InputError under ``torch.inference_mode()``, where no
        gradient can be computed."""
        if torch.is_inference_mode_enabled():
            raise InputError("ScheduledGraph.step is a training step (it computes gradients) and cannot run under "
                             "torch.inference_mode(): call it outside that context")
        check_step_arguments("ScheduledGraph", list(self.blocks), inputs, target, self._own_loss)
        self._check_like_example(inputs, target)
        try:
            loss = self._executor.train_step(self.seq, inputs, target)
        except InputError:
            raise
        except Exception:  # the user's input, or a bug (kept as it is)
            found = step_input_error(list(self.blocks), self.loss_fn, inputs, target, "")
            if found is None:
                raise
            raise found from None
        return loss

    def _check_like_example(self, inputs: torch.Tensor, target: Any) -> None:
        """InputError naming ``inputs`` unless `inputs` has the example's shape, dtype and device:
        the plan holds the example's sizes as constants (``h.size(0)``, reshapes), so another
        batch size would run silently with wrong ones. When the plain forward or the loss fails on
        the input too, their diagnosis (`step_input_error`) is the error."""
        given = (tuple(inputs.shape), inputs.dtype, inputs.device)
        if given == self._example:
            return
        found = step_input_error(list(self.blocks), self.loss_fn, inputs, target, "")
        if found is not None:
            raise found

        def describe(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> str:
            return f"{shape} ({str(dtype).replace('torch.', '')} on {device})"

        raise InputError(f"the plan was made for inputs of shape {describe(*self._example)}, got {describe(*given)}; "
                         "for a short last batch use DataLoader(drop_last=True) or a second ScheduledGraph with an "
                         "example_input of that shape", field="inputs")

    def extra_repr(self) -> str:
        """The schedule in one line, for ``print(module)``."""
        return f"{len(self.seq)} node computations, {len(self.seq) - len(set(self.seq))} recomputations"
