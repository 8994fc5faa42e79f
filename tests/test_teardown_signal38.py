"""A Ctrl-C, SIGTERM or SIGHUP after a command returned (while the interpreter tears down: torch's
finalizers take about a second) ends the process with the command's own status: no traceback, no bare
kill after the result was printed (was a ``KeyboardInterrupt`` traceback in an atexit hook, or -2/-15)."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import sigint_as_in_a_terminal

DRIVER = """
    import os, signal, sys, time
    sys.argv = ["memsched", *sys.argv[1:]]
    from memsched.__main__ import main
    status = main()
    os.kill(os.getpid(), getattr(signal, {name!r}))
    time.sleep(2)
    print("teardown went on", file=sys.stderr)
    sys.exit(status)
    """


def _as_in_a_terminal() -> None:
    """SIGINT and SIGHUP at their default dispositions, as in a terminal (a CI job under ``nohup`` and in
    the background inherits both ignored, and an ignored signal stays ignored by design)."""
    sigint_as_in_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _run(name: str, *argv: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(DRIVER.format(name=name))
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          check=False, preexec_fn=_as_in_a_terminal)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_after_the_command_keeps_its_status_and_output(name: str) -> None:
    res = _run(name, "solvers")
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert res.stdout.strip() and "Traceback" not in res.stderr and "teardown went on" not in res.stderr, res.stderr


def test_the_status_kept_is_the_commands() -> None:
    res = _run("SIGINT", "solve", "/nonexistent/x.json", "--budget", "1")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1 and "no such file" in res.stderr, res.stderr


def test_an_ignored_signal_stays_ignored() -> None:
    code = textwrap.dedent("""
        import signal, sys
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        sys.argv = ["memsched", "solvers"]
        from memsched.__main__ import main
        main()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr

