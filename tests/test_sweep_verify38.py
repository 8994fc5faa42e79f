"""``--verify`` judges ``min_budget`` too, and ``memsched.sweep`` says its stop once (hunt 38).

1. ``memsched sweep NAME --verify`` compares a row's ``min_budget`` (the smallest budget its solver
   needs, in the instance's memory unit) with the recomputed one where both rows have one: a stale
   one is ``differs``, its check names the column, and ``--update`` replaces it.
2. ``memsched.sweep`` of a sweep file stopped by a Ctrl-C raises `SweepInterrupted` carrying the
   stop's line, ``interrupted: N/M rows kept in JOURNAL; rerun to resume``, and prints nothing
   besides (a notebook showed the line twice); the command line's one line is pinned in
   ``test_sweep_verify_error37.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
from conftest import EXAMPLES, run_cli, sigint_as_in_a_terminal, sweep_toml, wait_rows
from memsched.experiments.sweep import journal_path, read_journal
from memsched.experiments.sweep.verify import judge, verify_sweep

#: the tiny chain at a budget every solver misses (infeasible: min_budget given) and at its
#: reference peak (feasible: min_budget given too), by solvers that answer in milliseconds
QUICK = sweep_toml("mb", budgets=["30%", "100%"], defaults={"slots": 50}, instances=[{"example": "tiny"}],
                   solvers=["periodic", "store-all", "rotor"])

#: two quick cells, then a CP-SAT cell that runs for minutes (an exact model on 30 stages)
SLOW = sweep_toml("slow", budgets=["50%"], instances=[{"file": EXAMPLES / "random30.json"}],
                  solvers=["store-all", "rotor", {"name": "cpsat", "time_limit": 120}])


def _swept(tmp_path: Path) -> tuple[Path, Path]:
    """The QUICK sweep file and its output folder, run."""
    cfg = tmp_path / "mb.toml"
    cfg.write_text(QUICK)
    out = tmp_path / "out"
    res = run_cli("sweep", cfg, "--output", out, "--workers", "1", "--no-progress")
    assert res.code == 0, res.err
    return cfg, out


def _key(out: Path, solver: str, budget: str) -> str:
    """The key of the row of `solver` at `budget` in the sweep's journal."""
    rows = read_journal(journal_path(out, "mb"))
    (key,) = [k for k, r in rows.items() if r["solver_label"] == solver and r["budget_spec"] == budget]
    return key


def _stale_min_budget(out: Path, key: str, value: int) -> int:
    """Set the ``min_budget`` of row `key` to `value` in the journal and the table; returns the old one."""
    jpath = journal_path(out, "mb")
    rows = read_journal(jpath)
    old = int(rows[key]["min_budget"])
    rows[key] = {**rows[key], "min_budget": value}
    jpath.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
    table = out / "mb.csv"
    frame = pd.read_csv(table, dtype={"key": str})
    frame.loc[frame["key"] == key, "min_budget"] = value
    frame.to_csv(table, index=False)
    return old


def _table_min_budget(out: Path, key: str) -> int:
    frame = pd.read_csv(out / "mb.csv", dtype={"key": str}).set_index("key")
    return int(frame.loc[key, "min_budget"])


# ------------------------------------------------------------------ 1. min_budget judged
def test_judge_compares_min_budget_where_both_rows_have_one():
    row = {"status": "infeasible", "objective": None, "min_budget": 21}
    assert judge(row, {**row, "min_budget": 22}) == "differs"
    assert judge(row, {**row, "min_budget": 21.0}) == "same"  # a CSV column with empty cells reads 21 as 21.0
    assert judge(row, {**row, "min_budget": None}) == "differs"  # HEAD withdrew it: the stored claim is stale
    assert judge({**row, "min_budget": None}, row) == "same"  # an older row without one
    assert judge({**row, "min_budget": float("nan")}, row) == "same"  # an empty cell as pandas reads it
    # a feasible row is judged on it too
    feasible = {"status": "feasible", "objective": 14.0, "min_budget": 21}
    assert judge(feasible, {**feasible, "min_budget": 20}) == "differs"
    # a fractional one (a solver's in a unit it divides) within the objective's tolerance
    frac = {**feasible, "min_budget": 20.5}
    assert judge(frac, {**frac, "min_budget": 20.5 * (1 + 1e-12)}) == "same"
    assert judge(frac, {**frac, "min_budget": 20.6}) == "differs"
    # a run stopped at its time limit still excuses it, as it excuses an objective
    limited = {**feasible, "time_limit": 2.0, "solve_time_s": 2.0}
    assert judge(limited, {**limited, "min_budget": 20}) == "time-limited"


