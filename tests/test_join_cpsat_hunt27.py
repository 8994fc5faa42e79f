"""Join `cpsat` with many branches (hunt 27): the k! backward orders are generated lazily, the order
loop stops at the deadline (the orders not run are counted in ``details.orders_not_run``, not listed
one by one), and a seed that already runs every operation once (store-all fits) ends the solve
before any order. Answers on small joins are those of the code before the fix."""

from __future__ import annotations

import math
from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.join import cpsat as join_cpsat
from memsched.solvers.join import reference_peak
from memsched.solvers.join.generate import random_join

#: the statuses of an order that ran (or whose model was being built at the deadline)
RAN = {"optimal", "feasible", "infeasible", "timeout", "not built"}


class _Counting:
    """`itertools.permutations` that counts the tuples drawn from it."""

    def __init__(self, real: Any):
        self.real, self.drawn = real, 0

    def __call__(self, *args: Any) -> Any:
        for item in self.real(*args):
            self.drawn += 1
            yield item


def _honest(res: Any) -> None:
    """`optimal` only when the bound reaches the makespan."""
    if res.status == "optimal":
        assert res.lower_bound is not None and res.lower_bound >= res.objective - 1e-9 * max(1.0, res.objective)


def test_orders_after_the_deadline_are_counted_not_listed() -> None:
    """7 branches (5040 orders) in 1 s: the orders not run were one {"status": "not run"} entry each
    (362,880 at k = 9, a 17.8 MB --json); now one count, the entries of the orders that ran kept."""
    join = random_join([1] * 7, 3)
    budget = int(reference_peak(join) * 0.6)
    res = registry.solve("join", join, "cpsat", budget, time_limit=1, slots=50, warm_start=False)
    orders = res.details["orders"]
    assert all(o["status"] in RAN for o in orders)
    assert res.details["orders_not_run"] > 0
    assert len(orders) + res.details["orders_not_run"] == math.factorial(7)
    assert "5040 backward orders" in res.message
    _honest(res)


def test_store_all_fits_ends_before_any_order() -> None:
    """8 branches at the store-all peak: the seed (every operation once) cannot be improved; no
    order is solved (was: every order until the limit, then 40,320 entries; k = 10 ran out of memory)."""
    join = random_join([1] * 8, 3)
    budget = reference_peak(join)
    res = registry.solve("join", join, "cpsat", budget, time_limit=3)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(join.total_time())
    assert res.lower_bound == pytest.approx(join.total_time())
    assert res.details["orders"] == []
    assert res.details["orders_not_run"] == math.factorial(8)


def test_orders_are_generated_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    """The option check builds no order, the solve only the orders it runs (was k! twice)."""
    counting = _Counting(join_cpsat.permutations)
    monkeypatch.setattr(join_cpsat, "permutations", counting)
    join = random_join([1] * 9, 3)
    join_cpsat.check_options(join)
    join_cpsat.check_options(join, orders="all")
    assert counting.drawn == 0
    budget = int(reference_peak(join) * 0.6)
    res = registry.solve("join", join, "cpsat", budget, time_limit=1, slots=50, warm_start=False)
    assert counting.drawn <= len(res.details["orders"]) + 1 < math.factorial(9)
    assert len(res.details["orders"]) + res.details["orders_not_run"] == math.factorial(9)


def test_iter_orders_puts_the_seed_order_first() -> None:
    join = random_join([1, 1, 1], 0)
    got = list(join_cpsat.iter_orders(join, None, [2, 0, 1]))
    assert got[0] == [2, 0, 1] and len(got) == 6 and len({tuple(o) for o in got}) == 6
    assert list(join_cpsat.iter_orders(join, [[0, 1, 2], [1, 0, 2]], [2, 0, 1])) == [[0, 1, 2], [1, 0, 2]]
    assert list(join_cpsat.iter_orders(join, [[0, 1, 2], [1, 0, 2]], [1, 0, 2])) == [[1, 0, 2], [0, 1, 2]]
    assert join_cpsat.order_count(join) == 6 and join_cpsat.order_count(join, [[0, 1, 2]]) == 1
    with pytest.raises(InputError, match="twice"):
        join_cpsat.check_options(join, orders=[[0, 1, 2], (0, 1, 2)])


#: (lengths, seed, integer_times, warm_start, budget, status, objective) as answered before the fix
#: (random_join(lengths, seed, size_range=(1, 6)), slots=0, time_limit=30; lower bound = objective)
BEFORE = [
    ([2, 2, 1, 1], 1071, True, True, 48, "optimal", 35.0),
    ([2, 1, 2, 2], 198, False, True, 82, "optimal", 47.572278700183325),
    ([1, 2, 2, 2], 5778, True, True, 51, "optimal", 38.0),
    ([1, 2, 2], 1872, False, True, 42, "optimal", 29.817419809403507),
    ([2, 3], 238, True, True, 42, "optimal", 24.0),
    ([1, 1, 2, 1], 1544, True, False, 58, "optimal", 26.0),
    ([2, 2, 2], 1084, True, False, 63, "optimal", 45.0),
    ([1, 2, 2, 2], 2944, True, True, 58, "optimal", 49.0),
    ([1, 1, 1], 7480, True, False, 30, "optimal", 14.0),
    ([2, 2, 2, 1], 1148, False, True, 37, "optimal", 41.59969521216499),
    ([1, 2, 2], 1535, False, True, 16, "optimal", 33.82177914756951),
    ([2, 3], 7986, True, True, 46, "optimal", 28.0),
    ([1, 2, 1, 2], 939, True, True, 55, "optimal", 42.0),
    ([2, 2, 1, 1], 6283, False, False, 48, "optimal", 50.88992534371026),
    ([1, 2], 4601, False, True, 48, "optimal", 15.180822555643704),
    ([2, 2, 2], 6251, False, True, 57, "optimal", 28.591540399607343),
    ([2, 1, 2, 1], 5767, True, True, 50, "optimal", 28.0),
    ([1, 2], 2, True, True, 32, "optimal", 15.0),  # store-all fits: the seed ends the solve
    ([1, 2], 2, True, False, 32, "optimal", 15.0),  # store-all fits: the first order reaches it
    ([1, 1, 1, 1], 7, True, True, 53, "optimal", 30.0),
    ([1, 1, 1, 1], 7, True, False, 53, "optimal", 30.0),
    ([3, 1], 7406, True, True, 27, "infeasible", None),
    ([2, 3], 7823, True, False, 31, "infeasible", None),
    ([1, 1, 1], 3729, True, True, 28, "infeasible", None),
    ([1, 1, 2, 1], 7975, True, True, 44, "infeasible", None),
]


@pytest.mark.parametrize(("lengths", "seed", "integer_times", "warm_start", "budget", "status", "objective"), BEFORE)
def test_small_joins_answer_as_before(lengths: list[int], seed: int, integer_times: bool, warm_start: bool,
                                      budget: int, status: str, objective: float | None) -> None:
    join = random_join(lengths, seed, size_range=(1, 6), integer_times=integer_times)
    res = registry.solve("join", join, "cpsat", budget, slots=0, time_limit=30, warm_start=warm_start)
    assert res.status == status
    if objective is None:
        assert res.objective is None and res.lower_bound is None
    else:
        assert res.objective == pytest.approx(objective, rel=1e-9)
        assert res.lower_bound == pytest.approx(objective, rel=1e-9)
    runs = res.details["orders"]  # (the code before the fix listed every order)
    assert len(runs) + res.details.get("orders_not_run", 0) == math.factorial(len(lengths))
