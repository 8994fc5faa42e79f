"""Early release in B(i) for real: the profiler's ``bwd_overhead_released`` is what the executor
incurs (both memory methods, to the byte), gradients are unchanged, and holding costs more."""

from __future__ import annotations

import json

import pytest
import torch
from memsched.experiments.bench_vs_torch import SIZES
from memsched.models.chain.executor import ChainExecutor, check_gradients
from memsched.models.chain.profiler import profile_chain
from memsched.models.zoo import build_model
from memsched.solvers.chain import Chain
from memsched.solvers.chain.baselines import periodic_schedule
from memsched.solvers.chain.dp import rotor_min_budget, solve_rotor


@pytest.fixture(scope="module", params=["resnet50", "gpt2"])
def profiled(request):
    torch.manual_seed(0)
    model = build_model(request.param, **SIZES[request.param]["tiny"])
    chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=1, warmup=0,
                          release=True)
    return model, chain


def test_profile_records_a_release_within_its_bounds(profiled) -> None:
    _, chain = profiled
    L = chain.length
    tracker = chain.meta["overheads"]["tracker"]
    assert len(tracker["bwd_overhead_released"]) == L + 1
    assert all(r <= h for r, h in zip(tracker["bwd_overhead_released"], tracker["bwd_overhead"]))
    assert (chain.o_b <= chain.o_bh).all() and (chain.o_b[:L] >= -(chain.x[1:L + 1] + chain.xbar[1:L + 1])).all()
    # somewhere the backward gives delta_{i+1} and the output up before its peak
    assert any(r < h for r, h in zip(tracker["bwd_overhead_released"], tracker["bwd_overhead"]))
    again = Chain.from_dict(json.loads(json.dumps(chain.to_dict())))
    assert (again.o_b == chain.o_b).all() and (again.o_bh == chain.o_bh).all()


def test_executor_incurs_what_the_release_predicts(profiled) -> None:
    model, chain = profiled
    L = chain.length
    schedules = [periodic_schedule(L, k) for k in sorted({1, 2, max(1, L // 2)})]
    schedules.append(solve_rotor(chain, rotor_min_budget(chain), slots=0).schedule)
    first: dict[bool, int] = {}
    for schedule in schedules:
        steps = {}
        for release in (True, False):
            step = ChainExecutor(model.blocks, model.loss_fn, release=release).step(
                schedule, model.example_input, model.target, chain=chain, measure_time=False, independent=True)
            if release:  # to the byte; holding is an upper bound (a tape charged with its output to B's end)
                assert step.peak_memory == step.tracker_predicted_peak, step.peak_memory
            else:
                assert step.peak_memory <= step.tracker_predicted_peak, step.peak_memory
            # the allocator probe (an independent method): within 10% on these tiny models, whose
            # small scratch allocations weigh more (the GPT's k = 2 is 7.8% over, released or not)
            assert abs(step.independent_peak / step.predicted_peak - 1) <= 0.10, (release, step.independent_peak)
            ok, msg = check_gradients(step, model.blocks, model.loss_fn, model.example_input, model.target, seed=0)
            assert ok, msg
            steps[release] = step
        assert steps[True].peak_memory <= steps[False].peak_memory
        assert steps[True].independent_peak <= steps[False].independent_peak
        assert steps[True].predicted_peak <= steps[False].predicted_peak
        first = first or {r: s.peak_memory for r, s in steps.items()}
    # the default follows the chain: a profile with early release runs with it
    default = ChainExecutor(model.blocks, model.loss_fn).step(schedules[0], model.example_input, model.target,
                                                               chain=chain, measure_time=False)
    assert default.peak_memory == default.tracker_predicted_peak == first[True]


def test_cli_profile_and_run_with_early_release(cli, tmp_path) -> None:
    """`memsched profile --early-release` writes the field; `memsched run` with that chain executes
    it releasing (no flag needed) and measures at most what it predicts; `run --early-release`
    profiles it so itself and predicts no more than without."""
    tiny = ["--batch", "2", "--image-size", "32", "--width", "4", "--depth", "1", "--device", "cpu", "--repeats", "1"]
    path = tmp_path / "r.json"
    res = cli("profile", "resnet18", *tiny, "--early-release", "-o", path)
    assert res.code == 0, res.err
    stages = json.loads(path.read_text())["stages"]
    assert all("bwd_overhead_released" in st for st in stages)
    assert any(st["bwd_overhead_released"] < st["bwd_overhead"] for st in stages)
    res = cli("run", "resnet18", "--chain", path, *tiny[:-2], "--budget", "100%", "--solver", "periodic",
              "--option", "segments=2", "--json", "--time-repeats", "1")
    assert res.code == 0, res.err
    out = res.json()
    assert out["grad_check"] is True
    assert out["measured"]["peak_memory"] <= 1.01 * out["predicted"]["peak_memory"] + 4096
    peaks = {}
    for flag in ([], ["--early-release"]):
        res = cli("run", "resnet18", *tiny, "--budget", "100%", "--solver", "periodic", "--option", "segments=2",
                  "--json", "--time-repeats", "1", *flag)
        assert res.code == 0, res.err
        peaks[bool(flag)] = res.json()["predicted"]["peak_memory"]
    assert peaks[True] <= peaks[False]


def test_windows_that_leave_out_their_start() -> None:
    """Both memory methods can read an operation that frees before it allocates: the tracker's
    window opened `after_start` and the allocator probe's `mark` / `after_mark` peak below the
    level at their start (a 10,000-byte tensor freed, then 1,000 bytes allocated: -9,000)."""
    from memsched.models.alloc_probe import AllocatorProbe
    from memsched.models.memory import LiveTensorTracker

    with LiveTensorTracker() as tracker:
        a = torch.empty(10_000, dtype=torch.uint8)
        start = tracker.mark(after_start=True)
        del a
        b = torch.empty(1_000, dtype=torch.uint8)
        assert max(tracker.peak, tracker.current) - start == -9_000
        tracker.mark()  # an ordinary window still starts at its level
        assert tracker.peak == tracker.current
    with AllocatorProbe() as probe:
        a = torch.empty(10_000, dtype=torch.uint8)
        probe.mark()
        del a
        b = torch.empty(1_000, dtype=torch.uint8)
    level, most = probe.after_mark()
    assert most - level == -9_000 and probe.peak >= 10_000
    del b


def test_shape_exact_profile_measures_the_release_too() -> None:
    """On fake tensors (``cost="flops"``: nothing allocated) the release is measured the same way
    and stays within the format's bounds."""
    from memsched.models.chain.profiler import profile_model

    chain, _ = profile_model("resnet18", cost="flops", release=True, batch=2, image_size=32, width=4, depth=1)
    L = chain.length
    assert chain.has_release() and (chain.o_b <= chain.o_bh).all()
    assert (chain.o_b[:L] >= -(chain.x[1:L + 1] + chain.xbar[1:L + 1])).all()
