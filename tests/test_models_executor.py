"""The executor runs every valid schedule with plain autograd's gradients and the simulator's memory.

Memory allowance: on CPU the executor and the profiler measure with the same live-tensor
tracker, so the measured peak of a schedule may not exceed the simulator's prediction by more
than `ALLOWANCE` (1% + 4 KiB, for allocation-order noise); it is usually exactly equal or
lower (the profiled o_f is the larger of the autograd and no-grad forwards; an integer input
such as token ids has no gradient delta_0 although the simulator charges x_0 for it).
"""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import ChainExecutor, compare_gradients, execute, reference_step  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers.chain import simulate  # noqa: E402
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule, store_all_schedule  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Op, Schedule  # noqa: E402

torch.set_num_threads(1)


def ALLOWANCE(predicted: int) -> float:
    return 1.01 * predicted + 4096


TINY = {
    "resnet18": dict(batch=2, image_size=32, width=4, depth=1),
    "gpt2": dict(batch=2, seq_len=8, width=16, depth=3, vocab=32),  # dropout 0.1
    "vgg16": dict(batch=2, image_size=32, width=2),  # dropout 0.5 in the classifier
    "densenet121": dict(batch=2, image_size=32, width=4, depth=1),
    "inception_v3": dict(batch=2, image_size=75, width=2),
    "unet": dict(batch=2, image_size=16, width=4, depth=2),
}

_CHAINS: dict[str, object] = {}


def _model(name):
    return build_model(name, **TINY[name])


def _chain(name, model):
    if name not in _CHAINS:
        _CHAINS[name] = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1,
                                      warmup=0, name=name)
    return _CHAINS[name]


def random_schedule(L: int, rng: random.Random) -> Schedule:
    """A valid (often non-persistent) schedule: before each backward, advance from the last
    available activation with random forward modes."""
    acts, tapes = {0}, set()
    ops: list[Op] = []

    def available(j):
        return j in acts or j in tapes

    def advance(start, stop):  # make a_stop available from a_start (stop > start, nothing between available)
        for k in range(start, stop):
            kind = rng.choice(["F_ck", "F_n", "F_all"] if k > 0 else ["F_ck", "F_all"])  # a_0 stays until B(0)
            if kind == "F_all":
                ops.append(F_all(k))
                tapes.add(k + 1)
            else:
                ops.append(F_ck(k) if kind == "F_ck" else F_n(k))
                acts.add(k + 1)
                if kind == "F_n":
                    acts.discard(k)

    def frontier(t):
        return max(j for j in range(t + 1) if available(j))

    if not available(L):
        advance(frontier(L), L)
    ops.append(Loss(L))
    acts.discard(L)
    for t in reversed(range(L)):
        if not available(t):
            advance(frontier(t), t)
        if t + 1 not in tapes:
            ops.append(F_all(t))
            tapes.add(t + 1)
        ops.append(Bwd(t))
        tapes.discard(t + 1)
        acts.discard(t)
    return Schedule(ops, L)


def _check(name, schedules, *, memory=True):
    model = _model(name)
    chain = _chain(name, model)
    _, ref, ref_input = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=3)
    executor = ChainExecutor(model.blocks, model.loss_fn)
    for schedule in schedules:
        simulate(chain, schedule).raise_if_invalid()
        result = executor.step(schedule, model.example_input, model.target, chain=chain, seed=3,
                               measure_memory=memory, measure_time=False)
        ok, msg = compare_gradients(result.grads, ref)
        assert ok, f"{name} {schedule}: {msg}"
        if ref_input is not None:
            assert torch.allclose(result.input_grad, ref_input, rtol=1e-4, atol=1e-6)
        if memory:  # the tracker against the prediction under the tracker's overheads (models.chain.overheads)
            predicted = result.tracker_predicted_peak or result.predicted_peak
            assert result.peak_memory <= ALLOWANCE(predicted), (name, str(schedule))
            assert result.peak_memory >= 0.5 * predicted, (name, str(schedule))


@pytest.mark.parametrize("name", sorted(TINY))
def test_baseline_schedules_match_autograd(name):
    model = _model(name)
    L = len(model.blocks)
    schedules = [store_all_schedule(L), recompute_all_schedule(L), periodic_schedule(L, min(3, L))]
    _check(name, schedules)


