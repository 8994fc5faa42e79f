"""Join `milp`: the join phase model of `cpsat` (the same rows, `JoinPhaseModel(..., linear=True)`) solved by
the MILP backends (every problem has both exact formulations). On random small joins its optimum
is `cpsat`'s, never below the A* search's (all schedules) nor above the DP's (join-persistent schedules), its
schedule replays to the reported makespan within the budget, and an infeasible budget is `infeasible`; a
backend plan that breaks an exact row is excluded by a no-good row and the order solved again."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import join_replays
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.exact.milp_runner import BackendRun
from memsched.solvers.join import SOLVERS, reference_peak
from memsched.solvers.join import milp as join_milp
from memsched.solvers.join.cpsat import JoinPhaseModel
from memsched.solvers.join.generate import random_join
from memsched.solvers.result import OPTIMAL

FITS = ("optimal", "feasible")


def _solve(join: Any, solver: str, budget: int, **kw: Any) -> Any:
    return registry.solve("join", join, solver, budget, slots=0, time_limit=30, **kw)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lengths=st.lists(st.integers(1, 3), min_size=1, max_size=3).filter(lambda ls: sum(ls) <= 6),
       seed=st.integers(0, 10_000), frac=st.sampled_from([0.4, 0.55, 0.7, 0.85, 1.0]),
       integer_times=st.booleans(), modes=st.booleans(), warm_start=st.booleans())
def test_milp_equals_cpsat_on_random_small_joins(lengths: list[int], seed: int, frac: float, integer_times: bool,
                                                 modes: bool, warm_start: bool) -> None:
    join = random_join(lengths, seed, size_range=(1, 6), integer_times=integer_times, mode_times=modes,
                       mode_overheads=modes, overhead=0.5 if modes else 0.0)
    budget = int(reference_peak(join) * frac)
    milp = _solve(join, "milp", budget, warm_start=warm_start)
    cpsat = _solve(join, "cpsat", budget)
    astar = _solve(join, "exact", budget)
    assert milp.solver == "milp" and milp.status in (*FITS, "infeasible"), (milp.status, milp.message)
    assert astar.status in ("optimal", "infeasible")
    if cpsat.status == "infeasible":
        assert milp.status == "infeasible", (milp.status, milp.message)
        return
    assert astar.status == "optimal"  # the phase model's schedules are the simulator's
    assert milp.status == "optimal" and cpsat.status == "optimal", (milp.message, cpsat.message)
    assert milp.objective == pytest.approx(cpsat.objective, rel=1e-9)
    assert milp.lower_bound == pytest.approx(milp.objective, rel=1e-9)
    assert astar.objective <= milp.objective * (1 + 1e-9)
    join_replays(join, budget, milp)
    dp = registry.solve("join", join, "dp", budget, slots=0)
    if dp.status in FITS:
        assert milp.objective <= dp.objective * (1 + 1e-9)


@pytest.mark.parametrize("backend", ["scip", "highs", "cbc", "cp-sat", "portfolio"])
def test_every_backend_gives_the_optimum_and_proves_infeasibility(backend: str) -> None:
    join = random_join([2, 3], 5, size_range=(1, 6), mode_times=True, mode_overheads=True, overhead=0.5)
    budget = int(reference_peak(join) * 0.75)
    want = _solve(join, "cpsat", budget)
    got = _solve(join, "milp", budget, backend=backend)
    assert want.status == got.status == "optimal"
    assert got.objective == pytest.approx(want.objective, rel=1e-9)
    assert got.details["backend"] == backend and got.scope.endswith(f"MILP ({backend})")
    join_replays(join, budget, got)
    low = int(reference_peak(join) * 0.3)
    assert _solve(join, "exact", low).status == "infeasible"
    assert _solve(join, "milp", low, backend=backend).status == "infeasible"


def test_registered_with_the_backend_and_orders_options() -> None:
    assert "milp" in SOLVERS
    join = random_join([1, 2], 3, size_range=(1, 6))
    budget = int(reference_peak(join) * 0.8)
    res = _solve(join, "milp", budget, orders=[[1, 0]])
    assert [e["order"] for e in res.details["orders"]] in ([], [[1, 0]])
    with pytest.raises(InputError, match="backend"):
        _solve(join, "milp", budget, backend="gurobi")
    with pytest.raises(InputError, match="memory_gb"):
        _solve(join, "milp", budget, backend="highs", memory_gb=1.0)
    with pytest.raises(InputError, match="orders"):
        _solve(join, "milp", budget, orders=[[0, 0]])


def test_the_linear_rows_are_the_cpsat_rows() -> None:
    """The same variables, objective and feasible points: the seed's plan satisfies the `LinearModel`,
    and every 0-1 point the LinearModel accepts replays in the simulator (small enough to enumerate)."""
    join = random_join([1, 2], 7, size_range=(1, 6))
    budget = int(reference_peak(join) * 0.8)
    lin = JoinPhaseModel(join, budget, [0, 1], linear=True)
    cp = JoinPhaseModel(join, budget, [0, 1])
    assert lin.lm is not None and lin.cp is None and len(lin.vars) == len(cp.vars) == lin.lm.num_vars
    assert lin.objective == cp.objective and lin.lm.offset == pytest.approx(cp.const)
    n = lin.lm.num_vars
    assert n <= 16
    for mask in range(1 << n):
        values = [float(mask >> i & 1) for i in range(n)]
        if lin.lm.violated(values) == 0:
            assert not lin.violated(values), values
            assert lin.lm.value(values) == pytest.approx(lin.value(values))


def test_a_backend_plan_that_breaks_an_exact_row_is_excluded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first SCIP answer of each order is replaced by a plan that breaks the budget (every
    forward as F_all, stored; claimed optimal): it is excluded by a no-good row and the order solved
    again, so the answer is still the optimum and fits the budget."""
    real = join_milp.run_milp
    calls: list[int] = []

    def lying(lm: Any, backend: str, deadline: Any, options: Any = None, **kw: Any) -> BackendRun:
        calls.append(len(lm.rows))
        run = real(lm, backend, deadline, options, **kw)
        if len(calls) % 2 == 1 and run.values is not None:
            plan = [1.0 if lm.names[i].startswith("FA") else 0.0 for i in range(lm.num_vars)]
            return BackendRun(OPTIMAL, values=plan, objective=lm.value(plan), bound=lm.value(plan),
                              backend_status="OPTIMAL (forged)")
        return run

    monkeypatch.setattr(join_milp, "run_milp", lying)
    join = random_join([2, 2], 4, size_range=(1, 6))
    budget = int(reference_peak(join) * 0.8)
    want = _solve(join, "cpsat", budget, warm_start=False, orders=[[0, 1]])
    assert want.status == "optimal"
    got = _solve(join, "milp", budget, warm_start=False, orders=[[0, 1]], backend="scip")
    assert len(calls) == 2 and calls[1] == calls[0] + 1  # one no-good row, then solved again
    assert got.status == "optimal" and got.objective == pytest.approx(want.objective, rel=1e-9)
    join_replays(join, budget, got)


def test_many_orders_share_a_short_time_limit() -> None:
    """720 backward orders in 1 s: the orders not run are counted, the answer is honest (no `infeasible`
    without every order proven) and comes back near the limit."""
    join = random_join([1] * 6, 3)
    budget = int(reference_peak(join) * 0.6)
    res = registry.solve("join", join, "milp", budget, time_limit=1, slots=50, warm_start=False)
    assert res.status in ("optimal", "feasible", "timeout"), (res.status, res.message)
    assert len(res.details["orders"]) + res.details["orders_not_run"] == 720
    assert res.solve_time_s < 10
    if res.status != "optimal":
        assert res.details["orders_not_run"] > 0 or any(e["status"] != "infeasible" for e in res.details["orders"])
