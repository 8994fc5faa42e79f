"""bench_pipeline_dag: the DAG pipeline solvers (``dag``, ``dag-pipedream``, the exact ``dag-cpsat`` and
``dag-milp``) side by side on DAG instances.

Its main, run on the quick grid into a temporary folder, writes a CSV with the benchmark's columns, one row per
(profile, devices, memory, solver) with all four solvers in every cell, and each exact solver's period is at
most ``dag``'s at the same cell (they optimise over the same lattice). The printed comparison says so.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from memsched.experiments import bench_pipeline_dag

COLUMNS = ["profile", "layers", "ideals", "devices", "memory", "memory_factor", "min_budget", "solver", "status",
           "period_s", "lower_bound_s", "gap_pct", "peak_memory", "stages", "solve_time_s", "load_1min", "version"]


def test_quick_run_writes_the_table_and_exact_never_worse_than_dag(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dag.csv"
    assert bench_pipeline_dag.main(["--quick", "--out", str(out)]) == 0
    with out.open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == COLUMNS
        rows = list(reader)
    assert not (tmp_path / "dag.partial.csv").exists()
    cells: dict[tuple[str, str, str], dict[str, dict[str, str]]] = {}
    for r in rows:
        by = cells.setdefault((r["profile"], r["devices"], r["memory"]), {})
        assert r["solver"] not in by  # one row per cell and solver
        by[r["solver"]] = r
    assert len(cells) >= 4 and {r["profile"] for r in rows} >= {"tiny-resnet"}
    assert {r["devices"] for r in rows} >= {"2", "4"}
    for key, by in cells.items():
        assert set(by) == {"dag", "dag-pipedream", "dag-cpsat", "dag-milp"}, key
        dag = float(by["dag"]["period_s"])
        assert by["dag"]["status"] == "optimal"
        assert int(by["dag"]["memory"]) >= int(by["dag"]["min_budget"]) > 0
        for solver in ("dag-cpsat", "dag-milp"):
            row = by[solver]
            assert row["period_s"] != "", (key, solver, row["status"])
            assert float(row["period_s"]) <= dag * (1 + 1e-9), (key, solver)
            assert row["gap_pct"] != "" and float(row["gap_pct"]) >= 0
            assert float(row["solve_time_s"]) >= 0 and row["load_1min"] != ""
    text = capsys.readouterr().out
    n = len(cells)
    assert text.count(f"period <= dag's in {n} of {n}") == 2
    assert "not <= dag" not in text


def test_compare_flags_an_exact_period_above_dag() -> None:
    def row(solver: str, period: float, time: float) -> dict[str, object]:
        return {"profile": "x", "devices": 2, "memory": 10, "solver": solver, "status": "optimal",
                "period_s": period, "gap_pct": 0.0, "solve_time_s": time, "load_1min": 1.0}

    lines = bench_pipeline_dag.compare([row("dag", 1.0, 0.1), row("dag-cpsat", 1.0, 2.0), row("dag-milp", 1.5, 1.0)])
    assert any(line.startswith("dag-cpsat") and "period <= dag's in 1 of 1" in line for line in lines)
    assert any(line.startswith("dag-milp") and "period <= dag's in 0 of 1" in line for line in lines)
    assert any("not <= dag: x P=2 memory=10: dag-milp 1.5" in line for line in lines)
    assert any("dag-cpsat faster than dag-milp in 0 of 1 cells" in line for line in lines)
