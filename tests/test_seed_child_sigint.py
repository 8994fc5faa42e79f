"""A forked seed solver (`exact.layer.solve_in_child`) ignores SIGINT: a terminal's Ctrl-C reaches the
whole process group, and a KeyboardInterrupt in the child was a multiprocessing traceback on stderr."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, signal, time
    from memsched.solvers import registry
    from memsched.solvers.exact import layer

    def interrupted_solve(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the group's Ctrl-C, as the child receives it
        time.sleep(0.2)
        return None

    registry.solve = interrupted_solve
    print("answer", layer.solve_in_child("chain", None, "rotor", 1, {}, 10.0))
""")


def test_a_ctrl_c_in_a_seed_child_is_no_traceback() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert "answer None" in proc.stdout
