"""An answered Ctrl-C (inside `answer_on_interrupt`, as the command line's) during an exact solver:

- during the warm start, the seeds found before it are the answer (they were thrown away: nothing
  printed, exit 130), and with no seed yet it still raises;
- during the chain models' rounds of tape cuts, the last solved root LP's bound is kept, with the
  model's scope (the bound was the floor: every op once), as a time limit there keeps it;
- a portfolio child that ignores the Ctrl-C passed on to it (HiGHS in its root LP) is killed
  `INTERRUPT_GRACE_S` after it, instead of holding the answer to the time limit.

The interrupts are forced at fixed points (monkeypatch, a SIGINT sent by the test), not timed."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import memsched.solvers.chain.cpsat as chain_cpsat
import memsched.solvers.chain.milp as chain_milp
import memsched.solvers.chain.phase_cuts as phase_cuts
import memsched.solvers.registry as registry
import pytest
from memsched.solvers.exact import layer, portfolio
from memsched.solvers.exact.interrupt import answer_on_interrupt, interrupted
from memsched.solvers.exact.options import Deadline, ExactOptions

import memsched


def _interrupt(*_args: Any, **_kw: Any) -> Any:
    raise KeyboardInterrupt


def _random10() -> Any:
    return memsched.load(memsched.data_path("examples", "random10.json"))


# ------------------------------------------------------------------------------ the warm start
def _fast_then_interrupt(real: Any, first: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`registry.solve` answering the fast solver `first` for real and raising `KeyboardInterrupt` on the
    next one (in this process: no forked child); returns the names asked, in order."""
    asked: list[str] = []

    def fake(problem: str, instance: Any, name: str, budget: Any, **kw: Any) -> Any:
        asked.append(name)
        if name == first:
            return real(problem, instance, name, budget, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(layer, "can_fork", lambda: False)
    monkeypatch.setattr(registry, "solve", fake)
    return asked


def test_ctrl_c_in_the_warm_start_answers_with_the_seeds_found(monkeypatch: pytest.MonkeyPatch):
    chain = _random10()
    real = registry.solve
    budget = memsched.solve(chain, "60%", solver="rotor").raw.budget
    seed = real("chain", chain, "rotor", budget)
    assert seed.schedule is not None and seed.objective is not None
    fast = chain_cpsat.FAST
    assert fast[0] == "rotor"
    monkeypatch.setattr(chain_cpsat, "_solve_cpsat", _interrupt)  # the model must not be reached
    asked = _fast_then_interrupt(real, "rotor", monkeypatch)
    with answer_on_interrupt():
        res = real("chain", chain, "cpsat", budget, time_limit=60)
        assert interrupted()
    assert asked == ["rotor", fast[1]]
    assert res.details["interrupted"] is True and "warm start" in res.details["not_built"]
    assert res.schedule is not None and res.objective == pytest.approx(seed.objective)
    assert res.status in ("feasible", "optimal") and res.details["solution_from"] == "rotor"
    assert res.details["fast"] == {"rotor": pytest.approx(seed.objective)}
    assert res.details["fast_not_run"] == list(fast[1:])
    assert res.lower_bound is not None and res.lower_bound <= res.objective  # the floor: every op once
    assert "during the warm start" in res.message and "rotor" in res.scope
    # with no seed yet, or outside `answer_on_interrupt`, the Ctrl-C is raised as before
    _fast_then_interrupt(real, "no such solver", monkeypatch)
    with answer_on_interrupt(), pytest.raises(KeyboardInterrupt):
        real("chain", chain, "cpsat", budget, time_limit=60)
    _fast_then_interrupt(real, "rotor", monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        real("chain", chain, "cpsat", budget, time_limit=60)


# ------------------------------------------------------------------------------ the tape-cut rounds
@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_ctrl_c_in_the_tape_cut_rounds_keeps_the_root_lp_bound(monkeypatch: pytest.MonkeyPatch, solver: str):
    chain = _random10()
    ref = memsched.solve(chain, "40%", solver="milp", time_limit=60, slots=0)
    assert ref.status == "optimal" and ref.makespan is not None
    first_lp, rounds = ref.raw.details["root_lp"], ref.raw.details["cut_rounds"]
    assert first_lp is not None and rounds >= 1  # the rounds ran: a Ctrl-C can come in them
    monkeypatch.setattr(phase_cuts, "violated_tape_cuts", _interrupt)  # the first round, after the first LP
    reached = []
    monkeypatch.setattr(chain_milp.PhaseModel, "to_linear", lambda *a, **k: reached.append(1))
    monkeypatch.setattr(chain_cpsat, "_cp_model", lambda *a, **k: reached.append(1))
    with answer_on_interrupt():
        res = registry.solve("chain", chain, solver, ref.raw.budget, time_limit=60, slots=0)
    assert not reached  # the Ctrl-C came in the rounds, before the model was stated for the backend
    assert res.details.get("interrupted") is True
    assert res.schedule is not None and res.objective is not None
    assert res.lower_bound is not None and res.lower_bound > chain.total_time() + 1.0  # not the floor
    assert res.lower_bound == pytest.approx(first_lp, rel=1e-6)
    assert res.lower_bound <= ref.makespan * (1 + 1e-9)
    assert res.details["bound_from"] == "root LP with tape cuts"
    assert res.details["root_lp_cuts"] == pytest.approx(first_lp) and res.details["cut_rounds"] == 0
    assert "exact sizes" in res.scope


def test_the_rounds_fill_the_report_given(monkeypatch: pytest.MonkeyPatch):
    from memsched.solvers.chain.exact_model import PhaseModel, discretise

    chain = _random10()
    budget = memsched.solve(chain, "40%", solver="rotor").raw.budget
    dchain, M = discretise(chain, budget, 0)
    model = PhaseModel.build(dchain, M)
    report = phase_cuts.CutReport()
    monkeypatch.setattr(phase_cuts, "violated_tape_cuts", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        phase_cuts.separate_tape_cuts(model, Deadline(60.0), report=report)
    assert report.lp_before is not None and report.lp_after == report.lp_before and report.seconds > 0


# ------------------------------------------------------------------------------ the portfolio
def _deaf_backend(*_args: Any, **_kw: Any) -> Any:
    """A backend that ignores SIGINT and SIGTERM (HiGHS in its root LP on a large model)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)


def test_a_child_deaf_to_the_ctrl_c_is_killed_after_the_grace(monkeypatch: pytest.MonkeyPatch):
    if not layer.can_fork():
        pytest.skip("no fork here: the backend runs in this process")
    monkeypatch.setattr(portfolio, "run_milp", _deaf_backend)
    started: list[int] = []
    real_own_group = portfolio._own_group

    def own_group(pid: int) -> None:
        real_own_group(pid)
        if pid:
            started.append(pid)

    monkeypatch.setattr(portfolio, "_own_group", own_group)

    def ctrl_c() -> None:
        time.sleep(1.0)  # the child is in the race by then (a fork takes milliseconds)
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Thread(target=ctrl_c, daemon=True)
    t0 = time.monotonic()
    timer.start()
    with answer_on_interrupt():
        run = portfolio.run_isolated(None, "highs", Deadline(30.0), ExactOptions())  # type: ignore[arg-type]
        assert interrupted()
    wall = time.monotonic() - t0
    timer.join()
    assert run.status == "timeout" and run.values is None
    assert "after the Ctrl-C" in run.backend_status
    assert wall < 1.0 + portfolio.INTERRUPT_GRACE_S + 3.0  # not the 30 s limit
    assert started
    for pid in started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
