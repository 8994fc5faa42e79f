"""Which prediction each measurement of a run is compared with: one rule,
`models.measure.StepResult.comparisons` (overridden by the synchronous offloading step), which the
step's ratios divide, ``memsched run --json`` writes as ``compared`` and `RunResult.compared` / ``plot``
read back (they re-derived it from the run's other fields before)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.measure import Comparison, StepResult  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import memsched  # noqa: E402
from memsched.results import RunResult  # noqa: E402


def _step(**kw) -> StepResult:
    base = dict(loss=0.0, grads={}, input_grad=None, peak_memory=900, time_ms=3.0, device="cpu",
                memory_method="LiveTensorTracker", predicted_peak=1000, predicted_makespan=2.0,
                independent_peak=1100)
    return StepResult(**{**base, **kw})


def test_step_ratios_divide_its_comparisons():
    step = _step(tracker_predicted_peak=950)
    pairs = step.comparisons()
    assert pairs["memory"] == Comparison("tracker", 950, 900)
    assert pairs["independent"] == Comparison("allocator", 1000, 1100)
    assert pairs["time"] == Comparison("", 2.0, 3.0)
    assert (step.memory_ratio, step.independent_ratio, step.time_ratio) == (900 / 950, 1.1, 1.5)
    plain = _step()
    assert plain.comparisons()["memory"] == Comparison("tracker", 1000, 900)
    cuda = _step(device="cuda:0", memory_method="torch.cuda.max_memory_allocated", independent_peak=None)
    assert cuda.comparisons()["memory"].what == "CUDA allocator"
    assert cuda.independent_ratio is None


def test_synchronous_offload_step_compares_with_the_sequential_replay():
    from memsched.models.offload.executor import OffloadStepResult

    base = dict(loss=0.0, grads={}, input_grad=None, peak_memory=900, time_ms=3.0, device="cpu",
                memory_method="LiveTensorTracker", predicted_peak=1000, predicted_makespan=2.0,
                independent_peak=1100, sequential_peak=1200, sequential_makespan=4.0, tracker_sequential_peak=1150)
    step = OffloadStepResult(**base)
    assert step.comparisons() == {"time": Comparison("one op at a time", 4.0, 3.0),
                                  "memory": Comparison("tracker", 1150, 900),
                                  "independent": Comparison("allocator", 1200, 1100)}
    assert step.time_ratio == 0.75
    on_cuda = OffloadStepResult(**{**base, "device": "cuda:0", "memory_method": "torch.cuda.max_memory_allocated"})
    assert on_cuda.comparisons()["time"] == Comparison("", 2.0, 3.0)


def _net() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Sequential(nn.Linear(16, 64), nn.ReLU()),
                        *[nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1)) for _ in range(4)],
                        nn.Linear(64, 4))
    x = torch.randn(64, 16)
    return net, x, x[:, :4].argmax(1)


@pytest.mark.parametrize("problem", ["chain", "offload"])
def test_a_run_writes_the_pairs_its_ratios_divide(problem):
    net, x, y = _net()
    extra = {"bandwidth": "1GB/s", "solver": "pofo"} if problem == "offload" else {}
    run = memsched.run(net, "70%", example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1, time_repeats=1,
                       problem=problem, **extra)
    assert run.status in ("optimal", "feasible"), run.data.get("message")
    written = run.data["compared"]
    assert written["memory"]["measured"] / written["memory"]["predicted"] == pytest.approx(run.ratio["memory"])
    assert written["independent"]["measured"] / written["independent"]["predicted"] == pytest.approx(
        run.ratio["independent_memory"])
    assert run.data["units"]["time"] == "ms"  # profiled: the time pair divides as it stands
    assert written["time"]["measured"] / written["time"]["predicted"] == pytest.approx(run.ratio["time"])
    if problem == "offload":  # CPU: transfers are synchronous, the one-op-at-a-time replay is the prediction
        assert written["time"]["what"] == "one op at a time"
        assert written["time"]["predicted"] == run.predicted["sequential_makespan"]
    else:
        assert written["time"]["predicted"] == run.predicted["makespan"]
    assert run.compared() == {k: (v["what"], v["predicted"], v["measured"]) for k, v in written.items()}


def test_a_run_without_the_block_gives_the_plain_pairs():
    run = RunResult({"model": "m", "solver": "rotor", "status": "optimal", "device": "cpu",
                     "predicted": {"makespan": 5.0, "peak_memory": 100, "tracker_peak_memory": 90},
                     "measured": {"time": 6.0, "peak_memory": 95, "independent_peak": None}})
    assert run.compared() == {"time": ("", 5.0, 6.0), "memory": ("", 100, 95), "independent": ("", 100, None)}


# ---------------------------------------------------------------------------- time units other than ms
def _profile_in_seconds(tmp_path) -> str:
    """A profiled lstm chain rewritten with its times in seconds (the same chain, meta.units.time "s")."""
    import json

    import memsched.models.run as models_run

    ms = tmp_path / "lstm_ms.json"
    models_run.prepare("chain", "lstm", sizes={"batch": 2, "seq_len": 4, "width": 16, "device": "cpu"},
                       profile_repeats=1, profile_file=str(ms))
    data = json.loads(ms.read_text())
    for item in [*data["stages"], data["loss"]]:
        for key in [k for k in item if k.endswith("_time") or "_time_" in k]:
            item[key] /= 1e3
    data.setdefault("meta", {}).setdefault("units", {})["time"] = "s"
    seconds = tmp_path / "lstm_s.json"
    seconds.write_text(json.dumps(data))
    return str(seconds)


@pytest.mark.parametrize("problem", ["chain", "offload"])
def test_a_run_in_seconds_converts_its_time_ratio_to_ms(tmp_path, problem):
    """An offloading run said its times were in ms whatever the chain's unit, and divided ms by seconds."""
    import memsched.models.run as models_run

    path = _profile_in_seconds(tmp_path)
    extra = {"bandwidth": 1e6, "solver": "vdnn"} if problem == "offload" else {}
    out = models_run.run("lstm", "95%", problem=problem, instance=path, time_repeats=1,
                         sizes={"batch": 2, "seq_len": 4, "width": 16, "device": "cpu"}, independent=False,
                         store_all=False, **extra)
    assert out["predicted"] is not None, out.get("message")
    assert out["units"]["time"] == "s"
    predicted_s = out["compared"]["time"]["predicted"]
    assert predicted_s < 1.0  # seconds: the profile's ms divided by 1000
    assert out["ratio"]["time"] == pytest.approx(out["measured"]["time"] / (predicted_s * 1e3))


def test_the_sweep_row_of_a_run_in_seconds_converts_to_ms(tmp_path):
    import memsched.models.run as models_run

    path = _profile_in_seconds(tmp_path)
    target = models_run.prepare("chain", "lstm", instance=path,
                                sizes={"batch": 2, "seq_len": 4, "width": 16, "device": "cpu"})
    assert target.time_unit == "s"
    step, row = models_run.execute_schedule(target, target.store_all, time_repeats=1, independent=False)
    assert row["time_ratio"] == pytest.approx(step.time_ms / (row["compared_makespan"] * 1e3))