@pytest.mark.parametrize("name", ["gpt2", "resnet18", "vgg16"])
def test_random_valid_schedules_match_autograd_and_memory(name):
    rng = random.Random(7)
    L = len(_model(name).blocks)
    _check(name, [random_schedule(L, rng) for _ in range(4)])


def test_store_all_memory_equals_prediction_op_by_op():
    model = _model("resnet18")
    chain = _chain("resnet18", model)
    L = chain.length
    executor = ChainExecutor(model.blocks, model.loss_fn)
    for schedule in (store_all_schedule(L), periodic_schedule(L, 2)):
        result = executor.step(schedule, model.example_input, model.target, chain=chain, trace=True,
                               measure_time=False)
        # a_L is the output of the tape abar_L: the loss frees its bytes (the classifier's linear
        # layer does not save its output), which the chain keeps charging until B(L-1)
        tape_case = schedule.ops.index(("F_all", L - 1)) < schedule.ops.index(("Loss", L))
        released = 0
        for t in result.trace:
            if t.op == "Loss" and tape_case:
                released = int(chain.x[L])
            if t.op == f"B({L - 1})":
                released = 0
            assert t.measured_after == t.predicted_after - released, t
            assert t.measured_during <= t.predicted_during, t


def test_dropout_is_recomputed_identically():
    # without restoring the RNG state, recomputed dropout masks would differ from the first ones
    model = build_model("gpt2", batch=2, seq_len=8, width=16, depth=2, vocab=32, dropout=0.5)
    L = len(model.blocks)
    result, ok = execute(model.blocks, model.loss_fn, recompute_all_schedule(L), model.example_input, model.target,
                         measure_time=False, measure_memory=False)
    assert ok
    loss_ref, _, _ = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=0)
    assert result.loss == pytest.approx(loss_ref, rel=1e-6)


def test_rotor_schedules_match_autograd():
    rotor = pytest.importorskip("memsched.solvers.chain.dp")
    for name in ("resnet18", "gpt2"):
        model = _model(name)
        chain = _chain(name, model)
        from memsched.solvers.chain import reference_peak

        ref_peak = reference_peak(chain)
        schedules = []
        for frac in (0.5, 0.7, 0.9):
            res = rotor.solve_rotor(chain, int(frac * ref_peak), slots=500)
            if res.schedule is not None:
                schedules.append(res.schedule)
        if not schedules:
            pytest.skip("rotor found no schedule at these budgets")
        _check(name, schedules)


def test_time_and_result_fields():
    model = _model("gpt2")
    chain = _chain("gpt2", model)
    executor = ChainExecutor(model.blocks, model.loss_fn)
    result = executor.step(store_all_schedule(chain.length), model.example_input, model.target, chain=chain,
                           time_repeats=2)
    assert result.time_ms > 0 and result.predicted_makespan > 0
    assert result.memory_method == "LiveTensorTracker" and result.device == "cpu"
    assert result.memory_ratio == pytest.approx(result.peak_memory / result.tracker_predicted_peak)
    assert result.time_ratio > 0
    assert result.loss > 0


def test_executor_rejects_invalid_schedules_and_wrong_chains():
    model = _model("gpt2")
    chain = _chain("gpt2", model)
    executor = ChainExecutor(model.blocks, model.loss_fn)
    with pytest.raises(ValueError):
        executor.step(Schedule([Loss(chain.length)], chain.length), model.example_input, model.target, chain=chain)
    other = build_model("gpt2", batch=2, seq_len=8, width=16, depth=1, vocab=32)
    with pytest.raises(ValueError):
        ChainExecutor(other.blocks, other.loss_fn).step(store_all_schedule(chain.length), other.example_input,
                                                        other.target, chain=chain)


def test_plain_sequential_chain():
    seq = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 4))
    x, target = torch.randn(5, 8), torch.randint(0, 4, (5,))
    loss_fn = torch.nn.functional.cross_entropy
    for schedule in (store_all_schedule(4), recompute_all_schedule(4), periodic_schedule(4, 2)):
        _, ok = execute(seq, loss_fn, schedule, x, target, measure_time=False)
        assert ok


def test_in_place_blocks_are_refused():
    seq = [torch.nn.Linear(8, 8), torch.nn.ReLU(inplace=True), torch.nn.Linear(8, 2)]
    x, target = torch.randn(4, 8), torch.randint(0, 2, (4,))
    with pytest.raises(RuntimeError, match="in place"):
        execute(seq, torch.nn.functional.cross_entropy, recompute_all_schedule(3), x, target, measure_time=False,
                measure_memory=False)
