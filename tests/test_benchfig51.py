"""Issue 51 (benchfig): the committed benchmark figures hide or misdraw data; checked on small hand-made rows, through
the matplotlib objects the scripts draw (never the image bytes).

1. `bench_join.figure`: one legend for the whole figure, below the panels (it covered points of the first panel);
2. `bench_pipeline_pipedream.figure`: every profile keeps its column in both panels, and a column without a point
   says why from the row's statuses ("PipeDream timed out", "P=2: no plan <= 16 GB"); ``--replot`` redraws the
   figure from the CSV, which it leaves as it is, solving nothing;
3. `vs_torch_report.figure`: a tool's line joins only its lower envelope (noisy points at one peak zigzagged into
   a curve), its other points are hollow marks;
4. `vs_torch_duel.duel_figure`: the dashed line at 1.02 is "2% allowance" in the legend, at 7 pt or more.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")


def _kept(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """The figures `module.name` (a saver: fig, path, ...) is given, drawn (for their extents), not written."""
    figs: list[Any] = []

    def keep(fig: Any, path: Any, **kw: Any) -> None:
        fig.canvas.draw()
        figs.append(fig)

    monkeypatch.setattr(module, name, keep)
    return figs


# ------------------------------------------------------------------ 1. bench_join: one legend, below the panels
def _join_row(instance: str, group: str, solver: str, frac: float, makespan: str) -> dict[str, Any]:
    return {"group": group, "instance": instance, "solver": solver, "budget_frac": frac, "makespan": makespan,
            "status": "optimal", "scope": ""}


def test_bench_join_draws_one_figure_legend_below_every_panel(monkeypatch, tmp_path):
    import memsched.experiments.bench_join as bench

    figs = _kept(monkeypatch, bench, "save_figure")
    rows = [_join_row(inst, group, solver, frac, str(40 + 10 * (1 - frac) + k))
            for inst, group in (("2x3", "small"), ("2x12", "medium"))
            for k, solver in enumerate(("dp", "equal", "sequential", "store-all"))
            for frac in (0.7, 0.8, 1.0)]
    bench.figure(rows, tmp_path / "j.png")
    (fig,) = figs
    assert all(ax.get_legend() is None for ax in fig.axes)  # no legend inside a panel, over its points
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts.count("equal") == 1 and "store-all" in texts and "sequential" in texts, texts
    box = legend.get_window_extent()
    drawn = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert len(drawn) == 2
    assert all(box.y1 <= ax.get_tightbbox().y0 for ax in drawn)  # below every panel, its labels included


# ------------------------------------------------------------------ 2. bench_pipeline_pipedream: no profile dropped
def _pd_row(profile: str, P: int, *, pipedream: float | None = 1.0, status: str = "ok", mem: float | None = 1.5,
            mem_status: str = "optimal") -> dict[str, Any]:
    """A compute row of the bench's CSV (periods in s, memory in bytes), as `run` writes it."""
    return {"profile": profile, "layers": 10, "mode": "compute", "devices": P, "memory": 16_000_000_000,
            "pipedream_period_s": "" if pipedream is None else pipedream, "pipedream_status": status,
            "ours_period_s": 1.0, "ratio": "" if pipedream is None else 1.0, "memaware_status": mem_status,
            "memaware_period_s": "" if mem is None else mem}


def _pd_rows() -> list[dict[str, Any]]:
    """alexnet at every P; inception_v3 timed out at P=2 (so not run above); resnext50 without a plan within 16 GB
    at P=2."""
    rows = [_pd_row("alexnet", P) for P in (2, 4, 8, 16)]
    rows += [_pd_row("inception_v3", P, pipedream=None,
                     status="timeout" if P == 2 else "not run (smaller P timed out)") for P in (2, 4, 8, 16)]
    rows += [_pd_row("resnext50", P, mem=None if P == 2 else 2.0, mem_status="infeasible" if P == 2 else "optimal")
             for P in (2, 4, 8, 16)]
    return rows


