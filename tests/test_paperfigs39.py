"""Fixes from hunt 39 (paper figures): every solver of a paper figure has its own colour and marker (two
pipeline solvers without a style of their own were both grey dots); legends name the model of the offload
and DAG / interleaving pipeline solvers, and a label with a parenthetical gets it inside ("rotor (no
transfer; persistent)"); an empty text cell, rows of several problems, a table without ``problem`` and a
pipeline label without ``P=<n>`` are one-line errors (exit 2); a --stem too long, an empty --out and
``--results .`` are handled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from memsched.experiments import paper_figures as P  # noqa: E402
from memsched.experiments.figures import style as solver_style  # noqa: E402
from memsched.experiments.plotting.labels import model_labels  # noqa: E402

import memsched  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
TINY = ROOT / "solvers" / "data" / "examples" / "tiny.json"


def _table(sweep: str) -> pd.DataFrame:
    return pd.read_csv(RESULTS / sweep / f"{sweep}.csv")


def _write(tmp: Path, sweep: str, rows: pd.DataFrame) -> Path:
    """`rows` as the sweep table of the output folder ``tmp/<sweep>``; returns the folder."""
    folder = tmp / sweep
    folder.mkdir(parents=True, exist_ok=True)
    rows.to_csv(folder / f"{sweep}.csv", index=False)
    return folder


def _drawn(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each figure `paper_figures` would save: its legend's (colour, marker) by text (a line drawn under another
    is paler in its panel, the legend keeps its style), the markers of its lines by text, and its legend."""
    seen: list[dict[str, Any]] = []

    def record(fig: Any, out_dir: Path, stem: str) -> list[Path]:
        (legend,) = fig.legends
        markers: dict[str, set[str]] = {}
        for ax in fig.axes:
            for line in ax.get_lines():
                if not str(line.get_label()).startswith("_"):
                    markers.setdefault(str(line.get_label()), set()).add(line.get_marker())
        seen.append({"styles": {t.get_text(): (to_hex(h.get_color()), h.get_marker())
                                for h, t in zip(legend.legend_handles, legend.get_texts())},
                     "markers": markers, "legend": [t.get_text() for t in legend.get_texts()]})
        plt.close(fig)
        return []

    monkeypatch.setattr(P, "save_figure", record)
    return seen


def _main(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str]:
    code = P.main([str(a) for a in argv])
    return code, capsys.readouterr().err.strip()


# ---------------------------------------------------------------------------- 1. one style per solver
def test_pipeline_solvers_without_a_style_of_their_own_are_told_apart(tmp_path, monkeypatch):
    rows = _table("fig_paper_pipeline")
    for col in ("solver_label", "solver"):
        rows[col] = (rows[col].str.replace("interleave-v", "interleave", regex=False)
                     .str.replace("balance-time", "dag-pipedream", regex=False))
    seen = _drawn(monkeypatch)
    P.draw_pipeline(rows, {}, tmp_path)
    (fig,) = seen
    styles = fig["styles"]
    assert all(len(m) == 1 for m in fig["markers"].values()), fig["markers"]  # one marker in every panel
    pairs = list(styles.values())
    assert len(styles) == 5 and len(set(pairs)) == 5, styles
    assert ("#808080", ".") not in pairs  # no grey dots


def test_chain_figure_solvers_sharing_a_style_are_told_apart(tmp_path, monkeypatch):
    assert solver_style("milp") == solver_style("checkmate")  # the same pair in `STYLE`
    rows = pd.DataFrame([{"instance": "a", "solver_label": s, "solver": s, "status": "optimal", "budget": b,
                          "overhead": o, "reference_peak": 3e9}
                         for s, o in (("milp", 0.1), ("checkmate", 0.2), ("s1", 0.3), ("s2", 0.4))
                         for b in (1e9, 2e9)])
    seen = _drawn(monkeypatch)
    P.draw(rows, {}, tmp_path)
    pairs = list(seen[0]["styles"].values())
    assert len(pairs) == 4 and len(set(pairs)) == 4, seen[0]["styles"]
    assert pairs[0] == (to_hex(solver_style("milp")["color"]), solver_style("milp")["marker"])  # first keeps it
    assert P.distinct_styles([("a", None), ("b", None)]) == P.distinct_styles([("a", None), ("b", None)])


@pytest.mark.parametrize("sweep", ["fig_paper_chains", "fig_paper_graphs", "fig_paper_offload",
                                   "fig_paper_pipeline"])
def test_the_committed_paper_figures_keep_their_styles(tmp_path, monkeypatch, sweep):
    rows = _table(sweep)
    seen = _drawn(monkeypatch)
    (P.draw_pipeline if P.is_pipeline(rows) else P.draw)(rows, {}, tmp_path)
    drawn = seen[0]["styles"]
    if P.is_pipeline(rows):
        want = {name: (to_hex(c), m) for name, (c, m) in P.PIPELINE_STYLE.items()}
        assert {text.split(" (")[0]: pair for text, pair in drawn.items()} == \
            {name: want[name] for name in rows["solver"].unique()}
    else:
        shown = model_labels(rows)
        found = rows[rows["status"].isin(["optimal", "feasible"])]  # revolve: none, not drawn
        want = {shown[label]: solver_style(label, name) for label, name in zip(found["solver_label"], found["solver"])}
        assert drawn == {text: (to_hex(kw["color"]), kw["marker"]) for text, kw in want.items()}


