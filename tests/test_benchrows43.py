"""Fix 43: vs_torch_duel's Ctrl-C while its modules (torch) are imported is one line and exit 130, as for main_job
and paper_figures (its top imported torch: a traceback); bench_chain_exact and bench_graph print the rows a resumed
run takes from ``<out>.partial.csv`` too, so the printed table of a resumed run is whole (they printed only the
rows run anew)."""

from __future__ import annotations

import importlib.abc
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import (
    InterruptingImport,
    call_main,
    interrupted_then_resumed,
    nonblank_lines,
    sigint_as_in_a_terminal,
)


def _bench_csv(tmp_path: Path) -> Path:
    """A bench_vs_torch CSV with no rows (a header alone): vs_torch_duel gets as far as importing torch."""
    path = tmp_path / "vs.csv"
    path.write_text("model,size,tool,setting,peak_bytes\n")
    return path


# ------------------------------------------------------------------ 1. vs_torch_duel: Ctrl-C while importing
def test_vs_torch_duel_imports_no_torch_at_its_top() -> None:
    """``python -m`` runs the module's top before `main` can handle a Ctrl-C: it imports neither torch nor the
    other modules `main` needs (torch alone took about a second, when a Ctrl-C was a traceback)."""
    code = ("import sys\nimport memsched.experiments.vs_torch_duel\n"
            "print(sorted(m for m in ('torch', 'numpy', 'matplotlib', 'csv', 'argparse') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_a_real_sigint_while_torch_is_imported_is_one_line_and_130(tmp_path: Path) -> None:
    """As in a terminal (SIGINT at its default), a Ctrl-C that comes while torch is imported (a stand-in torch
    sends it) is one line and exit 130, nothing written: no traceback (the module imported torch at its top)."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)\n")
    out = tmp_path / "duels.csv"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))}
    argv = ["--csv", str(_bench_csv(tmp_path)), "--out", str(out)]
    proc = subprocess.run([sys.executable, "-m", "memsched.experiments.vs_torch_duel", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env, preexec_fn=sigint_as_in_a_terminal,
                          check=False)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr[-2000:]
    lines = nonblank_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("vs_torch_duel: interrupted"), proc.stderr
    assert not out.exists() and not out.with_suffix(".png").exists()


@pytest.mark.parametrize("blocked", ["memsched.experiments.benchtable", "memsched.experiments.script_args"])
def test_ctrl_c_while_main_imports_is_one_line_and_130(blocked: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """In-process: a Ctrl-C during an import inside `main` (the interrupt helper's module, the argument parser's)
    is one line, exit 130."""
    module = importlib.import_module("memsched.experiments.vs_torch_duel")
    monkeypatch.delitem(sys.modules, blocked, raising=False)
    monkeypatch.setattr(sys, "meta_path", [InterruptingImport(blocked), *sys.meta_path])
    code, out, err = call_main(module.main, ["--csv", str(_bench_csv(tmp_path)), "--out", str(tmp_path / "d.csv")],
                               capsys)
    assert code == 130, err
    lines = nonblank_lines(err)
    assert len(lines) == 1 and lines[0].startswith("vs_torch_duel: interrupted"), err
    assert out == "" and not (tmp_path / "d.csv").exists()


# ------------------------------------------------------------------ 2. resumed rows are printed
def test_bench_chain_exact_prints_the_resumed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Three cells (one chain, one budget, three solvers), the run stopped in the third: the resumed run prints
    the two finished cells' lines as the first run did, then the third's (every row of its table, in order)."""
    from memsched.experiments import bench_chain_exact

    out = tmp_path / "exact.csv"
    argv = ["--lengths", "3", "--fractions", "0.5", "--solvers", "cpsat", "milp:cp-sat", "milp", "--slots", "20",
            "--time-limit", "10", "--out", str(out)]
    first, second, kept = interrupted_then_resumed(
        bench_chain_exact.main, argv, out, monkeypatch, capsys, bench_chain_exact, "solve",
        lambda *a, **k: a[2] == "milp" and k.get("backend") is None)
    assert len(kept) == 2
    header = 2  # the column names and a rule
    assert len(first) == header + 2 and len(second) == header + 3, (first, second)
    assert second[:header + 2] == first  # the resumed rows, printed as when they ran, in order
    assert [line.split()[2] for line in second[header:]] == ["cpsat", "milp:cp-sat", "milp"]


def _fake_graph_solve(problem: str, g: Any, name: str, budget: int, **options: Any) -> Any:
    """A graph solver's result without solving (the printed table is under test, not the solvers)."""
    return SimpleNamespace(objective=g.total_cpu() * 1.25, gap=None if name == "greedy" else 0.01, status="feasible",
                           lower_bound=None, peak_memory=budget, scope="global")


def test_bench_graph_prints_the_resumed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Six cells (the quick linear graph at three budgets, two solvers), the run stopped in the fourth: the resumed
    run prints the three finished cells' lines as the first run did, then the other three."""
    from memsched.experiments import bench_graph

    monkeypatch.setattr(bench_graph.registry, "solve", _fake_graph_solve)
    monkeypatch.setattr(bench_graph, "lp_bound", lambda *a, **k: None)
    out = tmp_path / "graph.csv"
    argv = ["--quick", "--graphs", "linear", "--solvers", "greedy,checkpoint-all", "--out", str(out)]
    first, second, kept = interrupted_then_resumed(bench_graph.main, argv, out, monkeypatch, capsys,
                                                   bench_graph.registry, "solve", 4)
    assert len(kept) == 3
    assert len(first) == 1 + 3 and len(second) == 1 + 6 + 1, (first, second)  # header, rows; "wrote ..."
    assert second[:4] == first
    assert [(line.split()[1], line.split()[2]) for line in second[1:7]] == [
        (pct, s) for pct in ("90", "80", "70") for s in ("greedy", "checkpoint-all")]


def test_bench_graph_backends_prints_the_resumed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``--backends``: the run stopped in its third cell; the resumed run prints the two finished cells' lines as
    the first run did, then every other cell's."""
    from memsched.experiments import bench_graph
    from memsched.solvers.graph import milp
    from memsched.solvers.graph.linmodel import BACKENDS

    def fake(g: Any, budget: int, **options: Any) -> Any:
        return SimpleNamespace(status="optimal", objective=float(budget) / 7, lower_bound=None, solve_time_s=0.25)

    monkeypatch.setattr(milp, "solve_checkmate", fake)
    out = tmp_path / "backends.csv"
    argv = ["--backends", "--out", str(out)]
    first, second, kept = interrupted_then_resumed(bench_graph.main, argv, out, monkeypatch, capsys, milp,
                                                   "solve_checkmate", 3)
    assert len(kept) == 2
    cells = 5 * len(BACKENDS)
    assert len(first) == 1 + 2 and len(second) == 1 + cells + 1, (first, second)  # header, rows; "wrote ..."
    assert second[:3] == first
