"""A B(i) that no gradient reaches frees its tape (docs/chain.md, "What a block and the loss may do").

When delta_{i+1} is None (a later block detaches its input; a join's loss ignores a branch's output),
B(i) back-propagates nothing and drops the tape abar_{i+1}. The tape's graph must then be freed at once,
as plain autograd frees an unused graph: `input_hooks` once kept a node's saved output as a `Versioned`
holding the output itself, a cycle node -> handle -> tensor -> node through autograd's C++ nodes that
``gc`` cannot collect, so every such tape stayed alive for the rest of the process (more bytes after that
B than the chain model predicts, and live tensors growing step after step).

Invariants checked (bytes; the live-tensor tracker's measurement against the simulator's per-op trace):
before the first B that yields no gradient the measurement equals the prediction; at and after it the
measurement equals the prediction less the one gradient the model charges and autograd never makes
(delta_j None: x[j] bytes for the chain's current stage j, one output's bytes for the ignored branch).
The number of live activation-shaped tensors is the same after each of 3 steps.
"""

from __future__ import annotations

import gc

import pytest
import torch
from memsched.models.chain.executor import ChainExecutor, reference_step
from memsched.models.chain.profiler import profile_chain
from memsched.models.join.executor import JoinExecutor
from memsched.models.join.profiler import profile_join_branches
from memsched.solvers.chain.baselines import periodic_schedule, store_all_schedule
from memsched.solvers.join.schedule import JoinSchedule, JOp
from torch import nn

N, D = 16, 24  # batch and width: an activation is (N, D) float32, N * D * 4 = 1,536 bytes
ACT = N * D * 4


class Detach(nn.Module):
    """A block that stops the gradient: its output does not depend on its input in autograd's graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return x.detach() * 1.0


def _mlp() -> nn.Module:
    # Tanh saves its output: the saved tensor whose handle made the cycle
    return nn.Sequential(nn.Linear(D, D), nn.Tanh()).float().train()


def _sq_loss(y: torch.Tensor, target: object) -> torch.Tensor:
    return (y ** 2).sum()


def _ignore_loss(outs: list[torch.Tensor], target: object) -> torch.Tensor:
    return (outs[0] ** 2).sum()  # branch 1's output gets no gradient


def _live_activations() -> int:
    """Live tensors of an activation's shape (weights are (D, D) or (D,): never counted)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor) and tuple(o.shape) == (N, D))


@pytest.mark.parametrize("release", [False, True])
def test_chain_detaching_block_frees_the_tapes_before_it(release: bool) -> None:
    torch.manual_seed(0)
    blocks = [_mlp(), _mlp(), Detach(), _mlp()]
    stop = 2  # delta_2 = the gradient of Detach's input: None, and none reaches blocks 0..1
    x = torch.randn(N, D)
    chain = profile_chain(blocks, _sq_loss, x, None, repeats=1, warmup=0, release=release, cost="flops")
    executor = ChainExecutor(blocks, _sq_loss, release=release)
    L = len(blocks)
    for schedule in (store_all_schedule(L), periodic_schedule(L, 2)):
        res = executor.step(schedule, x, None, chain=chain, trace=True, measure_time=False)
        missing = 0  # bytes of the delta_j the model charges and autograd never makes
        for t in res.trace:
            if t.op.startswith("B(") and int(t.op[2:-1]) <= stop:
                missing = int(chain.x[int(t.op[2:-1])])
            assert t.measured_after == t.predicted_after - missing, (schedule.ops, t)
            assert t.measured_during <= t.predicted_during, (schedule.ops, t)
        assert missing == ACT  # the trace reached B(0)
        # gradients as plain autograd's: none before the stop (a measured step's zeros), the same after it
        _, ref, ref_input = reference_step(blocks, _sq_loss, x, None)
        assert res.input_grad is None and ref_input is None
        for name, g in res.grads.items():
            if int(name.split(".")[0]) < stop:
                assert name not in ref and not g.any(), name
            else:
                torch.testing.assert_close(g, ref[name])
    counts = []
    for _ in range(3):
        executor.step(store_all_schedule(L), x, None, measure_time=False, measure_memory=False)
        counts.append(_live_activations())
    assert counts[0] == counts[1] == counts[2], counts


def test_join_branch_the_loss_ignores_frees_its_tapes() -> None:
    torch.manual_seed(0)
    branches = [[_mlp(), _mlp()], [_mlp(), _mlp()]]
    inputs = [torch.randn(N, D) for _ in range(2)]
    join = profile_join_branches(branches, _ignore_loss, inputs, None, repeats=1, warmup=0)
    # branch 1 (no gradient) is back-propagated first: its tapes must be gone before branch 0's backward
    ops = [JOp("F_all", b, i) for b in (0, 1) for i in range(2)] + [JOp("Loss")] + \
          [JOp("B", 1, 1), JOp("B", 1, 0), JOp("B", 0, 1), JOp("B", 0, 0)]
    executor = JoinExecutor(branches, _ignore_loss)
    res = executor.step(JoinSchedule(ops, [2, 2]), inputs, None, join=join, trace=True, measure_time=False)
    missing = 0  # delta^1 (delta_L^1, then delta_1^1, then delta_0^1): charged, never made
    seen = []
    for t in res.trace:
        if t.op == "Loss":
            missing = ACT
        seen.append(t.op)
        assert t.measured_after == t.predicted_after - missing, t
        assert t.measured_during <= t.predicted_during, t
    assert seen[-1] == "B(0,0)" and missing == ACT
    assert res.peak_memory <= res.predicted_peak
    assert res.input_grads[1] is None and res.input_grads[0] is not None
    for name, g in res.grads.items():
        if name.startswith("1."):
            assert not g.any(), name  # plain autograd: None (a measured step's zeros)
    counts = []
    for _ in range(3):
        executor.step(ops, inputs, None, measure_time=False, measure_memory=False)
        counts.append(_live_activations())
    assert counts[0] == counts[1] == counts[2], counts
