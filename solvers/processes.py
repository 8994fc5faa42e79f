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
    background job's SIGINT, ``nohup``'s SIGHUP) stays ignored, as `terminate_as_interrupt`
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



# ------------------------------------------------------------------ SIGTERM and SIGHUP as a Ctrl-C
# The command line's handling of a stop (`experiments.cli.main`), also used by the pipeline runner of
# models/ (`models.pipeline.runner`, `models.pipeline.distributed`): kept here, below both (the layering
# experiments -> models -> solvers), and free of torch and numpy.

#: the signals that act as a Ctrl-C while a command runs (`terminate_as_interrupt`)
TERMINATE_SIGNALS: tuple[str, ...] = ("SIGTERM", "SIGHUP")
#: attribute (True) of a handler that raises `KeyboardInterrupt` for SIGTERM/SIGHUP: the exact
#: backends stop on those signals as on SIGINT (the same name as `memsched.solvers.exact.interrupt.AS_INTERRUPT`,
#: spelled out here so that this module needs none of that one's imports: ctypes, contextvars)
AS_INTERRUPT = "memsched_as_interrupt"


class _Interrupts:
    """The handlers `terminate_as_interrupt` installs: each raises `KeyboardInterrupt`, as SIGINT's
    default handler does, and notes that an interrupt came (`seen`); inside `interrupts_deferred`
    (`deferred` > 0) it only notes it (`pending`), and the block raises it when it ends."""

    def __init__(self) -> None:
        self.seen = False
        self.deferred = 0  # `interrupts_deferred` blocks open on these handlers
        self.pending = False  # an interrupt came while `deferred`: not raised yet
        self.owner = os.getpid()  # the process the handlers are for (not a child forked inside)
        self.replaced: dict[int, Any] = {}  # the handlers they replaced, by signal

    def on_signal(self, signum: int, frame: Any) -> None:
        self.seen = True
        if self.deferred:
            self.pending = True
            return
        self.pending = False  # raised now: a deferred block ending after this one raises nothing more
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """`on_signal` only notes the interrupts that come inside; the outermost block raises
        `KeyboardInterrupt` on leaving if one came (chained to the exception leaving it, if any)."""
        self.deferred += 1
        try:
            yield
        finally:
            self.deferred -= 1
            if not self.deferred and self.pending:
                self.pending = False
                raise KeyboardInterrupt


#: the `_Interrupts` of the `terminate_as_interrupt` block now open (None: none)
_OPEN: list[_Interrupts | None] = [None]

#: attribute of a `_handler`: the `_Interrupts` it calls
_NOTES = "memsched_interrupts"


def _handler(interrupts: _Interrupts, *, terminate: bool) -> Any:
    """`interrupts.on_signal` as a function; for `TERMINATE_SIGNALS` marked `AS_INTERRUPT`."""
    def handler(signum: int, frame: Any) -> None:
        interrupts.on_signal(signum, frame)

    setattr(handler, _NOTES, interrupts)
    if terminate:
        setattr(handler, AS_INTERRUPT, True)
    return handler


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[Callable[[], bool]]:
    """Inside, SIGTERM and SIGHUP raise `KeyboardInterrupt` as Ctrl-C does (as `experiments/main_job.py`
    and the sweep treat SIGTERM), so that ``kill`` or ``timeout`` stops a command through its Ctrl-C
    path: the solver processes it started are stopped (none is orphaned to run to its time limit),
    and the answer it had is printed (exit 130). Every interrupt (SIGINT too, unless it is ignored,
    as in a background job) is also noted: the callable given tells whether one came, so that a
    `KeyboardInterrupt` that an import wrapped (numpy raises `ImportError` when its C extension's
    import is interrupted) is still reported as the interrupt it was. A signal the caller set to be
    ignored stays ignored (``nohup``: SIGHUP; a background job: SIGINT). A process forked inside gets
    the previous handlers back (`_reset_in_child`: a solver child is stopped by SIGTERM, not by a
    Python exception). No-op outside the main thread; the previous handlers are restored on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    interrupts = _Interrupts()
    old = interrupts.replaced
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        old[signal.SIGINT] = signal.signal(signal.SIGINT, _handler(interrupts, terminate=False))
    for name in TERMINATE_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:  # `nohup`: SIGHUP stays ignored
            old[sig] = signal.signal(sig, _handler(interrupts, terminate=True))
    outer, _OPEN[0] = _OPEN[0], interrupts
    try:
        yield lambda: interrupts.seen
    finally:
        _OPEN[0] = outer
        for sig, handler in old.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Inside, an interrupt (Ctrl-C; SIGTERM and SIGHUP inside `terminate_as_interrupt`) is noted, not
    raised; leaving the block raises the `KeyboardInterrupt` it would have been, in Python code, also when
    an exception leaves it (chained to it). For imports of native code (``import torch``): a
    `KeyboardInterrupt` raised in the Python code that a C++ extension's initialisation runs became an
    `ImportError`, was swallowed (the command ran on to exit 0), or went through C++ that cannot pass it
    on, which aborted the process (pybind11's ``error_already_set``, exit 134). Outside
    `terminate_as_interrupt`, SIGINT's Python handler (``signal.default_int_handler`` or another) is held
    back and called on leaving if SIGINT came; an ignored or default (``SIG_DFL``) SIGINT stays as it is.
    Blocks nest; no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupts = _OPEN[0] if _OPEN[0] is not None and _OPEN[0].owner == os.getpid() else None
    with contextlib.ExitStack() as stack:
        if interrupts is not None:
            stack.enter_context(interrupts.deferring())
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and (interrupts is None or getattr(handler, _NOTES, None) is not interrupts):
            stack.enter_context(_held(signal.SIGINT))  # SIGINT is not `interrupts`'s: hold its own handler
        yield


@contextlib.contextmanager
def _held(sig: int) -> Iterator[None]:
    """Inside, `sig` is only noted; on leaving, its previous handler is back and is called if it came.
    One handler swapped each way, so that no signal finds a half-restored state."""
    came: list[int] = []

    def note(signum: int, frame: Any) -> None:
        came.append(signum)

    old = signal.signal(sig, note)
    try:
        yield
    finally:
        signal.signal(sig, old)
        if came and callable(old):
            old(sig, None)


def _reset_in_child() -> None:
    """After a fork inside `terminate_as_interrupt`: the handlers it replaced are back in the child
    (its parent stops it with SIGTERM; a `KeyboardInterrupt` there would be a traceback)."""
    interrupts = _OPEN[0]
    if interrupts is None or interrupts.owner == os.getpid():
        return
    _OPEN[0] = None
    for sig, handler in interrupts.replaced.items():
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)


__all__ = ["AS_INTERRUPT", "Handler", "TERMINATE_SIGNALS", "callers_main_hidden", "interrupts_deferred",
           "release_held_signals", "signals_held_during_fork", "terminate_as_interrupt"]
