"""A pipeline partitioner named to `memsched solve` on a chain is pointed at `memsched partition` (as an
offloading solver named on a chain is told what makes the chain an offloading instance)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import one_line_refusal
from memsched.solvers.errors import InputError
from memsched.solvers.registry import get_solver


@pytest.mark.parametrize("name", ["madpipe", "pipedream", "dag"])
def test_solve_points_a_partitioner_to_partition(cli, examples: Path, name: str) -> None:
    res = cli("solve", str(examples / "tiny.json"), "--budget", "50%", "--solver", name)
    line = one_line_refusal(res, f"{name!r} is a pipeline partitioner")
    assert f"memsched partition FILE --devices P --memory M --solver {name}" in line
    assert "rotor" in line  # the chain solvers it can use instead


def test_unknown_everywhere_keeps_the_plain_message() -> None:
    with pytest.raises(InputError, match="unknown solver 'nosuch' for chain"):
        get_solver("chain", "nosuch")
