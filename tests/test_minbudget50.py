"""The smallest-budget search of `memsched solve` (`experiments.commands._infeasible`) keeps to its time.

It said "search stopped after 10 s" whatever it took (19 s with pofo on densenet121 at 12%: a heuristic
run got no time limit, and the deadline was checked only between runs). Now every run gets the time
left as its ``time_limit`` (an exact one at most `PROBE_SECONDS`, at least `MIN_PROBE_SECONDS`), no run
starts when less is left than the quickest run took, and the note gives the seconds the search took.
A fake solver on a fake clock (each run advances it) keeps these tests fast and deterministic.
"""

from __future__ import annotations

from typing import Any

import pytest
from memsched.experiments.commands import _infeasible
from memsched.solvers import registry
from memsched.solvers.result import FEASIBLE, INFEASIBLE, SolveResult


class _Clock:
    """`time` for `_infeasible`: ``perf_counter`` is a number of seconds the fake solver advances."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class _Registry:
    """The parts of `registry` the search uses: one solver whose schedules start at `least` bytes,
    each run taking `seconds(limit)` on `clock`; `limits` records the ``time_limit`` handed to each."""

    def __init__(self, clock: _Clock, *, exact: bool, least: int, seconds: Any, reference: int = 100,
                 skipped_below: int | None = None) -> None:
        self.clock, self.least, self.seconds, self.skipped_below = clock, least, seconds, skipped_below
        self.limits: list[float | None] = []  # the time_limit of each run
        self.lefts: list[float] = []  # the search's seconds left when each run started
        self.reference = reference

        def fake(*_: Any, **__: Any) -> SolveResult:  # the solver function (only its attributes are read)
            raise AssertionError("called directly")

        if exact:
            fake.exact_layer = True  # type: ignore[attr-defined]
        self.fn = fake
        self.monotone_in_budget = registry.monotone_in_budget

    def get_solver(self, problem: str, name: str) -> Any:
        return self.fn

    def get_problem(self, problem: str) -> Any:
        return type("P", (), {"reference_peak": staticmethod(lambda _instance: self.reference)})()

    def solve(self, problem: str, instance: Any, solver: str, budget: int, **options: Any) -> SolveResult:
        limit = options.get("time_limit")
        self.limits.append(limit)
        self.lefts.append(10.0 - self.clock.now)
        self.clock.now += self.seconds(limit)
        if budget >= self.least:
            return SolveResult(problem, solver, FEASIBLE, budget=budget, schedule=object())
        details = {"skipped": ["a stage"]} if self.skipped_below is not None and budget >= self.skipped_below else {}
        return SolveResult(problem, solver, INFEASIBLE, budget=budget, details=details)


def _search(monkeypatch: pytest.MonkeyPatch, options: dict[str, Any] | None = None,
            **kw: Any) -> tuple[SolveResult, _Registry, _Clock]:
    """`find_min_budget` on the fake solver from an ``infeasible`` at 10 bytes (a join: no unit, no floor)."""
    clock = _Clock()
    fake = _Registry(clock, **kw)
    monkeypatch.setattr(_infeasible, "time", clock)
    monkeypatch.setattr(_infeasible, "registry", fake)
    monkeypatch.setattr(_infeasible, "_floor", lambda *a: None)
    monkeypatch.setattr(_infeasible, "SEARCH_SECONDS", 10.0)
    monkeypatch.setattr(_infeasible, "PROBE_SECONDS", 1.0)
    monkeypatch.setattr(_infeasible, "MIN_PROBE_SECONDS", 0.5)
    res = SolveResult("join", "fake", INFEASIBLE, budget=10)
    assert _infeasible.find_min_budget("join", object(), res, dict(options or {})) is False
    return res, fake, clock


def test_a_heuristic_run_gets_the_time_left_and_none_starts_that_would_not_fit(monkeypatch):
    """Runs of 7 s: the first gets the whole 10 s as its limit (it had none), and no second starts
    with 3 s left (it said "after 10 s" after running a second one, to 14 s)."""
    res, fake, clock = _search(monkeypatch, exact=False, least=37, seconds=lambda limit: 7.0)
    assert fake.limits == [10.0]
    assert clock.now == 7.0
    note = res.details["min_budget_note"]
    assert "search stopped after 7.0 s and 1 run: the 3.0 s left were less than the quickest run's 7.0 s" in note
    assert "after 10 s" not in note


def test_a_run_past_the_search_time_is_reported_with_the_time_it_took(monkeypatch):
    """A run that ignores its limit (pofo's first DP, an exact solver's seed): the note says 15.0 s, not 10."""
    res, fake, clock = _search(monkeypatch, exact=False, least=37, seconds=lambda limit: 15.0)
    assert fake.limits == [10.0] and clock.now == 15.0
    note = res.details["min_budget_note"]
    assert "search stopped after 15.0 s and 1 run: a run started within its 10 s ran past them" in note
    assert "not cut short" in note


def test_a_heuristic_keeps_the_users_smaller_limit(monkeypatch):
    _, fake, _ = _search(monkeypatch, {"time_limit": 4.0}, exact=False, least=37, seconds=lambda limit: 4.0)
    assert fake.limits[:2] == [4.0, 4.0]  # then 2 s are left, less than a run's 4 s: no third run
    assert len(fake.limits) == 2


def test_exact_runs_stay_within_the_search_time(monkeypatch):
    """Exact runs of 0.8 s (their limit honoured): each gets at most 1 s and at least 0.5 s, and none
    starts with 0.4 s left, less than a run takes."""
    res, fake, clock = _search(monkeypatch, exact=True, least=370_001, reference=10**6,
                               seconds=lambda limit: min(limit, 0.8))
    assert all(limit is not None and 0.5 <= limit <= 1.0 for limit in fake.limits), fake.limits
    assert len(fake.limits) == 12 and clock.now <= 10.0
    note = res.details["min_budget_note"]
    assert note.startswith("the smallest feasible budget of fake is between"), note
    assert "(search stopped after 9.6 s and 12 runs: the 0.4 s left were less than the quickest run's 0.8 s)" in note


def test_no_exact_run_gets_more_than_the_time_left(monkeypatch):
    """Runs of 0.25 s: with 0.25 s left no exact run starts (it got 0.5 s: past the deadline); a
    search that ends in time is as before (1 s a run, the smallest budget checked)."""
    res, fake, clock = _search(monkeypatch, exact=True, least=370_000_000_001, reference=10**12,
                               seconds=lambda limit: min(limit, 0.25))
    assert all(limit is not None and 0.5 <= limit <= min(1.0, left) for limit, left in zip(fake.limits, fake.lefts))
    assert len(fake.limits) == 39 and clock.now == 9.75
    assert "39 runs: the 0.25 s left were less than an exact run's least 0.5 s" in res.details["min_budget_note"]
    res, fake, clock = _search(monkeypatch, exact=True, least=37, seconds=lambda limit: 0.1)
    assert res.min_budget == 37 and "min_budget_note" not in res.details
    assert set(fake.limits) == {1.0} and clock.now < 10.0


def test_an_infeasible_with_stages_skipped_for_the_searchs_limit_is_no_verdict(monkeypatch):
    """pofo left stages out (``details["skipped"]``) for the limit the search set: no proof that the
    solver as asked (no limit) has no schedule there. At the user's own limit (the run is the solver as
    asked) it stays a verdict."""
    res, fake, _ = _search(monkeypatch, exact=False, least=100, skipped_below=50, seconds=lambda limit: 1.0)
    note = res.details["min_budget_note"]
    assert "no verdict at 99 bytes within a probe's 9 s" in note, note
    assert len(fake.limits) == 2
    res, fake, _ = _search(monkeypatch, {"time_limit": 1.0}, exact=False, least=100, skipped_below=50,
                           seconds=lambda limit: 0.01)
    assert set(fake.limits) == {1.0}
    assert "no verdict" not in res.details.get("min_budget_note", ""), res.details
