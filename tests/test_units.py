"""Sizes, budgets and bandwidths as users type them."""

from __future__ import annotations

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.units import format_bytes, parse_bandwidth, parse_budget, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [("1500000000", 1_500_000_000), ("1.5GB", 1_500_000_000), ("800MiB", 800 * 2**20), ("2 GiB", 2 * 2**30),
     ("12kB", 12_000), ("7", 7), (42, 42), ("1e3", 1000)],
)
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "1.5 parsecs", "-3", "abc"])
def test_bad_sizes(text):
    with pytest.raises(InputError):
        parse_size(text)


def test_percent_budget():
    assert parse_budget("60%", 1000) == 600
    assert parse_budget("100%", 777) == 777
    assert parse_budget("1KiB", None) == 1024
    with pytest.raises(InputError, match="reference"):
        parse_budget("50%", None)
    with pytest.raises(InputError):
        parse_budget("x%", 100)


def test_bandwidth():
    assert parse_bandwidth("12GB/s") == 12e9
    assert parse_bandwidth("25e9") == 25e9
    with pytest.raises(InputError):
        parse_bandwidth("0GB/s")


def test_format_bytes():
    assert format_bytes(3 * 2**30) == "3.00 GiB"
    assert format_bytes(12) == "12 B"
