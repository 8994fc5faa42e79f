"""Budget messages name the instance's memory unit (bytes, KiB, MB, ...), not always bytes.

A positive budget that rounds down to 0 units ("0.5B", "1000B" on a KiB graph, "0.5MB" on a MB join)
is "less than one <unit>", not "must be positive"; a share of the reference peak names the peak in the
instance's unit. The CLI keeps one line, exit 2, naming ``--budget``.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.units import parse_positive_budget

import memsched

CHAIN = memsched.data_path("examples", "cnn12.json")  # bytes
GRAPH = memsched.data_path("graphs", "vgg16_like.json")  # meta.units.memory = KiB
JOIN = memsched.data_path("join", "siamese8.json")  # meta.units.memory = MB


def _refusal(path, spec) -> str:
    with pytest.raises(InputError) as err:
        memsched.budget(memsched.load(path), spec)
    assert err.value.field == "budget" and "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("path, spec, unit", [(CHAIN, "0.5B", "one byte"), (GRAPH, "1000B", "one KiB"),
                                              (JOIN, "0.5MB", "one MB")])
def test_a_size_below_one_unit_is_not_called_non_positive(path, spec, unit):
    message = _refusal(path, spec)
    assert "must be positive" not in message
    assert f"{spec!r} is less than {unit}" in message


def test_a_size_below_one_unit_says_it_is_the_instances_unit():
    assert "the memory unit of this instance" in _refusal(GRAPH, "1000B")
    assert "the memory unit of this instance" in _refusal(JOIN, "0.5MB")


def test_a_share_below_one_unit_names_the_reference_peak_in_the_instances_unit():
    peak = memsched.reference_peak(memsched.load(GRAPH))
    message = _refusal(GRAPH, "0.001%")
    assert f"reference peak ({peak} KiB)" in message and "less than one KiB" in message
    assert "byte" not in message


def test_a_share_below_one_byte_of_a_byte_chain_still_says_bytes():
    message = _refusal(CHAIN, "0.0000000001%")
    assert "bytes)" in message and "less than one byte" in message


@pytest.mark.parametrize("text, per_unit, unit, expect", [
    ("0.5", 2**10, None, "'0.5' is less than one KiB, the memory unit of this instance (a number is in that unit"),
    (0.5, 1, "KiB", "0.5 is less than one KiB, the memory unit of this instance (a number is in that unit"),
    (0.5, 1, "bytes", "0.5 is less than one byte, the memory unit of this instance"),
    ("0.5", None, "slots", "'0.5' is less than one unit of this instance's sizes (slots)"),
    ("0.5", None, None, "'0.5' is less than one unit of this instance's sizes"),
    ("0.5", 1, None, "'0.5' is less than one byte (a number is bytes"),
    ("900kB", 2**20, "mib", "'900kB' is less than one MiB, the memory unit of this instance"),
])
def test_a_number_below_one_unit_names_the_unit(text, per_unit, unit, expect):
    with pytest.raises(InputError) as err:
        parse_positive_budget(text, None, field="budget", per_unit=per_unit, unit=unit)
    assert expect in str(err.value) and "must be positive" not in str(err.value)


def test_a_share_of_a_slots_instance_names_the_slots():
    with pytest.raises(InputError, match=r"reference peak \(7 slots\) is less than one unit of this instance's sizes"):
        parse_positive_budget("1%", 7, field="budget", per_unit=None, unit="slots")


@pytest.mark.parametrize("text", ["0", 0, 0.0, "0KiB", "0%"])
def test_zero_is_still_not_positive(text):
    with pytest.raises(InputError) as err:
        parse_positive_budget(text, 100, field="budget", per_unit=2**10)
    message = str(err.value)
    assert "must be positive" in message or ("0%" in message and "less than one KiB" in message)


def _cli(*argv: str) -> tuple[int, str]:
    from memsched.experiments.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return int(code or 0), err.getvalue()


@pytest.mark.parametrize("path, spec, expect", [
    (GRAPH, "0.5", "'0.5' is less than one KiB, the memory unit of this instance"),
    (GRAPH, "1000B", "'1000B' is less than one KiB"),
    (JOIN, "0.5MB", "'0.5MB' is less than one MB"),
    (CHAIN, "0.5", "'0.5' is less than one byte"),
    (GRAPH, "0.001%", "(59290 KiB) is less than one KiB"),
])
def test_the_cli_names_the_unit_on_one_line(path, spec, expect):
    code, err = _cli("solve", str(path), "--budget", spec)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "--budget" in lines[0] and expect in lines[0] and "must be positive" not in lines[0]


def test_the_facade_reads_a_number_in_the_instances_unit():
    """`memsched.solve(kib_graph, 0.5)`: half a KiB, less than one unit of the file (it said "less than
    one byte (a number is bytes...)", but a number there is KiB: `budget(g, 1000)` is 1000 KiB)."""
    message = _refusal(GRAPH, 0.5)
    assert "less than one KiB, the memory unit of this instance" in message
    assert "byte" not in message
