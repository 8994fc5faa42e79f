"""A live progress line on stderr for a long solve (tqdm), fed by `solvers.progress`: the
``--progress`` line of ``memsched solve`` and the ``progress=True`` of `memsched.solve`.

Shows the seconds spent against the time limit, the solver's stage, and, where its backend tells,
the best makespan found, the lower bound and their gap. The line is removed when the solve ends
(stdout, e.g. ``--json``, is never touched); a ticker thread redraws it twice a second, since a
MILP backend can run for minutes without calling back.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memsched.solvers.progress import Progress, watching

#: seconds between redraws
TICK_S = 0.5
#: the terminal's size (columns, rows) assumed where it reports none (0 x 0: a serial console, a pty
#: never sized, some CI terminals), on which tqdm's own sizing draws nothing at all (it reads 0 rows
#: as no room for the line)
FALLBACK_SIZE = (80, 24)


def line_size(stream: Any) -> tuple[int | None, int | None]:
    """tqdm's ``(ncols, nrows)`` for the terminal `stream` writes to, as its ``dynamic_ncols`` reads
    them (one less than the terminal's columns and rows), with `FALLBACK_SIZE` for a size the
    terminal reports as 0 (or 1); (None, None), no limit, when `stream` is no terminal (its ``isatty()``
    is false or missing: a file, a pipe, or a notebook's stream, whose ``fileno()`` may be the Jupyter server's
    own terminal, the width of which is not the notebook's)."""
    try:
        if not stream.isatty():
            return None, None
        cols, rows = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None, None
    return (cols if cols > 1 else FALLBACK_SIZE[0]) - 1, (rows if rows > 1 else FALLBACK_SIZE[1]) - 1


def wanted(choice: bool | None, solver: object) -> bool:
    """Whether to show progress: `choice` (from --progress / --no-progress) when given, else when
    stderr is a terminal and `solver` is an exact one (fast solvers answer within a second)."""
    if choice is not None:
        return choice
    return bool(getattr(solver, "exact_layer", False)) and sys.stderr.isatty()


def line_limit(solver: object, time_limit: float | None, options: dict[str, Any]) -> float | None:
    """The time limit the line counts to (s): `time_limit` when given, else a ``time_limit``
    option, else the solver's default (`default_time_limit` of an exact solver); None: unknown.
    Only the line's scale: the solver validates its options itself."""
    limit = time_limit if time_limit is not None else options.get("time_limit",
                                                                  getattr(solver, "default_time_limit", None))
    return float(limit) if isinstance(limit, (int, float)) else None


def describe(p: Progress) -> str:
    """One line: stage, best, bound, gap (the known ones)."""
    parts = [p.stage] if p.stage else []
    if p.best is not None:
        parts.append(f"best {p.best:.6g}")
    if p.bound is not None:
        parts.append(f"bound {p.bound:.6g}")
    if p.gap is not None:
        parts.append(f"gap {100 * p.gap:.2f}%")
    return " | ".join(parts)


@contextmanager
def progress_line(enabled: bool, *, label: str, limit: float | None) -> Iterator[None]:
    """Within the block, draw the progress of the solves it runs (when `enabled`); `limit` is the
    time limit in seconds (None: unknown, the line then shows the elapsed time only)."""
    if not enabled:
        yield
        return
    from tqdm import tqdm

    class StateLine(tqdm):
        """A bar whose format has a field ``{state}``: the solve's state as `describe` writes it (tqdm's own
        ``{postfix}`` would start it with ", ")."""

        state = ""

        @property
        def format_dict(self) -> dict[str, Any]:
            return {**super().format_dict, "state": self.state}

    fmt = "{desc}: {n:.0f}/{total:.0f} s {bar:12} {state}" if limit else "{desc}: {n:.0f} s {state}"
    # the size is read at each redraw (a resized terminal), as tqdm's dynamic_ncols does, but never 0
    cols, rows = line_size(sys.stderr)
    bar = StateLine(total=limit, desc=label, file=sys.stderr, leave=False, bar_format=fmt, ncols=cols, nrows=rows)
    latest = [Progress()]
    stop = threading.Event()
    start = time.monotonic()

    def redraw() -> None:
        elapsed = time.monotonic() - start
        bar.n = min(elapsed, limit) if limit else elapsed
        bar.ncols, bar.nrows = line_size(sys.stderr)
        bar.state = describe(latest[0])
        bar.refresh()

    def tick() -> None:
        while not stop.wait(TICK_S):
            redraw()

    ticker = threading.Thread(target=tick, name="memsched-progress", daemon=True)
    with watching(lambda p: latest.__setitem__(0, p)):
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
            redraw()  # the last state, also when the solve took less than a tick
            bar.close()
