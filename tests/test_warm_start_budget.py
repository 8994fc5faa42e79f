"""The exact layer's warm start gets a share of the time limit (`layer.WARM_START_SHARE`), whether or
not a fast solver has found a schedule, so that the model always has the rest. At a budget where
nothing fits, the join heuristics' exact-size retries (1-9 s each on byte-sized joins) ran in
children killed only at the full limit: the join's A* search, which proves infeasibility in 1 ms,
got no time and the answer was ``timeout`` at 5 s."""

from __future__ import annotations

import time
from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.exact import layer
from memsched.solvers.join.instance import Join
from memsched.solvers.result import INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult

#: a 1-branch, 1-stage join with byte sizes (hunter's onestage.json); least feasible budget LEAST
ONE_STAGE = {"format": "memsched.join/1", "name": "t",
             "branches": [{"name": "b0", "input_size": 9572460850,
                           "stages": [{"fwd_time": 3, "bwd_time": 1, "out_size": 6225516708,
                                       "tape_size": 10923607856, "fwd_overhead": 0, "bwd_overhead": 1}]}],
             "loss": {"bwd_time": 0, "bwd_overhead": 1}}
LEAST = 36294046265


def _join() -> Join:
    return Join.from_dict(ONE_STAGE)


def test_join_exact_proves_infeasible_within_the_limit_where_nothing_fits() -> None:
    """Every fast solver finds nothing one byte below the least budget; the search still runs and
    proves it (it was ``timeout`` after 5.1 s: "search limit reached before a proof")."""
    limit = 5.0
    res = registry.solve("join", _join(), "exact", LEAST - 1, time_limit=limit)
    assert res.status == INFEASIBLE, (res.status, res.message)
    assert res.schedule is None
    assert res.solve_time_s < limit + 5.0  # generous: the limit plus the in-process first seed's overrun
    at_least = registry.solve("join", _join(), "exact", LEAST, time_limit=limit)
    assert at_least.status == OPTIMAL and at_least.peak_memory == LEAST


def _slow_second_seed(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """`registry.solve` where the fast solver named "slow" sleeps `seconds` and finds nothing; forked
    children inherit the patch."""
    real = registry.solve

    def fake(problem: str, instance: Any, name: str, budget: int, **kw: Any) -> SolveResult:
        if name == "slow":
            time.sleep(seconds)
            return SolveResult(problem=problem, solver=name, status=INFEASIBLE, budget=budget)
        return real(problem, instance, name, budget, **kw)

    monkeypatch.setattr(registry, "solve", fake)


def test_the_model_gets_the_time_a_fruitless_warm_start_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """No fast solver has a schedule and the second one would run for a minute: it is killed at the
    warm start's share, not at the limit, and the model starts with the rest of the limit."""
    if not layer.can_fork():
        pytest.skip("no fork: optional seeds run in process")
    _slow_second_seed(monkeypatch, 60.0)
    limit = 3.0
    seen: dict[str, float | None] = {}

    @layer.exact_solver("join", "probe", ("store-all", "slow"), time_limit=limit)
    def probe(join: Join, budget: int, *, deadline: layer.Deadline, **_: Any) -> SolveResult:
        seen["left"] = deadline.left()
        return SolveResult(problem="join", solver="probe", status=INFEASIBLE, budget=budget)

    res = probe(_join(), LEAST - 1)
    assert "left" in seen, "the model never ran"
    left = seen["left"]
    assert left is not None and left >= 0.25 * limit, left  # the share is half the limit; old: ~0 left
    assert res.status == INFEASIBLE and res.solve_time_s < limit + 5.0


def test_the_first_seed_is_told_the_share_as_its_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first fast solver runs in process; its ``time_limit`` is the end of the warm start's share
    (it was the whole limit), so one with optional stages (pofo) leaves them to the model's time."""
    seen: list[float | None] = []
    real = registry.solve

    def spy(problem: str, instance: Any, name: str, budget: int, **kw: Any) -> SolveResult:
        seen.append(kw.get("time_limit"))
        return real(problem, instance, name, budget, **kw)

    monkeypatch.setattr(registry, "solve", spy)
    limit = 4.0
    out = layer.run_fast("join", _join(), LEAST, ["store-all"], layer.Deadline(limit),
                         layer.ExactOptions(time_limit=limit), {})
    assert out and out[0].solver == "store-all"
    assert seen and seen[0] is not None and 0.0 < seen[0] <= getattr(layer, "WARM_START_SHARE", 0.5) * limit + 1e-9


def test_a_seed_found_within_the_share_still_referees_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guarantee where fast solvers answer: the first finds nothing, a later one (in a child)
    finds a schedule within the share, and the model's empty answer is replaced by it."""
    real = registry.solve

    def fake(problem: str, instance: Any, name: str, budget: int, **kw: Any) -> SolveResult:
        if name == "nothing":
            return SolveResult(problem=problem, solver=name, status=INFEASIBLE, budget=budget)
        return real(problem, instance, name, budget, **kw)

    monkeypatch.setattr(registry, "solve", fake)

    @layer.exact_solver("join", "probe", ("nothing", "store-all"), time_limit=10.0)
    def probe(join: Join, budget: int, **_: Any) -> SolveResult:
        return SolveResult(problem="join", solver="probe", status=TIMEOUT, budget=budget)

    res = probe(_join(), LEAST)
    assert res.schedule is not None and res.details.get("solution_from") == "store-all"
    assert res.seeded_by == "store-all" and res.status in (OPTIMAL, "feasible")
