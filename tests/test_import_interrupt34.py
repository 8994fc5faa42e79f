"""A Ctrl-C while a command imports torch (hunt 34): exit 130 with one line, never exit 0 or an abort.

A `KeyboardInterrupt` raised in the Python code that torch's C++ initialisation runs (``from torch._C
import *``) was swallowed there (the command ran to the end, exit 0), aborted the process through
pybind11 (exit 134, ``terminate called after throwing ... error_already_set``) or left Python to kill
itself with SIGINT at exit. Now:

- `cli.interrupts_deferred` notes an interrupt that comes inside it and raises it when it ends, in
  Python code; `profile._import_models` (profile, run, max-batch, export-graph) imports torch inside it;
- `cli._run` answers an interrupt that a command swallowed and returned from as an interrupt (exit 130,
  one line), unless the command answered it itself (exit 130, its own line).

Signals are raised by the test itself at the step it chooses (``signal.raise_signal`` runs the handler
before it returns), so that each test hits its window every time; SIGINT's handler is set for each test
(`sigint_raises`), since pytest may run with SIGINT ignored (a background job).
"""

from __future__ import annotations

import argparse
import ast
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from conftest import run_cli


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT at Python's default handler (`KeyboardInterrupt`) for the test, whatever pytest inherited."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


# ------------------------------------------------------------------------------ interrupts_deferred
def test_sigint_inside_the_deferred_block_is_raised_when_it_ends(sigint_raises):
    from memsched.experiments.cli import interrupts_deferred, terminate_as_interrupt

    done: list[str] = []
    with terminate_as_interrupt() as noted:
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                signal.raise_signal(signal.SIGINT)  # its handler runs before this returns
                done.append("after the signal")
            done.append("after the block")  # never: the block raised
        assert noted()
        assert done == ["after the signal"]
        with interrupts_deferred():  # nothing pending any more: a later block raises nothing
            done.append("second block")
    assert done == ["after the signal", "second block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_is_deferred_too_and_nested_blocks_raise_once_at_the_outermost(sigint_raises):
    from memsched.experiments.cli import interrupts_deferred, terminate_as_interrupt

    done: list[str] = []
    with terminate_as_interrupt() as noted:
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                with interrupts_deferred():
                    signal.raise_signal(signal.SIGTERM)
                    done.append("inner")
                done.append("outer")
        assert noted()
    assert done == ["inner", "outer"]


def test_without_the_cli_handlers_sigint_is_held_and_raised_after(sigint_raises):
    from memsched.experiments.cli import interrupts_deferred

    done: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("after the signal")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with interrupts_deferred():  # no signal: nothing raised
        done.append("quiet")
    assert done == ["after the signal", "quiet"]


def test_an_error_leaving_the_block_after_an_interrupt_is_the_interrupt(sigint_raises):
    from memsched.experiments.cli import interrupts_deferred, terminate_as_interrupt

    with terminate_as_interrupt():
        with pytest.raises(KeyboardInterrupt) as caught:
            with interrupts_deferred():
                signal.raise_signal(signal.SIGINT)
                raise ImportError("a native module's import broken by the interrupt")
    assert isinstance(caught.value.__context__, ImportError)


def test_an_ignored_sigint_stays_ignored():
    from memsched.experiments.cli import interrupts_deferred

    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_deferred():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)  # ignored: nothing noted, nothing raised
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


# ------------------------------------------------------------------------------ the torch import
#: a process whose ``import torch`` is a stand-in raising SIGINT in the middle of its initialisation (as
#: torch's C++ code runs Python code), then importing `_import_models`; prints what happened, in order
_FAKE_TORCH = textwrap.dedent("""
    import contextlib, importlib.abc, importlib.machinery, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the test process inherited
    events = []

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                events.append("interrupted inside the import")
                raise
            events.append("import finished")

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            return importlib.machinery.ModuleSpec(name, Loader()) if name == "torch" else None

    sys.modules.pop("torch", None)
    sys.meta_path.insert(0, Finder())
    from memsched.experiments.cli import terminate_as_interrupt
    from memsched.experiments.commands.profile import _import_models

    with terminate_as_interrupt() if sys.argv[1] == "cli" else contextlib.nullcontext():
        try:
            _import_models()
            events.append("no interrupt")
        except KeyboardInterrupt:
            events.append("KeyboardInterrupt after the import")
    print(events)
""")


@pytest.mark.parametrize("handlers", ["cli", "python"])
def test_import_models_finishes_the_torch_import_then_raises_the_interrupt(handlers, tmp_path):
    """`handlers`: inside the command line's `terminate_as_interrupt`, or Python's own SIGINT handler."""
    proc = subprocess.run([sys.executable, "-c", _FAKE_TORCH, handlers], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert ast.literal_eval(proc.stdout.strip().splitlines()[-1]) == [
        "import finished", "KeyboardInterrupt after the import"]


# ------------------------------------------------------------------------------ a swallowed interrupt
def _parser_with(func) -> argparse.ArgumentParser:
    """A parser whose ``solvers`` command runs `func` (stands in for `cli.build_parser`)."""
    parser = argparse.ArgumentParser(prog="memsched")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("solvers").set_defaults(func=func)
    return parser


def test_a_command_that_swallowed_an_interrupt_exits_130_with_one_line(sigint_raises, monkeypatch):
    from memsched.experiments import cli

    ran: list[str] = []

    def swallows(args: argparse.Namespace) -> int:  # as torch's C++ initialisation did with a Ctrl-C
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        ran.append("to the end")
        return 0

    monkeypatch.setattr(cli, "build_parser", lambda command=None, lazy=False: _parser_with(swallows))
    code, out, err = run_cli("solvers")
    assert (code, out, err.splitlines()) == (130, "", ["memsched solvers: interrupted"])
    assert ran == ["to the end"]


def test_a_command_that_answered_its_interrupt_keeps_its_own_line(sigint_raises, monkeypatch):
    from memsched.experiments import cli

    def answers(args: argparse.Namespace) -> int:  # as `memsched solve` does: its answer, its line, 130
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            print("memsched solvers: interrupted; the answer above is what it had", file=sys.stderr)
        return 130

    monkeypatch.setattr(cli, "build_parser", lambda command=None, lazy=False: _parser_with(answers))
    code, out, err = run_cli("solvers")
    assert (code, err.splitlines()) == (130, ["memsched solvers: interrupted; the answer above is what it had"])


def test_a_command_without_an_interrupt_keeps_its_status(sigint_raises, monkeypatch):
    from memsched.experiments import cli

    monkeypatch.setattr(cli, "build_parser", lambda command=None, lazy=False: _parser_with(lambda args: 1))
    assert tuple(run_cli("solvers")) == (1, "", "")
