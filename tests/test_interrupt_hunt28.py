"""Interrupts of the ``memsched`` commands (hunt 28): long work can be stopped at any moment without
losing a finished answer, without a traceback, and without a process outliving the command.

- SIGTERM (``kill``, ``timeout``) and SIGHUP act as a Ctrl-C (`cli.terminate_as_interrupt`): the
  solver processes are stopped and the answer printed (exit 130); a SIGKILL of the command kills
  them too (``PR_SET_PDEATHSIG``).
- A Ctrl-C after the solve (the smallest-budget search, the figure) prints the answer, exit 130.
- A Ctrl-C while the command starts (the parser, an import it breaks) is one line, exit 130.
- Without a schedule the note on ``-o`` is printed on an interrupt too.
- A portfolio child ignores SIGINT once its backend has returned; the parent passes Ctrl-C on once.
- The progress line is drawn on a terminal that reports 0 x 0.

Signals come from the process itself at a chosen step (a stand-in sends SIGINT to its own process
and waits for it), so that each test hits its window every time.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from conftest import live_pids, sigint_as_in_a_terminal

ROOT = Path(__file__).resolve().parent.parent
CHAINS = ROOT / "solvers" / "data" / "chains"
EXAMPLES = ROOT / "solvers" / "data" / "examples"

#: a stand-in's wait for the signal it sent itself (s): the handler runs long before
WAIT_S = 5


def _driver(patch: str) -> str:
    """Python code: `patch` (defines the stand-ins), then ``memsched ARGV`` in this process."""
    return textwrap.dedent(f"""
        import os, signal, sys, time
        def sigint_here():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep({WAIT_S})
        """) + textwrap.dedent(patch) + textwrap.dedent("""
        from memsched.experiments.cli import main
        sys.exit(main(sys.argv[1:]))
        """)


def _run(patch: str, *argv: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _driver(patch), *map(str, argv)], capture_output=True, text=True,
                          cwd=cwd, timeout=120, preexec_fn=sigint_as_in_a_terminal, check=False)


# ------------------------------------------------------------------------------ processes left
def _tagged(tag: str) -> list[int]:
    """Pids of the live processes whose environment holds ``TAG=tag`` (a run and its children)."""
    return live_pids("environ", f"MEMSCHED_TEST_TAG={tag}".encode())


def _left_after(tag: str, seconds: float = 4.0) -> list[int]:
    """The tagged processes still alive `seconds` after the command ended (then killed)."""
    end = time.monotonic() + seconds
    while _tagged(tag) and time.monotonic() < end:
        time.sleep(0.1)
    left = _tagged(tag)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


def _solve_with_backends(tmp_path: Path, option: str, tag: str) -> subprocess.Popen:
    """`memsched solve` with the MILP `option` on a chain no backend proves for minutes, started and
    waited on until its backend searches (the progress line says "search")."""
    from memsched.solvers.chain.generate import random_chain

    path = tmp_path / "c30.json"
    random_chain(30, 0).save(path)
    cmd = [sys.executable, "-m", "memsched.experiments.cli", "solve", str(path), "--budget", "97", "--solver", "milp",
           "--slots", "0", "--option", option, "--time-limit", "60", "--json", "--progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_as_in_a_terminal,
                            env=dict(os.environ, MEMSCHED_TEST_TAG=tag))
    assert proc.stderr is not None
    seen = b""
    while b"search (" not in seen:
        chunk = proc.stderr.read1(4096)
        assert chunk, seen.decode(errors="replace")
        seen += chunk
    time.sleep(0.5)  # the backends (the children, the CBC program) are running
    return proc


def _backends() -> list[str]:
    from memsched.solvers.exact.cbc_cmd import cbc_program

    return ["workers=2"] + (["backend=cbc"] if cbc_program() is not None else [])


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize("option", _backends())
def test_sigterm_stops_the_solver_processes_and_prints_the_answer(tmp_path, option):
    tag = uuid.uuid4().hex
    proc = _solve_with_backends(tmp_path, option, tag)
    try:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        left = _left_after(tag)
    assert proc.returncode == 130, err
    answer = json.loads(out)
    assert answer["interrupted"] is True and answer["schedule"]
    assert b"Traceback" not in err
    assert left == []  # no SCIP/HiGHS child, no CBC program running on to the limit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("option", _backends())
def test_sigkill_of_the_command_kills_its_solver_processes(tmp_path, option):
    tag = uuid.uuid4().hex
    proc = _solve_with_backends(tmp_path, option, tag)
    try:
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        left = _left_after(tag)
    assert left == []


def test_terminate_as_interrupt_raises_stops_backends_and_not_in_children():
    from memsched.experiments.cli import terminate_as_interrupt
    from memsched.solvers.exact.interrupt import answer_on_interrupt, interrupted, stop_on_interrupt

    before = signal.getsignal(signal.SIGTERM)
    stops: list[int] = []
    with terminate_as_interrupt() as noted:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(WAIT_S)
        assert noted()
        with answer_on_interrupt():  # a backend searching: SIGTERM stops it as Ctrl-C does
            with stop_on_interrupt(lambda: stops.append(1)):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.3)
            assert interrupted()
        pid = os.fork()
        if pid == 0:  # a forked child is stopped by SIGTERM, not by a Python exception
            os._exit(0 if signal.getsignal(signal.SIGTERM) is before else 1)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert stops and signal.getsignal(signal.SIGTERM) is before


# ------------------------------------------------------------------------------ after the solve
def test_ctrl_c_in_the_smallest_budget_search_keeps_the_answer():
    patch = """
        from memsched.experiments.commands import _infeasible
        real = _infeasible.registry
        class Interrupting:  # each run of the search is interrupted
            def __getattr__(self, name):
                return getattr(real, name)
            def solve(self, *args, **kwargs):
                sigint_here()
                return real.solve(*args, **kwargs)
        _infeasible.registry = Interrupting()
        """
    res = _run(patch, "solve", CHAINS / "resnet152-b32-224.v100.json", "--solver", "milp", "--budget", "12%",
               "--time-limit", "30", "--json")
    assert res.returncode == 130, res.stderr
    answer = json.loads(res.stdout)  # the finished (proven) answer is printed
    assert answer["status"] == "infeasible"
    assert "interrupted" in answer["min_budget_note"]
    assert "Traceback" not in res.stderr and "smallest feasible budget" in res.stderr


def test_ctrl_c_while_drawing_prints_the_answer_and_leaves_the_figure(tmp_path):
    (tmp_path / "s.json").write_text('{"old": 1}\n')
    (tmp_path / "f.svg").write_text("<svg>old</svg>\n")
    patch = """
        import memsched.experiments.plotting as plotting
        def drawing(*args, **kwargs):
            sigint_here()
        plotting.plot_to_file = drawing
        """
    res = _run(patch, "solve", EXAMPLES / "cnn12.json", "--solver", "rotor", "--budget", "60%", "--json",
               "-o", "s.json", "--plot", "f.svg", cwd=tmp_path)
    assert res.returncode == 130, res.stderr
    answer = json.loads(res.stdout)
    assert answer["schedule"] and json.loads((tmp_path / "s.json").read_text()) == answer["schedule"]
    assert (tmp_path / "f.svg").read_text() == "<svg>old</svg>\n"
    assert "f.svg (--plot) left unchanged" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(("module", "name", "argv"), [
    ("memsched.solvers.registry", "solve", ("cnn12.json", "--solver", "rotor", "--budget", "60%", "--json")),
    ("memsched.experiments.commands.solve", "load_problem", ("tiny.json", "--solver", "store-all", "--budget", "5")),
], ids=["during-the-solve", "while-the-instance-loads"])
def test_ctrl_c_before_a_schedule_notes_the_output_left_unchanged(tmp_path, module, name, argv):
    """A Ctrl-C before any answer leaves -o as it was and says so (also before the solve began, while
    the instance is read: no note was printed then)."""
    (tmp_path / "s.json").write_text('{"old": 1}\n')
    patch = f"""
        import {module} as target
        real = target.{name}
        def stand_in(*args, **kwargs):
            sigint_here()
            return real(*args, **kwargs)
        target.{name} = stand_in
        """
    res = _run(patch, "solve", EXAMPLES / argv[0], *argv[1:], "-o", "s.json", cwd=tmp_path)
    assert res.returncode == 130 and res.stdout == ""
    assert "memsched solve: note: s.json (--output) left unchanged: interrupted before a schedule" in res.stderr
    assert (tmp_path / "s.json").read_text() == '{"old": 1}\n'


# ------------------------------------------------------------------------------ at the start
def test_ctrl_c_while_the_parser_is_built_is_one_line():
    patch = """
        import memsched.experiments.cli as cli
        real = cli.build_parser
        def build_parser(*args, **kwargs):
            sigint_here()
            return real(*args, **kwargs)
        cli.build_parser = build_parser
        """
    res = _run(patch, "solve", EXAMPLES / "cnn12.json", "--budget", "60%")
    assert res.returncode == 130
    assert res.stderr.strip() == "memsched solve: interrupted"


def test_ctrl_c_that_an_import_wraps_is_an_interrupt():
    patch = """
        import memsched.experiments.commands.solve as solve
        def load_problem(*args, **kwargs):  # as numpy's import turns a Ctrl-C into an ImportError
            try:
                sigint_here()
            except KeyboardInterrupt as err:
                raise ImportError("Importing the numpy C-extensions failed.") from err
        solve.load_problem = load_problem
        """
    res = _run(patch, "solve", EXAMPLES / "cnn12.json", "--budget", "60%")
    assert res.returncode == 130, res.stderr
    assert res.stderr.strip() == "memsched solve: interrupted"


# ------------------------------------------------------------------------------ the portfolio
class _SigintOnSend:
    """A connection whose `send` is hit by a Ctrl-C first (as a second one passed on by the parent)."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def send(self, obj) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)
        self.conn.send(obj)

    def close(self) -> None:
        self.conn.close()


