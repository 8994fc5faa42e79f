"""Join `cpsat` / `milp` with `--option orders=...`: the model is restricted to the listed backward orders, and
the answer says so (scope, infeasible message), so that its `optimal`, `infeasible` and bound are not read as
the whole phase model's (hunt 51: `orders=[[1,0]]` answered "no schedule of the join phase model fits the budget"
where order [0,1] has one). The join DP's timeout names the slot count it ran at (exact sizes for a budget of at
most --slots units), not the --slots asked."""
from __future__ import annotations

import pytest
from memsched.solvers import registry
from memsched.solvers.exact.options import Deadline
from memsched.solvers.join.dp import timed_out
from memsched.solvers.join.generate import random_join


@pytest.fixture(scope="module")
def join():
    return random_join([2, 1], 0)


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_listed_orders_are_named(join, solver: str) -> None:
    budget = 46
    whole = registry.solve("join", join, solver, budget, warm_start=False, time_limit=30)
    assert whole.status == "optimal" and "all 2 backward orders" in whole.scope
    one = registry.solve("join", join, solver, budget, warm_start=False, orders=[[1, 0]], time_limit=30)
    assert "the 1 backward order listed ([[1, 0]])" in one.scope
    assert one.status == "infeasible"  # order [1, 0] alone has no schedule here; [0, 1] has one
    assert "in the 1 backward order listed" in one.message


def test_dp_timeout_names_the_slots_it_ran_at(join) -> None:
    expired = Deadline(1e-9)
    res = timed_out(join, 1, 500, expired)  # 1 unit: no heuristic fits, a budget below 500 units: exact sizes
    assert res.status == "timeout"
    assert "exact sizes" in res.scope and "500" not in res.scope
    assert res.details["slots"] == 0
