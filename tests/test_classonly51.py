"""Checkmate's `infeasible` is a proof about its class (frontier-advancing schedules in the file's order), not
about the budget: where a schedule in another order fits, the answer and `memsched solve`'s line say so (hunt 51:
"smallest feasible budget: 25" where cpsat's schedule fits 24)."""
from __future__ import annotations

from conftest import run_cli
from memsched.solvers import registry
from memsched.solvers.graph.generate import random_dag
from memsched.solvers.graph.simulator import simulate


def test_checkmate_infeasible_names_its_class(tmp_path) -> None:
    graph = random_dag(6, 128, edge_prob=0.35, ram_range=(1, 9))
    budget = 24
    other = registry.solve("graph", graph, "cpsat", budget, time_limit=20)
    assert other.status == "optimal" and simulate(graph, other.schedule.indices(graph)).peak_memory <= budget
    res = registry.solve("graph", graph, "checkmate", budget, time_limit=20)
    assert res.status == "infeasible"
    assert "another order may" in res.details["class_only"] and "another order may" in res.message
    path = tmp_path / "g.json"
    graph.save(path)
    out = run_cli("solve", str(path), "--budget", str(budget), "--solver", "checkmate", "--time-limit", "20")
    assert out.code == 1
    line = out.err.strip().splitlines()[-1]
    assert "smallest feasible budget: 25" in line and "of Checkmate's class" in line and "cpsat" in line
