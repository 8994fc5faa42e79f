"""An answered Ctrl-C that lands while a chain exact model is being stated for its backend, after
the root LP, keeps the root LP's bound (as a time limit there does, test_build_timeout_bound34):
the answer is the warm start's schedule with that bound, not the weak floor (every op once). The
interrupt is forced at a fixed point (monkeypatch), not timed."""

from __future__ import annotations

from typing import Any

import memsched.solvers.chain.cpsat as chain_cpsat
import pytest
from memsched.solvers import registry
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.exact.interrupt import answer_on_interrupt

import memsched


def _interrupt(*_args: Any, **_kw: Any) -> Any:
    raise KeyboardInterrupt


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_answered_interrupt_after_the_root_lp_keeps_its_bound(monkeypatch: pytest.MonkeyPatch, solver: str):
    chain = memsched.load(memsched.data_path("examples", "random10.json"))
    ref = memsched.solve(chain, "40%", solver="milp", time_limit=60, slots=0)
    assert ref.status == "optimal" and ref.makespan is not None
    root = ref.raw.details["root_lp_cuts"]
    assert root is not None and root < ref.makespan
    monkeypatch.setattr(chain_cpsat, "_cp_model", _interrupt)  # cpsat: stating the rows for CP-SAT
    monkeypatch.setattr(PhaseModel, "to_linear", _interrupt)  # milp: stating the linear model
    with answer_on_interrupt():
        res = registry.solve("chain", chain, solver, ref.raw.budget, time_limit=60, slots=0)
    assert res.details.get("interrupted") is True
    assert res.schedule is not None and res.objective is not None
    assert res.lower_bound is not None and res.lower_bound > chain.total_time() + 1.0  # not the floor
    assert res.lower_bound == pytest.approx(root, rel=1e-6)
    assert res.lower_bound <= ref.makespan * (1 + 1e-9)  # a valid bound of the optimum
    assert res.details["bound_from"] == "root LP with tape cuts"
    assert "exact sizes" in res.scope


def test_unanswered_interrupt_still_raises(monkeypatch: pytest.MonkeyPatch):
    chain = memsched.load(memsched.data_path("examples", "random10.json"))
    budget = memsched.solve(chain, "40%", solver="milp", time_limit=60, slots=0).raw.budget
    monkeypatch.setattr(chain_cpsat, "_cp_model", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        registry.solve("chain", chain, "cpsat", budget, time_limit=60, slots=0)
