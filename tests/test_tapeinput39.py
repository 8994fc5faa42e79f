"""Session 39: a chain executor's tape held its input's storage. F_all(i) keeps the tape abar_{i+1},
whose graph saved (a view of) its input a_i (a linear layer saves it for its weight's gradient), while
the chain model counts a_i apart from the tape: F_n(i) after F_all(i) frees the standalone a_i in the
simulator, and B(i) reads the a_i resident then (recomputed). The executor's tape kept a_i's bytes to
B(i), so `F_all(i) ... F_n(i)` measured x[i] bytes above the prediction (the join executor, built on
it, showed it: 152,352 B measured for 150,304 B predicted on the hunt's Siamese join). The tape now
keeps its saved input as handles of an input slot (saved-tensor hooks, as the offloading executor's)
and its leaf holds no storage until B(i)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memsched.models.chain.executor import ChainExecutor, check_gradients  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.join.executor import execute_join  # noqa: E402
from memsched.models.join.profiler import profile_join_branches  # noqa: E402
from memsched.solvers.chain import simulate  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Schedule  # noqa: E402
from memsched.solvers.join import simulate as simulate_join  # noqa: E402
from memsched.solvers.join.schedule import LOSS_OP, JoinSchedule, JOp  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402

L = 4


def _block(i: int, o: int) -> nn.Module:
    """A linear layer (saves its input) then tanh (saves its output)."""
    return nn.Sequential(nn.Linear(i, o), nn.Tanh())


def _net() -> tuple[list[nn.Module], torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    blocks = [_block(16, 128), _block(128, 64), _block(64, 64), _block(64, 8)]  # a_1 (128 wide) the largest
    return blocks, torch.randn(32, 16), torch.randint(0, 8, (32,))


#: F_all(1) then F_n(1): a_1 freed while abar_2 lives, recomputed (F_all(0)) before B(1)
FREEING = Schedule([F_ck(0), F_all(1), F_n(1), F_all(2), F_all(3), Loss(L), Bwd(3), Bwd(2), F_all(0), Bwd(1),
                    Bwd(0)], L)
#: the same without F_n(1): a_1 stays to B(1)
KEEPING = Schedule([F_ck(0), F_all(1), F_all(2), F_all(3), Loss(L), Bwd(3), Bwd(2), F_all(0), Bwd(1), Bwd(0)], L)


def _loss(a: torch.Tensor, target: Any) -> torch.Tensor:
    return nn.functional.cross_entropy(a, target)


def test_f_n_frees_the_input_of_a_live_tape() -> None:
    """After F_ck(0) F_all(1) F_n(1), no reference to a_1's bytes is left (the tape abar_2 lives)."""
    blocks, x, target = _net()
    executor = ChainExecutor(blocks, _loss)
    state = executor.new_run_state(list(FREEING.ops), x.device)
    state.acts[0] = x.clone()
    for op in FREEING.ops[:2]:
        executor.apply(op, state, target)
    ref = StorageWeakRef(state.acts[1].untyped_storage())
    executor.apply(FREEING.ops[2], state, target)  # F_n(1)
    assert 2 in state.tapes and 1 not in state.acts
    assert ref.expired()
    for op in FREEING.ops[3:]:
        executor.apply(op, state, target)
    assert not state.tapes and not state.input_slots
    state.clear()


@pytest.mark.parametrize("release", [False, True])
def test_freeing_the_input_of_a_tape_measures_the_prediction(release: bool) -> None:
    torch.set_num_threads(1)
    blocks, x, target = _net()
    chain = profile_chain(blocks, _loss, x, target, repeats=1, warmup=0, release=release)
    executor = ChainExecutor(blocks, _loss, release=release)
    peaks = {}
    for name, schedule in (("freeing", FREEING), ("keeping", KEEPING)):
        simulate(chain, schedule).raise_if_invalid()
        result = executor.step(schedule, x, target, chain=chain, seed=1, measure_time=False)
        ok, msg = check_gradients(result, blocks, _loss, x, target, seed=1)
        assert ok, msg
        predicted = result.tracker_predicted_peak or result.predicted_peak
        assert result.peak_memory == predicted, (name, result.peak_memory, predicted)
        peaks[name] = result.peak_memory
    assert peaks["freeing"] < peaks["keeping"]  # F_n(1) lowers the peak by a_1's bytes, measured as predicted


def test_train_step_after_freeing_matches_plain_autograd() -> None:
    blocks, x, target = _net()
    executor = ChainExecutor(blocks, _loss)
    loss, delta0 = executor.train_step(FREEING, x, target)
    grads = {n: p.grad.clone() for n, p in executor.params.items()}
    for p in executor.params.values():
        p.grad = None
    xr = x.clone().requires_grad_(True)
    a = xr
    for block in blocks:
        a = block(a)
    ref = _loss(a, target)
    ref.backward()
    assert torch.allclose(loss, ref.detach())
    assert delta0 is not None and torch.allclose(delta0, xr.grad, rtol=1e-5, atol=1e-7)
    for n, p in executor.params.items():
        assert torch.allclose(grads[n], p.grad, rtol=1e-5, atol=1e-7), n


def _cat_loss(outputs: Any, target: Any) -> Any:
    return torch.cat(outputs, 1).pow(2).sum()


def test_join_freeing_the_input_of_a_tape_measures_the_prediction() -> None:
    """The hunt's shape on a small Siamese join: F_all(0,1) F_n(0,1), a_1 of branch 0 recomputed before B(0,1)."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    enc = [_block(16, 128), _block(128, 64), _block(64, 64)]
    xs = [torch.randn(32, 16), torch.randn(32, 16)]
    join = profile_join_branches([enc, enc], _cat_loss, xs, None, repeats=1, warmup=1)
    fwd1 = [JOp("F_all", 1, i) for i in range(3)]
    bwd0 = [JOp("B", 0, 2), JOp("B", 0, 1)]
    bwd1 = [JOp("B", 1, i) for i in reversed(range(3))]
    peaks = {}
    for name, free in (("freeing", [JOp("F_n", 0, 1)]), ("keeping", [])):
        ops = [JOp("F_ck", 0, 0), JOp("F_all", 0, 1), *free, JOp("F_all", 0, 2), *fwd1, LOSS_OP, *bwd0[:1],
               JOp("F_all", 0, 0), *bwd0[1:], JOp("B", 0, 0), *bwd1]
        schedule = JoinSchedule(ops, [3, 3])
        assert simulate_join(join, schedule).valid
        res, ok = execute_join([enc, enc], _cat_loss, schedule, xs, None, join=join, measure_time=False)
        assert ok is True
        assert res.peak_memory == res.tracker_predicted_peak, (name, res.peak_memory, res.tracker_predicted_peak)
        peaks[name] = res.peak_memory
    assert peaks["freeing"] < peaks["keeping"]


def test_a_value_the_backward_needs_modified_in_place_is_autograds_error() -> None:
    """The hooks hide saved tensors from autograd's version check, so the executor checks versions itself:
    a loss that modifies a_L in place (tanh saved it) raises plain autograd's RuntimeError, not a silently
    wrong gradient (`memsched profile` refuses such a network through this error)."""
    blocks, x, target = _net()

    def in_place_loss(a: torch.Tensor, t: Any) -> torch.Tensor:
        a.mul_(2)
        return nn.functional.cross_entropy(a, t)

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        in_place_loss(torch.nn.Sequential(*blocks)(x), target).backward()  # plain autograd's
    executor = ChainExecutor(blocks, in_place_loss)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        executor.train_step(KEEPING, x, target)
