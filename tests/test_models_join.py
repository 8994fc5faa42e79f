"""Join networks in PyTorch: zoo, profiler (-> memsched.join/1) and executor of join schedules.

Gradient check: every schedule's parameter and input gradients equal those of
`reference_join_step` (a plain forward/backward, each block's dropout seeded per stage as the
executor does). Memory allowance (as in tests/test_models_executor.py): on CPU the executor and
the profiler measure with the same live-tensor tracker, so a schedule's measured peak may not
exceed the join simulator's prediction by more than `ALLOWANCE` (1% + 4 KiB, allocation-order
noise) and not fall below half of it. It is usually equal; it is lower when the profiled o_f
(the larger of the autograd and no-grad forwards) over-charges an op, or for the text branch,
whose integer input has no gradient delta_0 although the simulator charges x_0 for it.
"""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import compare_gradients  # noqa: E402
from memsched.models.chain.overheads import tracker_join  # noqa: E402
from memsched.models.join.executor import (  # noqa: E402
    JoinExecutor,
    compare_input_gradients,
    execute_join,
    reference_join_step,
)
from memsched.models.join.profiler import profile_join  # noqa: E402
from memsched.models.join.zoo import build_join_model, join_model_names  # noqa: E402
from memsched.models.run import run  # noqa: E402
from memsched.solvers import registry  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.join import FORMAT, Join, JoinSchedule, JOp, reference_peak, simulate, store_all_schedule  # noqa: E402

torch.set_num_threads(1)


def ALLOWANCE(predicted: int) -> float:
    return 1.01 * predicted + 4096


TINY = {
    "siamese": dict(batch=2, image_size=16, width=4, depth=1, embed_dim=8),
    "triplet": dict(batch=2, image_size=16, width=4, depth=1, embed_dim=8),
    "clip": dict(batch=3, image_size=16, width=4, depth=1, embed_dim=8, seq_len=6, text_width=16, text_depth=2,
                 vocab=20, dropout=0.2),
}
FRACTIONS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2)

_CACHE: dict[str, tuple[object, Join]] = {}


def _model_and_join(name):
    if name not in _CACHE:
        model = build_join_model(name, **TINY[name])
        _CACHE[name] = (model, profile_join(model, repeats=1, warmup=0))
    return _CACHE[name]


def _check(model, join, schedules, *, seed=3):
    _, ref, ref_inputs = reference_join_step(model.branches, model.loss_fn, model.inputs, model.target, seed=seed)
    executor = JoinExecutor(model.branches, model.loss_fn)
    for schedule in schedules:
        simulate(join, schedule).raise_if_invalid()
        result = executor.step(schedule, model.inputs, model.target, join=join, seed=seed, measure_time=False)
        ok, msg = compare_gradients(result.grads, ref)
        assert ok, f"{model.name} {schedule}: {msg}"
        ok, msg = compare_input_gradients(result.input_grads, ref_inputs)
        assert ok, f"{model.name} {schedule}: {msg}"
        # the tracker against the prediction under the tracker's overheads (models.chain.overheads)
        predicted = result.tracker_predicted_peak or result.predicted_peak
        assert result.peak_memory <= ALLOWANCE(predicted), (model.name, str(schedule))
        assert result.peak_memory >= 0.5 * predicted, (model.name, str(schedule))


def random_join_schedule(lengths: list[int], rng: random.Random) -> JoinSchedule:
    """A valid join schedule, often non-persistent, with the branches' forward sweeps in a random
    order and their backward phases randomly interleaved."""
    def branch_ops(b: int, L: int) -> tuple[list[JOp], list[JOp]]:
        acts, tapes = {0}, set()
        ops: list[JOp] = []

        def advance(start, stop):
            for j in range(start, stop):
                kind = rng.choice(["F_ck", "F_n", "F_all"] if j > 0 else ["F_ck", "F_all"])
                ops.append(JOp(kind, b, j))
                if kind == "F_all":
                    tapes.add(j + 1)
                else:
                    acts.add(j + 1)
                    if kind == "F_n":
                        acts.discard(j)

        def frontier(t):
            return max(j for j in range(t + 1) if j in acts or j in tapes)

        advance(0, L)
        forward = ops[:]
        ops.clear()
        acts.discard(L)
        for t in reversed(range(L)):
            if t not in acts and t not in tapes:
                advance(frontier(t), t)
            if t + 1 not in tapes:
                ops.append(JOp("F_all", b, t))
                tapes.add(t + 1)
            ops.append(JOp("B", b, t))
            tapes.discard(t + 1)
            acts.discard(t)
        return forward, ops

    parts = [branch_ops(b, L) for b, L in enumerate(lengths)]
    order = list(range(len(lengths)))
    rng.shuffle(order)
    ops = [op for b in order for op in parts[b][0]] + [JOp("Loss")]
    pending = [list(parts[b][1]) for b in range(len(lengths))]
    while any(pending):
        b = rng.choice([b for b in range(len(pending)) if pending[b]])
        ops.append(pending[b].pop(0))
    return JoinSchedule(ops, list(lengths))


