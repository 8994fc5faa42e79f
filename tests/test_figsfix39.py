"""`memsched figures`: three fixes.

1. Figure (g)'s number columns (``independent_ratio``, ``time_ratio_min``, ``threads``, ``load_1min``, ...)
   were not checked: ``inf`` there crashed (exit 3, "Axis limits cannot be NaN or Inf") after other figures
   were written, and ``abc`` was drawn as nothing. Now exit 2 naming file, row and column, before any figure.
2. Two solvers of one figure could share colour and marker (``dag`` and ``madpipe``; ``interleave-v P=4``
   and ``dag-cpsat P=4``): now every label of a figure has its own pair (`figures.figure_styles`).
3. A complete table beside rows of no cell of the sweep file was noted as "0 never ran (the sweep was
   stopped ...)", its caption adding "or a cell that never ran": now the note says every cell has a row.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
from conftest import run_cli  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from memsched.experiments import figures as F  # noqa: E402
from memsched.experiments.sweep.store import valid_row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
FIG_A, FIG_D, FIG_G = RESULTS / "fig_a_chains", RESULTS / "fig_d_join", RESULTS / "fig_g_measured"

pytestmark = pytest.mark.skipif(not all(p.is_dir() for p in (FIG_A, FIG_D, FIG_G)),
                                reason="needs the committed results tables")


def _copy(tmp_path: Path, *folders: Path) -> Path:
    results = tmp_path / "r"
    for folder in folders:
        shutil.copytree(folder, results / folder.name)
    return results


def _set_cell(table: Path, column: str, row: int, value: str) -> None:
    """Cell `column` of data row `row` (its line is row + 1, as the messages count) of the CSV `table`."""
    with open(table, newline="", encoding="utf-8") as f:
        records = list(csv.reader(f))
    records[row - 1][records[0].index(column)] = value
    with open(table, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(records)


# ---------------------------------------------------------------------------- 1. figure (g)'s numbers
@pytest.mark.parametrize(("column", "value", "what"), [
    ("independent_ratio", "inf", "not a finite number"), ("independent_ratio", "1e400", "not a finite number"),
    ("independent_ratio", "abc", "not a number"), ("time_ratio_max", "inf", "not a finite number"),
    ("threads", "abc", "not a number"), ("load_1min", "-inf", "not a finite number"),
    ("independent_peak", "1e400", "not a finite number"), ("predicted_peak", "abc", "not a number"),
])
def test_figure_g_number_column_damage_is_exit_2_before_any_figure(tmp_path, column, value, what):
    results = _copy(tmp_path, FIG_A, FIG_G)
    table = results / "fig_g_measured" / "fig_g_measured.csv"
    _set_cell(table, column, 2, value)
    r = run_cli("figures", "--results", results, "--out", tmp_path / "out", "--only", "a", "g")
    assert r.code == 2, (r.code, r.out, r.err)
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert str(table) in r.err and column in r.err and "row 2" in r.err and what in r.err, r.err
    assert "internal error" not in r.err
    assert not (tmp_path / "out").exists()  # no figure written


def test_empty_figure_g_cells_are_fine(tmp_path):
    """The executed columns are empty in rows that did not execute (and absent from other sweeps' tables):
    no damage. A figure (g) row with no independent ratio is drawn without that point."""
    results = _copy(tmp_path, FIG_A, FIG_G)
    table = results / "fig_g_measured" / "fig_g_measured.csv"
    for column in ("independent_ratio", "independent_peak", "time_ratio_min", "time_ratio_max", "load_1min"):
        _set_cell(table, column, 2, "")
    r = run_cli("figures", "--results", results, "--out", tmp_path / "out", "--only", "a", "g")
    assert r.code == 0, (r.out, r.err)
    assert (tmp_path / "out" / "fig_g_measured.png").is_file()


def test_figure_g_rows_given_to_render_with_an_infinite_ratio_are_drawn(tmp_path):
    """Rows not read by `load_results` (not checked): an infinite ratio is left out of the axis limits."""
    rows = F.load_results(FIG_G)
    rows.loc[rows.index[1], "independent_ratio"] = float("inf")
    paths, note = F.render("g", rows, tmp_path)
    assert note is None and all(p.is_file() for p in paths)


def test_a_journal_row_with_text_in_an_executed_column_is_damaged():
    row = {"key": "k", "independent_ratio": 1.01, "threads": 1, "load_1min": None, "time_ratio_min": 0.9}
    assert valid_row(row)
    assert not valid_row({**row, "independent_ratio": "abc"})
    assert not valid_row({**row, "load_1min": float("inf")})


# ---------------------------------------------------------------------------- 2. one style per label
def _pairs(styles: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    return [(to_hex(kw["color"]), kw["marker"]) for kw in styles.values()]


@pytest.mark.parametrize("labels", [
    ["dag", "madpipe"], ["interleave-v P=4", "dag-cpsat P=4"], ["milp", "checkmate", "exact"],
    ["rotor", "dp", "madpipe", "remat-only", "dag"],
    ["madpipe P=2", "madpipe P=4", "madpipe P=8", "madpipe P=16", "madpipe P=32", "madpipe P=64"],
    [f"solver{i}" for i in range(30)],
])
def test_every_label_of_a_figure_has_its_own_colour_and_marker(labels):
    styles = F.figure_styles(labels)
    assert set(styles) == set(labels)
    assert len(set(_pairs(styles))) == len(labels), styles
    assert F.figure_styles(list(reversed(labels))) == styles  # deterministic, whatever the order


def test_the_committed_figures_keep_their_styles():
    """Labels whose usual styles do not clash keep them: the committed figures are drawn as before."""
    rows = F.load_results(RESULTS)
    for fid in ("main", "a", "b", "c", "d", "e", "f"):
        labels = set(F._label_of(F.figure_rows(rows, F.FIGURES[fid])))
        assert F.figure_styles(labels) == {lab: F.style(lab, lab) for lab in labels}, fid


def _drawn_styles(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, set[tuple[str, str]]]]:
    """Per figure saved: legend text -> the (colour, marker) pairs of its lines, recorded at save."""
    seen: list[dict[str, set[tuple[str, str]]]] = []
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        drawn: dict[str, set[tuple[str, str]]] = {}
        for ax in fig.axes:
            for line in ax.get_lines():
                if not str(line.get_label()).startswith("_") and line.get_marker() not in (None, "None", ""):
                    drawn.setdefault(line.get_label(), set()).add((to_hex(line.get_markeredgecolor()),
                                                                   line.get_marker()))
        seen.append(drawn)
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    return seen


def test_a_figure_draws_two_clashing_labels_apart(tmp_path, monkeypatch):
    """``dag`` and ``madpipe`` had the same colour and marker: drawn in one figure, they differ now."""
    seen = _drawn_styles(monkeypatch)
    table = pd.read_csv(FIG_D / "fig_d_join.csv")
    label = table["solver_label"].replace({"sequential": "dag", "dp": "madpipe"})
    (tmp_path / "r" / "fig_d_join").mkdir(parents=True)
    table.assign(solver_label=label).to_csv(tmp_path / "r" / "fig_d_join" / "fig_d_join.csv", index=False)
    r = run_cli("figures", "--results", tmp_path / "r", "--out", tmp_path / "out", "--only", "d")
    assert r.code == 0, (r.out, r.err)
    drawn = seen[0]
    dag = [k for k in drawn if k.startswith("dag")]
    madpipe = [k for k in drawn if k.startswith("madpipe")]
    assert dag and madpipe, drawn
    assert drawn[dag[0]].isdisjoint(drawn[madpipe[0]]), drawn
    pairs = [p for ps in drawn.values() for p in ps]
    assert all(len(ps) == 1 for ps in drawn.values()) and len(set(pairs)) == len(pairs), drawn


# ---------------------------------------------------------------------------- 3. a complete table, extra rows
def test_a_complete_table_with_extra_rows_is_not_called_stopped(tmp_path, monkeypatch):
    captions: list[str] = []
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        captions.append(" ".join("\n".join(t.get_text() for t in fig.texts).split()))
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    results = _copy(tmp_path, FIG_D)
    table = results / "fig_d_join" / "fig_d_join.csv"
    full = pd.read_csv(table)
    extra = full[full["solver_label"] == "equal"]
    extra = extra.assign(solver_label="equal-x", key=extra["key"] + "-x")
    pd.concat([full, extra]).to_csv(table, index=False)
    r = run_cli("figures", "--results", results, "--out", tmp_path / "out", "--only", "d")
    assert r.code == 0, (r.out, r.err)
    (line,) = [n for n in r.out.splitlines() if n.startswith("note: figure d:")]
    assert "never ran" not in line and "stopped" not in line, line
    assert f"every cell of experiments/configs/fig_d_join.toml has a row ({len(full)} cells)" in line, line
    assert f"{len(extra)} rows of no cell of it" in line and "not known whether every cell of their grid ran" in line
    (caption, *_) = captions
    assert "never ran" not in caption, caption
    assert "missing points: no schedule within the budget" in caption


def test_not_run_caveat_keeps_the_stopped_sweep_wording():
    stopped = "sweep s: 8 of 180 cells of x.toml have a row, 172 never ran (...)"
    assert "or a cell that never ran" in F.not_run_caveat(F.CHAIN_NOTE, stopped)
    assert "or a cell that never ran" in F.not_run_caveat(F.CHAIN_NOTE)
