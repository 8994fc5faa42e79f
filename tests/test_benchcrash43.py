"""Fix 43 (benchcrash): a bench stopped by a crash, a kill or a full disk (experiments/benchtable.py).

1. A partial file cut mid-line (a SIGKILL during a write, a full disk) is read without the cut row and the rest of
   its cell: that cell runs again, the resumed table equals an uninterrupted one (timing columns aside), one line on
   stderr names the file; never a traceback, never a damaged table (bench_chain_dp, bench_join, whose cells have
   several rows, and bench_papers_graphs, which rewrites its partial file itself).
2. SIGTERM stops a bench as a Ctrl-C does (`benchtable.guarded`): one line, exit 130, the finished rows kept.
3. Each cell's rows reach the partial file as the cell finishes: a SIGKILL keeps them and a rerun resumes them.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import (
    call_main,
    interrupt_at,
    partial_of,
    partial_table,
    shown_lines,
    sigint_as_in_a_terminal,
    wait_for,
)

#: bench_chain_dp's columns that are measured, not computed (they differ from run to run)
DP_TIMES = {"table_s", "schedule_s", "total_s", "cpu_s", "load_avg_1min"}
#: bench_papers_graphs' measured columns
PG_TIMES = {"time_s", "first_schedule_s", "load"}


def _rows(path: Path, drop: set[str] = frozenset()) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(fh)]


def _cut(path: Path, line: int, keep: float) -> str:
    """Cut the file `path` inside its line `line` (0-based; negative from the end), keeping `keep` of it (no newline
    after it): what a kill during a write or a full disk leaves. Returns the part of the line left."""
    lines = path.read_text().splitlines(keepends=True)
    left = lines[line][: int(len(lines[line]) * keep)]
    path.write_text("".join(lines[:line if line >= 0 else len(lines) + line]) + left)
    return left


def _damage_note(err: str, partial: Path) -> list[str]:
    """The lines of `err` that say rows of `partial` were left out as damaged."""
    return [line for line in err.splitlines() if str(partial) in line and "damaged" in line]


# ------------------------------------------------------------------ 1. a partial file cut mid-line
DP_ARGS = ["--lengths", "10", "11", "12", "--slots", "50", "--repeat", "1"]


def test_chain_dp_resumes_a_partial_file_cut_mid_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import bench_chain_dp as bench

    ref = tmp_path / "ref.csv"
    code, _, err = call_main(bench.main, [*DP_ARGS, "--out", str(ref)], capsys)
    assert code == 0, err
    out = tmp_path / "dp.csv"
    argv = [*DP_ARGS, "--out", str(out)]
    with monkeypatch.context() as patch:
        patch.setattr(bench, "run_one", interrupt_at(3, bench.run_one))
        code, _, err = call_main(bench.main, argv, capsys)
    assert code == 130, err
    assert len(partial_table(out)[1]) == 2
    _cut(partial_of(out), -1, 0.6)  # the second row cut inside its timing columns
    calls: list[int] = []
    monkeypatch.setattr(bench, "run_one", interrupt_at(None, bench.run_one, calls))
    code, printed, err = call_main(bench.main, argv, capsys)
    assert code == 0 and "Traceback" not in err, err
    assert len(calls) == 2  # the cut row's cell runs again, with the one never reached
    assert len(_damage_note(err, partial_of(out))) == 1, err
    assert _rows(out, DP_TIMES) == _rows(ref, DP_TIMES)
    assert not partial_of(out).exists()
    assert len([line for line in printed.splitlines() if line.strip()]) == 4  # the header and every row, once


def _join_solve(problem: str, join: Any, solver: str, budget: int, **kw: Any) -> SimpleNamespace:
    """A stand-in of bench_join's solver runs: a made-up result of the budget and solver, none for store-all."""
    found = solver != "store-all"
    return SimpleNamespace(objective=float(join.total_time() + budget % 7 + len(solver)) if found else None,
                           status="optimal" if found else "infeasible", found=found,
                           peak_memory=budget - len(solver), solve_time_s=0.5, scope="stand-in")


