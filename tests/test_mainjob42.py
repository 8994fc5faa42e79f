"""The main job and the paper figures as commands (fix 42): a Ctrl-C while their modules are imported is one line
and exit 130 (no traceback); main_job names --output in a bad-folder error and writes summary.csv atomically;
paper_figures refuses a sweep table that lacks cells of its grid and finds the table the sweep wrote under another
--output (``<output>/<name>.csv``); the vs_torch figures are written atomically."""

from __future__ import annotations

import importlib.abc
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, InterruptingImport, nonblank_lines, sigint_as_in_a_terminal, sweep_toml

SCRIPTS = ("main_job", "paper_figures")
CHAINS = ROOT / "results" / "fig_paper_chains" / "fig_paper_chains.csv"
#: two quick cells: a sweep the main job runs in a second
QUICK = sweep_toml("q", budgets=["80%"], defaults={"slots": 100}, instances=[{"example": "tiny"}],
                   solvers=["store-all", "rotor"])


# ------------------------------------------------------------------ 1. Ctrl-C while the modules are imported
def test_the_scripts_import_no_heavy_module_before_main() -> None:
    """``python -m memsched.experiments.NAME`` runs the module's top before `main` can handle a Ctrl-C: it
    imports no pandas, matplotlib, numpy nor the sweep (about a second, when a Ctrl-C was a traceback)."""
    code = ("import sys\nimport memsched.experiments.main_job, memsched.experiments.paper_figures\n"
            "print(sorted(m for m in ('pandas', 'matplotlib', 'numpy', 'memsched.experiments.sweep', "
            "'memsched.experiments.figures') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("name", SCRIPTS)
def test_ctrl_c_while_importing_is_one_line_and_130(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C during an import inside `main` (here: its argument parser's module) is one line, exit 130."""
    module = importlib.import_module(f"memsched.experiments.{name}")
    blocked = "memsched.experiments.script_args"
    monkeypatch.delitem(sys.modules, blocked, raising=False)
    monkeypatch.setattr(sys, "meta_path", [InterruptingImport(blocked), *sys.meta_path])
    argv = (["--config", str(tmp_path / "none.toml"), "--output", str(tmp_path / "out")] if name == "main_job"
            else ["--results", str(tmp_path / "none"), "--out", str(tmp_path / "figs")])
    try:
        code = module.main(argv)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped: a traceback")
    err = capsys.readouterr().err
    assert code == 130, err
    assert nonblank_lines(err) == [f"{name}: interrupted"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_real_sigint_while_pandas_is_imported_is_one_line(name: str, tmp_path: Path) -> None:
    """As in a terminal (SIGINT at its default), a Ctrl-C that comes while pandas is imported (a stand-in
    pandas sends it) is one line and exit 130: no traceback (both scripts imported pandas at their top)."""
    fake = tmp_path / "fake" / "pandas"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)\n")
    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    args = (["--config", str(cfg), "--output", str(tmp_path / "out"), "--workers", "1"] if name == "main_job"
            else ["--results", str(ROOT / "results" / "fig_paper_chains"), "--out", str(tmp_path / "figs")])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", f"memsched.experiments.{name}", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env, preexec_fn=sigint_as_in_a_terminal,
                          check=False)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr[-2000:]
    lines = nonblank_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"{name}: interrupted"), proc.stderr
    assert not (tmp_path / "figs").exists()


# ------------------------------------------------------------------ 2. main_job: --output, summary.csv
@pytest.mark.parametrize("where", ["under a file", "empty"])
def test_main_job_bad_output_is_one_line_naming_it(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--output under a file was a traceback (then a line naming "output"); an empty one ran the job in the
    current folder. Both: one line naming --output, exit 2, before any run."""
    from memsched.experiments import main_job

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    (tmp_path / "afile").write_text("keep")
    output = str(tmp_path / "afile" / "x") if where == "under a file" else ""
    code = main_job.main(["--config", str(cfg), "--output", output, "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = nonblank_lines(err)
    assert len(lines) == 1 and lines[0].startswith("main_job: error: ") and "--output: " in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "q.toml"]  # nothing ran, nothing written


def test_main_job_writes_summary_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A summary.csv whose write fails half-way (a full disk) leaves the old one, not half a table; the job
    says so in one line (exit 2)."""
    import pandas as pd
    from memsched.experiments import main_job

    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.csv").write_text("old summary\n")
    real = pd.DataFrame.to_csv

    def torn(self: pd.DataFrame, path: Any = None, *args: Any, **kwargs: Any) -> Any:
        if path is not None and "summary" in Path(path).name:
            Path(path).write_text("instance,L,budget %,sto")
            raise OSError(28, "No space left on device")
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", torn)
    try:
        code = main_job.main(["--config", str(cfg), "--output", str(out), "--workers", "1"])
    except OSError:
        code = None
    err = capsys.readouterr().err
    assert (out / "summary.csv").read_text() == "old summary\n"
    assert code == 2, err
    assert "summary.csv" in nonblank_lines(err)[-1] and "No space left" in nonblank_lines(err)[-1], err
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------------ 3. paper_figures: a partial table, its name
def test_paper_figures_refuses_a_sweep_that_did_not_cover_its_grid(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The first 19 of the 328 rows of fig_paper_chains (a stopped sweep) were drawn as if complete (exit 0)."""
    from memsched.experiments import paper_figures

    results = tmp_path / "fig_paper_chains"
    results.mkdir()
    lines = CHAINS.read_text().splitlines(keepends=True)
    (results / CHAINS.name).write_text("".join(lines[:20]))
    code = paper_figures.main(["--results", str(results), "--out", str(tmp_path / "figs")])
    err = capsys.readouterr().err
    assert code == 2, err
    one = nonblank_lines(err)
    assert len(one) == 1 and str(results / CHAINS.name) in one[0], err
    assert f"19 of {len(lines) - 1} cells" in one[0] and f"{len(lines) - 20} never ran" in one[0], err
    assert not (tmp_path / "figs").exists()


def test_paper_figures_reads_the_table_of_a_sweep_written_under_another_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``memsched sweep fig_paper_chains --output X`` writes X/fig_paper_chains.csv (and .jsonl): --results X
    reads it (it looked for X/X.csv and said the sweep writes <output>/<output>.csv)."""
    from memsched.experiments import paper_figures
    from memsched.experiments.sweep.store import journal_path, table_path

    results = tmp_path / "mine"
    results.mkdir()
    shutil.copy(CHAINS, table_path(results, "fig_paper_chains"))
    journal_path(results, "fig_paper_chains").write_text("")
    (results / "notes.csv").write_text("a,b\n1,2\n")  # a table of no sweep (no journal beside it)
    out = tmp_path / "figs"
    code = paper_figures.main(["--results", str(results), "--out", str(out), "--stem", "s"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (out / "s.png").is_file() and (out / "s.pdf").is_file()


def test_paper_figures_without_a_table_says_what_the_sweep_writes(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import paper_figures

    (tmp_path / "empty").mkdir()
    code = paper_figures.main(["--results", str(tmp_path / "empty"), "--out", str(tmp_path / "figs")])
    err = capsys.readouterr().err
    assert code == 2 and len(nonblank_lines(err)) == 1, err
    assert "<output>/<name>.csv" in err and "<output>/<output>.csv" not in err


def test_paper_figures_refuses_a_folder_of_several_sweeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import paper_figures

    results = tmp_path / "two"
    results.mkdir()
    for name in ("a", "b"):
        shutil.copy(CHAINS, results / f"{name}.csv")
        (results / f"{name}.jsonl").write_text("")
    code = paper_figures.main(["--results", str(results), "--out", str(tmp_path / "figs")])
    err = capsys.readouterr().err
    assert code == 2 and len(nonblank_lines(err)) == 1, err
    assert "--results" in err and "a.csv, b.csv" in err


# ------------------------------------------------------------------ 4. the vs_torch figures, atomically
def _torn_savefig(monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib's savefig writes part of its file, then fails (a full disk, a Ctrl-C)."""
    from matplotlib.figure import Figure

    def torn(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(fname, (str, Path)):
            Path(fname).write_bytes(b"\x89PNG torn")
        else:
            fname.write(b"\x89PNG torn")
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", torn)


def test_vs_torch_report_figure_keeps_the_old_png_when_stopped(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from memsched.experiments.vs_torch_report import figure, read_rows

    rows = read_rows(ROOT / "results" / "bench_vs_torch.csv")
    path = tmp_path / "bench_vs_torch.png"
    path.write_bytes(b"old figure")
    _torn_savefig(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        figure(rows, path)
    assert path.read_bytes() == b"old figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_vs_torch_report_figure_writes_a_png(tmp_path: Path) -> None:
    from memsched.experiments.vs_torch_report import figure, read_rows

    path = tmp_path / "bench_vs_torch.png"
    path.write_bytes(b"old figure")
    figure(read_rows(ROOT / "results" / "bench_vs_torch.csv"), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_vs_torch_duel_figure_keeps_the_old_png_when_stopped(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from memsched.experiments.vs_torch_duel import duel_figure
    from memsched.experiments.vs_torch_report import read_rows

    path = tmp_path / "bench_vs_torch_duels.png"
    path.write_bytes(b"old figure")
    _torn_savefig(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        duel_figure(read_rows(ROOT / "results" / "bench_vs_torch_duels.csv"), path)
    assert path.read_bytes() == b"old figure"
