"""The general interleaved-allocation DP (`interleave-dp`): equal to the exact CP-SAT model and
a brute force on small random chains, never worse than the contiguous DP or the V-shaped DP,
every answer replayed by the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import interleave_brute_force as brute_force
from conftest import interleave_chain as chain
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.pipeline import Pipeline, simulate
from memsched.solvers.pipeline.dp import solve_madpipe
from memsched.solvers.pipeline.interleave import solve_interleave_cpsat, solve_interleave_v
from memsched.solvers.pipeline.interleave_dp import interleave_dp, solve_interleave_dp
from memsched.solvers.registry import solve
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL


def replayed(inst: Pipeline, res, budget, P: int) -> None:
    ev = simulate(inst, res.schedule, budget, devices=P)
    assert ev.violation is None
    assert ev.period == pytest.approx(res.objective, rel=1e-9)
    assert ev.peak_memory == res.peak_memory


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), L=st.integers(3, 6), P=st.integers(2, 3),
       frac=st.sampled_from([None, 1.0, 0.8, 0.6]), bw=st.sampled_from([None, 2e6]))
def test_equals_cpsat_and_never_worse_than_contiguous(seed, L, P, frac, bw):
    inst = chain(seed, L)
    if bw is not None:
        inst.bandwidth = bw
    straight = solve_madpipe(inst, None, devices=P)
    budget = None if frac is None else int(straight.peak_memory * frac)
    smax = min(L, 2 * P)
    res = solve_interleave_dp(inst, budget, devices=P)
    cp = solve_interleave_cpsat(inst, budget if budget is not None else 10**15, devices=P, max_stages=smax,
                                warm_start=False, time_limit=30)
    assert cp.status in (OPTIMAL, INFEASIBLE), cp.message
    if cp.status == INFEASIBLE:
        assert res.status == INFEASIBLE and res.schedule is None
        return
    assert res.status == OPTIMAL, res.message
    replayed(inst, res, budget, P)
    assert res.objective == pytest.approx(cp.objective, rel=1e-9)
    mad = solve_madpipe(inst, budget, devices=P)
    if mad.status == OPTIMAL:  # interleaving includes contiguous partitions
        assert res.objective <= mad.objective + 1e-9


def test_equals_brute_force_and_beats_straight_and_v():
    strictly = 0
    for seed in range(6):
        inst = chain(seed, L=6)
        P, smax = 2, 4
        straight = solve_madpipe(inst, None, devices=P)
        for budget in (None, int(straight.peak_memory * 0.9)):
            want = brute_force(inst, P, budget, smax)
            res = solve_interleave_dp(inst, budget, devices=P, max_stages=smax)
            if math.isinf(want):
                assert res.status == INFEASIBLE
                continue
            assert res.status == OPTIMAL and res.objective == pytest.approx(want, rel=1e-9)
            replayed(inst, res, budget, P)
            v = solve_interleave_v(inst, budget, devices=P)
            if v.status == OPTIMAL:
                assert res.objective <= v.objective + 1e-9
            mad = solve_madpipe(inst, budget, devices=P)
            strictly += mad.status != OPTIMAL or res.objective < mad.objective - 1e-9
    assert strictly >= 1


def test_dp_alone_finds_the_optimum_and_its_beam_is_not_proven():
    inst = chain(0, L=5)
    (period, bounds, dev), exact = interleave_dp(inst, 2, None, max_stages=4)
    assert exact and period == pytest.approx(brute_force(inst, 2, None, 4))
    assert len(bounds) == len(dev) and bounds[0][0] == 0 and bounds[-1][1] == inst.length - 1
    found, exact = interleave_dp(inst, 2, None, max_stages=4, upper=period)  # nothing strictly better
    assert found is None and exact
    _, exact = interleave_dp(chain(1, L=12), 3, None, max_states=2)
    assert not exact
    res = solve_interleave_dp(chain(1, L=12), None, devices=3, max_states=2)
    assert res.status == FEASIBLE and "beam" in res.scope


def test_a_beam_that_finds_nothing_is_infeasible_for_the_search_only():
    """No time limit came, so no `timeout`: `infeasible` marked heuristic (as `interleave`), while the
    whole DP proves the same budget infeasible (a hunt's instance: nothing of the scope fits 13 bytes)."""
    inst = Pipeline(fwd=np.array([3.0, 2, 1, 3]), bwd=np.array([2.0, 2, 0, 1]), act=np.array([5, 0, 0, 5]),
                    params=np.array([2, 5, 0, 5]), input_size=0, weight_factor=1.0, time_unit=1.0)
    beam = solve("pipeline", inst, "interleave-dp", 13, devices=2, max_states=1, time_limit=60)
    assert beam.status == INFEASIBLE and beam.details.get("heuristic") is True
    assert "beam" in beam.scope and "no proof" in beam.message
    whole = solve("pipeline", inst, "interleave-dp", 13, devices=2)
    assert whole.status == INFEASIBLE and not whole.details.get("heuristic")
    assert brute_force(inst, 2, 13, 4) == math.inf


def test_registered_and_refereed():
    inst = chain(3, L=6)
    res = solve("pipeline", inst, "interleave-dp", 10**15, devices=2)
    assert res.status == OPTIMAL and res.schedule.device_of is not None


def test_gpipe_equals_cpsat():
    for seed in range(3):
        inst = chain(seed, L=5)
        straight = solve_madpipe(inst, None, devices=2, schedule="gpipe", micro_batches=4)
        budget = int(straight.peak_memory * 0.9)
        res = solve_interleave_dp(inst, budget, devices=2, schedule="gpipe", micro_batches=4)
        cp = solve_interleave_cpsat(inst, budget, devices=2, schedule="gpipe", micro_batches=4, warm_start=False,
                                    time_limit=30)
        assert res.status == cp.status
        if cp.status == OPTIMAL:
            assert res.objective == pytest.approx(cp.objective, rel=1e-9)
            assert res.schedule.schedule == "gpipe"
            replayed(inst, res, budget, 2)


@pytest.mark.parametrize("seed", range(3))
def test_memory_bound_and_dominance_keep_it_exact(seed):
    """Tight memory (the rest's stash bound prunes) on 6-layer chains and 3 devices, with the
    classic and a measured stash: the same period as the brute force."""
    rng = np.random.default_rng(seed)
    for measured in (False, True):
        inst = chain(seed, L=6)
        if measured:
            inst.saved_by = [[w for w in (l, l + 1) if w < inst.length and rng.random() < 0.7] for l in range(6)]
            inst.input_saved = bool(rng.random() < 0.5)
            inst.__post_init__()
        P, smax = 3, 5
        straight = solve_madpipe(inst, None, devices=P)
        for frac in (1.0, 0.8, 0.65):
            budget = int(straight.peak_memory * frac)
            want = brute_force(inst, P, budget, smax)
            res = solve_interleave_dp(inst, budget, devices=P, max_stages=smax)
            if math.isinf(want):
                assert res.status == INFEASIBLE
                continue
            assert res.status == OPTIMAL and res.objective == pytest.approx(want, rel=1e-9), (measured, frac)
            replayed(inst, res, budget, P)
