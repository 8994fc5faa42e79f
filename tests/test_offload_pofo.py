"""The POFO-style DP (rematerialization + offloading of checkpoints): every schedule replays
within its budget with the DP's own makespan, it never loses to remat-only, it goes below
rotor's smallest budget when the link is fast, and it falls back to rotor when it is slow."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain import Chain
from memsched.solvers.chain import reference_peak as store_all_peak
from memsched.solvers.chain.dp import rotor_min_budget, solve_rotor
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, LOSS, B
from memsched.solvers.offload import SOLVERS as OFFLOAD_SOLVERS
from memsched.solvers.offload import OffloadInstance
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.combined import solve_rotor_offload
from memsched.solvers.offload.dp import solve_pofo
from memsched.solvers.offload.schedule import Transfer


def _big_input_chain() -> Chain:
    """a_0 is large and the last tape is huge: rotor must hold a_0 while the tape lives."""
    L = 4
    return Chain(u_f=np.array([1.0] * L + [0.0]), u_b=np.array([2.0] * L + [1.0]),
                 x=np.array([50] + [1] * L + [0]), xbar=np.array([0, 2, 2, 2, 150, 0]),
                 o_f=np.zeros(L + 1, dtype=np.int64), o_b=np.zeros(L + 1, dtype=np.int64))


def _compute_time(chain: Chain, schedule) -> float:
    """Sum of the compute ops' durations (forwards counted as often as they run)."""
    total = 0.0
    for op in schedule.ops:
        if isinstance(op, Transfer):
            continue
        kind, i = op
        if kind in (F_ALL, F_CK, F_N):
            total += float(chain.u_f[i])
        elif kind == B:
            total += float(chain.u_b[i])
        elif kind == LOSS:
            total += float(chain.u_b[chain.length])
    return total


def _check(inst: OffloadInstance, budget: int, slots: int):
    res = solve_pofo(inst, budget, slots=slots)
    rotor = solve_rotor(inst.chain, budget, slots=slots)
    if res.schedule is None:
        assert res.status == "infeasible"
        assert rotor.schedule is None or simulate_offload(inst, _as_offload(rotor.schedule)).peak_memory > budget
        return res
    assert res.status == "feasible"
    sim = simulate_offload(inst, res.schedule, budget)
    assert sim.valid, sim.violation
    assert sim.peak_memory <= budget
    assert res.objective == sim.makespan and res.peak_memory == sim.peak_memory
    if rotor.schedule is not None:
        assert res.objective <= rotor.objective * (1 + 1e-9) + 1e-9
    ro = solve_rotor_offload(inst, budget, slots=slots)
    if ro.schedule is not None:  # never beaten by rotor-offload (whose schedules lie outside the DP's class)
        assert res.objective <= ro.objective * (1 + 1e-12)
    if res.details.get("solution_from") in ("rotor-offload", "offload-prefix"):
        assert res.details.get("dp_makespan", math.inf) > res.objective
        return res
    est = res.details["dp_estimate"]
    if "dp_link_factor" in res.details:  # the DP planned on a faster link: its value is that link's
        return res
    # the DP's charges are the simulator's (module docstring, rules 1-3), or above them when
    # a value travels to the host twice (the second Off is free in the simulator) or when the
    # same ops replayed without the DP's waits fit and are faster ("dp_unpinned")
    offs = [t for t in res.schedule.transfers() if t.kind == "Off"]
    if len(set(offs)) == len(offs) and "dp_unpinned" not in res.details:
        assert est == pytest.approx(sim.makespan, rel=1e-9, abs=1e-9)
    else:
        assert est >= sim.makespan * (1 - 1e-9) - 1e-9
    return res


def _as_offload(schedule):
    from memsched.solvers.offload import OffloadSchedule

    return OffloadSchedule.from_chain(schedule)


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 7), seed=st.integers(0, 10_000), frac=st.floats(0.6, 1.1),
       bandwidth=st.sampled_from([1e15, 1e5, 1e4, 3e3, 10.0]), latency=st.sampled_from([0.0, 1e-4]),
       slots=st.sampled_from([0, 40]), overhead=st.sampled_from([0.0, 0.5]))
