"""The `memsched` command line (docs/cli.md): one subcommand per module in experiments/commands.

Exit codes: 0 success (a schedule was found), 1 infeasible, 2 bad input or usage (one line on
stderr, never a traceback), 3 an internal error (a bug; MEMSCHED_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from memsched.solvers import __version__
from memsched.solvers.errors import InputError

COMMANDS = ("solvers", "solve", "simulate", "profile", "run", "partition", "sweep", "figures", "plot", "hrevolve",
            "export-graph", "max-batch")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"memsched: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memsched", description="Memory-aware schedules for training deep networks.")
    parser.add_argument("--version", action="version", version=f"memsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"memsched.experiments.commands.{name.replace('-', '_')}")
        except ModuleNotFoundError as err:
            if err.name in (f"memsched.experiments.commands.{name.replace('-', '_')}", "torch"):
                continue  # not part of this installation
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):  # a usage error: one line on stderr
        print(f"memsched: a command is required (one of {', '.join(COMMANDS)}; memsched --help)", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except InputError as err:
        print(f"memsched {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"memsched {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # a bug, not bad input: one line unless asked for the traceback
        if os.environ.get("MEMSCHED_DEBUG"):
            raise
        print(f"memsched {args.command}: internal error: {type(err).__name__}: {err} "
              "(set MEMSCHED_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
