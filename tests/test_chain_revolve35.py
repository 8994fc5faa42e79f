"""Revolve's checkpoint count and least budget when the peak is not monotone in c (per-mode
forward overheads, o_fn > o_fa), and the Revolve/periodic peak rule of docs/chain.md restricted to
o_fn <= o_fa. Every c is checked; `min_budget` is the least peak over all c, and it is tight."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import periodic_schedule
from memsched.solvers.chain.revolve import revolve_forwards, revolve_peak, revolve_schedule, solve_revolve
from memsched.solvers.registry import solve


def mode_chain(L: int, x: int, xbar: int, o_fa: int, o_fn: int, o_b: int = 0, o_loss: int = 0,
               release: int = 0) -> Chain:
    """L identical stages with per-mode forward overheads; `release` > 0 lets B(i) release its
    inputs early (o_b - release, held overhead o_b)."""
    released = max(o_b - release, -(x + xbar))
    return Chain.with_mode_overheads(
        [1.0] * L + [0.0], [2.0] * L + [0.5], [x] * (L + 1) + [0], [0] + [xbar] * L + [0],
        [o_fa] * L + [0], [o_fn] * L + [0], [released] * L + [o_loss],
        o_bh=np.array([o_b] * L + [o_loss], dtype=np.int64))


def rev4() -> Chain:
    """The hunter's rev4.json: 4 stages, sizes 5, tape 5, o_fn = 30, o_fa = 0."""
    return mode_chain(4, 5, 5, o_fa=0, o_fn=30)


def test_rev4_runs_with_two_checkpoints_at_45():
    chain = rev4()
    assert [revolve_peak(chain, c) for c in range(1, 5)] == [50, 45, 50, 50]
    result = solve("chain", chain, "revolve", 45)  # replays and checks the makespan
    assert result.status == "feasible" and result.details["checkpoints"] == 2
    assert result.peak_memory == 45 and result.min_budget == 45
    sim = simulate(chain, result.schedule, 45).raise_if_invalid()
    assert sim.peak_memory == 45 and sim.makespan == result.objective
    low = solve("chain", chain, "revolve", 44)
    assert low.status == "infeasible" and low.min_budget == 45 and low.schedule is None
    high = solve("chain", chain, "revolve", 50)  # c = 4 fits again and is the fastest
    assert high.details["checkpoints"] == 4 and high.objective < result.objective


def test_revolve_peaks_equal_the_replays():
    from memsched.solvers.chain.revolve import revolve_peaks

    for chain in (rev4(), mode_chain(9, 2, 3, 1, 7, 4, 2, release=3), mode_chain(1, 3, 4, 5, 2, 1, 9)):
        L = chain.length
        assert revolve_peaks(chain) == [revolve_peak(chain, c) for c in range(1, L + 1)]
    L, x, xbar = 300, 3, 7  # the closed form without overheads, at a length where L replays would be slow
    assert revolve_peaks(Chain.homogeneous(L, x=x, xbar=xbar)) == [(min(c, L - 1) + 3) * x + xbar
                                                                   for c in range(1, L + 1)]


@pytest.mark.parametrize("l", [1, 2, 3, 10, 57, 200])
def test_advances_never_grow_with_checkpoints(l):
    """Largest fitting c = fastest c rests on this: p(l, c + 1) <= p(l, c)."""
    p = [revolve_forwards(l, c) for c in range(1, l + 2)]
    assert all(a >= b for a, b in zip(p, p[1:]))


def _mode_chain(L: int, x: int, extra: int, o_fa: int, o_fn: int, o_b: int, o_loss: int, release: int) -> Chain:
    """`mode_chain` with the tape given as x + extra (the tape contains the output)."""
    return mode_chain(L, x, x + extra, o_fa, o_fn, o_b, o_loss, release)


# L = 4 half the time: there small o_fa and large o_fn make the peak fall from c = 1 to c = 2
mode_chains = st.builds(
    _mode_chain, st.one_of(st.just(4), st.integers(1, 13)), st.sampled_from([0, 1, 2, 5]), st.integers(0, 6),
    st.sampled_from([0, 1, 7, 30]), st.sampled_from([0, 1, 7, 30]), st.sampled_from([0, 2, 9, 40]),
    st.sampled_from([0, 5, 50]), st.sampled_from([0, 0, 3, 100]))


@settings(max_examples=80, deadline=None)
@given(mode_chains, st.floats(0.0, 1.0))
@example(_mode_chain(4, 2, 0, 1, 7, 40, 0, 100), 0.0)  # peaks 15, 13, 15, 15
def test_min_budget_is_tight_and_answers_replay(chain, where):
    L = chain.length
    peaks = [revolve_peak(chain, c) for c in range(1, L + 1)]  # the simulator's, c by c
    need = min(peaks)
    at = solve("chain", chain, "revolve", need)
    assert at.status == "feasible" and at.min_budget == need
    sim = simulate(chain, at.schedule, need).raise_if_invalid()
    assert sim.peak_memory <= need and sim.makespan == at.objective
    if need > 0:
        below = solve("chain", chain, "revolve", need - 1)
        assert below.status == "infeasible" and below.min_budget == need and below.schedule is None
    budget = int(need + where * (max(peaks) - need))
    result = solve_revolve(chain, budget)
    c = result.details["checkpoints"]
    assert c == max(k for k in range(1, L + 1) if peaks[k - 1] <= budget)
    fastest = min(simulate(chain, revolve_schedule(L, k)).makespan for k in range(1, L + 1) if peaks[k - 1] <= budget)
    sim = simulate(chain, result.schedule, budget).raise_if_invalid()
    assert sim.peak_memory == peaks[c - 1] <= budget and sim.makespan == result.objective
    assert result.objective <= fastest * (1 + 1e-12)


@settings(max_examples=80, deadline=None)
@given(mode_chains)
def test_revolve_against_the_least_periodic_peak(chain):
    """o_fn <= o_fa: Revolve's c = 1 peak is at most periodic's least; o_fn > o_fa: its least peak
    exceeds periodic's least by at most o_fn - o_fa."""
    L = chain.length
    least_periodic = min(simulate(chain, periodic_schedule(L, k)).peak_memory for k in range(1, L + 1))
    o_fa, o_fn = int(chain.o_fa[0]), int(chain.o_fn[0])
    if o_fn <= o_fa:
        assert revolve_peak(chain, 1) <= least_periodic
    else:
        assert min(revolve_peak(chain, c) for c in range(1, L + 1)) <= least_periodic + o_fn - o_fa


def test_the_rule_fails_with_a_costly_nograd_overhead():
    """docs/chain.md: L = 3, sizes 0, tape 1, o_fn = 30, o_fa = 0: Revolve needs 30, periodic 3."""
    chain = mode_chain(3, 0, 1, o_fa=0, o_fn=30)
    assert min(revolve_peak(chain, c) for c in range(1, 4)) == 30
    assert min(simulate(chain, periodic_schedule(3, k)).peak_memory for k in range(1, 4)) == 3
    assert solve_revolve(chain, 29).min_budget == 30
