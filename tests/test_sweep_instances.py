"""Instances are files: stored once under <output>/instances/ with their content hash, rows keyed by it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import EXAMPLES, sweep_toml
from memsched.experiments.sweep import journal_path, read_journal, run_sweep


def grid(file: Path) -> str:
    """A sweep of the chain file `file` and a generated chain."""
    return sweep_toml("inst", budgets=["50%", "70%", "90%"], defaults={"slots": 200},
                      instances=[{"file": file}, {"generate": "chain", "L": 9, "seed": 4}],
                      solvers=["rotor", "periodic", "store-all"])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def test_every_row_names_the_hash_of_a_stored_file(tmp_path):
    src = tmp_path / "chain.json"
    src.write_bytes((EXAMPLES / "random10.json").read_bytes())
    cfg = tmp_path / "s.toml"
    cfg.write_text(grid(src))
    out = tmp_path / "out"
    outcome = run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    files = sorted((out / "instances").glob("*.json"))
    stored = {sha(f): f for f in files if f.name != "index.json"}
    assert len(stored) == 2
    assert {r["instance_hash"] for r in outcome.rows} == set(stored)
    assert sha(src) in stored  # a file instance: a copy of its bytes
    index = json.loads((out / "instances" / "index.json").read_text())
    assert [e["hash"] for e in index.values()] == [h for h in stored if h != sha(src)]  # the generated one

    # the source file changes: its rows are new rows; the old ones leave the table, not mixed in
    data = json.loads(src.read_text())
    data["stages"][0]["fwd_time"] *= 2
    src.write_text(json.dumps(data))
    again = run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    assert again.ran == 9 and again.resumed == 9
    table = pd.read_csv(out / "inst.csv")
    assert len(table) == 18 and table["instance_hash"].nunique() == 2 and sha(src) in set(table["instance_hash"])
    assert any("not in this grid" in n for n in again.notes)


def test_rerun_from_stored_instances_reproduces_the_objectives(tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text(grid(EXAMPLES / "cnn12.json"))
    out = tmp_path / "out"
    run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    first = pd.read_csv(out / "inst.csv")
    second = run_sweep(cfg, output=out, workers=1, progress=False, isolate=False, fresh=True)
    assert second.ran == len(first)
    again = pd.read_csv(out / "inst.csv")
    assert list(again["key"]) == list(first["key"])
    pd.testing.assert_series_equal(again["objective"], first["objective"])  # exactly, not approximately


def test_profiled_instance_is_profiled_once_across_a_crash(tmp_path):
    pytest.importorskip("torch")
    cfg = tmp_path / "m.toml"
    cfg.write_text(sweep_toml("prof", budgets=["60%", "80%", "100%"], solvers=["rotor", "periodic"], instances=[
        {"model": "resnet18", "batch": 2, "image_size": 32, "width": 4, "repeats": 1, "warmup": 0}]))
    out = tmp_path / "out"

    class Crash(Exception):
        pass

    def crash_after_two(row, seen=[]):  # noqa: B006  (a counter that lives for this call)
        seen.append(row)
        if len(seen) == 2:
            raise Crash

    with pytest.raises(Crash):
        run_sweep(cfg, output=out, workers=1, progress=False, isolate=False, on_row=crash_after_two)
    profiles = [f for f in (out / "instances").glob("*.json") if f.name != "index.json"]
    assert len(profiles) == 1
    resumed = run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    assert resumed.resumed == 2 and resumed.ran == 4
    assert [f for f in (out / "instances").glob("*.json") if f.name != "index.json"] == profiles
    table = pd.read_csv(out / "prof.csv")
    assert set(table["instance_hash"]) == {sha(profiles[0])}  # one profile behind every row

    # --reprofile: a new profile (measured times differ), and the table holds its rows only
    redone = run_sweep(cfg, output=out, workers=1, progress=False, isolate=False, reprofile=True)
    new = pd.read_csv(out / "prof.csv")
    assert new["instance_hash"].nunique() == 1 and len(new) == 6
    if set(new["instance_hash"]) != set(table["instance_hash"]):
        assert redone.ran == 6
        assert len(read_journal(journal_path(out, "prof"))) == 12  # the old rows stay in the journal
