"""The root LP and its tape-cut rounds (`solvers.chain.phase_cuts.separate_tape_cuts`) and the phase
model's build keep the deadline: no LP and no round starts when too little time is left, GLOP is never
given more than the time left, an LP it does not finish proves nothing (no bound from it, in the report
or in the answer), and the build stops within one slot of the deadline. No timed assertions: the
clocks are stand-ins that move only when the test says so, and GLOP's answers are stubbed where an LP
must be cut off (NOT_SOLVED is what GLOP answers at its time limit)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from memsched.solvers.chain import cpsat
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.phase_cuts import CutReport, separate_tape_cuts
from memsched.solvers.exact.options import Deadline, DeadlineExceeded
from memsched.solvers.registry import solve
from ortools.linear_solver import pywraplp

#: random_chain(10, 0) at M = 50: the LP relaxation (62.64) is raised by tape cuts in two rounds (63.17)
BUDGET = 50


class StandInDeadline(Deadline):
    """A deadline of `limit` s whose clock reads `now` (s since its start) and moves only when set."""

    def __init__(self, limit: float | None, now: float = 0.0):
        super().__init__(limit)
        self.now = now

    def elapsed(self) -> float:
        return self.now


class SpyGlop:
    """GLOP as `separate_tape_cuts` creates it, recording the time limits it is given (ms) and the
    clock when each solve starts; `statuses` replaces the answers of the first solves (a status other
    than OPTIMAL: the real solve is skipped, as an LP cut off at its limit); `solve_s` moves `clock`
    by that many seconds per solve."""

    def __init__(self, real: Any, statuses: list[int], clock: StandInDeadline | None, solve_s: float):
        self._real, self._statuses, self._clock, self._solve_s = real, list(statuses), clock, solve_s
        self.limits: list[int] = []
        self.starts: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def SetTimeLimit(self, ms: int) -> None:  # noqa: N802 (pywraplp's name)
        self.limits.append(ms)
        self._real.SetTimeLimit(ms)

    def Solve(self) -> int:  # noqa: N802 (pywraplp's name)
        if self._clock is not None:
            self.starts.append(self._clock.now)
            self._clock.now += self._solve_s
        status = self._statuses.pop(0) if self._statuses else pywraplp.Solver.OPTIMAL
        return self._real.Solve() if status == pywraplp.Solver.OPTIMAL else status


@pytest.fixture
def glop(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[SpyGlop]]:
    """``glop(statuses=(), clock=None, solve_s=0.0)``: every GLOP made from now on is a `SpyGlop`
    (returned in the list, in the order made); the other solvers pywraplp makes are left as they are."""

    def install(statuses: tuple[int, ...] = (), clock: StandInDeadline | None = None,
                solve_s: float = 0.0) -> list[SpyGlop]:
        made: list[SpyGlop] = []
        real_create = pywraplp.Solver.CreateSolver

        def create(name: str) -> Any:
            if name != "GLOP":  # SCIP for milp's backend: as it is
                return real_create(name)
            made.append(SpyGlop(real_create(name), list(statuses), clock, solve_s))
            return made[-1]

        monkeypatch.setattr(pywraplp.Solver, "CreateSolver", staticmethod(create))
        return made

    return install


def model() -> PhaseModel:
    return PhaseModel.build(random_chain(10, 0), BUDGET)


def test_the_model_has_rounds_without_a_limit() -> None:
    """The instance the tests use: without a limit the first LP is solved and cut rounds raise it."""
    report = separate_tape_cuts(model(), Deadline(None))
    assert report.lp_before is not None and report.rounds >= 2 and report.lp_after > report.lp_before


def test_no_lp_and_no_round_when_the_deadline_has_almost_passed(glop: Callable[..., list[SpyGlop]]) -> None:
    """5 ms before a 10 s deadline: no LP is solved, no cut added, no bound claimed (the old code gave
    the first LP half the limit from there, past the deadline)."""
    made = glop()
    m = model()
    n_rows = len(m.rows)
    report = separate_tape_cuts(m, StandInDeadline(10.0, now=10.0 - 0.005))
    assert report.lp_before is None and report.lp_after is None and report.history == []
    assert report.rounds == 0 and report.added == 0 and len(m.rows) == n_rows
    assert report.duals is None and report.fixed == {}
    assert all(not spy.starts and not spy.limits for spy in made)
    assert cpsat._bound_so_far(report, "scope") is None  # a build cut short after it claims no bound


def test_glop_is_never_given_more_than_the_time_left(glop: Callable[..., list[SpyGlop]]) -> None:
    """2 s before a 10 s deadline: every GLOP solve (the first LP and each round) has a time limit of
    at most those 2 s (the old code: 5 s, the first LP's share of the limit counted from the start)."""
    made = glop()
    report = separate_tape_cuts(model(), StandInDeadline(10.0, now=8.0))
    assert report.lp_before is not None  # the clock stands still: the LP and its rounds run
    limits = [ms for spy in made for ms in spy.limits]
    assert limits and max(limits) <= 2000


def test_a_first_lp_cut_off_claims_no_bound(glop: Callable[..., list[SpyGlop]]) -> None:
    """GLOP stopped at its time limit on the first LP: no value, no round, no duals, no fixings."""
    glop(statuses=(pywraplp.Solver.NOT_SOLVED,))
    report = separate_tape_cuts(model(), StandInDeadline(10.0), incumbent=70.0)
    assert report.lp_before is None and report.lp_after is None and report.history == []
    assert report.rounds == 0 and report.duals is None and report.fixed == {}
    assert cpsat.root_lp_bound(report.lp_after) is None and cpsat._bound_so_far(report, "scope") is None


def test_a_round_cut_off_keeps_the_previous_value(glop: Callable[..., list[SpyGlop]]) -> None:
    """The first LP solved, the first round's re-solve stopped at the limit: the bound stays the first
    LP's (its duals too), not a value of the unfinished LP."""
    glop(statuses=(pywraplp.Solver.OPTIMAL, pywraplp.Solver.NOT_SOLVED))
    m = model()
    report = separate_tape_cuts(m, StandInDeadline(10.0))
    assert report.rounds == 1 and report.added > 0
    assert report.history == [report.lp_before] and report.lp_after == report.lp_before
    assert report.duals is not None and len(report.duals) == len(m.rows) - report.added


def test_no_round_starts_that_the_share_cannot_hold(glop: Callable[..., list[SpyGlop]]) -> None:
    """Each solve takes 1.1 s on the stand-in clock; the rounds' share of a 10 s limit ends at 3 s: a
    round starts only while at least the last solve's time is left, so none runs past the share (the
    old code started a second round at 2.2 s, ending at 3.3 s)."""
    clock = StandInDeadline(10.0)
    made = glop(clock=clock, solve_s=1.1)
    report = separate_tape_cuts(model(), clock)
    starts = [t for spy in made for t in spy.starts]
    assert report.rounds >= 1 and len(starts) == report.rounds + 1
    assert all(t + 1.1 <= 3.0 + 1e-9 for t in starts[1:]) and clock.now <= 3.0 + 1e-9


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_the_answer_keeps_no_bound_of_an_unfinished_lp(solver: str, glop: Callable[..., list[SpyGlop]]) -> None:
    """Through the solver: GLOP's first LP stopped at its limit, the answer's bound is not the root
    LP's (`bound_from`) and its details report no LP value."""
    glop(statuses=(pywraplp.Solver.NOT_SOLVED,))
    res = solve("chain", random_chain(10, 0), solver, BUDGET, slots=0, time_limit=60)
    assert res.details["root_lp"] is None and res.details["root_lp_cuts"] is None
    assert res.details["cut_rounds"] == 0
    assert res.details.get("bound_from") != cpsat.ROOT_LP_BOUND


def test_the_build_stops_within_one_slot_of_the_deadline() -> None:
    """A deadline that passes once the 20th row is stated (in the middle of phase L, 10 slots of about
    five rows each): the build raises before a slot more is stated (the old build checked once per
    phase, after all its rows)."""
    stated = [0]

    class Counting(PhaseModel):
        def _row(self, *args: Any, **kwargs: Any) -> None:
            super()._row(*args, **kwargs)
            stated[0] = len(self.rows)

    class AfterRows(Deadline):
        def elapsed(self) -> float:
            return 100.0 if stated[0] >= 20 else 0.0

    with pytest.raises(DeadlineExceeded):
        Counting.build(random_chain(10, 0), BUDGET, deadline=AfterRows(10.0))
    assert 20 <= stated[0] < 20 + 6


def test_an_unfinished_lp_report_is_empty() -> None:
    """`CutReport` without an LP says so in the answer's details (no value, no rounds)."""
    details = CutReport().as_details()
    assert details["root_lp"] is None and details["root_lp_cuts"] is None and details["cut_rounds"] == 0
