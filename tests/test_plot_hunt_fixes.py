"""Fixes from the plotting bug hunt: stage colours of a pipeline comparison, the rich display of an
undrawable partition, the unit of `Result.period`, `solve -o X --plot X`, `plot` / `simulate` of a
partition of another pipeline, and the time units of `RunResult.plot`."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import memsched  # noqa: E402
from memsched.results import Result, RunResult  # noqa: E402

TINY_RESNET = memsched.data_path("pipeline", "tiny-resnet.graph.txt")
CNN12 = memsched.data_path("examples", "cnn12.json")


def _hex(colour) -> str:
    from matplotlib.colors import to_hex

    return to_hex(colour)


def test_pipeline_comparison_stage_colours_match_legend():
    inst = memsched.load(CNN12)
    r3 = memsched.solve(inst, "1GB", problem="pipeline", devices=3)
    r2 = memsched.solve(inst, "1GB", problem="pipeline", devices=2)
    fig = memsched.plot(inst, {"P3": r3, "P2": r2}, problem="pipeline")
    legend = {t.get_text(): _hex(h.get_color()) for h, t in zip(fig.legends[0].legend_handles,
                                                                fig.legends[0].get_texts())
              if t.get_text().startswith("stage")}
    assert set(legend) == {"stage 0", "stage 1", "stage 2"}
    lines = [line for ax in fig.axes for line in ax.lines if line.get_gid() == "memory"]
    assert len(lines) == 5  # three stages, then two
    for line in lines:
        stage = line.get_label().split(" [")[0]
        assert _hex(line.get_color()) == legend[stage], line.get_label()


@pytest.fixture(scope="module")
def replicated():
    pipe = memsched.load(TINY_RESNET)
    return pipe, memsched.solve(pipe, "100%", "madpipe", devices=4, replication=True)


def test_result_repr_html_of_undrawable_partition_shows_table_and_note(replicated):
    _, r = replicated
    assert any(s.replicas > 1 for s in r.schedule.stages)  # the timeline cannot draw it
    out = r._repr_html_()
    assert "<table>" in out and "madpipe" in out
    assert "<img" not in out and "no figure: cannot draw this partition" in out


def test_comparison_repr_html_of_undrawable_partition_shows_table_and_note(replicated):
    pipe, _ = replicated
    c = memsched.solve(pipe, "100%", ["madpipe", "pipedream"], devices=4, replication=True)
    out = c._repr_html_()
    assert "<table" in out and "pipedream" in out
    assert "<img" not in out and "no figure:" in out


def test_period_docstring_states_the_instance_time_unit():
    doc = Result.period.__doc__ or ""
    assert "seconds per" not in doc and "instance's time unit" in doc


def test_solve_refuses_plot_onto_the_output_file(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = cli("solve", CNN12, "--budget", "50%", "-o", "same.png", "--plot", "./same.png")
    assert res.code == 2 and res.out == ""
    assert "--plot: same file as --output" in res.err
    assert not (tmp_path / "same.png").exists()


@pytest.fixture
def other_partition(cli, tmp_path) -> Path:
    """A partition of tiny-resnet (10 layers), to be played against cnn12 (12 layers)."""
    res = cli("partition", TINY_RESNET, "--devices", "4", "--memory", "100MB", "--json")
    assert res.code == 0, res.err
    path = tmp_path / "tpart.json"
    path.write_text(res.out)
    return path


def test_plot_of_another_pipelines_partition_names_the_file(cli, tmp_path, other_partition):
    res = cli("plot", CNN12, other_partition, "-o", tmp_path / "other.png")
    assert res.code == 2
    assert f"{other_partition}: " in res.err and "the stages cover layers" in res.err
    assert not (tmp_path / "other.png").exists()


def test_simulate_of_another_pipelines_partition_prints_no_report(cli, other_partition):
    for extra in ((), ("--json",)):
        res = cli("simulate", CNN12, other_partition, *extra)
        assert res.code == 2 and res.out == ""
        assert f"{other_partition}: " in res.err and "the stages cover layers" in res.err


def test_simulate_still_reports_a_budget_violation(cli, tmp_path):
    res = cli("partition", CNN12, "--devices", "2", "--memory", "1GB", "--json")
    assert res.code == 0, res.err
    part = tmp_path / "p.json"
    part.write_text(res.out)
    res = cli("simulate", CNN12, part, "--budget", "1000")
    assert res.code == 2 and "period" in res.out and "budget" in res.err


def _run_data(units: dict | None) -> dict:
    data = {"model": "m", "solver": "s", "device": "cpu", "predicted": {"makespan": 500.0, "peak_memory": 2**21},
            "measured": {"time": 3.0, "peak_memory": 2**21}}
    if units is not None:
        data["units"] = units
    return data


def test_runresult_plot_keeps_other_time_units_off_the_ms_axis():
    fig = RunResult(_run_data({"time": "MFLOP", "memory": "bytes"})).plot()
    for ax in fig.axes:
        heights = [p.get_height() for p in ax.patches]
        if 500.0 in heights:  # the predicted makespan's axis
            assert "MFLOP" in ax.get_ylabel() and "ms" not in ax.get_ylabel()
            assert 3.0 not in heights  # the measured ms are not on this scale
        if 3.0 in heights:
            assert "ms" in ax.get_ylabel()
    assert any("MFLOP" in ax.get_ylabel() for ax in fig.axes)


def test_runresult_plot_in_ms_is_one_comparison():
    for units in (None, {"time": "ms"}):
        fig = RunResult(_run_data(units)).plot()
        ax = fig.axes[0]
        assert ax.get_ylabel() == "time (ms)" and [p.get_height() for p in ax.patches] == [500.0, 3.0]


def test_run_docstring_does_not_say_makespan_in_ms():
    assert "makespan in ms" not in " ".join((memsched.run.__doc__ or "").split())


def test_cli_docs_mention_the_new_refusals():
    text = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    assert "the file of `-o` is refused" in text


@pytest.mark.parametrize("path, budget, solver", [(("graphs", "vgg16_like.json"), "70%", "greedy"),
                                                  (("join", "siamese8.json"), "50%", "dp")])
def test_result_summary_sizes_in_the_instance_memory_unit(path, budget, solver):
    inst = memsched.load(memsched.data_path(*path))
    unit = inst.meta["units"]["memory"]
    assert unit in ("KiB", "MB")
    r = memsched.solve(inst, budget, solver)
    pairs = dict(r.summary())
    bytes_ = r.peak_memory * (2**10 if unit == "KiB" else 10**6)
    assert pairs["peak memory"] == f"{bytes_ / 2**20:.3g} MiB ({r.peak_memory} {unit})"
    assert f"({r.budget} {unit})" in pairs["budget"]
    figure_title = r.plot().axes[0].get_title(loc="left")
    assert f"peak {bytes_ / 2**20:.3g} MiB" in figure_title  # the figure and the table agree
    assert f"({r.peak_memory} {unit})" in r._repr_html_()


def test_result_summary_sizes_of_a_bytes_instance_unchanged():
    r = memsched.solve(memsched.load(CNN12), "50%")
    assert dict(r.summary())["peak memory"].endswith(f"({r.peak_memory} B)")
