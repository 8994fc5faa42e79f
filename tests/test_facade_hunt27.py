"""Facade fixes of hunt 27.

1. `RunResult.plot` draws the pairs the run's ``ratio`` compares (tracker prediction beside the tracker's
   measurement, the allocator's prediction beside the independent measurement; a CPU offloading run's
   sequential makespan), not ``predicted.peak_memory`` (allocator) beside the tracker's peak.
2. `memsched.run(..., granularity=...)` is taken, as `memsched.profile` and ``memsched run --granularity``.
3. A graph replay of a plain list naming no node writes its JSON (``to_json``) instead of an AttributeError.
4. `SweepResult.plot` of a sweep where no run found a schedule is an `InputError`, not an empty figure.
5. Sizes are never shown in scientific notation ("1e+03 MiB", "1.02e+03 MiB").
6. Facade errors name the network argument ``model`` (the command line's ``MODEL`` stays).
7. The budget helpers say "the instance's memory unit", not "bytes"; a sweep's duplicate budget names the unit.
8. `memsched.sweep(budgets=np.int64(25))` is one budget.
"""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import memsched  # noqa: E402
from memsched.results import RunResult, _gb  # noqa: E402

TINY = memsched.data_path("examples", "tiny.json")
CNN12 = memsched.data_path("examples", "cnn12.json")


# ---------------------------------------------------------------------------- 1. RunResult.plot pairs
def _heights(ax) -> list[float]:
    return [p.get_height() for p in ax.patches]


def test_runresult_plot_draws_tracker_beside_tracker_and_allocator_beside_probe():
    """predicted.peak_memory (allocator, 190960) was drawn beside the tracker's 146176: 30% apart though the
    run's ratios are 1.0."""
    data = {"model": "siamese", "solver": "dp", "device": "cpu", "status": "optimal",
            "memory_method": "LiveTensorTracker", "predicted": {"makespan": 10.0, "peak_memory": 190960,
                                                                "tracker_peak_memory": 146176},
            "measured": {"time": 12.0, "peak_memory": 146176, "independent_peak": 190960},
            "ratio": {"memory": 1.0, "independent_memory": 1.0, "time": 1.2},
            "compared": {"time": {"what": "", "predicted": 10.0, "measured": 12.0},
                         "memory": {"what": "tracker", "predicted": 146176, "measured": 146176},
                         "independent": {"what": "allocator", "predicted": 190960, "measured": 190960}}}
    fig = RunResult(data).plot()
    memory = fig.axes[1]
    assert [round(h * 2**20) for h in _heights(memory)] == [146176, 146176, 190960, 190960]
    ticks = [t.get_text() for t in memory.get_xticklabels()]
    assert ticks == ["predicted\n(tracker)", "measured\n(tracker)", "predicted\n(allocator)", "measured\n(allocator)"]


def test_runresult_plot_of_cpu_offload_uses_the_sequential_replay():
    """On CPU the offloading ratios compare with the one-op-at-a-time replay (sequential_makespan, the
    tracker's sequential peak), not the two-stream makespan and peak."""
    data = {"model": "custom", "solver": "pofo", "device": "cpu", "status": "feasible", "problem": "offload",
            "memory_method": "LiveTensorTracker",
            "predicted": {"makespan": 10.0, "peak_memory": 2**21, "tracker_peak_memory": 2**21 - 64,
                          "sequential_peak": 2**21 + 2**20, "tracker_sequential_peak": 2**21 + 2**19,
                          "sequential_makespan": 14.0, "host_peak": 4096},
            "measured": {"time": 15.0, "peak_memory": 2**21 + 2**19, "independent_peak": 2**21 + 2**20},
            "compared": {"time": {"what": "one op at a time", "predicted": 14.0, "measured": 15.0},
                         "memory": {"what": "tracker", "predicted": 2**21 + 2**19, "measured": 2**21 + 2**19},
                         "independent": {"what": "allocator", "predicted": 2**21 + 2**20,
                                         "measured": 2**21 + 2**20}}}
    run = RunResult(data)
    time_ax, memory = run.plot().axes[:2]
    assert _heights(time_ax) == [14.0, 15.0]
    assert "one op at a time" in time_ax.get_xticklabels()[0].get_text()
    assert _heights(memory) == [2.5, 2.5, 3.0, 3.0]