def _portfolio_child(send, *args) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (not a background job)
    from memsched.solvers.exact import portfolio

    portfolio._child(_SigintOnSend(send), *args)


def test_a_portfolio_child_sends_its_answer_through_a_ctrl_c(monkeypatch):
    from memsched.solvers.exact import portfolio
    from memsched.solvers.exact.milp_runner import BackendRun
    from memsched.solvers.exact.options import Deadline, ExactOptions

    answer = BackendRun("feasible", values=[1.0, 2.0], objective=3.0, backend_status="FEASIBLE")
    monkeypatch.setattr(portfolio, "run_milp", lambda *args, **kwargs: answer)
    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_portfolio_child, args=(send, None, "scip", Deadline(10.0), ExactOptions(), None,
                                                      False, 1e-4))
    proc.start()
    send.close()
    try:
        assert receive.poll(20)
        run = receive.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    assert run.values == [1.0, 2.0] and run.objective == 3.0
    assert proc.exitcode == 0  # no KeyboardInterrupt traceback in the child


def _count_sigints(ready) -> None:
    count = [0]
    signal.signal(signal.SIGINT, lambda signum, frame: count.__setitem__(0, count[0] + 1))
    ready.send("ready")
    time.sleep(1.5)
    ready.send(count[0])


def test_the_portfolio_passes_ctrl_c_on_once_per_child():
    from memsched.solvers.exact import portfolio

    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_count_sigints, args=(send,))
    proc.start()
    try:
        assert receive.recv() == "ready"
        interrupt = portfolio._interrupter({receive: ("scip", proc)})
        interrupt()
        time.sleep(0.2)
        interrupt()  # a second Ctrl-C: the child is answering already
        assert receive.recv() == 1
    finally:
        proc.join(5)