# ---------------------------------------------------------------------------- 2. the model in the legend
@pytest.mark.parametrize(("problem", "solver", "model"), [
    ("offload", "remat-only", "persistent"),
    ("offload", "cpsat", "store-all order"),
    ("offload", "offload-exact", "phase model, whole-piece transfers"),
    ("offload", "exact-combined", "phase model, one Off/Pre per idle gap"),
    ("pipeline", "dag", "DAG partitions"),
    ("pipeline", "dag-cpsat", "DAG partitions"),
    ("pipeline", "interleave-dp", "interleaved contiguous stages"),
    ("pipeline", "interleave-cpsat", "interleaved contiguous stages"),
])
def test_the_solvers_scope_names_its_model_in_the_legend(problem, solver, model):
    if problem == "offload":
        result = memsched.solve(memsched.load(TINY, bandwidth="12GB/s"), "100%", solver, time_limit=20)
    else:
        result = memsched.solve(memsched.load(TINY, problem="pipeline"), "100%", solver, devices=2, time_limit=20)
    assert result.status == "optimal", result.scope
    rows = pd.DataFrame([{"problem": problem, "solver": solver, "status": "optimal", "scope": result.scope}])
    assert model_labels(rows) == {solver: f"{solver} ({model})"}
    labelled = rows.assign(solver_label=f"{solver} P=2")
    assert model_labels(labelled) == {f"{solver} P=2": f"{solver} P=2 ({model})"}


def test_a_label_with_a_parenthetical_gets_the_model_inside_it():
    def text(label: str, scope: str) -> str:
        return model_labels(pd.DataFrame([{"solver_label": label, "status": "optimal", "scope": scope}]))[label]

    rotor = "checkpointing only (rotor: persistent schedules, 200-slot discretisation)"
    assert text("rotor (no transfer)", rotor) == "rotor (no transfer; persistent)"
    assert text("remat-only (rotor: persistent)", rotor) == "remat-only (rotor: persistent)"  # named already
    assert text("cpsat (phase model)", "phase model (forward phase), exact sizes") == "cpsat (phase model)"
    assert text("offload-only (store-all order)", "offload-only (store-all order): no recomputation") == \
        "offload-only (store-all order)"
    pofo = "persistent schedules with offloaded checkpoints (prefetch not overlapped), exact sizes"
    assert text("pofo", pofo) == "pofo (persistent, offloaded checkpoints)"  # the longest start: not rotor's
    assert text("x (a) y", "persistent schedules") == "x (a) y (persistent)"


def test_the_paper_offload_legend_names_rotors_model(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    P.draw(_table("fig_paper_offload"), {}, tmp_path)
    assert "rotor (no transfer; persistent)" in seen[0]["legend"]


# ---------------------------------------------------------------------------- 3. the table's checks
def test_an_empty_instance_cell_is_a_named_error(tmp_path, capsys, monkeypatch):
    rows = _table("fig_paper_chains")
    rows.loc[5, "instance"] = None
    seen = _drawn(monkeypatch)
    code, err = _main(capsys, "--results", _write(tmp_path, "fig_paper_chains", rows), "--out", tmp_path / "o")
    assert code == 2 and not seen, err
    assert len(err.splitlines()) == 1 and "fig_paper_chains.csv: instance: row 7: empty" in err, err


@pytest.mark.parametrize("edit", ["one chain row", "no problem column"])
def test_a_pipeline_table_of_several_problems_or_none_is_an_error(tmp_path, capsys, monkeypatch, edit):
    rows = _table("fig_paper_pipeline")
    if edit == "one chain row":
        rows.loc[3, "problem"] = "chain"
    else:
        rows = rows.drop(columns="problem")
    seen = _drawn(monkeypatch)
    code, err = _main(capsys, "--results", _write(tmp_path, "fig_paper_pipeline", rows), "--out", tmp_path / "o")
    assert code == 2 and not seen, err
    assert len(err.splitlines()) == 1 and "fig_paper_pipeline.csv: " in err and "problem" in err, err


def test_a_pipeline_label_without_its_device_count_is_an_error(tmp_path, capsys, monkeypatch):
    rows = _table("fig_paper_pipeline")
    rows["solver_label"] = rows["solver_label"].replace("balance-time P=4", "balance-time")
    seen = _drawn(monkeypatch)
    code, err = _main(capsys, "--results", _write(tmp_path, "fig_paper_pipeline", rows), "--out", tmp_path / "o")
    assert code == 2 and not seen, err
    assert len(err.splitlines()) == 1 and "solver_label" in err and "'balance-time'" in err, err


def test_a_pipeline_label_with_more_after_its_device_count_is_drawn(tmp_path, monkeypatch):
    rows = _table("fig_paper_pipeline")
    rows["solver_label"] = rows["solver_label"].replace("balance-time P=4", "balance-time P=4 (by time)")
    seen = _drawn(monkeypatch)
    P.draw_pipeline(rows, {}, tmp_path)
    assert "balance-time (by time)" in seen[0]["legend"] and "balance-time" in seen[0]["legend"]


# ---------------------------------------------------------------------------- 4. the paths
def test_a_stem_too_long_is_one_line_exit_2(tmp_path, capsys):
    code, err = _main(capsys, "--results", RESULTS / "fig_paper_chains", "--out", tmp_path / "o", "--stem", "x" * 300)
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = _main(capsys, "--results", RESULTS / "fig_paper_chains", "--out", "")
    assert code == 2 and len(err.splitlines()) == 1 and "--out" in err, err
    assert list(tmp_path.iterdir()) == []


def test_results_dot_inside_the_sweep_folder_reads_its_table(tmp_path, capsys, monkeypatch):
    folder = _write(tmp_path, "fig_paper_chains", _table("fig_paper_chains"))
    monkeypatch.chdir(folder)
    seen = _drawn(monkeypatch)
    code, err = _main(capsys, "--results", ".", "--out", tmp_path / "o")
    assert code == 0 and len(seen) == 1, err
