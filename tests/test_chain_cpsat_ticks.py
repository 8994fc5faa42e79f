"""The chain CP-SAT model with non-integer times (`chain.cpsat.ObjectiveTicks`): the objective goes to
CP-SAT in integer ticks and its bound is lowered by the rounding's largest total error, so a proof
holds for the real times. CP-SAT's own floating-point objective stopped "optimal" with a bound 0.9%
below the makespan (examples/random10.json at 50%, 100 slots), answered `feasible` in 0.3 s."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TIGHT_FRACS, brute_force, check_replay, least_phase_budget, tight_budget
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import load
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.registry import solve

ROOT = Path(__file__).resolve().parents[1]


def test_float_times_are_proven_optimal_within_the_rounding() -> None:
    chain = load(str(ROOT / "examples" / "random10.json"))
    budget = int(0.5 * solve("chain", chain, "store-all", 10**15).peak_memory)
    res = solve("chain", chain, "cpsat", budget, slots=100, time_limit=30)
    milp = solve("chain", chain, "milp", budget, slots=100, time_limit=30)
    assert milp.status == "optimal"
    assert res.status == "optimal", (res.lower_bound, res.objective, res.details.get("bound_from"))
    assert res.objective == pytest.approx(milp.objective, rel=1e-6)
    assert res.details["cost_rounding_slack"] > 0 and not res.details["integral_objective"]
    assert res.lower_bound <= res.objective and res.objective - res.lower_bound <= 1e-6 * res.objective


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(0, 10_000), TIGHT_FRACS)
def test_float_times_bound_never_above_the_brute_force(L: int, seed: int, frac: float) -> None:
    """Random non-integer times: the answer is the phase optimum and its bound is below it, at budgets
    drawn from the least one with a phase schedule (or one below, infeasible) up to the store-all peak."""
    chain = random_chain(L, seed, size_range=(1, 6))
    budget = tight_budget(chain, frac, least_phase_budget(chain))
    best, _ = brute_force(chain, budget, phase=True)
    res = solve("chain", chain, "cpsat", budget, slots=0, time_limit=20)
    check_replay(chain, budget, res)
    if best is None:
        assert res.status == "infeasible"
        return
    assert res.status == "optimal"
    assert res.objective == pytest.approx(best, rel=1e-9)
    assert res.lower_bound is not None and res.lower_bound <= best + 1e-9
