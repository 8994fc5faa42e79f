"""bench_papers_graphs resumed from its partial file prints the whole table (the kept cells' rows and feasibility
lines as they printed when they ran) and names that file as the source of the kept cells; it printed only the
runs it made and said they came from --out."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import interrupted_then_resumed
from memsched.solvers.graph import generate


def _argv(tmp_path: Path, out: Path, *solvers: str) -> list[str]:
    """The arguments of a bench_papers_graphs run writing `out`: a stand-in for Moccasin's RL100 (12 nodes) in a
    folder under `tmp_path`, at 90% and 80%, with `solvers`: two cells of len(solvers) runs each."""
    folder = tmp_path / "graphs"
    folder.mkdir()
    generate.random_layered(12, 2).save(folder / "random_layered_n100_stand-in.json")
    return ["--graphs", str(folder), "--instances", "RL100", "--fractions", "0.9", "0.8", "--time-limit", "1",
            "--solvers", *solvers, "--out", str(out)]


def test_a_resumed_run_prints_the_kept_cells_and_names_the_partial_file(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import bench_papers_graphs as bench

    out = tmp_path / "pg.csv"
    argv = _argv(tmp_path, out, "checkpoint-all", "greedy")
    # two cells of two runs each, stopped in the third run: the first cell is kept
    first, second, kept = interrupted_then_resumed(bench.main, argv, out, monkeypatch, capsys, bench, "solve", 3)
    assert len(kept) == 2
    header, *cell = first
    assert header.split()[:4] == ["instance", "n", "M", "solver"] and len(cell) == 3  # two runs, the cell's line
    assert second[:4] == first  # the resumed run prints the kept cell as it printed, then the rest
    assert len([line for line in second if line.startswith("RL100")]) == 2 * 3  # two cells: two runs and a line each
    assert second[4].split()[:4] == ["RL100", "12", "80%", "checkpoint-all"]


def test_the_resume_note_names_the_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import call_main, interrupt_at
    from memsched.experiments import bench_papers_graphs as bench

    out = tmp_path / "pg.csv"
    argv = _argv(tmp_path, out, "checkpoint-all")
    with monkeypatch.context() as patch:
        patch.setattr(bench, "solve", interrupt_at(2, bench.solve))
        code, _, err = call_main(bench.main, argv, capsys)
    assert code == 130, err
    code, _, err = call_main(bench.main, argv, capsys)
    assert code == 0, err
    note = next(line for line in err.splitlines() if line.startswith("resumed:"))
    assert note.startswith("resumed: 1 of 2 cells complete in ") and note.endswith("pg.partial.csv, 1 runs to do"), note
