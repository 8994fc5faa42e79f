"""``memsched sweep --scheduler``: a scheduler that accepts the TCP connection but never answers
(a stopped ``dask scheduler``, any silent listener) is bad input after `CONNECT_TIMEOUT_S`
seconds (one line naming ``--scheduler``, exit 2), not a sweep hung forever; what a Ctrl-C does
to the cells running on a Dask cluster, and that a resume keeps ``error`` rows, as the docs say."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, ROOT, sweep_toml
from memsched.experiments.sweep import journal_path, run_sweep
from memsched.experiments.sweep import run as sweep_run
from memsched.solvers.errors import InputError

#: seconds a test waits for a connection attempt that should end after `CONNECT_TIMEOUT_S` = 1 s
GIVE_UP_S = 20


@pytest.fixture
def silent_scheduler() -> Iterator[str]:
    """The address of a TCP listener that accepts every connection and never sends a byte (as a
    stopped Dask scheduler does); its connections are closed when the test ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener closed
                return
            accepted.append(conn)

    threading.Thread(target=accept, name="silent-scheduler", daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for conn in accepted:  # EOF to a client still waiting (the old code): it stops
            conn.close()


def write_sweep(tmp_path: Path) -> Path:
    path = tmp_path / "d30.toml"
    path.write_text(sweep_toml("d30", budgets=["90%"], instances=[{"file": EXAMPLES / "tiny.json"}],
                               solvers=["store-all"]))
    return path


def in_thread(call: Any) -> BaseException | None:
    """Run `call()` in a daemon thread for at most `GIVE_UP_S` seconds; the exception it raised
    (None if none). A call still running then fails the test (the thread is left behind)."""
    raised: list[BaseException | None] = []

    def body() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as err:  # noqa: BLE001  (handed to the test)
            raised.append(err)

    worker = threading.Thread(target=body, name="connect-attempt", daemon=True)
    worker.start()
    worker.join(GIVE_UP_S)
    assert not worker.is_alive(), f"still connecting after {GIVE_UP_S} s to a scheduler that never answers"
    return raised[0]


# ------------------------------------------------------------------ 1. a scheduler that never answers
def test_scheduler_client_gives_up_on_a_silent_scheduler(silent_scheduler, monkeypatch):
    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(sweep_run, "CONNECT_TIMEOUT_S", 1)
    before = {t.ident for t in threading.enumerate()}

    def connect() -> None:
        with sweep_run.scheduler_client(silent_scheduler):
            raise AssertionError("connected to a scheduler that never answers")

    err = in_thread(connect)
    assert isinstance(err, InputError), repr(err)
    assert err.field == "--scheduler" and err.path == silent_scheduler
    assert "cannot reach the Dask scheduler: no answer after 1 s" in str(err) and "\n" not in str(err)
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.name != "silent-scheduler"]
    assert left == []  # the half-made client's event loop thread is stopped


def test_run_sweep_with_a_silent_scheduler_keeps_the_journal(silent_scheduler, tmp_path, monkeypatch):
    pytest.importorskip("dask.distributed")
    cfg = write_sweep(tmp_path)
    out = tmp_path / "out"
    assert run_sweep(cfg, output=out, workers=1, isolate=False, progress=False).ran == 1
    journal = journal_path(out, "d30").read_bytes()
    monkeypatch.setattr(sweep_run, "CONNECT_TIMEOUT_S", 1)

    err = in_thread(lambda: run_sweep(cfg, output=out, scheduler=silent_scheduler, fresh=True, progress=False))
    assert isinstance(err, InputError) and err.field == "--scheduler", repr(err)
    assert journal_path(out, "d30").read_bytes() == journal  # --fresh discarded nothing


def test_cli_sweep_with_a_silent_scheduler_exits_2_in_one_line(silent_scheduler, tmp_path):
    pytest.importorskip("dask.distributed")
    cfg = write_sweep(tmp_path)
    out = tmp_path / "never"
    launcher = ("import sys; from memsched.experiments.sweep import run; run.CONNECT_TIMEOUT_S = 1; "
                "from memsched.experiments.cli import main; sys.exit(main(sys.argv[1:]))")
    argv = [sys.executable, "-c", launcher, "sweep", str(cfg), "--output", str(out), "--scheduler",
            silent_scheduler, "--no-progress"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=GIVE_UP_S, cwd=tmp_path)
    except subprocess.TimeoutExpired:  # (subprocess.run has killed it)
        pytest.fail(f"memsched sweep still waiting after {GIVE_UP_S} s for a scheduler that never answers")
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--scheduler" in lines[0] and "no answer after 1 s" in lines[0], res.stderr
    assert not out.exists()


# ------------------------------------------------------------------ 2. what the docs say
def sweep_section() -> str:
    """The ``memsched sweep`` section of docs/cli.md, its whitespace runs made single spaces."""
    text = (ROOT / "docs" / "cli.md").read_text()
    start = text.index("## `memsched sweep`")
    end = text.index("\n## ", start + 1)
    return re.sub(r"\s+", " ", text[start:end])


def test_docs_say_a_dask_stop_leaves_running_cells_to_finish_on_the_workers():
    section = sweep_section()
    assert "Dask cannot stop a task that has started: a cell already running finishes in the background " \
           "on its worker, up to its time limit" in section
    doc = re.sub(r"\s+", " ", run_sweep.__doc__ or "")
    assert "on a Dask cluster it cancels them: a cell already running finishes in the background on its worker" \
           in doc


def test_docs_say_a_resume_keeps_error_rows():
    section = sweep_section()
    assert "an `error` row (a worker killed, a Dask task that failed, a schedule that failed to execute) is kept " \
           "as it is, not run again; `--verify --update` replaces it by its recomputed row, or `--fresh` runs " \
           "every cell" in section
