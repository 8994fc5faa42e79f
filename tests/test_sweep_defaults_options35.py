"""A sweep file's ``[defaults] options`` that is not a table is bad input naming
``defaults.options`` (one line, exit 2), also when a solver entry sets its own options (session 35).
Before: an internal error (AttributeError, exit 3) for a string, and ``false`` silently accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SWEEP = """budgets = ["60%"]
[defaults]
options = {value}
[[instances]]
example = "tiny"
[[solvers]]
name = "rotor"
{own}
"""


@pytest.mark.parametrize("value", ['"x"', "false", "3"])
@pytest.mark.parametrize("own", ["options = {}", ""])
def test_defaults_options_not_a_table(cli: Any, tmp_path: Path, value: str, own: str) -> None:
    path = tmp_path / "sw.toml"
    path.write_text(SWEEP.format(value=value, own=own))
    res = cli("sweep", path, "--output", tmp_path / "out", "--no-progress", "--list")
    assert res.code == 2, res.err
    assert res.err.strip() == ("memsched sweep: error: " + str(path)
                               + ": defaults.options: must be a table of solver options"), res.err
    assert not (tmp_path / "out").exists()


def test_an_entrys_options_not_a_table(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "sw.toml"
    path.write_text(SWEEP.format(value="{}", own='options = "x"'))
    res = cli("sweep", path, "--output", tmp_path / "out", "--no-progress", "--list")
    assert res.code == 2 and "solvers[0].options: must be a table of solver options" in res.err, res.err
