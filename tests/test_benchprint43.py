"""Fix 43 (benchprint): a resumed bench prints the rows it takes from ``<out>.partial.csv`` (`benchtable.resumable`'s
``line``), so its printed table is whole (bench_pipeline_interleave, bench_profile, bench_offload_exact printed only
the rows run anew); bench_executor, bench_executor_overhead and bench_vs_torch import torch only once their
arguments are checked, inside `interrupts.script_main` (vs_torch_compile, which bench_vs_torch imports, only inside
its functions): a Ctrl-C while torch is imported is one line and exit 130, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import interrupted_then_resumed, nonblank_lines, sigint_as_in_a_terminal


# ------------------------------------------------------------------ 1. the resumed rows are printed
def test_bench_pipeline_interleave_prints_the_resumed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """32 runs (2 profiles x 2 device counts x 2 memories x 4 solvers; stand-in solves), stopped in the fifth: the
    resumed run prints the four finished runs' lines as the first run did, then the other 28."""
    from memsched.experiments import bench_pipeline_interleave as bench

    def solve(problem: str, inst: Any, solver: str, memory: int, **options: Any) -> Any:
        return SimpleNamespace(status="feasible", objective=float(len(solver)), peak_memory=memory, schedule=None,
                               scope="stand-in")

    monkeypatch.setattr(bench.registry, "solve", solve)
    out = tmp_path / "interleave.csv"
    first, second, kept = interrupted_then_resumed(bench.main, ["--out", str(out)], out, monkeypatch, capsys,
                                                   bench.registry, "solve", 5)
    assert len(kept) == 4 and len(first) == 4, first
    assert len(second) == 32 + 1, second  # every run's line, then "wrote ..."
    assert second[:4] == first  # the resumed rows, printed as when they ran, in order
    solvers = [s for s, _ in bench.SOLVERS]
    assert [line.split()[4] for line in second[:32]] == solvers * 8


def test_bench_profile_prints_the_resumed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Every case (stand-in profiles), stopped in the fourth: the resumed run prints the header, the three finished
    cases' lines as the first run did, then the others'."""
    from memsched.experiments import bench_profile as bench

    def run_case(kind: str, model: str, sizes: dict[str, Any], cost: str) -> dict[str, Any]:
        return {"seconds": 1.25, "cpu": 1.5, "rss": 100.0, "n": len(model), "peak": 3 * 2**30}

    monkeypatch.setattr(bench, "run_case", run_case)
    out = tmp_path / "profile.csv"
    first, second, kept = interrupted_then_resumed(bench.main, ["--out", str(out)], out, monkeypatch, capsys, bench,
                                                   "run_case", 4)
    cases = len(bench.CASES)
    assert len(kept) == 3 and len(first) == 1 + 3, first  # the header, the finished cases
    assert len(second) == 1 + cases + 1, second  # the header, every case, "wrote ..."
    assert second[:4] == first
    assert [line.split()[1] for line in second[1:1 + cases]] == [c[1] for c in bench.CASES]


def test_bench_offload_exact_prints_the_resumed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """One chain and seed over the grid of link speeds and fractions (stand-in runs), stopped in the third: the
    resumed run prints the two finished runs' lines as the first run did, then the others'."""
    from memsched.experiments import bench_offload_exact as bench

    def run_one(L: int, seed: int, per_byte: float, fraction: float, *rest: Any) -> dict[str, Any]:
        return {"L": L, "seed": seed, "ms_per_byte": per_byte, "fraction": fraction, "status": "optimal",
                "makespan": 10.0 + fraction, "pofo": 10.5 + fraction, "time_s": 0.5, "sizes": "1,2"}

    monkeypatch.setattr(bench, "run_one", run_one)
    out = tmp_path / "offload_exact.csv"
    argv = ["--lengths", "4", "--seeds", "1", "--out", str(out)]
    first, second, kept = interrupted_then_resumed(bench.main, argv, out, monkeypatch, capsys, bench, "run_one", 3)
    cells = len(bench.PER_BYTE_MS) * len(bench.FRACTIONS)
    assert len(kept) == 2 and len(first) == 2, first
    assert len(second) == cells + 2, second  # every run's line, the summary, "wrote ..."
    assert second[:2] == first
    assert len({line for line in second[:cells]}) == cells  # each run once


def test_a_kept_cell_prints_its_rows_through_the_line_function(tmp_path: Path) -> None:
    """`benchtable.Resumable`: with ``line``, `kept` prints each row it takes from the partial file (read back as
    written), without it nothing; a cell not kept prints nothing."""
    import contextlib
    import io

    from memsched.experiments.benchtable import Resumable

    out = tmp_path / "t.csv"
    earlier = Resumable(out, ["a", "b"], {"s": 1}, ["a"])
    earlier.add({"a": 1, "b": 0.5}, {"a": 1, "b": ""})
    earlier.keep()
    for line, printed in ((None, ""), (lambda row: f"{row['a']}|{row['b']!r}", "1|0.5\n1|''\n")):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            table = Resumable(out, ["a", "b"], {"s": 1}, ["a"], line=line)
            assert table.kept(2) is None
            assert table.kept(1) == [{"a": 1, "b": 0.5}, {"a": 1, "b": ""}]
        assert buf.getvalue() == printed


# ------------------------------------------------------------------ 2. Ctrl-C while torch is imported
SCRIPTS = {
    "bench_executor": ["--size", "tiny", "--problems", "chain", "--repeats", "1", "--time-repeats", "1"],
    "bench_executor_overhead": ["--stages", "1", "--repeats", "1"],
    "bench_vs_torch": ["--models", "gpt2", "--sizes", "tiny", "--rounds", "1", "--repeats", "1"],
}


def test_the_torch_scripts_import_no_torch_at_their_top() -> None:
    """``python -m`` runs a module's top before `main` can handle a Ctrl-C: none of the four imports torch there
    (vs_torch_compile is imported by bench_vs_torch's argument checks)."""
    names = [*SCRIPTS, "vs_torch_compile"]
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module('memsched.experiments.' + name)\n"
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_real_sigint_while_torch_is_imported_is_one_line_and_130(name: str, tmp_path: Path) -> None:
    """As in a terminal (SIGINT at its default), a Ctrl-C that comes while torch is imported (a stand-in torch sends
    it) is one line naming the script and exit 130, nothing written: no traceback (torch was imported at the top)."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)\n")
    out = tmp_path / "out.csv"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", f"memsched.experiments.{name}", *SCRIPTS[name], "--out", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env,
                          preexec_fn=sigint_as_in_a_terminal, check=False)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr[-2000:]
    lines = nonblank_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"{name}: interrupted"), proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake"]  # no table, partial file or figure


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_bad_argument_needs_no_torch(name: str, tmp_path: Path) -> None:
    """The arguments are checked before torch is imported: a bad one is one line and exit 2 even where importing
    torch would be interrupted (the stand-in torch fails the import instead)."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch imported')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")])),
           "MEMSCHED_NO_MALLOC_PIN": "1"}
    bad = {"bench_executor": ["--threads", "0"], "bench_executor_overhead": ["--stages", "0"],
           "bench_vs_torch": ["--compile", "nothing"]}[name]
    proc = subprocess.run([sys.executable, "-m", f"memsched.experiments.{name}", *bad], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "torch imported" not in proc.stderr and len(nonblank_lines(proc.stderr)) == 1, proc.stderr