def test_pipedream_missing_cells_say_why_from_the_statuses():
    from memsched.experiments.bench_pipeline_pipedream import TIMED_OUT, column_note, missing_reason

    rows = _pd_rows()
    inception = [r for r in rows if r["profile"] == "inception_v3"]
    resnext = [r for r in rows if r["profile"] == "resnext50"]
    assert missing_reason(rows[0], "dp") is None and missing_reason(rows[0], "memory") is None
    assert {missing_reason(r, p) for r in inception for p in ("dp", "memory")} == {TIMED_OUT}
    assert missing_reason(resnext[0], "dp") is None
    assert missing_reason(resnext[0], "memory") == "no plan \u2264 16 GB"
    assert column_note(inception, "dp") == column_note(inception, "memory") == "PipeDream timed out"
    assert column_note(resnext, "memory") == "P=2: no plan \u2264 16 GB" and column_note(resnext, "dp") == ""
    text = {k: str(v) for k, v in resnext[0].items()}  # a row read back from the CSV: text
    assert missing_reason(text, "memory") == "no plan \u2264 16 GB"


def test_pipedream_figure_keeps_every_profile_and_notes_the_missing_cells(monkeypatch, tmp_path):
    import memsched.experiments.bench_pipeline_pipedream as bench

    figs = _kept(monkeypatch, bench, "save_figure")
    bench.figure(_pd_rows(), tmp_path / "p.png")
    (fig,) = figs
    left, right = fig.axes
    for ax in (left, right):
        assert [t.get_text() for t in ax.get_xticklabels()] == ["alexnet", "inception_v3", "resnext50"]
    notes = {ax: {t.get_text(): t.get_position()[0] for t in ax.texts} for ax in (left, right)}
    assert notes[left] == {"PipeDream timed out": 1}
    assert notes[right] == {"PipeDream timed out": 1, "P=2: no plan \u2264 16 GB": 2}
    # the points drawn: none at inception_v3's column, resnext50's P=2 only in the left panel
    xs = {ax: sorted(float(x) for c in ax.collections for x, y in c.get_offsets() if y == y) for ax in (left, right)}
    assert xs[left] == [0, 0, 0, 0, 2, 2, 2, 2] and xs[right] == [0, 0, 0, 0, 2, 2, 2]


def test_pipedream_replot_redraws_from_the_csv_without_solving(monkeypatch, tmp_path, capsys):
    import memsched.experiments.bench_pipeline_pipedream as bench

    out = tmp_path / "pd.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=bench.FIELDS, restval="")
        w.writeheader()
        w.writerows(_pd_rows())
    before = out.read_bytes()
    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("--replot solved"))
    figs = _kept(monkeypatch, bench, "save_figure")
    assert bench.main(["--replot", "--out", str(out)]) == 0
    assert out.read_bytes() == before  # the table is left as it is
    (fig,) = figs
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["alexnet", "inception_v3", "resnext50"]
    assert "wrote" in capsys.readouterr().out


