"""Fixes from hunt 28 (figures): an empty text cell and a damaged sweep table are one-line errors (exit 2)
before any figure is written; figure (b) draws only timed rows; a series drawn exactly under another is
shown; legends name the model a solver is optimal in; the paper figures' legend is outside the panels;
notes are cut at a word; `--only b b` draws b once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
import pytest
from conftest import run_cli

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from memsched.experiments import figures as F  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _cli(*argv: object) -> tuple[int, str, str]:
    """`memsched ARGV` in-process: (exit code, stdout, stderr) (`conftest.run_cli`)."""
    res = run_cli(*(str(a) for a in argv))
    return res.code, res.out, res.err


def _copy(results: Path, sweep: str, edit: Any = None) -> Path:
    """results/<sweep>/<sweep>.csv of the committed results copied under `results` (without the stored
    instances), the table passed through `edit` (a DataFrame -> DataFrame) when given."""
    dst = results / sweep
    dst.mkdir(parents=True, exist_ok=True)
    table = pd.read_csv(RESULTS / sweep / f"{sweep}.csv")
    (edit(table) if edit is not None else table).to_csv(dst / f"{sweep}.csv", index=False)
    return dst / f"{sweep}.csv"


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each figure finished (`figures._finish`): its lines per panel, legend texts and note."""
    seen: list[dict[str, Any]] = []
    finish = F._finish

    def record(fig, rows, out_dir, stem, note=""):  # noqa: ANN001, ANN202
        axes = [ax for ax in fig.axes if ax.get_visible()]
        legends = list(fig.legends) + [ax.get_legend() for ax in axes if ax.get_legend() is not None]
        seen.append({"stem": stem, "note": note, "lines": [list(ax.get_lines()) for ax in axes],
                     "legend": [t.get_text() for lg in legends for t in lg.get_texts()]})
        return finish(fig, rows, out_dir, stem, note)

    monkeypatch.setattr(F, "_finish", record)
    return seen


# ---------------------------------------------------------------------------- 1. empty text cells
def test_empty_budget_spec_in_fig_g_is_a_named_error_before_any_figure(tmp_path):
    results = tmp_path / "r"
    _copy(results, "fig_a_chains")
    table = _copy(results, "fig_g_measured", lambda t: t.assign(budget_spec=[None] + list(t["budget_spec"][1:])))
    code, _, err = _cli("figures", "--results", results, "--out", tmp_path / "out", "--only", "a", "g")
    assert code == 2, err
    assert str(table) in err and "budget_spec" in err and "row 2" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # figure a not written before the error


def test_render_of_rows_with_an_empty_budget_spec_is_an_input_error(tmp_path):
    from memsched.solvers.errors import InputError

    rows = pd.read_csv(RESULTS / "fig_g_measured" / "fig_g_measured.csv")
    rows.loc[0, "budget_spec"] = None
    with pytest.raises(InputError, match="budget_spec"):
        F.render("g", rows, tmp_path)


def test_empty_instance_hash_or_source_names_no_file():
    rows = pd.read_csv(RESULTS / "fig_a_chains" / "fig_a_chains.csv").head(3)
    rows.loc[0, "instance_hash"] = None
    rows.loc[1, "source"] = None
    units = F.with_memory_units(rows, RESULTS)[F.UNIT_COLUMN]
    assert len(units) == 3  # no TypeError on the empty cells; their instance counts as bytes or by its other key


# ---------------------------------------------------------------------------- 2. damaged sweep tables
def _damage(path: Path, mode: str) -> None:
    text = (RESULTS / "fig_b_solve_time" / "fig_b_solve_time.csv").read_text()
    if mode == "drop_status":
        head, rest = text.split("\n", 1)
        path.write_text(head.replace(",status,", ",", 1) + "\n" + rest)
    elif mode == "empty":
        path.write_text("")
    else:
        path.write_text(text[:40])


