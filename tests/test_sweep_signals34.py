"""`memsched sweep` and its signals, and the output folder of the modes that only read it (hunt 34).

1. A second SIGHUP while the sweep stops (after a first one) is ignored, as a second SIGINT or SIGTERM
   is: the finished rows are kept, the table written and ``interrupted: N/M rows kept`` said; a SIGHUP
   while a row is journaled is held until the row is on disk.
2. A signal the caller set to be ignored (a background job's SIGINT, ``nohup``'s SIGHUP) stays ignored
   while the sweep runs, as for ``memsched solve``: the sweep runs on to the end.
3. ``--list`` and ``--verify`` (without ``--update``) write nothing, so a read-only output folder is fine;
   ``--verify --update`` and a run still refuse it.

The subprocess tests reset SIGINT and SIGHUP to their defaults in the child (`as_in_a_terminal`), so that
they also hold when the test runner itself runs with them ignored (a CI job started in the background,
``nohup``).
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES, sigint_as_in_a_terminal, sweep_toml, wait_rows
from memsched.experiments.sweep import journal_path, read_journal, run_sweep
from memsched.experiments.sweep.pool import _starting
from memsched.experiments.sweep.run import _Stop

#: two quick cells, then CP-SAT cells that each run to their 1 s limit (an exact model on 30 stages)
SLOWISH = sweep_toml("sig", budgets=["50%", "70%"], instances=[{"file": EXAMPLES / "random30.json"}],
                     solvers=["store-all", "rotor", {"name": "cpsat", "time_limit": 1}])
CELLS = 6

#: a quick grid of the tiny chain, run in this process
TINY = sweep_toml("t", budgets=["60%", "100%"], defaults={"slots": 50}, instances=[{"example": "tiny"}],
                  solvers=["store-all", "rotor"])


def as_in_a_terminal() -> None:
    """`preexec_fn`: SIGINT (`sigint_as_in_a_terminal`) and SIGHUP at their defaults, as for a command
    in a terminal, whatever the test runner inherited."""
    sigint_as_in_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def sigint_ignored() -> None:
    """`preexec_fn`: SIGINT ignored, as a shell starts a background job (``cmd &``)."""
    as_in_a_terminal()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(tmp_path: Path, preexec: object) -> tuple[subprocess.Popen, Path]:
    """`memsched sweep` of `SLOWISH` with one worker, in its own session; the process and its journal."""
    cfg = tmp_path / "sig.toml"
    cfg.write_text(SLOWISH)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "memsched.experiments.cli", "sweep", str(cfg), "--output", str(out),
           "--no-progress", "--workers", "1"]
    # cwd: not the checkout, whose memsched/ folder `-m` would import before the package on PYTHONPATH
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=preexec)  # type: ignore[arg-type]
    return proc, journal_path(out, "sig")


class HupArrived(Exception):
    """Raised by SIGHUP under `hup_raises`."""


@pytest.fixture
def hup_raises() -> Iterator[None]:
    """SIGHUP raises `HupArrived` in this process, as `cli.terminate_as_interrupt` makes it raise
    `KeyboardInterrupt` (an `Exception` here: a SIGHUP that gets through fails the test, not the test
    run); the runner may have SIGHUP ignored, or at its default, which would end the test run."""
    def raise_interrupt(signum: int, frame: object) -> None:
        raise HupArrived

    old = signal.signal(signal.SIGHUP, raise_interrupt)
    yield
    signal.signal(signal.SIGHUP, old)


# ------------------------------------------------------------------ 1. a second SIGHUP while stopping
def test_a_sighup_while_the_sweep_stops_is_ignored(hup_raises):
    with _Stop() as stop:
        stop.quiet()  # the sweep is stopping: writing its table
        signal.raise_signal(signal.SIGHUP)
        time.sleep(0.01)  # a handler would have run by now
    assert signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN  # put back on leaving


def test_a_sighup_while_a_row_is_journaled_is_held_until_it_is_on_disk(hup_raises):
    reached = False
    with _Stop() as stop, pytest.raises(KeyboardInterrupt):
        with stop.journaling():
            signal.raise_signal(signal.SIGHUP)
            time.sleep(0.01)
            reached = True
    assert reached


def test_two_sighups_keep_the_rows_and_write_the_table(tmp_path):
    proc, jpath = start(tmp_path, as_in_a_terminal)
    wait_rows(jpath, 2, proc)  # CP-SAT is running
    os.kill(proc.pid, signal.SIGHUP)
    time.sleep(0.01)  # the sweep is stopping: killing its worker, writing its table
    try:
        os.kill(proc.pid, signal.SIGHUP)
    except ProcessLookupError:  # it had already ended
        pass
    _, err = proc.communicate(timeout=60)
    # killed by the second SIGHUP only where it came after the command had answered (the handlers put back)
    # one line, the command's own: how many rows were kept
    kept = re.fullmatch(rf"memsched sweep: interrupted: (\d+)/{CELLS} rows kept in .*; rerun to resume",
                        err.rstrip().splitlines()[-1])
    assert kept and err.count("interrupted") == 1, err
    assert proc.returncode in (130, -signal.SIGHUP), (proc.returncode, err)
    assert "Traceback" not in err, err
    table = jpath.with_suffix(".csv")
    assert table.is_file(), err
    rows = [ln for ln in table.read_text().splitlines()[1:] if ln.strip()]
    assert len(rows) == len(read_journal(jpath)) == int(kept.group(1)) >= 2


# ------------------------------------------------------------------ 2. an ignored signal stays ignored
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_the_sweep_leaves_an_ignored_signal_ignored(name):
    sig = getattr(signal, name)
    old = signal.signal(sig, signal.SIG_IGN)
    try:
        with _Stop():
            assert signal.getsignal(sig) is signal.SIG_IGN
            with _starting():
                assert signal.getsignal(sig) is signal.SIG_IGN
                signal.raise_signal(sig)  # ignored: neither held nor raised again on leaving
        assert signal.getsignal(sig) is signal.SIG_IGN
    finally:
        signal.signal(sig, old)


def test_a_background_sweep_runs_on_through_a_sigint(tmp_path):
    proc, jpath = start(tmp_path, sigint_ignored)
    wait_rows(jpath, 2, proc)
    os.kill(proc.pid, signal.SIGINT)  # what `kill -INT` of a `cmd &` job sends: ignored
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "interrupted" not in err, err
    assert len(read_journal(jpath)) == CELLS
    assert f"sig: {CELLS} runs" in out, out


# ------------------------------------------------------------------ 3. a read-only output folder
def _finished(tmp_path: Path) -> tuple[Path, Path]:
    """The sweep file of `TINY` and its output folder, every cell run."""
    cfg = tmp_path / "t.toml"
    cfg.write_text(TINY)
    out = tmp_path / "out"
    run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    return cfg, out


def _reads_but_never_writes(cli, cfg: Path, out: Path) -> None:
    """`--list` and `--verify` succeed on the read-only folder `out`; `--verify --update` and a run
    refuse it (exit 2, naming ``--output``)."""
    listed = cli("sweep", cfg, "--output", out, "--list")
    assert listed.code == 0, listed.err
    assert listed.out.count("done ") == 4 and "todo" not in listed.out
    verified = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert verified.code == 0, verified.err
    assert "4 same" in verified.out
    for extra in (["--verify", "--update"], []):
        res = cli("sweep", cfg, "--output", out, "--no-progress", *extra)
        assert res.code == 2 and "--output" in res.err and "not writable" in res.err, res.err
    missing = cli("sweep", cfg, "--output", out / "none", "--list")  # not made: all to do
    assert missing.code == 0, missing.err
    assert missing.out.count("todo ") == 4
    assert not (out / "none").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only folders")
def test_list_and_verify_read_a_read_only_output_folder(tmp_path, cli):
    cfg, out = _finished(tmp_path)
    folders = [out, *(p for p in out.rglob("*") if p.is_dir())]
    for p in folders:
        p.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        _reads_but_never_writes(cli, cfg, out)
    finally:
        for p in folders:
            p.chmod(stat.S_IRWXU)


def test_list_and_verify_read_an_output_folder_that_access_says_is_read_only(tmp_path, cli, monkeypatch):
    """As the test above, for any user: `os.access` answers as for a read-only folder."""
    cfg, out = _finished(tmp_path)
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and Path(path).resolve().is_relative_to(out.resolve()):
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    _reads_but_never_writes(cli, cfg, out)
