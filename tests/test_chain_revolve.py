"""Revolve (binomial checkpointing) on homogeneous chains: closed form, schedule, budget
mapping, and its relation to the rotor DP."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.revolve import (
    beta,
    repetitions,
    revolve_checkpoints,
    revolve_forwards,
    revolve_peak,
    revolve_schedule,
    revolve_split,
    solve_revolve,
)
from memsched.solvers.chain.schedule import FORWARD_KINDS
from memsched.solvers.errors import InputError
from memsched.solvers.registry import solve


@cache
def least_advances(l: int, c: int) -> int:
    """Revolve's model by dynamic programming: advance j, then (l-j, c-1), then (j, c)."""
    if l <= 1:
        return 0
    if c == 1:
        return l * (l - 1) // 2
    return min(j + least_advances(l - j, c - 1) + least_advances(j, c) for j in range(1, l))


def forwards(schedule) -> int:
    return sum(op.kind in FORWARD_KINDS for op in schedule)


@pytest.mark.parametrize("c", range(1, 7))
def test_closed_form_equals_the_dynamic_program(c):
    for l in range(1, 70):
        r = repetitions(l, c)
        assert beta(c, r - 1) < l <= beta(c, r)
        assert revolve_forwards(l, c) == least_advances(l, c), (l, c)


@pytest.mark.parametrize("c", range(2, 7))
def test_split_is_optimal(c):
    for l in range(2, 90):
        j = revolve_split(l, c)
        assert 1 <= j < l
        assert j + revolve_forwards(l - j, c - 1) + revolve_forwards(j, c) == revolve_forwards(l, c)


@pytest.mark.parametrize("L", [1, 2, 3, 5, 8, 13, 21, 40])
def test_schedule_forward_count_equals_closed_form(L):
    chain = Chain.homogeneous(L)
    for c in range(1, L + 2):
        schedule = revolve_schedule(L, c)
        sim = simulate(chain, schedule)
        assert sim.valid, (L, c, sim.violation)
        assert forwards(schedule) == L + revolve_forwards(L, min(c, L)), (L, c)
        assert sim.makespan == pytest.approx(
            (L + revolve_forwards(L, min(c, L))) * chain.u_f[0] + chain.u_b[:L].sum() + chain.u_b[L])


@pytest.mark.parametrize("L", [2, 3, 7, 16, 30])
@pytest.mark.parametrize("x,xbar", [(1, 1), (1, 2), (3, 7)])
def test_peak_formula_without_overheads(L, x, xbar):
    chain = Chain.homogeneous(L, x=x, xbar=xbar)
    peaks = [revolve_peak(chain, c) for c in range(1, L + 1)]
    assert peaks == [(min(c, L - 1) + 3) * x + xbar for c in range(1, L + 1)]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 25), st.integers(1, 4), st.integers(0, 6), st.integers(0, 3), st.integers(0, 3),
       st.integers(0, 60))
def test_solver_fits_and_takes_most_checkpoints(L, x, extra, o_f, o_b, slack):
    chain = Chain.homogeneous(L, x=x, xbar=x + extra, u_f=1.0, u_b=2.0, loss_time=0.5)
    chain.o_f[:L] = o_f
    chain.o_b[:L] = o_b
    need = revolve_peak(chain, 1)
    peaks = [revolve_peak(chain, c) for c in range(1, L + 1)]
    assert peaks == sorted(peaks)
    budget = need + slack
    result = solve("chain", chain, "revolve", budget)  # replays and checks the makespan
    c = result.details["checkpoints"]
    assert result.status == "feasible" and result.peak_memory <= budget
    assert c == max(k for k in range(1, L + 1) if peaks[k - 1] <= budget)
    assert result.details["forwards"] == L + revolve_forwards(L, c) == forwards(result.schedule)
    low = solve("chain", chain, "revolve", need - 1)
    assert low.status == "infeasible" and low.min_budget == need and low.schedule is None


def test_rejects_heterogeneous_chains():
    with pytest.raises(InputError, match="homogeneous"):
        solve_revolve(random_chain(6, 0), 10**6)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 14), st.integers(1, 3), st.integers(0, 5), st.integers(0, 2), st.integers(0, 2),
       st.integers(0, 15))
def test_rotor_is_never_worse_than_revolve(L, x, extra, o_f, o_b, slack):
    """Revolve's schedules are persistent schedules (advances = C_ck, turns = leaves and
    C_all(L-1, L)), so the exact rotor DP at the same budget is at least as good."""
    chain = Chain.homogeneous(L, x=x, xbar=x + extra, u_f=1.0, u_b=2.0, loss_time=0.5)
    chain.o_f[:L] = o_f
    chain.o_b[:L] = o_b
    budget = revolve_peak(chain, 1) + slack
    rev = solve("chain", chain, "revolve", budget)
    rot = solve("chain", chain, "rotor", budget, slots=0)
    assert rot.status == "optimal"
    assert rot.objective <= rev.objective + 1e-9


@pytest.mark.parametrize("L", [2, 5, 9, 20])
@pytest.mark.parametrize("x,xbar", [(1, 2), (2, 5), (1, 4)])
def test_rotor_equals_revolve_at_the_one_checkpoint_budget(L, x, xbar):
    """Where the models coincide: no overheads, xbar >= 2x, budget = Revolve's peak with c = 1.
    A second checkpoint (x) or an early tape (xbar >= x) would not fit, so the best persistent
    schedule recomputes from a_0 as Revolve does."""
    chain = Chain.homogeneous(L, x=x, xbar=xbar)
    budget = revolve_peak(chain, 1)
    c = revolve_checkpoints(chain, budget)
    assert c == 1 or (L == 2 and revolve_forwards(L, c) == revolve_forwards(L, 1))  # peak(c) saturates at L - 1
    rev = solve("chain", chain, "revolve", budget)
    rot = solve("chain", chain, "rotor", budget, slots=0)
    assert rot.objective == pytest.approx(rev.objective)
    assert forwards(rot.schedule) == L + L * (L - 1) // 2


def test_rotor_can_beat_revolve_when_tapes_are_cheap():
    """With xbar = x the DP keeps a tape where Revolve would recompute: strictly better."""
    chain = Chain.homogeneous(8, x=1, xbar=1)
    budget = revolve_peak(chain, 3)
    rev = solve("chain", chain, "revolve", budget)
    rot = solve("chain", chain, "rotor", budget, slots=0)
    assert rot.objective < rev.objective
