"""`memsched sweep`: a signal while the table is written, and a table that cannot be resumed (hunt 46).

1. A Ctrl-C (SIGINT) or SIGTERM that comes once the last row is journaled, while the workers are
   stopped and the table is written, stopped nothing: the handlers were ``SIG_IGN`` from there on
   and the command exited 0. It is a stop now, as one while the cells run: the table is written
   whole, one line says what was kept, exit 130 (`SweepInterrupted` from `run_sweep`); a second
   signal then is ignored; a rerun resumes every row and writes the table.
2. A table ``<name>.csv`` with no journal beside it that cannot be read as the sweep's table is bad
   input (exit 2) found once the instances are stored: it left ``instances/*.json`` and
   ``.sweep.lock`` behind. Like any bad input found once the folder is made, it leaves nothing now.

The signals are raised from inside the table writer (`run.write_table` patched), so each test is
deterministic: no timed race with the sweep.
"""

from __future__ import annotations

import csv
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import sigint_as_in_a_terminal, sweep_toml
from memsched.experiments.sweep import journal_path, read_journal, run_sweep
from memsched.experiments.sweep import run as sweep_run
from memsched.experiments.sweep.run import SweepInterrupted

#: four quick cells of the tiny chain
TINY = sweep_toml("t", budgets=["60%", "100%"], defaults={"slots": 50}, instances=[{"example": "tiny"}],
                  solvers=["store-all", "rotor"])
CELLS = 4

#: `memsched sweep ARGV[2:]` with the table writer raising SIGINT ARGV[1] times before it writes
SIGNALLING_WRITER = """
import signal, sys
import memsched.experiments.sweep.run as run
real = run.write_table
def write_table(*args, **kwargs):
    for _ in range(int(sys.argv[1])):
        signal.raise_signal(signal.SIGINT)  # its handler runs before the next line
    return real(*args, **kwargs)
run.write_table = write_table
from memsched.experiments.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "t.toml"
    cfg.write_text(TINY)
    return cfg


def _table_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "t.csv", newline="") as f:
        return list(csv.DictReader(f))


def _sweep_signalled(tmp_path: Path, signals: int) -> subprocess.CompletedProcess[str]:
    """`memsched sweep` of `TINY` into ``tmp_path/out`` (in its own process, SIGINT at its default as
    in a terminal), `signals` SIGINTs raised by the table writer."""
    cmd = [sys.executable, "-c", SIGNALLING_WRITER, str(signals), "sweep", str(_config(tmp_path)),
           "--output", str(tmp_path / "out"), "--no-progress", "--workers", "1"]
    # cwd: not the checkout, whose memsched/ folder would be imported before the package on PYTHONPATH
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          preexec_fn=sigint_as_in_a_terminal)


# ------------------------------------------------------------------ 1. a signal while the table is written
@pytest.mark.parametrize("signals", [1, 2])
def test_a_ctrl_c_while_the_table_is_written_stops_the_sweep(tmp_path, signals):
    res = _sweep_signalled(tmp_path, signals)
    out = tmp_path / "out"
    assert res.returncode == 130, (res.returncode, res.stdout, res.stderr)
    # one line, the stop's (a second signal is ignored as during any stop), no summary
    assert re.fullmatch(rf"memsched sweep: interrupted: {CELLS}/{CELLS} rows kept in .*t\.jsonl; rerun to resume",
                        res.stderr.strip()), res.stderr
    assert res.stdout == ""
    # the journal keeps every row, the table is written whole from it (no temporary file left)
    journal = read_journal(journal_path(out, "t"))
    assert len(journal) == CELLS
    assert sorted(r["key"] for r in _table_rows(out)) == sorted(journal)
    assert sorted(p.name for p in out.iterdir()) == sorted(["t.jsonl", "t.csv", ".sweep.lock", "instances",
                                                            *(["t.parquet"] if (out / "t.parquet").exists() else [])])


def test_a_rerun_after_that_stop_resumes_every_row_and_writes_the_table(tmp_path, cli):
    assert _sweep_signalled(tmp_path, 1).returncode == 130
    out = tmp_path / "out"
    (out / "t.csv").unlink()
    res = cli("sweep", tmp_path / "t.toml", "--output", out, "--no-progress")
    assert res.code == 0, res.err
    assert f"t: {CELLS} runs ({CELLS} resumed from the journal, 0 run now" in res.out, res.out
    assert sorted(r["key"] for r in _table_rows(out)) == sorted(read_journal(journal_path(out, "t")))


@pytest.fixture
def sigterm_in_table_write(monkeypatch) -> list[int]:
    """`run.write_table` raises SIGTERM in this process before it writes; the list counts its calls.
    SIGTERM, not SIGINT: the test runner may have SIGINT ignored (a background job), never SIGTERM."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        pytest.skip("SIGTERM is ignored in this test run: the sweep leaves it so")
    calls: list[int] = []
    real = sweep_run.write_table

    def write_table(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        signal.raise_signal(signal.SIGTERM)  # `_Stop`'s handler: noted, not raised
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_run, "write_table", write_table)
    return calls


