"""The exact pipeline solvers check their wall-clock deadline inside their long loops: the ideal
lattice (`dag-cpsat`, `dag`) and `interleave-dp`'s dominance filter and transitions, so that a
``time_limit`` (and a Ctrl-C, a stop at the next check) is not overrun by seconds, and what they
answer then is honest. No wall-clock asserts: the deadlines below expire on cue."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from memsched.solvers.exact import layer
from memsched.solvers.exact.options import Deadline, DeadlineExceeded
from memsched.solvers.pipeline import Pipeline, simulate
from memsched.solvers.pipeline import interleave_dp as idp
from memsched.solvers.pipeline import lattice as lattice_mod
from memsched.solvers.pipeline.dag_cpsat import _infeasible, solve_dag_cpsat
from memsched.solvers.pipeline.dag_dp import _scope, dag_partition_dp, lattice_for, solve_dag
from memsched.solvers.pipeline.generate import parallel_branches, random_pipeline
from memsched.solvers.pipeline.lattice import ideal_lattice
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT


def wide(k: int, b: int, seed: int = 0) -> Pipeline:
    """A source feeding `k` parallel branches of `b` layers joined by one sink: (b + 1)^k + 2 ideals."""
    return parallel_branches(k, b, seed)


class Expired(Deadline):
    """A deadline already spent (when it has a limit)."""

    def left(self) -> float | None:
        return None if self.limit is None else -1.0


def _on_stack(*names: str) -> bool:
    """Whether a function named in `names` is running (a caller of the current frame)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in names:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class ExpiresIn(Deadline):
    """A deadline with no time limit that is spent once consulted from inside one of `names`
    (from then on, anywhere), counting its consultations."""

    def __init__(self, *names: str) -> None:
        super().__init__(None)
        self.names, self.spent, self.calls = names, False, 0

    def expired(self) -> bool:
        self.calls += 1
        self.spent = self.spent or _on_stack(*self.names)
        return self.spent

    def check(self) -> None:
        if self.expired():
            raise DeadlineExceeded("spent on cue")


class ExpiresInTransitions(ExpiresIn):
    """Spent once consulted by `interleave_dp`'s per-transition check (`_tick` called by the DP
    itself, not by its dominance filter)."""

    def __init__(self) -> None:
        super().__init__()

    def expired(self) -> bool:
        self.calls += 1
        frame = sys._getframe(1)
        while frame is not None and not self.spent:
            caller = frame.f_back
            self.spent = frame.f_code.co_name == "_tick" and caller is not None \
                and caller.f_code.co_name == "_interleave_dp"
            frame = caller  # type: ignore[assignment]
        return self.spent


# --- the ideal lattice (dag-cpsat, dag) ---------------------------------------------------------

def test_lattice_enumeration_and_sums_check_the_deadline():
    inst = wide(3, 4)
    assert ideal_lattice(inst).n == 5 ** 3 + 2
    with pytest.raises(DeadlineExceeded):
        ideal_lattice(inst, deadline=Expired(1.0))
    for phase in ("ideal_lattice", "_sums"):  # the enumeration and the per-ideal sums both check it
        with pytest.raises(DeadlineExceeded):
            ideal_lattice(inst, deadline=ExpiresIn(phase))


def test_coarsened_lattice_checks_the_deadline():
    inst = wide(3, 4)
    lat = lattice_for(inst, 5)  # too many ideals for 5 (10 between series runs): down to the linearised chain
    assert lat.n == inst.length + 1
    with pytest.raises(DeadlineExceeded):
        lattice_for(inst, 5, deadline=ExpiresIn("_sums"))
    with pytest.raises(DeadlineExceeded):
        lattice_for(inst, 5, deadline=Expired(1.0))


def test_dag_dp_checks_the_deadline():
    inst = wide(2, 3)
    lat = lattice_for(inst, None)
    assert dag_partition_dp(inst, lat, 3) is not None
    with pytest.raises(DeadlineExceeded):
        dag_partition_dp(inst, lat, 3, deadline=Expired(1.0))


