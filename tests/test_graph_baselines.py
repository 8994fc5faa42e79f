"""Graph baselines, the LP bound and Checkmate's LP rounding."""

from __future__ import annotations

import pytest
from memsched.solvers import registry
from memsched.solvers.graph import SOLVERS, Graph, generate, reference_peak, simulate
from memsched.solvers.graph.baselines import articulation_points, dtr_sequence, griewank_sequence, memory_order
from memsched.solvers.graph.lp_bounds import lp_bound
from memsched.solvers.graph.milp import solve_checkmate
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

BASELINES = ["checkpoint-all", "dtr", "sqrt", "greedy", "griewank", "checkmate-approx"]


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("graph", [generate.linear_graph(8), generate.vgg16(), generate.random_layered(20, 1)],
                         ids=["linear8", "vgg16", "rl20"])
def test_baselines_replay_or_say_what_they_need(name, graph):
    ref = reference_peak(graph)
    for frac in (1.0, 0.8):
        budget = int(ref * frac)
        res = registry.solve("graph", graph, name, budget)
        assert res.status in (FEASIBLE, INFEASIBLE)
        if res.status == FEASIBLE:
            assert res.peak_memory <= budget
            assert res.objective >= graph.total_cpu() - 1e-9
        elif res.min_budget is not None:
            assert res.min_budget > budget


def test_checkpoint_all_is_the_reference():
    g = generate.vgg16()
    res = registry.solve("graph", g, "checkpoint-all", reference_peak(g))
    assert res.peak_memory == reference_peak(g) and res.objective == pytest.approx(g.total_cpu())


def test_all_solvers_registered():
    names = {n for _, n, _ in registry.solver_table("graph")}
    assert set(SOLVERS) <= names


def test_dtr_fits_or_gives_up():
    g = generate.random_layered(40, 5)
    ref = reference_peak(g)
    for frac in (0.95, 0.9, 0.8):
        for order in (None, memory_order(g)):
            seq = dtr_sequence(g, int(ref * frac), order=order)
            if seq is not None:
                assert simulate(g, seq, int(ref * frac)).valid


def test_chen_and_griewank_structure():
    lin = generate.linear_graph(9)
    assert len(articulation_points(lin)) == 8  # every forward node but the last
    res = generate.resnet((1, 1, 1, 1))
    assert 0 < len(articulation_points(res)) < sum(not b for b in res.backward)
    assert griewank_sequence(res, 3) is None
    for s in (1, 2, 4):
        sim = simulate(lin, griewank_sequence(lin, s))
        assert sim.valid
    assert simulate(lin, griewank_sequence(lin, 1)).makespan > simulate(lin, griewank_sequence(lin, 4)).makespan


def _edited(graph: Graph, add: tuple[tuple[str, str], ...] = (), flip: tuple[str, ...] = ()) -> Graph:
    """`graph` with links added between the named nodes and the named nodes' backward flags flipped."""
    data = graph.to_dict()
    ids = {node["name"]: node["id"] for node in data["nodes"]}
    data["links"] += [{"source": ids[u], "target": ids[v]} for u, v in add]
    for node in data["nodes"]:
        node["backward"] = node["backward"] != (node["name"] in flip)
    return Graph.from_dict(data)


def test_griewank_runs_a_backward_node_after_its_backward_inputs():
    """grad_f1 reads f8 (its latest forward input) and grad_f2, which runs at f2's position: it
    must run there too, after grad_f2 (a fuzzed file once gave griewank an invalid sequence)."""
    g = _edited(generate.linear_graph(9), add=(("f8", "grad_f1"),))
    for s in (1, 2, 4):
        assert simulate(g, griewank_sequence(g, s)).valid
    res = registry.solve("graph", g, "griewank", reference_peak(g))
    assert res.status == FEASIBLE


@pytest.mark.parametrize("name", ["sqrt", "greedy", "griewank"])
def test_segment_baselines_refuse_a_forward_node_fed_by_a_backward_one(name):
    """They run every forward node first: grad_f0 flagged forward reads the backward node grad_f1,
    so there is no such schedule, and the answer says why (it once raised an internal error)."""
    g = _edited(generate.linear_graph(6), flip=("grad_f0",))
    res = registry.solve("graph", g, name, reference_peak(g))
    assert res.schedule is None and res.status == INFEASIBLE
    assert "'grad_f0'" in res.message and "'grad_f1'" in res.message


def test_lp_bound_below_checkmate_and_approx_above():
    g = generate.random_layered(15, 4)
    budget = int(0.85 * reference_peak(g))
    # Checkmate's own optimum: no warm start, so that the model is built even when a fast schedule
    # outside its class computes every node once (the exact layer would return that one)
    exact = solve_checkmate(g, budget, slots=0, time_limit=30, warm_start=False)
    assert exact.status == OPTIMAL
    checkmate_opt = exact.details.get("model_objective", exact.objective)
    assert exact.objective <= checkmate_opt
    bound = lp_bound(g, budget)
    assert g.total_cpu() - 1e-6 <= bound <= checkmate_opt + 1e-6
    approx = registry.solve("graph", g, "checkmate-approx", budget)
    if approx.status == FEASIBLE:
        assert approx.objective >= checkmate_opt - 1e-9
        assert approx.lower_bound <= checkmate_opt + 1e-6


def test_lp_rounding_stops_at_its_time_limit_and_then_claims_no_infeasibility(monkeypatch):
    """The roundings after the LP count against the limit; those not tried make "timeout", not "infeasible"."""
    import time

    from memsched.solvers.graph import lp_bounds

    g = generate.random_layered(20, 1)
    real_lp, real_r = lp_bounds.lp_relaxation, lp_bounds.r_given_s

    def slow_lp(*a, deadline, **k):
        out = real_lp(*a, deadline=deadline, **k)
        time.sleep(max(0.0, deadline.left() - 0.3))  # the LP used all but 0.3 s
        return out

    def slow_rounding(graph, S):
        time.sleep(0.2)
        return real_r(graph, S)

    monkeypatch.setattr(lp_bounds, "lp_relaxation", slow_lp)
    monkeypatch.setattr(lp_bounds, "r_given_s", slow_rounding)
    budget = g.necessary_budget() + 1  # below what any rounding reaches (41), not below the necessary budget
    res = lp_bounds.solve_checkmate_approx(g, budget, time_limit=3.0)
    tried, of = (int(x) for x in res.details["roundings_tried"].split(" of "))
    assert 1 <= tried < of
    assert res.solve_time_s <= 3.0 + 0.5
    assert res.status == "timeout"  # with every rounding tried it says infeasible (none fits at 50%)
    assert res.schedule is None and "time limit" in res.message


def test_lp_rounding_reports_the_lp_value_as_bound_only_when_the_lp_is_optimal(monkeypatch):
    from memsched.solvers.graph import lp_bounds

    g = generate.random_layered(20, 1)
    budget = int(reference_peak(g) * 0.9)
    solved = lp_bounds.solve_checkmate_approx(g, budget)
    assert solved.details["lp_status"] == "optimal" and solved.lower_bound >= g.total_cpu()
    real = lp_bounds.lp_relaxation

    def stopped_early(*a, **k):
        value, cm, values, _ = real(*a, **k)
        return value + 1e6, cm, values, "feasible"  # a primal point's value, not a bound

    monkeypatch.setattr(lp_bounds, "lp_relaxation", stopped_early)
    res = lp_bounds.solve_checkmate_approx(g, budget)
    assert res.details["lp_status"] == "feasible" and res.lower_bound == g.total_cpu()
