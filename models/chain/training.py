"""Train with a schedule: `ScheduledChain`, a module whose ``step`` runs one forward/backward
under a chain schedule (rotor's, the MILP's, any valid one) instead of plain autograd.

    net = ScheduledChain(model, result, loss_fn=F.cross_entropy)   # result = memsched.solve(...)
    for x, y in loader:
        opt.zero_grad()
        loss = net.step(x, y)      # forward + backward under the schedule; .grad filled
        opt.step()

The gradients are plain autograd's (the executor's rules, `models.chain.executor`: the RNG of
a recomputed stage is replayed, so dropout masks repeat). As with ``torch.utils.checkpoint``, a
BatchNorm in training mode updates its running statistics at every forward of its block,
recomputations included (the gradients are unaffected; the statistics used in evaluation move
faster). The schedule keeps its memory
promise for the sizes it was solved at: the profile's batch. ``net(x)`` is the plain forward
(evaluation, or plain autograd when wanted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from memsched.models.chain.executor import ChainExecutor, LossFn
from memsched.solvers.chain import Chain, Schedule, simulate
from memsched.solvers.chain.schedule import FORWARD_KINDS, Op
from memsched.solvers.errors import InputError
from torch import nn

__all__ = ["ScheduledChain"]


class ScheduledChain(nn.Module):
    """The blocks of `model` (an ``nn.Sequential``'s children, or a list of modules), trained
    by `step` under `schedule`.

    `schedule`: a chain `Schedule` (or its ops), or a `memsched.Result` / registry
    `SolveResult` whose schedule and chain are taken. `loss_fn(output, target)`: the scalar
    loss (default: the mean of the output, `models.network.mean_output_loss`). `chain`: the
    instance the schedule was solved for; its length must be the number of blocks, and the
    schedule must replay on it (checked by the simulator, without a budget); without one the
    schedule is checked on a chain of unit sizes. `input_grad`: also compute the input's
    gradient (returned by `step_with_input_grad`); off, as a training step needs none.
    """

    def __init__(self, model: nn.Module | Sequence[nn.Module], schedule: Any, loss_fn: LossFn | None = None, *,
                 chain: Chain | None = None, input_grad: bool = False) -> None:
        super().__init__()
        from memsched.models.network import checked_blocks, mean_output_loss

        blocks = checked_blocks(model, "ScheduledChain")
        self.blocks = nn.ModuleList(blocks)
        raw = getattr(schedule, "raw", schedule)  # a memsched.Result wraps the registry's SolveResult
        if hasattr(raw, "schedule") and not isinstance(raw, Schedule):
            chain = chain if chain is not None else getattr(schedule, "instance", None)
            schedule = raw.schedule
            if schedule is None:
                raise InputError("the result holds no schedule (infeasible budget?)", field="schedule")
        ops = list(schedule.ops if isinstance(schedule, Schedule) else schedule)
        if chain is not None and not isinstance(chain, Chain):
            raise InputError(f"the instance must be a chain, got {type(chain).__name__}", field="chain")
        self.chain = chain if chain is not None else _unit_chain(len(blocks))
        if self.chain.length != len(blocks):
            raise InputError(f"the schedule's chain has {self.chain.length} stages but the model {len(blocks)} blocks",
                             field="schedule")
        replay = simulate(self.chain, ops)
        if not replay.valid:
            raise InputError(f"not a valid schedule of this chain: {replay.violation}", field="schedule")
        self.ops: list[Op] = ops
        self.loss_fn = loss_fn if loss_fn is not None else mean_output_loss
        self._executor = ChainExecutor(blocks, self.loss_fn, input_grad=input_grad,
                                       release=None if chain is None else chain.has_release())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The plain forward through every block (no schedule: evaluation, or plain autograd)."""
        for block in self.blocks:
            x = block(x)
        return x

    def step(self, inputs: torch.Tensor, target: Any = None) -> torch.Tensor:
        """One forward/backward under the schedule; gradients accumulate into ``.grad`` as
        ``loss.backward()`` would leave them. Returns the loss (a detached scalar tensor)."""
        return self.step_with_input_grad(inputs, target)[0]

    def step_with_input_grad(self, inputs: torch.Tensor, target: Any = None
                             ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`step`, also returning the input's gradient delta_0 (None unless `input_grad`)."""
        if not isinstance(inputs, torch.Tensor):
            raise InputError(f"the input must be a torch.Tensor, got {type(inputs).__name__}", field="inputs")
        loss, delta0 = self._executor.train_step(self.ops, inputs, target)
        assert loss is not None  # a valid schedule runs the loss
        return loss, delta0

    def extra_repr(self) -> str:
        """The schedule in one line, for ``print(module)``."""
        recomputed = sum(1 for op in self.ops if op[0] in FORWARD_KINDS) - len(self.blocks)
        return f"{len(self.ops)} ops, {recomputed} forward recomputations"


def _unit_chain(length: int) -> Chain:
    """A chain of `length` stages (the loss apart) with unit sizes and times: enough for the
    simulator to check that a schedule is valid."""
    L = length
    return Chain(u_f=[1.0] * L + [0.0], u_b=[1.0] * (L + 1), x=[1] * (L + 1) + [0], xbar=[0] + [1] * L + [0],
                 o_f=[0] * (L + 1), o_b=[0] * (L + 1), name="unit")
