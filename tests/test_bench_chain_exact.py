"""The exact chain benchmark's script: its rows, the LP-relaxation row and the columns it records."""

from __future__ import annotations

import csv

import pytest
from memsched.experiments import bench_chain_exact


def test_bench_writes_rows_with_lp_bound_and_load(tmp_path) -> None:
    out = tmp_path / "bench.csv"
    assert bench_chain_exact.main(["--lengths", "6", "--fractions", "0.2", "--solvers", "lp", "lp+cuts", "milp:scip",
                                   "--time-limit", "20", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["solver"] for r in rows] == ["lp", "lp+cuts", "milp:scip"]
    lp, lp_cuts, milp = rows
    assert lp["status"] == lp_cuts["status"] == "lp" and lp["makespan"] == ""
    assert float(lp["bound"]) - 1e-9 <= float(lp_cuts["bound"]) <= float(milp["makespan"]) + 1e-9
    assert milp["status"] == "optimal"
    assert float(lp["bound"]) <= float(milp["makespan"]) + 1e-9  # the relaxation bounds the optimum
    assert float(milp["bound"]) == pytest.approx(float(milp["makespan"]))
    for r in rows:
        assert float(r["load_avg_1min"]) >= 0
        assert int(r["effective_slots"]) in (0, 100)
