"""The `memsched` command line (docs/cli.md): one subcommand per module in experiments/commands.

Imports on demand: ``memsched COMMAND ...`` imports only that command's module (and what it
needs: a chain solve never loads pandas, networkx or the exact models); the other commands
are listed from `COMMANDS` alone, so ``memsched --help`` imports no command at all.

Exit codes: 0 success (a schedule was found), 1 infeasible, 2 bad input or usage (one line on
stderr, never a traceback), 3 an internal error (a bug; MEMSCHED_DEBUG=1 shows the traceback),
130 interrupted: by Ctrl-C, and by SIGTERM or SIGHUP, which act as a Ctrl-C while a command runs
(`terminate_as_interrupt`), so that every command stops its solver processes and keeps what it
can print whichever way it is stopped.
"""

from __future__ import annotations

# Light on purpose: the console script's entry point (`memsched.__main__`) turns a Ctrl-C during this import
# into the one-line interrupt, but `python -m memsched.experiments.cli` imports it with no such handling, and
# start-up time counts for every command. Only modules that ``import memsched`` has loaded already
# (contextlib, importlib, typing) or that cost nothing (os, sys) are imported here; argparse, threading and the
# signal handling (`solvers.processes`) are imported by `main`, inside its handling of interrupts.
import contextlib
import functools
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO, cast

from memsched import __version__

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable, Iterator

    # re-exported: at run time taken from there on first use (`__getattr__`)
    from memsched.solvers.processes import (  # noqa: F401
        AS_INTERRUPT,
        TERMINATE_SIGNALS,
        interrupts_deferred,
        terminate_as_interrupt,
    )

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
    "export-graph": "trace a zoo network or a factory (FILE.py:FUNCTION) into a training graph (node-link JSON)",
    "max-batch": "largest batch (or image side) that trains within a memory",
}


@functools.lru_cache(maxsize=1)
def _parser_class() -> type[argparse.ArgumentParser]:
    """The parser class of `build_parser`: the standalone scripts' `script_args.ScriptParser` (a usage error is one
    line and exit 2, as for bad input: "memsched CMD: error: ..."); imported on first use: see the imports above."""
    from memsched.experiments.script_args import ScriptParser

    return ScriptParser


