"""A folder or table name too long for the file system (ENAMETOOLONG) is one line naming the path and
exit 2 in every figure command, as `memsched plot -o` and `memsched sweep --output` give it."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

LONG = "x" * 300


def test_figures_out_too_long_is_one_line(tmp_path: Path) -> None:
    res = run_cli("figures", "--results", "results", "--out", str(tmp_path / LONG), "--only", "a")
    assert res.code == 2
    assert "--out: not a usable folder: File name too long" in res.err and "Traceback" not in res.err


def test_paper_figures_results_too_long_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import paper_figures

    code = paper_figures.main(["--results", str(tmp_path / LONG), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "File name too long" in err


def test_max_batch_figure_results_too_long_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import max_batch_figure

    code = max_batch_figure.main(["--results", str(tmp_path / LONG), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "--results: not a usable folder: File name too long" in err
