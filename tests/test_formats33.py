"""Values of files and arguments read within their documented ranges (hunt of round 33).

1. A partition file's ``weight_factor``, ``bandwidth`` and ``latency`` were only checked finite and >= 0:
   1e308 overflowed the simulator (exit 3), a bandwidth of 1e-300 or a latency of 1e308 gave an infinite
   period (exit 0, ``Infinity`` in ``--json``). Now the command-line flags' ranges apply (exit 2, one line).
2. ``parse_size`` multiplied floats: "33.3MB" was 33299999 bytes. Now exact: 33300000.
3. A sweep journal row with a non-finite or fractional ``repeat`` crashed every run of that folder
   (exit 3); now it is a damaged row whose cell runs again.
4. ``memsched figures`` crashed (exit 3) on ``inf`` or ``1e400`` in a number column; now exit 2 naming
   the file, the row and the column.
5. A graph file's ``graph.name`` must be a string when present (``true`` was printed as "(True)").
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import GRAPH_EXAMPLE, run_cli, sweep_toml
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.experiments.sweep import journal_path, read_journal, run_sweep
from memsched.solvers.errors import InputError
from memsched.solvers.units import MAX_BYTES, parse_budget, parse_size

ROOT = Path(__file__).resolve().parents[1]
MLP7 = ROOT / "solvers" / "data" / "pipeline" / "mlp7.chain.json"
MAIN = ROOT / "results" / "main" / "chain_solvers.csv"


# --------------------------------------------------------------------------- 1. partition machine values
@pytest.fixture(scope="module")
def partition_json() -> dict:
    """`memsched partition --json` of the mlp7 pipeline on two devices (its whole output)."""
    res = run_cli("partition", MLP7, "--devices", "2", "--memory", "100%", "--json")
    assert res.code == 0, res.err
    return json.loads(res.out)


@pytest.mark.parametrize(("key", "value", "range_text"), [
    ("weight_factor", 1e308, "0..1e+15"),
    ("weight_factor", 1e16, "0..1e+15"),
    ("weight_factor", -1, "0..1e+15"),
    ("bandwidth", 1e-300, "1e-09..1125899906842624"),
    ("bandwidth", 2.0**51, "1e-09..1125899906842624"),
    ("bandwidth", 0, "1e-09..1125899906842624"),
    ("latency", 1e308, "0..86400"),
    ("latency", 86401, "0..86400"),
])
@pytest.mark.parametrize("command", ["simulate", "plot"])
def test_partition_machine_values_out_of_the_flags_range_are_refused(tmp_path, partition_json, key, value,
                                                                     range_text, command):
    data = dict(partition_json["schedule"])
    data[key] = value
    if key == "latency":
        data["bandwidth"] = 1e9  # a latency is charged with a bandwidth
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    extra = ["-o", str(tmp_path / "fig.png")] if command == "plot" else ["--json"]
    res = run_cli(command, MLP7, bad, *extra)
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and f"{bad}: {key}: must be" in lines[0] and range_text in lines[0], res.err
    assert res.out == ""


def test_partition_machine_values_at_the_range_ends_replay(tmp_path, partition_json):
    data = dict(partition_json["schedule"], weight_factor=1e15, bandwidth=1e-9, latency=86400)
    good = tmp_path / "edge.json"
    good.write_text(json.dumps(data))
    res = run_cli("simulate", MLP7, good, "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))
    assert math.isfinite(out["period"]) and out["period"] > 0


def test_partition_machine_values_in_the_whole_output_name_the_schedule_field(tmp_path, partition_json):
    whole = json.loads(json.dumps(partition_json))
    whole["schedule"]["weight_factor"] = 1e308
    bad = tmp_path / "whole.json"
    bad.write_text(json.dumps(whole))
    res = run_cli("simulate", MLP7, bad)
    assert res.code == 2 and f"{bad}: schedule.weight_factor: must be a finite number in 0..1e+15" in res.err


# --------------------------------------------------------------------------- 2. exact decimal sizes
@pytest.mark.parametrize(("text", "expected"), [
    ("33.3MB", 33_300_000), ("1.001GB", 1_001_000_000), ("0.01kB", 10), ("99.99kB", 99_990),
    ("1.5GB", 1_500_000_000), ("0.3kB", 300), ("4.35MB", 4_350_000), ("2.675GB", 2_675_000_000),
    ("0.1KiB", 102), ("800MiB", 800 * 2**20), ("1.5KiB", 1536), (".5MB", 500_000),
    ("0.0001kB", 0), ("1e-400kB", 0), ("12345", 12345), ("1e3kB", 1_000_000), (str(MAX_BYTES), MAX_BYTES),
])
def test_parse_size_is_exact(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["1e400", "1e9999999999", "1.2e15", str(MAX_BYTES + 1), "1126TB"])
def test_parse_size_too_large(text):
    with pytest.raises(InputError, match="too large"):
        parse_size(text)


def test_a_decimal_budget_in_another_unit_is_exact():
    assert parse_budget("33.3MB", None, per_unit=1) == 33_300_000
    assert parse_budget("1.001GB", None, per_unit=1000) == 1_001_000


_UNIT = {"kB": 10**3, "MB": 10**6, "GB": 10**9}


@settings(max_examples=300, deadline=None)
@given(whole=st.integers(0, 999), frac=st.integers(0, 999_999), digits=st.integers(0, 6),
       unit=st.sampled_from(sorted(_UNIT)))
def test_parse_size_of_decimal_strings_is_the_exact_value(whole, frac, digits, unit):
    text = f"{whole}.{frac % 10**digits:0{digits}d}" if digits else str(whole)
    exact = Fraction(text) * _UNIT[unit]
    got = parse_size(text + unit)
    assert got == math.floor(exact)
    if exact.denominator == 1:
        assert got == exact


# --------------------------------------------------------------------------- 3. sweep journal rows
TINY_SWEEP = sweep_toml("t", budgets=["50%"], defaults={"slots": 100}, instances=[{"example": "tiny"}],
                        solvers=["store-all"])


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> tuple[Path, Path]:
    """A finished one-cell sweep: its file and output folder (copied by each test)."""
    root = tmp_path_factory.mktemp("sweep")
    cfg = root / "t.toml"
    cfg.write_text(TINY_SWEEP)
    out = root / "out"
    run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    return cfg, out


@pytest.mark.parametrize("repeat", ["NaN", "Infinity", "-Infinity", "1e400", "1.5"])
def test_a_journal_row_with_a_bad_repeat_is_solved_again(tmp_path, finished_sweep, repeat):
    cfg, done = finished_sweep
    out = tmp_path / "out"
    shutil.copytree(done, out)
    jpath = journal_path(out, "t")
    text = jpath.read_text()
    assert '"repeat": 0' in text
    jpath.write_text(text.replace('"repeat": 0', f'"repeat": {repeat}'))
    res = run_cli("sweep", cfg, "--output", out, "--no-progress")
    assert res.code == 0, res.err
    assert "1 run now" in res.err + res.out, (res.out, res.err)
    (row,) = read_journal(jpath).values()
    assert row["repeat"] == 0 and row["status"] == "infeasible"


def test_a_journal_line_with_a_huge_integer_or_deep_nesting_is_ignored(tmp_path, finished_sweep):
    cfg, done = finished_sweep
    out = tmp_path / "out"
    shutil.copytree(done, out)
    jpath = journal_path(out, "t")
    with open(jpath, "a") as f:
        f.write('{"key": "x", "repeat": ' + "1" * 5000 + "}\n" + "[" * 100_000 + "\n")
    res = run_cli("sweep", cfg, "--output", out, "--no-progress")
    assert res.code == 0, res.err
    assert "unreadable line 2 ignored" in res.err and "unreadable line 3 ignored" in res.err


@pytest.mark.parametrize(("column", "value"), [("repeat", "inf"), ("repeat", "2.5"), ("size", "-inf"),
                                                ("objective", "1e400")])
def test_a_table_row_with_a_non_finite_number_is_solved_again(tmp_path, finished_sweep, column, value):
    cfg, done = finished_sweep
    out = tmp_path / "out"
    shutil.copytree(done, out)
    journal_path(out, "t").unlink()  # a fresh clone: the table is the record
    table = out / "t.csv"
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    rows[0][column] = value
    with open(table, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    res = run_cli("sweep", cfg, "--output", out, "--no-progress")
    assert res.code == 0, res.err
    assert "1 run now" in res.err + res.out, (res.out, res.err)


# --------------------------------------------------------------------------- 4. figures on non-finite numbers
@pytest.mark.skipif(not MAIN.is_file(), reason="needs the committed results/main table")
@pytest.mark.parametrize(("column", "value", "shown"), [
    ("size", "inf", "inf"), ("size", "-inf", "-inf"), ("repeat", "1e400", "inf"), ("budget", "inf", "inf"),
    ("size", "1" + "0" * 400, "an integer of about 401 digits"), ("objective", "1" + "0" * 400, "'1000"),
])
def test_figures_refuse_a_non_finite_number(tmp_path, column, value, shown):
    rows = list(csv.DictReader(io.StringIO(MAIN.read_text(encoding="utf-8"))))
    rows[3][column] = value
    results = tmp_path / "res" / "main"
    results.mkdir(parents=True)
    table = results / "chain_solvers.csv"
    with open(table, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    res = run_cli("figures", "--results", tmp_path / "res", "--out", tmp_path / "figs", "--only", "main")
    assert res.code == 2, (res.code, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert f"{table}: {column}: row 5: not a finite number: {shown}" in lines[0], res.err


# --------------------------------------------------------------------------- 5. graph.name
def _graph(tmp_path: Path, name: object, *, drop: bool = False) -> Path:
    data = copy.deepcopy(GRAPH_EXAMPLE)  # docs/graph.md's example graph
    if drop:
        data["graph"].pop("name", None)
    else:
        data["graph"]["name"] = name
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name", [True, False, [], {}, None, 5, 1.5])
def test_a_graph_name_that_is_no_string_is_refused(tmp_path, name):
    path = _graph(tmp_path, name)
    res = run_cli("solve", path, "--budget", "100%")
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and f"{path}: graph.name: must be a string" in lines[0], res.err


@pytest.mark.parametrize(("name", "shown"), [("net", "(net)"), ("", "(g)"), (None, "(g)")])
def test_a_graph_name_string_or_absent_is_read(tmp_path, name, shown):
    path = _graph(tmp_path, name, drop=name is None)
    res = run_cli("solve", path, "--budget", "100%")
    assert res.code == 0, res.err
    assert shown in res.out.splitlines()[0], res.out
