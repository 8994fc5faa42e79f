"""The CBC program reads the model from an MPS file written in full precision (`cbc_cmd.model_to_mps`):
OR-Tools 9.15's export wrote 6 significant digits, so CBC solved another model."""

from __future__ import annotations

import math

import pytest
from memsched.solvers.exact.cbc_cmd import cbc_program, model_to_mps
from memsched.solvers.exact.linear import LinearModel
from memsched.solvers.exact.milp_runner import run_milp
from memsched.solvers.exact.options import Deadline


def _model() -> LinearModel:
    """max x (integer, 0..10) with 1.000004 x <= 3: x = 2 (LP 2.999988, beyond CBC's integrality
    tolerance of 3); rounded to 6 digits the row is x <= 3 and x = 3."""
    m = LinearModel()
    x = m.var(0, 10, True, "x")
    m.add([x], [1.000004], ub=3.0)
    m.objective[x] = -1.0
    return m


def test_numbers_are_written_in_full() -> None:
    text = model_to_mps(_model())
    assert "1.000004" in text and "3.0" in text
    assert "'INTORG'" in text and "'INTEND'" in text


def test_ranged_rows_and_free_columns() -> None:
    m = LinearModel()
    y = m.var(-math.inf, math.inf, False, "y")
    m.add([y], [1.0], lb=-2.5, ub=4.25)
    text = model_to_mps(m)
    assert "RANGES" in text and "6.75" in text and " MI BND" in text and " PL BND" in text


@pytest.mark.skipif(cbc_program() is None, reason="no CBC program")
def test_cbc_solves_the_model_it_was_given() -> None:
    run = run_milp(_model(), "cbc", Deadline(20.0))
    assert run.status == "optimal" and run.values is not None
    assert round(run.values[0]) == 2
