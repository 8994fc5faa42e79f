"""Ctrl-C during an exact solve: the backend stops at once, and the caller learns of it.

Left to themselves the backends disagree. A backend solving in C++ holds the main thread, so
Python's SIGINT handler only runs once it returns; SCIP and CP-SAT catch SIGINT themselves and
return as if their time limit had come (SCIP also prints "pressed CTRL-C" on stdout, into a
``--json`` answer), so the caller never learns of the interrupt and keeps a weak ``feasible``
as if it were the limit's; HiGHS ignores SIGINT until its own time limit. Here they behave
alike:

- `stop_on_interrupt(stop)` wraps a backend's solve (the runners turn the backends' own SIGINT
  catching off): a watcher thread reads the signal wakeup fd (`signal.set_wakeup_fd`, written by
  the interpreter's C-level handler even while the main thread is inside the backend) and calls
  `stop` (SCIP's ``InterruptSolve``, CP-SAT's ``stop_search``, HiGHS's ``cancelSolve``, a
  SIGINT passed on to the CBC program); the backend returns its incumbent and bound as at a
  time limit.
- Then, inside `answer_on_interrupt()` (the command line's and `memsched.solve`'s single solves)
  the run is returned as the backend left it and `interrupted()` says so: the exact layer keeps
  the best schedule, marks the result (``details["interrupted"]``) and the command exits 130
  after printing it. Anywhere else (a script, a notebook loop) `KeyboardInterrupt` is raised
  once the backend has stopped, as for any Ctrl-C.

SIGTERM and SIGHUP count as a Ctrl-C where their handler says so (an attribute `AS_INTERRUPT`
on it: the ``memsched`` command's `solvers.processes.terminate_as_interrupt`): `stop_on_interrupt`
then stops the backend on them too, so that ``kill`` or ``timeout`` gets the answer and leaves no
solver process running.

Signals reach the main thread only: called from another thread, `stop_on_interrupt` does
nothing (the backend keeps its own behaviour).

A process that is killed outright (SIGKILL) cannot stop anything: its solver processes (the
portfolio's children, the CBC program) call `die_with_parent` (Linux ``PR_SET_PDEATHSIG``), so
that they are killed with it instead of running on, orphaned, to their time limit.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


class _Answering:
    """The state of one `answer_on_interrupt` block: whether a backend was interrupted in it."""

    def __init__(self) -> None:
        self.interrupted = False


_ANSWERING: ContextVar[_Answering | None] = ContextVar("memsched_answer_on_interrupt", default=None)


@contextmanager
def answer_on_interrupt() -> Iterator[None]:
    """Within the block, an interrupted backend returns what it has instead of raising
    `KeyboardInterrupt` (the exact layer then answers with the best schedule known)."""
    token = _ANSWERING.set(_Answering())
    try:
        yield
    finally:
        _ANSWERING.reset(token)


def answering() -> bool:
    """True inside `answer_on_interrupt`."""
    return _ANSWERING.get() is not None


def interrupted() -> bool:
    """True when a backend was interrupted inside the current `answer_on_interrupt` block."""
    state = _ANSWERING.get()
    return state is not None and state.interrupted


def note_interrupt() -> None:
    """Record an interrupt in the current `answer_on_interrupt` block (no-op outside one)."""
    state = _ANSWERING.get()
    if state is not None:
        state.interrupted = True


def in_charge() -> bool:
    """True where `stop_on_interrupt` acts (the main thread): there a runner turns its backend's
    own SIGINT catching off; elsewhere the backend keeps it."""
    return threading.current_thread() is threading.main_thread()


#: attribute (True) of a SIGTERM or SIGHUP handler that raises `KeyboardInterrupt` as Ctrl-C does
#: (`memsched.solvers.processes.AS_INTERRUPT`): `stop_on_interrupt` treats those signals as SIGINT
AS_INTERRUPT = "memsched_as_interrupt"


def interrupt_signals() -> list[int]:
    """The signals that count as a Ctrl-C now: SIGINT, and SIGTERM and SIGHUP when their handler
    carries `AS_INTERRUPT`."""
    found = [int(signal.SIGINT)]
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and getattr(signal.getsignal(sig), AS_INTERRUPT, False):
            found.append(int(sig))
    return found


#: seconds between the calls of `stop` after an interrupt (``stop_on_interrupt(repeat=True)``)
STOP_REPEAT_S = 0.5


@contextmanager
def stop_on_interrupt(stop: Callable[[], Any], *, repeat: bool = False) -> Iterator[None]:
    """Call `stop` (from a watcher thread) when SIGINT (or another of `interrupt_signals`) arrives during
    the block; after the block,
    raise `KeyboardInterrupt`, or, inside `answer_on_interrupt`, record the interrupt and return
    normally. With `repeat`, `stop` is called again every `STOP_REPEAT_S` seconds until the block
    ends: a backend forgets a stop asked before its search starts (SCIP resets its interrupt flag
    when `SCIPsolve` begins, after pywraplp has copied the model, and CP-SAT forgets an early
    `stop_search`: one stop asked in that window was lost). A no-op outside the main thread."""
    if not in_charge():
        yield
        return
    watched = interrupt_signals()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    hit = threading.Event()
    done = threading.Event()

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if done.is_set() or not data:
                return
            if any(sig in data for sig in watched):  # the wakeup fd carries one byte per signal: its number
                hit.set()
                while not done.is_set():
                    try:
                        stop()
                    except Exception:  # noqa: BLE001 - a backend that cannot be stopped runs to its limit
                        pass
                    if not repeat:
                        break
                    done.wait(STOP_REPEAT_S)

    old_handlers = {sig: signal.signal(sig, lambda signum, frame: hit.set()) for sig in watched}
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="memsched-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        try:
            os.write(write_fd, b"\0")  # wake the watcher so that it ends
        except OSError:
            pass
        watcher.join(timeout=5.0)
        signal.set_wakeup_fd(old_fd)
        for sig, handler in old_handlers.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        os.close(read_fd)
        os.close(write_fd)
    if hit.is_set():
        if not answering():
            raise KeyboardInterrupt
        note_interrupt()


#: prctl(2) option: the signal this process gets when the thread that started it ends
_PR_SET_PDEATHSIG = 1


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def parent_death_hook() -> Callable[[], None] | None:
    """A `subprocess.Popen` ``preexec_fn`` that makes the program started die (SIGKILL) with the
    process (thread) that starts it; None where the system offers none. ``prctl`` is looked up here,
    in the parent: the child between fork and exec only makes the call."""
    prctl = _prctl()
    if prctl is None:
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    return hook


def die_with_parent(parent: int | None = None) -> None:
    """In a child process: be killed (SIGKILL) when the parent (the thread that started this
    process) ends, even by SIGKILL, on Linux; `parent` (its pid), when given, is checked after,
    against a parent that died first (then this process exits at once). A no-op elsewhere."""
    hook = parent_death_hook()
    if hook is None:
        return
    try:
        hook()
    except OSError:
        return
    if parent is not None and os.getppid() != parent:
        os._exit(1)


__all__ = ["AS_INTERRUPT", "answer_on_interrupt", "answering", "in_charge", "interrupt_signals", "interrupted",
           "note_interrupt", "stop_on_interrupt", "die_with_parent", "parent_death_hook"]
