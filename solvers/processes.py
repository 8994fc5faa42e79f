"""Starting worker processes: with ``spawn`` from any caller (shared by the sweep pool and the
pipeline runner), and forking without losing a Ctrl-C (the exact layer's seeds, the MILP
portfolio's children, the CBC program).

A signal whose Python handler raises (SIGINT's `KeyboardInterrupt`, and SIGTERM or SIGHUP where
the command line makes them interrupts) must not run while ``os.fork()`` runs its at-fork hooks:
raised inside a hook (logging's ``_releaseLock`` in the parent, ``random``'s reseeding in the
child), it is printed as "Exception ignored in: ..." and dropped, so the Ctrl-C of a run was lost
1 time in 6 when it came during a fork (the run went on and exited 0). Around the fork,
`signals_held_during_fork` blocks them in this thread and swaps their handlers for one that only
records them (a signal may still arrive through another thread, whose handler runs in this one);
after it, the handlers are back and what arrived is raised again, in ordinary code. The child
starts with them blocked and recording, and calls `release_held_signals` first thing, with its
own handling.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: a signal handler as `signal.signal` takes and returns it (None: one not set from Python)
Handler = Callable[[int, types.FrameType | None], Any] | int | signal.Handlers | None


@contextlib.contextmanager
def callers_main_hidden() -> Iterator[None]:
    """While processes are started inside this block, ``__main__`` is an empty module.

    Spawn runs the caller's main script again in each child (as ``__mp_main__``), so a script
    that starts a sweep or a pipeline run outside an ``if __name__ == "__main__":`` block would
    start one again in every child, which fails there (each sweep cell then ended as an ``error``
    row). Use it only where the children need nothing of ``__main__``: their target and arguments
    must be importable from memsched."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


@dataclass
class _Held:
    """The signals of the current `signals_held_during_fork` block: their handlers before it, this
    thread's signal mask before it (None: not blocked), and (pid, signal) for each one that arrived
    (the child inherits the record and keeps its own entries)."""

    previous: dict[int, Handler]
    mask: set[int | signal.Signals] | None = None
    arrived: list[tuple[int, int]] = field(default_factory=list)
    record: Handler = None  # the recording handler set for the block

    def arrived_here(self) -> list[int]:
        """The signals that arrived in this process, each once, in order."""
        pid = os.getpid()
        return list(dict.fromkeys(sig for at, sig in self.arrived if at == pid))


#: the block in progress in this process (a child forked inside it inherits it); None outside one
_HELD: _Held | None = None


def stop_signals() -> list[int]:
    """The signals that stop a run as Ctrl-C does: SIGINT, SIGTERM and SIGHUP (where the system has
    it), less those whose handler is now ``SIG_IGN``: a signal the caller set to be ignored (a
    background job's SIGINT, ``nohup``'s SIGHUP) stays ignored, as `experiments.cli.terminate_as_interrupt`
    keeps it (and a child process inherits that)."""
    wanted = [getattr(signal, name, None) for name in ("SIGINT", "SIGTERM", "SIGHUP")]
    return [sig for sig in wanted if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN]


@contextlib.contextmanager
def signals_held_during_fork(signals: Iterable[int] = (signal.SIGINT,)) -> Iterator[None]:
    """Hold `signals` while the block forks (module docstring); a child forked here must call
    `release_held_signals` before anything else. At the end the handlers and the mask are restored
    and each signal that arrived meanwhile is raised again in this process (its handler runs: a
    `KeyboardInterrupt` for SIGINT), even when the block raised. A plain block outside the main
    thread (where no handler can be set) and inside another such block."""
    global _HELD
    if threading.current_thread() is not threading.main_thread() or _HELD is not None:
        yield
        return
    held = _Held({})

    def record(signum: int, frame: types.FrameType | None) -> None:
        held.arrived.append((os.getpid(), signum))

    held.record = record

    try:
        for sig in dict.fromkeys(signals):
            held.previous[sig] = signal.signal(sig, record)
        if hasattr(signal, "pthread_sigmask"):
            held.mask = signal.pthread_sigmask(signal.SIG_BLOCK, held.previous)
        _HELD = held
        yield
    finally:
        _HELD = None
        _restore(held.previous, held.mask)  # a signal still pending here reaches its own handler now
        for sig in held.arrived_here():
            signal.raise_signal(sig)


def release_held_signals(overrides: Mapping[int, Handler] | None = None) -> None:
    """In a child forked inside `signals_held_during_fork`: set each held signal's handler (the one
    in `overrides`, else the parent's from before the block, unless an at-fork hook of this child
    already set another: the command line's puts the default SIGTERM back in a solver child, which
    its parent stops with SIGTERM), unblock them, and raise again those that arrived in this child
    and have no override (an override such as ``SIG_IGN`` drops them). In any other process only
    `overrides` are set."""
    global _HELD
    held, _HELD = _HELD, None
    handlers = {} if held is None else {
        sig: handler if signal.getsignal(sig) is held.record else signal.getsignal(sig)
        for sig, handler in held.previous.items()}
    handlers.update(overrides or {})
    _restore(handlers, None if held is None else held.mask)
    if held is not None:
        for sig in held.arrived_here():
            if sig not in (overrides or {}):
                signal.raise_signal(sig)


def _restore(handlers: Mapping[int, Handler], mask: set[int | signal.Signals] | None) -> None:
    """Set `handlers` (None: ``SIG_DFL``), then this thread's signal `mask` (None: kept). A handler
    that runs and raises as it is set (a signal pending since the block) does not leave the others
    or the mask unrestored: its exception is raised at the end."""
    failure: BaseException | None = None
    for sig, handler in handlers.items():
        try:
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, once all is restored
            failure = failure or exc
    if mask is not None:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except BaseException as exc:  # noqa: BLE001 - as above
            failure = failure or exc
    if failure is not None:
        raise failure


__all__ = ["Handler", "callers_main_hidden", "release_held_signals", "signals_held_during_fork"]
