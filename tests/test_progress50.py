"""The progress line's text: the solve's state follows the bar after one space (no tqdm ", " postfix)."""

from __future__ import annotations

import pytest
from memsched.solvers.progress import report

from memsched.live import progress_line


@pytest.mark.parametrize("limit", [3.0, None])
def test_the_state_follows_the_bar_without_a_comma(capsys, limit):
    with progress_line(True, label="milp", limit=limit):
        report("search (scip)", best=12.5, bound=11.0)
    err = capsys.readouterr().err
    assert "search (scip) | best 12.5 | bound 11" in err
    assert ", search" not in err and " , " not in err
