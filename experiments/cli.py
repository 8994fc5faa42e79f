"""The `memsched` command line (docs/cli.md): one subcommand per module in experiments/commands.

Imports on demand: ``memsched COMMAND ...`` imports only that command's module (and what it
needs: a chain solve never loads pandas, networkx or the exact models); the other commands
are listed from `COMMANDS` alone, so ``memsched --help`` imports no command at all.

Exit codes: 0 success (a schedule was found), 1 infeasible, 2 bad input or usage (one line on
stderr, never a traceback), 3 an internal error (a bug; MEMSCHED_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from memsched import __version__

#: Every subcommand with its one-line help (the help its module registers; tests check they agree).
COMMANDS: dict[str, str] = {
    "solvers": "list the solvers available per problem",
    "solve": "find a schedule for an instance under a memory budget",
    "simulate": "replay a schedule and report its makespan and memory",
    "profile": "profile a zoo network into a chain file (memsched.chain/1)",
    "run": "execute a schedule for real: measured vs predicted memory and time",
    "partition": "partition a chain into pipeline stages under a per-device memory limit",
    "sweep": "run an experiment grid (instances x budgets x solvers) into results/",
    "figures": "regenerate figures from the sweep tables under results/",
    "plot": "draw a schedule: memory over time and the operations (PNG, PDF, SVG)",
    "hrevolve": "H-Revolve: checkpointing on a storage hierarchy (abstract model)",
    "export-graph": "trace a zoo network into a training graph (node-link JSON)",
    "max-batch": "largest batch (or image side) that trains within a memory",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for bad input: "memsched CMD: error: ..."
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The parser. Every command module is imported and registered, except with `lazy`: then
    only `command`'s (None: none) and the others are one-line entries of `COMMANDS`."""
    parser = _Parser(prog="memsched", description="Memory-aware schedules for training deep networks.")
    parser.add_argument("--version", action="version", version=f"memsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, summary in COMMANDS.items():
        if lazy and name != command:
            sub.add_parser(name, help=summary)
            continue
        try:
            module = importlib.import_module(f"memsched.experiments.commands.{name.replace('-', '_')}")
        except ModuleNotFoundError as err:
            if err.name in (f"memsched.experiments.commands.{name.replace('-', '_')}", "torch"):
                if lazy:  # the asked command cannot run here: say so in one line
                    sub.add_parser(name, help=summary).set_defaults(func=_missing(name, err.name))
                continue  # not part of this installation
            raise
        module.register(sub)
    return parser


def _missing(name: str, what: str | None):
    def func(args: argparse.Namespace) -> int:
        from memsched.solvers.errors import InputError

        raise InputError(f"'{name}' is not available in this installation (needs {what}; see README)")
    return func


def _command(argv: list[str]) -> str | None:
    """The subcommand named in `argv` (its first argument that is not an option), if any."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    """The ``memsched`` command: parse `argv`, run the subcommand; exit 0 ok, 1 infeasible, 2 bad input,
    3 bug, 130 interrupted."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv), lazy=True)
    args = parser.parse_args(argv)
    from memsched.solvers.errors import InputError  # after parsing: --help and usage errors skip it

    if not getattr(args, "func", None):  # a usage error: one line on stderr
        print(f"memsched: error: a command is required (one of {', '.join(COMMANDS)}; memsched --help)",
              file=sys.stderr)
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
