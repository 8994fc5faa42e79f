"""`repair_sequence` (recomputations inserted into an order over the budget) and `dtr-orders` with it."""

from __future__ import annotations

import random

import pytest
from memsched.solvers import registry
from memsched.solvers.graph import Graph, generate, reference_peak, simulate
from memsched.solvers.graph.orders import candidate_orders, repair_sequence
from memsched.solvers.result import FEASIBLE


def _skip_chain() -> Graph:
    """a -> b -> c -> d -> z and a -> z: the only order keeps a (10) across the chain and peaks at
    10 + 5 + 5 = 20 when c is computed; recomputing a (a source) just before z peaks at
    a + d + z = 16, which is also the least possible (z needs a and d at once)."""
    return Graph(
        ["a", "b", "c", "d", "z"],
        [4.0, 1.0, 1.0, 1.0, 1.0],
        [10, 5, 5, 5, 1],
        [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)],
        name="skip-chain",
    )


def test_a_recomputation_fits_where_no_order_does():
    g = _skip_chain()
    assert reference_peak(g) == 20 and g.necessary_budget() == 16
    seq = repair_sequence(g, list(range(g.n)), 16, random.Random(0), moves=200)
    assert seq is not None
    sim = simulate(g, seq, 16)
    assert sim.valid and sim.peak_memory <= 16
    assert seq.count(0) == 2 and sim.makespan == pytest.approx(g.total_cpu() + 4.0)
    res = registry.solve("graph", g, "dtr-orders", 16)
    assert res.status == FEASIBLE and simulate(g, res.schedule, 16).valid


def test_repair_gives_up_below_the_lower_bound():
    g = _skip_chain()
    assert repair_sequence(g, list(range(g.n)), 15, random.Random(0), moves=300) is None


def test_copies_of_zero_bytes_are_not_candidates():
    """a (0 bytes) -> b -> c -> d and a -> d: at c, over the budget, the only copy alive that c
    does not read is a, whose recomputation frees nothing (the move's weights were all 0: a
    ValueError from random.choices, exit 3 in `memsched solve --solver dtr-orders`)."""
    edges = [(0, 1), (1, 2), (2, 3), (0, 3)]
    g = Graph(["a", "b", "c", "d"], [1.0, 1.0, 1.0, 1.0], [0, 5, 5, 1], edges, name="zero-copy")
    assert reference_peak(g) == 10
    assert repair_sequence(g, list(range(g.n)), 9, random.Random(0), moves=50) is None
    assert registry.solve("graph", g, "dtr-orders", 9).schedule is None


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("frac", [0.8, 0.65])
def test_repaired_schedules_replay_within_the_budget(seed, frac):
    g = generate.random_layered(40, seed)
    budget = max(int(reference_peak(g) * frac), g.necessary_budget())
    (peak, order), *_ = candidate_orders(g, tries=4, keep=1)
    seq = repair_sequence(g, order, budget, random.Random(seed), moves=400)
    if peak <= budget:
        assert seq == order  # nothing to repair
    if seq is not None:
        sim = simulate(g, seq, budget)
        assert sim.valid and sim.peak_memory <= budget
        assert sorted(set(seq)) == list(range(g.n))
        assert sim.makespan >= g.total_cpu()
    res = registry.solve("graph", g, "dtr-orders", budget)
    if res.status == FEASIBLE:
        assert simulate(g, res.schedule, budget).valid


def test_the_repair_is_exercised():
    """At least one of the cases above needs recomputation and gets it (the test is not vacuous)."""
    repaired = 0
    for seed in (0, 1, 2):
        g = generate.random_layered(40, seed)
        budget = max(int(reference_peak(g) * 0.65), g.necessary_budget())
        (peak, order), *_ = candidate_orders(g, tries=4, keep=1)
        seq = repair_sequence(g, order, budget, random.Random(seed), moves=400)
        repaired += peak > budget and seq is not None and len(seq) > g.n
    assert repaired >= 1
