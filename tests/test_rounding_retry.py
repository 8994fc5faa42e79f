"""When rounding sizes up to slots is the only reason nothing fits, the join `dp` and `cpsat` decide
about the real budget (exact sizes, rotor on the one branch, finer slots, or a rounded-down
relaxation) instead of answering ``infeasible``; and rotor-offload's ``min_budget`` is a budget
it meets (with one byte less failing) or None."""

from __future__ import annotations

import math
import random

import pytest
from conftest import join_replays
from hypothesis import example, given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.join import dp as join_dp_module
from memsched.solvers.join import reference_peak, simulate
from memsched.solvers.join.dp import solve_join_dp
from memsched.solvers.join.generate import random_join
from memsched.solvers.join.instance import branch_with_loss
from memsched.solvers.offload.generate import random_offload
from memsched.solvers.result import INFEASIBLE, OPTIMAL


# ------------------------------------------------------------------ the confirmed cases, default 500 slots
def test_one_branch_at_default_slots_is_rotor_at_exact_sizes():
    join = random_join([3], 1, size_range=(300, 3000), integer_times=True)
    budget = 11328
    chain = registry.solve("chain", branch_with_loss(join, 0), "rotor", budget)
    assert chain.status == OPTIMAL and chain.objective == 27.0
    for name, kw in (("dp", {}), ("cpsat", {"time_limit": 20})):
        res = registry.solve("join", join, name, budget, **kw)
        assert res.status == OPTIMAL and res.objective == 27.0, (name, res.status, res.message)
        assert "exact sizes" in res.scope and "500" in res.scope, res.scope  # the scope says what ran
        join_replays(join, budget, res)


@pytest.mark.parametrize("lengths, seed, budget", [([2, 2], 2, 11476), ([3, 1], 5, 18267), ([3, 1], 5, 18327)])
def test_two_branches_at_default_slots(lengths, seed, budget):
    join = random_join(lengths, seed, size_range=(300, 3000), integer_times=True)
    exact = registry.solve("join", join, "exact", budget, time_limit=30)
    assert exact.schedule is not None
    for name, kw in (("dp", {}), ("cpsat", {"time_limit": 20})):
        res = registry.solve("join", join, name, budget, **kw)
        assert res.status != INFEASIBLE and res.schedule is not None, (name, res.message)
        assert res.objective >= exact.objective - 1e-9
        assert "slot" in res.scope
        join_replays(join, budget, res)


def test_two_branches_proven_infeasible_below_the_band():
    """Below the least budget of the class at exact sizes the DP still says infeasible, about the
    real budget, with that least budget as ``min_budget``: a schedule there, none one byte below."""
    join = random_join([3, 1], 5, size_range=(300, 3000), integer_times=True)
    res = solve_join_dp(join, 18000)
    assert res.status == INFEASIBLE and res.min_budget == 18267 and "exact sizes" in res.scope
    assert solve_join_dp(join, res.min_budget).status == OPTIMAL
    below = solve_join_dp(join, res.min_budget - 1)
    assert below.status == INFEASIBLE and below.min_budget == res.min_budget
    assert registry.solve("join", join, "exact", 18266, time_limit=30).schedule is None


def test_least_memory_schedule_when_the_tables_are_too_coarse():
    """Found by the property below: 924 slots (the most the tables allow) leave no schedule and
    exact sizes need 1.5e8 cells; the least-memory schedule of the class fits, and here reaches
    the bound of the rounded-down relaxation (so it is optimal)."""
    join = random_join([1, 1, 2], 6844, size_range=(100, 400), overhead=0.8, integer_times=True)
    res = solve_join_dp(join, 3291)
    assert res.schedule is not None and res.details["slots_tried"] == [500, 924]
    assert "least-memory" in res.scope and "exact sizes" in res.scope
    join_replays(join, 3291, res)
    assert res.status == OPTIMAL and res.objective == res.details["relaxation_bound"]


def _mk(seed: int):
    """The small random joins of the confirmed coarse-slot cases."""
    rng = random.Random(seed)
    k = rng.randint(1, 3)
    lengths = [rng.randint(1, 3) for _ in range(k)]
    while sum(lengths) > 6:
        lengths[rng.randrange(k)] = 1
    return random_join(lengths, seed, size_range=(rng.choice([0, 1]), rng.choice([3, 8])),
                       overhead=rng.choice([0, 0.5]), integer_times=True, loss_time=rng.choice([0.0, 1.0]),
                       loss_overhead=rng.choice([0, 2]), mode_overheads=rng.random() < .5,
                       mode_times=rng.random() < .5)


