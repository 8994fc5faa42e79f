"""Worker processes for a sweep: cells run where a stop always reaches them, and die with the sweep.

Why not `concurrent.futures.ProcessPoolExecutor`: a stop must be immediate and clean.

- Each worker leaves the terminal's process group (``os.setpgrp``), so a Ctrl-C reaches only
  the sweep process, never a solver: OR-Tools catches SIGINT inside CP-SAT and would return its
  incumbent as a weak ``feasible`` row. A worker starts with SIGINT blocked (`_starting`)
  until it has left the group and ignores SIGINT, so that a Ctrl-C while it imports memsched
  (a second or more) is discarded, not a KeyboardInterrupt traceback. The sweep process kills
  its workers (SIGKILL) when it stops, so the running cells give no row at all and are run
  again on resume.
- Each worker dies with its parent: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on Linux, and on every
  system a watchdog thread that exits when the parent process is gone (checked every 0.5 s).
- A worker that dies on its own (a crash in native code, the OOM killer) gives an ``error`` row
  for the cell it was running, and a fresh worker takes its place. The parent hands each worker
  its cells one at a time on the worker's own queue, so it always knows which cell a worker
  holds: a worker that dies at any moment (idle, just after taking a cell, inside the solver,
  while reporting its row) is noticed at once (its process sentinel) and no cell is lost or left
  waiting. Each worker has its own pipes, one each way, and no lock shared with the others
  (a ``multiprocessing.Queue`` shared by the workers could stay locked forever by one killed
  while its feeder thread held the queue's write lock).

Workers are started with the ``spawn`` method (portable, and safe with threads of torch and
OR-Tools), without the caller's main script (`callers_main_hidden`: a script that starts a
sweep at its top level would otherwise start one again in each worker); each imports memsched
once and then runs cells until told to stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from memsched.solvers.processes import callers_main_hidden, stop_signals

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


@contextlib.contextmanager
def _starting() -> Iterator[None]:
    """Inside, a worker can be started without a signal breaking the start:

    - SIGINT is blocked in this thread, so that the process started inside starts with it
      blocked (a signal mask survives fork and exec). A worker spends its first second or more
      importing memsched in the terminal's process group, where a Ctrl-C would kill it with a
      KeyboardInterrupt traceback; blocked, that Ctrl-C stays pending until `worker_main` has
      left the group and ignores SIGINT, which discards it.
    - In the main thread, SIGINT, SIGTERM and SIGHUP are held, unless ignored (`stop_signals`):
      their handlers run on leaving (a signal received by another thread runs its handler in the
      main thread even while the main thread blocks it, and a KeyboardInterrupt between the
      worker's start and the parent's writing of its start data would leave the worker reading an
      empty pipe: an EOFError traceback). By then the worker is registered, and is killed with
      the others. An ignored one is left ignored (not held and raised again on leaving).
    """
    held: list[int] = []
    handlers: dict[int, Any] = {}
    old_mask = None
    if hasattr(signal, "pthread_sigmask"):
        from multiprocessing import resource_tracker

        # multiprocessing's resource tracker, when the first `Process.start` starts it, unblocks
        # SIGINT right after (ResourceTracker.ensure_running): start it before SIGINT is blocked
        resource_tracker.ensure_running()
    if threading.current_thread() is threading.main_thread():
        for sig in stop_signals():
            handlers[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
    if hasattr(signal, "pthread_sigmask"):
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for sig, handler in handlers.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for sig in dict.fromkeys(held):
            signal.raise_signal(sig)  # now, to its own handler


def worker_main(tasks: Connection, results: Connection, parent: int, run: Callable[[Task], dict[str, Any]]) -> None:
    """Body of one worker: receive a task on its pipe `tasks`, run it, send ``(position, row)``
    on its pipe `results`; stop at ``None`` or when the parent's end is closed."""
    with contextlib.suppress(OSError):
        os.setpgrp()  # out of the terminal's process group: Ctrl-C goes to the sweep process only
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (also discards a Ctrl-C that came while SIGINT was blocked)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked since the start (`_starting`)
    _die_with_parent(parent)
    while True:
        try:
            task = tasks.recv()
        except EOFError:
            return
        if task is None:
            return
        results.send((task.position, run(task)))


