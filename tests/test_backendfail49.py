"""A MILP backend that fails fast is followed by another backend (`milp_runner.after_failure`).

A backend run that ended with no values and no proof while time was left (HiGHS 1.16's "Infeasible" then
"Solve error" without presolve; the CBC program aborting on ``std::bad_alloc``, exit -6) was reported
``timeout`` after 0.2 s of a 20 s limit, and no other backend was tried. SCIP (for HiGHS and CBC) now runs in
the time left; both budgets below are one byte under the smallest feasible one (the brute force agrees).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import brute_force
from memsched.solvers.exact import cbc_cmd, highs_runner, milp_runner
from memsched.solvers.exact.linear import LinearModel
from memsched.solvers.exact.milp_runner import BackendRun, run_milp
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.result import INFEASIBLE, OPTIMAL, TIMEOUT

import memsched

#: the hunt's 2-stage chain (hs.json): HiGHS answers "Infeasible", then "Solve error" without presolve
HS = {"format": "memsched.chain/1", "input_size": 10997834101, "stages": [
    {"name": "stage0", "fwd_time": 2.0, "bwd_time": 1.8441407112335892, "out_size": 4815409529,
     "tape_size": 13567544634, "fwd_overhead": 12000000000, "bwd_overhead": 6000000000,
     "fwd_overhead_all": 897997439, "fwd_overhead_nograd": 12000000000, "fwd_time_all": 0.0009638115858539043,
     "fwd_time_nograd": 2.0},
    {"name": "stage1", "fwd_time": 3.0, "bwd_time": 1.709785624324955, "out_size": 16284328869,
     "tape_size": 18725428143, "fwd_overhead": 2411263590, "bwd_overhead": 6000000000,
     "fwd_overhead_all": 2411263590, "fwd_overhead_nograd": 0, "fwd_time_all": 3.0,
     "fwd_time_nograd": 0.44710825848634844}],
    "loss": {"bwd_time": 0.0, "bwd_overhead": 0}}
HS_BUDGET = 61638410170

#: the hunt's 4-stage chain (c243.json): the CBC program aborts (std::bad_alloc) on its exact-size model
C243 = {"format": "memsched.chain/1", "name": "chain", "input_size": 16477995754, "stages": [
    {"name": "stage0", "fwd_time": 3.8074643192557427, "bwd_time": 7.478314719424987, "out_size": 10951051763,
     "tape_size": 23141308400, "fwd_overhead": 12000000000, "bwd_overhead": 3000000000,
     "bwd_overhead_released": 3000000000, "fwd_overhead_all": 8888286064, "fwd_overhead_nograd": 12000000000,
     "fwd_time_all": 1.4499368658831324, "fwd_time_nograd": 3.8074643192557427},
    {"name": "stage1", "fwd_time": 3.472320044973391, "bwd_time": 2.726499351509292, "out_size": 4159303371,
     "tape_size": 10752909037, "fwd_overhead": 9000000000, "bwd_overhead": 3000000000,
     "bwd_overhead_released": -3211561906, "fwd_overhead_all": 6928169043, "fwd_overhead_nograd": 9000000000,
     "fwd_time_all": 3.472320044973391, "fwd_time_nograd": 0.0002334545394134209},
    {"name": "stage2", "fwd_time": 4.5944368668020585, "bwd_time": 2.673755661122969, "out_size": 9816262776,
     "tape_size": 29451744043, "fwd_overhead": 12000000000, "bwd_overhead": 6000000000,
     "bwd_overhead_released": -7301149794, "fwd_overhead_all": 1761673873, "fwd_overhead_nograd": 12000000000,
     "fwd_time_all": 4.5944368668020585, "fwd_time_nograd": 0.0006671592421342588},
    {"name": "stage3", "fwd_time": 1.0, "bwd_time": 4.8010249492777035, "out_size": 18697588121,
     "tape_size": 27062384635, "fwd_overhead": 8494447908, "bwd_overhead": 6000000000,
     "bwd_overhead_released": -27613924563, "fwd_overhead_all": 8494447908, "fwd_overhead_nograd": 6000000000,
     "fwd_time_all": 1.0, "fwd_time_nograd": 0.0}],
    "loss": {"bwd_time": 0.0, "bwd_overhead": 3000000000}, "meta": {}}
C243_BUDGET = 75054231285


def load(tmp_path: Path, data: dict) -> memsched.Chain:
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(data))
    return memsched.load(path)


@pytest.mark.skipif(not highs_runner.available(), reason="highspy is not installed")
@pytest.mark.parametrize("slots", [None, 0])
def test_highs_solve_error_is_followed_by_scip(tmp_path, slots):
    chain = load(tmp_path, HS)
    assert brute_force(chain, HS_BUDGET, phase=True)[0] is None
    assert brute_force(chain, HS_BUDGET + 1, phase=True)[0] is not None
    kw = {} if slots is None else {"slots": slots}
    res = memsched.solve(chain, HS_BUDGET, "milp", backend="highs", time_limit=20, **kw)
    assert res.status == INFEASIBLE, (res.status, res.message)
    assert res.min_budget == HS_BUDGET + 1
    assert res.details["backend_status"].startswith("highs failed (highspy: Infeasible; presolve off: Solve error)")
    # the answer is SCIP's, and says so: scope, details and status text (it read "MILP (highs)")
    assert res.scope.endswith("MILP (scip, after highs failed)") and res.details["answered_by"] == "scip"
    assert "; then scip: " in res.details["backend_status"]


@pytest.mark.skipif(cbc_cmd.cbc_program() is None, reason="no CBC program")
def test_a_crashed_cbc_program_is_followed_by_another_backend(tmp_path):
    chain = load(tmp_path, C243)
    assert brute_force(chain, C243_BUDGET, phase=True)[0] is None
    res = memsched.solve(chain, C243_BUDGET, "milp", backend="cbc", slots=0, time_limit=20)
    assert res.status == INFEASIBLE, (res.status, res.message)
    assert res.min_budget == C243_BUDGET + 1
    assert res.details["backend_status"].startswith("cbc failed (CBC program: no solution file (exit -6))")


def small_model() -> LinearModel:
    """min x + 2y with x + y >= 3, integers in [0, 5]: optimum 3."""
    m = LinearModel()
    x, y = m.var(0, 5, True), m.var(0, 5, True)
    m.add([x, y], [1.0, 1.0], 3.0, float("inf"))
    m.objective = {x: 1.0, y: 2.0}
    return m


@pytest.fixture
def crashing_cbc(tmp_path, monkeypatch):
    """A CBC program that aborts (SIGABRT, exit -6) as soon as it starts."""
    program = tmp_path / "cbc"
    program.write_text("#!/bin/sh\nkill -ABRT $$\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    assert os.access(program, os.X_OK)
    monkeypatch.setattr(cbc_cmd, "cbc_program", lambda: str(program))
    monkeypatch.setattr(milp_runner, "cbc_program", lambda: str(program))
    return program


def test_a_program_that_dies_is_a_failure(crashing_cbc):
    ans = cbc_cmd.solve_mps(cbc_cmd.model_to_mps(small_model()), 2, 20.0, rel_gap=1e-9)
    assert ans.status == TIMEOUT and ans.values is None and ans.failed
    run = run_milp(small_model(), "cbc", Deadline(20), fallback=False)
    assert run.status == TIMEOUT and run.failed and run.backend_status == "CBC program: no solution file (exit -6)"


def test_a_stubbed_backend_that_fails_fast_is_followed_by_scip(crashing_cbc):
    run = run_milp(small_model(), "cbc", Deadline(20))
    assert run.status == OPTIMAL and run.objective == 3.0 and run.values == [3.0, 0.0]
    assert run.backend_status.startswith("cbc failed (CBC program: no solution file (exit -6)); then scip: ")
    assert not run.failed and run.failure.startswith("cbc failed")


def test_no_other_backend_past_the_deadline(crashing_cbc, monkeypatch):
    """A failure at the deadline is the deadline's ``timeout``: nothing else runs."""
    asked: list[str] = []
    real = milp_runner._run_milp

    def spy(model, backend, deadline, options, **kw):  # noqa: ANN001, ANN003, ANN202
        asked.append(backend)
        run = real(model, backend, deadline, options, **kw)
        deadline.limit = 0.0  # the deadline passes while the backend fails
        return run

    monkeypatch.setattr(milp_runner, "_run_milp", spy)
    run = run_milp(small_model(), "cbc", Deadline(20))
    assert asked == ["cbc"] and run.status == TIMEOUT and run.values is None
    assert run.backend_status == "CBC program: no solution file (exit -6)"


