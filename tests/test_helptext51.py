"""``memsched COMMAND --help`` is for users: a short description, then the options.

``memsched max-batch --help`` printed its module's 77-line developer docstring as the description (142 lines in
all), naming private helpers and constants in backticks (`_check_vary`, `MAX_SCAN`, `probe_key`); ``run``,
``profile`` and ``export-graph`` printed theirs too, naming internal modules (`models.network`,
`models.run.run`). Each command's description is now a few lines (what it does, the key rule, the exit codes
and where the details are: docs/cli.md); the developer text stays the module docstring.
"""

from __future__ import annotations

import re

import pytest
from memsched.experiments.cli import COMMANDS

#: the most lines a command's description (between its usage and its first section) may take, at 80 columns
#: (hrevolve's, the longest, is 16: its notation of the operations)
MAX_DESCRIPTION_LINES = 16
#: the most lines of a whole ``--help`` at 80 columns: its usage and option listings alone are up to 87 (``run``'s
#: 38 options), so the bound is on what a description adds to them
MAX_HELP_LINES = 120

#: a backticked code name: one pair of single backticks around an identifier or a dotted path (``x`` literals
#: in double backticks and backticked commands such as `memsched run` are not code names)
CODE_NAME = re.compile(r"(?<!`)`([A-Za-z_][\w.]*)`(?!`)")
#: the first section heading of argparse's help (Python < 3.10 says "optional arguments")
SECTION = re.compile(r"^(positional arguments|options|optional arguments):$")


def _listed_commands(cli) -> list[str]:
    """The commands `memsched --help` lists (its COMMAND entries, 4 spaces in), in order."""
    res = cli("--help")
    assert res.code == 0, res.err
    names = re.findall(r"^    ([a-z][a-z-]*)(?:\s|$)", res.out, flags=re.M)
    assert names, res.out
    return names


def _help(cli, monkeypatch: pytest.MonkeyPatch, command: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps to the terminal's width: count lines at 80 columns
    res = cli(command, "--help")
    assert res.code == 0, res.err
    return res.out


def _usage_and_description(text: str) -> tuple[list[str], list[str]]:
    """The usage lines and the description lines (blank ones dropped) of a command's help `text`."""
    lines = text.splitlines()
    end_usage = next(i for i, line in enumerate(lines) if not line.strip())
    rest = lines[end_usage:]
    end = next((i for i, line in enumerate(rest) if SECTION.match(line)), len(rest))
    return lines[:end_usage], [line for line in rest[:end] if line.strip()]


def test_every_listed_command_is_checked(cli):
    assert _listed_commands(cli) == list(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_is_short(cli, monkeypatch, command):
    assert command in _listed_commands(cli)
    text = _help(cli, monkeypatch, command)
    _, description = _usage_and_description(text)
    assert len(description) <= MAX_DESCRIPTION_LINES, "\n".join(description)
    assert len(text.splitlines()) <= MAX_HELP_LINES, text


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_names_no_code(cli, monkeypatch, command):
    """No `_private` helper, no `ALL_CAPS` constant, no `module.path` or `function_name` in backticks; a
    metavar of the usage line (`MODEL`) may be quoted so."""
    text = _help(cli, monkeypatch, command)
    usage, _ = _usage_and_description(text)
    metavars = set(re.findall(r"\b[A-Z][A-Z0-9_]*\b", " ".join(usage)))
    flat = " ".join(text.split())
    names = [name for name in CODE_NAME.findall(flat) if name not in metavars]
    assert not names, f"memsched {command} --help names code: {names}"


@pytest.mark.parametrize("command", ["max-batch", "run", "export-graph", "profile"])
def test_description_says_the_exit_codes_and_where_the_details_are(cli, monkeypatch, command):
    _, description = _usage_and_description(_help(cli, monkeypatch, command))
    text = " ".join(" ".join(description).split())
    assert "Exit: 0" in text and "2 bad input" in text, text
    assert f'docs/cli.md, "memsched {command}"' in text, text
