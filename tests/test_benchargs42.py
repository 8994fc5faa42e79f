"""Usage errors of the standalone scripts (``python -m memsched.experiments.NAME``) are one line and exit 2.

The project's rule for bad input, kept by the ``memsched`` commands (experiments/cli.py): one line on stderr,
exit 2, no traceback. The scripts used plain argparse, whose usage errors print the usage block (one to a dozen
lines) before the error line, although most of their docstrings promised one line. Every module of
memsched.experiments with a ``main(argv)`` (found by reading the sources, not listed here) is checked in-process:

1. an unknown option, and every option whose ``type`` or ``choices`` refuses a value (``--width 0``,
   ``--time-limit abc``, ``--kernel no-such``), give exactly one stderr line naming it, exit 2, and nothing on
   stdout (no work starts: argparse stops before ``main`` goes on);
2. ``--help`` is argparse's own: exit 0, the usage on stdout, nothing on stderr;
3. the scripts share one parser class (experiments/script_args.py), not a copy each;
4. the same as a real command, ``python -m memsched.experiments.bench_pipeline_dag_exec`` (the case reported).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memsched.experiments
import pytest

#: where the modules are (the package itself: the tree under test, whichever it is)
PACKAGE = Path(memsched.experiments.__path__[0])
#: an option no script has
UNKNOWN = "--no-such-option-42"


def scripts() -> list[str]:
    """Dotted names (below memsched.experiments) of the modules defining a top-level ``main(argv...)`` (the
    commands' ``main(args)`` take parsed arguments: experiments/cli.py parses for them)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" and node.args.args
               and node.args.args[0].arg == "argv" for node in tree.body):
            found.append(".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    return found


SCRIPTS = scripts()


def load(name: str) -> Any:
    """The module ``memsched.experiments.NAME``; skipped when a package it needs is not installed here."""
    try:
        return importlib.import_module(f"memsched.experiments.{name}")
    except ModuleNotFoundError as err:
        if err.name and not err.name.startswith("memsched"):
            pytest.skip(f"needs {err.name}")
        raise


class _Captured(BaseException):
    """Raised in place of parsing, carrying the parser (a BaseException: no script's ``except Exception`` keeps it)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


def parser_of(main: Callable[[list[str]], Any], monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser `main` builds, caught when it starts parsing (so nothing else of `main` runs)."""
    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
        try:
            main([])
        except _Captured as got:
            return got.parser
    raise AssertionError("main returned without parsing its arguments")


def refused(action: argparse.Action) -> list[str]:
    """The values of "abc" and "0" (a word; a count or time of zero) that `action`, an option taking values,
    refuses while parsing; a name none of its `choices` has."""
    if action.choices is not None:
        return ["no-such-choice-42"]
    if action.type is None or not callable(action.type):
        return []
    texts = []
    for text in ("abc", "0"):
        try:
            action.type(text)
        except (argparse.ArgumentTypeError, TypeError, ValueError):
            texts.append(text)
    return texts


def bad_values(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(option, refused value) for each option of `parser` and each value it refuses (`refused`)."""
    return [(action.option_strings[0], value) for action in parser._actions
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._SubParsersAction)
            for value in refused(action)]


def one_line_usage_error(main: Callable[[list[str]], Any], argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Assert that ``main(argv)`` is a usage error: exit 2, exactly one stderr line ``...: error: ...``, no
    usage block, no traceback, nothing on stdout. Returns the line."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2, (argv, code, err[-2000:])
    assert len(lines) == 1, (argv, err[-2000:])
    assert ": error: " in lines[0] and "usage:" not in err and "Traceback" not in err, (argv, err[-2000:])
    assert out == "", (argv, out[-2000:])
    return lines[0]


def test_the_scripts_are_found():
    """The discovery sees the benchmarks and the other scripts (a broken discovery would test nothing)."""
    assert len(SCRIPTS) >= 25, SCRIPTS
    for name in ("bench_pipeline_dag_exec", "bench_chain_dp", "main_job", "paper_figures", "vs_torch_duel"):
        assert name in SCRIPTS, SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_unknown_option_and_bad_values_are_one_line_and_exit_2(name, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # whatever went wrong, nothing is written into the repository
    main = load(name).main
    line = one_line_usage_error(main, [UNKNOWN], capsys)
    assert UNKNOWN in line or "required" in line, line  # paper_instances: its FILES are missing first
    if "required" in line:  # then the unknown option after a valid positional
        line = one_line_usage_error(main, ["some-file.json", UNKNOWN], capsys)
        assert UNKNOWN in line, line
    for flag, value in bad_values(parser_of(main, monkeypatch)):
        line = one_line_usage_error(main, [flag, value], capsys)
        assert flag in line and value in line, (flag, value, line)
    assert list(tmp_path.iterdir()) == []


#: checks a script makes itself after parsing, through its parser's `error`: (script, arguments, the option named)
CHECKED = [
    ("bench_time_limits", ["--only", "nosuch"], "--only"),
    ("bench_model_memory", ["--graphs", "no-such.json"], "--graphs"),
    ("bench_offload", ["--chains", "no-such.json"], "--chains"),
    ("bench_cli_startup", ["--rotor-c", "no-such.c"], "--rotor-c"),
]


@pytest.mark.parametrize(("name", "args", "flag"), CHECKED, ids=[c[0] for c in CHECKED])
def test_the_scripts_own_checks_are_one_line_too(name, args, flag, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    line = one_line_usage_error(load(name).main, args, capsys)
    assert flag in line and args[1] in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_is_argparses_own(name, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    main = load(name).main
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    out, err = capsys.readouterr()
    assert stop.value.code == 0 and out.startswith("usage: ") and "-h, --help" in out and err == "", (out, err)
    assert out == parser_of(main, monkeypatch).format_help()


def test_the_scripts_share_one_parser_class(monkeypatch):
    """One class for all (experiments/script_args.py); the memsched CLI keeps its own until it takes it."""
    from memsched.experiments.script_args import ScriptParser

    for name in SCRIPTS:
        if name != "cli":
            parser = parser_of(load(name).main, monkeypatch)
            assert type(parser) is ScriptParser, (name, type(parser))


@pytest.mark.parametrize("args", [["--width", "0"], ["--width", "abc"], ["--bogus"]])
def test_as_a_command(args, tmp_path):
    """The case reported, as typed: one stderr line, exit 2, nothing written."""
    proc = subprocess.run([sys.executable, "-m", "memsched.experiments.bench_pipeline_dag_exec", *args, "--out",
                           str(tmp_path / "out.csv")], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    (line,) = proc.stderr.splitlines()
    assert line.startswith("bench_pipeline_dag_exec.py: error: ") and args[0] in line, line
    assert list(tmp_path.iterdir()) == []
