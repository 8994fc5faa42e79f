"""The exact MILP solvers beside the CP-SAT ones in the benchmarks that compare the exact solvers with the fast ones.

1. bench_pipeline runs the pipeline ``milp`` wherever it runs ``cpsat`` (both parts, the same 60 s limit and
   options), writes a ``gap_pct`` column (100 (period - bound) / period) and prints both exact solvers' times.
2. bench_join runs the join ``milp`` wherever it runs ``cpsat`` (the small joins at exact sizes, one worker,
   60 s; the medium ones with ``--cpsat-medium``).
3. The committed tables (results/bench_pipeline.csv, results/bench_join.csv) hold a ``milp`` row for every
   ``cpsat`` row, with the same status and objective (the same model), and a time and gap for each.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from memsched.experiments import bench_join, bench_pipeline

ROOT = Path(__file__).resolve().parents[1]


def _calls(monkeypatch: pytest.MonkeyPatch, mod: Any, result: Any) -> list[tuple[str, dict[str, Any]]]:
    """Replace `mod`'s registry by a stand-in answering `result(instance, solver, budget)`; the (solver, options)
    of every call, in order."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def solve(problem: str, inst: Any, solver: str, budget: Any, **kw: Any) -> Any:
        calls.append((solver, kw))
        return result(inst, solver, budget)

    monkeypatch.setattr(mod, "registry", SimpleNamespace(solve=solve))
    return calls


def _pipeline_result(inst: Any, solver: str, memory: Any) -> SimpleNamespace:
    return SimpleNamespace(status="optimal", objective=2.0, peak_memory=1, lower_bound=1.5, min_budget=1,
                           schedule=None)


def _join_result(join: Any, solver: str, budget: int) -> SimpleNamespace:
    return SimpleNamespace(objective=float(join.total_time() + 1), status="optimal", found=True, peak_memory=budget,
                           solve_time_s=0.25, scope="stand-in")


def _exact_options(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for solver, kw in calls:
        if solver in ("cpsat", "milp"):
            by[solver].append(kw)
    return by


@pytest.mark.parametrize("part", ["sweep", "timing"])
def test_pipeline_runs_milp_wherever_cpsat_runs(monkeypatch: pytest.MonkeyPatch, part: str) -> None:
    calls = _calls(monkeypatch, bench_pipeline, _pipeline_result)
    rows = getattr(bench_pipeline, part)(True)
    by = _exact_options(calls)
    assert len(by["milp"]) == len(by["cpsat"]) > 0
    assert by["milp"] == by["cpsat"]  # the same devices and the same 60 s limit, in the same order
    assert all(kw["time_limit"] == 60 for kw in by["milp"])
    milp = [r for r in rows if r["solver"] == "milp"]
    assert len(milp) == len(by["milp"]) and all(r["gap_pct"] == 25.0 for r in milp)  # (2 - 1.5) / 2


def test_pipeline_gap_and_exact_time_lines() -> None:
    assert bench_pipeline.gap_pct(2.0, 2.0) == 0.0 and bench_pipeline.gap_pct(4.0, 3.0) == 25.0
    assert bench_pipeline.gap_pct(None, 1.0) == "" and bench_pipeline.gap_pct(2.0, None) == ""
    assert "gap_pct" in bench_pipeline.FIELDS
    rows = [{"kind": "timing", "solver": s, "status": "optimal", "solve_time_s": t, "gap_pct": 0.0}
            for s, t in [("cpsat", 3.0), ("milp", 1.0), ("milp", 2.0)]]
    lines = bench_pipeline.exact_times(rows)
    assert len(lines) == 2 and "cpsat" in lines[0] and "1 of 1 optimal" in lines[0]
    assert "milp" in lines[1] and "2 of 2 optimal" in lines[1] and "total 3.00 s" in lines[1]


def test_join_runs_milp_wherever_cpsat_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _calls(monkeypatch, bench_join, _join_result)
    rows = bench_join.run(quick=True)
    by = _exact_options(calls)
    assert len(by["milp"]) == len(by["cpsat"]) == sum(1 for r in rows if r["solver"] == "exact") > 0
    assert by["milp"] == by["cpsat"] and all(kw == {"slots": 0, "time_limit": 60, "workers": 1}
                                            for kw in by["milp"])
    assert {r["group"] for r in rows if r["solver"] == "milp"} == {"small"}
    calls.clear()
    rows = bench_join.run(quick=True, cpsat_medium=2.5)
    by = _exact_options(calls)
    assert by["milp"] == by["cpsat"] and {r["group"] for r in rows if r["solver"] == "milp"} == {"small", "medium"}
    assert any(kw == {"slots": 100, "time_limit": 2.5, "workers": 1} for kw in by["milp"])


def _table(name: str) -> list[dict[str, str]]:
    with open(ROOT / "results" / name, newline="") as f:
        return list(csv.DictReader(f))


def _same(a: str, b: str) -> bool:
    return a == b or (a != "" and b != "" and math.isclose(float(a), float(b), rel_tol=1e-9))


@pytest.mark.parametrize(("name", "cell", "value", "gap"), [
    ("bench_pipeline.csv", ("kind", "profile", "devices", "memory", "options"), "period_s", "gap_pct"),
    ("bench_join.csv", ("group", "instance", "budget_frac"), "makespan", "gap_to_exact_pct"),
])
def test_committed_tables_hold_milp_beside_cpsat(name: str, cell: tuple[str, ...], value: str, gap: str) -> None:
    exact: dict[tuple[str, ...], dict[str, dict[str, str]]] = defaultdict(dict)
    for r in _table(name):
        if r["solver"] in ("cpsat", "milp"):
            exact[tuple(r[k] for k in cell)][r["solver"]] = r
    assert exact and all(set(pair) == {"cpsat", "milp"} for pair in exact.values())
    for pair in exact.values():
        c, m = pair["cpsat"], pair["milp"]
        assert m["status"] == c["status"] and _same(m[value], c[value]), (c, m)
        assert float(m["solve_time_s"]) >= 0 and (m[gap] != "") == (c[gap] != "")
