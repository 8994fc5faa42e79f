"""Pipeline fixes from a bug hunt (2): the interleaved solvers never return more stages than
``max_stages`` (the straight DP is capped, the seeds of `interleave-cpsat` honour it); the
CP-SAT models (`cpsat`, `dag-cpsat`, `interleave-cpsat`) check the deadline while they are
built, so the time limit answers with the seed; `interleave-dp` takes ``time_limit``."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from conftest import interleave_brute_force as brute_force
from conftest import interleave_chain as chain
from memsched.solvers.errors import InputError
from memsched.solvers.exact.options import Deadline, DeadlineExceeded
from memsched.solvers.pipeline import Pipeline, load, simulate
from memsched.solvers.pipeline.cpsat import stage_flow_model
from memsched.solvers.pipeline.interleave import solve_interleave
from memsched.solvers.pipeline.interleave_dp import interleave_dp, solve_interleave_dp
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT
from ortools.sat.python import cp_model

import memsched

TINY = Path(__file__).resolve().parent.parent / "solvers" / "data" / "pipeline" / "tiny-resnet.graph.txt"
INTERLEAVED = ("interleave", "interleave-v", "interleave-dp", "interleave-cpsat")


def _expired() -> Deadline:
    """A deadline of 1 s that started 10 s ago."""
    return Deadline(1.0, start=time.perf_counter() - 10.0)


# ---------------------------------------------------------------------------- 1. max_stages is a hard cap
def _hunt_chain() -> Pipeline:
    """The chain of the hunt's repro (ilv_maxstages.py): interleave-cpsat returned interleave-v's
    4-stage V shape with max_stages=2, and every interleaved solver 2 stages with max_stages=1."""
    return Pipeline(fwd=[1.0, 2.0, 0.0, 2.0, 5.0, 1.0], bwd=[0.0, 4.0, 4.0, 0.0, 0.0, 1.0],
                    act=[20, 50, 100, 50, 50, 10], params=[5, 30, 30, 30, 80, 0], input_size=40, bandwidth=1e5)


def _check_against_brute(inst: Pipeline, P: int, budget: int, smax: int) -> None:
    want = brute_force(inst, P, budget, smax)
    for name in INTERLEAVED:
        r = memsched.solve(inst, budget, name, devices=P, max_stages=smax, time_limit=20).raw
        where = f"{name} P={P} max_stages={smax} budget={budget}"
        if r.schedule is not None:
            assert len(r.schedule.stages) <= smax, where
            assert simulate(inst, r.schedule, budget, devices=P).violation is None, where
            assert r.objective >= want - 1e-9, where  # nothing in scope beats the brute force
        if name in ("interleave-dp", "interleave-cpsat"):  # exact within <= max_stages stages
            if math.isinf(want):
                assert r.status == INFEASIBLE, where
            else:
                assert r.status == OPTIMAL and r.objective == pytest.approx(want), where
        elif math.isinf(want):
            assert r.status == INFEASIBLE, where


@pytest.mark.parametrize("smax", [1, 2, 3])
def test_interleaved_solvers_never_exceed_max_stages_on_the_hunt_chain(smax):
    _check_against_brute(_hunt_chain(), 2, 997, smax)


def test_interleaved_solvers_never_exceed_max_stages_below_the_devices():
    for seed in range(3):
        inst = chain(seed, L=5)
        for smax in (1, 2):  # fewer stages than the 3 devices
            _check_against_brute(inst, 3, 10**15, smax)


def test_interleave_cpsat_adopts_no_seed_beyond_max_stages():
    """The exact layer adopted interleave-v's 4-stage V shape (period 10) over the model's proven
    optimum 11 among <= 2 stages; its seeds now honour max_stages (madpipe, which does not, is no
    longer one)."""
    r = memsched.solve(_hunt_chain(), 997, "interleave-cpsat", devices=2, max_stages=2, time_limit=20).raw
    assert r.status == OPTIMAL and len(r.schedule.stages) <= 2 and r.objective == pytest.approx(11.0)
    assert r.seeded_by in ("interleave", "interleave-v")


def test_interleave_caps_its_straight_pipeline_at_max_stages():
    inst = chain(0, L=5)
    r = solve_interleave(inst, 10**15, devices=3, max_stages=2)
    assert r.status == FEASIBLE and len(r.schedule.stages) <= 2


# ---------------------------------------------------------------------------- 2. the model build checks the deadline
def test_stage_flow_model_checks_the_deadline():
    cand = [(0, 0, 2, 1.0), (1, 1, 1, 2.0), (0, 1, 1, 3.0)]
    with pytest.raises(DeadlineExceeded):
        stage_flow_model(cand, 2, 0, 1, [(0, 1)], _expired())
    stage_flow_model(cand, 2, 0, 1, [(0, 1)], Deadline(None))  # no limit: builds


@pytest.mark.parametrize("name,instance,seeder", [("cpsat", "chain", "madpipe"), ("dag-cpsat", "dag", "dag"),
                                                  ("interleave-cpsat", "chain", "interleave")])
def test_the_time_limit_during_the_model_build_answers_with_the_seed(monkeypatch, name, instance, seeder):
    """The deadline expires as the CP-SAT model is created (after the candidate stages, whose loop
    always checked it): the build stops there, and the answer is the seed, ``feasible``."""
    inst = chain(1, L=6) if instance == "chain" else load(str(TINY))
    building = {"on": False}

    class Flagging(cp_model.CpModel):
        def __init__(self) -> None:
            super().__init__()
            building["on"] = True

    real = Deadline.expired
    monkeypatch.setattr(cp_model, "CpModel", Flagging)
    monkeypatch.setattr(Deadline, "expired", lambda self: building["on"] or real(self))
    r = memsched.solve(inst, 10**15, name, devices=2, time_limit=30).raw
    assert building["on"]
    assert r.status == FEASIBLE and r.seeded_by == seeder and r.schedule is not None
    assert "the time limit came while the model was being built" in r.message
    assert f"returned {seeder}'s schedule" in r.message


# ---------------------------------------------------------------------------- 3. interleave-dp takes time_limit
def test_interleave_dp_stops_at_its_time_limit_with_the_seed():
    inst = chain(3, L=8)
    full = solve_interleave_dp(inst, 10**15, devices=3)
    assert full.status == OPTIMAL
    r = solve_interleave_dp(inst, 10**15, devices=3, time_limit=1e-9)  # spent before the DP starts
    assert r.status == FEASIBLE and r.lower_bound is None
    assert "time limit" in r.message and "not proven optimal" in r.message
    seed = solve_interleave(inst, 10**15, devices=3)
    assert r.objective == pytest.approx(seed.objective)  # interleave always runs
    assert r.objective >= full.objective - 1e-9


def test_interleave_dp_out_of_time_without_a_seed_is_timeout_not_infeasible():
    inst = chain(3, L=8)
    assert solve_interleave_dp(inst, 1, devices=3).status == INFEASIBLE
    r = solve_interleave_dp(inst, 1, devices=3, time_limit=0)
    assert r.status == TIMEOUT and r.schedule is None and "time limit" in r.message


def test_interleave_dp_through_the_facade_takes_the_time_limit():
    r = memsched.solve(chain(3, L=8), 10**15, "interleave-dp", devices=3, time_limit=1e-9).raw
    assert r.status == FEASIBLE and "time limit" in r.message


def test_interleave_dp_search_reports_inexact_when_the_deadline_is_spent():
    inst = chain(2, L=6)
    found, exact = interleave_dp(inst, 2, None, max_stages=4)
    assert found is not None and exact
    _, exact = interleave_dp(inst, 2, None, max_stages=4, deadline=_expired())
    assert not exact


@pytest.mark.parametrize("bad", [-1, "soon", float("nan"), True])
def test_interleave_dp_refuses_a_bad_time_limit(bad):
    with pytest.raises(InputError, match="time"):
        solve_interleave_dp(chain(0, L=4), 10**15, devices=2, time_limit=bad)
