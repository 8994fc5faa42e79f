"""Edge cases of the chain and join executors and the profiler (CPU): a gradient that stops in the
middle of the chain, in-place operations on a block's input (refused) or in a loss (supported),
a schedule checked without a chain, and zoo networks that cannot run at the sizes asked for."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from memsched.models.chain.executor import ChainExecutor, reference_step  # noqa: E402
from memsched.models.chain.profiler import profile_chain, profile_model  # noqa: E402
from memsched.models.chain.training import ScheduledChain  # noqa: E402
from memsched.models.join.executor import JoinExecutor, reference_join_step  # noqa: E402
from memsched.models.measure import compare_gradients  # noqa: E402
from memsched.models.network import Network, as_zoo_model  # noqa: E402
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule, store_all_schedule  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.join import JOp  # noqa: E402
from memsched.solvers.join.schedule import LOSS_OP  # noqa: E402
from stopping_nets import Argmax, stopped  # noqa: E402
from torch import nn  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)


def _square_mean(out: torch.Tensor, target: object = None) -> torch.Tensor:
    return out.pow(2).mean()


SCHEDULES = {"store-all": store_all_schedule(5), "recompute-all": recompute_all_schedule(5),
             "periodic": periodic_schedule(5, 2)}


def _matches_plain(result, net: nn.Module, x: torch.Tensor) -> None:
    loss, ref, ref_input = reference_step(net, _square_mean, x, None)
    assert result.loss == pytest.approx(loss, rel=1e-6)
    ok, msg = compare_gradients(result.grads, ref, rtol=1e-5, atol=1e-7)
    assert ok, msg
    assert set(ref) == {n for n in result.grads}  # the blocks before the stop get no gradient at all
    assert not any(n.startswith(("0.", "1.")) for n in ref)
    assert result.input_grad is None and ref_input is None


@pytest.mark.parametrize("kind", ["frozen", "detach", "argmax"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("release", [False, True])
def test_a_gradient_stopping_mid_chain_leaves_the_earlier_blocks_without_gradients(kind, name, release):
    torch.manual_seed(0)
    net, x = stopped(kind), torch.randn(3, 8)
    executor = ChainExecutor(net, _square_mean, release=release)
    _matches_plain(executor.step(SCHEDULES[name], x, None, measure_time=False, measure_memory=False), net, x)
    state = executor.new_run_state(list(SCHEDULES[name].ops), x.device)  # op by op: every tape is freed
    state.acts[0] = x.clone()
    for op in SCHEDULES[name].ops:
        executor.apply(op, state, None)
    assert not state.tapes and not state.tape_outputs and state.grads == {0: None}


def test_a_gradient_stopping_mid_chain_is_measured_and_trained_like_plain_autograd():
    torch.manual_seed(0)
    net, x = stopped("frozen"), torch.randn(3, 8)
    result = ChainExecutor(net, _square_mean).step(SCHEDULES["periodic"], x, None, measure_time=False)
    assert result.peak_memory > 0
    for p in net.parameters():
        p.grad = None
    trainer = ScheduledChain(net, SCHEDULES["recompute-all"], _square_mean)
    trainer.step(x)
    grads = {n: p.grad for n, p in net.named_parameters() if p.grad is not None}
    _, ref, _ = reference_step(net, _square_mean, x, None)
    assert sorted(grads) == sorted(ref)
    for p in net.parameters():  # the drop-in module under torch's own backward
        p.grad = None
    _square_mean(trainer(x)).backward()
    assert [p.grad is None for p in net.parameters()] == [True] * 4 + [False] * 4


def test_a_network_stopping_the_gradient_profiles_and_runs():
    torch.manual_seed(0)
    net, x = stopped("argmax"), torch.randn(3, 8)
    chain = profile_chain(net, _square_mean, x, None, repeats=1, warmup=0, release=True)
    assert chain.length == 5
    out = memsched.run(net, "90%", example_input=x, loss_fn=_square_mean, repeats=1, time_repeats=1)
    assert out.data["grad_check"] is True


def _join_step(ops, branches, loss_fn, inputs):
    result = JoinExecutor(branches, loss_fn).step(ops, inputs, None, measure_time=False, measure_memory=False)
    loss, ref, _ = reference_join_step(branches, loss_fn, inputs, None)
    assert result.loss == pytest.approx(loss, rel=1e-6)
    # the join executor allocates every parameter gradient (zeros) before its step: those autograd
    # does not reach stay zero where plain autograd leaves them None
    extra = {n: g for n, g in result.grads.items() if n not in ref}
    assert all(not g.any() for g in extra.values())
    ok, msg = compare_gradients({n: g for n, g in result.grads.items() if n in ref}, ref, rtol=1e-5, atol=1e-7)
    assert ok, msg
    return ref


def _join_ops(recompute: bool) -> list[JOp]:
    """Two branches of two stages: store-all, or stage 0 of each branch recomputed after the loss."""
    first = "F_ck" if recompute else "F_all"
    ops = [op for b in range(2) for op in (JOp(first, b, 0), JOp("F_all", b, 1))] + [LOSS_OP]
    for b in range(2):
        ops += ([JOp("B", b, 1), JOp("F_all", b, 0)] if recompute else [JOp("B", b, 1)]) + [JOp("B", b, 0)]
    return ops


@pytest.mark.parametrize("recompute", [False, True])
def test_a_join_loss_ignoring_a_branch_gives_it_no_gradients(recompute):
    torch.manual_seed(0)
    branches = [[nn.Linear(4, 4), nn.Linear(4, 3)], [nn.Linear(4, 4), nn.Linear(4, 3)]]
    inputs = [torch.randn(2, 4), torch.randn(2, 4)]
    ref = _join_step(_join_ops(recompute), branches, lambda outs, t: outs[0].pow(2).mean(), inputs)
    assert ref and all(n.startswith("0.") for n in ref)
    argmax = [[nn.Linear(4, 4), nn.Linear(4, 3)], [nn.Linear(4, 4), Argmax()]]  # an integer branch output
    ref = _join_step(_join_ops(recompute), argmax, lambda outs, t: outs[0].pow(2).mean() + outs[1].sum(), inputs)
    assert ref and all(n.startswith("0.") for n in ref)


# ----------------------------------------------------------------- in-place operations
def _in_place_first() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True), nn.Linear(16, 4))


@pytest.mark.parametrize("name", ["store-all", "recompute-all"])
@pytest.mark.parametrize("input_grad", [True, False])
def test_a_block_modifying_its_input_in_place_is_refused_as_bad_input(name, input_grad):
    ops = store_all_schedule(3) if name == "store-all" else recompute_all_schedule(3)
    executor = ChainExecutor(_in_place_first(), nn.functional.cross_entropy, input_grad=input_grad)
    with pytest.raises(InputError, match=r"^block 1 \(ReLU\) modifies its input in place") as err:
        executor.step(ops, torch.randn(4, 8), torch.randint(0, 4, (4,)), measure_time=False, measure_memory=False)
    assert isinstance(err.value, RuntimeError) and "\n" not in str(err.value)


def test_in_place_blocks_are_refused_by_the_profiler_the_dry_run_and_run():
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    loss = nn.functional.cross_entropy
    with pytest.raises(InputError, match=r"block 1 \(ReLU\) modifies its input in place"):
        profile_chain(_in_place_first(), loss, x, y, repeats=1, warmup=0)
    with pytest.raises(InputError, match=r"^MODEL: block 1 \(ReLU\) modifies its input in place"):
        as_zoo_model(Network(_in_place_first(), x, y, loss))
    with pytest.raises(InputError, match="in place"):
        memsched.run(_in_place_first(), "80%", example_input=x, target=y, loss_fn=loss, repeats=1, time_repeats=1)


def test_in_place_operations_inside_a_block_still_match_plain_autograd():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True)), nn.Linear(16, 16),
                        nn.Sequential(nn.Linear(16, 16), nn.ReLU(inplace=True)), nn.Linear(16, 4))
    x = torch.randn(5, 8)
    for ops in (store_all_schedule(4), recompute_all_schedule(4)):
        result = ChainExecutor(net, _square_mean).step(ops, x, None, measure_time=False, measure_memory=False)
        _, ref, ref_input = reference_step(net, _square_mean, x, None)
        assert compare_gradients(result.grads, ref)[0] and torch.allclose(result.input_grad, ref_input)


def _in_place_loss(out: torch.Tensor, target: object = None) -> torch.Tensor:
    out.sub_(out.max().detach())  # a numerically stable log-sum-exp written in place
    return out.exp().sum(1).log().mean()


def test_a_loss_modifying_the_output_in_place_matches_plain_autograd():
    torch.manual_seed(0)
    net, x = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4)), torch.randn(3, 8)
    loss, ref, ref_input = reference_step(net, _in_place_loss, x, None)
    for ops in (store_all_schedule(3), recompute_all_schedule(3)):
        for release in (False, True):
            result = ChainExecutor(net, _in_place_loss, release=release).step(ops, x, None, measure_time=False)
            assert result.loss == pytest.approx(loss, rel=1e-6)
            assert compare_gradients(result.grads, ref)[0] and torch.allclose(result.input_grad, ref_input)
    assert float(ScheduledChain(net, store_all_schedule(3), _in_place_loss).step(x)) == pytest.approx(loss, rel=1e-6)
    chain = profile_chain(net, _in_place_loss, x, None, repeats=1, warmup=0, timing="isolated")
    assert chain.length == 3
    branches = [[nn.Linear(8, 8), nn.Linear(8, 4)], [nn.Linear(8, 8), nn.Linear(8, 4)]]
    _join_step(_join_ops(False), branches, lambda outs, t: _in_place_loss(outs[0]) + _in_place_loss(outs[1]),
               [x, torch.randn(3, 8)])


# ----------------------------------------------------------------- schedules and zoo sizes
def test_a_step_without_chain_checks_the_schedule():
    torch.manual_seed(0)
    net, x, y = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 3)), torch.randn(3, 8), torch.randint(0, 3, (3,))
    executor = ChainExecutor(net, nn.functional.cross_entropy)
    with pytest.raises(InputError, match=r"^schedule: not a valid schedule of this chain: .*delta_1"):
        executor.step([("F_all", 0), ("B", 0)], x, y, measure_time=False)
    with pytest.raises(InputError, match="^schedule: not a valid schedule"):
        executor.step(store_all_schedule(3), x, y, measure_time=False)  # a schedule of another length
    assert executor.step(store_all_schedule(2), x, y, measure_time=False).loss > 0


SIZES = {"batch": 1, "image_size": 16, "width": 4, "depth": 1}


def test_a_zoo_network_failing_at_its_sizes_is_bad_input_naming_them():
    with pytest.raises(InputError, match=r"^MODEL: resnet18 with batch 1, width 4, image_size 16.*block \d+ .*fails "
                                         r"on its input .*Expected more than 1 value per channel"):
        profile_model("resnet18", repeats=1, warmup=0, **SIZES)
    with pytest.raises(InputError, match=r"resnet18 with batch 1, .*Expected more than 1 value per channel"):
        memsched.run("resnet18", "70%", repeats=1, time_repeats=1, **SIZES)
    with pytest.raises(InputError, match=r"resnet18 with batch 1, .*Expected more than 1 value per channel"):
        memsched.profile("resnet18", problem="graph", **SIZES)
