"""A solver child forked under the command line keeps the default SIGTERM its at-fork hook gives it.

The command line makes SIGTERM and SIGHUP interrupts (`experiments.cli.terminate_as_interrupt`) and
puts the default handlers back in a forked child (`_reset_in_child`): the parent stops a solver
child with SIGTERM. `solvers.processes.release_held_signals` restored the parent's handlers over
that reset, so a portfolio child stopped while sending its answer raised KeyboardInterrupt and
printed a traceback (4 of 8 runs of `memsched solve unet-b32-416x608.v100.json --solver milp
--budget 80%`, where one backend proves infeasibility and the other is stopped).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import multiprocessing, os, signal
    from memsched.experiments.cli import terminate_as_interrupt
    from memsched.solvers.exact.interrupt import interrupt_signals
    from memsched.solvers.processes import release_held_signals, signals_held_during_fork

    def child(conn):
        release_held_signals({signal.SIGINT: signal.SIG_IGN})
        conn.send([signal.getsignal(s) == signal.SIG_DFL for s in (signal.SIGTERM, signal.SIGHUP)])

    with terminate_as_interrupt():
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=child, args=(send,))
        with signals_held_during_fork(interrupt_signals()):
            proc.start()
        print("defaults in the child:", recv.recv())
        proc.join()
        print("parent SIGTERM raises:", signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None))
""")


def _as_in_a_terminal() -> None:
    """SIGINT and SIGHUP at their defaults, as for a command in a terminal (a CI job started in the
    background, or under nohup, inherits them ignored, and the command line leaves an ignored one so)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_a_child_forked_under_the_command_line_keeps_the_default_sigterm() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60,
                         preexec_fn=_as_in_a_terminal)
    assert out.returncode == 0, out.stderr
    assert "defaults in the child: [True, True]" in out.stdout, out.stdout + out.stderr
    assert "parent SIGTERM raises: True" in out.stdout, out.stdout  # the parent's own handler is back

