"""Hunt 26: the tracker's prediction of B(L-1) once the loss has freed a_L.

`ChainExecutor` frees a_L's data during the loss when block L-1 does not save its output (a linear
head), so B(L-1) runs x[L] bytes below the state the chain charges (xbar[L], a_L included, until
B(L-1) ends). The profile measured B(L-1) holding a_L, so both predictions (the tracker's and the
allocator probe's) were x[L] above the measured peak whenever B(L-1) was the peak (resnet18 at
batch 2, 32 px, width 8: 8,000 B, the head's output). The profiler now measures B(L-1) as the
executor runs it (``meta.overheads.loss_released.last_block``) and `released_loss_chain` charges it
for the schedules whose loss frees the tape's a_L (`loss_frees_tape`: F_all(L-1), Loss, B(L-1)); after
a loss on a standalone a_L (recompute-all) B(L-1) holds a fresh a_L and keeps the held overhead.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain import overheads  # noqa: E402
from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.overheads import released_loss_chain, tracker_chain  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.solvers.chain import Chain, reference_peak, simulate  # noqa: E402
from memsched.solvers.chain.baselines import recompute_all_schedule, store_all_schedule  # noqa: E402
from memsched.solvers.chain.dp import solve_rotor  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

BATCH, WIDTH, CLASSES = 16, 64, 500  # the head's output a_L: 16 x 500 x 4 B = 32,000 B


def _net() -> tuple[list[nn.Module], torch.Tensor, torch.Tensor]:
    """Blocks (linear + ReLU, then a linear head whose weight gradient dominates: B(L-1) is the peak),
    an input and its class targets."""
    torch.manual_seed(0)
    blocks: list[nn.Module] = [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(4)]
    blocks.append(nn.Linear(WIDTH, CLASSES))
    x = torch.randn(BATCH, WIDTH)
    return blocks, x, torch.randint(0, CLASSES, (BATCH,))


@pytest.fixture(scope="module")
def profiled() -> tuple[list[nn.Module], torch.Tensor, torch.Tensor, Chain]:
    blocks, x, target = _net()
    chain = profile_chain(blocks, F.cross_entropy, x, target, repeats=1, warmup=0, timing="isolated")
    return blocks, x, target, chain


def _step(profiled, ops):
    blocks, x, target, chain = profiled
    return ChainExecutor(blocks, F.cross_entropy).step(ops, x, target, chain=chain, independent=True,
                                                       measure_time=False)


def test_profile_records_b_last_after_the_loss_freed_its_output(profiled) -> None:
    *_, chain = profiled
    L = chain.length
    last = chain.meta["overheads"]["loss_released"]["last_block"]
    tracker = chain.meta["overheads"]["tracker"]["bwd_overhead"]
    out = int(chain.x[L])
    # a linear head frees exactly its output's bytes; the file keeps o_b[L-1] holding a_L (offloading, joins)
    assert last["tracker"] == tracker[L - 1] - out
    assert last["bwd_overhead"] <= int(chain.o_b[L - 1]) - out
    charged = released_loss_chain(chain, store_all_schedule(L).ops)
    assert int(charged.o_b[L - 1]) == last["bwd_overhead"]
    assert tracker_chain(charged).o_b[L - 1] == last["tracker"]
    for held in (released_loss_chain(chain), released_loss_chain(chain, recompute_all_schedule(L).ops)):
        assert held.o_b[L - 1] == chain.o_b[L - 1] and tracker_chain(held).o_b[L - 1] == tracker[L - 1]


def test_store_all_predictions_equal_measurements(profiled) -> None:
    *_, chain = profiled
    ops = list(store_all_schedule(chain.length).ops)
    steps = simulate(tracker_chain(released_loss_chain(chain)), ops).steps
    assert max(range(len(steps)), key=lambda k: steps[k].mem_during) == len(ops) - chain.length  # B(L-1) peaks
    result = _step(profiled, ops)
    assert result.tracker_predicted_peak == result.peak_memory
    assert result.predicted_peak == result.independent_peak


def test_rotor_predictions_equal_measurements(profiled) -> None:
    *_, chain = profiled
    found = (solve_rotor(chain, int(f * reference_peak(chain)), slots=0) for f in (0.95, 0.97, 0.99))
    res = next((r for r in found if r.schedule is not None), None)
    assert res is not None and res.schedule is not None
    ops = list(res.schedule.ops)
    assert any(op.kind in ("F_ck", "F_n") for op in ops)  # it recomputes
    result = _step(profiled, ops)
    assert result.tracker_predicted_peak == result.peak_memory
    assert result.predicted_peak == result.independent_peak


def test_recompute_all_predictions_equal_measurements(profiled) -> None:
    # the loss reads a standalone a_L; F_all(L-1) recomputes it after: B(L-1) holds it (the held overhead)
    *_, chain = profiled
    ops = list(recompute_all_schedule(chain.length).ops)
    assert not overheads.loss_frees_tape(ops, chain.length)
    result = _step(profiled, ops)
    assert result.tracker_predicted_peak == result.peak_memory
    assert result.predicted_peak == result.independent_peak


def test_loss_frees_tape() -> None:
    assert overheads.loss_frees_tape(store_all_schedule(3).ops, 3)
    assert not overheads.loss_frees_tape(recompute_all_schedule(3).ops, 3)
    assert not overheads.loss_frees_tape([], 3)


def test_released_loss_chain_keeps_the_release_invariants() -> None:
    # a released chain (o_b < o_bh): B(L-1)'s value lowers both where lower, o_bh >= o_b stays
    chain = Chain.with_mode_overheads([1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [8, 8, 8, 0], [0, 16, 16, 0],
                                      [0, 0, 0], [0, 0, 0], [4, 2, 6], o_bh=[5, 9, 6],
                                      meta={"overheads": {"loss_released": {
                                          "bwd_overhead": 3, "last_block": {"bwd_overhead": 4}}}})
    charged = released_loss_chain(chain, store_all_schedule(2).ops)
    assert list(charged.o_b) == [4, 2, 3] and list(charged.o_bh) == [5, 4, 3]
    assert list(released_loss_chain(chain).o_b) == [4, 2, 3] and list(released_loss_chain(chain).o_bh) == [5, 9, 3]
    old = Chain.with_mode_overheads([1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [8, 8, 8, 0], [0, 16, 16, 0], [0, 0, 0],
                                    [0, 0, 0], [4, 9, 6], meta={"overheads": {"loss_released": {"bwd_overhead": 3}}})
    assert list(released_loss_chain(old, store_all_schedule(2).ops).o_b) == [4, 9, 3]  # a file without it