# ------------------------------------------------------------------------------ messages, the line
def test_offload_cpsat_says_interrupted_not_time_limit(monkeypatch):
    from memsched.solvers.exact import interrupt
    from memsched.solvers.exact.milp_runner import BackendRun
    from memsched.solvers.offload import cpsat
    from memsched.solvers.offload.generate import random_offload
    from memsched.solvers.registry import get_problem, solve

    def interrupted_run(*args, **kwargs):
        interrupt.note_interrupt()
        return BackendRun("timeout")

    monkeypatch.setattr(cpsat, "run_cpsat", interrupted_run)
    inst = random_offload(6, 0)
    reference_peak = get_problem("offload").reference_peak
    with interrupt.answer_on_interrupt():
        res = solve("offload", inst, "cpsat", int(reference_peak(inst)), warm_start=False, time_limit=20)
    assert res.details.get("interrupted")
    assert "time limit" not in res.message and "interrupt" in res.message


def test_the_progress_line_is_drawn_on_a_terminal_of_zero_columns():
    import pty

    main, child = pty.openpty()  # a fresh pty reports 0 x 0
    code = ("import time; from memsched.live import progress_line\n"
            "with progress_line(True, label='solving', limit=3):\n    time.sleep(1.2)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=child)
    os.close(child)
    drawn = b""
    try:
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the child closed the pty
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        proc.wait(30)
        os.close(main)
    assert b"solving: " in drawn


def test_a_signal_the_caller_ignores_stays_ignored():
    """Under ``nohup`` (SIGHUP ignored) a command is not stopped by SIGHUP (it was: exit 130)."""
    from memsched.experiments.cli import terminate_as_interrupt

    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with terminate_as_interrupt():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: no KeyboardInterrupt
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)
