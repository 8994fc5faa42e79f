"""Once a Ctrl-C has stopped a backend of a solve (inside `answer_on_interrupt`), no backend run of
that solve starts a new search (`milp_runner.not_started`): the solvers that run the backend more
than once (graph cpsat's two phases, the offload LNS steps, chain cpsat's rounds excluding broken
plans, exact-combined's loop over sequences, join cpsat's orders) answer with what they have
instead of searching on, each run to its share of the limit."""

from __future__ import annotations

from typing import Any

import pytest
from memsched.solvers.exact import portfolio
from memsched.solvers.exact.cpsat_runner import run_cpsat
from memsched.solvers.exact.interrupt import answer_on_interrupt, note_interrupt
from memsched.solvers.exact.linear import LinearModel
from memsched.solvers.exact.milp_runner import run_milp
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.result import OPTIMAL, TIMEOUT


def _linear() -> LinearModel:
    m = LinearModel()
    x = m.var(0, 10, True, "x")
    m.add([x], [1.0], ub=3.0)
    m.objective[x] = -1.0
    return m


def _cp() -> Any:
    from ortools.sat.python import cp_model

    cp = cp_model.CpModel()
    x = cp.new_int_var(0, 10, "x")
    cp.add(x <= 3)
    cp.maximize(x)
    return cp


RUNS = {
    "cpsat": lambda: run_cpsat(_cp(), Deadline(10.0)),
    "milp": lambda: run_milp(_linear(), "scip", Deadline(10.0)),
    "portfolio": lambda: portfolio.run_portfolio(_linear(), Deadline(10.0), ExactOptions(workers=2)),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_no_search_starts_after_an_interrupt(name: str) -> None:
    with answer_on_interrupt():
        note_interrupt()  # a backend of this solve was stopped by a Ctrl-C
        run = RUNS[name]()
    assert run.status == TIMEOUT and run.values is None
    assert run.backend_status == "not started: interrupted"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_search_runs_without_one(name: str) -> None:
    with answer_on_interrupt():
        run = RUNS[name]()
    assert run.status == OPTIMAL
