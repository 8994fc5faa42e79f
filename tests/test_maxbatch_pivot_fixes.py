"""Fixes: `memsched max-batch` refuses non-finite or huge float options and a --limit below --step
(exit 2 naming the option, nothing printed on stdout); `SweepResult.pivot` of a text column
(status, scope) is a table of its values, not a pandas TypeError."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES

import memsched
from memsched.results import SweepResult

#: a tiny network, so that a probe the old code ran takes well under a second
TINY = ("resnet18", "--width", "4", "--depth", "1")


def _one_line_error(r, option: str) -> None:
    """Exit 2, one stderr line naming `option`, nothing on stdout."""
    assert r.code == 2, (r.code, r.out, r.err)
    assert option in r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert r.out == ""


@pytest.mark.parametrize("value", ["inf", "1e308", "nan", "-1", "101"])
def test_max_batch_state_factor_must_be_finite_and_bounded(cli, value):
    pytest.importorskip("torch")
    r = cli("max-batch", *TINY, "--image-size", "64", "--memory", "1GB", "--limit", "4", "--state-factor", value)
    _one_line_error(r, "--state-factor")


@pytest.mark.parametrize("value", ["inf", "nan", "2"])
def test_max_batch_tolerance_must_be_finite_and_at_most_one(cli, value):
    pytest.importorskip("torch")
    r = cli("max-batch", *TINY, "--image-size", "64", "--memory", "1GB", "--limit", "4", "--tolerance", value)
    _one_line_error(r, "--tolerance")


def test_max_batch_image_size_limit_below_step_is_refused(cli):
    pytest.importorskip("torch")
    r = cli("max-batch", *TINY, "--vary", "image-size", "--batch", "2", "--memory", "60MB", "--limit", "16",
            "--step", "32")
    _one_line_error(r, "--limit")
    assert "--step" in r.err


def test_max_batch_image_size_never_above_limit(cli):
    """A --limit that is not a multiple of --step: every side tried is a multiple of the step at most the limit."""
    pytest.importorskip("torch")
    r = cli("max-batch", *TINY, "--vary", "image-size", "--batch", "2", "--memory", "60MB", "--limit", "40",
            "--step", "32", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["largest"] == 32
    assert all(p["size"] <= 40 and p["size"] % 32 == 0 for p in data["probes"])


def _rows(repeat: int = 1) -> list[dict]:
    rows = []
    for budget, statuses in (("40%", ("optimal", "infeasible")), ("60%", ("optimal", "feasible"))):
        for solver, status in zip(("rotor", "sqrt"), statuses):
            for k in range(repeat):
                rows.append(dict(instance="c", budget_spec=budget, solver=solver, status=status,
                                 scope=f"{solver} scope", objective=10.0 + 2 * k, gap=None, feasible=k == 0))
    return rows


@pytest.mark.parametrize("column", ["status", "scope"])
def test_pivot_of_a_text_column_is_a_table(column):
    table = SweepResult(_rows()).pivot(column)
    assert list(table.columns) == ["rotor", "sqrt"]
    assert table.loc[("c", "40%"), "rotor"] == ("optimal" if column == "status" else "rotor scope")
    if column == "status":
        assert table.loc[("c", "40%"), "sqrt"] == "infeasible"
        assert table.loc[("c", "60%"), "sqrt"] == "feasible"


def test_pivot_numeric_columns_still_average_repeats_and_text_takes_the_first():
    sweep = SweepResult(_rows(repeat=2))
    assert sweep.pivot("objective").loc[("c", "40%"), "rotor"] == pytest.approx(11.0)
    assert sweep.pivot("feasible").loc[("c", "40%"), "rotor"] == pytest.approx(0.5)
    assert sweep.pivot("status").loc[("c", "60%"), "sqrt"] == "feasible"


def test_pivot_status_of_a_facade_sweep():
    sweep = memsched.sweep(memsched.load(EXAMPLES / "random10.json"), budgets=["40%", "60%"], solvers=["rotor", "sqrt"])
    table = sweep.pivot("status")
    assert table.shape == (2, 2)
    assert set(table.to_numpy().ravel()) <= {"optimal", "feasible", "infeasible", "timeout", "error"}
    assert sweep.pivot("objective").shape == (2, 2)
