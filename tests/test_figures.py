"""Figures render headless from small results tables; absent results are skipped with a note."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import EXAMPLES, sweep_toml
from memsched.experiments.figures import FIGURES, load_results, make_figures, render
from memsched.experiments.sweep import run_sweep, write_table

CHAINS = sweep_toml("chain_solvers", budgets=["60%", "80%", "100%"], defaults={"slots": 50, "time_limit": 5},
                    instances=[{"file": EXAMPLES / "random10.json"}, {"generate": "chain", "L": 5}],
                    solvers=["rotor", "periodic", "sqrt", "recompute-all"])


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder with the main job's sweep, sweep (a) and (b) from small grids, and
    a fabricated executed sweep (g)."""
    root = tmp_path_factory.mktemp("results")
    cfg = root / "chain_solvers.toml"
    cfg.write_text(CHAINS)
    run_sweep(cfg, output=root / "chain_solvers", workers=1, progress=False)
    a = pd.read_csv(root / "chain_solvers" / "chain_solvers.csv")
    for name in ("fig_a_chains", "fig_b_solve_time"):  # the same rows under the sweep names of (a), (b)
        write_table(a.assign(sweep=name, key=a["key"] + name).to_dict("records"), root / name, name)
    rows = a[a["status"].isin(["optimal", "feasible"])].copy()
    rows["sweep"] = "fig_g_measured"
    rows["key"] = rows["key"] + "g"
    rows["measured_peak"] = rows["peak_memory"] * 1.02
    rows["measured_time_ms"] = rows["objective"] * 1.1
    rows["grad_check"] = True
    rows["device"] = "cpu"
    write_table(rows.to_dict("records"), root / "fig_g_measured", "fig_g_measured")
    return root


def test_load_results_reads_every_sweep_table(results):
    rows = load_results(results)
    assert set(rows["sweep"]) == {"chain_solvers", "fig_a_chains", "fig_b_solve_time", "fig_g_measured"}
    assert rows["key"].is_unique


@pytest.mark.parametrize("fid", ["main", "a", "b", "g"])
def test_figure_renders_png_and_pdf(results, tmp_path, fid):
    paths, note = render(fid, load_results(results), tmp_path)
    assert note is None
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"]
    for p in paths:
        assert p.stat().st_size > 1000
    assert paths[0].read_bytes()[:4] in (b"\x89PNG", b"%PDF")


def test_absent_results_are_skipped_with_a_note(results, tmp_path):
    written, notes = make_figures(results, tmp_path)
    drawn = {p.stem for p in written}
    assert {FIGURES[f].stem for f in ("main", "a", "b", "g")} <= drawn
    for fid in ("c", "d", "e", "f"):
        assert any(n.startswith(f"figure {fid}: skipped") for n in notes), notes
    assert all("\n" not in n for n in notes)


def test_figures_command(results, tmp_path, cli):
    r = cli("figures", "--results", results, "--out", tmp_path / "figs", "--only", "b", "f")
    assert r.code == 0, r.err
    assert "figure f: skipped" in r.out and "wrote" in r.out
    assert (tmp_path / "figs" / "fig_b_solve_time.png").exists()
    r = cli("figures", "--results", tmp_path / "absent")
    assert r.code == 2 and "--results" in r.err
    r = cli("figures", "--results", results, "--only", "z")
    assert r.code == 2 and "unknown figure" in r.err


def test_empty_results_folder(tmp_path):
    written, notes = make_figures(tmp_path, tmp_path / "out")
    assert written == [] and len(notes) == len(FIGURES)


def test_a_damaged_table_is_named_not_a_pandas_error(results, tmp_path, cli):
    """A table with text in a number column (hand-edited, or damaged) failed inside a figure with
    "TypeError: dtype 'str' does not support operation 'median'" (exit 3); now exit 2 naming the
    file, the column and the row."""
    table = pd.read_csv(results / "chain_solvers" / "chain_solvers.csv")
    table["objective"] = table["objective"].astype(object)
    table.loc[3, "objective"] = "abc"
    (tmp_path / "chain_solvers").mkdir()
    table.to_csv(tmp_path / "chain_solvers" / "chain_solvers.csv", index=False)
    r = cli("figures", "--results", tmp_path, "--out", tmp_path / "figs", "--only", "main")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "chain_solvers.csv" in r.err and "objective" in r.err and "row 5" in r.err
