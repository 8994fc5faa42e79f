"""The sweep's worker pool notices a worker that dies in any state (idle, just after taking a
cell, inside a cell) and never hangs: every cell gives exactly one row."""

from __future__ import annotations

import os
import signal
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
