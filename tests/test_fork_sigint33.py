"""A Ctrl-C that comes while a solver process is forked is not lost (`solvers.processes.signals_held_during_fork`).

Raised inside an at-fork hook (logging's ``_releaseLock`` in the parent, ``random``'s reseeding in
the child), a KeyboardInterrupt was printed as "Exception ignored in: ..." and dropped: the run went
on and exited 0. Each case runs in a fresh interpreter whose at-fork hook sends the SIGINT at the
fork, deterministically: in the parent (``before``, as a terminal's Ctrl-C reaches it during the
fork; the call must raise KeyboardInterrupt, and leave no child running) or in the child
(``after_in_child``; the child must handle it as its module says, with nothing on stderr).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import sigint_as_in_a_terminal

PRELUDE = textwrap.dedent("""
    import multiprocessing, os, signal, sys, threading, time
    from memsched.solvers.exact import cbc_cmd, layer, portfolio
    from memsched.solvers.exact.linear import LinearModel
    from memsched.solvers.exact.milp_runner import BackendRun
    from memsched.solvers.exact.options import Deadline, ExactOptions

    WHERE, THREADED = sys.argv[1], sys.argv[2] == "threaded"
    armed = [False]

    def send_sigint():  # the Ctrl-C, once, in the process this hook runs in
        if armed[0]:
            armed[0] = False
            os.kill(os.getpid(), signal.SIGINT)

    os.register_at_fork(**{"before" if WHERE == "parent" else "after_in_child": send_sigint})
    if THREADED:  # another thread, to which the kernel gives the signal while the main thread blocks it
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()

    def model():
        m = LinearModel()
        x = m.var(0, 10, True, "x")
        m.add([x], [1.0], ub=3.0)
        m.objective[x] = -1.0
        return m

    def fake_backend(*args, **kwargs):  # a backend's answer, at once (the child inherits the patch)
        return BackendRun("optimal", values=[3.0], objective=-3.0, bound=-3.0, wall=0.0, backend_status="solved")

    def call():
""")

CALLS = {
    "layer": 'return layer.solve_in_child("chain", None, "rotor", 1, {}, 10.0)',
    "portfolio": ('portfolio.run_milp = fake_backend\n'
                  '        return portfolio.run_isolated(model(), "scip", Deadline(20.0), ExactOptions())'),
    "race": ('portfolio.run_milp = fake_backend\n'
             '        return portfolio.run_portfolio(model(), Deadline(20.0), ExactOptions(workers=2))'),
    "cbc": 'return cbc_cmd.solve_mps(cbc_cmd.model_to_mps(model()), 1, 20.0, rel_gap=1e-9)',
}

EPILOGUE = textwrap.dedent("""
    armed[0] = True
    try:
        answer = call()
        print("answer", getattr(answer, "backend_status", getattr(answer, "status", answer)))
    except KeyboardInterrupt:
        print("interrupted")
    print("children left", len(multiprocessing.active_children()))
""")


def _run(site: str, where: str, threaded: bool = False) -> subprocess.CompletedProcess[str]:
    """The script for `site` with the SIGINT sent at the fork `where` (parent / child)."""
    script = PRELUDE + "        " + CALLS[site] + "\n" + EPILOGUE
    return subprocess.run([sys.executable, "-c", script, where, "threaded" if threaded else "single"],
                          capture_output=True, text=True, timeout=120, preexec_fn=sigint_as_in_a_terminal)


def _no_cbc() -> bool:
    from memsched.solvers.exact.cbc_cmd import cbc_program

    return cbc_program() is None


@pytest.mark.parametrize("threaded", [False, True], ids=["as-imported", "extra-thread"])
@pytest.mark.parametrize("site", ["layer", "portfolio", "race", "cbc"])
def test_a_ctrl_c_during_the_fork_interrupts_the_caller(site: str, threaded: bool) -> None:
    """The parent's SIGINT, come during ``os.fork()``, is raised as KeyboardInterrupt after it (it
    was dropped: the call answered as if nothing had come), and the child started is stopped."""
    if site == "cbc" and _no_cbc():
        pytest.skip("no CBC program")
    proc = _run(site, "parent", threaded)
    assert proc.returncode == 0, proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr
    assert "interrupted" in proc.stdout, proc.stdout + proc.stderr
    assert "children left 0" in proc.stdout, proc.stdout


def test_a_seed_child_ignores_a_ctrl_c_from_its_fork_on() -> None:
    """The exact layer's seed child ignores SIGINT (the parent answers the group's Ctrl-C); one
    that came during the fork was a KeyboardInterrupt printed by an at-fork hook of the child."""
    proc = _run("layer", "child")
    assert proc.returncode == 0, proc.stderr
    assert "Exception ignored" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert "answer None" in proc.stdout, proc.stdout  # (no such problem: the child answers None)


def test_a_portfolio_child_answers_a_ctrl_c_from_its_fork_on() -> None:
    """A portfolio child hears SIGINT only from its parent, which passes a Ctrl-C on: one that came
    during the fork is not lost in an at-fork hook (the backend ran on to its answer) but stops
    the child, which answers ``interrupted``."""
    proc = _run("portfolio", "child")
    assert proc.returncode == 0, proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "answer interrupted" in proc.stdout, proc.stdout


def test_the_hold_raises_what_came_at_its_end() -> None:
    """`signals_held_during_fork`: a SIGINT inside the block is raised once the block ends, and
    the handler and signal mask are those of before."""
    import signal

    from memsched.solvers.processes import signals_held_during_fork

    # Python's own handler, as in a terminal (a CI job started in the background has SIGINT ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        handler, mask = signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, [])
        reached_end = False
        with pytest.raises(KeyboardInterrupt):
            with signals_held_during_fork([signal.SIGINT]):
                signal.raise_signal(signal.SIGINT)
                reached_end = True
        assert reached_end
        assert signal.getsignal(signal.SIGINT) is handler
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask
    finally:
        signal.signal(signal.SIGINT, outer)
