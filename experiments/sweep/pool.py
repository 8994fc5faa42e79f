"""Worker processes for a sweep: cells run where a stop always reaches them, and die with the sweep.

Why not `concurrent.futures.ProcessPoolExecutor`: a stop must be immediate and clean.

- Each worker leaves the terminal's process group (``os.setpgrp``), so a Ctrl-C reaches only
  the sweep process, never a solver: OR-Tools catches SIGINT inside CP-SAT and would return its
  incumbent as a weak ``feasible`` row. The sweep process kills its workers (SIGKILL) when it
  stops, so the running cells give no row at all and are run again on resume.
- Each worker dies with its parent: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on Linux, and on every
  system a watchdog thread that exits when the parent process is gone (checked every 0.5 s).
- A worker that dies on its own (a crash in native code, the OOM killer) gives an ``error`` row
  for the cell it was running, and a fresh worker takes its place.

Workers are started with the ``spawn`` method (portable, and safe with threads of torch and
OR-Tools); each imports memsched once and then runs cells until told to stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .grid import Task

#: Seconds between checks that the parent (in a worker) or the workers (in the parent) are alive.
POLL_S = 0.5
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Make this process exit when process `parent` is gone (SIGKILL on Linux, a watchdog everywhere)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(POLL_S)

    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)
    threading.Thread(target=watch, name="memsched-parent-watchdog", daemon=True).start()


def worker_main(tasks: Any, results: Any, parent: int, run: Callable[[Task], dict[str, Any]]) -> None:
    """Body of one worker: report ``("start", position, pid)``, run the task, report ``("row", position, row)``."""
    with contextlib.suppress(OSError):
        os.setpgrp()  # out of the terminal's process group: Ctrl-C goes to the sweep process only
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    while True:
        task = tasks.get()
        if task is None:
            return
        results.put(("start", task.position, os.getpid()))
        results.put(("row", task.position, run(task)))


class WorkerPool:
    """`n` spawned workers running `run(task)`; iterate `results(tasks)` for rows as they finish."""

    def __init__(self, n: int, run: Callable[[Task], dict[str, Any]]) -> None:
        import multiprocessing

        self._ctx = multiprocessing.get_context("spawn")
        self._n = max(1, n)
        self._run = run
        self._tasks = self._ctx.Queue()
        self._results = self._ctx.Queue()
        self._procs: list[Any] = []

    def _start_worker(self) -> None:
        p = self._ctx.Process(target=worker_main, args=(self._tasks, self._results, os.getpid(), self._run),
                              daemon=True, name="memsched-sweep-worker")
        p.start()
        self._procs.append(p)

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [p.pid for p in self._procs if p.pid is not None]

    def results(self, tasks: list[Task], crashed: Callable[[Task, str], dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Rows of `tasks` in the order they finish; `crashed(task, why)` gives the row of a cell
        whose worker died. The workers are killed when the iteration ends, however it ends."""
        by_position = {t.position: t for t in tasks}
        running: dict[int, int] = {}  # worker pid -> position
        pending = set(by_position)
        try:
            for t in tasks:
                self._tasks.put(t)
            for _ in range(min(self._n, len(tasks))):
                self._start_worker()
            for _ in self._procs:
                self._tasks.put(None)
            while pending:
                try:
                    kind, position, payload = self._results.get(timeout=POLL_S)
                except queue.Empty:
                    yield from self._reap(running, pending, by_position, crashed)
                    continue
                if kind == "start":
                    running[payload] = position
                elif position in pending:
                    pending.discard(position)
                    running = {pid: pos for pid, pos in running.items() if pos != position}
                    yield payload
        finally:
            self.kill()

    def _reap(self, running: dict[int, int], pending: set[int], by_position: dict[int, Task],
              crashed: Callable[[Task, str], dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Rows for the cells of workers that died on their own; replace those workers."""
        for p in list(self._procs):
            if p.is_alive() or p.exitcode == 0:
                continue
            self._procs.remove(p)
            position = running.pop(p.pid, None)
            if position is not None and position in pending:
                pending.discard(position)
                yield crashed(by_position[position], f"the worker process died (exit code {p.exitcode})")
            if pending:
                self._start_worker()
                self._tasks.put(None)

    def kill(self) -> None:
        """Kill every worker now (SIGKILL) and release the queues."""
        for p in self._procs:
            if p.is_alive():
                with contextlib.suppress(OSError):
                    p.kill()
        for p in self._procs:
            p.join(timeout=5)
        for q in (self._tasks, self._results):
            q.cancel_join_thread()
            q.close()
        self._procs.clear()