# --------------------------------------------------------------------------- zoo and profiler
def test_zoo_models_have_branches_inputs_and_a_joint_loss():
    assert set(join_model_names()) >= {"siamese", "triplet", "clip"}
    for name, k in (("siamese", 2), ("triplet", 3), ("clip", 2)):
        model = build_join_model(name, **TINY[name])
        assert model.k == k == len(model.inputs) == len(model.branch_names)
        outputs = _outputs(model)
        assert all(o.shape == (TINY[name]["batch"], 8) for o in outputs)
        loss = model.loss_fn(outputs, model.target)
        assert loss.dim() == 0 and torch.isfinite(loss)
    siamese = build_join_model("siamese", **TINY["siamese"])
    assert siamese.shared and all(a is b for a, b in zip(siamese.branches[0], siamese.branches[1]))
    clip = build_join_model("clip", **TINY["clip"])
    assert not clip.shared and clip.inputs[1].dtype == torch.int64
    with pytest.raises(InputError):
        build_join_model("nope")
    with pytest.raises(InputError):
        build_join_model("siamese", batch=0)


def test_profile_writes_a_join_file(tmp_path):
    model, join = _model_and_join("clip")
    assert join.lengths == [len(b) for b in model.branches]
    assert join.loss_time > 0 and join.loss_overhead >= 0
    assert join.meta["model"] == "clip" and join.meta["units"] == {"time": "ms", "memory": "bytes"}
    path = tmp_path / "clip.json"
    join.save(path)
    again = Join.load(path)
    assert again.to_dict()["format"] == FORMAT
    assert again.lengths == join.lengths and [c.name for c in again.branches] == ["image", "text"]
    assert reference_peak(again) == reference_peak(join)
    for a, c in zip(again.branches, join.branches):  # per-mode forward times, measured in JoinExecutor steps
        assert list(a.u_fa) == list(c.u_fa) and list(a.u_fn) == list(c.u_fn)
        assert (c.u_fn[:-1] > 0).all() and list(c.u_f) == [max(u, v) for u, v in zip(c.u_fa, c.u_fn)]
    # the input sizes are the example inputs' bytes
    assert [int(c.x[0]) for c in join.branches] == [x.numel() * x.element_size() for x in model.inputs]


# --------------------------------------------------------------------------- executor vs autograd and simulator
@pytest.mark.parametrize("name", ["siamese", "clip", "triplet"])
def test_solver_schedules_match_autograd_and_memory(name):
    model, join = _model_and_join(name)
    ref = reference_peak(join)
    found: dict[str, list] = {}
    for solver in ("store-all", "dp", "sequential", "equal"):
        for frac in FRACTIONS:
            res = registry.solve("join", join, solver, int(frac * ref))
            if res.found:
                found.setdefault(solver, []).append(res.schedule)
    assert {"store-all", "dp", "sequential"} <= set(found), (name, sorted(found))
    assert any(s.recomputations() > 0 for s in found["dp"] + found["sequential"])
    for schedules in found.values():
        distinct = {str(s): s for s in schedules}
        _check(model, join, list(distinct.values()))


def test_equal_split_runs_when_feasible():
    model, join = _model_and_join("clip")
    # solved under the tracker's overheads: the tiny CLIP's convolution scratch buffers (the allocator's
    # overheads, up to 30x its activations) leave an equal split of any budget nothing that fits
    tracked = tracker_join(join)
    ref = reference_peak(tracked)
    res = next((r for frac in FRACTIONS if (r := registry.solve("join", tracked, "equal", int(frac * ref))).found),
               None)
    assert res is not None, "equal found no schedule on the tiny clip"
    _check(model, join, [res.schedule])


@pytest.mark.parametrize("name", ["clip", "triplet"])
def test_random_interleaved_schedules_match_autograd_and_memory(name):
    model, join = _model_and_join(name)
    rng = random.Random(11)
    _check(model, join, [random_join_schedule(join.lengths, rng) for _ in range(3)])