@pytest.mark.parametrize("seed, budget, slots", [(1, 39, 7), (3, 31, 7), (3, 31, 20)])
def test_one_branch_at_coarse_slots_matches_rotor(seed, budget, slots):
    join = _mk(seed)
    assert join.k == 1
    chain = registry.solve("chain", branch_with_loss(join, 0), "rotor", budget, slots=slots)
    for name in ("dp", "cpsat"):
        res = registry.solve("join", join, name, budget, slots=slots, time_limit=10)
        assert res.status == OPTIMAL and res.objective == chain.objective, (name, res.status, res.message)
        join_replays(join, budget, res)


def test_one_branch_min_budget_is_rotors():
    """With one branch the DP's ``infeasible`` (at any slot count) carries the branch's exact least budget."""
    join = _mk(3)
    need = rotor_min_budget(branch_with_loss(join, 0))
    for slots in (0, 7, 500):
        res = solve_join_dp(join, need - 1, slots=slots)
        assert res.status == INFEASIBLE and res.min_budget == need
        assert solve_join_dp(join, need, slots=slots).schedule is not None


def test_rounded_down_is_a_relaxation():
    from memsched.solvers.join.dp import rounded_down

    join = random_join([2, 3], 4, size_range=(10, 97), integer_times=True, overhead=0.5, loss_overhead=5)
    budget = 301
    down, cap = rounded_down(join, budget, 7)
    for c, d in zip(join.branches, down.branches):  # slots of exactly 43 bytes, sizes rounded down
        for name in ("x", "xbar", "o_fa", "o_fn", "o_b"):
            assert [int(v) // 43 for v in getattr(c, name)] == [int(w) for w in getattr(d, name)], name
    assert cap == 7 and down.loss_overhead == 0


def test_k2_without_affordable_exact_sizes(monkeypatch):
    """Small tables (MAX_CELLS lowered): the exact-size retry is skipped; the answer is a schedule
    that fits (finer slots, the rounded-down relaxation's optimum, or the least-memory schedule)
    whenever the DP at exact sizes has one, else ``infeasible`` with the exact least budget."""
    seen = set()
    for seed in range(12):
        join = random_join([2, 1], seed, size_range=(1, 40), integer_times=True, loss_overhead=1)
        top = reference_peak(join)
        budgets = range(top // 3, top, max(1, top // 25))
        truth = {b: solve_join_dp(join, b, slots=0) for b in budgets}
        need = min(b for b in range(top + 1) if solve_join_dp(join, b, slots=0).schedule is not None)
        monkeypatch.setattr(join_dp_module, "MAX_CELLS", 2 * 5 * 12**2)
        for b in budgets:
            res = solve_join_dp(join, b, slots=5)
            join_replays(join, b, res)
            if res.status == INFEASIBLE:
                seen.add("infeasible")
                assert truth[b].status == INFEASIBLE and res.min_budget == need
            else:
                seen.add("least-memory" if "least-memory" in res.scope else res.status)
                assert truth[b].schedule is not None and res.objective >= truth[b].objective - 1e-9
                if res.status == OPTIMAL and "exact sizes" in res.scope:
                    assert math.isclose(res.objective, truth[b].objective)
        monkeypatch.undo()
    assert {"infeasible", "least-memory", OPTIMAL} <= seen


@settings(max_examples=40, deadline=None)
@given(join=st.builds(
    lambda lengths, seed, lo, hi, overhead, loss_overhead, modes: random_join(
        lengths, seed, size_range=(lo, hi), overhead=overhead, integer_times=True, loss_overhead=loss_overhead,
        mode_overheads=modes),
    st.lists(st.integers(1, 4), min_size=1, max_size=3).filter(lambda ls: sum(ls) <= 8), st.integers(0, 10_000),
    st.sampled_from([0, 1]), st.sampled_from([5, 12]), st.sampled_from([0.0, 0.6]), st.sampled_from([0, 3]),
    st.booleans()))
def test_least_memory_is_the_dp_least_budget(join):
    """`least_memory` (no table) is the least budget at which the DP at exact sizes has a schedule,
    its schedule replays within it, and with one branch it is rotor's least budget."""
    from memsched.solvers.join.dp import least_memory

    least = least_memory(join)
    lo, hi = 0, reference_peak(join)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if solve_join_dp(join, mid, slots=0).schedule is not None else (mid + 1, hi)
    assert least is not None and least.budget == lo
    sim = simulate(join, least.schedule, least.budget)
    assert sim.valid, sim.violation
    if join.k == 1:
        assert rotor_min_budget(branch_with_loss(join, 0)) == lo


# ------------------------------------------------------------------ property: no infeasible when a schedule fits
def small_joins(size_range: tuple[int, int]):
    return st.builds(
        lambda lengths, seed, overhead, loss_overhead, modes: random_join(
            lengths, seed, size_range=size_range, overhead=overhead, integer_times=True,
            loss_overhead=loss_overhead, mode_overheads=modes),
        st.lists(st.integers(1, 3), min_size=1, max_size=3).filter(lambda ls: sum(ls) <= 5),
        st.integers(0, 10_000), st.sampled_from([0.0, 0.0, 0.8]), st.sampled_from([0, 0, 2]), st.booleans())


def _never_infeasible_when_one_fits(join, frac: float, slots: int) -> None:
    """With sizes in `slots`, `dp` and `cpsat` answer with a schedule whenever one of the DP's class (which
    cpsat's phase model contains) fits the budget at exact sizes: the sequential heuristic's, or the class's
    least-memory schedule (`least_memory`, no table). The A* search's schedule is no witness: it may lie
    outside both classes (a branch's backward interleaved with another's)."""
    budget = max(1, int(reference_peak(join) * frac))
    exact = registry.solve("join", join, "exact", budget, time_limit=10)
    seq = registry.solve("join", join, "sequential", budget, slots=0)
    for ref in (exact, seq):
        join_replays(join, budget, ref)
    least = join_dp_module.least_memory(join)
    fits = seq.schedule is not None or (least is not None and least.budget <= budget)
    for name, kw in (("dp", {}), ("cpsat", {"time_limit": 10})):
        res = registry.solve("join", join, name, budget, slots=slots, **kw)
        join_replays(join, budget, res)
        if fits:
            assert res.status != INFEASIBLE and res.schedule is not None, (name, budget, slots, res.message)
    if seq.schedule is not None:  # the A* search covers every schedule, the sequential one's among them
        assert exact.schedule is not None


@settings(max_examples=25, deadline=None)
@given(join=small_joins((1, 8)), frac=st.floats(0.3, 1.0), slots=st.sampled_from([3, 5, 7, 12, 20]))
# M = 33: the A* search's schedule (makespan 42) back-propagates one stage of branch 0 before branch 1 and the
# rest after it; no schedule of dp's or cpsat's class fits (dp's least budget is 34)
@example(join=random_join([3, 2], 84, size_range=(1, 8), integer_times=True), frac=33.5 / 72, slots=3)
def test_coarse_slots_never_infeasible_when_a_schedule_fits(join, frac, slots):
    _never_infeasible_when_one_fits(join, frac, slots)


@settings(max_examples=15, deadline=None)
@given(join=small_joins((100, 400)), frac=st.floats(0.3, 1.0))
@example(join=random_join([3], 1, size_range=(300, 3000), integer_times=True), frac=0.7418795)  # M = 11328
@example(join=random_join([2, 2], 2, size_range=(300, 3000), integer_times=True), frac=0.72097625)  # M = 11476
def test_default_slots_never_infeasible_when_a_schedule_fits(join, frac):
    _never_infeasible_when_one_fits(join, frac, 500)


@pytest.mark.parametrize("expired", [False, True])
def test_shared_retry_helper(expired):
    """`retry_rounded_infeasible` (the chain's exact models and the join's cpsat): ``infeasible`` with
    sizes in slots is solved again with exact sizes; with no time left the first answer comes back
    with status ``timeout``, not a claim about the real budget."""
    from memsched.solvers.exact.layer import retry_rounded_infeasible
    from memsched.solvers.exact.options import Deadline, ExactOptions
    from memsched.solvers.result import TIMEOUT, SolveResult

    calls = []

    def fake(instance, budget, *, options, deadline, **_):
        calls.append(options.slots)
        if options.slots:
            return SolveResult(problem="join", solver="cpsat", status=INFEASIBLE, message="none fits")
        return SolveResult(problem="join", solver="cpsat", status=OPTIMAL, objective=1.0)

    deadline = Deadline(0.0 if expired else 10.0)
    res = retry_rounded_infeasible(fake, None, 1000, options=ExactOptions(slots=50), deadline=deadline)
    if expired:
        assert calls == [50] and res.status == TIMEOUT and "50 slots" in res.message
    else:
        assert calls == [50, 0] and res.status == OPTIMAL and res.details["retried_exact_sizes"]


# ------------------------------------------------------------------ rotor-offload's min_budget
@pytest.mark.parametrize("L, seed, ratio, budget, slots", [(2, 1, 1, 16, 0), (4, 6, 1, 26, 0), (4, 22, 0.3, 20, 20)])
def test_rotor_offload_min_budget_is_met_and_one_less_fails(L, seed, ratio, budget, slots):
    inst = random_offload(L, seed, transfer_ratio=ratio, integer_times=True)
    res = registry.solve("offload", inst, "rotor-offload", budget, slots=slots)
    assert res.status == INFEASIBLE
    if res.min_budget is not None:
        assert registry.solve("offload", inst, "rotor-offload", res.min_budget, slots=slots).schedule is not None
        assert registry.solve("offload", inst, "rotor-offload", res.min_budget - 1, slots=slots).schedule is None
    else:  # the smallest peak seen is reported as such, not as a budget it meets
        assert res.details["smallest_peak"] > budget and "smallest_peak" in res.to_json()