@pytest.mark.parametrize("mode", ["drop_status", "empty", "cut_header"])
def test_damaged_sweep_table_is_named_not_skipped(tmp_path, mode):
    table = _copy(tmp_path / "r", "fig_b_solve_time")
    _damage(table, mode)
    code, out, err = _cli("figures", "--results", tmp_path / "r", "--out", tmp_path / "out", "--only", "b")
    assert code == 2, (out, err)
    assert str(table) in err and "skipped" not in out
    assert not (tmp_path / "out").exists()


def test_damaged_table_beside_its_journal_is_named(tmp_path):
    folder = tmp_path / "r" / "mysweep"
    folder.mkdir(parents=True)
    (folder / "mysweep.jsonl").write_text("")
    (folder / "mysweep.csv").write_text("sweep,key,solver\n")
    from memsched.solvers.errors import InputError

    with pytest.raises(InputError, match="status"):
        F.load_results(tmp_path / "r")


def test_other_tools_tables_are_still_skipped(tmp_path):
    (tmp_path / "bench.csv").write_text("a,b\n1,2\n")
    (tmp_path / "notes.csv").write_text("")
    assert F.load_results(tmp_path).empty


# ---------------------------------------------------------------------------- 3. figure (b) statuses
def _fig_b_with_untimed(t: pd.DataFrame) -> pd.DataFrame:
    """The committed fig (b) rows and: revolve unsupported (0 s) at every size, cpsat error (1 ms) at
    L >= 30, rotor at L = 6 timed at 0 s."""
    extra = []
    for size in sorted(t["size"].unique()):
        base = t[t["size"] == size].iloc[0].copy()
        r = base.copy()
        r[["solver", "solver_label", "status", "solve_time_s", "key"]] = \
            ["revolve", "revolve", "unsupported", 0.0, f"rev-{size}"]
        r["objective"], r["message"] = float("nan"), "Revolve needs a homogeneous chain"
        extra.append(r)
        if size >= 30:
            r = base.copy()
            r[["solver", "solver_label", "status", "solve_time_s", "key"]] = \
                ["cpsat", "cpsat (phase model)", "error", 0.001, f"cp-{size}"]
            r["objective"], r["message"] = float("nan"), "crash"
            extra.append(r)
    t = pd.concat([t, pd.DataFrame(extra)], ignore_index=True)
    t.loc[(t["solver"] == "rotor") & (t["size"] == 6), "solve_time_s"] = 0.0
    return t


def test_fig_b_draws_only_timed_rows_and_notes_the_others(tmp_path, monkeypatch):
    seen = _recorded(monkeypatch)
    _copy(tmp_path / "r", "fig_b_solve_time", _fig_b_with_untimed)
    code, _, err = _cli("figures", "--results", tmp_path / "r", "--out", tmp_path / "out", "--only", "b")
    assert code == 0, err
    (fig,) = seen
    lines = {str(line.get_label()): line for line in fig["lines"][0] if not str(line.get_label()).startswith("_")}
    assert not any(label.startswith("revolve") for label in lines)
    cpsat = next(line for label, line in lines.items() if label.startswith("cpsat"))
    assert max(cpsat.get_xdata()) == 20 and 0.001 not in list(cpsat.get_ydata())  # no error row as a time
    assert all(y > 0 for line in lines.values() for y in line.get_ydata())  # none lost off the log axis
    assert "revolve (unsupported x11" in fig["note"] and "cpsat (phase model) (error x4" in fig["note"]
    assert "0 s drawn at" in fig["note"]


# ---------------------------------------------------------------------------- 4. coinciding series
@pytest.fixture(scope="module")
def fig_a(tmp_path_factory) -> dict[str, Any]:
    """Figure (a) drawn from the committed rows (`_recorded`)."""
    tmp = tmp_path_factory.mktemp("fig_a")
    with pytest.MonkeyPatch.context() as monkeypatch:
        seen = _recorded(monkeypatch)
        _copy(tmp / "r", "fig_a_chains")
        F.make_figures(tmp / "r", tmp / "out", ["a"])
    (fig,) = seen
    return fig