def test_random_chains_replay_within_budget(L, seed, frac, bandwidth, latency, slots, overhead):
    chain = random_chain(L, seed, overhead=overhead)
    inst = OffloadInstance(chain, bandwidth, latency)
    lo, hi = rotor_min_budget(chain), store_all_peak(chain)
    budget = max(1, int(lo * frac) if frac < 1 else int(lo + (frac - 1) * 10 * (hi - lo)))
    _check(inst, budget, slots)


def test_below_rotor_minimum_with_a_fast_link():
    chain = _big_input_chain()
    inst = OffloadInstance(chain, 1e15)
    assert rotor_min_budget(chain) == 203
    assert solve_rotor(chain, 153, slots=0).status == "infeasible"
    res = _check(inst, 153, 0)
    assert res.status == "feasible" and res.peak_memory <= 153
    assert "Off(a_0)" in str(res.schedule)  # the big input travels
    # no idle time: the makespan is the compute time, recomputations included
    assert res.objective == pytest.approx(_compute_time(chain, res.schedule), rel=1e-12)
    # offloaded inputs of F_all (a_0, abar_1, abar_2 travel): one forward runs twice, where
    # offloading checkpoints only (F_ck(0) Off(a_0) ...) reran three
    assert res.objective == pytest.approx(chain.total_time() + 1.0)
    assert solve_pofo(inst, 152, slots=0).status == "infeasible"
    # with slots the same holds, a little above (sizes rounded up)
    res = _check(inst, 170, 500)
    assert res.peak_memory <= 170 and res.details["transfers"] > 0


def test_waits_are_charged_and_pins_respected():
    chain = _big_input_chain()
    # 50 B at 100 kB/s: 0.5 ms, hidden by F_ck(0) (1 ms) and, coming back, by B(1) (2 ms)
    res = _check(OffloadInstance(chain, 1e5), 153, 0)
    assert res.status == "feasible"
    assert "Pre(a_0) B(1)" in str(res.schedule)
    assert res.objective < _compute_time(chain, res.schedule) + 0.5
    # 50 B at 20 kB/s: 2.5 ms, longer than F_all(0) (1 ms): the input of F_all(0) travels and
    # the DP makes the right sub-chain wait for the Off (pinned at 2.5); the same ops without that
    # wait are returned when they fit and are faster (outside the DP's class)
    inst = OffloadInstance(chain, 2e4)
    res = _check(inst, 153, 0)
    sim = simulate_offload(inst, res.schedule, 153)
    times = {str(t.op): (t.start, t.end) for t in sim.ops}
    assert str(res.schedule).startswith("F_all(0) Off(a_0) F_all(1)")
    assert times["Off(a_0)"] == pytest.approx((0.0, 2.5))
    if "dp_unpinned" in res.details:
        assert times["F_all(1)"][0] < 2.5
        assert res.objective < res.details["dp_estimate"]
    else:
        assert times["F_all(1)"][0] == pytest.approx(2.5)
        assert res.objective == pytest.approx(res.details["dp_estimate"])
    # below the best schedule that offloads checkpoints only: F_ck(0) Off(a_0) F_n(1) F_ck(2) ...
    # (its compute time 16 + waits 0.5 + 0.05 + 0.5)
    assert res.objective < 16.0 + 0.5 + 0.05 + 0.5
    # a very slow link: still feasible below rotor's minimum, at the price of long waits
    res = _check(OffloadInstance(chain, 100.0), 153, 0)
    assert res.status == "feasible" and res.objective > 1000.0


def test_tiny_bandwidth_is_rotor():
    for seed in range(6):
        chain = random_chain(8, seed)
        inst = OffloadInstance(chain, 1e-3)
        for frac in (1.0, 1.2, 1.5):
            budget = int(rotor_min_budget(chain) * frac)
            res = _check(inst, budget, 100)
            rotor = solve_rotor(chain, budget, slots=100)
            assert res.details["transfers"] == 0
            # rotor's schedule, or a checkpoint schedule rotor-offload found at another slot size
            assert res.objective <= rotor.objective * (1 + 1e-12)
            if "solution_from" not in res.details:
                assert res.objective == pytest.approx(rotor.objective, rel=1e-12)


