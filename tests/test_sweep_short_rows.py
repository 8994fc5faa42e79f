"""A sweep table resumed without its journal: a record with fewer or more fields than the header is a
damaged row (left out with a warning, its cell solved again), never a finished row read with NaN
filled in; and ``--workers`` is refused with ``--scheduler`` (cells run on the cluster's workers)."""

from __future__ import annotations

import csv
from pathlib import Path

from conftest import EXAMPLES, one_line_refusal, sweep_toml
from memsched.experiments.sweep import journal_path, read_journal, run_sweep
from memsched.experiments.sweep.verify import stored_rows, table_stale

#: Eight quick cells (two instances x two budgets x two solvers).
QUICK = sweep_toml("q", budgets=["50%", "80%"], defaults={"slots": 100},
                   instances=[{"example": "tiny"}, {"file": EXAMPLES / "random10.json"}],
                   solvers=["store-all", "rotor"])


def _finished(tmp_path: Path) -> tuple[Path, Path]:
    """A finished run of `QUICK`: the sweep file and the output folder."""
    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    out = tmp_path / "out"
    _run(cfg, out)
    return cfg, out


def _run(cfg: Path, out: Path):
    return run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)


def _records(table: Path) -> list[list[str]]:
    with open(table, newline="") as f:
        return list(csv.reader(f))


def _write(table: Path, records: list[list[str]]) -> None:
    with open(table, "w", newline="") as f:
        csv.writer(f).writerows(records)


def _cut_inside_objective(table: Path) -> tuple[str, float]:
    """Cut the first row whose objective is not a whole number just after its objective's integer
    part (``55.84...`` -> ``55``), as a copy or a write stopped there leaves it; returns the row's
    key and its objective."""
    records = _records(table)
    header = records[0]
    col = header.index("objective")
    for i, rec in enumerate(records[1:], 1):
        if rec[col] and float(rec[col]) != int(float(rec[col])):
            records[i] = rec[:col] + [rec[col].split(".")[0]]  # fewer fields than the header
            _write(table, records)
            return rec[header.index("key")], float(rec[col])
    raise AssertionError("no row with a fractional objective to cut")


def test_a_row_cut_inside_its_objective_is_solved_again_not_resumed(tmp_path):
    cfg, out = _finished(tmp_path)
    key, objective = _cut_inside_objective(out / "q.csv")
    journal_path(out, "q").unlink()  # a fresh clone: the table is the record
    outcome = _run(cfg, out)
    assert (outcome.resumed, outcome.ran) == (7, 1)
    assert any("1 unreadable rows run again" in n for n in outcome.notes), outcome.notes
    assert read_journal(journal_path(out, "q"))[key]["objective"] == objective
    header, *rows = _records(out / "q.csv")
    rewritten = {r[header.index("key")]: r for r in rows}
    assert float(rewritten[key][header.index("objective")]) == objective  # not 55.0


def test_list_and_verify_say_the_cut_row_is_not_done(tmp_path, cli):
    cfg, out = _finished(tmp_path)
    key, _ = _cut_inside_objective(out / "q.csv")
    journal_path(out, "q").unlink()
    listed = cli("sweep", cfg, "--output", out, "--list")
    assert listed.code == 0, listed.err
    assert sum(line.startswith("todo") for line in listed.out.splitlines()) == 1, listed.out
    assert "1 damaged rows ignored" in listed.err and "fewer or more fields" in listed.err, listed.err
    verified = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert verified.code == 1 and "1 missing" in verified.out, (verified.out, verified.err)
    assert key not in stored_rows(out, "q")


def test_a_row_with_more_fields_is_left_out_not_the_whole_table(tmp_path):
    cfg, out = _finished(tmp_path)
    records = _records(out / "q.csv")
    key = records[3][records[0].index("key")]
    records[3] = records[3] + ["extra"]
    _write(out / "q.csv", records)
    journal_path(out, "q").unlink()
    assert len(stored_rows(out, "q")) == 7 and key not in stored_rows(out, "q")
    outcome = _run(cfg, out)
    assert (outcome.resumed, outcome.ran) == (7, 1)


def test_quoted_line_breaks_and_blank_lines_are_not_damage(tmp_path):
    _, out = _finished(tmp_path)
    records = _records(out / "q.csv")
    records[1][records[0].index("message")] = "two\nlines, with a comma"
    _write(out / "q.csv", records)
    with open(out / "q.csv", "a") as f:
        f.write("\n")
    journal_path(out, "q").unlink()
    rows = stored_rows(out, "q")
    assert len(rows) == 8
    assert rows[records[1][records[0].index("key")]]["message"] == "two\nlines, with a comma"


def test_a_table_with_a_cut_row_is_stale_beside_its_journal(tmp_path):
    cfg, out = _finished(tmp_path)
    _cut_inside_objective(out / "q.csv")
    from memsched.experiments.sweep import InstanceStore, build_tasks, load_config

    tasks = build_tasks(load_config(cfg), store=InstanceStore(out / "instances", readonly=True))
    why = table_stale(out, "q", tasks)
    assert why is not None and "1 damaged rows" in why and "journaled rows missing" in why, why


def test_workers_with_a_scheduler_is_refused(tmp_path, cli):
    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    out = tmp_path / "out"
    res = cli("sweep", cfg, "--output", out, "--scheduler", "inproc://nowhere", "--workers", "2", "--no-progress")
    line = one_line_refusal(res, "--workers")
    assert "--scheduler" in line
    assert not out.exists()  # refused before the scheduler is reached or the folder made
