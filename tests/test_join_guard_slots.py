"""A one-branch join's DP has rotor's guard (`join.dp.one_branch_never_worse`): when the slot rounding
makes its schedule slower than a baseline at exact sizes, finer slots are tried, sized in slots (not
with the branch input's bytes added to a slot count, which made every finer table look too large)."""

from __future__ import annotations

import pytest
from memsched.solvers import registry
from memsched.solvers.join.generate import random_join
from memsched.solvers.join.instance import branch_with_loss


def test_one_branch_join_refines_its_slots_like_rotor() -> None:
    join = random_join([3], 463977, size_range=(100000, 10000000), loss_time=1.0)  # input of 2.4 MB
    budget = 34971638
    answer = registry.solve("join", join, "dp", budget, slots=100)
    rotor = registry.solve("chain", branch_with_loss(join, 0), "rotor", budget, slots=100)
    assert rotor.status == "optimal" and rotor.details["slots_tried"] == [100, 400]
    assert answer.status == "optimal", answer.message
    assert answer.details["slots_tried"] == [100, 400]
    assert answer.objective == pytest.approx(rotor.objective)
