"""Ctrl-C during an exact solve (`solvers.exact.interrupt`): every backend stops at once; inside
`answer_on_interrupt` the run comes back with what it had, elsewhere `KeyboardInterrupt` is raised.

The chain L = 30 at its tight budget is not proven within minutes by any backend, so a solve given
120 s that returns within 60 s of a SIGINT sent after 1.5 s was stopped by the interrupt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from conftest import live_pids, sigint_as_in_a_terminal
from memsched.solvers.chain.cpsat import phase_hint
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.exact import interrupt
from memsched.solvers.exact.cbc_cmd import cbc_program
from memsched.solvers.exact.cpsat_runner import linear_to_cpsat, run_cpsat
from memsched.solvers.exact.highs_runner import available as highs_available
from memsched.solvers.exact.interrupt import answer_on_interrupt, interrupted, stop_on_interrupt
from memsched.solvers.exact.milp_runner import run_milp
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.exact.portfolio import run_isolated, run_portfolio
from memsched.solvers.registry import solve

LIMIT_S = 120.0
# the SIGINT must land while the backend searches: 1.5 s let it land in CP-SAT's model building or the
# exact layer's warm start when the suite ran beside other jobs (load 10 on two cores); the L = 30 tight
# model is open after 60 s for every backend, so a later signal still finds the search running
SIGNAL_AFTER_S = 4.0
STOPPED_WITHIN_S = 60.0


@pytest.fixture(scope="module")
def hard_model():
    model = PhaseModel.build(random_chain(30, 0), 97)
    hint, ok, _ = phase_hint(model, None, Deadline(None))
    assert ok
    return model.to_linear(), hint


def _sigint_later(seconds: float = SIGNAL_AFTER_S) -> threading.Timer:
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@pytest.fixture(autouse=True)
def own_temporary_folder(tmp_path, monkeypatch):
    """This test's CBC programs get their model files (`cbc_cmd.solve_mps`'s temporary directory) under
    `tmp_path`, so `_cbc_programs` counts theirs, not those another process on the machine runs."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _cbc_programs() -> list[int]:
    """Pids of running (not zombie) CBC programs started by `cbc_cmd.solve_mps` in this test (its
    temporary directory, under the test's own folder: `own_temporary_folder`)."""
    return live_pids("cmdline", os.path.join(tempfile.gettempdir(), "memsched-cbc-").encode())


def _no_cbc_program_left() -> bool:
    """True when no CBC program is left running within 3 s (none orphaned by an interrupt)."""
    end = time.monotonic() + 3.0
    while _cbc_programs() and time.monotonic() < end:
        time.sleep(0.05)
    return not _cbc_programs()


def _backend_run(name, lm, hint):
    deadline = Deadline(LIMIT_S)
    if name == "cbc-isolated":  # in a child process, as `checkmate` runs it: the interrupt is passed on twice
        return run_isolated(lm, "cbc", deadline, ExactOptions(), hint=hint, hint_feasible=True)
    if name == "cp-sat":
        cp, xs, offset, scale = linear_to_cpsat(lm, hint=hint)
        return run_cpsat(cp, deadline, ExactOptions(), variables=xs, offset=offset, scale=scale, hint_feasible=True)
    if name == "portfolio":
        return run_portfolio(lm, deadline, ExactOptions(workers=2), hint=hint, hint_feasible=True)
    return run_milp(lm, name, deadline, ExactOptions(), hint=hint, hint_feasible=True)


BACKENDS = (["scip", "cp-sat", "portfolio"] + (["highs"] if highs_available() else [])
            + (["cbc", "cbc-isolated"] if cbc_program() is not None and os.path.isdir("/proc") else []))
#: the backends that return the start they were given when interrupted
RETURN_THE_START = ("scip", "cp-sat", "portfolio", "cbc", "cbc-isolated")


@pytest.mark.parametrize("name", BACKENDS)
def test_an_interrupted_backend_answers_inside_answer_on_interrupt(name, hard_model):
    lm, hint = hard_model
    start = time.monotonic()
    timer = _sigint_later()
    try:
        with answer_on_interrupt():
            run = _backend_run(name, lm, hint)
            assert interrupted()
    finally:
        timer.cancel()
    assert time.monotonic() - start < STOPPED_WITHIN_S
    assert run.status in ("feasible", "timeout")  # stopped: no proof
    if name in RETURN_THE_START:  # given the start, they return a schedule
        assert run.values is not None and run.objective is not None
        assert run.bound is None or run.bound <= run.objective
    assert _no_cbc_program_left()


