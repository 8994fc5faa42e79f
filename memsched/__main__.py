"""The ``memsched`` console script's entry point, also run by ``python -m memsched``.

The command line itself is `memsched.experiments.cli.main`; importing that module (and the
``memsched.experiments`` package) takes tens of milliseconds before `main` can handle a Ctrl-C, so a
Ctrl-C then was a ``KeyboardInterrupt`` traceback. Before the command this module imports nothing but
`sys` (loaded by Python's start-up already) and turns an interrupt during that import into the CLI's
own answer: one line, ``memsched: interrupted`` (no command has started yet), and exit status 130.
After the command returns, a signal during the interpreter's teardown is ignored: the process ends
with the command's status (`_ignore_signals_in_teardown`).

What comes before this module runs is not covered (docs/cli.md): Python's start-up (its ``site``
import, the console script's own ``import re, sys``) and the import of the ``memsched`` package.
"""

from __future__ import annotations

import sys

#: exit status of an interrupted command, as `memsched.experiments.cli.main` returns it (128 + SIGINT)
INTERRUPTED = 130


def main() -> int:
    """Run the ``memsched`` command on ``sys.argv[1:]``; its exit status (0 ok, 1 infeasible, 2 bad
    input, 3 bug, 130 interrupted). A Ctrl-C while the CLI is imported is exit 130 with one line."""
    try:
        from memsched.experiments.cli import main as cli_main

        status = cli_main()  # inside: a Ctrl-C before its `main` opens its own handling is caught here too
    except KeyboardInterrupt:
        return _interrupted()
    _ignore_signals_in_teardown()
    return status


def _ignore_signals_in_teardown() -> None:
    """After the command returned: its output is flushed, and a Ctrl-C, SIGTERM or SIGHUP from
    here on is ignored, so the process ends with the command's status once the interpreter's teardown (torch's
    finalizers and atexit hooks: about a second) is over. The teardown runs no handler of the command's,
    so a signal there was a ``KeyboardInterrupt`` traceback or a bare kill (-2, -15) after the result
    was printed. Ignored, not handled: CPython's finalization puts a Python-level handler back to the
    default action (a kill) before torch's teardown, but leaves an ignored signal ignored. (SIGKILL
    still stops a teardown that hangs.)"""
    import signal

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, KeyboardInterrupt):  # a closed pipe or stream: nothing more to say
            pass
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)


def _interrupted() -> int:
    """`INTERRUPTED`, after the line the CLI prints for an interrupt outside a command (a second Ctrl-C
    while it is written is not a traceback either)."""
    try:
        print("memsched: interrupted", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
