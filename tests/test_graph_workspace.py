"""Per-node workspaces W_v (memory alive only while v computes): the file field, the simulator's
rule, the exact models against brute force, and the fast solvers replayed honestly."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from conftest import with_workspace
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph, generate, reference_peak, simulate
from memsched.solvers.graph.brute import brute_force, brute_force_checkmate
from memsched.solvers.graph.cpsat import solve_cpsat
from memsched.solvers.graph.milp import solve_checkmate
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL


def _value(res) -> float | None:
    return res.objective if res.status == OPTIMAL else math.inf if res.status == INFEASIBLE else None


def test_simulator_charges_workspace_during_the_step_only():
    # 0 -> 1 -> 2 with sizes 4, 3, 2 and workspaces 5, 0, 7
    g = Graph.from_lists([1, 1, 1], [4, 3, 2], [(0, 1), (1, 2)], workspace=[5, 0, 7])
    sim = simulate(g, [0, 1, 2])
    assert list(sim.memory) == [4 + 5, 4 + 3, 3 + 2 + 7]
    assert sim.peak_memory == 12
    assert not simulate(g, [0, 1, 2], 11).valid and simulate(g, [0, 1, 2], 12).valid
    plain = Graph.from_lists([1, 1, 1], [4, 3, 2], [(0, 1), (1, 2)])
    assert list(simulate(plain, [0, 1, 2]).memory) == [4, 7, 5]
    assert g.necessary_budget() == 12 and plain.necessary_budget() == 7


def test_file_field_round_trip_and_validation(tmp_path):
    g = Graph.from_lists([1, 2], [4, 3], [(0, 1)], workspace=[0, 9])
    path = tmp_path / "g.json"
    g.save(path)
    data = json.loads(path.read_text())
    assert "workspace" not in data["nodes"][0] and data["nodes"][1]["workspace"] == 9
    back = Graph.load(path)
    assert list(back.workspace) == [0, 9]
    data["nodes"][1]["workspace"] = -1
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="workspace"):
        Graph.load(path)
    del data["nodes"][1]["workspace"]  # old files: no field, W = 0
    path.write_text(json.dumps(data))
    assert not Graph.load(path).has_workspace


CASES = [(4, seed) for seed in range(4)] + [(5, seed) for seed in (1, 2, 3)]  # (5, 0): slow brute force


@pytest.mark.parametrize("n, seed", CASES)
def test_exact_models_charge_workspace(n, seed):
    """cpsat (C = n) equals brute force over all sequences, checkmate's model equals brute force
    over its frontier-advancing schedules, with workspaces; every schedule replays within B."""
    g = with_workspace(generate.random_dag(n, seed), seed)
    need, ref = g.necessary_budget(), reference_peak(g)
    for budget in sorted({need - 1, need, (need + ref) // 2, ref}):
        best, _ = brute_force(g, budget)
        best_cm, _ = brute_force_checkmate(g, budget)
        cp = solve_cpsat(g, budget, slots=0, max_computations=n, time_limit=20, workers=1)
        cm = solve_checkmate(g, budget, slots=0, time_limit=20)
        assert _value(cp) == best, (budget, cp.status, cp.objective, best)
        status = cm.details.get("model_status", cm.status)
        if status not in ("not built",):
            model_obj = cm.details.get("model_objective", cm.objective)
            assert (model_obj if status == OPTIMAL else math.inf if status == INFEASIBLE else None) == best_cm
        for res in (cp, cm):
            if res.schedule is not None:
                sim = simulate(g, res.schedule, budget)
                assert sim.valid and sim.makespan == res.objective and sim.peak_memory == res.peak_memory


@pytest.mark.parametrize("seed", range(3))
def test_fast_solvers_replayed_and_exact_not_worse(seed):
    """Every fast solver's schedule, replayed with the workspaces, fits when it says so; the
    exact models are never slower than the best fast one."""
    g = with_workspace(generate.random_dag(6, seed + 10), seed)
    budget = (g.necessary_budget() + reference_peak(g)) // 2
    fast = []
    for name in ("checkpoint-all", "dtr", "dtr-orders", "greedy", "sqrt", "griewank", "checkmate-approx"):
        res = registry.solve("graph", g, name, budget)
        if res.status == FEASIBLE:
            sim = simulate(g, res.schedule, budget)
            assert sim.valid and sim.peak_memory <= budget
            fast.append(res.objective)
        elif res.schedule is not None:  # a schedule reported infeasible is indeed over
            assert simulate(g, res.schedule).peak_memory > budget
    for res in (solve_cpsat(g, budget, slots=0, time_limit=20, workers=1), solve_checkmate(g, budget, slots=0,
                                                                                         time_limit=20)):
        if fast:
            assert res.status in (OPTIMAL, FEASIBLE) and res.objective <= min(fast) + 1e-9


def test_slots_round_workspace_up():
    """With slots, the workspaces are rounded up like the sizes: a schedule found in slots fits
    the real budget."""
    g = with_workspace(generate.random_dag(5, 3), 3)
    g = dataclasses.replace(g, cost_ram=np.asarray(g.cost_ram) * 1000, workspace=np.asarray(g.workspace) * 1000)
    budget = (g.necessary_budget() + reference_peak(g)) // 2
    for res in (solve_cpsat(g, budget, slots=50, time_limit=20, workers=1),
                solve_checkmate(g, budget, slots=50, time_limit=20)):
        if res.schedule is not None:
            assert simulate(g, res.schedule, budget).valid