def test_runresult_plot_of_a_real_run_draws_the_ratio_it_reports():
    torch = pytest.importorskip("torch")
    from torch import nn
    from torch.nn import functional as F

    torch.manual_seed(0)
    net = nn.Sequential(nn.Sequential(nn.Linear(16, 64), nn.ReLU()),
                        *[nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1)) for _ in range(4)],
                        nn.Linear(64, 4))
    x = torch.randn(64, 16)
    y = x[:, :4].argmax(1)
    # dropout recomputed under the budget: the allocator's prediction keeps RNG states the tracker does not see
    run = memsched.run(net, "70%", example_input=x, target=y, loss_fn=F.cross_entropy, repeats=1, time_repeats=1)
    assert run.status in ("optimal", "feasible"), run.data.get("message")
    heights = _heights(run.plot().axes[1])
    assert heights[0] * 2**20 == pytest.approx(run.predicted["tracker_peak_memory"] or run.predicted["peak_memory"])
    assert heights[1] / heights[0] == pytest.approx(run.ratio["memory"])
    if run.ratio.get("independent_memory") is not None:
        assert heights[3] / heights[2] == pytest.approx(run.ratio["independent_memory"])


# ---------------------------------------------------------------------------- 2. granularity
def test_run_takes_granularity(monkeypatch):
    """It was refused: "unknown option 'granularity' (sizes: batch, ...)"."""
    pytest.importorskip("torch")
    import memsched.models.run as models_run

    seen: dict = {}

    def fake_run(model, budget, **kwargs):
        seen.update(kwargs["sizes"])
        return {"model": model, "solver": "rotor", "status": "infeasible", "predicted": None, "measured": None}

    monkeypatch.setattr(models_run, "run", fake_run)
    memsched.run("resnet18", "90%", batch=2, granularity="layer")
    assert seen["granularity"] == "layer"


def test_run_checks_granularity_as_the_zoo_does():
    pytest.importorskip("torch")
    with pytest.raises(memsched.InputError, match="one of block, layer") as info:
        memsched.run("resnet18", "90%", batch=2, image_size=32, width=4, granularity="op", repeats=1,
                     time_repeats=1)
    assert info.value.field == "granularity"


# ---------------------------------------------------------------------------- 3. a plain-list graph replay
def test_graph_replay_of_a_plain_list_writes_its_json():
    graph = memsched.load(memsched.data_path("graphs", "linear10.json"))
    with pytest.raises(memsched.InputError, match="unknown node 99"):  # fix 40: a list of node ids
        memsched.simulate(graph, [0, np.int64(99)])
    result = memsched.simulate(graph, [0, np.int64(2)])  # node 2 needs node 1: an invalid replay
    out = json.loads(json.dumps(result.to_json()))
    assert out["status"] == "invalid" and out["schedule"]["sequence"] == [0, 2]
    valid = memsched.simulate(graph, list(range(graph.n))).to_json()  # a list naming nodes: the schedule's JSON
    assert valid["schedule"]["format"] == "memsched.schedule/1"


# ---------------------------------------------------------------------------- 4. empty sweep figure
def test_sweep_plot_with_no_schedule_is_an_input_error():
    sweep = memsched.sweep(memsched.load(TINY), budgets=["30%", "40%"], solvers=["rotor", "periodic"])
    assert not any(row["objective"] is not None for row in sweep.rows)
    with pytest.raises(memsched.InputError, match="no solver found a schedule: nothing to draw"):
        sweep.plot()
    with pytest.raises(memsched.InputError, match="nothing to draw"):
        memsched.plot(sweep, y="solve_time_s")
    assert "<img" not in sweep._repr_html_()