def test_run_sweep_stops_on_a_sigterm_while_it_writes_the_table(tmp_path, sigterm_in_table_write):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SweepInterrupted, match=rf"interrupted: {CELLS}/{CELLS} rows kept"):
        run_sweep(_config(tmp_path), output=tmp_path / "out", workers=1, progress=False, isolate=False,
                  say=lambda line: None)
    assert sigterm_in_table_write == [1]
    assert signal.getsignal(signal.SIGTERM) is before  # the sweep's handler is gone
    assert len(_table_rows(tmp_path / "out")) == CELLS


def test_a_failure_on_its_way_up_is_reported_as_it_is(tmp_path, sigterm_in_table_write):
    """A signal while the table is written after a failure (here: `on_row` raising) does not turn
    that failure into a stop."""
    def fail(row: dict[str, Any]) -> None:
        raise RuntimeError("on_row failed")

    with pytest.raises(RuntimeError, match="on_row failed"):
        run_sweep(_config(tmp_path), output=tmp_path / "out", workers=1, progress=False, isolate=False,
                  on_row=fail, say=lambda line: None)
    assert sigterm_in_table_write == [1]
    assert len(_table_rows(tmp_path / "out")) == 1


# ------------------------------------------------------------------ 2. a table that cannot be resumed
def test_a_table_that_cannot_be_resumed_leaves_nothing_behind(tmp_path, cli):
    out = tmp_path / "junk"
    out.mkdir()
    (out / "t.csv").write_text("a,b\n1,2\n")
    res = cli("sweep", _config(tmp_path), "--output", out, "--no-progress")
    assert res.code == 2, res.err
    assert "cannot read the sweep's table to resume its rows" in res.err and len(res.err.strip().splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["t.csv"]  # no instances/, no .sweep.lock, no journal
    assert (out / "t.csv").read_text() == "a,b\n1,2\n"


def test_a_table_that_cannot_be_resumed_keeps_what_was_there(tmp_path, cli):
    """Instances stored and the lock file made by an earlier run are kept; `--fresh` then runs every cell."""
    cfg = _config(tmp_path)
    out = tmp_path / "out"
    assert cli("sweep", cfg, "--output", out, "--no-progress").code == 0
    stored = sorted(p.name for p in (out / "instances").iterdir())
    journal_path(out, "t").unlink()
    (out / "t.csv").write_text("a,b\n1,2\n")
    res = cli("sweep", cfg, "--output", out, "--no-progress")
    assert res.code == 2, res.err
    assert sorted(p.name for p in (out / "instances").iterdir()) == stored
    assert (out / ".sweep.lock").exists() and not journal_path(out, "t").exists()
    again = cli("sweep", cfg, "--output", out, "--no-progress", "--fresh")
    assert again.code == 0, again.err
    assert len(_table_rows(out)) == CELLS