def test_join_leaves_out_the_whole_cell_of_a_cut_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """bench_join's cells have a row per solver: a cut inside the second cell's third row leaves its first two
    rows whole, but the cell is not (its rerun is the cell's only copy in the table)."""
    from memsched.experiments import bench_join as bench

    monkeypatch.setattr(bench.registry, "solve", _join_solve)
    ref = tmp_path / "ref.csv"
    code, _, err = call_main(bench.main, ["--quick", "--out", str(ref)], capsys)
    assert code == 0, err
    per_cell = len([r for r in _rows(ref) if r["instance"] == _rows(ref)[0]["instance"]]) // 4  # 4 small budgets
    out = tmp_path / "join.csv"
    with monkeypatch.context() as patch:
        patch.setattr(bench.registry, "solve", interrupt_at(2 * per_cell + 1, _join_solve))
        code, _, err = call_main(bench.main, ["--quick", "--out", str(out)], capsys)
    assert code == 130, err
    assert len(partial_table(out)[1]) == 2 * per_cell
    _cut(partial_of(out), 2 + per_cell + 2, 0.5)  # settings, header, the first cell, two rows of the second
    calls: list[int] = []
    monkeypatch.setattr(bench.registry, "solve", interrupt_at(None, _join_solve, calls))
    code, printed, err = call_main(bench.main, ["--quick", "--out", str(out)], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert len(calls) == len(_rows(ref)) - per_cell  # only the first cell is taken from the partial file
    assert len(_damage_note(err, partial_of(out))) == 1, err
    assert _rows(out) == _rows(ref)


def test_papers_graphs_never_writes_a_table_with_a_cut_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """bench_papers_graphs rewrites its partial file after each cell; one cut inside a ``null`` (read as the text
    "nul" before) is left out: the solver of that row runs again and the table is the uninterrupted one."""
    from memsched.experiments import bench_papers_graphs as bench
    from memsched.solvers.graph import generate

    generate.random_layered(12, 2).save(tmp_path / "random_layered_n100_stand-in.json")
    args = ["--graphs", str(tmp_path), "--instances", "RL100", "--fractions", "0.9", "0.8",
            "--solvers", "greedy", "checkpoint-all"]
    ref = tmp_path / "ref.csv"
    code, _, err = call_main(bench.main, [*args, "--out", str(ref)], capsys)
    assert code == 0, err
    out = tmp_path / "pg.csv"
    with monkeypatch.context() as patch:
        patch.setattr(bench, "solve", interrupt_at(4, bench.solve))
        code, _, err = call_main(bench.main, [*args, "--out", str(out)], capsys)
    assert code == 130, err
    partial = partial_of(out)
    assert len(partial_table(out)[1]) == 2
    last = partial.read_text().splitlines()[-1]
    assert ",null," in last
    _cut(partial, -1, (last.rindex(",null,") + len(",nul")) / len(last))
    calls: list[int] = []
    monkeypatch.setattr(bench, "solve", interrupt_at(None, bench.solve, calls))
    code, _, err = call_main(bench.main, [*args, "--out", str(out)], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert len(calls) == 3  # the cut row's solver, and the second cell
    assert len(_damage_note(err, partial)) == 1, err
    assert _rows(out, PG_TIMES) == _rows(ref, PG_TIMES)
    assert not partial.exists()


# ------------------------------------------------------------------ 2, 3. signals to a running bench
#: 20 cells of a few tenths of a second each (a DP of 60 stages at 300 slots, best of 60)
SLOW_DP = ["--lengths", *map(str, range(60, 80)), "--slots", "300", "--repeat", "60"]


def _start(out: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "memsched.experiments.bench_chain_dp", *SLOW_DP, "--out", str(out)]
    return subprocess.Popen(argv, cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_in_a_terminal)


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _first_row(proc: subprocess.Popen[str]) -> list[str]:
    """The lines the bench printed up to its first row (its header, the row)."""
    assert proc.stdout is not None
    printed = [proc.stdout.readline(), proc.stdout.readline()]
    assert printed[-1].split()[:1] == ["60"], printed
    return printed


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX signals")
def test_sigterm_acts_as_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "dp.csv"
    proc = _start(out)
    try:
        _first_row(proc)
        proc.send_signal(signal.SIGTERM)
    finally:
        rest, err = _finish(proc)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err
    lines = shown_lines(err)
    assert lines[-1].startswith("bench_chain_dp: interrupted: ") and str(partial_of(out)) in lines[-1], err
    assert [line for line in lines if "interrupted" in line] == lines[-1:]
    assert not out.exists()
    kept = partial_table(out)[1]
    assert kept and [r["L"] for r in kept] == list(range(60, 60 + len(kept)))


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_sigkill_keeps_the_finished_rows_and_a_rerun_resumes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dp.csv"
    partial = partial_of(out)

    def rows_in_partial() -> int:
        """The whole rows the partial file holds (its settings line and header aside)."""
        try:
            return partial.read_text().count("\n") - 2
        except OSError:
            return 0

    proc = _start(out)
    try:
        _first_row(proc)
        assert wait_for(lambda: rows_in_partial() >= 2 or proc.poll() is not None, 60)
        proc.send_signal(signal.SIGKILL)
    finally:
        _finish(proc)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    kept = partial_table(out)[1]
    assert len(kept) >= 2 and [r["L"] for r in kept] == list(range(60, 60 + len(kept)))

    # the same command again, its cells made up (counted): the kept ones are taken as they are
    from memsched.experiments import bench_chain_dp as bench

    made: list[int] = []

    def run_one(L: int, slots: int, *args: Any) -> dict[str, Any]:
        made.append(L)
        return {**kept[0], "L": L, "slots": slots}

    monkeypatch.setattr(bench, "run_one", run_one)
    code, _, err = call_main(bench.main, [*SLOW_DP, "--out", str(out)], capsys)
    assert code == 0, err
    assert f"resuming from {partial}" in err and made == list(range(60 + len(kept), 80))
    table = _rows(out)
    assert [int(r["L"]) for r in table] == list(range(60, 80))
    assert [(int(r["cells"]), float(r["makespan"])) for r in table[:len(kept)]] == \
        [(r["cells"], r["makespan"]) for r in kept]
    assert not partial.exists()
