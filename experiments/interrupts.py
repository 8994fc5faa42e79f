"""A Ctrl-C before a script's own handling of interrupts is in place: one line and exit 130, not a traceback.

A script's `main` (``python -m memsched.experiments.<script>``) hands its whole body to `script_main`: the body
imports the modules it needs (torch, pandas, matplotlib: a second or more), reads its arguments and then runs its
work under its own handling (`benchtable.guarded`, which says what was kept). A Ctrl-C that comes before that
handling took over (while torch is imported, say) leaves the body as `KeyboardInterrupt` and is answered here with
``NAME: interrupted`` on stderr and `INTERRUPTED`.

For this to cover the imports, the script's top imports only what Python's start-up and the ``memsched`` package
have loaded, or small modules such as this one (sys alone); the rest is imported inside the body. What comes before
the script's module runs (Python's start-up, the import of ``memsched``) is not covered.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

#: exit status on Ctrl-C (128 + SIGINT), as the ``memsched`` commands return it
INTERRUPTED = 130


def say_interrupted(name: str, text: str = "interrupted") -> int:
    """Print ``NAME: <text>`` on stderr and return `INTERRUPTED`; a second Ctrl-C while the line is written is not
    a traceback either (the line may then be cut short)."""
    try:
        print(f"{name}: {text}", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    return INTERRUPTED


def script_main(name: str, body: Callable[[], int]) -> int:
    """``body()`` (a script's `main`, its modules imported inside: module docstring), its exit status; a Ctrl-C
    that leaves it (one that came before its own handling took over: nothing ran yet) is ``NAME: interrupted``
    and `INTERRUPTED`."""
    try:
        return body()
    except KeyboardInterrupt:
        return say_interrupted(name)
