"""Property test: the exact graph models (`cpsat`, `checkmate`) against the brute forces of
`solvers/graph/brute.py` on small random DAGs, at budgets that mostly admit a schedule.

Scopes (docs/graph.md): `brute_force` is the least makespan over every sequence of at most 2n
computations; `cpsat` with C = 2n computations per node covers all of those (a sequence of 2n
computations runs a node at most n + 1 <= 2n times), so its optimum is at most the brute force's,
and on these graphs it is equal (observed, as in test_crosscheck_strength.py with C = n).
`brute_force_checkmate` enumerates exactly Checkmate's scope (frontier-advancing schedules in the
file's order, each node at most once per stage), so `checkmate` without a warm start equals it.
Budgets run from the necessary budget N = max_v (M_v + W_v + sum_{u in DEPS[v]} M_u) up to the
store-all peak (memory units), with some at N - 1, where nothing fits.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memsched.solvers.errors import InputError
from memsched.solvers.graph.brute import brute_force, brute_force_checkmate
from memsched.solvers.graph.generate import random_dag
from memsched.solvers.graph.instance import Graph
from memsched.solvers.graph.simulator import simulate
from memsched.solvers.registry import get_problem, solve
from memsched.solvers.result import INFEASIBLE, OPTIMAL

#: the fast (no optimality claim) graph solvers; `griewank` and `sqrt` only fit some graphs
FAST_SOLVERS = ("checkpoint-all", "dtr", "dtr-orders", "sqrt", "greedy", "griewank", "checkmate-approx")


def roomy_dag(n: int, seed: int, edge_prob: float) -> Graph:
    """`random_dag(n, s, edge_prob=...)` for the first s >= `seed` (of 200) whose necessary budget is
    below the store-all peak, so that budgets in between need recomputation or another order; with
    none, `random_dag(n, seed)` (its only interesting budget is the peak)."""
    peak_of = get_problem("graph").reference_peak
    for s in range(seed, seed + 200):
        g = random_dag(n, s, edge_prob=edge_prob)
        if g.necessary_budget() < peak_of(g):
            return g
    return random_dag(n, seed, edge_prob=edge_prob)


def check_schedule(graph: Graph, budget: int, res) -> None:
    """The answer's schedule replays within `budget` at its objective."""
    assert res.schedule is not None, (res.solver, res.status)
    sim = simulate(graph, res.schedule, budget)
    assert sim.valid and sim.peak_memory <= budget, (res.solver, sim.violation)
    assert sim.makespan == pytest.approx(res.objective), res.solver


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(4, 5), seed=st.integers(0, 10_000), edge_prob=st.sampled_from([0.2, 0.4]),
       frac=st.floats(-0.15, 1.0))
def test_exact_graph_models_equal_brute_force(n: int, seed: int, edge_prob: float, frac: float) -> None:
    """`cpsat` (C = 2n) equals the brute force over all sequences, `checkmate` without warm start the one
    over its scope; both (warm-started) are at most every fast solver, and every schedule replays.
    With 3 nodes `random_dag` leaves no room below store-all (necessary budget = peak in 40 of 40
    seeds), hence n in 4..5."""
    g = roomy_dag(n, seed, edge_prob)
    need, peak = g.necessary_budget(), get_problem("graph").reference_peak(g)
    if frac < 0:  # below the necessary budget: proven infeasible, no brute force needed
        budget = need - 1
        for solver, opts in (("cpsat", {"max_computations": 2 * n}), ("checkmate", {})):
            res = solve("graph", g, solver, budget, slots=0, time_limit=20, **opts)
            assert res.status == INFEASIBLE and res.schedule is None, solver
        return
    budget = need + int(frac * (peak - need))  # need <= budget <= peak, below the peak when frac < 1
    best, _ = brute_force(g, budget)
    best_cm, _ = brute_force_checkmate(g, budget)
    assert best <= best_cm  # Checkmate's scope is a subset of all sequences
    cpsat = solve("graph", g, "cpsat", budget, slots=0, time_limit=20, max_computations=2 * n)
    cm_cold = solve("graph", g, "checkmate", budget, slots=0, time_limit=20, warm_start=False)
    cm = solve("graph", g, "checkmate", budget, slots=0, time_limit=20)
    if math.isinf(best):
        for res in (cpsat, cm_cold, cm):
            assert res.status == INFEASIBLE and res.schedule is None, res.solver
        return
    assert cpsat.status == OPTIMAL and cpsat.objective == pytest.approx(best)
    check_schedule(g, budget, cpsat)
    if math.isinf(best_cm):
        assert cm_cold.status == INFEASIBLE and cm_cold.schedule is None
    else:
        assert cm_cold.status == OPTIMAL and cm_cold.objective == pytest.approx(best_cm)
        check_schedule(g, budget, cm_cold)
    # warm-started, `checkmate` returns the better of its model's optimum and its seed's schedule
    check_schedule(g, budget, cm)
    assert best - 1e-9 <= cm.objective <= best_cm + 1e-9
    for name in FAST_SOLVERS:
        try:
            fast = solve("graph", g, name, budget)
        except InputError:  # a solver for another graph shape
            continue
        if fast.schedule is None:
            continue
        check_schedule(g, budget, fast)
        assert cpsat.objective <= fast.objective + 1e-9, name
        assert cm.objective <= fast.objective + 1e-9, name
