"""checkmate-approx's lower bound is proven, not HiGHS's primal value (lp_bounds.lp_relaxation, dual_bound).

The bound was the value of HiGHS's "optimal" point of Checkmate's relaxation; with costs from 1e-3 to
1e9 (sizes 1..1e12 bytes under a budget scaled to 1000) HiGHS's absolute tolerances let that point sit
above the relaxation's optimum: 1000000006.002 claimed where checkmate, cpsat and dtr replay
1000000005.002. Now the bound is weak duality from HiGHS's row duals, recomputed on the exact model
with rounding error bounds, so any multipliers give a valid bound; on ordinary graphs it is as tight.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memsched.solvers.exact.options import Deadline
from memsched.solvers.graph import lp_bounds
from memsched.solvers.graph.brute import brute_force_checkmate
from memsched.solvers.graph.instance import Graph
from memsched.solvers.graph.simulator import simulate
from memsched.solvers.registry import get_solver

import memsched

#: the hunt's two reproductions: (costs, sizes, edges, budget)
REPRO_CM = ([1, 1, 1, 1, 1e-3, 1e-3, 1e9], [10**12, 1, 10**12, 3, 1, 3, 1],
            [(0, 1), (1, 2), (2, 3), (3, 4), (2, 4), (1, 4), (4, 5), (1, 5), (0, 5), (5, 6), (0, 6)], 1500000000003)
G_SPAN = ([0.001, 0.001, 7, 1e9, 3, 0.001, 2.5, 1, 1e6], [1, 10**12, 7, 10**9, 3, 10**12, 3, 1, 10**6],
          [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (3, 5), (2, 5), (5, 6), (2, 6), (1, 6), (6, 7), (1, 7), (0, 7),
           (7, 8), (0, 8)], 2000000000500)
SIZES = (1, 2, 3, 7, 1000, 10**6, 10**9, 10**12)
COSTS = (1e-3, 1.0, 2.5, 7.0, 1e3, 1e6, 1e9)


def _write(tmp_path: Path, costs: list[float], sizes: list[int], edges: list[tuple[int, int]]) -> Path:
    n = len(costs)
    data = {"directed": True, "multigraph": False, "graph": {"name": "span"},
            "nodes": [{"id": i, "cost_cpu": c, "cost_ram": r, "backward": i >= n // 2}
                      for i, (c, r) in enumerate(zip(costs, sizes))],
            "links": [{"source": s, "target": t} for s, t in edges]}
    path = tmp_path / "span.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("case", (REPRO_CM, G_SPAN), ids=("repro_cm", "g_span"))
def test_bound_is_below_every_replayed_schedule(tmp_path: Path, case) -> None:
    costs, sizes, edges, budget = case
    path = _write(tmp_path, costs, sizes, edges)
    approx = memsched.solve(path, budget, solver="checkmate-approx", slots=0, time_limit=30)
    assert approx.status == "feasible" and approx.raw.details["lp_status"] == "optimal"
    bound = approx.lower_bound
    assert bound is not None and bound >= sum(costs) * (1 - 1e-12)
    for solver in ("checkmate-approx", "checkmate", "cpsat", "dtr"):
        res = approx if solver == "checkmate-approx" else memsched.solve(path, budget, solver=solver, slots=0,
                                                                          time_limit=30)
        replay = memsched.simulate(path, res.schedule, budget=budget)
        assert replay.status == "valid", solver
        assert bound <= replay.makespan, (solver, bound, replay.makespan)


def test_small_sizes_with_large_costs() -> None:
    """Not the sizes alone: a 3-node chain of sizes 3, 2, 1000 with costs 1e-3, 1e9, 7 had the bound
    1000000007.002 over Checkmate's optimum 1000000007.001."""
    g = Graph.from_lists([1e-3, 1e9, 7.0], [3, 2, 1000], [(0, 1), (1, 2)])
    best, _ = brute_force_checkmate(g, 1002)
    value, _, _, status = lp_bounds.lp_relaxation(g, 1002, time_limit=20)
    assert status == "optimal" and value is not None and value <= best
    res = get_solver("graph", "checkmate-approx")(g, 1002, slots=0, time_limit=20)
    assert res.lower_bound is not None and res.lower_bound <= best


