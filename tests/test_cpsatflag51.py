"""Chain `milp` with ``--option backend=cp-sat``: the linear phase model goes to CP-SAT through
`cpsat_runner.linear_to_cpsat`, whose objective ticks `integer_costs` rounds to `CPSAT_COST_DIGITS`
significant digits when no 10^k makes the times whole. CP-SAT's bound is then one of the rounded
objective only; as the chain's `cpsat` (`ObjectiveTicks.lowered`), it is lowered by the rounding's
largest total error (`cpsat_runner.cost_slack`, ``details["cost_rounding_slack"]``), and the answer is
``optimal`` only when that lowered bound is within 1e-6 of the makespan. Before, `milp` answered
``optimal`` (lower bound = makespan) where `cpsat` answered ``feasible`` on the same chain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import brute_force, check_replay
from memsched.solvers.chain.instance import Chain
from memsched.solvers.exact.cpsat_runner import cost_slack
from memsched.solvers.exact.linear import LinearModel
from memsched.solvers.registry import solve

#: F_n of the stage `BIG` takes 7.1e2 (never worth it at the budgets below), every other time is about
#: 1e-3: the largest cost sets the ticks (1e6 per unit), so the small times need more than nine digits
BIG = 2
BUDGET = 22  # the least budget with a phase schedule is 22; store-all fits at 25


def _chain(u_fa: list[float]) -> Chain:
    """4 stages' sizes of random_chain(3, 0, size_range=(1, 6)); forward times `u_fa` (u_fn the same but
    7.1e2 at `BIG`), backward times about 1e-3."""
    fa = np.array(u_fa)
    fn = fa.copy()
    fn[BIG] = 7.1e2
    u_b = np.array([2.46913578e-3, 4.6913578e-3, 6.913578e-3, 1e-3])
    return Chain(u_f=np.maximum(fa, fn), u_fa=fa, u_fn=fn, u_b=u_b,
                 x=np.array([6, 4, 4, 2, 0]), xbar=np.array([0, 4, 4, 5, 0]), o_f=np.zeros(4, dtype=int),
                 o_b=np.zeros(4, dtype=int))


def test_cost_slack_counts_each_rounded_cost_by_its_variable_range() -> None:
    lm = LinearModel()
    a, b, c = lm.var(0, 1, True), lm.var(0, 3, True), lm.var(0, 1, True)
    lm.objective = {a: 7.1e2, b: 1.23456789e-3, c: 0.0}
    error = abs(1.23456789e-3 - 1235 / 1e6)  # ticks of 1e6 per unit: 710e6 and 1235
    assert cost_slack(lm) == pytest.approx(3 * error, rel=1e-9)
    lm.ub[b] = math.inf
    assert cost_slack(lm) == math.inf  # an unbounded variable's rounded cost bounds nothing
    lm.objective = {a: 7.1e2, b: 1.234e-3}  # 10^6 makes them whole: exact ticks
    assert cost_slack(lm) == 0.0
    assert cost_slack(LinearModel()) == 0.0


def test_milp_on_cpsat_is_not_optimal_on_rounded_times() -> None:
    chain = _chain([1.23456789e-3, 2.3456789e-3, 3.456789e-3, 0.0])
    best, _ = brute_force(chain, BUDGET, phase=True)
    assert best is not None
    milp = solve("chain", chain, "milp", BUDGET, slots=0, time_limit=20, backend="cp-sat")
    cpsat = solve("chain", chain, "cpsat", BUDGET, slots=0, time_limit=20)
    check_replay(chain, BUDGET, milp)
    slack = milp.details["cost_rounding_slack"]
    assert slack > 1e-6 * milp.objective  # the rounding is too coarse for a proof within 1e-6
    assert milp.objective == pytest.approx(best, rel=1e-9)
    assert milp.status == cpsat.status == "feasible", (milp.status, milp.lower_bound, milp.objective)
    assert milp.lower_bound is not None and milp.lower_bound <= best
    assert milp.objective - milp.lower_bound > 1e-6 * milp.objective


def test_milp_on_cpsat_still_proves_exact_ticks() -> None:
    chain = _chain([1.234e-3, 2.345e-3, 3.456e-3, 0.0])  # 10^6 ticks per unit make every time whole
    best, _ = brute_force(chain, BUDGET, phase=True)
    milp = solve("chain", chain, "milp", BUDGET, slots=0, time_limit=20, backend="cp-sat")
    assert milp.details["cost_rounding_slack"] == 0.0
    assert milp.status == "optimal" and milp.objective == pytest.approx(best, rel=1e-9)
    assert milp.lower_bound == pytest.approx(milp.objective, rel=1e-9)
