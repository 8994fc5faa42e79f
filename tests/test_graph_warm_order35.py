"""The graph exact solvers' warm start runs the cheap fast solvers first and `dtr-orders` last.

`dtr-orders` takes 10-40 s on ResNet-50-sized graphs; run third, it used up the warm start's share
and `greedy` (0.2 s, better there than `dtr`) never ran, so `checkmate` returned `dtr`'s slower
schedule. Here the clock is simulated (no wall-clock luck): a `dtr-orders` killed at the end of the
share, or one that overruns the whole limit where the fast solvers cannot fork, must leave the
answer no worse than `greedy`'s on Checkmate's linear graph of 8 layers at budget 6 (greedy 21,
dtr 22).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.exact import layer
from memsched.solvers.exact import options as options_module
from memsched.solvers.graph import generate, milp, orders
from memsched.solvers.result import INFEASIBLE, SolveResult

BUDGET = 6  # cost_ram units: greedy 21 < dtr 22; checkpoint-all finds nothing
LIMIT = 4.0  # seconds (the warm start's share is half)


def graph() -> Any:
    """Checkmate's linear training graph of 8 layers (17 nodes, unit costs)."""
    return generate.linear_graph(8)


class Clock:
    """`time.perf_counter` plus an offset the test moves: what `Deadline` reads."""

    def __init__(self) -> None:
        self.offset = 0.0

    def perf_counter(self) -> float:
        """Seconds, real time plus `offset`."""
        return time.perf_counter() + self.offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The deadlines' clock, simulated."""
    c = Clock()
    monkeypatch.setattr(options_module, "time", c)
    return c


def fast_objective(name: str) -> float:
    """The objective of fast solver `name` at `BUDGET` (a schedule exists)."""
    res = registry.solve("graph", graph(), name, BUDGET)
    assert res.objective is not None, name
    return float(res.objective)


def test_instance_separates_greedy_from_dtr() -> None:
    """The premise: greedy's schedule is faster than dtr's here."""
    assert fast_objective("greedy") < fast_objective("dtr")


def test_order_is_by_expected_cost_with_dtr_orders_last() -> None:
    """One definition for both exact graph solvers, the sub-second solvers before dtr-orders."""
    assert milp.FAST[-1] == "dtr-orders"
    assert set(milp.FAST) == {"checkpoint-all", "greedy", "sqrt", "griewank", "dtr", "dtr-orders"}
    assert milp.FAST.index("greedy") < milp.FAST.index("dtr")
    for name in ("checkmate", "cpsat"):
        assert registry.get_solver("graph", name).fast_solvers == milp.FAST  # type: ignore[attr-defined]


@pytest.mark.parametrize("solver", ["checkmate", "cpsat"])
def test_share_spent_by_dtr_orders_leaves_only_it_out(solver: str, clock: Clock,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """dtr-orders runs (forked) until the share's end and is killed: the others ran before it,
    `fast_not_run` names it alone, and the answer is no worse than greedy's."""
    started: list[str] = []

    def child(problem: str, instance: Any, name: str, budget: int, kwargs: dict[str, Any],
              seconds: float) -> SolveResult | None:
        started.append(name)
        if name == "dtr-orders":  # still running at the share's end: killed, no schedule
            clock.offset += seconds
            return None
        return registry.solve(problem, instance, name, budget, **kwargs)

    monkeypatch.setattr(layer, "can_fork", lambda: True)
    monkeypatch.setattr(layer, "solve_in_child", child)
    res = registry.solve("graph", graph(), solver, BUDGET, time_limit=LIMIT)
    assert res.details.get("fast_not_run") == ["dtr-orders"]
    assert started[-1] == "dtr-orders"
    assert "greedy" in res.details["fast"]
    assert res.objective is not None and res.objective <= fast_objective("greedy")


@pytest.mark.parametrize("solver", ["checkmate", "cpsat"])
def test_dtr_orders_overrunning_the_limit_keeps_greedy(solver: str, clock: Clock,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the fast solvers cannot fork (a sweep's daemon worker) dtr-orders runs here and may
    overrun the whole limit: the model gets no time, and the answer is still greedy's or better."""

    def slow_dtr_orders(graph: Any, budget: int, **_: Any) -> SolveResult:
        clock.offset += 2 * LIMIT
        return SolveResult(problem="graph", solver="dtr-orders", status=INFEASIBLE, message="(simulated: ran 8 s)")

    monkeypatch.setattr(layer, "can_fork", lambda: False)
    monkeypatch.setattr(orders, "solve_dtr_orders", slow_dtr_orders)
    res = registry.solve("graph", graph(), solver, BUDGET, time_limit=LIMIT)
    assert res.objective is not None and res.objective <= fast_objective("greedy")
    assert "fast_not_run" not in res.details
