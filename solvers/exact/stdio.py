"""Keep the backends' logs off the process's standard output.

SCIP, CBC (in process) and HiGHS print their logs with C's ``printf`` on file descriptor 1, which
would land in the middle of ``memsched solve --json``'s answer. `stdout_to_stderr` points file
descriptor 1 at standard error (descriptor 2) for the length of a backend's solve and restores it
afterwards, whatever ends the block (an exception, `KeyboardInterrupt`). CP-SAT logs through a
callback instead (`cpsat_runner.run_cpsat`).

Invariants: Python's ``sys.stdout`` and C's stdio buffers are flushed on the way in (what was
written before the block goes to the real standard output) and on the way out (what the block
wrote goes to standard error); blocks may nest and may be entered from several threads at once:
the first one in redirects, the last one out restores.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
#: [blocks inside, the saved descriptor of the real standard output (-1: none saved)]
_STATE = [0, -1]


def _flush() -> None:
    """Flush Python's ``sys.stdout`` and every C stdio stream (``fflush(NULL)``): a backend's
    ``printf`` is buffered in C when standard output is a pipe or a file."""
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):  # no stdout, or a closed one
        pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C library to ask (not POSIX)
        pass


def _enter() -> None:
    """Redirect descriptor 1 to descriptor 2 unless a block is already inside."""
    with _LOCK:
        if _STATE[0] == 0:
            _flush()
            try:
                saved = os.dup(1)
            except OSError:  # descriptor 1 is closed: nothing to protect
                saved = -1
            if saved >= 0:
                try:
                    os.dup2(2, 1)
                except OSError:
                    os.close(saved)
                    saved = -1
            _STATE[1] = saved
        _STATE[0] += 1


def _leave() -> None:
    """Restore descriptor 1 when the last block leaves."""
    with _LOCK:
        _STATE[0] -= 1
        if _STATE[0] == 0 and _STATE[1] >= 0:
            _flush()
            saved, _STATE[1] = _STATE[1], -1
            try:
                os.dup2(saved, 1)
            finally:
                os.close(saved)


def _after_fork_in_child() -> None:
    """A fresh lock in a forked child (the parent's may have been held by another thread at the
    fork); the count and saved descriptor stay, as the child's descriptor 1 is the parent's."""
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def stdout_to_stderr(active: bool = True) -> Iterator[None]:
    """Within the block, whatever is written to file descriptor 1 (C-level ``printf`` of a
    backend, and ``sys.stdout``) goes to standard error; nothing when not `active`."""
    if not active:
        yield
        return
    _enter()
    try:
        yield
    finally:
        _leave()


__all__ = ["stdout_to_stderr"]