def test_pipedream_replot_of_a_bad_cell_is_one_line(tmp_path, capsys):
    import memsched.experiments.bench_pipeline_pipedream as bench

    out = tmp_path / "pd.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=bench.FIELDS, restval="")
        w.writeheader()
        w.writerows([{**_pd_row("alexnet", 2), "ratio": "abc"}])
    assert bench.main(["--replot", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "ratio 'abc' is not a number" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "pd.png").exists()


# ------------------------------------------------------------------ 3. vs_torch: lines through the lower envelope
def test_lower_envelope_keeps_the_points_no_other_beats_in_both():
    from memsched.experiments.vs_torch_report import lower_envelope

    zigzag = [(66.0, 30.0), (66.2, 68.0), (65.9, 35.0), (66.1, 26.0), (66.1, 47.0), (66.1, 26.0)]
    assert lower_envelope(zigzag) == [(65.9, 35.0), (66.0, 30.0), (66.1, 26.0)]
    assert lower_envelope([(1.0, 5.0)]) == [(1.0, 5.0)] and lower_envelope([]) == []
    assert lower_envelope([(1.0, 5.0), (1.0, 4.0)]) == [(1.0, 4.0)]  # same peak: the faster only


def test_vs_torch_figure_joins_only_the_envelope_and_marks_the_rest_hollow(monkeypatch, tmp_path):
    from matplotlib.colors import to_hex
    from memsched.experiments import vs_torch_report

    figs: list[Any] = []
    monkeypatch.setattr(vs_torch_report, "save_png", lambda fig, path: figs.append(fig))
    aot = "torch.compile(aot_eager, min-cut)"
    points = [(66.0, 0.30), (66.2, 0.68), (65.9, 0.35), (66.1, 0.26), (66.1, 0.47)]  # MiB, overhead
    rows = [{"model": "resnet50", "size": "small", "tool": aot, "setting": f"b={k}", "status": "ok",
             "peak_bytes": str(int(peak * 2**20)), "alloc_peak": "", "time_ms": "10", "overhead": str(o),
             "grad_ok": ""} for k, (peak, o) in enumerate(points)]
    vs_torch_report.figure(rows, tmp_path / "v.png")
    (fig,) = figs
    tracker = fig.axes[0]
    (line,) = tracker.get_lines()
    assert line.get_label() == aot and line.get_linestyle() == "-"
    ys = [round(float(y), 6) for y in line.get_ydata()]
    assert ys == [35.0, 30.0, 26.0]  # the envelope only: time falls as the peak grows, no zigzag
    (hollow,) = tracker.collections
    assert sorted(round(float(y), 6) for _, y in hollow.get_offsets()) == [47.0, 68.0]
    assert len(hollow.get_facecolors()) == 0 or hollow.get_facecolors()[0][3] == 0  # hollow
    assert to_hex(hollow.get_edgecolors()[0]) == to_hex(line.get_color())
    assert [t.get_text() for t in tracker.get_legend().get_texts()] == [aot]  # the hollow marks have no entry
    assert vs_torch_report.ENVELOPE_NOTE in [t.get_text() for t in fig.texts]


# ------------------------------------------------------------------ 4. the duels' allowance, named
def test_duel_figure_names_the_allowance_in_a_readable_legend(monkeypatch):
    from memsched.experiments import vs_torch_report
    from memsched.experiments.vs_torch_duel import duel_figure

    figs: list[Any] = []
    monkeypatch.setattr(vs_torch_report, "save_png", lambda fig, path: figs.append(fig))
    duel = {"model": "gpt2", "size": "small", "tool": "checkpoint-per-block", "setting": "4 blocks",
            "granularity": "block", "their_peak": str(3 * 2**20), "memsched_peak": str(2**20), "peak_ok": "True",
            "ratio": "0.97", "ratio_ci": "0.01", "ratio_of_least": "0.97", "grad_ok": "True", "their_grad_ok": "True"}
    duel_figure([duel, {**duel, "granularity": "layer", "ratio": "1.01"}], Path("unused.png"))
    (fig,) = figs
    (ax,) = fig.axes
    legend = ax.get_legend()
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == ["checkpoint-per-block (block)", "checkpoint-per-block (layer)", "2% allowance"]
    assert all(t.get_fontsize() >= 7 for t in legend.get_texts())
    (dashed,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert list(dashed.get_ydata()) == [1.02, 1.02] and dashed.get_label() == "2% allowance"


def test_pipedream_replot_names_a_row_without_ratio(tmp_path) -> None:
    """A compute row with PipeDream's period but an empty ratio (the run writes none for a period of 0) is a cell
    without a point, said under its column, not a traceback of --replot (review 51)."""
    from memsched.experiments import bench_pipeline_pipedream as bench

    row = {"pipedream_period_s": "0.5", "pipedream_status": "optimal", "ratio": "", "memaware_period_s": "0.6",
           "memaware_status": "optimal", "memory": "16e9", "devices": "2"}
    assert bench.missing_reason(row, "dp") == "no ratio"
    assert bench.missing_reason(row, "memory") is None
    zero = {**row, "pipedream_period_s": "0"}
    assert bench.missing_reason(zero, "dp") == bench.missing_reason(zero, "memory") == "PipeDream's period 0"
    assert math.isnan(bench._ratio(row, "dp"))
