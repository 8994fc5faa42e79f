"""`interleave-v`'s V-shaped DP (O(L^4 P), seconds at 80 layers) checks a wall-clock deadline:
`v_shape_dp(deadline=)` raises `DeadlineExceeded` once it is spent, and `solve_interleave_v`
honours ``time_limit`` by answering the straight pipeline as ``feasible`` (``timeout`` when none
fits), never ``optimal``. No wall-clock asserts: the deadlines below are spent on cue."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.exact.options import Deadline, DeadlineExceeded
from memsched.solvers.pipeline import Pipeline, simulate
from memsched.solvers.pipeline import interleave as il
from memsched.solvers.pipeline import interleave_dp as idp
from memsched.solvers.pipeline.dp import partition_dp
from memsched.solvers.pipeline.generate import random_pipeline
from memsched.solvers.result import FEASIBLE, OPTIMAL, TIMEOUT


def chain(L: int = 12, seed: int = 3) -> Pipeline:
    """A small random chain (2P <= L for P <= L / 2: the V-shaped DP runs)."""
    return random_pipeline(np.random.default_rng(seed), L)


class Expired(Deadline):
    """A deadline already spent (when it has a limit)."""

    def left(self) -> float | None:
        return None if self.limit is None else -1.0


class KthCheck(Deadline):
    """A deadline whose `check` raises `DeadlineExceeded` on its `k`-th call (when it has a limit,
    or always with `always`), counting the calls; every one made is listed in `made`."""

    k = 1
    always = False
    made: list[KthCheck] = []

    def __init__(self, limit: float | None = None, start: float | None = None) -> None:
        super().__init__(limit, start)
        self.calls = 0
        type(self).made.append(self)

    def check(self) -> None:
        self.calls += 1
        if (self.always or self.limit is not None) and self.calls >= self.k:
            raise DeadlineExceeded("spent on cue")


def kth(k: int, always: bool = False) -> type[KthCheck]:
    """A fresh `KthCheck` class spent at the `k`-th check."""
    return type("Kth", (KthCheck,), {"k": k, "always": always, "made": []})


# --- v_shape_dp -----------------------------------------------------------------------------------

def test_v_shape_dp_raises_once_the_deadline_is_spent():
    inst = chain()
    full = il.v_shape_dp(inst, 3, None)
    assert full is not None
    assert il.v_shape_dp(inst, 3, None, deadline=Deadline(None)) == full  # no limit: the same answer
    with pytest.raises(DeadlineExceeded):
        il.v_shape_dp(inst, 3, None, deadline=Expired(1.0))


def test_v_shape_dp_checks_periodically_inside_the_recursion():
    inst = chain()
    counting = kth(10**9, always=True)()  # never spent: counts the checks of a whole run
    assert il.v_shape_dp(inst, 3, None, deadline=counting) == il.v_shape_dp(inst, 3, None)
    assert counting.calls > 10  # once per state computed, not once per run
    cut = kth(counting.calls // 2, always=True)()
    with pytest.raises(DeadlineExceeded):
        il.v_shape_dp(inst, 3, None, deadline=cut)
    assert cut.calls == counting.calls // 2  # stopped at that check, in the middle of the recursion


# --- solve_interleave_v -------------------------------------------------------------------------

def test_interleave_v_time_limit_zero_answers_the_straight_pipeline_as_feasible():
    inst = chain()
    P = 3
    full = il.solve_interleave_v(inst, None, devices=P)
    assert full.status == OPTIMAL
    res = il.solve_interleave_v(inst, None, devices=P, time_limit=0)
    straight = partition_dp(inst, P, None)
    assert straight is not None
    assert res.status == FEASIBLE and res.lower_bound is None
    assert res.objective == pytest.approx(straight[0])
    assert res.objective >= full.objective - 1e-9
    assert "time limit" in res.message and "V-shaped DP" in res.message
    assert "did not end" in res.scope
    assert simulate(inst, res.schedule, None, devices=P).violation is None


def test_interleave_v_cut_mid_dp_keeps_the_straight_pipeline(monkeypatch: pytest.MonkeyPatch):
    inst = chain()
    P = 3
    spent = kth(5)
    monkeypatch.setattr(il, "Deadline", spent)
    res = registry.solve("pipeline", inst, "interleave-v", None, devices=P, time_limit=60.0)
    assert [d.calls for d in spent.made] == [5]  # the V-shaped DP ran and was stopped at its 5th check
    assert res.status == FEASIBLE and res.lower_bound is None
    assert res.objective == pytest.approx(partition_dp(inst, P, None)[0])  # type: ignore[index]


def test_interleave_v_stopped_with_no_straight_pipeline_is_timeout_not_infeasible():
    inst = chain()
    P = 3
    budget = 1  # nothing fits: but the V-shaped DP did not prove it
    res = il.solve_interleave_v(inst, budget, devices=P, time_limit=0)
    assert res.status == TIMEOUT and res.schedule is None
    assert "time limit" in res.message


def test_interleave_v_without_v_shape_or_limit_is_unchanged():
    inst = chain()
    # max_stages below 2P: no V-shaped DP, nothing to cut, the straight DP is proven even at a 0 s limit
    assert il.solve_interleave_v(inst, None, devices=3, max_stages=4, time_limit=0).status == OPTIMAL
    # 2P > L: no V shape exists
    assert il.solve_interleave_v(chain(5), None, devices=3, time_limit=0).status == OPTIMAL
    a = il.solve_interleave_v(inst, None, devices=3)
    b = il.solve_interleave_v(inst, None, devices=3, time_limit=60.0)
    assert b.status == OPTIMAL and b.objective == a.objective


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "1", True])
def test_interleave_v_rejects_a_bad_time_limit(bad: Any):
    with pytest.raises(InputError) as err:
        il.solve_interleave_v(chain(), None, devices=3, time_limit=bad)
    assert "time" in str(err.value).lower()


# --- interleave-dp's seed ------------------------------------------------------------------------

def test_interleave_dp_gives_its_time_left_to_the_v_seed_and_goes_on_without_it(monkeypatch: pytest.MonkeyPatch):
    inst = chain()
    P = 3
    full = idp.solve_interleave_dp(inst, None, devices=P)
    assert full.status == OPTIMAL
    spent = kth(3)  # only interleave-v's deadline: the seed is cut, the DP's own limit (60 s) is not
    monkeypatch.setattr(il, "Deadline", spent)
    res = idp.solve_interleave_dp(inst, None, devices=P, time_limit=60.0)
    assert [d.calls for d in spent.made] == [3]  # the V seed ran under a limit and was cut
    assert res.status == OPTIMAL and res.objective == pytest.approx(full.objective)  # the DP went on
