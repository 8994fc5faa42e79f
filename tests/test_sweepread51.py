"""Reading sweep tables keeps text as written, and ``--verify`` reads a run's status for its time limit.

1. A sweep table is read with only an empty cell missing (`store.read_table_csv`, shared by the run's
   resume, ``--verify``, ``memsched figures`` and the paper figures): a label ``NA``, ``null`` or ``007``
   stays that text (pandas' default made ``NA`` an empty cell: a reseeded journal held ``"instance": null``
   and ``memsched figures`` refused the table), and ``nan`` in a number column is a damaged row.
2. A stored row of an exact solver that is ``feasible`` with a positive gap stopped at its time limit,
   whatever time it recorded (a loaded machine timed 0.898 s of a 1 s limit): ``time-limited``, not
   ``differs``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from conftest import sweep_toml
from memsched.experiments.sweep import journal_path
from memsched.experiments.sweep.store import valid_row
from memsched.experiments.sweep.verify import judge, stored_rows, table_rows


def _edit_table(path: Path, edit) -> None:
    """Rewrite the CSV `path` with `edit(row)` applied to each row (a dict of its cells, as text)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = list(reader.fieldnames or ()), list(reader)
    for row in rows:
        edit(row)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _na_sweep(tmp_path: Path, name: str = "s5", output: str = "out") -> Path:
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(sweep_toml(name, budgets=["50%", "80%"], output=output,
                              instances=[{"example": "tiny", "label": "NA"}],
                              solvers=[{"name": "rotor", "label": "null"}]))
    return cfg


def test_a_table_reseeds_its_journal_with_text_labels_as_written(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _na_sweep(tmp_path)
    assert cli("sweep", cfg, "--no-progress").code == 0
    out = tmp_path / "out"
    journal_path(out, "s5").unlink()  # a fresh clone: the table alone
    res = cli("sweep", cfg, "--no-progress")
    assert res.code == 0 and "no journal: the 2 rows" in res.err + res.out
    with open(out / "s5.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["instance"], r["solver_label"]) for r in rows] == [("NA", "null")] * 2
    seeded = [json.loads(line) for line in journal_path(out, "s5").read_text().splitlines()]
    assert [(r["instance"], r["solver_label"]) for r in seeded] == [("NA", "null")] * 2


def test_nan_in_a_number_column_is_a_damaged_row_and_labels_stay_text(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _na_sweep(tmp_path)
    assert cli("sweep", cfg, "--no-progress").code == 0
    out = tmp_path / "out"
    journal_path(out, "s5").unlink()

    def edit(row: dict[str, str]) -> None:
        row["message"] = "None"
        if row["budget_spec"] == "80%":
            row["objective"] = "nan"
    _edit_table(out / "s5.csv", edit)
    rows, torn = table_rows(out / "s5.csv")
    assert torn == 0 and [r["instance"] for r in rows] == ["NA", "NA"] and rows[0]["message"] == "None"
    assert [valid_row(r) for r in rows] == [True, False]  # NaN is damage (`valid_row`), not an empty cell
    assert [r["budget_spec"] for r in stored_rows(out, "s5").values()] == ["50%"]
    res = cli("sweep", cfg, "--list")
    assert res.code == 0 and "todo" in res.out


def test_figures_read_a_label_na_and_refuse_a_nan_objective(tmp_path, cli, monkeypatch):
    from memsched.experiments.paper_figures import read_table

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "chain_solvers.toml"
    cfg.write_text(sweep_toml("chain_solvers", budgets=["50%", "80%"], output="R/main",
                              instances=[{"example": "tiny", "label": "NA"},
                                         {"generate": "chain", "L": 5, "seed": 1, "label": "007"}],
                              solvers=[{"name": "rotor", "label": "null"}, "store-all"]))
    assert cli("sweep", cfg, "--no-progress").code == 0
    table = tmp_path / "R" / "main" / "chain_solvers.csv"
    assert set(read_table(table)["instance"]) == {"NA", "007"}  # the paper figures' titles: not "nan", not "7"
    res = cli("figures", "--results", tmp_path / "R", "--out", tmp_path / "F", "--only", "main")
    assert res.code == 0, res.err
    _edit_table(table, lambda row: row.update(objective="nan") if row["objective"] else None)
    res = cli("figures", "--results", tmp_path / "R", "--out", tmp_path / "F", "--only", "main")
    assert res.code == 2 and "objective" in res.err and "'nan'" in res.err


# ------------------------------------------------------------------------------ time-limited by status
#: a stored chain milp row of a loaded machine: stopped at its 1 s limit with a gap, timed at 0.898 s
STOPPED = {"problem": "chain", "solver": "milp", "status": "feasible", "objective": 100.6, "lower_bound": 98.94,
           "gap": 0.0165, "time_limit": 1.0, "solve_time_s": 0.898}
PROVED = {**STOPPED, "status": "optimal", "lower_bound": 100.6, "gap": 0.0, "solve_time_s": 0.4}


def test_a_feasible_row_with_a_gap_of_an_exact_solver_is_time_limited_from_half_its_limit():
    assert judge(STOPPED, PROVED) == "time-limited"
    # a quick unproven answer is not the clock's (the model's optimum for its scope lost to a fast solver's
    # schedule, fig_c_graphs' cpsat on vgg16-like at 70%: 0.21 s of 20): a worse answer now is a change
    quick = {**STOPPED, "time_limit": 20.0, "solve_time_s": 0.21}
    assert judge(quick, {**quick, "objective": 150.9}) == "differs"
    assert judge({**quick, "solve_time_s": 10.0}, {**quick, "objective": 150.9}) == "time-limited"
    assert judge(PROVED, STOPPED) == "time-limited"
    assert judge({**STOPPED, "problem": "pipeline", "solver": "dag-milp"}, PROVED) == "time-limited"
    # no gap (the bound reaches the objective), or a heuristic's answer: nothing says it was stopped
    assert judge({**STOPPED, "lower_bound": 100.6, "gap": 0.0}, PROVED) == "differs"
    assert judge({**STOPPED, "lower_bound": None, "gap": None}, PROVED) == "differs"
    heuristic = {**STOPPED, "solver": "rotor"}
    assert judge(heuristic, {**PROVED, "solver": "rotor"}) == "differs"
    # the time share still counts
    assert judge({**heuristic, "solve_time_s": 0.95}, {**PROVED, "solver": "rotor"}) == "time-limited"


def test_verify_calls_a_stopped_exact_row_time_limited_and_update_keeps_it(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "tl.toml"
    cfg.write_text(sweep_toml("tl", budgets=["80%"], output="out", instances=[{"example": "tiny"}],
                              solvers=[{"name": "milp", "time_limit": 20}]))
    assert cli("sweep", cfg, "--no-progress").code == 0
    out = tmp_path / "out"
    journal_path(out, "tl").unlink()  # the committed table alone: its row is edited as a loaded machine left it
    with open(out / "tl.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert row["status"] == "optimal"
    objective = float(row["objective"])

    def stopped(row: dict[str, str]) -> None:
        row.update(status="feasible", lower_bound=repr(objective * 0.98), gap="0.02", solve_time_s="12.0")
    _edit_table(out / "tl.csv", stopped)
    res = cli("sweep", cfg, "--verify", "--no-progress")
    assert res.code == 0 and res.out.startswith("time-limited"), res.out
    res = cli("sweep", cfg, "--verify", "--update", "--no-progress")
    assert res.code == 0 and "replaced 0 rows" in res.out, res.out
    with open(out / "tl.csv", newline="") as f:
        assert next(csv.DictReader(f))["status"] == "feasible"  # the stored row stands: HEAD does no better
