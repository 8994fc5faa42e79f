"""The rotor persistent DP: against a brute force over persistent schedules, the printed
recurrence, the simulator, the baselines; budgets, slots, curve."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from conftest import assert_dp_equals_brute_force, best_within, persistent_brute_force, tiny_chains
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, reference_peak, simulate
from memsched.solvers.chain import dp as rotor_mod
from memsched.solvers.chain.dp import (
    min_memory_schedule,
    rotor_curve,
    rotor_min_budget,
    rotor_table,
    solve_rotor,
)
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Op
from memsched.solvers.errors import InputError
from memsched.solvers.registry import solve

BASELINES = ("store-all", "periodic", "sqrt", "recompute-all")


# --------------------------------------------------------------------------- references


def literal_recurrence(chain: Chain):
    """The recurrence exactly as the paper prints it (C_all = C(m,i,i) + C(m - xbar, i+1, l)).

    Returns (C, schedule): C(m, i, l) -> value, schedule(m) -> ops of C(m, 0, L). Slow, tiny chains only.
    """
    L = chain.length
    x, xb = [int(v) for v in chain.x], [int(v) for v in chain.xbar]
    of, ob = [int(v) for v in chain.o_f], [int(v) for v in chain.o_b]
    uf, ub = [float(v) for v in chain.u_f], [float(v) for v in chain.u_b]

    @cache
    def C(m: int, i: int, l: int) -> tuple[float, object]:
        if m < 0:
            return math.inf, None
        if i == l:
            if m >= max(x[i + 1] + xb[i + 1] + of[i], x[i] + x[i + 1] + xb[i + 1] + ob[i]):
                return uf[i] + ub[i], "leaf"
            return math.inf, None
        if m < x[l + 1] + max([x[i + 1] + of[i]] + [x[j] + x[j + 1] + of[j] for j in range(i + 1, l)]):
            return math.inf, None
        best: tuple[float, object] = (math.inf, None)
        for j in range(i + 1, l + 1):
            if x[j] <= m:
                v = sum(uf[i:j]) + C(m - x[j], j, l)[0] + C(m, i, j - 1)[0]
                if v < best[0]:
                    best = (v, j)
        v = C(m, i, i)[0] + C(m - xb[i + 1], i + 1, l)[0]
        if v < best[0]:
            best = (v, "all")
        return best

    def schedule(m: int, i: int = 0, l: int = L) -> list[Op]:
        _, how = C(m, i, l)
        if how == "leaf":
            return [Loss(L)] if i == L else [F_all(i), Bwd(i)]
        if how == "all":
            return [F_all(i), *schedule(m - xb[i + 1], i + 1, l), Bwd(i)]
        assert isinstance(how, int)
        return ([F_ck(i)] + [F_n(k) for k in range(i + 1, how)] + schedule(m - x[how], how, l)
                + schedule(m, i, how - 1))

    return (lambda m, i=0, l=L: C(m, i, l)[0]), schedule


# --------------------------------------------------------------------------- exactness
@settings(max_examples=150, deadline=None)
@given(tiny_chains())
def test_dp_equals_brute_force_over_persistent_schedules(chain):
    assert_dp_equals_brute_force(chain)


@settings(max_examples=40, deadline=None)
@given(tiny_chains(max_L=5, forward_overheads=False))
def test_dp_equals_printed_recurrence_without_forward_overheads(chain):
    C, _ = literal_recurrence(chain)
    M = int(reference_peak(chain)) + 2
    table = rotor_table(chain, M)
    L = chain.length
    for m in range(M + 1):
        for i in range(L + 1):
            for l in range(i, L + 1):
                assert table.value(m, i, l) == pytest.approx(C(m, i, l), abs=1e-9), (m, i, l)


# A chain where o_f[i] <= x[i] + o_b[i] for every i, yet the printed recurrence admits a schedule
# that overflows: in C_all(m, 0, l) with l < L it checks x[1] + xbar[1] + o_f[0] for F_all(0)
# while delta_{l+1} (x[l+1] > x[1]) is what is resident.
OVERFLOW = Chain(u_f=[2.0, 2.0, 2.0, 2.0, 0.0], u_b=[2.0, 3.0, 2.0, 3.0, 1.0], x=[10, 4, 7, 4, 5, 0],
                 xbar=[0, 8, 7, 7, 10, 0], o_f=[12, 3, 8, 4, 0], o_b=[2, 0, 1, 2, 0])
# A chain where the printed recurrence rejects a fitting schedule (o_f[i] > x[i] + o_b[i]).
TOO_STRICT = Chain(u_f=[3.0, 2.0, 1.0, 0.0], u_b=[2.0, 1.0, 1.0, 1.0], x=[2, 1, 4, 2, 0], xbar=[0, 5, 4, 6, 0],
                   o_f=[11, 6, 7, 0], o_b=[3, 3, 0, 0])


def test_printed_recurrence_can_overflow_with_forward_overheads():
    chain = OVERFLOW
    assert all(chain.o_f[i] <= chain.x[i] + chain.o_b[i] for i in range(chain.length))
    budget = 36
    C, schedule = literal_recurrence(chain)
    m = budget - int(chain.x[0])
    literal_ops = schedule(m)
    sim = simulate(chain, literal_ops, budget)
    assert not sim.valid and "over budget" in sim.violation.reason
    assert C(m) == 29.0
    # the exact DP: a slower schedule that fits, and the brute force agrees
    result = solve("chain", chain, "rotor", budget, slots=0)
    assert result.status == "optimal" and result.peak_memory <= budget
    assert result.objective == 31.0 == best_within(persistent_brute_force(chain), budget)


def test_printed_recurrence_can_reject_fitting_schedules():
    chain = TOO_STRICT
    budget = 19 + int(chain.x[0])
    C, _ = literal_recurrence(chain)
    exact = solve("chain", chain, "rotor", budget, slots=0)
    assert exact.objective == best_within(persistent_brute_force(chain), budget) < C(19)


# --------------------------------------------------------------------------- solver contract
@settings(max_examples=25, deadline=None)
@given(st.integers(1, 14), st.integers(0, 10_000), st.floats(0.0, 1.0), st.sampled_from([0, 7, 60]),
       st.sampled_from([0.0, 1.5]))
def test_schedules_replay_to_the_reported_makespan(L, seed, frac, slots, overhead):
    chain = random_chain(L, seed, overhead=overhead)
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    budget = int(lo + frac * (hi + 3 - lo))
    result = solve("chain", chain, "rotor", budget, slots=slots)  # replays; raises on any mismatch
    assert result.min_budget == lo
    assert result.status in ("optimal", "feasible")
    assert result.peak_memory <= budget
    assert result.details["no_recompute_time"] <= result.objective + 1e-9
    if slots == 0:
        assert result.status == "optimal"


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 12), st.integers(0, 10_000), st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0]))
def test_dp_beats_every_baseline(L, seed, frac, overhead):
    chain = random_chain(L, seed, overhead=overhead)
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    budget = int(lo + frac * (hi - lo))
    best = solve("chain", chain, "rotor", budget, slots=0).objective
    for name in BASELINES:
        other = solve("chain", chain, name, budget)
        if other.status == "feasible":
            assert best <= other.objective + 1e-9, name


@pytest.mark.parametrize("seed", range(4))
def test_infeasible_below_min_budget_and_min_memory_schedule(seed):
    chain = random_chain(8, seed, overhead=1.0)
    lo = rotor_min_budget(chain)
    below = solve("chain", chain, "rotor", lo - 1, slots=0)
    assert below.status == "infeasible" and below.schedule is None and below.min_budget == lo
    assert str(lo) in below.message
    at = solve("chain", chain, "rotor", lo, slots=0)
    assert at.status == "optimal" and at.peak_memory <= lo
    assert simulate(chain, min_memory_schedule(chain)).peak_memory == lo


@pytest.mark.parametrize("seed", range(3))
def test_curve_monotone_and_consistent(seed):
    chain = random_chain(10, seed, overhead=0.5)
    peak = reference_peak(chain)
    budgets, makespans = rotor_curve(chain, peak + 5, slots=0)
    assert list(budgets) == list(range(peak + 6))
    finite = np.isfinite(makespans)
    first = int(np.argmax(finite))
    assert first == rotor_min_budget(chain) and finite[first:].all()
    assert np.all(np.diff(makespans[first:]) <= 1e-9)
    assert makespans[-1] == pytest.approx(chain.total_time())
    for b in range(first, peak + 6, 7):
        assert solve_rotor(chain, b, slots=0).objective == pytest.approx(makespans[b])
    # a discretised curve is never better than the exact one at its (byte) budgets
    sb, sm = rotor_curve(chain, peak + 5, slots=20)
    assert len(sb) == 21 and sb[-1] == peak + 5
    for b, v in zip(sb, sm):
        assert v >= makespans[b] - 1e-9
    assert np.all(np.diff(sm[np.isfinite(sm)]) <= 1e-9)


def test_discretised_schedule_fits_real_bytes():
    chain = random_chain(30, 5, size_range=(1000, 1_000_000), overhead=0.5)
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    for frac in (0.05, 0.3, 0.7):
        budget = int(lo + frac * (hi - lo)) + 1
        for slots in (50, 500):
            r = solve("chain", chain, "rotor", budget, slots=slots)
            assert r.found and r.peak_memory <= budget
            assert ("500-slot" in r.scope) == (slots == 500)
    # more slots never hurt much: 500-slot answer within the exact optimum's reach
    assert solve("chain", chain, "rotor", hi, slots=500).objective == pytest.approx(chain.total_time())


def test_exact_slots_guard_on_huge_budget():
    chain = random_chain(40, 1, size_range=(10**6, 10**7))
    budget = reference_peak(chain) // 2
    with pytest.raises(InputError, match="--slots"):
        solve_rotor(chain, budget, slots=0)


@pytest.mark.skipif(not rotor_mod.HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("seed", range(3))
def test_numba_and_numpy_kernels_agree(seed):
    chain = random_chain(15, seed, overhead=1.0)
    a = rotor_table(chain, 120, use_numba=True)
    b = rotor_table(chain, 120, use_numba=False)
    assert np.array_equal(a.C, b.C)
    tables = []
    for kernel in (rotor_mod._min_memory_numba, rotor_mod._min_memory_numpy):
        Mm = np.zeros((16, 16), dtype=np.int64)
        ch = np.full((16, 16), -2, dtype=np.int64)
        kernel(*rotor_mod._arrays(chain), Mm, ch)
        tables.append(Mm)
    assert np.array_equal(np.triu(tables[0]), np.triu(tables[1]))


def test_long_chain_reconstruction_has_no_recursion_limit():
    chain = random_chain(400, 2)
    r = solve("chain", chain, "rotor", reference_peak(chain) // 3, slots=30)
    assert r.found and r.schedule.count("B") == 400


@pytest.mark.parametrize("slots", [5, 50, 500])
def test_coarse_slots_at_the_min_budget_fall_back_to_the_least_memory_schedule(slots):
    chain = random_chain(10, 0, overhead=1.0, size_range=(1, 1000))
    lo = rotor_min_budget(chain)
    r = solve("chain", chain, "rotor", lo, slots=slots)
    assert r.found and r.peak_memory <= lo
    if r.status == "feasible":
        assert "least-memory" in r.message
    else:
        assert r.status == "optimal" and "exact sizes" in r.scope
    assert r.objective >= solve("chain", chain, "rotor", lo, slots=0).objective - 1e-9


def test_coarse_slots_on_big_sizes_return_the_least_memory_schedule():
    chain = random_chain(12, 3, overhead=1.0, size_range=(10**5, 10**6))
    lo = rotor_min_budget(chain)
    r = solve("chain", chain, "rotor", lo, slots=5)
    assert r.status == "feasible" and "least-memory" in r.message and r.peak_memory == lo


def test_slots_none_means_the_default():
    chain = random_chain(12, 1)
    budget = reference_peak(chain) // 2
    assert solve_rotor(chain, budget, slots=None).scope == solve_rotor(chain, budget).scope


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 12), st.integers(0, 10_000), st.floats(0.0, 1.0), st.integers(0, 40))
def test_a_budget_within_the_slots_keeps_exact_sizes(L, seed, fraction, extra_slots):
    """`solvers.discretize.effective_slots`: with a budget of at most S units the DP, the curve
    and the shared table use exact sizes (integers are finer than S slots), never a slot below one unit."""
    chain = random_chain(L, seed, size_range=(1, 9), overhead=0.5)
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    budget = lo + int(fraction * (hi - lo))
    slots = budget + extra_slots
    exact = solve_rotor(chain, budget, slots=0)
    within = solve_rotor(chain, budget, slots=slots)
    assert within.objective == pytest.approx(exact.objective, rel=1e-12)
    shared = solve_rotor(chain, budget, slots=slots, table_budget=budget + extra_slots // 2)
    assert shared.objective == pytest.approx(exact.objective, rel=1e-12)
    budgets, makespans = rotor_curve(chain, slots, slots=slots)
    assert list(budgets) == list(range(slots + 1))
    assert makespans[budget] == pytest.approx(exact.objective, rel=1e-12)
