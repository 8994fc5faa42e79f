"""Sizes in an instance file are in its memory unit (``meta.units.memory``, bytes by default): a
budget given as a size ("17MB") is converted into that unit, a plain number is in it, and the
command line prints sizes in it (a join file in MB printed "17 (17 B)" and read "--budget 17MB"
as 17,000,000 of its MB units, while the facade and the figures showed 16.2 MiB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memsched.experiments.cli import main
from memsched.solvers.errors import InputError
from memsched.solvers.units import format_size, parse_budget, unit_bytes

import memsched

ROOT = Path(__file__).resolve().parents[1]
JOIN_MB = ROOT / "solvers" / "data" / "join" / "tiny.json"  # meta.units.memory = "MB"


def _chain_in(tmp_path: Path, unit: str) -> Path:
    data = json.loads((ROOT / "examples" / "tiny.json").read_text())
    data.setdefault("meta", {}).setdefault("units", {})["memory"] = unit
    path = tmp_path / f"tiny_{unit}.json"
    path.write_text(json.dumps(data))
    return path


def test_parse_budget_converts_a_size_into_the_unit() -> None:
    assert parse_budget("40KiB", None, per_unit=1024) == 40
    assert parse_budget("17MB", None, per_unit=10**6) == 17
    assert parse_budget("1MB", None, per_unit=1024) == 976  # rounded down: never above the size given
    assert parse_budget("40", None, per_unit=1024) == 40  # a plain number is in the unit
    assert parse_budget("50%", 60, per_unit=1024) == 30
    assert parse_budget("40KiB", None) == 40960
    with pytest.raises(InputError, match="no byte unit"):
        parse_budget("1GB", None, per_unit=None)


def test_cli_reads_and_prints_the_files_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _chain_in(tmp_path, "KiB")
    assert main(["solve", str(path), "--budget", "40KiB", "--solver", "rotor"]) == 0
    out = capsys.readouterr().out
    assert "budget       40 (40.00 KiB)" in out and "(28.00 KiB)" in out
    assert main(["solve", str(path), "--budget", "1KiB", "--solver", "rotor"]) == 1
    err = capsys.readouterr().err  # both sizes of the line in the file's unit and in binary units
    assert "within budget 1 KiB (1.00 KiB); smallest feasible budget: 21 KiB (21.00 KiB)" in err
    assert main(["solve", str(JOIN_MB), "--budget", "17MB"]) == 0
    assert "budget       17 (16.21 MiB)" in capsys.readouterr().out


def test_facade_and_cli_agree_on_a_size_budget() -> None:
    res = memsched.solve(str(JOIN_MB), "17MB")
    assert res.raw.budget == 17
    assert memsched.budget(str(JOIN_MB), "17MB") == 17


def test_a_unit_that_is_no_byte_unit_refuses_a_size_budget(tmp_path: Path) -> None:
    path = _chain_in(tmp_path, "slots")
    chain = memsched.load(str(path))
    assert unit_bytes(chain) is None and format_size(28, chain) == "28 slots"
    with pytest.raises(InputError, match="no byte unit"):
        memsched.solve(str(path), "1GB", solver="rotor")
    assert memsched.solve(str(path), 40, solver="rotor").raw.budget == 40


def test_sweep_converts_a_size_budget(tmp_path: Path) -> None:
    rows = memsched.sweep(str(_chain_in(tmp_path, "KiB")), budgets=["40KiB"], solvers=["rotor"]).to_pandas()
    assert list(rows["budget"]) == [40]
