"""The join DP: equal to an enumeration of its model, bounded by the exact search, never worse
than the heuristics, equal to the chain DP for one branch; every answer replayed by the simulator."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain.dp import solve_rotor
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.instance import Chain
from memsched.solvers.join import load, reference_peak, simulate
from memsched.solvers.join.astar import enumerate_class, spines
from memsched.solvers.join.dp import effective_slots, fastest_heuristic, solve_join_dp
from memsched.solvers.join.generate import homogeneous_join, random_join
from memsched.solvers.join.instance import Join, branch_with_loss
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

JOIN_DIR = Path(__file__).resolve().parent.parent / "solvers" / "data" / "join"
HEURISTICS = ("equal", "proportional", "sequential")


def _value(result) -> float:
    return result.objective if result.objective is not None else math.inf


def tiny_joins():
    """Random joins with 1..3 branches of 1..3 stages (at most 6 stages), small integer sizes."""
    return st.builds(
        lambda lengths, seed, overhead, loss_overhead: random_join(
            lengths, seed, size_range=(1, 4), overhead=overhead, integer_times=True, loss_overhead=loss_overhead),
        st.lists(st.integers(1, 3), min_size=1, max_size=3).filter(lambda ls: sum(ls) <= 6),
        st.integers(0, 10_000), st.sampled_from([0.0, 0.0, 0.8]), st.sampled_from([0, 0, 2]))


@settings(max_examples=40, deadline=None)
@given(join=tiny_joins(), frac=st.floats(0.35, 1.0))
def test_dp_equals_enumeration_of_its_model(join, frac):
    budget = int(reference_peak(join) * frac)
    dp = registry.solve("join", join, "dp", budget, slots=0)
    best, schedule = enumerate_class(join, budget)
    assert _value(dp) == pytest.approx(best) if math.isfinite(best) else dp.status == INFEASIBLE
    if dp.status == OPTIMAL:
        assert dp.peak_memory <= budget
        assert simulate(join, dp.schedule, budget).valid


@settings(max_examples=25, deadline=None)
@given(join=tiny_joins(), frac=st.floats(0.35, 1.0))
def test_exact_bounds_dp_and_dp_beats_heuristics(join, frac):
    budget = int(reference_peak(join) * frac)
    dp = registry.solve("join", join, "dp", budget, slots=0)
    exact = registry.solve("join", join, "exact", budget, time_limit=20)
    assert exact.status in (OPTIMAL, INFEASIBLE)
    assert _value(exact) <= _value(dp) + 1e-9
    if exact.status == OPTIMAL:
        assert exact.lower_bound == pytest.approx(exact.objective)
    for name in HEURISTICS:
        h = registry.solve("join", join, name, budget, slots=0)
        assert h.status in (FEASIBLE, INFEASIBLE)
        assert _value(dp) <= _value(h) + 1e-9


@settings(max_examples=20, deadline=None)
@given(L=st.integers(1, 7), seed=st.integers(0, 10_000), frac=st.floats(0.2, 1.0), overhead=st.sampled_from([0.0, 0.7]),
       loss_overhead=st.sampled_from([0, 3]), slots=st.sampled_from([0, 60]))
# at 60 slots periodic beats both DPs' schedule at exact sizes: rotor refined its slots, the join DP
# once did not (39.54 against 36.97)
@example(L=5, seed=10, frac=0.875, overhead=0.0, loss_overhead=0, slots=60)
def test_one_branch_equals_chain_dp(L, seed, frac, overhead, loss_overhead, slots):
    chain = random_chain(L, seed, overhead=overhead)
    join = Join.from_chains([chain], loss_time=0.7, loss_overhead=loss_overhead)
    as_chain = branch_with_loss(join, 0)
    budget = int(reference_peak(join) * frac)
    dp = solve_join_dp(join, budget, slots=slots)
    rotor = solve_rotor(as_chain, budget, slots=effective_slots(budget, slots))  # exact sizes when budget <= slots
    if rotor.status == OPTIMAL:
        assert dp.status == OPTIMAL and dp.objective == pytest.approx(rotor.objective)
    else:  # infeasible, or rotor's fallback when the rounding leaves nothing
        assert dp.status == INFEASIBLE


def test_one_branch_join_falls_back_to_the_branchs_baseline(monkeypatch):
    """When no finer table is allowed, a one-branch join answers with the faster baseline
    schedule of its branch, as a join schedule the join simulator accepts (status feasible)."""
    import memsched.solvers.chain.rotor_guard as guard
    import memsched.solvers.join.dp as join_dp

    join = Join.from_chains([random_chain(5, 10, overhead=0.0)], loss_time=0.7, loss_overhead=0)
    budget = int(reference_peak(join) * 0.875)
    first = solve_join_dp(join, budget, slots=60)
    assert first.details["slots_tried"] == [60, 240]  # refined (240 slots > 79 units: exact sizes)
    monkeypatch.setattr(guard, "REFINE_CELLS", 0)
    monkeypatch.setattr(join_dp, "MAX_CELLS", 50_000)  # the 60-slot tables (44,652 cells) but not exact sizes
    res = solve_join_dp(join, budget, slots=60)
    assert res.status == FEASIBLE and res.problem == "join" and res.details["slots_tried"] == [60]
    assert res.details["baseline"]["solver"] == "periodic" and "no optimality claim" in res.scope
    sim = simulate(join, res.schedule, budget)
    assert sim.valid and sim.makespan == pytest.approx(res.objective)
    assert res.objective < res.details["first_makespan"]


@pytest.mark.parametrize("name", ["tiny", "siamese8", "crossmodal3"])
def test_every_solver_replays_on_examples(name):
    join = load(str(JOIN_DIR / f"{name}.json"))
    ref = reference_peak(join)
    for frac in (1.0, 0.6, 0.4):
        budget = int(ref * frac)
        dp = registry.solve("join", join, "dp", budget, slots=60)  # registry.solve replays and checks
        for solver in ("store-all", *HEURISTICS):
            other = registry.solve("join", join, solver, budget, slots=60)
            if other.found:
                assert other.peak_memory <= budget
                assert _value(dp) <= other.objective + 1e-9
        if frac == 1.0:
            assert dp.objective == pytest.approx(join.total_time())  # store-all fits: no recomputation


def test_exact_on_tiny_example_certifies_the_dp():
    join = load(str(JOIN_DIR / "tiny.json"))
    for budget in (24, 19, 17, 16, 15):
        dp = registry.solve("join", join, "dp", budget, slots=0)
        exact = registry.solve("join", join, "exact", budget)
        assert exact.status in (OPTIMAL, INFEASIBLE)
        assert _value(exact) <= _value(dp)


def test_discretised_schedules_fit_the_real_budget():
    join = random_join([6, 4, 3], seed=3, size_range=(1000, 90_000), overhead=0.3, loss_overhead=5000)
    ref = reference_peak(join)
    previous = math.inf
    for frac in (0.5, 0.6, 0.8):
        budget = int(ref * frac)
        res = registry.solve("join", join, "dp", budget, slots=80)
        assert res.status == OPTIMAL and res.peak_memory <= budget and "80-slot" in res.scope
        assert res.objective <= previous + 1e-9  # more memory never hurts
        previous = res.objective


def test_infeasible_budget_and_slot_cap():
    join = homogeneous_join([5, 5])
    assert registry.solve("join", join, "dp", 1, slots=0).status == INFEASIBLE
    big = random_join([40, 40], seed=1, size_range=(10**6, 10**7))
    res = solve_join_dp(big, reference_peak(big) // 2, slots=5000)
    assert res.details["dp_makespan"] > res.objective  # the DP lowered its count to fit MAX_CELLS, so a heuristic
    assert res.status == FEASIBLE and "equal" in res.scope  # at 5000 slots was faster: its schedule, no claim
    best = fastest_heuristic(big, reference_peak(big) // 2, 5000)
    assert best is not None and res.objective <= best.objective * (1 + 1e-9)


def test_dp_order_and_homogeneous_shape():
    # two identical homogeneous branches: processing order is irrelevant, the DP beats the shares
    join = homogeneous_join([6, 6], loss_time=1.0)
    budget = int(reference_peak(join) * 0.45)
    dp = registry.solve("join", join, "dp", budget, slots=0)
    eq = registry.solve("join", join, "equal", budget, slots=0)
    assert dp.status == OPTIMAL and sorted(dp.details["order"]) == [0, 1]
    assert _value(dp) <= _value(eq)
    assert dp.schedule.recomputations() > 0


def test_spine_enumeration_counts():
    # L = 1: F_all(0)|B(0) or F_ck(0)|F_all(0) B(0)
    assert len(spines(1)) == 2
    assert len(spines(2)) > len(spines(1))


@settings(max_examples=15, deadline=None)
@given(join=tiny_joins(), frac=st.floats(0.4, 1.0))
def test_cpsat_between_exact_and_dp(join, frac):
    budget = int(reference_peak(join) * frac)
    dp = registry.solve("join", join, "dp", budget, slots=0)
    cp = registry.solve("join", join, "cpsat", budget, slots=0, time_limit=30)
    exact = registry.solve("join", join, "exact", budget, time_limit=20)
    assert cp.status in (OPTIMAL, INFEASIBLE)  # tiny models are always proven
    assert _value(exact) <= _value(cp) + 1e-9 <= _value(dp) + 2e-9
    if cp.status == OPTIMAL:
        assert cp.lower_bound == pytest.approx(cp.objective)


def test_interleaving_beats_the_sequential_classes():
    # found by the random tests: the exact search interleaves the backward phases of two branches
    join = random_join([3, 1], 34, size_range=(1, 5), integer_times=False, overhead=0.0, loss_overhead=0)
    budget = 37
    dp = registry.solve("join", join, "dp", budget, slots=0)
    cp = registry.solve("join", join, "cpsat", budget, slots=0)
    exact = registry.solve("join", join, "exact", budget)
    assert dp.status == cp.status == exact.status == OPTIMAL
    assert exact.objective < cp.objective - 1e-6 and cp.objective <= dp.objective
    backward = [op for op in exact.schedule.ops if op.kind == "B"]
    firsts = [next(n for n, op in enumerate(backward) if op.branch == b) for b in (0, 1)]
    lasts = [max(n for n, op in enumerate(backward) if op.branch == b) for b in (0, 1)]
    assert firsts[0] < lasts[1] and firsts[1] < lasts[0]  # the two backward phases interleave


# --------------------------------------------------------------------------- per-mode forward overheads
def tiny_mode_joins():
    """Random joins (1..3 branches, at most 6 stages) with distinct o_fa / o_fn per stage, and
    half of them with no-grad forward times u_fn below F_all's u_fa."""
    return st.builds(
        lambda lengths, seed, loss_overhead, times: random_join(
            lengths, seed, size_range=(1, 4), overhead=1.5, integer_times=True, loss_overhead=loss_overhead,
            mode_overheads=True, mode_times=times),
        st.lists(st.integers(1, 3), min_size=1, max_size=3).filter(lambda ls: sum(ls) <= 6),
        st.integers(0, 10_000), st.sampled_from([0, 2]), st.booleans())


