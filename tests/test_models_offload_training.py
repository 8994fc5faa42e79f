"""Training under an offloading schedule (`memsched.ScheduledChain` with `models.offload.executor`):
transfers to host memory and recomputations together give plain autograd's losses, gradients and
dropout masks, and the live tensor bytes the offloading simulator predicts (CPU)."""

from __future__ import annotations

import copy

import pytest
from conftest import both_modes_match_plain_autograd, trains_like_plain_autograd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

BANDWIDTH = 1e8  # bytes/s: slow enough that pofo mixes transfers with recomputations below


def mlp(depth: int = 8, width: int = 128, dropout: float = 0.2) -> nn.Sequential:
    """An MLP of `depth` blocks (Linear, ReLU, Dropout) and a 3-class head."""
    blocks = [nn.Sequential(nn.Linear(8 if i == 0 else width, width), nn.ReLU(), nn.Dropout(dropout))
              for i in range(depth)]
    return nn.Sequential(*blocks, nn.Linear(width, 3))


def planned(solver: str = "pofo", budget: str = "40%"):
    """(the MLP, its copy, a batch, labels, the offloading instance, `solver`'s result at `budget`)."""
    from memsched.solvers.offload import OffloadInstance

    import memsched

    torch.manual_seed(0)
    net = mlp()
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    chain = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1)
    inst = OffloadInstance(chain, BANDWIDTH)
    return net, copy.deepcopy(net), x, y, inst, memsched.solve(inst, budget, solver=solver)


def transfers_and_recomputations(result) -> tuple[int, int]:
    """(number of Off / Pre operations, number of forward operations beyond one per stage)."""
    from memsched.solvers.chain.schedule import FORWARD_KINDS
    from memsched.solvers.offload import Transfer

    ops = list(result.raw.schedule)
    forwards = sum(1 for op in ops if not isinstance(op, Transfer) and op[0] in FORWARD_KINDS)
    return sum(isinstance(op, Transfer) for op in ops), forwards - result.instance.length


def test_an_offloading_schedule_trains_like_plain_autograd():
    """pofo's schedule offloads and recomputes; three SGD steps equal plain autograd's."""
    import memsched

    net, twin, x, y, _, result = planned()
    moved, recomputed = transfers_and_recomputations(result)
    assert result.found and moved > 0 and recomputed > 0
    trainer = memsched.ScheduledChain(net, result, F.cross_entropy)
    assert trainer.offloads and f"{moved} transfers" in trainer.extra_repr()
    trains_like_plain_autograd(trainer.step, net, twin, x, y)


def test_the_drop_in_module_offloads_like_plain_autograd():
    import memsched

    net, twin, x, y, _, result = planned()
    trainer = memsched.ScheduledChain(net, result)
    for seed in range(2):
        x_in, x_ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        torch.manual_seed(seed)
        loss = F.cross_entropy(trainer(x_in), y)
        loss.backward()
        torch.manual_seed(seed)
        ref = F.cross_entropy(twin(x_ref), y)
        ref.backward()
        assert torch.allclose(loss, ref) and torch.allclose(x_in.grad, x_ref.grad, atol=1e-7)
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_offloading_keeps_the_memory_the_simulator_predicts():
    """Live tensor bytes (the tracker) of both modes against the offloading simulator's
    sequential replay on the chain as the tracker charges it (transfers one at a time, as on the
    CPU), and against plain autograd's."""
    from memsched.models.chain.overheads import tracker_chain
    from memsched.models.memory import LiveTensorTracker
    from memsched.models.offload.executor import sequential_replay
    from memsched.solvers.offload import OffloadInstance

    import memsched

    net, _, x, y, inst, result = planned()
    for p in net.parameters():
        p.grad = torch.zeros_like(p)  # allocated before: not counted, as the simulator counts none
    with LiveTensorTracker() as plain:
        F.cross_entropy(net(x), y).backward()
    ops = list(result.raw.schedule)
    predicted = sequential_replay(OffloadInstance(tracker_chain(inst.chain), inst.bandwidth), ops).peak_memory
    trainer = memsched.ScheduledChain(net, result, F.cross_entropy)
    with LiveTensorTracker() as dropin:
        F.cross_entropy(trainer(x), y).backward()
    with LiveTensorTracker() as step:
        trainer.step(x, y)
    a0 = x.numel() * x.element_size()
    assert predicted - a0 - 4096 <= dropin.peak <= predicted  # a_0 is the caller's, not copied
    assert predicted - 4096 <= step.peak <= predicted + 4096  # the step copies a_0; keeps the loss (4 B)
    assert step.peak < 0.5 * plain.peak


def test_a_bad_offloading_schedule_is_refused():
    from memsched.solvers.offload.schedule import Pre

    import memsched

    net, _, _, _, inst, result = planned()
    ops = list(result.raw.schedule)
    with pytest.raises(memsched.InputError, match="not a valid schedule"):
        memsched.ScheduledChain(net, [Pre("a", 3), *ops], F.cross_entropy, chain=inst)
    with pytest.raises(memsched.InputError, match="not a valid schedule"):  # an Off of a value never made
        memsched.ScheduledChain(net, [(*ops[0],), ("Off", "abar", 5), *ops[1:]], F.cross_entropy)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(2, 6), frac=st.floats(0.3, 1.0), solver=st.sampled_from(["pofo", "rotor-offload", "vdnn"]),
       bandwidth=st.sampled_from([1e7, 1e9]), seed=st.integers(0, 100))
def test_every_offloading_schedule_trains_like_plain_autograd(depth, frac, solver, bandwidth, seed):
    """Any offloading solver's schedule, at any budget it fits, gives plain autograd's loss and
    gradients (input included) in both modes, dropout masks replayed."""
    from memsched.solvers.offload import OffloadInstance

    import memsched

    torch.manual_seed(seed)
    net = nn.Sequential(*[nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Dropout(0.5)) for _ in range(depth)])
    twin = copy.deepcopy(net)
    x = torch.randn(3, 6)
    inst = OffloadInstance(memsched.profile(net, example_input=x, repeats=1), bandwidth)
    result = memsched.solve(inst, max(1, int(frac * memsched.reference_peak(inst.chain))), solver=solver)
    if not result.found:
        return
    both_modes_match_plain_autograd(memsched.ScheduledChain(net, result, input_grad=True), net, twin, x, seed)