def build_parser(command: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The parser. Every command module is imported and registered, except with `lazy`: then
    only `command`'s (None: none) and the others are one-line entries of `COMMANDS`."""
    parser_class = _parser_class()
    parser = parser_class(prog="memsched", description="Memory-aware schedules for training deep networks.")
    parser.add_argument("--version", action="version", version=f"memsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=parser_class)
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


def __getattr__(name: str) -> Any:
    """`terminate_as_interrupt` and `interrupts_deferred`, which live in `solvers.processes` (below models/,
    whose pipeline runner uses them too), imported on first use (PEP 562): this module stays light (no
    `memsched.solvers`, no threading on import), and ``from memsched.experiments.cli import terminate_as_interrupt``
    keeps working."""
    if name in _SIGNAL_HANDLING:
        from memsched.solvers import processes

        return getattr(processes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the names `__getattr__` takes from `solvers.processes`
_SIGNAL_HANDLING = ("terminate_as_interrupt", "interrupts_deferred", "TERMINATE_SIGNALS", "AS_INTERRUPT")


def main(argv: list[str] | None = None) -> int:
    """The ``memsched`` command: parse `argv`, run the subcommand; exit 0 ok, 1 infeasible, 2 bad input,
    3 bug, 130 interrupted (Ctrl-C, SIGTERM or SIGHUP, at any moment: one line, never a traceback)."""
    command = None
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        command = _command(argv)
        from memsched.solvers.processes import terminate_as_interrupt  # inside the handling: Ctrl-C is one line

        with terminate_as_interrupt() as interrupted:
            return _run(argv, command, interrupted)
    except KeyboardInterrupt:
        return _interrupted(command)


def _interrupted(command: str | None) -> int:
    """Exit status 130 and the one line saying that `command` was interrupted (a second Ctrl-C while it is
    written does not turn into a traceback)."""
    with contextlib.suppress(KeyboardInterrupt):
        print(f"memsched {command}: interrupted" if command else "memsched: interrupted", file=sys.stderr)
    return 130


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`argv` parsed by `build_parser`'s `parser`; arguments no parser knows are a usage error of the command
    that got them, one line and exit 2 (``memsched solve: error: unrecognized arguments: --bogus``;
    ``memsched: error: ...`` without a command), as a missing or malformed option is."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        owner = _command_parsers(parser).get(getattr(args, "command", None) or "", parser)
        owner.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers of `build_parser`'s `parser`, by name (the choices of its subparsers action)."""
    import argparse

    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return {} if sub is None else dict(sub.choices)


def _run(argv: list[str], command: str | None, interrupted: Callable[[], bool]) -> int:
    """`main` inside `terminate_as_interrupt`; a `KeyboardInterrupt` goes up to `main`, as does an
    error that came with an interrupt (`interrupted`: an import it broke, that of the command's
    module included, numpy's C extension raising `ImportError` when a Ctrl-C stops it), and an interrupt
    that the command returned from without answering it (swallowed on the way: not exit 130)."""
    try:
        parser = build_parser(command, lazy=True)  # imports the command's module (numpy, ortools, ...)
        args = _parse(parser, argv)
        from memsched.solvers.errors import InputError  # after parsing: --help and usage errors skip it
        from memsched.solvers.jsonio import UnknownFieldWarning
    except Exception as err:
        if interrupted():
            raise KeyboardInterrupt from err
        raise

    if not getattr(args, "func", None):  # a usage error: one line on stderr
        print(f"memsched: error: a command is required (one of {', '.join(COMMANDS)}; memsched --help)",
              file=sys.stderr)
        return 2
    out = _Stdout(sys.stdout)
    try:
        with _warnings_as_lines(args.command, UnknownFieldWarning), out.installed():
            code = int(args.func(args) or 0)
            _flush_stdout()  # what is still buffered: a disk full after the command is its error, not the teardown's
    except BrokenPipeError:
        return 0
    except Exception as err:
        if interrupted():  # a Ctrl-C that an import wrapped (ImportError, RuntimeError): report it as one
            raise KeyboardInterrupt from err
        if isinstance(err, InputError):
            print(f"memsched {args.command}: error: {err}", file=sys.stderr)
            return 2
        if isinstance(err, OSError) and err is out.failed:  # as an output file that cannot be written: exit 2
            _drop_stdout()
            print(f"memsched {args.command}: error: standard output: cannot write ({err.strerror or err})",
                  file=sys.stderr)
            return 2
        if os.environ.get("MEMSCHED_DEBUG"):  # a bug, not bad input: one line unless asked for the traceback
            raise
        print(f"memsched {args.command}: internal error: {type(err).__name__}: {err} "
              "(set MEMSCHED_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3
    if interrupted() and code != 130:  # swallowed on the way (an import's C++ code): it still stops the command
        raise KeyboardInterrupt
    return code  # 130: the command answered the interrupt itself (its answer and its line are printed)


def _flush_stdout() -> None:
    """Flush standard output; a reader that left (`BrokenPipeError`) is ignored, as the teardown ignored it
    (`memsched.__main__`): the command's exit status stands."""
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()


class _Stdout:
    """Standard output while a command runs (`installed`): writes and flushes go to `stream`, and an `OSError`
    they raise (a disk full behind ``> FILE`` or ``> /dev/full``: ENOSPC, EIO, EDQUOT, EFBIG), a
    `BrokenPipeError` aside, is kept in `failed` before it goes on, so that `_run` tells a write to standard
    output that failed (bad output, exit 2, as an output file that cannot be written) from an internal error.
    Everything else (``fileno``, ``isatty``, ``encoding``, ...) is `stream`'s."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        """`stream`'s write of `text`; the number of characters written."""
        try:
            return int(self.stream.write(text))
        except BrokenPipeError:
            raise
        except OSError as err:
            self.failed = err
            raise

    def writelines(self, lines: Iterable[str]) -> None:
        """Each of `lines` written in turn (`write`)."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """`stream`'s flush."""
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as err:
            self.failed = err
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Inside, `sys.stdout` is this object; on the way out `stream` again (unless the command put another)."""
        sys.stdout = cast("TextIO", self)
        try:
            yield
        finally:
            if sys.stdout is self:
                sys.stdout = self.stream


def _drop_stdout() -> None:
    """Point standard output's file descriptor at the null device, once a write to it failed: what is left in
    its buffer goes there at exit, and the interpreter's own flush fails no second time."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, sys.stdout.fileno())
        finally:
            os.close(null)


@contextlib.contextmanager
def _warnings_as_lines(command: str, category: type[Warning]) -> Iterator[None]:
    """Inside, each warning of `category` (an instance file's unknown key, `jsonio.UnknownFieldWarning`) is
    one line on stderr, ``memsched <command>: warning: <message>`` (no source line, no file:lineno), once per
    message however often the file is loaded; other warnings are shown as Python shows them."""
    import warnings

    shown: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("always", category)  # every load reaches `show`, which says each message once
        default = warnings.showwarning

        def show(message: Warning | str, cls: type[Warning], *rest: Any, **kwargs: Any) -> None:
            if not issubclass(cls, category):
                default(message, cls, *rest, **kwargs)
            elif str(message) not in shown:
                shown.add(str(message))
                print(f"memsched {command}: warning: {message}", file=sys.stderr)

        warnings.showwarning = show
        yield


if __name__ == "__main__":
    sys.exit(main())
