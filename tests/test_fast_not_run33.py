"""An exact solver names the fast solvers its warm start left out (``details["fast_not_run"]``):
the answer is never worse than the fast solvers that ran, and a short limit on a loaded machine
may cut a slow one off (the hunter's case: `cpsat` at --time-limit 3 on GPT-2's graph returned
`dtr`'s schedule while `dtr-orders`, killed at the end of the warm start's share, had a faster
one). A solver cut off or never started is named, so the comparison the answer makes is visible."""

from __future__ import annotations

import time
from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.exact import layer
from memsched.solvers.graph.instance import Graph
from memsched.solvers.result import SolveResult

GRAPH = registry.__file__.rsplit("/", 1)[0] + "/data/graphs/linear10.json"


def _graph() -> Any:
    return Graph.load(GRAPH)


def _budget(g: Any) -> int:
    return int(registry.solve("graph", g, "checkpoint-all", 10**12).peak_memory * 0.8)


@pytest.mark.skipif(not layer.can_fork(), reason="the optional seeds run in forked children")
def test_a_fast_solver_killed_at_the_share_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = registry.solve

    def slow_dtr_orders(problem: str, instance: Any, name: str, budget: int, **kw: Any) -> SolveResult:
        if name == "dtr-orders":
            time.sleep(30)  # in the forked child: killed at the end of the share
        return real(problem, instance, name, budget, **kw)

    monkeypatch.setattr(registry, "solve", slow_dtr_orders)
    g = _graph()
    res = registry.solve("graph", g, "cpsat", _budget(g), time_limit=2.0)
    fast = registry.get_solver("graph", "cpsat").fast_solvers  # type: ignore[attr-defined]
    assert "dtr-orders" in fast[1:]
    assert "dtr-orders" in res.details["fast_not_run"]
    assert "dtr-orders" not in res.details["fast"]
    assert res.solve_time_s < 10


def test_seeds_left_out_by_a_short_limit_are_named() -> None:
    g = _graph()
    res = registry.solve("graph", g, "cpsat", _budget(g), time_limit=0.5)  # below MIN_LIMIT_FOR_ALL_FAST
    fast = registry.get_solver("graph", "cpsat").fast_solvers  # type: ignore[attr-defined]
    not_run = res.details["fast_not_run"]
    assert res.details["fast"] and not set(not_run) & set(res.details["fast"])
    assert 1 <= len(not_run) < len(fast) and tuple(not_run) == tuple(fast[-len(not_run):])  # the rest, in order


def test_nothing_named_when_every_fast_solver_ran() -> None:
    g = _graph()
    res = registry.solve("graph", g, "cpsat", _budget(g), time_limit=30.0)
    assert "fast_not_run" not in res.details
