"""The RNG bookkeeping of the chain and offloading executors allocates only what their allocator
prediction charges (`models.measure.RngStates`, `chain_peak_with_rng_states`).

A CPU generator state is a 5,056 B tensor the allocator probe sees. The executors used to copy it
at the first forward of every stage computed more than once, random or not (held through the
forward, then a second copy to compare), and once more during each recomputation
(``torch.random.fork_rng``), while the prediction charged only the states kept to the end of the
step: the probe was 3.8x the prediction on a tiny LSTM (no randomness at all) and 1.5 KB above it
on a tiny GPT-2. `ChainExecutor.random_stages` now finds the random stages before the step, the
others copy nothing, and the copy each recomputation makes is charged during that op.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from memsched.models.chain.executor import ChainExecutor, check_gradients, reference_step  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.chain.training import ScheduledChain  # noqa: E402
from memsched.models.measure import gradients_match, with_rng_states  # noqa: E402
from memsched.models.offload.executor import OffloadExecutor  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers.chain.schedule import FORWARD_KINDS, Op  # noqa: E402
from memsched.solvers.offload import OffloadInstance  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)

#: a valid schedule of `dropout_net`'s 8 blocks that recomputes stages 0-5, the dropout stage 3 among them
SCHEDULE = ("F_ck(0) F_n(1) F_n(2) F_n(3) F_ck(4) F_n(5) F_all(6) F_all(7) Loss B(7) B(6) F_all(4) F_all(5) B(5) "
            "B(4) F_ck(0) F_n(1) F_n(2) F_all(3) B(3) F_all(0) F_all(1) F_all(2) B(2) B(1) B(0)")
DROPOUT_STAGE = 3


def parse(text: str) -> list[Op]:
    """Ops written as ``F_ck(0) ... Loss ... B(0)`` (the loss's stage is 8, the chain's length)."""
    out = []
    for word in text.split():
        if word == "Loss":
            out.append(Op("Loss", 8))
        else:
            kind, stage = word.rstrip(")").split("(")
            out.append(Op(kind, int(stage)))
    return out


def dropout_net() -> tuple[list[nn.Module], torch.Tensor, torch.Tensor]:
    """Eight tiny blocks (width 8, batch 2: a generator state outweighs every activation), one of
    them random (dropout, stage 3); inputs and labels."""
    torch.manual_seed(0)
    blocks: list[nn.Module] = [nn.Sequential(nn.Linear(4, 8), nn.ReLU())]
    blocks += [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(2)]
    blocks += [nn.Sequential(nn.Dropout(0.5), nn.Linear(8, 8))]
    blocks += [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(3)]
    blocks += [nn.Linear(8, 4)]
    return blocks, torch.randn(2, 4), torch.randint(0, 4, (2,))


def recomputations(ops: list[Op]) -> int:
    """Forward operations beyond one per stage."""
    stages = {op[1] for op in ops if op[0] in FORWARD_KINDS}
    return sum(1 for op in ops if op[0] in FORWARD_KINDS) - len(stages)


@pytest.mark.parametrize("name, kwargs, random", [
    ("lstm", dict(batch=2, seq_len=6, width=8), False),
    ("gpt2", dict(batch=2, seq_len=8, width=16, depth=2, vocab=50), True),
])
def test_probe_equals_prediction_under_rotor_with_and_without_randomness(name, kwargs, random):
    """Rotor at 60% of store-all recomputes; the allocator probe's peak equals the prediction to
    the byte (was 10,624 B vs 2,816 B on the LSTM, 46,848 vs 45,312 on GPT-2); gradients are plain
    autograd's; only random stages keep a state (the LSTM's none)."""
    zm = build_model(name, **kwargs)
    chain = profile_chain(zm.blocks, zm.loss_fn, zm.example_input, zm.target, repeats=1)
    result = memsched.solve(chain, int(0.6 * memsched.reference_peak(chain)), "rotor")
    assert result.schedule is not None
    ops = list(result.schedule.ops)
    assert recomputations(ops) > 0
    ex = ChainExecutor(zm.blocks, zm.loss_fn)
    step = ex.step(ops, zm.example_input, zm.target, chain=chain, independent=True, measure_time=False)
    assert step.independent_peak == step.predicted_peak
    assert ex.last_rng is not None and bool(ex.last_rng.kept) is random
    ok, msg = check_gradients(step, zm.blocks, zm.loss_fn, zm.example_input, zm.target, seed=0)
    assert ok, msg


def test_one_dropout_block_probe_gradients_and_generator():
    """A schedule that recomputes the dropout stage (twice) and five deterministic ones: the probe
    equals the prediction (the state kept for stage 3 and the copy made during each of its
    recomputations; was 15,392 B vs 5,760 B); masks, hence gradients, are plain autograd's; the
    generator ends where a plain step leaves it."""
    blocks, x, y = dropout_net()
    chain = profile_chain(blocks, F.cross_entropy, x, y, repeats=1)
    ops = parse(SCHEDULE)
    ex = ChainExecutor(blocks, F.cross_entropy)
    step = ex.step(ops, x, y, chain=chain, independent=True, measure_time=False)
    after_step = torch.get_rng_state()
    assert step.independent_peak == step.predicted_peak
    assert ex.last_rng is not None and ex.last_rng.kept == [DROPOUT_STAGE]
    _, ref, ref_input = reference_step(blocks, F.cross_entropy, x, y, seed=0)
    assert torch.equal(after_step, torch.get_rng_state())
    ok, msg = gradients_match(step.grads, step.input_grad, ref, ref_input)
    assert ok, msg


def test_offload_executor_probe_equals_sequential_prediction():
    """The offloading executor (a chain schedule without transfers) shares the bookkeeping: its
    probe equals the sequential replay's prediction, with the kept state and the copies."""
    blocks, x, y = dropout_net()
    chain = profile_chain(blocks, F.cross_entropy, x, y, repeats=1)
    ex = OffloadExecutor(blocks, F.cross_entropy)
    step = ex.step(parse(SCHEDULE), x, y, inst=OffloadInstance(chain, 1e9), independent=True, measure_time=False)
    assert step.sequential_peak is not None
    assert step.independent_peak == step.sequential_peak
    ok, msg = check_gradients(step, blocks, F.cross_entropy, x, y, seed=0)
    assert ok, msg