def test_dag_cpsat_stops_while_the_lattice_is_built(monkeypatch):
    """Spent deadline, no seed: ``timeout`` before the lattice's sums are computed (the old code
    built the whole lattice, seconds for 10^5 ideals, before its first check)."""
    built = []
    sums = lattice_mod._sums
    monkeypatch.setattr(lattice_mod, "_sums", lambda *a, **k: built.append(1) or sums(*a, **k))
    monkeypatch.setattr(layer, "Deadline", Expired)
    res = solve_dag_cpsat(wide(3, 4), 10 ** 12, devices=3, warm_start=False, time_limit=30)
    assert res.status == TIMEOUT and res.schedule is None
    assert built == []


def test_dag_cpsat_spent_deadline_answers_the_seed_as_feasible(monkeypatch):
    inst = wide(2, 3)
    monkeypatch.setattr(layer, "Deadline", Expired)
    res = solve_dag_cpsat(inst, 10 ** 12, devices=3, time_limit=30)
    assert res.status == FEASIBLE and res.schedule is not None
    assert simulate(inst, res.schedule, 10 ** 12, devices=3).violation is None


def test_dag_cpsat_infeasible_stays_proven_when_the_memory_dp_is_cut():
    inst = wide(2, 3)
    lat = lattice_for(inst, None)
    scope = _scope(lat, 3, "1f1b", None, False)
    full = _infeasible(inst, lat, 10, 3, "1f1b", None, 0.0, scope)
    assert full.status == INFEASIBLE and full.min_budget is not None
    cut = _infeasible(inst, lat, 10, 3, "1f1b", None, 0.0, scope, Expired(1.0))
    assert cut.status == INFEASIBLE and cut.min_budget is None and "time limit" in cut.message


def test_dag_honours_its_time_limit_with_the_contiguous_partition():
    inst = wide(2, 3)
    assert solve_dag(inst, 10 ** 12, devices=3).status == OPTIMAL
    res = solve_dag(inst, 10 ** 12, devices=3, time_limit=0)  # spent before the lattice
    assert res.status == FEASIBLE and res.lower_bound is None and "time limit" in res.message
    assert res.schedule is not None and simulate(inst, res.schedule, 10 ** 12, devices=3).violation is None
    tight = solve_dag(inst, 10, devices=3, time_limit=0)  # nothing fits, but nothing was proven
    assert tight.status == TIMEOUT and tight.schedule is None


# --- interleave-dp ------------------------------------------------------------------------------

def _chain() -> Pipeline:
    return random_pipeline(np.random.default_rng(3), 14)


def test_dominance_filter_checks_the_deadline():
    found, exact = idp.interleave_dp(_chain(), 3, None)
    assert found is not None and exact
    cut, cut_exact = idp.interleave_dp(_chain(), 3, None, deadline=ExpiresIn("_undominated"))
    assert not cut_exact  # stopped inside the filter: the best so far, not proven
    assert cut is None or cut[0] >= found[0] - 1e-9
    states = [idp._State(((float(k), 0, 0),), 0, 0.0, ((0, 0, 0),)) for k in range(3)]
    with pytest.raises(DeadlineExceeded):
        idp._undominated(states, Expired(1.0))


def test_transitions_check_the_deadline():
    """The transitions of one level are checked every `CHECK_EVERY` (the old code looked every
    64 states only, each state expanding into up to i x P transitions)."""
    inst = _chain()
    found, _ = idp.interleave_dp(inst, 3, None)
    assert found is not None
    cut, exact = idp.interleave_dp(inst, 3, None, deadline=ExpiresInTransitions())
    assert not exact and (cut is None or cut[0] >= found[0] - 1e-9)


def test_interleave_dp_stopped_in_the_filter_answers_feasible(monkeypatch):
    inst = _chain()
    assert idp.solve_interleave_dp(inst, None, devices=3, time_limit=30).status == OPTIMAL

    class Spent(ExpiresIn):
        def __init__(self, limit: float | None, start: float | None = None) -> None:
            super().__init__("_undominated")
            self.limit = limit

    monkeypatch.setattr(idp, "Deadline", Spent)
    res = idp.solve_interleave_dp(inst, None, devices=3, time_limit=30)
    assert res.status == FEASIBLE and res.lower_bound is None and "time limit" in res.message
    assert res.schedule is not None and simulate(inst, res.schedule, None, devices=3).violation is None