def test_verify_says_differs_for_a_stale_min_budget_and_update_replaces_it(tmp_path):
    cfg, out = _swept(tmp_path)
    infeasible, feasible = _key(out, "periodic", "30%"), _key(out, "store-all", "100%")
    old = _stale_min_budget(out, infeasible, 999)
    old_feasible = _stale_min_budget(out, feasible, 998)

    checks = {c.key: c for c in verify_sweep(cfg, output=out, progress=False)}
    assert checks[infeasible].verdict == "differs", checks[infeasible]
    assert checks[feasible].verdict == "differs", checks[feasible]
    assert [c.verdict for k, c in checks.items() if k not in (infeasible, feasible)] == ["same"] * 4
    # the check names the column: its status and objective alone read alike
    check = checks[infeasible]
    assert check.columns == ("min_budget",)
    assert (check.stored_min_budget, check.new_min_budget) == (999, old)
    assert check.line().startswith("differs ") and f"min_budget stored 999 now {old}" in check.line()
    assert checks[feasible].columns == ("min_budget",)

    res = run_cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert res.code == 1, res.out + res.err
    assert "2 differs" in res.out and res.out.count("  min_budget stored 99") == 2, res.out

    res = run_cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress")
    assert res.code == 0 and "replaced 2 rows" in res.out, res.out + res.err
    assert _table_min_budget(out, infeasible) == old and _table_min_budget(out, feasible) == old_feasible
    assert int(read_journal(journal_path(out, "mb"))[infeasible]["min_budget"]) == old
    res = run_cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert res.code == 0 and "6 same" in res.out, res.out + res.err


def test_verify_of_a_committed_table_without_a_journal_sees_a_stale_min_budget(tmp_path):
    cfg, out = _swept(tmp_path)
    key = _key(out, "rotor", "30%")
    _stale_min_budget(out, key, 5)
    journal_path(out, "mb").unlink()  # a fresh clone: the table is the record
    checks = {c.key: c for c in verify_sweep(cfg, output=out, progress=False)}
    assert checks[key].verdict == "differs" and checks[key].columns == ("min_budget",), checks[key]
    res = run_cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress")
    assert res.code == 0 and "replaced 1 rows" in res.out, res.out + res.err
    assert _table_min_budget(out, key) == checks[key].new_min_budget != 5


# ------------------------------------------------------------------ 2. the API's stop said once
#: a notebook's sweep of a file: the exception's message is what it shows
SCRIPT = textwrap.dedent("""
    import sys
    import memsched
    from memsched.experiments.sweep.run import SweepInterrupted
    try:
        memsched.sweep(sys.argv[1], output=sys.argv[2])
    except SweepInterrupted as stop:
        print(f"raised: {stop}")
        sys.exit(7)
    sys.exit(0)
""")


def test_the_api_raises_the_stop_line_without_printing_it(tmp_path):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(cfg), str(out)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_as_in_a_terminal)
    try:
        wait_rows(journal_path(out, "slow"), 2, proc)
        os.killpg(proc.pid, signal.SIGINT)  # a notebook's interrupt (and a terminal's Ctrl-C)
        stdout, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    line = f"interrupted: 2/3 rows kept in {journal_path(out, 'slow')}; rerun to resume"
    assert proc.returncode == 7, (stdout, err)
    assert stdout.strip() == f"raised: {line}", stdout
    assert "interrupted" not in err, err  # said once: by the exception
