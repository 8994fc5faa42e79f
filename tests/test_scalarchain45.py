"""Python scalars on a chain stage's tape: the allocator's prediction charges them (models.chain).

``h * 1.1`` with a tape makes autograd save the scalar as a 0-dim double tensor (8 B) that no aten
op returns, so `LiveTensorTracker` never sees it while the CPU allocator holds it from F_all(i) to
B(i). ``memsched run`` of Linear, 4 blocks of 5 ``tanh(h * 1.1)``, Linear measured the allocator's
peak 160 B above its prediction at store-all (2,564 B against 2,404 B) and rotor's smallest budget
(964 B) ran at 1,004 B, with no warning; the join executor was off the same way. The profiler now
puts those bytes in the allocator's tape sizes (the chain's ``tape_size``), the tracker's kept in
``meta["overheads"]["tracker"]["tape_size"]`` for `tracker_chain`: allocator and tracker both exact.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.overheads import tracker_chain  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from memsched.solvers.chain.dp import solve_rotor  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

MULS = 5  # scalars per block: 8 B each on its tape


class _Blk(nn.Module):
    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for _ in range(MULS):
            h = torch.tanh(h * 1.1)
        return h


def _blocks() -> list[nn.Module]:
    torch.manual_seed(0)
    return [nn.Linear(6, 6), _Blk(), _Blk(), _Blk(), _Blk(), nn.Linear(6, 3)]


def _smallest_rotor_budget(chain, hi: int) -> int:
    """The least budget (bytes) at which rotor finds a schedule (bisection; feasible at `hi`)."""
    lo = 0
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if solve_rotor(chain, mid).found else (mid, hi)
    return hi


@pytest.mark.parametrize("release", [False, True])
def test_chain_allocator_prediction_charges_the_scalars_a_tape_keeps(release: bool) -> None:
    blocks = _blocks()
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    chain = profile_chain(blocks, F.cross_entropy, x, y, repeats=1, warmup=0, timing="isolated", release=release)
    executor = ChainExecutor(blocks, F.cross_entropy)
    full = store_all_schedule(chain.length)
    store_all = executor.step(full, x, y, chain=chain, independent=True, measure_time=False)
    smallest = _smallest_rotor_budget(chain, int(store_all.predicted_peak))
    rotor = solve_rotor(chain, smallest).schedule
    low = executor.step(rotor, x, y, chain=chain, independent=True, measure_time=False)
    assert low.predicted_peak <= smallest < store_all.predicted_peak
    for step in (store_all, low):
        assert step.independent_peak == step.predicted_peak  # the allocator's, scalars included
        assert step.peak_memory == step.tracker_predicted_peak  # the tracker's, unchanged
        assert step.predicted_peak - step.tracker_predicted_peak >= 8 * MULS
    tracker = tracker_chain(chain)  # the allocator's tapes hold the block's scalars, the tracker's do not
    assert [int(b) for b in chain.xbar - tracker.xbar] == [0, 0] + [8 * MULS] * 4 + [0, 0]
    assert list(chain.x) == list(tracker.x)


class _TempFirst(nn.Module):
    """A no-grad temporary (8 copies of the input) freed before the scalar is saved: the tracker's
    F_all peak comes before the tape holds the scalar."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            t = torch.cat([h.detach()] * 8)
            s = t.sum()
        del t
        return torch.tanh(h * 1.1 + 0 * s)


@pytest.mark.parametrize("release", [False, True])
def test_a_peak_before_the_scalars_is_not_charged_them_twice(release: bool) -> None:
    torch.manual_seed(0)
    blocks = [nn.Linear(6, 6), _TempFirst(), _TempFirst(), nn.Linear(6, 3)]
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    chain = profile_chain(blocks, F.cross_entropy, x, y, repeats=1, warmup=0, timing="isolated", release=release)
    step = ChainExecutor(blocks, F.cross_entropy).step(store_all_schedule(chain.length), x, y, chain=chain,
                                                       independent=True, measure_time=False)
    assert step.independent_peak == step.predicted_peak  # was 8 B above: o_fa counted the scalar again
    assert step.peak_memory == step.tracker_predicted_peak


def test_a_profile_without_such_scalars_records_no_tracker_tapes() -> None:
    torch.manual_seed(0)
    blocks = [nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3)]
    chain = profile_chain(blocks, F.cross_entropy, torch.randn(4, 6), torch.randint(0, 3, (4,)), repeats=1,
                          warmup=0, timing="isolated")
    assert "tape_size" not in chain.meta["overheads"]["tracker"]
    assert list(tracker_chain(chain).xbar) == list(chain.xbar)


def _join_loss(outs, target):
    return (outs[0] * outs[1]).sum()


@pytest.mark.parametrize("budget", ["100%", "60%"])
def test_join_allocator_prediction_charges_the_scalars_a_tape_keeps(budget: str) -> None:
    from memsched.models.join.zoo import JoinModel
    from memsched.models.run import run

    torch.manual_seed(0)
    branches = [[nn.Linear(6, 6), _Blk(), _Blk(), nn.Linear(6, 3)] for _ in range(2)]
    model = JoinModel(branches, [torch.randn(4, 6), torch.randn(4, 6)], _join_loss, None, "scalarjoin", ["a", "b"])
    out = run(model, budget, problem="join", profile_repeats=1, time_repeats=1, store_all=False)
    assert out["status"] == "optimal" and out["grad_check"]
    predicted, measured = out["predicted"], out["measured"]
    assert measured["independent_peak"] == predicted["peak_memory"]
    assert measured["peak_memory"] == predicted["tracker_peak_memory"]
    assert predicted["peak_memory"] > predicted["tracker_peak_memory"]
