"""The Lagrangian bound of the phase model (`solvers.chain.phase_lagrange`, `phase_colgen`): every
block DP keeps every schedule's phase, its minimiser's value is its own cost, Z never exceeds the
brute force's optimum whatever the multipliers, and column generation reaches at least the LP."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAST, TIGHT_FRACS, brute_force, budget_for, chains, least_phase_budget, tight_budget
from hypothesis import given
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import periodic_schedule, store_all_schedule
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.phase_colgen import block_points, column_generation
from memsched.solvers.chain.phase_lagrange import INF, PhaseLagrangian, lagrangian_bound, lp_multipliers
from memsched.solvers.exact.options import Deadline


def encoded(chain: Chain, budget: int, model: PhaseModel, extra=()) -> list[list[float]]:
    """Model points of the baselines (and `extra` schedules) that fit `budget` and lie in the model."""
    out = []
    for sched in [
        *extra,
        store_all_schedule(chain.length),
        *(periodic_schedule(chain.length, k) for k in range(1, chain.length + 1)),
    ]:
        if sched is None or not simulate(chain, sched, budget).valid:
            continue
        values = model.encode(sched)
        if values is not None and not model.violated(values):
            out.append(values)
    return out


def random_multipliers(L: int, rng: np.random.Generator, scale: float) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0.0, scale, (L + 1, L + 1)), rng.normal(0.0, scale, (L + 1, L + 1))


def assert_contained(lag: PhaseLagrangian, model: PhaseModel, values: list[float]) -> None:
    """With costs -1 on what phase k of the model point `values` uses and +1 on everything else,
    block k's DP finds a point at least as cheap as that phase (so its feasible set holds it)."""
    for k, (ops, sas, sts) in enumerate(block_points(model, values)):
        cop, csa, cst = lag.costs(k, *lag.zeros())
        allowed = cop < INF
        cop = np.where(allowed, 1.0, INF)
        csa, cst = np.ones_like(csa), np.ones_like(cst)
        own = 0.0
        for j, o in enumerate(ops):
            if o:
                assert allowed[j, o]
                cop[j, o] = -1.0
                own -= 1.0
        for j in range(len(sas)):
            if sas[j]:
                csa[j], own = -1.0, own - 1.0
            if sts[j]:
                cst[j], own = -1.0, own - 1.0
        val = lag.solve_block(k, cop, csa, cst)[0]
        assert val <= own + 1e-9, (k, ops, sas, sts)


@FAST
@given(chains(max_length=4), TIGHT_FRACS, st.integers(0, 2**31 - 1))
def test_z_never_exceeds_the_optimum(chain: Chain, frac: float, seed: int) -> None:
    """Weak duality: for zero, random and LP-dual multipliers, and after subgradient ascent and
    column generation, Z is at most the brute force's optimum over phase schedules; the optimum's
    own model point costs exactly its makespan and leaves every dualised row at 0. Budgets: from the
    least one with a phase schedule (or one below, where there is nothing to check) up to the store-all peak."""
    budget = tight_budget(chain, frac, least_phase_budget(chain))
    best, schedule = brute_force(chain, budget, phase=True)
    model = PhaseModel.build(chain, budget)
    lag = PhaseLagrangian(model)
    if best is None:  # no phase schedule: Z may be anything, but a block with no point proves it
        return
    rng = np.random.default_rng(seed)
    tol = 1e-7 * max(1.0, best)
    mults = [lag.zeros(), *(random_multipliers(chain.length, rng, s) for s in (0.3, 3.0, 30.0))]
    _, mu, nu = lp_multipliers(model)
    assert mu is not None and nu is not None
    mults.append((mu, nu))
    for m, n in mults:
        z, gmu, gnu = lag.evaluate(m, n)
        assert z <= best + tol
    values = model.encode(schedule)
    assert values is not None and not model.violated(values)
    total = lag.const
    resid: dict[tuple, int] = {}
    for k, point in enumerate(block_points(model, values)):
        cost, coef = lag.links(k, *point)
        total += cost
        for r, c in coef.items():
            resid[r] = resid.get(r, 0) + c
    assert total == pytest.approx(best)
    assert all(c == 0 for c in resid.values())
    assert_contained(lag, model, values)
    sub = lagrangian_bound(model, Deadline(None), incumbent=best, max_iter=30)
    assert sub.bound is not None and sub.bound <= best + tol
    cg = column_generation(model, Deadline(None), incumbent=best, start=values, mu=mu, nu=nu, max_iter=200)
    assert cg.bound is not None and cg.bound <= best + tol
    assert all(z <= best + tol for z in cg.history)


@FAST
@given(chains(max_length=5), st.floats(0.0, 1.0), st.integers(0, 2**31 - 1))
def test_every_schedule_phase_is_a_block_point_and_minimisers_cost_their_value(
    chain: Chain, frac: float, seed: int
) -> None:
    """Containment, tested directly: with costs -1 on what a schedule's phase k uses and +1 on
    everything else, block k's DP finds a point at least as cheap as the schedule's own (so the
    DP's feasible set holds it). And for random multipliers each block minimiser's value is its
    own cost plus the multipliers' terms (the DP's backtracking returns the point it priced)."""
    budget = budget_for(chain, frac, feasible=True)
    model = PhaseModel.build(chain, budget)
    lag = PhaseLagrangian(model)
    points = encoded(chain, budget, model)
    for values in points:
        assert_contained(lag, model, values)
    rng = np.random.default_rng(seed)
    mu, nu = random_multipliers(chain.length, rng, 2.0)
    sols = lag.blocks(mu, nu)
    if sols is None:
        assert not points
        return
    for k, (val, ops, sas, sts) in enumerate(sols):
        cost, coef = lag.links(k, ops, sas, sts)
        priced = cost + sum(c * (mu if r[0] == "ST" else nu)[r[1], r[2]] for r, c in coef.items())
        assert val == pytest.approx(priced, abs=1e-9)


@pytest.mark.parametrize(("L", "budget", "lp", "best"), [(10, 50, 62.6399, 66.4870), (10, 71, 58.3767, 58.7467)])
def test_column_generation_solves_the_dual_above_the_lp(L: int, budget: int, lp: float, best: float) -> None:
    """On `random_chain(10, 0)` (tight and mid budgets of bench_chain_exact, exact sizes) column
    generation converges; its bound lies between the LP relaxation and the optimum, and above the LP
    (the blocks' integer hulls cut off fractional phases)."""
    model = PhaseModel.build(random_chain(L, 0), budget)
    value, mu, nu = lp_multipliers(model)
    assert value == pytest.approx(lp, abs=1e-3)
    sched = periodic_schedule(L, 3)
    start = model.encode(sched) if simulate(model.chain, sched, budget).valid else None
    rep = column_generation(model, Deadline(None), start=start, mu=mu, nu=nu, max_iter=2000)
    assert rep.converged and rep.bound is not None and rep.master is not None
    assert rep.bound == pytest.approx(rep.master, abs=1e-6)
    assert lp + 0.1 < rep.bound <= best + 1e-6
