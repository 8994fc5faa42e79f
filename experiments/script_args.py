"""The argument parser of every standalone script (``python -m memsched.experiments.NAME``: the benchmarks,
the figure scripts, main_job, paper_instances, make_examples, vs_torch_duel).

A usage error (an unknown option, a value its ``type`` or ``choices`` refuses, a missing argument, or a
check the script makes itself through ``parser.error``) is one line on stderr, ``PROG: error: MESSAGE``, and
exit status 2, before any work: the project's rule for bad input, as for the ``memsched`` commands
(experiments/cli.py), not argparse's usage block followed by the error line. ``--help`` is argparse's own.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class ScriptParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose `error` prints one line (``PROG: error: MESSAGE``, the message's
    line breaks turned into spaces) and exits 2; everything else, ``--help`` included, is argparse's.
    Subparsers made by `add_subparsers` are of this class too (argparse's default: the parser's type)."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE`` on one line and exit 2 (argparse's own prints its usage block first)."""
        self.exit(2, f"{self.prog}: error: {' '.join(message.splitlines())}\n")
