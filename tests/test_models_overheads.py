"""CPU profiles charge the allocator's transient overheads; op times come from the executors' steps.

models.chain.overheads: the profiler measures o_fa, o_fn, o_b with the allocator probe (kernel
scratch buffers included) and keeps the tracker's in meta.overheads.tracker; each memory method
is compared with the prediction under its own overheads. models.chain.timing: op times taken
inside store-all steps of the executor (models.measure.timing_ops).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.overheads import TRACKER_FIELDS, tracker_chain, tracker_join  # noqa: E402
from memsched.models.chain.profiler import profile_chain, profile_model  # noqa: E402
from memsched.models.chain.timing import op_times  # noqa: E402
from memsched.models.measure import timing_ops  # noqa: E402
from memsched.models.offload.values import measure_link  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402

torch.set_num_threads(1)

RESNET = dict(batch=2, image_size=32, width=4, depth=1)


@pytest.fixture(scope="module")
def resnet():
    model = build_model("resnet18", device="cpu", **RESNET)
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1, warmup=0)
    return model, chain


def test_cpu_profile_charges_the_allocator_and_keeps_the_tracker(resnet):
    _, chain = resnet
    info = chain.meta["overheads"]
    assert "allocator" in info["method"]
    tracker = info["tracker"]
    L = chain.length
    assert [len(tracker[f]) for f in TRACKER_FIELDS] == [L, L, L + 1]
    # convolution backward scratch buffers: the allocator sees more than the tensor outputs
    assert sum(chain.o_b) > sum(tracker["bwd_overhead"])
    by_tracker = tracker_chain(chain)
    assert list(by_tracker.o_b) == tracker["bwd_overhead"]
    assert list(by_tracker.o_fa[:L]) == tracker["fwd_overhead_all"]
    assert list(by_tracker.x) == list(chain.x) and list(by_tracker.u_f) == list(chain.u_f)


def test_each_method_matches_the_prediction_under_its_own_overheads(resnet):
    model, chain = resnet
    executor = ChainExecutor(model.blocks, model.loss_fn)
    step = executor.step(store_all_schedule(chain.length), model.example_input, model.target, chain=chain,
                         measure_time=False, independent=True)
    # the allocator's overheads include the tracker's tensors (and scratch buffers): never a smaller peak; equal
    # when both charge the peak op alike (a machine of this project's CI: the head's backward, 132000 B in both)
    assert step.tracker_predicted_peak is not None and step.tracker_predicted_peak <= step.predicted_peak
    assert step.memory_ratio == pytest.approx(1.0, abs=0.05), (step.peak_memory, step.tracker_predicted_peak)
    assert step.independent_ratio == pytest.approx(1.0, abs=0.05), (step.independent_peak, step.predicted_peak)


def test_shape_exact_profiles_say_they_cannot_see_scratch_buffers():
    chain, _ = profile_model("resnet18", cost="flops", **RESNET)
    info = chain.meta["overheads"]
    assert "fake tensors" in info["method"] and "scratch" in info["note"] and "tracker" not in info
    assert tracker_chain(chain) is chain


def test_op_times_are_taken_inside_the_executors_steps(resnet):
    model, chain = resnet
    executor = ChainExecutor(model.blocks, model.loss_fn)
    ops = list(store_all_schedule(chain.length).ops)
    times = op_times(lambda: executor._run(ops, model.example_input, model.target, None, False, False),
                     repeats=2, warmup=0)
    assert set(times) == {str(op) for op in ops}
    assert all(t > 0 for t in times.values())
    with timing_ops() as outer:
        with timing_ops() as inner:
            executor._run(ops[:1], model.example_input, model.target, None, False, False)
        assert [label for label, _ in inner] == [str(ops[0])] and outer == []


def test_join_without_tracker_meta_is_itself_and_link_is_measured():
    from memsched.solvers.join import Join

    join = Join.from_chains([tracker_chain(resnet_chain()) for _ in range(2)])
    assert tracker_join(join) is join
    bandwidth, latency = measure_link(torch.device("cpu"), sizes=(1 << 12, 1 << 18), repeats=3)
    assert bandwidth > 0 and latency >= 0


def resnet_chain():
    """A hand-made two-stage chain (no profile meta)."""
    from memsched.solvers.chain import Chain

    return Chain.from_stages(4, [{"fwd_time": 1, "bwd_time": 2, "out_size": 4, "tape_size": 8, "fwd_overhead": 1,
                                  "bwd_overhead": 2}] * 2, {"bwd_time": 1, "bwd_overhead": 0})