# ---------------------------------------------------------------------------- 5. no scientific notation
def test_sizes_are_never_in_scientific_notation():
    assert _gb(1000 * 2**20) == "1000 MiB"
    assert _gb(1021.6 * 2**20) == "1021.6 MiB"
    assert _gb(2**50) == "1048576 GiB"
    assert _gb(40.5 * 2**10) == "40.5 KiB" and _gb(949 * 2**20) == "949 MiB"  # three digits as before
    chain = memsched.load(CNN12)
    result = memsched.solve(chain, 1000 * 2**20, solver="rotor")
    assert dict(result.summary())["budget"] == "1000 MiB (1048576000 B)"
    html = memsched.solve(chain, "60%", solver=["rotor", "periodic"])._repr_html_()
    assert "e+0" not in html


def test_figure_sizes_are_never_in_scientific_notation():
    from memsched.experiments.plotting.draw import _fmt

    assert _fmt(1021.6 * 2**20, 2**20, "MiB") == "1021.6 MiB"
    assert _fmt(999.7 * 2**20, 2**20, "MiB") == "999.7 MiB"
    assert _fmt(123456.5, 1.0, "slots") == "123456.5 slots"
    assert _fmt(40.5, 1.0, "KiB") == "40.5 KiB" and _fmt(1024.0, 1.0, "MiB") == "1024 MiB"


# ---------------------------------------------------------------------------- 6. the model argument's name
@pytest.mark.parametrize("model", ["resnet1888", "nofile.py:build"])
def test_run_names_the_model_argument_as_python_does(model):
    pytest.importorskip("torch")
    with pytest.raises(memsched.InputError) as info:
        memsched.run(model, "50%")
    assert info.value.field == "model", str(info.value)


def test_outside_the_facade_the_model_is_still_MODEL():
    pytest.importorskip("torch")
    from memsched.models.zoo import build_model

    with pytest.raises(memsched.InputError) as info:
        build_model("resnet1888")
    assert info.value.field == "MODEL"


# ---------------------------------------------------------------------------- 7. the memory unit's wording
def test_budget_helpers_say_the_instance_memory_unit():
    for fn in (memsched.budget, memsched.reference_peak):
        doc = " ".join((fn.__doc__ or "").split())
        assert "memory unit" in doc and "Bytes from" not in doc and "(bytes)" not in doc, doc
    from memsched import api

    assert "budgets as bytes" not in " ".join((api.__doc__ or "").split())


def test_sweep_duplicate_budget_names_the_instance_unit():
    graph = memsched.load(memsched.data_path("graphs", "vgg16_like.json"))  # meta.units.memory: KiB
    assert memsched.budget(graph, "1MiB") == 1024
    with pytest.raises(memsched.InputError, match=r"the same 1024 KiB\)") as info:
        memsched.sweep(graph, budgets=["1MiB", 1024], solvers=["greedy"])
    assert info.value.field == "budgets[1]" and "bytes" not in str(info.value)


# ---------------------------------------------------------------------------- 8. a numpy scalar budget
def test_sweep_takes_a_numpy_scalar_budget():
    sweep = memsched.sweep(memsched.load(TINY), budgets=np.int64(25), solvers=["rotor"])
    assert len(sweep) == 1 and sweep.rows[0]["budget"] == 25


def test_python_spellings_of_join_model_and_bandwidth(tmp_path):
    """An unknown join network names ``model`` in Python, and a chain without a host link solved as an
    offloading instance asks for ``bandwidth=`` (not the command line's MODEL / --bandwidth)."""
    pytest.importorskip("torch")
    from memsched.models.join.zoo import build_join_model
    from memsched.solvers.errors import python_spelling

    import memsched

    with python_spelling(), pytest.raises(memsched.InputError) as info:
        build_join_model("siamesee")
    assert info.value.field == "model"
    chain = memsched.data_path("examples", "tiny.json")
    with pytest.raises(memsched.InputError) as info:
        memsched.solve(chain, "90%", problem="offload")
    assert "--bandwidth" not in str(info.value) and "bandwidth" in str(info.value)
