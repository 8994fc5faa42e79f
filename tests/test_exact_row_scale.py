"""SCIP on rows in bytes: the memory rows of the chain phase model at exact sizes near 1e10 bytes are
scaled by a power of two before they reach the backend (`milp_runner.row_scale`); without it SCIP
proved 30.03 "optimal" where 29.29 is a valid schedule of the same model."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.milp import solve_milp
from memsched.solvers.chain.simulator import simulate

#: coefficients as models have them: zero or normal floats (scaling a subnormal one may round)
COEF = st.one_of(st.just(0.0), st.floats(min_value=1e-200, max_value=1e15),
                 st.floats(min_value=-1e15, max_value=-1e-200))


@given(st.lists(COEF, min_size=1, max_size=6))
@settings(deadline=None, max_examples=200)
def test_row_scale_is_an_exact_power_of_two(coef: list[float]) -> None:
    from memsched.solvers.exact.milp_runner import ROW_SCALE_ABOVE, row_scale

    s = row_scale(coef)
    mantissa, _ = math.frexp(s)
    assert mantissa == 0.5  # a power of two: c * s is exact
    top = max(abs(c) for c in coef)
    if top < ROW_SCALE_ABOVE:
        assert s == 1.0
    else:
        assert 2.0 ** 19 <= top * s < 2.0 ** 20
        assert all((c * s) / s == c for c in coef)


@pytest.mark.parametrize("seed, budget", [(875235, 48855150482)])
def test_scip_agrees_with_highs_at_byte_sizes(seed: int, budget: int) -> None:
    chain = random_chain(7, seed, size_range=(10**9, 10**10), overhead=0.5, release=0.0)
    scip = solve_milp(chain, budget, slots=0, time_limit=30)
    highs = solve_milp(chain, budget, slots=0, time_limit=30, backend="highs")
    assert highs.status == "optimal" and scip.status == "optimal"
    assert scip.objective == pytest.approx(highs.objective, rel=1e-9)
    replay = simulate(chain, scip.schedule, budget)
    assert replay.valid and replay.makespan == pytest.approx(scip.objective)
    assert scip.lower_bound is not None and scip.lower_bound <= highs.objective * (1 + 1e-9)
