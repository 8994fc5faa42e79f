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
# (contextlib, importlib, typing) or that cost nothing (os, signal, sys) are imported here; argparse and
# threading are imported by `main`, inside its handling of interrupts.
import contextlib
import functools
import importlib
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from memsched import __version__

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator

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


#: the signals that act as a Ctrl-C while a command runs (`terminate_as_interrupt`)
TERMINATE_SIGNALS: tuple[str, ...] = ("SIGTERM", "SIGHUP")
#: attribute (True) of a handler that raises `KeyboardInterrupt` for SIGTERM/SIGHUP: the exact
#: backends stop on those signals as on SIGINT (the same name as `memsched.solvers.exact.interrupt.AS_INTERRUPT`,
#: spelled out here so that ``memsched --help`` imports no solver module)
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
    import threading

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
    import threading

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


def main(argv: list[str] | None = None) -> int:
    """The ``memsched`` command: parse `argv`, run the subcommand; exit 0 ok, 1 infeasible, 2 bad input,
    3 bug, 130 interrupted (Ctrl-C, SIGTERM or SIGHUP, at any moment: one line, never a traceback)."""
    command = None
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        command = _command(argv)
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
    try:
        with _warnings_as_lines(args.command, UnknownFieldWarning):
            code = int(args.func(args) or 0)
    except BrokenPipeError:
        return 0
    except Exception as err:
        if interrupted():  # a Ctrl-C that an import wrapped (ImportError, RuntimeError): report it as one
            raise KeyboardInterrupt from err
        if isinstance(err, InputError):
            print(f"memsched {args.command}: error: {err}", file=sys.stderr)
            return 2
        if os.environ.get("MEMSCHED_DEBUG"):  # a bug, not bad input: one line unless asked for the traceback
            raise
        print(f"memsched {args.command}: internal error: {type(err).__name__}: {err} "
              "(set MEMSCHED_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3
    if interrupted() and code != 130:  # swallowed on the way (an import's C++ code): it still stops the command
        raise KeyboardInterrupt
    return code  # 130: the command answered the interrupt itself (its answer and its line are printed)


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
