"""Tape cuts of the phase model (`solvers.chain.phase_cuts`): valid (the optimum is unchanged,
every encodable schedule satisfies them), separated at the root, and their LP value a bound."""

from __future__ import annotations

import pytest
from conftest import FAST, TIGHT_FRACS, brute_force, chains, least_phase_budget, tight_budget
from hypothesis import given
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import periodic_schedule, store_all_schedule
from memsched.solvers.chain.cpsat import phase_answer, phase_hint
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.phase_cuts import all_tape_cuts, separate_tape_cuts, tape_cut, violated_tape_cuts
from memsched.solvers.exact.milp_runner import FEASIBLE, BackendRun, run_milp
from memsched.solvers.exact.options import Deadline
from memsched.solvers.registry import solve
from memsched.solvers.result import SolveResult


def cut_names(model: PhaseModel, values: list[float]) -> list[str]:
    return [n for n in model.violated(values) if n.startswith("tape cut")]


@FAST
@given(chains(max_length=4), TIGHT_FRACS, st.booleans())
def test_all_tape_cuts_keep_the_optimum(chain: Chain, frac: float, dominance: bool) -> None:
    """With every tape cut added, the MILP optimum is the brute force's over phase schedules, and
    the brute force's schedule and the baselines that fit satisfy every cut (budgets from the least
    one with a phase schedule, or one below, up to the store-all peak)."""
    budget = tight_budget(chain, frac, least_phase_budget(chain))
    best, schedule = brute_force(chain, budget, phase=True)
    model = PhaseModel.build(chain, budget, dominance=dominance)
    assert all_tape_cuts(model) >= 0
    run = run_milp(model.to_linear(), "scip", Deadline(30))
    if best is None:
        assert run.status == "infeasible"
        return
    assert run.status == "optimal"
    assert run.objective == pytest.approx(best)
    candidates = [
        schedule,
        store_all_schedule(chain.length),
        *(periodic_schedule(chain.length, k) for k in range(1, chain.length + 1)),
    ]
    for sched in candidates:
        if not simulate(chain, sched, budget).valid:
            continue
        values = model.encode(sched)
        if values is not None:
            assert cut_names(model, values) == []


def test_cuts_raise_the_lp_and_stay_below_the_optimum() -> None:
    """random_chain(10, 0) at M = 50 (the bench's tight budget): LP 62.64, optimum 66.487."""
    chain = random_chain(10, 0)
    model = PhaseModel.build(chain, 50)
    report = separate_tape_cuts(model, Deadline(None))
    assert report.added > 0 and report.rounds >= 1
    assert report.lp_before == pytest.approx(62.64, abs=0.01)
    assert report.lp_before + 0.3 < report.lp_after <= 66.487 + 1e-6
    lp = run_milp(model.to_linear(), "scip", Deadline(None), relax=True)
    assert lp.objective == pytest.approx(report.lp_after, rel=1e-6)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_solvers_with_cuts_prove_the_optimum_and_report_where_the_bound_comes_from(solver: str) -> None:
    """milp states the cuts in its model (``cuts``, default on); cpsat solves the LP with cuts
    for its bound (``root_lp``, default on) and states them only with ``cuts=True``."""
    chain = random_chain(10, 0)
    runs = {"default": solve("chain", chain, solver, 50, slots=0, time_limit=30)}
    if solver == "milp":
        runs["off"] = solve("chain", chain, solver, 50, slots=0, time_limit=30, cuts=False)
    else:
        runs["off"] = solve("chain", chain, solver, 50, slots=0, time_limit=30, root_lp=False)
        runs["in model"] = solve("chain", chain, solver, 50, slots=0, time_limit=30, cuts=True)
    for name, res in runs.items():
        assert res.status == "optimal", name
        assert res.objective == pytest.approx(66.487049, abs=1e-5)
        sim = simulate(chain, res.schedule, 50)
        assert sim.valid and sim.makespan == pytest.approx(res.objective)
        assert res.lower_bound == pytest.approx(res.objective)
        assert (res.details["tape_cuts"] > 0) == (name != "off"), name
    if solver == "cpsat":
        assert not runs["default"].details["cuts_in_model"] and runs["in model"].details["cuts_in_model"]
        assert runs["in model"].details["constraints"] > runs["default"].details["constraints"]


def test_root_lp_is_the_bound_when_the_backend_has_none() -> None:
    """A backend run without a bound (stopped before its root): the answer's bound is the root LP
    with cuts (less GLOP's tolerance); a backend bound above it wins."""
    chain = random_chain(10, 0)
    model = PhaseModel.build(chain, 50)
    hint, ok, _ = phase_hint(model, None, Deadline(None))
    assert ok and hint is not None
    report = separate_tape_cuts(model, Deadline(None))

    def result(status: str, **kw):
        return SolveResult(problem="chain", solver="milp", status=status, budget=50, **kw)

    for backend_bound, want in ((None, "root LP with tape cuts"), (65.0, "backend")):
        run = BackendRun(FEASIBLE, bound=backend_bound, values=None)
        res = phase_answer(result, model, run, None, hint, ok, chain, 50, Deadline(None), {}, lp_bound=report.lp_after)
        assert res.status == "feasible" and res.details["bound_from"] == want
        expected = report.lp_after if want != "backend" else 65.0
        assert res.lower_bound == pytest.approx(expected, rel=1e-6) and res.lower_bound <= res.objective


def test_separation_finds_exactly_the_violated_rows() -> None:
    """`violated_tape_cuts` agrees with evaluating each cut row on the LP point."""
    model = PhaseModel.build(random_chain(10, 0), 50)
    lp = run_milp(model.to_linear(), "scip", Deadline(None), relax=True)
    found = {(j, a, b): v for v, j, a, b in violated_tape_cuts(model, lp.values)}
    assert found
    for j in range(1, model.L):
        for a in range(model.L, j - 1, -1):
            for b in range(a, j - 1, -1):
                lhs = tape_cut(model, j, a, b).value(lp.values)
                assert ((j, a, b) in found) == (lhs > 1e-4)
                if (j, a, b) in found:
                    assert found[(j, a, b)] == pytest.approx(lhs)


def test_no_rounds_when_the_lp_is_already_at_the_incumbent() -> None:
    """The first LP within `min_gap` of the warm start's makespan: no cut round runs."""
    model = PhaseModel.build(random_chain(10, 0), 50)
    lp = separate_tape_cuts(PhaseModel.build(random_chain(10, 0), 50), Deadline(None)).lp_before
    assert lp is not None
    report = separate_tape_cuts(model, Deadline(None), incumbent=lp * 1.0005)
    assert report.rounds == 0 and report.added == 0 and report.lp_after == pytest.approx(lp)
    report = separate_tape_cuts(model, Deadline(None), incumbent=66.487)
    assert report.rounds >= 1
