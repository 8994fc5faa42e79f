"""Fixes from hunt 47 on executed sweeps: model entries of a problem they cannot be profiled for,
cells whose execution fails, damaged measurement columns, and the pivot of a bool column."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import EXAMPLES, run_cli, sweep_toml
from memsched.experiments.sweep import cell, load_config, run_sweep
from memsched.experiments.sweep import run as sweep_run
from memsched.experiments.sweep.store import valid_row
from memsched.solvers.errors import InputError

from memsched.results import SweepResult

TINY = EXAMPLES / "tiny.json"


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ 1. a model entry's problem
def test_a_model_entry_for_the_pipeline_problem_is_refused(tmp_path):
    cfg = write(tmp_path, sweep_toml("pipe", budgets=["100%"], execute=True, solvers=["rotor"],
                                     instances=[{"model": "resnet18", "problem": "pipeline", "batch": 2}]))
    with pytest.raises(InputError) as err:
        load_config(cfg)
    assert err.value.field == "instances[0].problem" and "pipeline" in str(err.value)
    res = run_cli("sweep", cfg, "--output", tmp_path / "o", "--no-progress")
    assert res.code == 2, res.err
    assert len(res.err.strip().splitlines()) == 1 and "instances[0].problem" in res.err
    assert not (tmp_path / "o").exists()


def test_a_model_entry_for_a_profiled_problem_is_read(tmp_path):
    cfg = write(tmp_path, sweep_toml(budgets=["100%"], solvers=["rotor"],
                                     instances=[{"model": "resnet18", "problem": p, "batch": 2}
                                                for p in ("chain", "join", "graph")]))
    assert [spec.problem for spec in load_config(cfg).instances] == ["chain", "join", "graph"]


# ------------------------------------------------------------------ 2. a cell whose execution fails
def test_a_failed_execution_is_an_error_row_kept_by_a_resume(tmp_path, monkeypatch):
    real = sweep_run.build_tasks

    def executing(*args: Any, **kwargs: Any) -> list[Any]:  # executing cells without profiling a network
        return [dataclasses.replace(t, execute=True) for t in real(*args, **kwargs)]

    def boom(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("boom in worker\nsecond line")

    monkeypatch.setattr(sweep_run, "build_tasks", executing)
    monkeypatch.setattr(cell, "_execute", boom)
    cfg = write(tmp_path, sweep_toml("ex", budgets=["100%"], instances=[{"file": TINY}], solvers=["rotor"]))
    out = run_sweep(cfg, output=tmp_path / "out", workers=1, isolate=False, progress=False)
    assert out.ran == 1 and out.errors == 1
    row = out.rows[0]
    assert row["status"] == "error" and row.get("objective") is None
    assert row["message"].startswith("execution failed: RuntimeError: boom in worker; rotor answered optimal, "
                                     "objective "), row["message"]
    table = pd.read_csv(tmp_path / "out" / "ex.csv")
    assert list(table["status"]) == ["error"]
    again = run_sweep(cfg, output=tmp_path / "out", workers=1, isolate=False, progress=False)
    assert again.ran == 0 and again.resumed == 1 and again.error_rows == 1  # kept as any error row


# ------------------------------------------------------------------ 3. an executed cell's number columns
@pytest.mark.parametrize("column", ["tracker_predicted_peak", "compared_makespan", "predicted_makespan",
                                    "time_ms_min", "time_ms_q1", "time_ms_q3", "time_ms_max",
                                    "independent_predicted_peak"])
@pytest.mark.parametrize("value", ["abc", float("inf")])
def test_text_or_infinity_in_a_measurement_column_is_damage(column, value):
    row = {"key": "k", "repeat": 0, "objective": 1.0}
    assert valid_row({**row, column: 2.5}) and valid_row({**row, column: None})
    assert not valid_row({**row, column: value})


def test_a_table_with_text_in_a_measurement_column_leaves_that_cell_todo(tmp_path):
    cfg = write(tmp_path, sweep_toml("dm", budgets=["50%", "100%"], instances=[{"file": TINY}], solvers=["rotor"]))
    out = tmp_path / "out"
    run_sweep(cfg, output=out, workers=1, isolate=False, progress=False)
    table = pd.read_csv(out / "dm.csv")
    table["time_ms_q1"] = ["abc", None]
    table.to_csv(out / "dm.csv", index=False)
    (out / "dm.jsonl").unlink()  # the table is the record
    res = run_cli("sweep", cfg, "--output", out, "--list")
    assert res.code == 0, res.err
    states = {line.split()[2]: line.split()[0] for line in res.out.splitlines() if line.strip()}
    assert states == {"50%": "todo", "100%": "done"}, res.out


# ------------------------------------------------------------------ 4. pivot of a bool column
def test_pivot_of_a_bool_column_is_the_mean_of_its_repeats():
    base = {"instance": "r18", "budget_spec": "100%", "budget": 100, "solver": "rotor", "solver_label": "rotor"}
    rows = [{**base, "repeat": 0, "grad_check": True}, {**base, "repeat": 1, "grad_check": False},
            {**base, "budget_spec": "50%", "budget": 50, "repeat": 0, "grad_check": None}]
    table = SweepResult(rows).pivot("grad_check")
    assert table.loc[("r18", "100%"), "rotor"] == pytest.approx(0.5)  # the False is not hidden
    assert pd.isna(table.loc[("r18", "50%"), "rotor"])
    assert SweepResult(rows[:2]).pivot("grad_check").loc[("r18", "100%"), "rotor"] == pytest.approx(0.5)
    assert SweepResult([{**base, "repeat": 0, "status": "optimal"}]).pivot("status").iloc[0, 0] == "optimal"