@dataclass
class _Worker:
    """A worker process, the parent's ends of its two pipes, and the position of the cell it
    holds (None: idle or stopping)."""

    proc: Any
    tasks: Connection
    results: Connection
    position: int | None = None


class WorkerPool:
    """`n` spawned workers running `run(task)`; iterate `results(tasks)` for rows as they finish."""

    def __init__(self, n: int, run: Callable[[Task], dict[str, Any]]) -> None:
        import multiprocessing

        self._ctx = multiprocessing.get_context("spawn")
        self._n = max(1, n)
        self._run = run
        self._workers: list[_Worker] = []

    def _start_worker(self) -> _Worker:
        task_recv, task_send = self._ctx.Pipe(duplex=False)
        row_recv, row_send = self._ctx.Pipe(duplex=False)
        p = self._ctx.Process(target=worker_main, args=(task_recv, row_send, os.getpid(), self._run),
                              daemon=True, name="memsched-sweep-worker")
        with _starting():  # a Ctrl-C meanwhile reaches this process once the worker is ours to kill
            with callers_main_hidden():  # the caller's script is not run again in the worker
                p.start()
            task_recv.close()  # the child holds its own ends now
            row_send.close()
            worker = _Worker(p, task_send, row_recv)
            self._workers.append(worker)
        return worker

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.proc.pid for w in self._workers if w.proc.pid is not None]

    @staticmethod
    def _assign(worker: _Worker, todo: deque[Task]) -> None:
        """Give `worker` the next cell, or tell it to stop when none is left (a worker already
        dead keeps the cell: its sentinel reports it)."""
        task = todo.popleft() if todo else None
        worker.position = task.position if task is not None else None
        with contextlib.suppress(OSError):
            worker.tasks.send(task)

    def results(self, tasks: list[Task], crashed: Callable[[Task, str], dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Rows of `tasks` in the order they finish; `crashed(task, why)` gives the row of a cell
        whose worker died. The workers are killed when the iteration ends, however it ends."""
        by_position = {t.position: t for t in tasks}
        pending = set(by_position)
        todo = deque(tasks)
        try:
            for _ in range(min(self._n, len(tasks))):
                self._assign(self._start_worker(), todo)
            while pending:
                if not self._workers:  # nothing can report the rest: should not happen, never hang
                    for position in sorted(pending):
                        yield crashed(by_position[position], "no worker process is left to run this cell")
                    return
                ready = set(wait([w.results for w in self._workers] + [w.proc.sentinel for w in self._workers],
                                 timeout=POLL_S))
                for w in list(self._workers):
                    if w.results in ready or w.proc.sentinel in ready:
                        yield from self._serve(w, ready, pending, by_position, todo, crashed)
        finally:
            self.kill()

    def _serve(self, w: _Worker, ready: set[Any], pending: set[int], by_position: dict[int, Task],
               todo: deque[Task], crashed: Callable[[Task, str], dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """A worker's row (yield it, give the worker its next cell) or its death (a row for the
        cell it held, a fresh worker while cells are left)."""
        row = None
        if w.results in ready:
            with contextlib.suppress(EOFError, OSError):
                row = w.results.recv()
        if row is not None:
            position, answer = row
            if position in pending:
                pending.discard(position)
                yield answer
            if w.position == position:
                self._assign(w, todo)
            return
        if w.proc.is_alive():
            w.proc.join(timeout=POLL_S)  # its pipe closed: it is exiting
            if w.proc.is_alive():
                return
        self._workers.remove(w)
        w.tasks.close()
        w.results.close()
        if w.position is not None and w.position in pending:
            pending.discard(w.position)
            yield crashed(by_position[w.position], f"the worker process died (exit code {w.proc.exitcode})")
        if todo:
            self._assign(self._start_worker(), todo)

    def kill(self) -> None:
        """Kill every worker now (SIGKILL) and close the pipes."""
        for w in self._workers:
            if w.proc.is_alive():
                with contextlib.suppress(OSError):
                    w.proc.kill()
        for w in self._workers:
            w.proc.join(timeout=5)
            w.tasks.close()
            w.results.close()
        self._workers.clear()
