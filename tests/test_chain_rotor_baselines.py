"""Rotor is never slower than the chain baselines at exact sizes (`rotor_guard`): when the
slot rounding makes the DP's schedule slower than periodic or sqrt(L), rotor solves again
with finer slots or exact sizes, or returns the baseline's schedule as ``feasible``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, reference_peak, rotor_guard, simulate
from memsched.solvers.chain.dp import _solve_rotor_slots
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.registry import solve

DATA = "solvers/data/chains/gpt2_medium-b8-1024.a100.json"


def baselines(chain: Chain, budget: int) -> list[float]:
    return [r.objective for r in (solve("chain", chain, s, budget) for s in ("periodic", "sqrt", "store-all"))
            if r.status == "feasible"]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 24), st.integers(0, 10_000), st.floats(0.15, 1.0), st.sampled_from([8, 20, 60, 500]))
def test_rotor_never_slower_than_the_baselines(L, seed, fraction, slots):
    chain = random_chain(L, seed=seed, overhead=0.3 if seed % 2 else 0.0)
    budget = int(fraction * reference_peak(chain))
    rot = solve("chain", chain, "rotor", budget, slots=slots)  # replayed by the simulator
    for base in baselines(chain, budget):
        assert rot.status in ("optimal", "feasible")
        assert rot.objective <= base * (1 + 1e-9)
    if rot.schedule is not None:
        assert simulate(chain, rot.schedule, budget).raise_if_invalid().peak_memory <= budget
    if rot.details.get("slots_tried"):  # a retry happened: it says what it used
        assert rot.details["first_makespan"] > rot.objective * (1 - 1e-12)
        assert "slower than" in rot.message


def test_gpt2_medium_at_45_percent_uses_finer_slots():
    chain = Chain.load(DATA)
    budget = int(0.45 * reference_peak(chain))
    coarse = _solve_rotor_slots(chain, budget, slots=500)
    periodic = solve("chain", chain, "periodic", budget)
    assert coarse.objective > periodic.objective  # the 500-slot rounding loses ~1%
    rot = solve("chain", chain, "rotor", budget, slots=500)
    assert rot.status == "optimal" and rot.details["slots"] == rot.details["slots_tried"][-1] > 500
    assert f"{rot.details['slots']}-slot" in rot.scope
    assert rot.objective <= periodic.objective


def test_falls_back_to_the_baseline_schedule_when_finer_tables_are_too_large(monkeypatch):
    chain = Chain.load(DATA)
    budget = int(0.45 * reference_peak(chain))
    monkeypatch.setattr(rotor_guard, "REFINE_CELLS", 0)
    monkeypatch.setattr("memsched.solvers.chain.dp.EXACT_RETRY_CELLS", 0)
    rot = solve("chain", chain, "rotor", budget, slots=500)
    periodic = solve("chain", chain, "periodic", budget)
    assert rot.status == "feasible" and rot.objective == pytest.approx(periodic.objective)
    assert rot.details["slots_tried"] == [500] and "periodic schedule" in rot.scope
