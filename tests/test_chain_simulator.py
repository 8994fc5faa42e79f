"""The chain simulator: hand-computed replays, closed forms of the baselines, every rejection."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import (
    periodic_schedule,
    recompute_all_schedule,
    segment_bounds,
    store_all_schedule,
)
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Schedule
from memsched.solvers.chain.simulator import ScheduleError


@pytest.fixture
def tiny(examples) -> Chain:
    return Chain.load(examples / "tiny.json")


def test_store_all_by_hand(tiny):
    # x = [4,4,2,2,1,0], xbar = [0,8,6,4,2,0], o_f = [0,1,0,0,0], o_b = [0,1,2,0,0]
    sim = simulate(tiny, store_all_schedule(4)).raise_if_invalid()
    during = [s.mem_during for s in sim.steps]
    after = [s.mem_after for s in sim.steps]
    #            F0  F1  F2  F3  Loss B3  B2  B1  B0
    assert during == [12, 19, 22, 24, 25, 27, 28, 25, 20]
    assert after == [12, 18, 22, 24, 25, 24, 20, 16, 4]
    assert sim.peak_memory == 28
    assert sim.makespan == pytest.approx(14.0)
    assert sim.final_memory == 4  # only delta_0 is left


def test_checkpoint_and_free_by_hand(tiny):
    ops = [F_ck(0), F_n(1), F_all(2), F_all(3), Loss(4), Bwd(3), Bwd(2), F_all(0), F_all(1), Bwd(1), Bwd(0)]
    sim = simulate(tiny, ops).raise_if_invalid()
    # F_ck(0): 4 + a_1(4) = 8; F_n(1): 8 + a_2(2) + o_f 1 = 11, frees a_1 -> 6
    assert [s.mem_during for s in sim.steps[:2]] == [8, 11]
    assert [s.mem_after for s in sim.steps[:2]] == [8, 6]
    # F_all(2) from a_2: 6 + 4 = 10; F_all(3): 12; Loss: 13 -> 13; B(3): 15 -> 12 (frees 2+1)
    # B(2): 12 + 2 + 2 = 16 -> frees tape 4, delta_3 2, standalone a_2 2 -> 6
    assert [s.mem_during for s in sim.steps[2:7]] == [10, 12, 13, 15, 16]
    assert sim.steps[6].mem_after == 6
    assert sim.makespan == pytest.approx(14.0 + 1.0 + 2.0)  # stages 0 and 1 recomputed


def _closed_form_store_all_peak(c: Chain) -> int:
    L, x, xb = c.length, c.x, c.xbar
    tapes = [int(xb[1 : k + 2].sum()) for k in range(L)]  # sum of tapes after F_all(k)
    peaks = [x[0] + tapes[k] + c.o_f[k] for k in range(L)]
    peaks.append(x[0] + tapes[-1] + x[L] + c.o_b[L])
    peaks += [x[0] + tapes[i] + x[i + 1] + x[i] + c.o_b[i] for i in range(L)]
    return int(max(peaks))


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 12), seed=st.integers(0, 10_000), overhead=st.sampled_from([0.0, 0.5]))
def test_baselines_match_closed_forms(L, seed, overhead):
    c = random_chain(L, seed, overhead=overhead)
    total = c.total_time()
    sim = simulate(c, store_all_schedule(L)).raise_if_invalid()
    assert sim.makespan == pytest.approx(total)
    assert sim.peak_memory == _closed_form_store_all_peak(c)

    sim = simulate(c, recompute_all_schedule(L)).raise_if_invalid()
    forwards = sum(c.u_f[k] * (1 + L - k) for k in range(L))
    assert sim.makespan == pytest.approx(forwards + c.u_b.sum())

    for k in range(1, L + 1):
        bounds = segment_bounds(L, k)
        assert bounds[0][0] == 0 and bounds[-1][1] == L - 1 and len(bounds) == k
        recomputed = sum(c.u_f[s : e + 1].sum() for s, e in bounds[:-1])
        sim = simulate(c, periodic_schedule(L, k)).raise_if_invalid()
        assert sim.makespan == pytest.approx(total + recomputed)
        assert sim.final_memory == c.x[0]


def test_periodic_with_one_segment_is_store_all():
    assert periodic_schedule(7, 1).ops == store_all_schedule(7).ops


def test_checkpoint_sequential_segment_sizes():
    assert segment_bounds(10, 3) == [(0, 2), (3, 5), (6, 9)]
    assert segment_bounds(4, 4) == [(0, 0), (1, 1), (2, 2), (3, 3)]


@pytest.mark.parametrize(
    "ops, position, reason",
    [
        ([F_ck(1)], 0, "a_1 is not resident"),
        ([F_ck(0), F_n(0)], 1, "a_1 is already resident"),
        ([F_n(0), F_ck(0)], 1, "a_0 is not resident"),
        ([F_ck(0), Bwd(0)], 1, "abar_1 is not resident"),
        ([F_all(0), Bwd(0)], 1, "delta_1 is not resident"),
        ([F_all(0), F_all(1), F_all(2), Loss(4)], 3, "a_4 is not resident"),
        ([F_all(0), F_all(1), F_all(2), F_all(3), Loss(4), Loss(4)], 5, "the loss already ran"),
        ([F_all(0), F_all(0)], 1, "abar_1 is already resident"),
        ([F_all(0), F_all(1), F_all(2), F_all(3), Loss(4), Bwd(3), Bwd(2)], 7, "missing backward B(1), B(0)"),
    ],
)
def test_each_rejection_names_first_offending_op(tiny, ops, position, reason):
    sim = simulate(tiny, Schedule(ops, 4))
    assert not sim.valid
    assert sim.violation.position == position
    assert reason in sim.violation.reason
    assert len(sim.steps) == min(position, len(ops))
    with pytest.raises(ScheduleError, match="invalid schedule"):
        sim.raise_if_invalid()


def test_budget_violation(tiny):
    sim = simulate(tiny, store_all_schedule(4), budget=27)
    assert sim.violation.reason == "memory over budget: 28 > 27 bytes while it runs"
    assert str(sim.violation.op) == "B(2)"
    assert simulate(tiny, store_all_schedule(4), budget=28).valid


def test_backward_twice_rejected(tiny):
    ops = store_all_schedule(4).ops
    sim = simulate(tiny, ops + [Bwd(0)])
    assert "B(0) already ran" in sim.violation.reason


def test_profile_is_contiguous_in_time(tiny):
    sim = simulate(tiny, periodic_schedule(4, 2)).raise_if_invalid()
    for a, b in zip(sim.steps, sim.steps[1:]):
        assert math.isclose(a.end, b.start)
    assert sim.peak_memory == max(s.mem_during for s in sim.steps)