@settings(max_examples=30, deadline=None)
@given(join=tiny_mode_joins(), frac=st.floats(0.35, 1.0))
def test_mode_overheads_dp_equals_enumeration(join, frac):
    budget = int(reference_peak(join) * frac)
    dp = registry.solve("join", join, "dp", budget, slots=0)  # registry.solve replays it
    best, _ = enumerate_class(join, budget)  # every candidate replayed by the per-mode simulator
    assert _value(dp) == pytest.approx(best) if math.isfinite(best) else dp.status == INFEASIBLE
    if dp.status == OPTIMAL:
        assert simulate(join, dp.schedule, budget).valid


@settings(max_examples=12, deadline=None)
@given(join=tiny_mode_joins(), frac=st.floats(0.4, 1.0))
def test_mode_overheads_exact_models_bound_the_dp(join, frac):
    budget = int(reference_peak(join) * frac)
    dp = registry.solve("join", join, "dp", budget, slots=0)
    cp = registry.solve("join", join, "cpsat", budget, slots=0, time_limit=30)
    exact = registry.solve("join", join, "exact", budget, time_limit=20)
    assert exact.status in (OPTIMAL, INFEASIBLE) and cp.status in (OPTIMAL, INFEASIBLE)
    assert _value(exact) <= _value(cp) + 1e-9 <= _value(dp) + 2e-9
    for name in HEURISTICS:
        assert _value(dp) <= _value(registry.solve("join", join, name, budget, slots=0)) + 1e-9


