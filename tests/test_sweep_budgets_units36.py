"""Sweep files: a plain-number budget is in the instance file's memory unit, so it is compared with
a size with a unit only per instance (the grid stage), and a generated instance is checked by its
format's loader also when nothing is stored (``--list``, ``--verify``), naming ``instances[i]``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, one_line_refusal, run_cli, sweep_toml
from memsched.experiments.sweep.config import budget_identity, load_config
from memsched.experiments.sweep.grid import build_tasks
from memsched.solvers.errors import InputError


def tiny_in_mb(tmp_path: Path) -> Path:
    """examples/tiny.json with its sizes in MB (``meta.units.memory = "MB"``)."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["meta"] = {**data.get("meta", {}), "units": {"time": "ms", "memory": "MB"}}
    path = tmp_path / "tinymb.json"
    path.write_text(json.dumps(data))
    return path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def listed_budgets(out: str) -> list[str]:
    """The budget column of ``memsched sweep --list`` (``todo  tiny  20MB rotor  repeat=0``)."""
    return [line.split()[2] for line in out.splitlines() if line.startswith(("todo", "done"))]


# ------------------------------------------------------------------ 1. plain numbers are in the file's unit
def test_a_plain_number_is_no_repeat_of_a_size_for_a_file_in_mb(tmp_path):
    # 20000000 is 20 TB for a file in MB, not the 20MB before it
    cfg = write(tmp_path, sweep_toml("u", budgets=["20MB", 20000000], instances=[{"file": tiny_in_mb(tmp_path)}],
                                     solvers=["rotor"]))
    res = run_cli("sweep", cfg, "--list", "--output", tmp_path / "out")
    assert res.code == 0, res.err
    assert listed_budgets(res.out) == ["20MB", "20000000"]


def test_an_entrys_own_budgets_compare_plain_numbers_in_the_files_unit(tmp_path):
    inst = {"file": tiny_in_mb(tmp_path), "budgets": ["20MB", 20000000]}
    cfg = write(tmp_path, sweep_toml("u", budgets=[20], instances=[inst], solvers=["rotor"]))
    res = run_cli("sweep", cfg, "--list", "--output", tmp_path / "out")
    assert res.code == 0, res.err
    assert listed_budgets(res.out) == ["20MB", "20000000"]


@pytest.mark.parametrize("entry_budgets", [False, True])
def test_a_real_repeat_in_mb_is_refused_at_the_grid_stage(tmp_path, entry_budgets):
    # "20MB" and 20 are one budget for a file in MB: refused once the instance's unit is known
    pair = ["20MB", 20]
    inst = {"file": tiny_in_mb(tmp_path), **({"budgets": pair} if entry_budgets else {})}
    cfg = write(tmp_path, sweep_toml("d", budgets=[30] if entry_budgets else pair, instances=[inst],
                                     solvers=["rotor"]))
    key = "instances[0].budgets" if entry_budgets else "budgets"
    config = load_config(cfg)  # the sweep file alone cannot tell
    with pytest.raises(InputError) as err:
        build_tasks(config)
    assert err.value.field == f"{key}[1]"
    for argv in (["--list"], ["--no-progress", "--workers", "1"]):
        out = tmp_path / "out"
        line = one_line_refusal(run_cli("sweep", cfg, *argv, "--output", out),
                                f"{key}[1]: budget '20' is already in the list for instance tiny")
        assert f"({key}[0] '20MB' is the same 20 MB (19.07 MiB)); give each budget once" in line
        assert not out.exists()  # the run made the folder: removed again


def test_a_size_and_a_plain_number_of_the_same_bytes_are_one_budget_for_a_file_in_bytes(tmp_path):
    cfg = write(tmp_path, sweep_toml("b", budgets=["1KiB", 1024], instances=[{"file": EXAMPLES / "tiny.json"}],
                                     solvers=["rotor"]))
    one_line_refusal(run_cli("sweep", cfg, "--list", "--output", tmp_path / "out"),
                     "budgets[1]: budget '1024' is already in the list for instance tiny (budgets[0] '1KiB' is the "
                     "same 1024 bytes)")


@pytest.mark.parametrize(("a", "b", "same"), [
    ("50%", "50.0%", True), ("1KiB", "1024B", True), ("1KiB", " 1 KiB ", True), (2048, 2048.5, True),
    (20, "20", True), ("20MB", 20000000, False), ("20MB", 20, False), ("1KiB", 1024, False), ("100%", 100, False),
])
def test_budget_identity_compares_budgets_of_one_kind_only(a, b, same):
    assert (budget_identity(a) == budget_identity(b)) is same


# ------------------------------------------------------------------ 2. generated instances are checked by the loader
NEGATIVE_COSTS = {"generate": "graph.random_dag", "n": 5, "cpu_range": [-5, -1]}


@pytest.mark.parametrize("mode", [["--list"], ["--verify"], ["--no-progress", "--workers", "1"]])
def test_a_generated_instance_the_loader_refuses_is_refused_in_every_mode(tmp_path, mode):
    cfg = write(tmp_path, sweep_toml("g", budgets=["50%"], instances=[NEGATIVE_COSTS], solvers=["dtr"]))
    out = tmp_path / "out"
    line = one_line_refusal(run_cli("sweep", cfg, *mode, "--output", out),
                            f"{cfg}: instances[0]: the generated instance is not a valid graph instance: ")
    assert "cost_cpu: must be a non-negative finite number, got -" in line
    assert "stored instance" not in line and ".json" not in line  # no file that is gone once this is printed
    assert not (out / "instances").exists() or not any((out / "instances").iterdir())


def test_a_valid_generated_instance_lists_the_cells_a_run_solves(tmp_path):
    inst = {"generate": "graph.random_dag", "n": 5, "cpu_range": [1, 5]}
    cfg = write(tmp_path, sweep_toml("g", budgets=["50%", "80%"], instances=[inst], solvers=["dtr"]))
    out = tmp_path / "out"
    before = run_cli("sweep", cfg, "--list", "--output", out)
    assert before.code == 0, before.err
    assert [line.split()[0] for line in before.out.splitlines()] == ["todo", "todo"]
    res = run_cli("sweep", cfg, "--no-progress", "--workers", "1", "--output", out)
    assert res.code == 0, res.err
    after = run_cli("sweep", cfg, "--list", "--output", out)
    assert [line.split()[0] for line in after.out.splitlines() if line.split()[0] in ("todo", "done")] == \
        ["done", "done"]
