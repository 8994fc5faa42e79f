"""The paper figures name each panel's cost model from the sweep rows' ``source``, a path relative
to the repository (`sweep.instances.file_source`), whatever the working directory (before: every
panel said "times: unknown" when drawn from outside the repository root)."""
from __future__ import annotations

import os
from pathlib import Path

from memsched.experiments import paper_figures
from memsched.experiments.sweep.config import ROOT


def test_a_relative_source_is_found_from_any_working_directory(tmp_path, monkeypatch):
    source = "solvers/data/examples/tiny.json"
    monkeypatch.chdir(tmp_path)
    assert not Path(source).exists()
    assert paper_figures.source_file(source) == ROOT / source


def test_a_missing_source_is_none_and_an_absolute_one_is_kept(tmp_path):
    assert paper_figures.source_file("no/such/file.json") is None
    absolute = tmp_path / "g.json"
    absolute.write_text("{}")
    assert paper_figures.source_file(str(absolute)) == absolute


def test_the_graph_figure_names_the_cost_models_outside_the_repository(tmp_path, monkeypatch, capsys):
    seen: dict[str, str] = {}

    def draw(rows, costs, out_dir, stem="x"):
        seen.update(costs)
        return []

    monkeypatch.setattr(paper_figures, "draw", draw)
    monkeypatch.setattr(paper_figures, "draw_pipeline", draw)
    monkeypatch.chdir(tmp_path)
    assert os.getcwd() != str(ROOT)
    paper_figures.main(["--results", str(ROOT / "results" / "fig_paper_graphs"), "--out", str(tmp_path / "f")])
    assert seen and all(cost.startswith("roofline:v100") for cost in seen.values()), seen
