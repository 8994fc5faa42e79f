"""Sweeps (hunt 28): ``--verify``, ``--update`` and ``--list`` take the rows a run resumes (never
the rows of another problem or bandwidth), a damaged table is read row by row (one bad cell is
one cell to run again; a file that is no table is one line of error), and a grid with no cell is
bad input."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import sweep_toml
from memsched.experiments.sweep import journal_path, read_journal

#: Six quick cells of the tiny chain: three budgets x two solvers.
QUICK = sweep_toml("q", budgets=["50%", "80%", "100%"], defaults={"slots": 100},
                   instances=[{"example": "tiny"}], solvers=["store-all", "rotor"])


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    cfg = tmp_path / name
    cfg.write_text(text)
    return cfg


def _ran(cli, cfg: Path, out: Path) -> None:
    res = cli("sweep", cfg, "--output", out, "--no-progress", "--workers", "1")
    assert res.code == 0, res.err


def _list_marks(cli, cfg: Path, out: Path) -> list[str]:
    res = cli("sweep", cfg, "--output", out, "--list")
    assert res.code == 0, res.err
    return [line.split()[0] for line in res.out.splitlines() if line.startswith(("done", "todo"))]


# ------------------------------------------------------------------ 1. rows of another problem or bandwidth
def _offload_entry(**extra) -> dict:
    return {"example": "tiny", "problem": "offload", **extra}


def test_verify_and_update_never_take_rows_of_another_problem(tmp_path, cli):
    solver = [{"name": "cpsat", "time_limit": 5}]
    chain = _write(tmp_path, sweep_toml("pp", budgets=["60%", "100%"], instances=[{"example": "tiny"}],
                                        solvers=solver), "a.toml")
    offload = _write(tmp_path, sweep_toml("pp", budgets=["60%", "100%"], instances=[_offload_entry(bandwidth=1e9)],
                                          solvers=solver), "b.toml")
    out = tmp_path / "out"
    _ran(cli, chain, out)
    assert _list_marks(cli, offload, out) == ["todo", "todo"]
    res = cli("sweep", offload, "--output", out, "--verify", "--no-progress")
    assert res.code == 1, res.out + res.err
    assert "0 same" in res.out and "2 missing" in res.out, res.out
    res = cli("sweep", offload, "--output", out, "--verify", "--update", "--no-progress")
    assert "replaced 0 rows" in res.out, res.out
    journal = read_journal(journal_path(out, "pp"))
    assert {r["problem"] for r in journal.values()} == {"chain"}  # no chain row journaled under an offload key
    assert len(journal) == 2
    assert _list_marks(cli, offload, out) == ["todo", "todo"]


def test_verify_never_takes_rows_of_another_bandwidth(tmp_path, cli):
    def sweep(bandwidth: str) -> str:
        return sweep_toml("bw", budgets=["30%", "50%", "70%"], instances=[_offload_entry(bandwidth=bandwidth)],
                          solvers=["offload-prefix"])

    fast, slow = _write(tmp_path, sweep("1e9"), "a.toml"), _write(tmp_path, sweep("1e3"), "b.toml")
    out = tmp_path / "out"
    _ran(cli, fast, out)
    res = cli("sweep", slow, "--output", out, "--verify", "--no-progress")
    assert res.code == 1, res.out + res.err
    assert "0 same, 0 differs" in res.out and "3 missing" in res.out, res.out
    assert _list_marks(cli, slow, out) == ["todo"] * 3


# ------------------------------------------------------------------ 2. a damaged table
def _fresh_clone(cli, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A run of QUICK, its journal removed (a fresh clone of the committed table): (sweep file, output, table)."""
    cfg, out = _write(tmp_path, QUICK), tmp_path / "out"
    _ran(cli, cfg, out)
    journal_path(out, "q").unlink()
    return cfg, out, out / "q.csv"


