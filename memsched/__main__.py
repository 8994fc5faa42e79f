"""The ``memsched`` console script's entry point, also run by ``python -m memsched``.

The command line itself is `memsched.experiments.cli.main`; importing that module (and the
``memsched.experiments`` package) takes tens of milliseconds before `main` can handle a Ctrl-C, so a
Ctrl-C then was a ``KeyboardInterrupt`` traceback. Before the command this module imports nothing but
`sys` (loaded by Python's start-up already) and turns an interrupt during that import into the CLI's
own answer: one line, ``memsched: interrupted`` (no command has started yet), and exit status 130.
After the command returns, a signal during the interpreter's teardown ends the process with the
command's status (`_finish_on_signal`).

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
    _finish_on_signal(status)
    return status


def _finish_on_signal(status: int) -> None:
    """After the command returned `status`: its output is flushed, and a Ctrl-C, SIGTERM or SIGHUP from
    here on ends the process at once with that status. The interpreter's teardown that follows (torch's
    finalizers and atexit hooks take about a second) runs no handler of the command's, so a signal there
    was a ``KeyboardInterrupt`` traceback or a bare kill after the result was printed. A signal the
    caller set to be ignored stays ignored."""
    import os
    import signal

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, KeyboardInterrupt):  # a closed pipe or stream: nothing more to say
            pass

    def finish(signum: int, frame: object) -> None:
        os._exit(status)  # the work is done and said: skip the rest of the teardown

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, finish)


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
