"""HiGHS's "Infeasible" is confirmed before memsched reports it (`solvers.exact.highs_runner`).

HiGHS 1.16's MIP presolve answered "Infeasible" on Checkmate's objective-free model of a feasible
5-node graph (the feasibility-only first phase of `checkmate` without a warm start): `checkmate`
with ``backend=highs`` then said ``infeasible`` where SCIP found the optimum 6 (schedule 0 1 2 3 2 4).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memsched.solvers.exact import highs_runner
from memsched.solvers.exact.linear import LinearModel
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.graph.brute import brute_force_checkmate
from memsched.solvers.graph.instance import Graph
from memsched.solvers.graph.milp import CheckmateModel
from memsched.solvers.graph.simulator import simulate

import memsched

pytestmark = pytest.mark.skipif(not highs_runner.available(), reason="highspy is not installed")


def highs5() -> Graph:
    """The hunt's graph: 5 nodes, unit costs; Checkmate's optimum at budget 13 is 6."""
    return Graph.from_lists([1.0] * 5, [4, 2, 4, 5, 3], [(0, 1), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (2, 4)],
                            name="highs5")


def no_checkmate_schedule() -> Graph:
    """A graph with no Checkmate schedule at budget 11 although every node fits with its inputs
    (necessary budget 11; the brute force's first budget is 12)."""
    return Graph.from_lists([1.0] * 5, [5, 5, 5, 2, 4], [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4)], name="noschedule")


def test_the_hunt_instance_is_optimal_with_highs_and_no_warm_start():
    g = highs5()
    res = memsched.solve(g, 13, "checkmate", slots=0, backend="highs", warm_start=False, time_limit=60)
    assert res.status == "optimal", (res.status, res.message, res.details)
    assert res.makespan == 6
    assert simulate(g, res.schedule, 13).valid
    assert brute_force_checkmate(g, 13)[0] == 6


def test_the_runner_does_not_believe_presolve_on_the_objective_free_model():
    """The model HiGHS's presolve called infeasible, through the runner: a solution that fits."""
    cm = CheckmateModel(highs5(), highs5().cost_ram, 13)
    run = highs_runner.run_highspy(cm.model, Deadline(60), ExactOptions(), rel_gap=1e-9, feasibility_only=True)
    assert run.status != "infeasible", run.backend_status
    assert run.values is not None and not cm.model.violated(run.values)
    assert simulate(highs5(), cm.sequence(run.values), 13).valid


def test_a_truly_infeasible_checkmate_model_stays_infeasible_through_highs():
    g = no_checkmate_schedule()
    assert g.necessary_budget() == 11 and math.isinf(brute_force_checkmate(g, 11)[0])
    res = memsched.solve(g, 11, "checkmate", slots=0, backend="highs", warm_start=False, time_limit=60)
    assert res.status == "infeasible", (res.status, res.message)
    run = highs_runner.run_highspy(CheckmateModel(g, g.cost_ram, 11).model, Deadline(60), ExactOptions(),
                                   rel_gap=1e-9)
    assert run.status == "infeasible" and run.values is None
    # with presolve HiGHS 1.16 answers "Solve error" here (its postsolved point breaks a row): no proof either way
    assert run.backend_status.endswith("; presolve off: Infeasible"), run.backend_status


def test_an_integer_infeasible_model_with_a_feasible_relaxation_is_infeasible():
    """2x + 2y = 1 in integers: the LP relaxation fits, so the run without presolve must branch."""
    m = LinearModel()
    x, y = m.var(0, 5, True), m.var(0, 5, True)
    m.add([x, y], [2.0, 2.0], 1.0, 1.0)
    m.objective = {x: 1.0}
    for feasibility_only in (False, True):
        run = highs_runner.run_highspy(m, Deadline(30), ExactOptions(), rel_gap=1e-9,
                                       feasibility_only=feasibility_only)
        assert run.status == "infeasible", run.backend_status
        assert run.backend_status.endswith("presolve off: Infeasible")


def test_a_known_feasible_start_makes_no_second_run():
    """With a feasible start known, "Infeasible" is no proof anyway (``timeout``): nothing to confirm."""
    m = LinearModel()
    x, y = m.var(0, 5, True), m.var(0, 5, True)
    m.add([x, y], [2.0, 2.0], 1.0, 1.0)
    run = highs_runner.run_highspy(m, Deadline(30), ExactOptions(), rel_gap=1e-9, hint_feasible=True)
    assert run.status == "timeout" and run.backend_status == "highspy: Infeasible"


@st.composite
def tiny_dags(draw: st.DrawFn) -> tuple[Graph, int]:
    """(a DAG of 3 to 6 nodes in topological order, sizes 1..5, costs 1..3, a budget from its necessary
    budget to the sum of its sizes)."""
    n = draw(st.integers(3, 6))
    edges = set()
    for k in range(1, n):
        edges.add((draw(st.integers(0, k - 1)), k))
        edges |= {(i, k) for i in range(k) if draw(st.booleans())}
    sizes = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    costs = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    g = Graph.from_lists([float(c) for c in costs], sizes, sorted(edges), name="tiny")
    budget = draw(st.integers(g.necessary_budget(), max(g.necessary_budget(), sum(sizes))))
    return g, budget


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_dags())
def test_highs_and_scip_agree_on_tiny_dags(case: tuple[Graph, int]):
    g, budget = case
    answers = {backend: memsched.solve(g, budget, "checkmate", slots=0, backend=backend, warm_start=False,
                                       time_limit=60) for backend in ("highs", "scip")}
    highs, scip = answers["highs"], answers["scip"]
    assert scip.status in ("optimal", "infeasible")
    assert highs.status == scip.status, (highs.message, highs.details, g.edges, list(g.cost_ram), budget)
    if scip.status == "optimal":
        assert highs.makespan == pytest.approx(scip.makespan)
    # the objective-free model, as the feasibility phase gives it to HiGHS
    cm = CheckmateModel(g, g.cost_ram, budget)
    run = highs_runner.run_highspy(cm.model, Deadline(60), ExactOptions(), rel_gap=1e-9, feasibility_only=True)
    assert (run.status == "infeasible") == (scip.status == "infeasible"), run.backend_status