def test_series_under_another_is_marked_and_noted(fig_a):
    fig = fig_a
    for panel in fig["lines"]:
        rotor = next(line for line in panel if str(line.get_label()).startswith("rotor"))
        cpsat = next(line for line in panel if str(line.get_label()).startswith("cpsat"))
        assert rotor.get_markerfacecolor() == "none" and rotor.get_markersize() > cpsat.get_markersize()
        assert list(rotor.get_ydata()) == list(cpsat.get_ydata())  # the data unchanged
    assert "rotor (persistent) coincides with cpsat (phase model) at every point (3 of 3 panels)" in fig["note"]
    # the legend keeps the solver's own style
    assert "rotor (persistent)" in fig["legend"]


def test_mark_coinciding_nests_three_equal_series():
    fig, ax = plt.subplots()
    lines = [(name, ax.plot([1, 2, 3], [4, 5, 6], ms=4, lw=1)[0]) for name in ("a", "b", "c")]
    lines.append(("d", ax.plot([1, 2], [4, 7], ms=4, lw=1)[0]))
    marked = F.mark_coinciding(lines)
    plt.close(fig)
    assert marked == [("a", ["b"]), ("b", ["c"])]
    a, b, c = (line for _, line in lines[:3])
    assert a.get_markersize() > b.get_markersize() > c.get_markersize() == 4
    assert lines[3][1].get_markerfacecolor() != "none"


# ---------------------------------------------------------------------------- 5. model in the legend
def test_legend_names_the_model_from_the_rows_scope():
    def shown(sweep: str) -> dict[str, str]:
        return F.model_labels(pd.read_csv(RESULTS / sweep / f"{sweep}.csv"))

    assert shown("fig_a_chains")["rotor"] == "rotor (persistent)"
    assert shown("fig_a_chains")["cpsat (phase model)"] == "cpsat (phase model)"  # already named
    assert shown("fig_a_chains")["periodic"] == "periodic"  # a baseline: no optimality claim
    assert shown("fig_d_join")["dp"] == "dp (persistent per branch)"
    assert shown("fig_f_pipeline")["madpipe P=4"] == "madpipe P=4 (contiguous stages, 1F1B)"
    assert shown("fig_f_pipeline")["cpsat P=4"] == "cpsat P=4 (contiguous stages, 1F1B)"
    assert shown("fig_f_pipeline")["balance-time P=8"] == "balance-time P=8"  # never optimal


# ---------------------------------------------------------------------------- 6. paper figure legends
def test_paper_offload_legend_is_one_figure_legend_outside_the_panels(tmp_path, monkeypatch):
    from memsched.experiments import paper_figures as P

    figs = []
    save = P.save_figure

    def record(fig, out_dir, stem):  # noqa: ANN001, ANN202
        fig.canvas.draw()
        figs.append((fig, [ax.get_legend() for ax in fig.axes], list(fig.legends),
                     [ax.get_window_extent() for ax in fig.axes if ax.axison]))
        return save(fig, out_dir, stem)

    monkeypatch.setattr(P, "save_figure", record)
    rows = pd.read_csv(RESULTS / "fig_paper_offload" / "fig_paper_offload.csv")
    P.draw(rows, {}, tmp_path, stem="paper_offload")
    ((fig, panel_legends, legends, boxes),) = figs
    assert panel_legends == [None] * len(panel_legends) and len(legends) == 1
    box = legends[0].get_window_extent()
    assert not any(box.overlaps(b) for b in boxes)


# ---------------------------------------------------------------------------- 7. notes, --only
def test_not_applicable_note_is_cut_at_a_word(fig_a):
    (line,) = [line for line in fig_a["note"].splitlines() if line.startswith("not applicable here")]
    assert line.endswith(" use...)"), line  # not "...; use --solv)"
    assert F.clip_text("--solver: Revolve needs a homogeneous chain", 20) == "--solver: Revolve..."
    assert F.clip_text("short", 20) == "short"
    assert len(F.clip_text("x" * 50, 20)) <= 20


def test_only_an_id_twice_draws_it_once(tmp_path):
    _copy(tmp_path / "r", "fig_b_solve_time")
    written, _ = F.make_figures(tmp_path / "r", tmp_path / "out", ["b", "b"])
    assert len(written) == len(set(written)) == 2