@st.composite
def spanning_graphs(draw) -> tuple[Graph, int]:
    """3..5 nodes (a path plus random forward edges), sizes 1..1e12, costs 1e-3..1e9, and a budget from
    the necessary one (plus a few bytes) to just below running in order."""
    n = draw(st.integers(3, 5))
    edges = [(i, i + 1) for i in range(n - 1)]
    edges += [(i, k) for k in range(2, n) for i in range(k - 1) if draw(st.booleans())]
    g = Graph.from_lists([draw(st.sampled_from(COSTS)) for _ in range(n)],
                         [draw(st.sampled_from(SIZES)) for _ in range(n)], edges,
                         workspace=[draw(st.sampled_from((0, 0, 0, 1, 1000, 10**9))) for _ in range(n)])
    need = g.necessary_budget()
    peak = simulate(g, list(range(n))).peak_memory
    budget = draw(st.sampled_from((need, need + 1, need + 3, (need + peak) // 2, max(need, peak - 1))))
    return g, budget


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(spanning_graphs())
def test_bound_never_exceeds_checkmates_brute_force_optimum(case: tuple[Graph, int]) -> None:
    g, budget = case
    best, _ = brute_force_checkmate(g, budget)
    value, _, _, status = lp_bounds.lp_relaxation(g, budget, time_limit=20)
    if not math.isfinite(best):
        return  # no Checkmate schedule fits: any bound is valid
    assert status != "infeasible"
    if status == "optimal":
        assert value is not None and value <= best, (value, best)
    bound = lp_bounds.lp_bound(g, budget, time_limit=20)
    assert bound is None or bound <= best


def test_any_multipliers_give_a_valid_bound() -> None:
    """Weak duality for any row multipliers (wrong-signed ones clipped): HiGHS's duals perturbed, or 0."""
    costs, sizes, edges, budget = REPRO_CM
    g = Graph.from_lists([float(c) for c in costs], sizes, edges)
    cm = lp_bounds.CheckmateModel(g, g.cost_ram.astype(float), float(budget), W=g.workspace.astype(float))
    lp = lp_bounds.Relaxation(cm, budget, Deadline(None))
    status, _, duals = lp.solve(Deadline(20))
    assert status == "optimal" and duals is not None
    exact = 1000000005.002  # checkmate's optimum here, replayed (test above)
    assert lp_bounds.dual_bound(lp, duals) <= exact
    rng = np.random.default_rng(0)
    for noise in (1e-9, 1e-3, 1.0, 1e6):
        y = duals + noise * rng.standard_normal(len(duals)) * np.maximum(1.0, np.abs(duals))
        z = lp_bounds.dual_bound(lp, y)
        assert z is None or z <= exact
    zero = lp_bounds.dual_bound(lp, np.zeros(len(duals)))
    assert zero is not None and zero <= g.total_cpu() and zero == pytest.approx(g.total_cpu(), rel=1e-12)


@pytest.mark.parametrize("name, frac", (("linear10.json", 0.7), ("random_layered30.json", 0.7),
                                         ("vgg16_like.json", 0.5)))
def test_the_proven_bound_is_as_tight_as_the_lp_value_on_ordinary_graphs(name: str, frac: float) -> None:
    g = Graph.load(Path(lp_bounds.__file__).parents[1] / "data" / "graphs" / name)
    budget = int(frac * simulate(g, list(range(g.n))).peak_memory)
    value, cm, values, status = lp_bounds.lp_relaxation(g, budget, time_limit=30)
    assert status == "optimal" and value is not None and cm is not None and values is not None
    primal = cm.model.value(values)  # HiGHS's point: at the optimum within its tolerances
    assert value <= primal and value == pytest.approx(primal, rel=1e-9)


def test_presolve_infeasible_is_checked_again() -> None:
    """HiGHS's presolve called this relaxation infeasible (a 1e12 workspace) though Checkmate's optimum 15.2 fits:
    the relaxation is solved again without presolve before "infeasible" is believed (review of session 42)."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 2), (1, 3)]
    g = Graph.from_lists([7.0, 0.1, 0.1, 7.0, 1.0], [2, 1, 7, 3, 10**6], edges, workspace=[1, 0, 1, 10**12, 10**9])
    budget = 1000000000016
    best, _ = brute_force_checkmate(g, budget)
    assert best == pytest.approx(15.2)
    res = get_solver("graph", "checkmate-approx")(g, budget, slots=0, time_limit=10)
    assert res.status != "infeasible" and res.schedule is not None
    assert res.lower_bound is None or res.lower_bound <= best + 1e-9
