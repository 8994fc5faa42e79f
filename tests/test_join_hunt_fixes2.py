"""The join `dp` (default solver) is never slower than the heuristics run with the same --slots,
and says ``optimal`` only for a schedule proven optimal in its stated scope: a heuristic that the
slot rounding leaves no schedule retries with exact sizes and can beat the DP at N slots (the main
path), at its finest slots (`rounding_retry` step 4) or its least-memory schedule (step 6)."""

from __future__ import annotations

import math

from conftest import join_replays
from hypothesis import example, given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.join import dp as join_dp_module
from memsched.solvers.join import reference_peak
from memsched.solvers.join.astar import enumerate_class
from memsched.solvers.join.dp import solve_join_dp
from memsched.solvers.join.generate import random_join
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

HEURISTICS = ("equal", "proportional", "sequential")


def _join(lengths: list[int], seed: int, loss_overhead: int):
    """The hunt's instances: integer times, sizes of 300-3000 bytes (budgets of about 10^4 bytes, so
    the DP at exact sizes is too large and the rounding to 10-30 slots often leaves no schedule)."""
    return random_join(lengths, seed, integer_times=True, loss_overhead=loss_overhead, size_range=(300, 3000))


def test_finest_slots_retry_is_not_slower_than_sequential():
    """The hunt's case: 20 slots leave no schedule; the DP at 999 slots replays at 26, sequential at
    exact sizes at 23 (= the class optimum). dp answered ``optimal`` 26.0."""
    join = _join([3, 1], 14, 2)
    budget = 14590
    dp = registry.solve("join", join, "dp", budget, slots=20)
    seq = registry.solve("join", join, "sequential", budget, slots=20)
    assert seq.status == FEASIBLE and seq.objective == 23.0
    assert dp.objective == 23.0 and dp.status == FEASIBLE, (dp.status, dp.objective, dp.scope)
    assert "sequential" in dp.scope and "999-slot discretisation" in dp.scope  # the scope names both
    assert dp.details["dp_makespan"] == 26.0 and dp.details["heuristic"]["solver"] == "sequential"
    assert dp.details["slots_tried"] == [20, 999] and dp.lower_bound is None
    assert enumerate_class(join, budget)[0] == 23.0
    join_replays(join, budget, dp)


def test_main_path_is_not_slower_than_a_retried_heuristic():
    """The DP finds a schedule at 15 slots (35) while equal and proportional, left none by the
    rounding, find 34 at exact sizes: the DP's 15-slot optimum is not returned as the answer."""
    join = _join([3, 3], 9059, 2)
    budget = 16983
    dp = solve_join_dp(join, budget, slots=15)
    best = min(registry.solve("join", join, h, budget, slots=15).objective for h in ("equal", "proportional"))
    assert best == 34.0
    assert dp.status == FEASIBLE and dp.objective <= best, (dp.status, dp.objective)
    assert dp.details["dp_makespan"] == 35.0 and "15-slot discretisation" in dp.scope
    join_replays(join, budget, dp)


def test_least_memory_fallback_is_not_slower_than_sequential(monkeypatch):
    """Step 6 of `rounding_retry` (tables capped): the least-memory schedule replays at 25, sequential
    at exact sizes at 22; the relaxation's bound 21 stays the lower bound."""
    join = random_join([2, 1], 0, size_range=(1, 40), integer_times=True, loss_overhead=1)
    budget = 176
    monkeypatch.setattr(join_dp_module, "MAX_CELLS", 2 * 5 * 12**2)
    dp = solve_join_dp(join, budget, slots=5)
    assert dp.status == FEASIBLE and dp.objective == 22.0, (dp.status, dp.objective, dp.scope)
    assert dp.lower_bound == 21.0 and dp.details["dp_makespan"] == 25.0
    assert "least-memory" in dp.scope and "sequential" in dp.scope
    join_replays(join, budget, dp)


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 3), min_size=1, max_size=3).filter(lambda ls: sum(ls) <= 6),
       seed=st.integers(0, 10_000), loss_overhead=st.sampled_from([0, 2]), frac=st.floats(0.55, 1.0),
       slots=st.integers(10, 30))
@example(lengths=[3, 1], seed=14, loss_overhead=2, frac=14590 / reference_peak(_join([3, 1], 14, 2)) + 1e-9,
         slots=20)
@example(lengths=[2, 2], seed=7225, loss_overhead=2, frac=14968 / reference_peak(_join([2, 2], 7225, 2)) + 1e-9,
         slots=30)
@example(lengths=[3, 3], seed=2372, loss_overhead=0, frac=18475 / reference_peak(_join([3, 3], 2372, 0)) + 1e-9,
         slots=10)
def test_dp_never_slower_than_heuristics_at_small_slots(lengths, seed, loss_overhead, frac, slots):
    """dp <= every heuristic run with the same slots whenever both find a schedule (and dp finds one
    when a heuristic does); dp is never faster than the optimum of its class at exact sizes (an
    enumeration of the class, replayed), and equals it when it says ``optimal`` at exact sizes."""
    join = _join(lengths, seed, loss_overhead)
    budget = int(reference_peak(join) * frac)
    dp = registry.solve("join", join, "dp", budget, slots=slots)
    join_replays(join, budget, dp)
    for name in HEURISTICS:
        h = registry.solve("join", join, name, budget, slots=slots)
        if h.schedule is not None:
            assert dp.schedule is not None, (name, dp.message)
            assert dp.objective <= h.objective * (1 + 1e-9), (name, h.objective, dp.status, dp.objective, dp.scope)
    best, _ = enumerate_class(join, budget)
    if dp.schedule is None:
        assert dp.status == INFEASIBLE and not math.isfinite(best)
        return
    assert dp.objective >= best - 1e-9
    if dp.status == OPTIMAL and "exact sizes" in dp.scope:
        assert math.isclose(dp.objective, best, rel_tol=1e-9), (dp.objective, best, dp.scope)
