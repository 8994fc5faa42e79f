"""Reduced-cost fixing of the phase model (`solvers.chain.phase_cuts.fixings`): the bound its
duals prove holds for any duals, the fixings keep every schedule at most as slow as the
incumbent, and the solvers that use them still prove the brute force's optimum."""

from __future__ import annotations

import random

import pytest
from conftest import FAST, TIGHT_FRACS, brute_force, chains, least_phase_budget, tight_budget
from hypothesis import given
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import periodic_schedule, store_all_schedule
from memsched.solvers.chain.cpsat import phase_hint, usable_fixings
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.phase_cuts import CutReport, fixings, separate_tape_cuts
from memsched.solvers.exact.options import Deadline
from memsched.solvers.registry import solve


def candidates(chain: Chain, budget: int, best) -> list[tuple[float, list[float]]]:
    """(makespan, model values) of the brute force's schedule and the baselines that fit `budget`
    and lie in the phase model."""
    model = PhaseModel.build(chain, budget)
    out = []
    for sched in [best, store_all_schedule(chain.length), *(periodic_schedule(chain.length, k)
                                                           for k in range(1, chain.length + 1))]:
        sim = simulate(chain, sched, budget)
        values = model.encode(sched) if sim.valid else None
        if values is not None and not model.violated(values):
            out.append((sim.makespan, values))
    return out


@FAST
@given(chains(max_length=4), TIGHT_FRACS, st.integers(0, 2**31 - 1))
def test_any_duals_bound_the_optimum_and_their_fixings_keep_faster_schedules(chain: Chain, frac: float,
                                                                             seed: int) -> None:
    """Weak duality as `fixings` computes it: for random row duals (any signs) and for GLOP's, z
    is at most the brute force's optimum, and with the incumbent U set to each candidate's
    makespan every candidate at most as slow as U satisfies every fixing. Budgets: from the least one
    with a phase schedule (or one below, where there is nothing to check) up to the store-all peak."""
    budget = tight_budget(chain, frac, least_phase_budget(chain))
    best, schedule = brute_force(chain, budget, phase=True)
    if best is None:
        return
    model = PhaseModel.build(chain, budget)
    report = separate_tape_cuts(model, Deadline(None), incumbent=best)
    assert report.lp_after is not None and report.lp_after <= best + 1e-6 and report.duals is not None
    assert fixings(model, report.duals, best)[0] == pytest.approx(report.lp_after, abs=1e-6)
    rng = random.Random(seed)  # GLOP's duals perturbed (signs flipped, scaled, zeroed) and random ones
    dual_sets = [[y * rng.choice((-1.0, 0.0, 0.5, 1.0, 1.0, 2.0)) + rng.uniform(-0.1, 0.1) * (rng.random() < 0.2)
                  for y in report.duals] for _ in range(4)]
    dual_sets.append([rng.uniform(-3, 3) if rng.random() < 0.5 else 0.0 for _ in model.rows])
    cands = candidates(chain, budget, schedule)
    assert cands and min(c[0] for c in cands) == pytest.approx(best)
    for duals in dual_sets:
        for incumbent, _ in cands:
            z, fixed = fixings(model, duals, incumbent)
            assert z <= best + 1e-6
            for makespan, values in cands:
                if makespan <= incumbent + 1e-9:
                    assert all(values[i] == v for i, v in fixed.items())
    for makespan, values in cands:  # GLOP's duals, as the solvers use them
        assert all(values[i] == v for i, v in report.fixed.items()) or makespan > best + 1e-9


def test_fixings_at_the_mid_budget_keep_the_optimum() -> None:
    """random_chain(10, 0) at M = 71 (the bench's mid budget, exact sizes): the root LP's duals fix
    variables against the rotor start; milp and cpsat still prove the optimum 58.7467 (the value
    without fixing), and the schedule replays."""
    chain = random_chain(10, 0)
    model = PhaseModel.build(chain, 71)
    hint, ok, _ = phase_hint(model, None, Deadline(None))
    assert ok and hint is not None
    incumbent = model.objective.value(hint)
    report = separate_tape_cuts(model, Deadline(None), incumbent=incumbent)
    assert report.fixed and usable_fixings(report, hint, ok) == report.fixed
    assert all(hint[i] == v for i, v in report.fixed.items())
    for solver in ("milp", "cpsat"):
        res = solve("chain", chain, solver, 71, slots=0, time_limit=30)
        assert res.status == "optimal" and res.objective == pytest.approx(58.746703, abs=1e-5), solver
        assert res.details["rc_fixed"] > 0, solver
        sim = simulate(chain, res.schedule, 71)
        assert sim.valid and sim.makespan == pytest.approx(res.objective)


def test_fixings_that_contradict_the_start_are_not_used() -> None:
    """`usable_fixings` drops every fixing when one contradicts the warm start or the start does
    not fit (then a proof on the fixed model would not be one on the model)."""
    report = CutReport(fixed={0: 1.0, 2: 0.0})
    assert usable_fixings(report, [1.0, 0.0, 0.0], True) == {0: 1.0, 2: 0.0}
    assert usable_fixings(report, [1.0, 0.0, 1.0], True) == {}
    assert usable_fixings(report, [1.0, 0.0, 0.0], False) == {}
    assert usable_fixings(report, None, True) == {}
