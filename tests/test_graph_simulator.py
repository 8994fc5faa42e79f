"""The graph simulator (docs/graph.md): memory rule, violations, schedule JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import simulate as chain_simulate
from memsched.solvers.chain.baselines import recompute_all_schedule, store_all_schedule
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph, GraphSchedule, generate, replay, simulate
from memsched.solvers.graph.brute import brute_force


def diamond() -> Graph:
    """a -> b, a -> c, b -> d, c -> d (sizes 1, 2, 3, 4; costs 1, 2, 3, 4)."""
    return Graph.from_lists([1, 2, 3, 4], [1, 2, 3, 4], [(0, 1), (0, 2), (1, 3), (2, 3)])


def test_memory_rule_by_hand():
    g = diamond()
    sim = simulate(g, [0, 1, 2, 3])
    # step 0: a; step 1: a + b; step 2: a (used now) + b + c; step 3: b + c + d (a freed after step 2)
    assert sim.memory.tolist() == [1, 3, 6, 9]
    assert sim.peak_memory == 9 and sim.makespan == 10 and sim.valid
    # recompute a before c: the first copy of a dies after b, the second lives until c
    sim = simulate(g, [0, 1, 0, 2, 3])
    assert sim.memory.tolist() == [1, 3, 3, 6, 9]
    assert sim.makespan == 11


def test_sinks_are_freed_at_once():
    g = Graph.from_lists([1, 1, 1], [5, 1, 1], [(1, 2)])  # node 0 is an isolated sink
    assert simulate(g, [0, 1, 2]).memory.tolist() == [5, 1, 2]


def test_violations_are_named():
    g = diamond()
    assert "needs predecessor 0" in simulate(g, [1, 0, 2, 3]).violation
    assert "node 3 is never computed" in simulate(g, [0, 1, 2]).violation
    v = simulate(g, [0, 1, 2, 3], budget=8).violation
    assert v.startswith("step 3") and "exceeds the budget 8" in v
    assert replay(g, GraphSchedule([0, 1, 2, 3]), 9).violation is None


def test_schedule_json_roundtrip(tmp_path):
    g = Graph(["x", "y"], [1.0, 1.0], [1, 1], [(0, 1)])
    sched = GraphSchedule.from_indices(g, [0, 1])
    data = sched.to_json()
    assert data == {"format": "memsched.schedule/1", "problem": "graph", "sequence": ["x", "y"]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    assert GraphSchedule.load(str(path)).indices(g) == [0, 1]
    with pytest.raises(InputError, match="unknown node"):
        GraphSchedule(["z"]).indices(g)


@pytest.mark.parametrize("seed", range(4))
def test_chain_graphs_charge_what_the_chain_simulator_charges(seed):
    """With tapes equal to outputs and no overheads, a chain's graph charges the chain
    simulator's memory minus the resident input x[0] (generate.from_chain)."""
    chain = random_chain(5, seed, tape_factor=(1.0, 1.0))
    g = generate.from_chain(chain)
    L = chain.length
    fwd = list(range(L))
    loss, back = L, list(range(L + 1, 2 * L + 1))  # B_{L-1} .. B_0
    sim = simulate(g, fwd + [loss] + back)
    ref = chain_simulate(chain, store_all_schedule(L))
    assert sim.peak_memory + int(chain.x[0]) == ref.peak_memory
    assert sim.makespan == pytest.approx(ref.makespan)
    # recompute-all: forward without keeping, then for each B_i recompute F_0..F_i
    seq = fwd + [loss]
    for i in reversed(range(L)):
        seq += list(range(i)) + [i] if i < L - 1 else []
        seq.append(back[L - 1 - i])
    rsim = simulate(g, seq)
    cref = chain_simulate(chain, recompute_all_schedule(L))
    assert rsim.valid
    assert rsim.peak_memory + int(chain.x[0]) <= cref.peak_memory


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 5))
def test_brute_force_optimum_replays(seed, n):
    g = generate.random_dag(n, seed)
    budget = int(simulate(g, list(range(n))).peak_memory)
    value, seq = brute_force(g, budget)
    sim = simulate(g, seq, budget)
    assert sim.valid and sim.makespan == value == g.total_cpu()


def test_a_graph_schedule_prints_its_node_ids():
    """`memsched solve` prints ``str(schedule)``: the node ids separated by spaces, as chain schedules print."""
    assert str(GraphSchedule(["conv1", 2, "relu"])) == "conv1 2 relu"
