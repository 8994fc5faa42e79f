"""checkmate-approx below the necessary budget answers the proof every graph solver gives
(`infeasible`, ``necessary_budget``), before its LP: the LP relaxation can be feasible there
(fractional recomputations), and a short time limit made the answer `timeout`."""

from __future__ import annotations

from pathlib import Path

import pytest

import memsched

GRAPHS = Path(__file__).resolve().parents[1] / "solvers" / "data" / "graphs"


@pytest.mark.parametrize("time_limit", [0.001, 5.0])
@pytest.mark.parametrize("name", ["linear10.json", "random_layered30.json"])
def test_below_the_necessary_budget_is_the_proof(name: str, time_limit: float) -> None:
    graph = memsched.load(str(GRAPHS / name))
    need = graph.necessary_budget()
    res = memsched.solve(graph, need - 1, solver="checkmate-approx", time_limit=time_limit)
    assert res.status == "infeasible"
    assert res.details["necessary_budget"] == need
    assert f"they need {need} at exact sizes" in res.message
    at = memsched.solve(graph, need, solver="checkmate-approx", time_limit=5.0)
    assert "necessary_budget" not in at.details  # at the necessary budget the LP runs
