"""Memory-aware orders, pruning, the `dtr-orders` heuristic and the cpsat order phase."""

from __future__ import annotations

import random

import pytest
from memsched.solvers import registry
from memsched.solvers.graph import Graph, generate, reference_peak, simulate
from memsched.solvers.graph.orders import (
    candidate_orders,
    improve_order,
    order_peak,
    prune_recomputations,
    random_memory_order,
)
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

GRAPHS = [generate.random_layered(30, 3), generate.random_dag(12, 4), generate.vgg16(), generate.linear_graph(6)]


def _topological(graph: Graph, order: list[int]) -> bool:
    pos = {v: t for t, v in enumerate(order)}
    return sorted(order) == list(range(graph.n)) and all(pos[u] < pos[w] for u, w in graph.edges)


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.name)
def test_order_peak_is_the_simulators_and_orders_are_topological(graph):
    rng = random.Random(0)
    for noise in (0.0, 0.3, 1.0):
        order = random_memory_order(graph, None, rng, noise)
        assert _topological(graph, order)
        assert order_peak(graph, order) == simulate(graph, order).peak_memory
    improved = improve_order(graph, order, None, rng, 200)
    assert _topological(graph, improved)
    assert order_peak(graph, improved) <= order_peak(graph, order)
    ranked = candidate_orders(graph, tries=6, keep=3, moves=50)
    assert [p for p, _ in ranked] == sorted(p for p, _ in ranked)
    assert ranked[0][0] <= reference_peak(graph)  # the file's order is a candidate


def _two_branches() -> Graph:
    """Two independent chains a0 -> a1 -> a2 and b0 -> b1 -> b2 whose file order interleaves
    them: the file's order peaks at 6 + 6 + 1 = 13 (computing a1 while b0 waits for b1); one
    branch after the other peaks at 6 + 1 = 7."""
    ids = ["a0", "b0", "a1", "b1", "a2", "b2"]
    ram = [6, 6, 1, 1, 1, 1]
    edges = [(0, 2), (2, 4), (1, 3), (3, 5)]
    return Graph(ids, [1.0] * 6, ram, edges, name="two-branches")


def test_an_order_that_fits_means_no_overhead():
    g = _two_branches()
    budget = 8
    assert reference_peak(g) > budget
    for name in ("dtr-orders", "cpsat"):
        res = registry.solve("graph", g, name, budget, slots=0, time_limit=10)
        assert res.status in (FEASIBLE, OPTIMAL), name
        assert res.objective == pytest.approx(g.total_cpu())
        assert simulate(g, res.schedule, budget).valid
    assert registry.solve("graph", g, "cpsat", budget, slots=0, time_limit=10).status == OPTIMAL


@pytest.mark.parametrize("frac", [0.9, 0.75, 0.6])
def test_dtr_orders_replays_and_pruning_never_slows(frac):
    g = generate.random_layered(40, 5)
    budget = int(reference_peak(g) * frac)
    res = registry.solve("graph", g, "dtr-orders", budget)
    assert res.status in (FEASIBLE, INFEASIBLE)
    if res.status == FEASIBLE:
        sim = simulate(g, res.schedule, budget)
        assert sim.valid and sim.makespan == pytest.approx(res.objective)
        seq = res.schedule.indices(g)
        padded = seq + [seq[-1]] if g.succs[seq[-1]] == [] else seq  # a wasted recomputation of a sink
        pruned = prune_recomputations(g, padded, budget)
        assert simulate(g, pruned, budget).valid
        assert simulate(g, pruned).makespan <= simulate(g, seq).makespan
    dtr = registry.solve("graph", g, "dtr", budget)
    if dtr.status == FEASIBLE:  # dtr-orders tries the file's order and memory_order too, and prunes
        assert res.status == FEASIBLE and res.objective <= dtr.objective + 1e-9


def test_exact_solvers_are_never_worse_than_dtr_orders():
    g = generate.random_layered(25, 7)
    budget = int(reference_peak(g) * 0.8)
    fast = registry.solve("graph", g, "dtr-orders", budget)
    for name in ("cpsat", "checkmate"):
        res = registry.solve("graph", g, name, budget, slots=0, time_limit=10)
        if fast.status == FEASIBLE:
            assert res.objective is not None and res.objective <= fast.objective + 1e-9, name
        if res.schedule is not None:
            assert simulate(g, res.schedule, budget).valid
