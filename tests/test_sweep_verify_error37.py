"""A sweep's ``error`` rows (a worker that died) and its stop (hunt 37).

1. ``--verify`` judges a stored ``error`` row that the code now answers as ``differs`` (exit 1), also
   when the recomputed run stopped at its time limit: an error is no answer, never ``time-limited``;
   ``--verify --update`` replaces every stored ``error`` row.
2. A Ctrl-C stops ``memsched sweep`` with one line on stderr, ``memsched sweep: interrupted: N/M rows
   kept in JOURNAL; rerun to resume``, and exit 130.
3. The summary of a resumed run counts the ``error`` rows of the table it wrote, the resumed ones too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
from conftest import EXAMPLES, run_cli, sigint_as_in_a_terminal, sweep_toml, wait_rows
from memsched.experiments.sweep import journal_path, read_journal
from memsched.experiments.sweep.verify import Check, judge, update_stale

#: the shape of the row of a cell whose worker died (`cell.failed_row`): no answer, no solve time
DIED = {"status": "error", "message": "the worker process died (exit code -9)", "objective": None,
        "solve_time_s": None, "peak_memory": None, "lower_bound": None, "gap": None, "min_budget": None}

#: the tiny chain, a quick solver: a grid that runs in a second
QUICK = sweep_toml("q", budgets=["60%", "100%"], defaults={"slots": 50}, instances=[{"example": "tiny"}],
                   solvers=["store-all", "rotor"])

#: CP-SAT on 20 stages that cannot prove its answer within its 0.5 s limit (the hunt's cell at 2 s)
LIMITED = sweep_toml("lim", budgets=["40%"], defaults={"slots": 200, "time_limit": 0.5},
                     instances=[{"example": "homogeneous20"}], solvers=["cpsat"])

#: two quick cells, then a CP-SAT cell that runs for minutes (an exact model on 30 stages)
SLOW = sweep_toml("slow", budgets=["50%"], instances=[{"file": EXAMPLES / "random30.json"}],
                  solvers=["store-all", "rotor", {"name": "cpsat", "time_limit": 120}])


def _break_row(out: Path, name: str, index: int = 0) -> str:
    """Make row `index` of the sweep `name`'s table (and journal, when there is one) the row of a
    cell whose worker died; returns its key."""
    table = out / f"{name}.csv"
    frame = pd.read_csv(table, dtype={"key": str})
    for col, value in DIED.items():
        if col in frame.columns:
            frame[col] = frame[col].astype(object)
            frame.loc[index, col] = value
    frame.to_csv(table, index=False)
    key = str(frame.loc[index, "key"])
    jpath = journal_path(out, name)
    if jpath.exists():
        rows = read_journal(jpath)
        rows[key] = {**rows[key], **DIED}
        jpath.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
    return key


def _statuses(out: Path, name: str) -> dict[str, str]:
    frame = pd.read_csv(out / f"{name}.csv", dtype={"key": str})
    return dict(zip(frame["key"], frame["status"], strict=True))


# ------------------------------------------------------------------ 1. --verify of an error row
def test_a_stored_error_answered_at_the_time_limit_differs():
    stored = {"status": "error", "objective": None, "time_limit": 2.0, "solve_time_s": None}
    for new in ({"status": "feasible", "objective": 75.0, "time_limit": 2.0, "solve_time_s": 2.01},
                {"status": "timeout", "objective": None, "time_limit": 2.0, "solve_time_s": 2.0},
                {"status": "optimal", "objective": 75.0, "time_limit": 2.0, "solve_time_s": 0.1}):
        assert judge(stored, new) == "differs", new
    assert judge(stored, {"status": "error", "objective": None}) == "same"  # no answer either way
    # a time limit still excuses two answers
    assert judge({"status": "feasible", "objective": 80.0, "time_limit": 2.0, "solve_time_s": 2.0},
                 {"status": "feasible", "objective": 75.0, "time_limit": 2.0, "solve_time_s": 2.0}) == "time-limited"


def test_verify_says_differs_for_an_error_row_of_a_time_limited_cell_and_update_replaces_it(tmp_path):
    cfg = tmp_path / "lim.toml"
    cfg.write_text(LIMITED)
    out = tmp_path / "out"
    res = run_cli("sweep", cfg, "--output", out, "--workers", "1", "--no-progress")
    assert res.code == 0, res.err
    journal_path(out, "lim").unlink()  # a committed table, as a fresh clone has it
    key = _break_row(out, "lim")

    res = run_cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert res.code == 1, res.out + res.err
    lines = [ln for ln in res.out.splitlines() if "homogeneous20" in ln]
    assert len(lines) == 1 and lines[0].startswith("differs ") and "stored error" in lines[0], res.out
    assert "1 differs" in res.out and "0 time-limited" in res.out, res.out

    res = run_cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress")
    assert res.code == 0 and "replaced 1 rows" in res.out, res.out + res.err
    assert _statuses(out, "lim")[key] in ("feasible", "timeout", "optimal"), res.out


def test_update_replaces_an_error_row_that_errs_again(tmp_path):
    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    out = tmp_path / "out"
    assert run_cli("sweep", cfg, "--output", out, "--workers", "1", "--no-progress").code == 0
    key = _break_row(out, "q")
    stored = read_journal(journal_path(out, "q"))[key]
    new = {**stored, "message": "the solver raised now"}
    check = Check(instance="tiny", budget_spec=str(stored["budget_spec"]), solver_label=str(stored["solver_label"]),
                  verdict=judge(stored, new), stored_status="error", new_status="error", key=key, new_row=new,
                  scope_changed=False)
    assert check.verdict == "same"
    assert update_stale(cfg, [check], output=out) == 1
    assert read_journal(journal_path(out, "q"))[key]["message"] == "the solver raised now"
    assert pd.read_csv(out / "q.csv", dtype={"key": str}).set_index("key").loc[key, "message"] == \
        "the solver raised now"


# ------------------------------------------------------------------ 2. one line on a stop
def test_ctrl_c_says_one_line_with_the_rows_kept(tmp_path):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "memsched.experiments.cli", "sweep", str(cfg), "--output", str(out),
           "--no-progress", "--workers", "1"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_as_in_a_terminal)
    try:
        wait_rows(journal_path(out, "slow"), 2, proc)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [f"memsched sweep: interrupted: 2/3 rows kept in {journal_path(out, 'slow')}; rerun to resume"], err


# ------------------------------------------------------------------ 3. the summary of a resumed run
def test_the_summary_of_a_resume_counts_the_error_rows_of_the_table(tmp_path):
    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    out = tmp_path / "out"
    res = run_cli("sweep", cfg, "--output", out, "--workers", "1", "--no-progress")
    assert res.code == 0 and "4 runs (0 resumed from the journal, 4 run now, 0 errors in the table)" in res.out, \
        res.out + res.err
    key = _break_row(out, "q")
    res = run_cli("sweep", cfg, "--output", out, "--workers", "1", "--no-progress")
    assert res.code == 0, res.err
    assert "4 runs (4 resumed from the journal, 0 run now, 1 error in the table)" in res.out, res.out
    assert _statuses(out, "q")[key] == "error"  # a resume keeps it (--verify --update replaces it)

