"""Hunt 29 (plot of H-Revolve output, pipeline violations, peak label): the pipeline batch stops at the
earliest crossing of the budget over all devices; a non-zero size is never labelled 0; the peak's label
stays inside the memory panel; `plot` and `simulate` refuse an abstract ``memsched.hrevolve/1`` schedule."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from memsched.experiments.plotting import plot_schedule, plot_timeline, timeline_for  # noqa: E402
from memsched.experiments.plotting.adapters import schedule_from_json  # noqa: E402
from memsched.experiments.plotting.draw import _figure, _fmt  # noqa: E402
from memsched.experiments.plotting.timeline import Bar, MemorySeries, Timeline  # noqa: E402
from memsched.solvers.chain import Chain  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from memsched.solvers.formats import load_instance  # noqa: E402

MIB = 2**20
# cnn12 on 3 devices (as `memsched partition cnn12.json --devices 3 --memory 500MiB --json` answers): stage 0 has
# the largest memory, but stage 2 (one micro-batch in flight) goes over 420 MiB first, at its first forward
PARTITION = {"format": "memsched.partition/1", "schedule": "1f1b", "micro_batches": None, "devices": 3,
             "stages": [{"first_layer": 0, "last_layer": 1, "replicas": 1},
                        {"first_layer": 2, "last_layer": 2, "replicas": 1},
                        {"first_layer": 3, "last_layer": 11, "replicas": 1}],
             "weight_factor": 4.0, "bandwidth": None, "latency": 0.0}


# ---------------------------------------------------------------------------- bug 1: pipeline violation
def test_pipeline_violation_is_the_earliest_crossing_over_all_devices(examples):
    _, inst = load_instance(str(examples / "cnn12.json"), "pipeline")
    part = schedule_from_json("pipeline", PARTITION, inst, path="part.json")
    budget = 420 * MIB
    free = timeline_for("pipeline", inst, part)
    firsts = []
    for k, s in enumerate(free.memory):
        over = np.flatnonzero(s.values > budget)
        if len(over):
            firsts.append((float(s.times[over[0]]), k, float(s.values[over[0]])))
    assert len(firsts) >= 2  # several devices go over the budget
    t, k, v = min(firsts)
    tl = timeline_for("pipeline", inst, part, budget)
    assert tl.failure is not None
    assert tl.failure.time == t and tl.failure.memory == v
    failed = [b for b in tl.bars if b.category == "failed"]
    assert len(failed) == 1 and failed[0].row == tl.rows[k] and failed[0].start == t
    for s in tl.memory:  # nothing drawn over the budget before the violation
        assert not np.any((s.values > budget) & (s.times < t))
    assert f"stage {k}" in tl.failure.message


# ---------------------------------------------------------------------------- bug 2: sizes never "0"
@pytest.mark.parametrize("value, scale, unit, text", [
    (21, 2**30, "GiB", "21 bytes"), (400, 2**30, "GiB", "400 bytes"), (600, 2**30, "GiB", "600 bytes"),
    (3 * 2**10, 2**40, "TiB", "3 KiB"), (0, 2**30, "GiB", "0 GiB"), (1.96e-8, 1, "slots", "0.0000000196 slots"),
    (1023.6 * MIB, MIB, "MiB", "1023.6 MiB")])
def test_fmt_never_writes_a_non_zero_size_as_zero(value, scale, unit, text):
    assert _fmt(value, scale, unit) == text


def test_peak_of_a_few_bytes_on_a_gib_axis_is_not_zero(examples):
    chain = Chain.load(examples / "tiny.json")
    schedule = store_all_schedule(chain.length)
    tl = timeline_for("chain", chain, schedule)
    fig = plot_schedule("chain", chain, schedule, budget=3 * 2**30)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title(loc="left") for ax in fig.axes]
    peaks = [t for t in texts if "peak" in t]
    assert peaks and all(f"peak {tl.peak_memory} bytes" in t for t in peaks), peaks
    assert not any("peak 0 " in t for t in texts)


# ---------------------------------------------------------------------------- bug 3: peak label inside the panel
def _peak_label_inside(fig) -> None:
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = 0
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for text in ax.texts:
            if text.get_text().startswith("peak"):
                bb = text.get_window_extent(renderer)
                assert box.x0 - 0.5 <= bb.x0 and bb.x1 <= box.x1 + 0.5, (text.get_text(), bb, box)
                assert not bb.overlaps(ax.yaxis.label.get_window_extent(renderer))
                found += 1
    assert found


def test_peak_label_near_t0_of_a_failure_stays_inside_the_axes(examples):
    chain = Chain.load(examples / "tiny.json")
    _peak_label_inside(plot_schedule("chain", chain, store_all_schedule(chain.length), budget=1))


def _timeline(peak_time: float, end: float = 100.0) -> Timeline:
    times = np.asarray([0.0, peak_time, peak_time, end])
    values = np.asarray([10.0, 10.0, 1000.0, 1000.0]) if peak_time == 0 else np.asarray([10.0, 10.0, 1000.0, 5.0])
    return Timeline("chain", [MemorySeries(times, values)], [Bar("F_all", 0.0, end, "F_all", "0")], ["F_all"],
                    end, 1000, peak_time, None, None, "ms", "bytes")


@pytest.mark.parametrize("peak_time", [0.0, 0.5, 99.9])
@pytest.mark.parametrize("figsize", [None, (4.0, 3.0)])
def test_peak_label_at_either_edge_stays_inside_the_axes(peak_time, figsize):
    _peak_label_inside(plot_timeline(_timeline(peak_time), figsize=figsize))


def test_peak_label_of_a_short_schedule_compared_with_a_long_one():
    fig = _figure([("short", _timeline(0.5, end=5.0)), ("long", _timeline(500.0, end=1000.0))], title=None,
                  figsize=None)
    _peak_label_inside(fig)


# ---------------------------------------------------------------------------- bug 4: H-Revolve output refused
@pytest.fixture
def hrevolve_json(cli, tmp_path) -> Path:
    res = cli("hrevolve", "4", "--level", "2,0,0", "--json")
    assert res.code == 0, res.err
    path = tmp_path / "hr.json"
    path.write_text(res.out)
    return path


@pytest.mark.parametrize("command", ["plot", "simulate"])
@pytest.mark.parametrize("bare", [False, True])
@pytest.mark.parametrize("bandwidth", [[], ["--bandwidth", "1"]])
def test_plot_and_simulate_refuse_an_hrevolve_schedule(cli, examples, tmp_path, hrevolve_json, command, bare,
                                                       bandwidth):
    path = hrevolve_json
    if bare:  # the memsched.hrevolve/1 object alone
        path = tmp_path / "bare.json"
        path.write_text(json.dumps(json.loads(hrevolve_json.read_text())["schedule"]))
    out = ["-o", str(tmp_path / "hr.png")] if command == "plot" else []
    res = cli(command, examples / "tiny.json", path, *out, *bandwidth)
    assert res.code == 2
    field = "format" if bare else "schedule.format"
    assert res.err.startswith(f"memsched {command}: error: {path}: {field}: 'memsched.hrevolve/1'"), res.err
    assert len(res.err.strip().splitlines()) == 1 and "host_link" not in res.err and res.out == ""
    assert not (tmp_path / "hr.png").exists()
