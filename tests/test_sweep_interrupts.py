"""Sweeps stop cleanly: Ctrl-C (also inside CP-SAT), kill -9, a second sweep on one folder, torn journals.

Each test runs `memsched sweep` as a subprocess in its own session (as a terminal would: a
Ctrl-C goes to the whole process group) and signals it at a chosen moment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from conftest import EXAMPLES, ROOT, sigint_as_in_a_terminal, sweep_toml, wait_rows
from memsched.experiments.sweep import Journal, journal_path, read_journal, run_sweep

#: Two quick cells, then a CP-SAT cell that runs for many seconds (an exact model on 30 stages).
SLOW = sweep_toml("slow", budgets=["50%"], instances=[{"file": EXAMPLES / "random30.json"}],
                  solvers=["store-all", "rotor", {"name": "cpsat", "time_limit": 120}])


def start(cfg: Path, out: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "memsched.experiments.cli", "sweep", str(cfg), "--output", str(out), "--no-progress",
           *extra]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_as_in_a_terminal)


def workers_of(proc: subprocess.Popen) -> list[psutil.Process]:
    """The spawned worker processes of a sweep (not multiprocessing's resource tracker)."""
    def is_worker(kid: psutil.Process) -> bool:
        try:
            return "spawn_main" in " ".join(kid.cmdline())
        except (psutil.ZombieProcess, psutil.NoSuchProcess):  # a finished child not yet reaped
            return False

    return [k for k in psutil.Process(proc.pid).children(recursive=True) if is_worker(k)]


def gone(procs: list[psutil.Process], timeout: float = 5) -> bool:
    _, alive = psutil.wait_procs(procs, timeout=timeout)

    def is_zombie_or_gone(p: psutil.Process) -> bool:
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:  # it ended between wait_procs and this look
            return True

    return all(is_zombie_or_gone(p) for p in alive)


def assert_journal_matches_table(out: Path, name: str) -> pd.DataFrame:
    lines = [ln for ln in journal_path(out, name).read_text().splitlines() if ln.strip()]
    journal = read_journal(journal_path(out, name))
    assert len(lines) == len(journal), "a cell was journaled twice"
    table = pd.read_csv(out / f"{name}.csv")
    assert sorted(table["key"]) == sorted(journal)
    return table


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_during_cpsat_stops_cleanly(tmp_path, workers):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    out = tmp_path / "out"
    proc = start(cfg, out, "--workers", workers)
    wait_rows(journal_path(out, "slow"), 2, proc)
    time.sleep(1.0)  # CP-SAT is now searching
    kids = workers_of(proc)
    assert kids and proc.poll() is None
    t0 = time.time()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.time() - t0 < 15  # not after CP-SAT's 120 s limit
    assert "interrupted: 2/3 rows kept" in err
    table = assert_journal_matches_table(out, "slow")
    assert set(table["solver"]) == {"store-all", "rotor"}  # the interrupted CP-SAT cell is not journaled
    assert gone(kids)


def test_resume_after_ctrl_c_redoes_only_the_interrupted_cell(tmp_path):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW.replace("time_limit = 120", "time_limit = 1"))
    out = tmp_path / "out"
    # two finished rows, as an interrupted run leaves them
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, output=out, workers=1, progress=False, isolate=False,
                  on_row=lambda row: _interrupt_after(row, "rotor"))
    first = read_journal(journal_path(out, "slow"))
    assert sorted(r["solver"] for r in first.values()) == ["rotor", "store-all"]
    outcome = run_sweep(cfg, output=out, workers=1, progress=False)
    assert outcome.resumed == 2 and outcome.ran == 1
    again = read_journal(journal_path(out, "slow"))
    assert all(again[k]["timestamp"] == first[k]["timestamp"] for k in first)
    assert_journal_matches_table(out, "slow")


def _interrupt_after(row: dict, solver: str) -> None:
    if row["solver"] == solver:
        raise KeyboardInterrupt


def test_kill_9_takes_the_workers_along(tmp_path):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    out = tmp_path / "out"
    proc = start(cfg, out, "--workers", "2")
    wait_rows(journal_path(out, "slow"), 2, proc)
    kids = workers_of(proc)
    assert kids
    proc.kill()
    proc.communicate(timeout=30)
    assert gone(kids), [k.pid for k in kids if k.is_running()]
    # the rows journaled before the kill are kept; the rerun finds them and the lock is free
    assert len(read_journal(journal_path(out, "slow"))) == 2


def test_second_sweep_on_the_same_folder_is_refused(tmp_path, cli):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    out = tmp_path / "out"
    proc = start(cfg, out, "--workers", "1")
    try:
        wait_rows(journal_path(out, "slow"), 2, proc)
        r = cli("sweep", cfg, "--output", out, "--no-progress", "--workers", "1")
        assert r.code == 2
        line = r.err.strip()
        assert "\n" not in line and "already writing to this folder" in line and str(proc.pid) in line, r.err
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)
    assert len(read_journal(journal_path(out, "slow"))) == 2  # the refused sweep ran nothing


def test_complete_last_row_without_newline_is_kept(tmp_path):
    jpath = tmp_path / "j.jsonl"
    jpath.write_bytes(b'{"key": "a", "v": 1}\n{"key": "b", "v": 2}')  # killed before the newline
    assert set(read_journal(jpath)) == {"a", "b"}
    Journal(jpath).close()
    assert jpath.read_bytes() == b'{"key": "a", "v": 1}\n{"key": "b", "v": 2}\n'
    with Journal(jpath) as j:
        j.append({"key": "c", "v": 3})
    assert set(read_journal(jpath)) == {"a", "b", "c"}


def test_torn_last_row_is_cut(tmp_path):
    jpath = tmp_path / "j.jsonl"
    jpath.write_bytes(b'{"key": "a", "v": 1}\n{"key": "b", "v"')
    assert set(read_journal(jpath)) == {"a"}
    with Journal(jpath) as j:
        j.append({"key": "c", "v": 3})
    assert jpath.read_bytes() == b'{"key": "a", "v": 1}\n{"key": "c", "v": 3}\n'


QUICK = sweep_toml("quick", budgets=["40%", "55%", "70%", "85%", "100%"], defaults={"slots": 100},
                   instances=[{"example": "cnn12"}, {"file": EXAMPLES / "random10.json"}],
                   solvers=["store-all", "periodic", "rotor", "sqrt"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_signals_at_any_moment_lose_and_duplicate_nothing(tmp_path, sig):
    """Stop a sweep of quick cells three times at different moments, then finish it: every
    cell has exactly one row, and journal and table agree."""
    cfg = tmp_path / "quick.toml"
    cfg.write_text(QUICK)
    out = tmp_path / "out"
    jpath = journal_path(out, "quick")
    total = 2 * 5 * 4
    for n in (3, 11, 23):
        proc = start(cfg, out, "--workers", "2")
        deadline = time.time() + 90
        while time.time() < deadline and proc.poll() is None:
            if jpath.exists() and jpath.read_bytes().count(b"\n") >= n:
                break
            time.sleep(0.002)
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
        proc.communicate(timeout=30)
        if sig == signal.SIGINT and proc.returncode != 0:
            assert proc.returncode == 130
            assert_journal_matches_table(out, "quick")
    outcome = run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    assert outcome.total == total and outcome.resumed + outcome.ran == total
    table = assert_journal_matches_table(out, "quick")
    assert len(table) == total and table["key"].is_unique
