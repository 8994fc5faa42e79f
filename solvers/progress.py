"""Progress of a long solve, for whoever watches it (the CLI's progress bar).

An exact solver can run for minutes. Solvers call `report` when they enter a stage (warm start,
root LP, search) and, where the backend tells them, when the best schedule or the lower bound
improves; a watcher installed with `watching(callback)` around the solve receives the merged
state as a `Progress` after each report. Nobody watching: `report` returns at once.

Invariants of the merged state: ``best`` only decreases and ``bound`` only increases (the
smallest objective reported and the largest bound reported since `watching` began). Both are
in the objective's unit of the model that reported them (makespan or period, as in
`SolveResult`); a model with slots reports bounds of its discretisation, so the final
`SolveResult` stays the answer and the progress is only a view of the work.

Only the process and thread that installed the watcher report to it: forked children (the
exact layer's optional seeds, the MILP portfolio's backends) write nothing to the parent's
display, and backends that call back from their own threads (CP-SAT) are forwarded by the
runner, which captured the watcher in the solving thread (`current_reporter`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Progress:
    """What a watcher sees: the current stage (free text, e.g. ``"search (scip)"``), the best
    objective of a schedule found so far and the best lower bound proven so far (None: none yet)."""

    stage: str = ""
    best: float | None = None
    bound: float | None = None

    @property
    def gap(self) -> float | None:
        """(best - bound) / best, or None when either is unknown (or best is 0)."""
        if self.best is None or self.bound is None or self.best == 0:
            return None
        return max(0.0, (self.best - self.bound) / abs(self.best))


class _Watch:
    """The merged state of one `watching` block and its callback; thread-safe."""

    def __init__(self, callback: Callable[[Progress], None]) -> None:
        self.callback = callback
        self.pid = os.getpid()
        self.state = Progress()
        self.lock = threading.Lock()

    def report(self, stage: str | None, best: float | None, bound: float | None) -> None:
        if os.getpid() != self.pid:  # a forked child: the display belongs to the parent
            return
        with self.lock:
            s = self.state
            if stage is not None:
                s = replace(s, stage=stage)
            if best is not None and (s.best is None or best < s.best):
                s = replace(s, best=float(best))
            if bound is not None and (s.bound is None or bound > s.bound):
                s = replace(s, bound=float(bound))
            self.state = s
        self.callback(s)


_WATCH: ContextVar[_Watch | None] = ContextVar("memsched_progress_watch", default=None)

#: the signature of `report` and of what `current_reporter` returns
Reporter = Callable[..., None]


def report(stage: str | None = None, *, best: float | None = None, bound: float | None = None) -> None:
    """Tell the watcher (if any) that the solve entered `stage` and/or found a schedule of
    objective `best` and/or proved the lower bound `bound`; None leaves a field as it was."""
    watch = _WATCH.get()
    if watch is not None:
        watch.report(stage, best, bound)


def current_reporter() -> Reporter:
    """`report` bound to this thread's watcher, for callbacks that a backend runs in its own
    threads (a context variable is not seen there); a no-op when nobody watches."""
    watch = _WATCH.get()
    if watch is None:
        return _ignore

    def send(stage: str | None = None, *, best: float | None = None, bound: float | None = None) -> None:
        watch.report(stage, best, bound)
    return send


def _ignore(stage: str | None = None, *, best: float | None = None, bound: float | None = None) -> None:
    return None


@contextmanager
def watching(callback: Callable[[Progress], None]) -> Iterator[None]:
    """Within the block, every `report` of this thread (and of the callbacks it hands out)
    calls `callback` with the merged `Progress`."""
    token = _WATCH.set(_Watch(callback))
    try:
        yield
    finally:
        _WATCH.reset(token)


__all__ = ["Progress", "Reporter", "current_reporter", "report", "watching"]
