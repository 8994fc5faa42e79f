"""HiGHS through highspy (`solvers.exact.highs_runner`): the MILP backend ``highs`` with a dual
bound, against SCIP and the brute force; quiet on stdout; pywraplp's HiGHS when highspy is missing."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import brute_force, check_replay
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import reference_peak
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.exact import highs_runner
from memsched.solvers.registry import solve

pytestmark = pytest.mark.skipif(not highs_runner.available(), reason="highspy is not installed")


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(0, 10_000), st.floats(0.0, 1.0))
def test_highs_proves_the_phase_optimum(L, seed, fraction):
    """Where highspy says optimal, its answer is the phase model's optimum (brute force over
    phase-form sequences) and SCIP's; its bound never exceeds its makespan."""
    chain = random_chain(L, seed, size_range=(1, 6), integer_times=True, overhead=0.5)
    lo, hi = rotor_min_budget(chain), reference_peak(chain) - 1  # below store-all: the model runs
    assume(hi >= lo)
    budget = lo + int(fraction * (hi - lo))
    best, _ = brute_force(chain, budget, phase=True)
    res = solve("chain", chain, "milp", budget, slots=0, backend="highs", time_limit=30, warm_start=False)
    assert res.status == "optimal" and res.details["backend_status"].startswith("highspy")
    assert res.objective == pytest.approx(best) and res.lower_bound <= res.objective + 1e-9
    assert res.objective == pytest.approx(solve("chain", chain, "milp", budget, slots=0, time_limit=30).objective)
    check_replay(chain, budget, res)


@pytest.mark.parametrize("backend", ["highs", "portfolio"])
def test_highs_reports_its_bound_at_the_time_limit(backend):
    """pywraplp's HiGHS gave no bound; highspy's stopped run reports one below its makespan (and
    so does the portfolio, with the larger of SCIP's and HiGHS's bounds)."""
    chain = random_chain(30, 0)
    res = solve("chain", chain, "milp", 97, slots=100, backend=backend, time_limit=5)
    assert res.status == "feasible" and res.lower_bound is not None
    assert 180.0 < res.lower_bound < res.objective
    check_replay(chain, 97, res)


def test_highs_writes_nothing_on_stdout(capfd):
    """highspy's constructor prints a banner at C level: it must not reach `memsched solve --json`."""
    solve("chain", random_chain(4, 1), "milp", 40, slots=0, backend="highs", time_limit=10)
    assert "HiGHS" not in capfd.readouterr().out


def test_without_highspy_the_pywraplp_highs_runs(monkeypatch):
    monkeypatch.setattr(highs_runner, "available", lambda: False)
    chain = random_chain(6, 3)
    budget = rotor_min_budget(chain) + 3
    res = solve("chain", chain, "milp", budget, slots=0, backend="highs", time_limit=20)
    assert res.status == "optimal" and not res.details["backend_status"].startswith("highspy")
    assert res.objective == pytest.approx(solve("chain", chain, "milp", budget, slots=0, time_limit=20).objective)


@pytest.mark.parametrize("fraction", [0.6, 0.75, 0.9])
@pytest.mark.parametrize("graph", ["vgg16", "vgg16-times-1e9", "linear10", "rl20"])
def test_highs_lp_relaxation_equals_glop_and_clp(graph, fraction):
    """The LP relaxation through highspy (LP rounding's LP) has the value GLOP and CLP find."""
    from memsched.solvers.graph import generate
    from memsched.solvers.graph import reference_peak as graph_peak
    from memsched.solvers.graph.linmodel import solve_milp
    from memsched.solvers.graph.milp import CheckmateModel

    g = {"vgg16": generate.vgg16, "linear10": lambda: generate.linear_graph(10),
         "rl20": lambda: generate.random_layered(20, 3),  # rl20: infeasible LPs
         # times of 1e12 (as in Checkmate's FCN-8 file) made HiGHS's dual simplex fail before its cost scaling
         "vgg16-times-1e9": lambda: dataclasses.replace(generate.vgg16(), cost_cpu=generate.vgg16().cost_cpu * 1e9),
         }[graph]()
    budget = int(graph_peak(g) * fraction)
    model = CheckmateModel(g, g.cost_ram * (1000 / budget), 1000.0).model
    lps = ("HIGHS", "CLP") if "1e9" in graph else ("HIGHS", "GLOP", "CLP")  # GLOP fails on such costs too
    runs = {lp: solve_milp(model, "scip", relax=True, lp_solver=lp, time_limit=60) for lp in lps}
    assert runs["HIGHS"].backend_status.startswith("highspy")
    statuses = {run.status for run in runs.values()}
    assert len(statuses) == 1, runs
    if statuses == {"optimal"}:
        for lp in lps[1:]:
            assert runs["HIGHS"].objective == pytest.approx(runs[lp].objective, rel=1e-7)
        assert runs["HIGHS"].bound == runs["HIGHS"].objective