@pytest.mark.parametrize("name", BACKENDS)
def test_an_interrupted_backend_raises_elsewhere(name, hard_model):
    lm, hint = hard_model
    before = signal.getsignal(signal.SIGINT)
    start = time.monotonic()
    timer = _sigint_later()
    try:
        with pytest.raises(KeyboardInterrupt):
            _backend_run(name, lm, hint)
    finally:
        timer.cancel()
    assert time.monotonic() - start < STOPPED_WITHIN_S
    assert signal.getsignal(signal.SIGINT) is before  # the handler and the wakeup fd are restored
    assert signal.set_wakeup_fd(-1) == -1
    assert _no_cbc_program_left()


@pytest.mark.parametrize("name", ["scip", "cp-sat"] + (["highs"] if highs_available() else []))
def test_an_interrupt_before_the_search_starts_is_not_forgotten(name, hard_model, monkeypatch):
    """SIGINT inside `stop_on_interrupt` but before the backend's solve has begun: SCIP resets its
    interrupt flag when `SCIPsolve` starts (CP-SAT forgets an early `stop_search` too), so one stop
    asked then was lost and the solve ran to its limit. The stop is asked again until the backend
    returns."""
    from contextlib import contextmanager

    from memsched.solvers.exact import cpsat_runner, highs_runner, milp_runner

    real = interrupt.stop_on_interrupt

    @contextmanager
    def early(stop, **kw):
        with real(stop, **kw):
            os.kill(os.getpid(), signal.SIGINT)  # delivered before the backend is called
            time.sleep(0.05)  # the watcher has asked once by now
            yield

    for module in (milp_runner, cpsat_runner, highs_runner):
        monkeypatch.setattr(module, "stop_on_interrupt", early)
    lm, hint = hard_model
    start = time.monotonic()
    with answer_on_interrupt():
        run = _backend_run(name, lm, hint)
        assert interrupted()
    assert time.monotonic() - start < 20.0  # LIMIT_S when the stop is forgotten
    assert run.status in ("feasible", "timeout")


def test_a_stop_is_asked_again_until_the_block_ends():
    calls: list[float] = []
    with answer_on_interrupt():
        with stop_on_interrupt(lambda: calls.append(time.monotonic()), repeat=True):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(3 * interrupt.STOP_REPEAT_S + 0.2)
        assert interrupted()
    assert len(calls) >= 3
    n = len(calls)
    time.sleep(2 * interrupt.STOP_REPEAT_S)
    assert len(calls) == n  # none after the block


def test_the_exact_layer_keeps_the_backends_schedule():
    chain = random_chain(30, 0)
    timer = _sigint_later()
    try:
        with answer_on_interrupt():
            res = solve("chain", chain, "milp", 97, slots=0, time_limit=LIMIT_S, cuts=False)
    finally:
        timer.cancel()
    assert res.details["interrupted"] and res.message.startswith("interrupted after")
    assert res.status == "feasible" and res.schedule is not None
    assert res.lower_bound is not None and res.lower_bound <= res.objective
    assert res.solve_time_s < STOPPED_WITHIN_S


def test_an_interrupt_outside_the_backend_answers_with_the_seed(monkeypatch):
    from memsched.solvers.chain import milp

    def interrupted_cuts(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(milp, "separate_tape_cuts", interrupted_cuts)
    chain = random_chain(12, 1)
    with answer_on_interrupt():
        res = solve("chain", chain, "milp", 60, slots=0, time_limit=30)
    assert res.details["interrupted"] and res.status == "feasible"
    assert res.seeded_by and res.details["solution_from"] == res.seeded_by  # the warm start's schedule
    with pytest.raises(KeyboardInterrupt):
        solve("chain", chain, "milp", 60, slots=0, time_limit=30)


def test_outside_the_main_thread_nothing_is_installed():
    seen = []

    def body():
        with stop_on_interrupt(lambda: None):
            seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before]
    assert not interrupt.answering()


def test_cli_prints_what_it_had_and_exits_130(tmp_path):
    path = tmp_path / "c30.json"
    random_chain(30, 0).save(path)
    cmd = [sys.executable, "-m", "memsched.experiments.cli", "solve", str(path), "--budget", "97", "--solver", "milp",
           "--slots", "0", "--time-limit", str(LIMIT_S), "--json", "--progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_as_in_a_terminal)
    assert proc.stderr is not None
    seen = b""
    while b"search (" not in seen:  # the backend is running: interrupt it
        chunk = proc.stderr.read1(4096)
        assert chunk, seen.decode(errors="replace")
        seen += chunk
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=STOPPED_WITHIN_S)
    assert proc.returncode == 130
    answer = json.loads(out)  # stdout is the one JSON object (SCIP prints nothing there)
    assert answer["status"] == "feasible" and answer["schedule"] and answer["interrupted"] is True
    assert "interrupted" in (seen + err).decode()
