"""exact-combined (solvers/offload/exact_combined.py) on operations of zero or tiny time, on extremely slow and very
fast links: it picks its tick as the other offload models do (`fit_scale`), gives every compute op and paid transfer
at least one tick (`duration_ticks`), claims `optimal` only when the ticks it used are the real durations, and falls
back on the seed when the simulator rejects its schedule instead of raising."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import FAST_LINK
from conftest import offload_tiny as tiny  # docs/offload.md's tiny example
from memsched.solvers.chain import Chain
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.offload import OffloadInstance, reference_peak
from memsched.solvers.offload import simulate as simulate_offload

import memsched

SLOW_LINK = 1e-9  # the smallest bandwidth accepted: a value takes ~1e12 ms


#: the hunt's instances: off_zero_time, off_tiny_time, off_fast, bw_1e-9
CASES = {
    "zero_time": lambda: tiny(0.0),
    "tiny_time": lambda: tiny(1e-10),
    "fast_link": lambda: tiny(bandwidth=FAST_LINK, tape0=8),
    "slow_link": lambda: tiny(bandwidth=SLOW_LINK, tape0=8),
}


def _check(inst: OffloadInstance, budget: int, r: Any) -> None:
    """An honest answer: a schedule the simulator replays within `budget` at the reported makespan, or none with an
    honest status."""
    if r.schedule is None:
        assert r.status in ("infeasible", "timeout")
        return
    assert r.status in ("optimal", "feasible")
    replay = simulate_offload(inst, r.schedule, budget)
    assert replay.valid, replay.violation
    assert replay.peak_memory <= budget
    assert r.objective == pytest.approx(replay.makespan, rel=1e-9)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("warm_start", [True, False])
@pytest.mark.parametrize("budget", [20, 30])
def test_exact_combined_never_raises_on_zero_tiny_times_and_extreme_links(case, warm_start, budget):
    inst = CASES[case]()
    r = memsched.solve(inst, budget, "exact-combined", slots=0, time_limit=3, warm_start=warm_start)
    _check(inst, budget, r)
    assert "model_invalid" not in r.raw.details  # the model's own schedules now replay
    if warm_start:  # a schedule is known (pofo's): never worse than it
        assert r.schedule is not None


@pytest.mark.parametrize("t", [0.0, 1e-10])
def test_zero_time_chain_answers_as_expected(t):
    """Store-all (makespan 3) needs 21 bytes: at 20 the answer is slower (pofo's 6) and only `feasible`; at 30 it is
    store-all, `optimal` (every operation once)."""
    inst = tiny(t)
    r20 = memsched.solve(inst, 20, "exact-combined", slots=0, time_limit=10)
    assert r20.status == "feasible"
    assert r20.objective == pytest.approx(6.0)
    r30 = memsched.solve(inst, 30, "exact-combined", slots=0, time_limit=10)
    assert r30.status == "optimal"
    assert r30.objective == pytest.approx(3.0)


@pytest.mark.parametrize("t", [0.0, 1e-10])
def test_a_rounded_up_duration_is_not_claimed_optimal_by_the_model(t):
    """Without a seed the model's own answer: ops of no (or tiny) time last one tick, so the model's optimum is
    not the real one: `feasible`, its makespan never below the problem's least (every op once)."""
    inst = tiny(t)
    r = memsched.solve(inst, 20, "exact-combined", slots=0, time_limit=10, warm_start=False)
    assert r.status == "feasible"
    assert r.schedule is not None and r.objective >= 6.0 - 1e-9
    _check(inst, 20, r)


def test_whole_ticks_counts_the_ticks_the_model_uses():
    from memsched.solvers.offload.exact_combined import whole_ticks

    assert whole_ticks(tiny(tape0=8), 10.0)  # 2000 bytes/s: 4 ms per 8 bytes; times in tenths
    assert not whole_ticks(tiny(0.0), 1.0)  # an op of no time is given one tick
    assert not whole_ticks(tiny(1e-10), 1.0)
    assert not whole_ticks(tiny(bandwidth=FAST_LINK, tape0=8), 10.0)  # a transfer of ~1e-14 ms lasts one tick


def test_fast_link_transfers_last_a_tick_and_are_used():
    """2^50 bytes/s moves a value in far less than a tick: such a transfer lasts one tick instead of none (a zero-tick
    transfer was left out of the model, which then said `infeasible` at 20 where pofo offloads at 10.5)."""
    inst = tiny(bandwidth=FAST_LINK, tape0=8)
    r = memsched.solve(inst, 20, "exact-combined", slots=0, time_limit=10, warm_start=False)
    assert r.status == "feasible"  # a transfer of one tick is not its real time
    assert r.schedule is not None and r.schedule.transfers()
    _check(inst, 20, r)


def test_slow_link_default_tick_stays_within_cpsat_domains():
    """1e-9 bytes/s makes transfers of ~1e12 ms: the default tick is made coarser (`fit_scale`) instead of CP-SAT
    rejecting the model (int64 domains)."""
    from memsched.solvers.offload.cpsat import MAX_DEFAULT_TICKS, durations_total

    inst = tiny(bandwidth=SLOW_LINK, tape0=8)
    r = memsched.solve(inst, 30, "exact-combined", slots=0, time_limit=10)
    assert r.status == "optimal" and r.objective == pytest.approx(9.5)  # store-all, every op once
    assert durations_total(inst) * r.raw.details["scale"] <= MAX_DEFAULT_TICKS


def _random_instance(seed: int) -> tuple[OffloadInstance, int]:
    """A random chain (L = 1..3) with about half of its durations set to 0 or a tiny time, a bandwidth from the
    accepted extremes to ordinary ones, and a budget of 40% to 105% of the store-all peak."""
    rng = np.random.default_rng(seed)
    L = int(rng.integers(1, 4))
    chain = random_chain(L, seed, overhead=0.5)
    tiny_time = float(rng.choice([0.0, 1e-10, 1e-13]))

    def some(u: np.ndarray, n: int) -> np.ndarray:
        u = np.array(u, dtype=float)
        u[:n][rng.random(n) < 0.5] = tiny_time
        return u

    u_fa, u_fn, u_b = some(chain.u_fa, L), some(chain.u_fn, L), some(chain.u_b, L + 1)
    chain = Chain(np.maximum(u_fa, u_fn), u_b, chain.x, chain.xbar, chain.o_f, chain.o_b, name="z",
                  o_fa=chain.o_fa, o_fn=chain.o_fn, u_fa=u_fa, u_fn=u_fn, o_bh=chain.o_bh)
    bandwidth = float(rng.choice([SLOW_LINK, 1e-3, 1.0, 1e3, 1e6, float(FAST_LINK), float(chain.x.sum())]))
    inst = OffloadInstance(chain, bandwidth)
    return inst, int(reference_peak(inst) * rng.uniform(0.4, 1.05))


@pytest.mark.parametrize("seed", [15, 32, 82])  # each made the old model's schedule exceed the budget
def test_random_chains_with_zero_and_tiny_times_replay_within_the_budget(seed):
    inst, budget = _random_instance(seed)
    for warm_start in (False, True):
        r = memsched.solve(inst, budget, "exact-combined", slots=0, time_limit=2, warm_start=warm_start)
        _check(inst, budget, r)
        assert "model_invalid" not in r.raw.details
