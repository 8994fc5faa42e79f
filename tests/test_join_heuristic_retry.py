"""The join heuristics (equal, proportional, sequential) retry with finer slots when the rounding
of every size up to whole slots leaves them no schedule: at the least budget at which a heuristic
finds a schedule with exact sizes, it finds one at the default 500 slots too (before, all three
answered ``infeasible`` there on every one of 30 random joins)."""

from __future__ import annotations

import pytest
from memsched.solvers import registry
from memsched.solvers.join.baselines import RETRY_CELLS, retry_slots
from memsched.solvers.join.generate import random_join
from memsched.solvers.join.simulator import simulate
from memsched.solvers.result import FEASIBLE, INFEASIBLE

HEURISTICS = ("equal", "proportional", "sequential")


def least_exact_budget(join, name: str) -> int:
    """The smallest budget (bytes) at which heuristic `name` finds a schedule with exact sizes."""
    lo, hi = 1, 200_000
    while lo < hi:
        mid = (lo + hi) // 2
        if registry.solve("join", join, name, mid, slots=0).found:
            hi = mid
        else:
            lo = mid + 1
    return lo


@pytest.mark.parametrize("name", HEURISTICS)
@pytest.mark.parametrize("seed", [3, 26])
def test_least_exact_budget_is_found_at_500_slots(name, seed):
    join = random_join([3, 4], seed, size_range=(100, 3000))
    least = least_exact_budget(join, name)
    res = registry.solve("join", join, name, least)  # default: 500 slots
    assert res.status == FEASIBLE, res.message
    assert res.details["slots_tried"] == [500, 0]
    assert "the 500-slot rounding left no schedule" in res.scope
    assert simulate(join, res.schedule).peak_memory <= least
    below = registry.solve("join", join, name, least - 1)
    assert below.status == INFEASIBLE and below.details["slots_tried"] == [500, 0]


def test_large_budgets_retry_with_the_most_slots_the_tables_allow():
    join = random_join([3, 4], 5, size_range=(10**6, 10**8))
    rows = sum((c.length + 1) * (c.length + 2) // 2 for c in join.branches)
    budget = 10**9
    slots = retry_slots(join, budget, 500)
    assert slots is not None and 500 < slots and rows * (slots + 1) <= RETRY_CELLS
    assert retry_slots(join, budget, slots) is None  # nothing finer within the cap
    assert retry_slots(join, 10_000, 500) == 0  # small tables: exact sizes


def test_a_found_schedule_is_not_retried():
    join = random_join([2, 3], 1, size_range=(100, 3000))
    res = registry.solve("join", join, "sequential", 10**6)
    assert res.status == FEASIBLE and "slots_tried" not in res.details


def test_megabyte_sizes_retry_with_exact_sizes():
    """Sizes of 3 KB to 300 KB, budget 1.57 MB: exact sizes need 9.4e6 table entries (the band
    where a 833,332-slot retry still rounded the schedule out of the budget)."""
    join = random_join([1, 1], 1, integer_times=True, overhead=0.5, loss_overhead=1, size_range=(3000, 300000))
    res = registry.solve("join", join, "sequential", 1572782)
    assert res.status == FEASIBLE and res.details["slots_tried"] == [500, 0] and res.peak_memory <= 1572782
