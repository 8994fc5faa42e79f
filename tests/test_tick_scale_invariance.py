"""The tick grid of the offloading models does not depend on the time unit (`discretize.tick_scale`).

The same durations x 1e-12 (every compute time and, through the bandwidth, every transfer time) get a
scale exactly 1e12 times finer and the same tick counts, so an exact model sees the same integer
problem: same status, makespan x 1e-12. Before the fix the candidates 10^0..10^4 never made tiny
durations whole, and they fell back to about 10^4 (10^3) ticks for the longest operation: a far finer
grid, on which cpsat timed out where the unit-time instance is proven optimal at once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.instance import Chain
from memsched.solvers.discretize import is_whole, tick_scale, to_ticks
from memsched.solvers.offload import OffloadInstance
from memsched.solvers.offload.cpsat import solve_cpsat
from memsched.solvers.offload.exact_combined import solve_exact_combined
from memsched.solvers.offload.exact_free import solve_offload_exact

F = 1e-12  # time units of the scaled copy per time unit of the original


def scaled_chain(chain: Chain, f: float) -> Chain:
    """`chain` with every compute time (u_f, u_b, u_fa, u_fn) multiplied by `f`; sizes unchanged."""
    return Chain(chain.u_f * f, chain.u_b * f, chain.x, chain.xbar, chain.o_f, chain.o_b, name=chain.name,
                 meta=dict(chain.meta), o_fa=chain.o_fa, o_fn=chain.o_fn, u_fa=chain.u_fa * f,
                 u_fn=chain.u_fn * f, o_bh=chain.o_bh)


def instances() -> tuple[OffloadInstance, OffloadInstance]:
    """A 3-stage chain with whole times (up to 80 ms, transfers included) and the same chain with every
    time x `F`: the bandwidth / F makes each transfer time F times as long."""
    chain = random_chain(3, 0, integer_times=True, size_range=(1, 8))
    return OffloadInstance(chain, 500.0), OffloadInstance(scaled_chain(chain, F), 500.0 / F)


def durations(inst: OffloadInstance) -> list[float]:
    """The durations exact-combined scales (compute ops per mode, transfers of every value and tape)."""
    c, L = inst.chain, inst.chain.length
    return [float(t) for t in (*c.u_fa, *c.u_fn, *c.u_b)] + [
        inst.transfer_time(int(b)) for b in (*c.x[: L + 1], *c.xbar[1: L + 1])]


def assert_invariant(times: list[float], **kw: float) -> None:
    """`tick_scale` of `times` and of `times` x F: scales 1/F apart, same exactness, same ticks."""
    scale, exact = tick_scale(times, **kw)
    tiny_scale, tiny_exact = tick_scale([t * F for t in times], **kw)
    assert tiny_scale * F == pytest.approx(scale, rel=1e-15), (times, scale, tiny_scale)
    assert tiny_exact == exact
    assert [to_ticks(t * F, tiny_scale) for t in times] == [to_ticks(t, scale) for t in times]


@pytest.mark.parametrize("times", [
    [1.5, 2.25], [0.0, 1.5, 2.25], [3.0, 1.0, 0.0], [0.5, 0.25], [1.0, 1e-12], [1 / 3, 2.0],
    [9.75, 0.001, 4.0], [0.0123456789, 0.5], [12.0, 80.0, 7.0],
])
@pytest.mark.parametrize("max_ticks", [10_000, 1000])
def test_tick_scale_of_durations_times_1e_minus_12_is_1e12_finer_with_the_same_ticks(times, max_ticks):
    assert_invariant(times, max_ticks=max_ticks)


def test_tick_scale_of_the_offload_instance_is_invariant():
    unit, tiny = instances()
    assert max(durations(unit)) > 10  # a longest beyond 10 units: k0 = 0 here, one power below 12 there
    assert_invariant(durations(unit), max_ticks=1000)
    assert_invariant(durations(unit))
    assert tick_scale(durations(unit))[0] == 1.0 and tick_scale(durations(tiny)) == (1e12, True)


def _old_tick_scale(times: list[float], max_ticks: float = 10_000, powers: int = 5) -> tuple[float, bool]:
    """The rule before the fix (candidates 10^0..10^(powers-1)), kept here to pin ordinary durations."""
    arr = np.array(times, dtype=float)
    for k in range(powers):
        if is_whole(arr * 10.0 ** k):
            return 10.0 ** k, True
    longest = max(float(np.max(np.abs(arr), initial=0.0)), 1e-300)
    s = float(10 ** math.ceil(math.log10(max_ticks / longest)))
    return s, is_whole(arr * s)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10**7), min_size=1, max_size=6), st.integers(0, 6), st.sampled_from([10_000, 1000]))
def test_durations_of_a_time_unit_or_more_keep_the_old_scale(units, decimals, max_ticks):
    """Committed results depend on it: with a longest of at least one time unit, the old candidates."""
    times = [u / 10**decimals for u in units] + [1.0]
    assert tick_scale(times, max_ticks=max_ticks) == _old_tick_scale(times, max_ticks)


SOLVERS = [  # (solver, budget, options): small deterministic runs, each proven optimal in well under a second
    (solve_cpsat, 30, {"workers": 1}),  # old tree: the scaled copy timed out on its ~10^4-tick grid
    (solve_offload_exact, 30, {"slots": 0}),
    (solve_exact_combined, 35, {"workers": 1}),
]


@pytest.mark.parametrize("solve, budget, options", SOLVERS, ids=["cpsat", "offload-exact", "exact-combined"])
def test_solvers_see_the_same_ticks_status_and_makespan_in_either_unit(solve, budget, options):
    unit, tiny = instances()
    a = solve(unit, budget, time_limit=20, warm_start=False, seed=1, **options)
    b = solve(tiny, budget, time_limit=20, warm_start=False, seed=1, **options)
    assert "times in ticks of 1/1," in a.scope and "times in ticks of 1/1e+12," in b.scope, (a.scope, b.scope)
    assert a.status == b.status == "optimal", (a.status, b.status, a.message, b.message)
    assert b.objective == pytest.approx(a.objective * F, rel=1e-9)