def test_random_stages_leaves_generator_and_buffers_as_they_were():
    """The pre-pass finds the dropout stage only, and puts back the generator and BatchNorm's
    running statistics."""
    blocks, x, _ = dropout_net()
    blocks[1] = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))
    ex = ChainExecutor(blocks, F.cross_entropy)
    state, mean = torch.get_rng_state(), blocks[1][1].running_mean.clone()
    assert ex.random_stages(x, range(8)) == {DROPOUT_STAGE}
    assert ex.random_stages(x, [0, 1, 2]) == set()
    assert torch.equal(state, torch.get_rng_state())
    assert torch.equal(mean, blocks[1][1].running_mean)


def test_training_step_replays_masks_and_the_generator_stream():
    """`ScheduledChain.step` (randomness found during the run) gives plain autograd's gradients
    and leaves the generator as a plain step does."""
    blocks, x, y = dropout_net()
    net = ScheduledChain(blocks, parse(SCHEDULE), loss_fn=F.cross_entropy)
    torch.manual_seed(1)
    net.step(x, y)
    after = torch.get_rng_state()
    got = {n: p.grad.clone() for n, p in net.named_parameters()}
    for p in net.parameters():
        p.grad = None
    torch.manual_seed(1)
    a = x
    for block in blocks:
        a = block(a)
    F.cross_entropy(a, y).backward()
    assert torch.equal(after, torch.get_rng_state())
    for n, p in net.named_parameters():
        assert torch.allclose(got[n], p.grad, rtol=1e-5, atol=1e-7), n


def test_with_rng_states_charges_intervals():
    """A kept state counts from its time on; a copy (from, until) at the points in [from, until),
    at its own time for an op of no duration."""
    points = [(-1.0, 100), (0.0, 200), (1.0, 300), (2.0, 150), (2.0, 180), (3.0, 120)]
    assert with_rng_states(points, [(1.0, 10)]) == [100, 200, 310, 160, 190, 130]
    assert with_rng_states(points, [(1.0, 2.0, 10)]) == [100, 200, 310, 150, 180, 120]
    assert with_rng_states(points, [(2.0, 2.0, 5)]) == [100, 200, 300, 155, 185, 120]
    assert with_rng_states(points, [(0.0, float("inf"), 1), (3.0, 4.0, 2)]) == [100, 201, 301, 151, 181, 123]
