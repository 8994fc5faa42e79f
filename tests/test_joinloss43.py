"""The join heuristics `equal` and `proportional` where the loss cannot run: every input stays resident and the
loss holds its overhead beside them, so a budget below X_0 + loss_overhead has no schedule. They answered with an
internal error (their share of a negative free memory was clamped to 0, and the zero-size branches' rotor
schedules then broke the budget at the loss); now `infeasible`, as every other join solver says."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain.instance import Chain
from memsched.solvers.join.instance import Join

HEURISTICS = ("equal", "proportional")


def _branch(length: int, size: int, input_size: int) -> Chain:
    """A chain of `length` stages of unit times whose activations and tapes all have `size` units."""
    L = length
    return Chain(u_f=np.array([1.0] * L + [0.0]), u_b=np.array([1.0] * L + [0.0]),
                 x=np.array([input_size] + [size] * L + [0]), xbar=np.array([0] + [size] * L + [0]),
                 o_f=np.zeros(L + 1, dtype=int), o_b=np.zeros(L + 1, dtype=int))


@pytest.mark.parametrize("solver", HEURISTICS)
@pytest.mark.parametrize("slots", [0, 500])
def test_a_budget_the_loss_cannot_run_in_is_infeasible(solver, slots):
    join = Join(branches=[_branch(1, 0, 0)], loss_time=1.0, loss_overhead=2)
    for budget in (0, 1):
        res = registry.solve("join", join, solver, budget, slots=slots)
        assert res.status == "infeasible", (budget, res.message)
    res = registry.solve("join", join, solver, 2, slots=slots)
    assert res.status == "feasible" and res.peak_memory <= 2


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 3), length=st.integers(1, 3), size=st.integers(0, 3), input_size=st.integers(0, 2),
       overhead=st.integers(0, 6), budget=st.integers(0, 12), solver=st.sampled_from(HEURISTICS))
def test_the_heuristics_answer_wherever_exact_does(k, length, size, input_size, overhead, budget, solver):
    """No internal error: a heuristic says `infeasible` wherever the exact search proves no schedule, and a
    schedule it returns fits (the registry replays it)."""
    join = Join(branches=[_branch(length, size, input_size) for _ in range(k)], loss_time=1.0,
                loss_overhead=overhead)
    res = registry.solve("join", join, solver, budget, slots=0)
    exact = registry.solve("join", join, "exact", budget, slots=0)
    if exact.status == "infeasible":
        assert res.status == "infeasible"
    if res.status == "feasible":
        assert res.peak_memory <= budget and exact.status == "optimal" and exact.objective <= res.objective + 1e-9