def test_both_backends_failing_says_so(monkeypatch):
    """SCIP failing, then HiGHS (stubbed to fail fast): ``timeout`` with no values, the status naming both."""
    def fail(model, backend, deadline, options, **kw):  # noqa: ANN001, ANN003, ANN202
        return BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status=f"{backend} broke", failed=True)

    monkeypatch.setattr(milp_runner, "_run_milp", fail)
    monkeypatch.setattr(highs_runner, "available", lambda: True)
    run = run_milp(small_model(), "scip", Deadline(20))
    assert run.status == TIMEOUT and run.values is None and run.failed
    assert run.backend_status == "scip failed (scip broke); then highs: highs broke"
    # SCIP's memory limit holds only for SCIP: no HiGHS run that would ignore it
    run = run_milp(small_model(), "scip", Deadline(20), ExactOptions(memory_gb=1.0))
    assert run.backend_status == "scip failed (scip broke); no other backend to ask"


@pytest.mark.skipif(not highs_runner.available(), reason="highspy is not installed")
def test_highs_errors_are_failures_only_with_time_left():
    import highspy

    s = highspy.HighsModelStatus
    assert highs_runner.failed(s.kSolveError, Deadline(20))
    assert not highs_runner.failed(s.kSolveError, Deadline(0))
    assert not highs_runner.failed(s.kTimeLimit, Deadline(20))
    assert not highs_runner.failed(s.kInterrupt, Deadline(20))
    assert not highs_runner.failed(s.kInfeasible, Deadline(20))