@settings(max_examples=15, deadline=None)
@given(L=st.integers(1, 7), seed=st.integers(0, 10_000), frac=st.floats(0.2, 1.0))
def test_mode_overheads_one_branch_equals_chain_dp(L, seed, frac):
    # exact sizes: with slots, solve_rotor's guard may refine past the 60-slot table (not the DP's class)
    join = random_join([L], seed, size_range=(1, 10), overhead=1.5, loss_overhead=2, mode_overheads=True,
                       mode_times=seed % 2 == 0)
    as_chain = branch_with_loss(join, 0)
    assert as_chain.has_mode_overheads() == join.branches[0].has_mode_overheads()
    assert as_chain.has_mode_times() == join.branches[0].has_mode_times() == (seed % 2 == 0)
    budget = int(reference_peak(join) * frac)
    dp = solve_join_dp(join, budget, slots=0)
    rotor = solve_rotor(as_chain, budget, slots=0)
    if rotor.status == OPTIMAL:
        assert dp.status == OPTIMAL and dp.objective == pytest.approx(rotor.objective)
    else:
        assert dp.status == INFEASIBLE


def test_mode_overheads_lower_the_least_budget():
    # branch 0: F_all cheap (o_fa = 0), F_ck / F_n dear (o_fn = 6), as a transformer block; branch 1
    # needs recomputation. Charging max(o_fa, o_fn) to every forward over-predicts: the per-mode
    # DP fits budgets the single-overhead model cannot, and is never slower
    dear = Chain.with_mode_overheads([1.0, 0], [2.0, 0], [1, 1, 0], [0, 1, 0], [0, 0], [6, 0], [0, 0])
    homog = Chain.homogeneous(4, x=1, xbar=2)
    join = Join.from_chains([dear, homog], loss_time=1.0)
    one = Join.from_chains([Chain(dear.u_f, dear.u_b, dear.x, dear.xbar, dear.o_f, dear.o_b), homog], loss_time=1.0)
    strict = 0
    for budget in range(5, reference_peak(one) + 1):
        modes = registry.solve("join", join, "dp", budget, slots=0)
        single = registry.solve("join", one, "dp", budget, slots=0)
        best, _ = enumerate_class(join, budget)
        assert _value(modes) == pytest.approx(best) if math.isfinite(best) else modes.status == INFEASIBLE
        assert _value(modes) <= _value(single) + 1e-9
        strict += _value(modes) < _value(single) - 1e-9
    assert strict >= 2
