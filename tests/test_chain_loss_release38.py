"""Hunt 38: the loss cannot free a_L when block L-1 saves its output (tanh, ReLU).

The profiler then records no ``meta.overheads.loss_released`` and the chain charges B(L-1) with
its held overhead o_b[L-1], a_L held to B(L-1)'s end (docs/chain.md). `ChainExecutor` gave up its
reference to a_L's data at the loss anyway, so tanh's backward node freed a_L inside B(L-1), before
its peak: on 6 x (Linear(16, 16) + tanh), batch 4, store-all was predicted 3,648 B and measured
3,392 B (one activation, x[L] = 256 B, below), by the tracker and the allocator probe alike. A held
B(L-1) now keeps the data the loss could not free to its end; a chain whose last block does not save
its output (GELU saves its input) still has a_L freed by the loss, as ``loss_released`` charges.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import ChainExecutor, check_gradients  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.solvers.chain import Chain, Schedule, reference_peak  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from memsched.solvers.chain.dp import solve_rotor  # noqa: E402
from torch import nn  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)

BATCH, WIDTH, DEPTH = 4, 16, 6  # every activation: 4 x 16 x 4 B = 256 B


class _Block(nn.Module):
    """Linear(WIDTH, WIDTH) then `act`: tanh saves its output, GELU its input."""

    def __init__(self, act: nn.Module) -> None:
        """`act`: the activation after the linear layer."""
        super().__init__()
        self.lin = nn.Linear(WIDTH, WIDTH)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return self.act(self.lin(x))


def _mean(y: torch.Tensor, target: object = None) -> torch.Tensor:
    """The loss: the output's mean (saves nothing of a_L)."""
    return y.mean()


def _chain(last: nn.Module) -> tuple[list[nn.Module], torch.Tensor, Chain]:
    """DEPTH - 1 Linear + tanh blocks, a last one with activation `last`, an input, their profile."""
    torch.manual_seed(0)
    blocks = [_Block(nn.Tanh()) for _ in range(DEPTH - 1)] + [_Block(last)]
    x = torch.randn(BATCH, WIDTH)
    chain = profile_chain(blocks, _mean, x, None, repeats=1, warmup=0)
    return blocks, x, chain


def _schedules(chain: Chain) -> list[Schedule]:
    """Store-all, and rotor at 80% of store-all's peak (the hunt's hm80 run)."""
    rotor = solve_rotor(chain, int(reference_peak(chain) * 0.8), slots=0)
    assert rotor.schedule is not None
    return [store_all_schedule(chain.length), rotor.schedule]


def _check(blocks: list[nn.Module], x: torch.Tensor, chain: Chain) -> list[int]:
    """Run each schedule and assert measured == predicted, tracker and allocator probe; the peaks."""
    peaks = []
    for schedule in _schedules(chain):
        step = ChainExecutor(blocks, _mean).step(schedule, x, None, chain=chain, measure_time=False,
                                                 independent=True)
        assert step.peak_memory == step.tracker_predicted_peak, (schedule.ops, step.peak_memory)
        assert step.independent_peak == step.predicted_peak, (schedule.ops, step.independent_peak)
        ok, msg = check_gradients(step, blocks, _mean, x, None, seed=0)
        assert ok, msg
        peaks.append(step.peak_memory)
    return peaks


def test_tanh_head_keeps_a_L_through_B_L_minus_1() -> None:
    blocks, x, chain = _chain(nn.Tanh())
    assert "loss_released" not in chain.meta["overheads"]  # tanh saves its output: the loss cannot free it
    peaks = _check(blocks, x, chain)
    assert peaks[0] == 3648  # 2,048 (state after the loss) + o_b[L-1] = 1,344 + delta_{L-1} = 256


def test_head_without_saved_output_still_frees_a_L_at_the_loss() -> None:
    blocks, x, chain = _chain(nn.GELU())
    assert "last_block" in chain.meta["overheads"]["loss_released"]  # GELU saves its input, not a_L
    _check(blocks, x, chain)