def test_store_all_memory_equals_prediction_op_by_op():
    model, join = _model_and_join("siamese")
    executor = JoinExecutor(model.branches, model.loss_fn)
    result = executor.step(store_all_schedule(join), model.inputs, model.target, join=join, trace=True,
                           measure_time=False)
    assert len(result.trace) == len(store_all_schedule(join))
    for t in result.trace:
        assert t.measured_after == t.predicted_after, t
        assert t.measured_during <= t.predicted_during, t
    assert result.peak_memory == result.tracker_predicted_peak


def test_shared_weights_accumulate_over_branches():
    model, join = _model_and_join("siamese")
    _, grads, _ = reference_join_step(model.branches, model.loss_fn, model.inputs, model.target, seed=0)
    assert all(name.startswith("0.") for name in grads)  # one entry per shared parameter
    # the sum of the two branches' contributions: differs from one branch's gradient
    result, ok = execute_join(model.branches, model.loss_fn, store_all_schedule(join), model.inputs, model.target,
                              join=join, measure_time=False, measure_memory=False)
    assert ok and result.loss == pytest.approx(float(model.loss_fn(_outputs(model), model.target)), rel=1e-5)


def _outputs(model):
    outs = []
    with torch.no_grad():
        for blocks, x in zip(model.branches, model.inputs):
            for block in blocks:
                x = block(x)
            outs.append(x)
    return outs


def test_dropout_is_recomputed_identically_in_any_branch_order():
    model = build_join_model("clip", **{**TINY["clip"], "dropout": 0.5})
    join = profile_join(model, repeats=1, warmup=0)
    ref_loss, _, _ = reference_join_step(model.branches, model.loss_fn, model.inputs, model.target, seed=0)
    other, _, _ = reference_join_step(model.branches, model.loss_fn, model.inputs, model.target, seed=1)
    assert other != pytest.approx(ref_loss, rel=1e-6)  # dropout is active
    rng = random.Random(5)
    for _ in range(2):
        schedule = random_join_schedule(join.lengths, rng)
        result, ok = execute_join(model.branches, model.loss_fn, schedule, model.inputs, model.target, join=join,
                                  measure_time=False, measure_memory=False)
        assert ok, str(schedule)
        assert result.loss == pytest.approx(ref_loss, rel=1e-6)


def test_time_and_result_fields():
    model, join = _model_and_join("clip")
    executor = JoinExecutor(model.branches, model.loss_fn)
    result = executor.step(store_all_schedule(join), model.inputs, model.target, join=join, time_repeats=2)
    assert result.time_ms > 0 and result.predicted_makespan > 0 and result.time_ratio > 0
    assert result.memory_method == "LiveTensorTracker" and result.device == "cpu"
    assert result.memory_ratio == pytest.approx(result.peak_memory / result.tracker_predicted_peak)
    assert result.input_grad is None and result.input_grads[1] is None and result.input_grads[0] is not None
    assert result.loss > 0


def test_executor_rejects_invalid_schedules_and_wrong_joins():
    model, join = _model_and_join("clip")
    executor = JoinExecutor(model.branches, model.loss_fn)
    with pytest.raises(ValueError):
        executor.step([JOp("Loss")], model.inputs, model.target, join=join)
    other, other_join = _model_and_join("triplet")
    with pytest.raises(ValueError):
        executor.step(store_all_schedule(other_join), model.inputs, model.target, join=other_join)
    with pytest.raises(ValueError):
        executor.step(store_all_schedule(join), model.inputs[:1], model.target)


# --------------------------------------------------------------------------- models.run.run (memsched run)
def test_run_join_reports_like_memsched_run():
    sizes = TINY["siamese"]
    # 100%: on the tiny Siamese network one convolution's backward scratch buffer sets the peak
    out = run("siamese", "100%", problem="join", solver="dp", profile_repeats=1, time_repeats=1, sizes=sizes)
    for key in ("model", "budget", "solver", "predicted", "measured", "grad_check", "device", "status"):
        assert key in out
    assert out["grad_check"] is True and out["status"] in ("optimal", "feasible")
    assert out["predicted"]["peak_memory"] <= out["budget"]
    assert out["measured"]["peak_memory"] <= ALLOWANCE(out["predicted"]["peak_memory"])
    assert out["measured"]["time"] > 0 and out["device"] == "cpu"
    _, join = _model_and_join("siamese")
    low = run("siamese", 1000, problem="join", solver="dp", instance=join, sizes=sizes)  # no profiling
    assert low["status"] == "infeasible" and low["predicted"] is None and low["grad_check"] is None
    with pytest.raises(InputError):
        run("siamese", "90%", problem="join", solver="dp", instance=_model_and_join("clip")[1], sizes=sizes)
