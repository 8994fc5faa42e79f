"""A chain exact model whose build runs out of time after its root LP keeps the LP's bound.

The time limit is forced at a fixed point (monkeypatch: `DeadlineExceeded` raised where the model is
stated for the backend, after the root LP with tape cuts) rather than by a short limit, so that the
tests do not depend on the machine's load. Bug: the exact layer answered such a timeout without a
bound, and the referee then gave only the weak floor (every op once: 151.655 on random30 at 25%,
where the progress line had shown the root LP's 191.05).
"""

from __future__ import annotations

from typing import Any

import memsched.solvers.chain.cpsat as chain_cpsat
import pytest
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.exact.options import DeadlineExceeded
from memsched.solvers.progress import Progress, watching

import memsched

#: GLOP's relative margin taken off the root LP before it is reported (`chain.cpsat.LP_BOUND_TOLERANCE`)
LP_MARGIN = 1e-7


def _timeout(*_args: Any, **_kw: Any) -> Any:
    raise DeadlineExceeded("forced: the time limit came while the model was being built")


def _chain(name: str) -> Any:
    return memsched.load(memsched.data_path("examples", f"{name}.json"))


def _solve_watched(chain: Any, budget: str, solver: str, **kw: Any) -> tuple[Any, list[Progress]]:
    """`memsched.solve` with every progress state it reported."""
    seen: list[Progress] = []
    with watching(seen.append):
        res = memsched.solve(chain, budget, solver=solver, **kw)
    return res, seen


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_build_timeout_keeps_the_root_lp_bound_shown_by_progress(monkeypatch: pytest.MonkeyPatch,
                                                                  solver: str) -> None:
    """The issue's instance: the answer's bound is the root LP's that progress showed (less GLOP's
    margin, as a finished model reports it), no larger than the makespan, with the model's scope."""
    monkeypatch.setattr(chain_cpsat, "_cp_model", _timeout)  # cpsat: stating the rows for CP-SAT
    monkeypatch.setattr(PhaseModel, "to_linear", _timeout)  # milp: stating the linear model
    big = _chain("random30")
    res, seen = _solve_watched(big, "25%", solver, time_limit=10)
    lp = [p.bound for p in seen if p.stage == "root LP and tape cuts" and p.bound is not None]
    assert lp, "the root LP was solved before the forced timeout"
    assert "being built" in res.message
    assert res.status == "feasible" and res.makespan is not None and res.lower_bound is not None
    assert res.lower_bound == pytest.approx(lp[-1], rel=1e-6)
    assert res.lower_bound == pytest.approx(lp[-1] * (1 - LP_MARGIN), rel=1e-12)
    assert res.lower_bound <= res.makespan
    assert res.lower_bound > big.total_time() + 1.0  # not the weak floor (every op once)
    assert res.gap is not None and res.gap < 0.05
    assert "sizes in 500 slots" in res.scope  # the bound is of the model's scope, and the scope says so
    assert res.raw.details["bound_from"] == "root LP with tape cuts"


def test_build_timeout_bound_is_the_one_milp_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an instance milp proves at exact sizes: cpsat's bound after a forced build timeout is the
    root-LP bound milp's answer reports (same LP, same seed), and at most the proven optimum."""
    chain = _chain("random10")
    ref = memsched.solve(chain, "40%", solver="milp", time_limit=60, slots=0)
    assert ref.status == "optimal" and ref.makespan is not None
    root = ref.raw.details["root_lp_cuts"]
    assert root is not None and root < ref.makespan
    monkeypatch.setattr(chain_cpsat, "_cp_model", _timeout)
    res = memsched.solve(chain, "40%", solver="cpsat", time_limit=60, slots=0)
    assert "being built" in res.message
    assert res.lower_bound is not None
    assert res.lower_bound == pytest.approx(root * (1 - LP_MARGIN), rel=1e-6)
    assert res.lower_bound <= ref.makespan * (1 + 1e-9)  # a valid bound of the optimum
    assert "exact sizes" in res.scope


@pytest.mark.parametrize("slots", [0, 500])
def test_build_timeout_bound_never_above_the_optimum_of_its_scope(monkeypatch: pytest.MonkeyPatch,
                                                                  slots: int) -> None:
    """milp, forced to time out after its root LP, reports a bound no larger than the optimum that
    milp proves for the same scope (exact sizes, or the same slots)."""
    chain = _chain("random10")
    for budget in ("40%", "60%"):
        ref = memsched.solve(chain, budget, solver="milp", time_limit=60, slots=slots)
        assert ref.status == "optimal" and ref.makespan is not None
        with monkeypatch.context() as m:
            m.setattr(PhaseModel, "to_linear", _timeout)
            res = memsched.solve(chain, budget, solver="milp", time_limit=60, slots=slots)
        assert "being built" in res.message
        assert res.lower_bound is not None and res.lower_bound > chain.total_time()
        assert res.lower_bound <= ref.makespan * (1 + 1e-9)


def test_timeout_before_the_root_lp_reports_no_model_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LP solved (the build ran out of time before it, or the root LP is off): nothing of the model
    was proven, so the bound is only the floor (every op once) and the scope the seed's schedule's."""
    chain = _chain("random10")
    floor = chain.total_time()
    monkeypatch.setattr(chain_cpsat, "_cp_model", _timeout)
    res = memsched.solve(chain, "40%", solver="cpsat", time_limit=60, slots=0, root_lp=False)
    assert "being built" in res.message and res.status == "feasible"
    assert res.lower_bound == pytest.approx(floor, rel=1e-12)
    assert "phase model" not in res.scope
    monkeypatch.setattr(PhaseModel, "build", classmethod(lambda cls, *a, **k: _timeout()))
    res = memsched.solve(chain, "40%", solver="milp", time_limit=60, slots=0)
    assert "being built" in res.message and res.status == "feasible"
    assert res.lower_bound == pytest.approx(floor, rel=1e-12)
