"""A percentage budget is the exact share of its reference, rounded down: "2.8%" of 43,000,000 bytes is 1,204,000
(the float product floored to 1,203,999, one byte below a schedule's peak set at exactly that share)."""

from __future__ import annotations

import json
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st
from memsched.solvers.units import parse_budget


def test_decimal_percentages_are_exact():
    assert parse_budget("2.8%", 43_000_000) == 1_204_000
    assert parse_budget("18.4%", 375) == 69
    assert parse_budget(" 32.8 %".replace(" %", "%"), 375) == 123
    assert parse_budget("1e1%", 375) == 37 and parse_budget("1_0%", 375) == 37


@given(tenths=st.integers(0, 2000), reference=st.integers(0, 10**12))
def test_a_share_in_tenths_of_a_percent_floors_the_exact_product(tenths: int, reference: int):
    text = f"{tenths // 10}.{tenths % 10}%"
    assert parse_budget(text, reference) == (Fraction(tenths, 1000) * reference).__floor__()


def test_the_cli_budget_is_the_exact_share(cli, examples):
    res = cli("solve", examples / "homogeneous20.json", "--budget", "2.8%", "--json")
    assert json.loads(res.out)["budget"] == 1_204_000, res.out


def test_a_share_below_the_smallest_float_is_zero_at_once(cli, examples):
    assert parse_budget("1e-999999999%", 43_000_000) == 0 and parse_budget("0e9000000%", 375) == 0
    res = cli("solve", examples / "tiny.json", "--budget", "1e-999999999%")
    assert res.code == 2 and "less than one byte" in res.err, res.err