def _edit_cell(table: Path, column: str, value: str) -> str:
    """Write `value` in `column` of the first row that has a value there; returns that row's key."""
    with table.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = list(reader.fieldnames or []), list(reader)
    row = next(r for r in rows if r[column])
    row[column] = value
    with table.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return row["key"]


@pytest.mark.parametrize("column,value", [("objective", "abc"), ("budget", "lots")])
def test_one_damaged_cell_is_one_cell_to_run_again_for_verify_list_and_run(tmp_path, cli, column, value):
    cfg, out, table = _fresh_clone(cli, tmp_path)
    _edit_cell(table, column, value)
    res = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert res.code == 1, res.out + res.err
    assert "5 same" in res.out and "1 missing" in res.out, res.out + res.err
    assert "damaged" in res.err and str(table) in res.err, res.err
    assert sorted(_list_marks(cli, cfg, out)) == ["done"] * 5 + ["todo"]
    res = cli("sweep", cfg, "--output", out, "--no-progress", "--workers", "1")
    assert res.code == 0, res.err
    assert "5 resumed from the journal, 1 run now" in res.out, res.out + res.err


def test_a_table_without_a_key_column_is_one_line_of_bad_input_everywhere(tmp_path, cli):
    cfg, out, table = _fresh_clone(cli, tmp_path)
    with table.open(newline="") as f:
        rows = list(csv.DictReader(f))
    with table.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[c for c in rows[0] if c != "key"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    for mode in (["--verify", "--no-progress"], ["--list"], ["--no-progress", "--workers", "1"]):
        res = cli("sweep", cfg, "--output", out, *mode)
        assert res.code == 2, (mode, res.out, res.err)
        assert str(table) in res.err and "'key' column" in res.err, (mode, res.err)
        assert "Traceback" not in res.err and len(res.err.strip().splitlines()) == 1, res.err


def test_an_empty_table_is_bad_input_without_a_journal_and_stale_with_one(tmp_path, cli):
    cfg, out, table = _fresh_clone(cli, tmp_path)
    table.write_text("")
    for mode in (["--verify", "--no-progress"], ["--list"], ["--no-progress", "--workers", "1"]):
        res = cli("sweep", cfg, "--output", out, *mode)
        assert res.code == 2, (mode, res.out, res.err)
        assert str(table) in res.err and "Traceback" not in res.err, res.err
    res = cli("sweep", cfg, "--output", out, "--no-progress", "--workers", "1", "--fresh")  # a journal now
    assert res.code == 0, res.err
    table.write_text("")
    res = cli("sweep", cfg, "--output", out, "--list")
    assert res.code == 0, res.err
    assert "cannot be read" in res.out and "rewrite it from the journal" in res.out, res.out
    res = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert res.code == 1 and "6 same" in res.out and "cannot be read" in res.out, res.out + res.err


# ------------------------------------------------------------------ 3. a grid with no cell
@pytest.mark.parametrize("solver,skip", [
    ("checkpoint-all", "not a chain solver"),
    ({"name": "rotor", "max_length": 2}, "max_length 2"),
])
def test_a_grid_with_no_cell_is_bad_input_and_writes_nothing(tmp_path, cli, solver, skip):
    cfg = _write(tmp_path, sweep_toml("b", budgets=["50%"], instances=[{"example": "tiny"}], solvers=[solver]))
    out = tmp_path / "out"
    for mode in ([], ["--list"]):
        res = cli("sweep", cfg, "--output", out, "--no-progress", "--workers", "1", *mode)
        assert res.code == 2, (mode, res.out, res.err)
        assert str(cfg) in res.err and "solvers:" in res.err and skip in res.err, res.err
        assert "no cell" in res.err and len(res.err.strip().splitlines()) == 1, res.err
        assert not out.exists()
    out.mkdir()  # a folder there already: left empty
    res = cli("sweep", cfg, "--output", out, "--no-progress", "--workers", "1")
    assert res.code == 2 and list(out.iterdir()) == [], res.err