def test_fast_link_never_slower_and_often_faster():
    gains = 0
    for seed in range(8):
        chain = random_chain(10, seed)
        inst = OffloadInstance(chain, 1e15)
        budget = int(rotor_min_budget(chain) * 1.2)
        res = _check(inst, budget, 200)
        rotor = solve_rotor(chain, budget, slots=200)
        gains += res.objective < rotor.objective - 1e-9
    assert gains >= 4


def test_tape_container_offloaded_when_it_pays():
    """Values living inside a tape (a_i in abar_i) travel as abar_i and replay exactly."""
    seen = False
    for seed in range(40):
        chain = random_chain(6, seed, tape_factor=(1.0, 1.2))
        inst = OffloadInstance(chain, 1e15)
        for frac in (1.0, 1.15, 1.3):
            res = _check(inst, int(rotor_min_budget(chain) * frac), 0)
            if res.schedule is not None and any(t.value == "abar" for t in res.schedule.transfers()):
                seen = True
    assert seen


def test_through_the_registry(monkeypatch):
    monkeypatch.setitem(OFFLOAD_SOLVERS, "pofo", ("memsched.solvers.offload.dp:solve_pofo", "rotor DP + offloading"))
    inst = OffloadInstance(_big_input_chain(), 1e15)
    res = registry.solve("offload", inst, "pofo", 153, slots=0)
    assert res.status == "feasible" and res.peak_memory <= 153
    assert math.isfinite(res.details["dp_estimate"])
    res = registry.solve("offload", inst, "pofo", 100, slots=0)
    assert res.status == "infeasible" and res.schedule is None


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 8), st.integers(0, 1000), st.floats(0.0, 0.9))
def test_pofo_keeps_exact_sizes_at_a_budget_within_the_slots(L, seed, fraction):
    """One discretisation rule (`solvers.discretize.effective_slots`): a budget of at most
    `slots` units is planned at exact sizes, as with ``slots=0``, never on slots below one unit."""
    inst = OffloadInstance(random_chain(L, seed, size_range=(1, 9)), bandwidth=2.0)
    lo, hi = rotor_min_budget(inst.chain), store_all_peak(inst.chain)
    budget = lo + int(fraction * (hi - lo))
    within, exact = solve_pofo(inst, budget, slots=budget + 7), solve_pofo(inst, budget, slots=0)
    assert within.objective == pytest.approx(exact.objective, rel=1e-12)
    assert "exact sizes" in within.scope


def test_pofo_leaves_out_its_optional_stages_past_its_time_limit():
    """The first DP always runs; the later stages only while the limit leaves time for them, named
    in ``details["skipped"]``; the answer is the referee's replay either way."""
    inst = OffloadInstance(random_chain(8, 3, size_range=(1, 9)), bandwidth=2.0)
    budget = rotor_min_budget(inst.chain) + 3
    full = registry.solve("offload", inst, "pofo", budget, slots=0)
    short = registry.solve("offload", inst, "pofo", budget, slots=0, time_limit=0.0)
    assert "skipped" not in full.details
    assert "rotor-offload and offload-prefix" in short.details["skipped"]
    assert short.schedule is not None and short.objective >= full.objective - 1e-9


def test_the_exact_layer_gives_fast_solvers_the_time_left(monkeypatch):
    """`run_fast` hands each fast solver the time left as ``time_limit`` (pofo cuts its optional stages)."""
    from memsched.solvers.exact import layer

    seen: list[float] = []
    real = registry.solve

    def spy(problem, instance, name, budget, **kw):
        seen.append(kw.get("time_limit"))
        return real(problem, instance, name, budget, **kw)

    monkeypatch.setattr(registry, "solve", spy)
    inst = OffloadInstance(random_chain(5, 1, size_range=(1, 9)), bandwidth=2.0)
    out = layer.run_fast("offload", inst, rotor_min_budget(inst.chain) + 2, ["pofo"], layer.Deadline(5.0),
                         layer.ExactOptions(time_limit=5.0), {})
    assert out and seen and 0.0 < seen[0] <= 5.0
