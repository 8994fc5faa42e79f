"""Pipeline partitioning: DPs against brute force and the exact CP-SAT model; simulator checks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.pipeline import Partition, simulate_batch
from memsched.solvers.pipeline import simulate as evaluate
from memsched.solvers.pipeline.baselines import balance_by_time
from memsched.solvers.pipeline.dp import min_budget, partition_dp
from memsched.solvers.pipeline.generate import random_pipeline
from memsched.solvers.pipeline.profiles import resnet50, transformer, vgg16
from memsched.solvers.result import INFEASIBLE, OPTIMAL


def compositions(L: int, max_parts: int):
    """All contiguous partitions of range(L) into at most max_parts stages."""
    for k in range(1, min(L, max_parts) + 1):
        for cuts in itertools.combinations(range(1, L), k - 1):
            edges = (0, *cuts, L)
            yield [(edges[s], edges[s + 1] - 1) for s in range(k)]


def brute_force(inst, P, budget, schedule="1f1b", m=None, replication=False):
    """(best period, best peak among those) over all partitions (with replica counts) fitting budget."""
    best = (math.inf, None)
    for bounds in compositions(inst.length, P):
        reps_options = itertools.product(range(1, P + 1), repeat=len(bounds)) if replication else [(1,) * len(bounds)]
        for reps in reps_options:
            if sum(reps) > P:
                continue
            part = Partition.from_bounds([(a, b, r) for (a, b), r in zip(bounds, reps)], schedule=schedule,
                                         micro_batches=m)
            ev = evaluate(inst, part, budget)
            if ev.violation is None and ev.period < best[0] - 1e-12:
                best = (ev.period, ev.peak_memory)
    return best


instances = st.builds(
    lambda seed, L, bw: random_pipeline(np.random.default_rng(seed), L, bandwidth=bw),
    st.integers(0, 10**6), st.integers(1, 7), st.sampled_from([None, 20.0, 100.0]))


@settings(max_examples=60, deadline=None)
@given(inst=instances, P=st.integers(1, 4), frac=st.floats(-0.15, 1.0), schedule=st.sampled_from(["1f1b", "gpipe"]))
def test_madpipe_matches_brute_force_and_cpsat(inst, P, frac, schedule):
    """Budgets: with `frac` < 0 (about one example in eight) one below the least (`min_budget`, the DP's
    least peak over at most P stages), where all must say infeasible; else `frac` of the way from the
    least to the one-stage peak plus a tenth of the least (so P = 1, where the two peaks coincide, also
    gets budgets above its least)."""
    m = 3 if schedule == "gpipe" else None
    lo = min_budget(inst, P, schedule=schedule, micro_batches=m)
    hi = evaluate(inst, Partition.from_bounds([(0, inst.length - 1)], schedule=schedule, micro_batches=m)).peak_memory
    budget = lo - 1 if frac < 0 else lo + int(frac * (max(hi, lo) - lo + lo // 10))
    expected, _ = brute_force(inst, P, budget, schedule, m)
    opts = {"devices": P, "schedule": schedule, "micro_batches": m}
    dp = registry.solve("pipeline", inst, "madpipe", budget, **opts)
    cp = registry.solve("pipeline", inst, "cpsat", budget, hint=False, **opts)
    if math.isinf(expected):
        assert dp.status == INFEASIBLE and cp.status == INFEASIBLE
        assert dp.min_budget == lo > budget
        return
    assert dp.status == OPTIMAL and cp.status == OPTIMAL
    assert dp.objective == pytest.approx(expected, rel=1e-9)
    assert cp.objective == pytest.approx(expected, rel=1e-9)
    assert dp.peak_memory <= budget and cp.peak_memory <= budget
    assert cp.lower_bound == pytest.approx(expected, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(inst=instances, P=st.integers(1, 5))
def test_pipedream_without_memory_limit_matches_brute_force(inst, P):
    expected, _ = brute_force(inst, P, None)
    res = partition_dp(inst, P, None)
    assert res is not None and res[0] == pytest.approx(expected, rel=1e-9)
    r = registry.solve("pipeline", inst, "pipedream", 10**12, devices=P)
    assert r.status == OPTIMAL and r.objective == pytest.approx(expected, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), L=st.integers(1, 5), P=st.integers(1, 4), bw=st.sampled_from([None, 30.0]),
       limited=st.booleans())
def test_replication_dp_matches_brute_force(seed, L, P, bw, limited):
    inst = random_pipeline(np.random.default_rng(seed), L, bandwidth=bw)
    budget = None
    if limited:
        budget = (min_budget(inst, P, replication=True) + min_budget(inst, 1)) // 2
    expected, _ = brute_force(inst, P, budget, replication=True)
    res = partition_dp(inst, P, budget, replication=True)
    if math.isinf(expected):
        assert res is None
    else:
        assert res is not None and res[0] == pytest.approx(expected, rel=1e-9)
        part = Partition.from_bounds(res[1])
        assert evaluate(inst, part, budget).violation is None


def test_replication_helps_a_dominant_layer():
    inst = random_pipeline(np.random.default_rng(1), 3)
    inst.fwd[1], inst.bwd[1] = 100.0, 200.0
    straight = registry.solve("pipeline", inst, "pipedream", 10**9, devices=4)
    replicated = registry.solve("pipeline", inst, "pipedream", 10**9, devices=4, replication=True)
    assert replicated.objective < straight.objective
    assert any(s.replicas > 1 for s in replicated.schedule.stages)


@settings(max_examples=40, deadline=None)
@given(times=st.lists(st.floats(0.1, 10.0), min_size=1, max_size=8), k=st.integers(1, 5))
def test_balance_by_time_is_min_max(times, k):
    blocks = balance_by_time(times, k)
    assert len(blocks) == min(k, len(times))
    assert blocks[0][0] == 0 and blocks[-1][1] == len(times) - 1
    assert all(b[0] == a[1] + 1 for a, b in zip(blocks, blocks[1:]))
    worst = max(sum(times[a : b + 1]) for a, b in blocks)
    best = min(max(sum(times[a : b + 1]) for a, b in c)
               for c in compositions(len(times), min(k, len(times))) if len(c) == min(k, len(times)))
    assert worst == pytest.approx(best)


@settings(max_examples=40, deadline=None)
@given(inst=instances, P=st.integers(1, 4), m=st.integers(1, 8), schedule=st.sampled_from(["1f1b", "gpipe"]))
def test_batch_simulation_in_flight_and_bounds(inst, P, m, schedule):
    res = partition_dp(inst, P, None, schedule=schedule, micro_batches=m)
    part = Partition.from_bounds(res[1], schedule=schedule, micro_batches=m).evaluated(inst)
    run = simulate_batch(inst, part, m)
    S = len(part.stages)
    expected = [min(m, S - s) for s in range(S)] if schedule == "1f1b" else [m] * S
    assert run.max_in_flight == expected
    if schedule == "gpipe":
        assert [s.in_flight for s in part.stages] == expected
    tau = [s.time for s in part.stages]
    assert run.makespan >= m * max(tau) - 1e-9
    assert run.makespan >= sum(tau) - 1e-9
    if inst.bandwidth is None:  # each phase of the fill/drain is bounded by the slowest stage
        fmax = max(sum(inst.fwd[s.first : s.last + 1]) for s in part.stages)
        bmax = max(sum(inst.bwd[s.first : s.last + 1]) for s in part.stages)
        assert run.makespan <= (m + S - 1) * (fmax + bmax) + 1e-9
    assert 0.0 <= run.bubble_fraction < 1.0


def test_one_f_one_b_in_flight_counts_are_p_minus_s_plus_1():
    inst = random_pipeline(np.random.default_rng(3), 8)
    part = Partition.from_bounds([(0, 1), (2, 3), (4, 5), (6, 7)]).evaluated(inst)
    assert [s.in_flight for s in part.stages] == [4, 3, 2, 1]


def test_memory_model_by_hand():
    from memsched.solvers.pipeline import Pipeline

    inst = Pipeline(fwd=[1, 1, 1], bwd=[2, 2, 2], act=[10, 20, 30], params=[5, 0, 7], input_size=3,
                    weight_factor=4, bandwidth=None)
    ev = evaluate(inst, Partition.from_bounds([(0, 1), (2, 2)]))
    # stage 0: 4*5 + 2 in flight * (input 3 + act[0] 10) + out buffer 20
    # stage 1: 4*7 + 1 * (input 20) + in buffer 20
    assert ev.stage_memory == [4 * 5 + 2 * 13 + 20, 4 * 7 + 20 + 20]
    assert ev.stage_times == [6.0, 3.0] and ev.period == 6.0


def test_bad_partitions_are_rejected():
    inst = random_pipeline(np.random.default_rng(0), 4)
    for bounds in ([(0, 1), (3, 3)], [(0, 2)], [(0, 1), (2, 1), (2, 3)]):
        assert evaluate(inst, Partition.from_bounds(bounds)).violation is not None
    assert evaluate(inst, Partition.from_bounds([(0, 0), (1, 1), (2, 3)]), devices=2).violation is not None


@pytest.mark.parametrize("make", [vgg16, resnet50, lambda: transformer(layers=12)])
@pytest.mark.parametrize("P", [2, 4])
def test_realistic_profiles_dp_equals_cpsat(make, P):
    inst = make().with_machine(bandwidth=12e9)
    lo = min_budget(inst, P)
    budget = int(lo * 1.15)
    dp = registry.solve("pipeline", inst, "madpipe", budget, devices=P)
    cp = registry.solve("pipeline", inst, "cpsat", budget, devices=P, time_limit=30, hint=False)
    pd = registry.solve("pipeline", inst, "pipedream", budget, devices=P)
    bt = registry.solve("pipeline", inst, "balance-time", budget, devices=P)
    assert dp.status == OPTIMAL and cp.status == OPTIMAL
    assert dp.objective == pytest.approx(cp.objective, rel=1e-9)
    for other in (pd, bt):
        if other.status != INFEASIBLE:
            assert other.objective >= dp.objective * (1 - 1e-9)
        else:
            assert other.min_budget > budget
