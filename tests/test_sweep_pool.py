"""The sweep's worker pool notices a worker that dies in any state (idle, just after taking a
cell, inside a cell) and never hangs: every cell gives exactly one row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from memsched.experiments.sweep.pool import WorkerPool


@dataclass
class FakeTask:
    """The fields of a sweep `Task` the pool reads."""

    position: int
    action: str = "ok"


def run_fake(task: FakeTask) -> dict:
    """Cell body in the worker: 'die' kills the worker as soon as it holds the cell (before any
    report), 'slow' sleeps, 'ok' answers at once."""
    if task.action == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if task.action == "slow":
        time.sleep(1.0)
    return {"position": task.position, "status": "ok", "pid": os.getpid()}


def crashed(task: FakeTask, why: str) -> dict:
    return {"position": task.position, "status": "error", "why": why}


def collect(pool: WorkerPool, tasks: list[FakeTask], *, kill_idle_after: float | None = None,
            timeout: float = 60.0) -> list[dict]:
    """Rows of `pool.results(tasks)`, run in a thread with a timeout so that a hang fails the test."""
    rows: list[dict] = []
    done = threading.Event()

    def body() -> None:
        rows.extend(pool.results(tasks, crashed))
        done.set()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    if kill_idle_after is not None:
        time.sleep(kill_idle_after)
        for pid in pool.pids:
            os.kill(pid, signal.SIGKILL)
    if not done.wait(timeout):
        pool.kill()
        raise AssertionError(f"the pool hung: {len(rows)} of {len(tasks)} rows after {timeout} s")
    return rows


def test_worker_killed_right_after_taking_a_cell():
    tasks = [FakeTask(0), FakeTask(1, "die"), FakeTask(2), FakeTask(3, "die"), FakeTask(4)]
    rows = collect(WorkerPool(2, run_fake), tasks)
    by_pos = {r["position"]: r for r in rows}
    assert sorted(by_pos) == [0, 1, 2, 3, 4] and len(rows) == 5
    assert by_pos[1]["status"] == by_pos[3]["status"] == "error"
    assert "died" in by_pos[1]["why"]
    assert all(by_pos[p]["status"] == "ok" for p in (0, 2, 4))


def test_every_worker_dies_and_the_last_cells_still_answer():
    tasks = [FakeTask(i, "die") for i in range(3)]
    rows = collect(WorkerPool(3, run_fake), tasks)
    assert sorted(r["position"] for r in rows) == [0, 1, 2]
    assert all(r["status"] == "error" for r in rows)


def test_workers_killed_from_outside_while_running_or_waiting():
    # kill every worker while it sits in a slow cell (or is still starting): each cell is
    # reported once, as an error when its worker was killed holding it, else as done
    tasks = [FakeTask(i, "slow") for i in range(4)]
    rows = collect(WorkerPool(2, run_fake), tasks, kill_idle_after=0.2)
    assert sorted(r["position"] for r in rows) == [0, 1, 2, 3]
    assert {r["status"] for r in rows} <= {"ok", "error"}


def test_a_script_without_a_main_guard_runs_a_sweep(tmp_path):
    """Spawn runs the caller's main script again in every worker: a script that starts a sweep at
    its top level (no ``if __name__ == "__main__":``) started one again in each worker, which
    failed there, and every cell ended as an ``error`` row."""
    config = tmp_path / "tiny.toml"
    config.write_text('name = "tiny"\nbudgets = ["60%", "90%"]\n[[instances]]\nexample = "tiny"\n'
                      '[[solvers]]\nname = "rotor"\n[[solvers]]\nname = "periodic"\n')
    script = tmp_path / "run_it.py"
    out = tmp_path / "out"
    script.write_text(f"import memsched\nrows = memsched.sweep({str(config)!r}, output={str(out)!r}).rows\n"
                      "print(sorted(row['status'] for row in rows))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['feasible', 'infeasible', 'infeasible', 'optimal']", done.stdout + done.stderr
