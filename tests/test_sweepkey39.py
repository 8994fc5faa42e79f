"""Sweep keys (39): two ``memsched sweep --scheduler`` runs on one Dask cluster, of copies of one
instance file outside the repository, got the same Dask task keys (the row key leaves the file's
absolute path out, so that a moved folder resumes), and Dask handed the second sweep the first
one's task: its table recorded the first sweep's ``source``. Each run's Dask keys are now its own;
the row key is unchanged. A repeated solver label names the later entry (``solvers[1].label``),
and says which earlier entry it repeats."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, sweep_toml
from memsched.experiments.sweep import load_config, run_sweep
from memsched.experiments.sweep.grid import build_tasks
from memsched.solvers.errors import InputError


class _Future:
    """A finished Dask future holding `row`."""

    status = "finished"

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row

    def result(self) -> dict[str, Any]:
        return self.row


class _Cluster:
    """A stand-in for a `dask.distributed.Client` of a shared cluster: a task submitted under a key
    the cluster already holds is not run again, its caller gets the task of that key (as Dask does);
    `keys`: the keys submitted, in order."""

    def __init__(self) -> None:
        self.futures: dict[str, _Future] = {}
        self.keys: list[str] = []

    def submit(self, fn: Any, *args: Any, key: str, pure: bool = True) -> _Future:
        self.keys.append(key)
        if key not in self.futures:
            self.futures[key] = _Future(fn(*args))
        return self.futures[key]

    def cancel(self, futures: Any) -> None:
        """Nothing to cancel: every task here has finished."""


def _sweep_folder(root: Path) -> Path:
    """A folder outside the repository holding a copy of ``tiny.json`` and a sweep file naming it
    by a relative path; the sweep file's path."""
    root.mkdir()
    shutil.copy(EXAMPLES / "tiny.json", root / "tiny.json")
    path = root / "k39.toml"
    path.write_text(sweep_toml("k39", budgets=["90%"], instances=[{"file": "tiny.json"}], solvers=["store-all"]))
    return path


def test_two_sweeps_on_one_cluster_keep_their_own_rows(tmp_path, monkeypatch):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr(distributed, "as_completed", iter)  # the futures of `_Cluster` are all done
    cluster = _Cluster()
    outcomes = []
    for folder in ("a", "b"):
        cfg = _sweep_folder(tmp_path / folder)
        outcomes.append(run_sweep(cfg, output=tmp_path / folder / "out", scheduler=cluster, progress=False))
    a, b = outcomes
    assert a.ran == b.ran == 1
    assert len(cluster.keys) == 2 and cluster.keys[0] != cluster.keys[1]
    (row_a,), (row_b,) = a.rows, b.rows
    assert row_a["key"] == row_b["key"]  # the resume key leaves the folder out, as before
    assert all(row["key"] in key for row, key in zip((row_a, row_b), cluster.keys))
    assert Path(row_a["source"]).parent == tmp_path / "a"
    assert Path(row_b["source"]).parent == tmp_path / "b"  # not the first sweep's file


def test_a_repeated_solver_label_names_the_later_entry(tmp_path):
    path = tmp_path / "labels.toml"
    path.write_text(sweep_toml("labels", budgets=["90%"], instances=[{"file": EXAMPLES / "tiny.json"}],
                               solvers=[{"name": "store-all", "label": "x"}, "rotor",
                                        {"name": "checkpoint-all", "label": "x"}]))
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.field == "solvers[2].label"
    assert "'x'" in str(info.value) and "solvers[0]" in str(info.value)


def test_a_repeated_instance_label_names_the_later_entry(tmp_path):
    path = tmp_path / "inst.toml"
    path.write_text(sweep_toml("inst", budgets=["90%"], solvers=["store-all"],
                               instances=[{"file": EXAMPLES / "tiny.json", "label": "x"},
                                          {"file": EXAMPLES / "cnn12.json"},
                                          {"file": EXAMPLES / "random10.json", "label": "x"}]))
    with pytest.raises(InputError) as info:
        build_tasks(load_config(path))
    assert info.value.field == "instances[2].label"
    assert "'x'" in str(info.value) and "instances[0]" in str(info.value)
