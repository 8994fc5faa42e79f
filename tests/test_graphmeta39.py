"""graph.meta.input_size is checked as the executor's other meta keys, and no graph solver nor the
smallest-budget search claims a schedule may exist below `Graph.necessary_budget` (docs/graph.md,
"Budget semantics")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memsched.experiments.commands._infeasible import find_min_budget
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph
from memsched.solvers.graph.generate import linear_graph

NECESSARY = "some node and its inputs do not fit the budget together (they need {} at exact sizes)"


def _graph_data(meta: dict[str, Any]) -> dict[str, Any]:
    """A 3-node chain a -> b -> c (1000 bytes each: its necessary budget is 2000) with `meta`."""
    return {"directed": True, "multigraph": False, "graph": {"name": "chain3", "meta": meta},
            "nodes": [{"id": i, "name": f"n{i}", "cost_cpu": 1.0, "cost_ram": 1000} for i in range(3)],
            "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}]}


# ---------------------------------------------------------------- bug 1: graph.meta.input_size
@pytest.mark.parametrize("value", ["x", [64], 64.9, -64, True, float("inf")])
def test_bad_input_size_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(InputError) as err:
        Graph.from_dict(_graph_data({"input_size": value}), path="g.json")
    assert "graph.meta.input_size" in str(err.value)
    assert "must be an integer number of bytes >= 0" in str(err.value)


@pytest.mark.parametrize("value", [0, 64, 64.0, None])
def test_good_input_size_is_kept(value: Any) -> None:
    g = Graph.from_dict(_graph_data({"input_size": value}), path="g.json")
    assert g.meta["input_size"] == value
    g.check()


def test_graph_check_refuses_bad_input_size() -> None:
    g = Graph.from_dict(_graph_data({}), path="g.json")
    g.meta["input_size"] = "x"
    with pytest.raises(InputError, match=r"graph\.meta\.input_size"):
        g.check(path="g.json")


@pytest.mark.parametrize("value", ["x", 64.9])
def test_memsched_run_exits_2_naming_input_size(tmp_path: Path, value: Any) -> None:
    """`memsched run` on a graph with a bad input_size: exit 2 with FILE: graph.meta.input_size (no
    internal error, no silent truncation); refused when the file is read, before any network is built."""
    path = tmp_path / "g.json"
    meta = {"units": {"memory": "bytes"}, "model": "gpt2", "input_size": value}
    path.write_text(json.dumps(_graph_data(meta)))
    proc = subprocess.run([sys.executable, "-m", "memsched", "run", str(path), "--budget", "100%"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"{path}: graph.meta.input_size: must be an integer number of bytes >= 0" in proc.stderr
    assert "internal error" not in proc.stderr


# ---------------------------------------------------------------- bug 2: below the necessary budget
@pytest.fixture(scope="module")
def training() -> Graph:
    """A 4-layer training chain of 1000-byte outputs: necessary budget 4000, where dtr finds a schedule."""
    g = linear_graph(4, cost_ram=1000)
    assert g.necessary_budget() == 4000
    return g


@pytest.mark.parametrize("solver", ["dtr", "checkpoint-all", "sqrt", "greedy", "griewank", "dtr-orders"])
def test_baselines_below_necessary_give_the_proof(training: Graph, solver: str) -> None:
    res = registry.solve("graph", training, solver, 1000)
    assert res.status == "infeasible"
    assert res.message.startswith(NECESSARY.format(4000))
    assert "not a proof" not in res.message
    assert res.details["necessary_budget"] == 4000


def test_dtr_failure_above_necessary_stays_a_heuristic_failure() -> None:
    """a -> b, a -> c, (b, c) -> d: necessary 2001 (d with b and c), but every schedule holds a, b, c."""
    data = {"directed": True, "multigraph": False, "graph": {"name": "fork"},
            "nodes": [{"id": i, "cost_cpu": 1.0, "cost_ram": m} for i, m in enumerate((1000, 1000, 1000, 1))],
            "links": [{"source": u, "target": v} for u, v in ((0, 1), (0, 2), (1, 3), (2, 3))]}
    g = Graph.from_dict(data)
    assert g.necessary_budget() == 2001
    res = registry.solve("graph", g, "dtr", 2500)
    assert res.status == "infeasible" and "a heuristic's failure, not a proof" in res.message
    find_min_budget("graph", g, res, {})
    note = res.details["min_budget_note"]
    assert res.min_budget is None and "an upper bound only" in note and "down to 2001 bytes may work" in note
    untried = int(note.split(" budgets below it untried")[0].rsplit(" ", 1)[1])
    assert untried < 3000 - 2001  # counted from the necessary budget, not from 0


@pytest.mark.parametrize("budget", [1000, 3999])
def test_dtr_min_budget_at_the_necessary_budget_is_proven(training: Graph, budget: int) -> None:
    res = registry.solve("graph", training, "dtr", budget)
    assert res.status == "infeasible" and res.min_budget is None
    find_min_budget("graph", training, res, {})
    assert res.min_budget == 4000
    assert "min_budget_note" not in res.details
    assert "none below it" in res.details["min_budget_method"]


def test_solve_cli_dtr_below_necessary(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_graph_data({})))
    proc = subprocess.run([sys.executable, "-m", "memsched", "solve", str(path), "--solver", "dtr", "--budget", "5",
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["message"] == NECESSARY.format(2000)
    assert "smallest feasible budget: 2000 bytes" in proc.stderr
    assert "upper bound only" not in proc.stderr
