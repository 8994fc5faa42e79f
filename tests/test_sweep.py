"""Sweeps: resume after a crash, parallel == serial, clear errors for bad sweep files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import EXAMPLES, ROOT, sweep_toml
from memsched.experiments.sweep import (
    ROW_COLUMNS,
    compare_tables,
    journal_path,
    load_config,
    read_journal,
    run_sweep,
)
from memsched.solvers.errors import InputError

SMALL_GRID = {"instances": [{"file": EXAMPLES / "random10.json"}, {"example": "cnn12"},
                            {"generate": "chain", "L": 6, "seed": 3}],
              "solvers": ["store-all", "periodic", "sqrt", "rotor"], "defaults": {"slots": 100, "time_limit": 10}}
SMALL = sweep_toml("small", budgets=["50%", "70%", "90%", "100%"], **SMALL_GRID)


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def table(out: Path, name: str = "small") -> pd.DataFrame:
    return pd.read_csv(out / f"{name}.csv")


def assert_same_rows(a: pd.DataFrame, b: pd.DataFrame) -> None:
    na, nb = compare_tables(a, b)
    assert len(na) == len(nb)
    pd.testing.assert_frame_equal(na, nb, check_dtype=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> pd.DataFrame:
    """The uninterrupted serial run of SMALL."""
    tmp = tmp_path_factory.mktemp("ref")
    cfg = write(tmp, SMALL)
    outcome = run_sweep(cfg, output=tmp / "out", workers=1, progress=False)
    assert outcome.total == outcome.ran == 3 * 4 * 4
    return table(tmp / "out")


def test_rows_have_parameters_results_and_versions(reference):
    assert list(reference.columns[: len(ROW_COLUMNS)]) == ROW_COLUMNS
    assert reference["key"].is_unique
    assert set(reference["status"]) <= {"optimal", "feasible", "infeasible"}
    row = reference[(reference.instance == "cnn12") & (reference.solver == "rotor")
                    & (reference.budget_spec == "70%")].iloc[0]
    assert row.status == "optimal" and row.peak_memory <= row.budget and row.objective > 0
    assert row.budget == int(row.reference_peak * 0.7)
    assert row.numpy_version and row.ortools_version and row.python_version and row.memsched_version
    assert row.host and row.timestamp
    # the grid order: instances, then budgets, then solvers
    assert list(reference["instance"].drop_duplicates()) == ["random10", "cnn12", "random-L6-s3"]


def test_crash_then_resume_gives_the_same_rows(tmp_path, reference):
    cfg = write(tmp_path, SMALL)
    out = tmp_path / "out"

    class Crash(Exception):
        pass

    seen = []

    def hook(row):
        seen.append(row["key"])
        if len(seen) == 17:
            raise Crash

    with pytest.raises(Crash):
        run_sweep(cfg, output=out, workers=1, progress=False, on_row=hook)
    assert len(read_journal(journal_path(out, "small"))) == 17
    assert len(table(out)) == 17  # the partial table is written on the way out
    outcome = run_sweep(cfg, output=out, workers=1, progress=False)
    assert outcome.resumed == 17 and outcome.ran == len(reference) - 17
    assert_same_rows(table(out), reference)
    # finished rows are not redone: their timestamps and pids are those of the first run
    first = read_journal(journal_path(out, "small"))
    assert set(seen) <= set(first)
    again = run_sweep(cfg, output=out, workers=1, progress=False)
    assert again.ran == 0 and again.resumed == len(reference)


def test_torn_last_line_is_ignored_and_repaired(tmp_path, reference):
    cfg = write(tmp_path, SMALL)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        run_sweep(cfg, output=out, workers=1, progress=False,
                  on_row=lambda row: (_ for _ in ()).throw(RuntimeError("boom")))
    jpath = journal_path(out, "small")
    with jpath.open("ab") as f:
        f.write(b'{"key": "torn", "sweep": "sma')  # a write cut by a kill
    assert len(read_journal(jpath)) == 1
    run_sweep(cfg, output=out, workers=1, progress=False)
    lines = jpath.read_text().splitlines()
    assert len(lines) == len(reference)  # the torn tail was cut, not glued to the next row
    assert_same_rows(table(out), reference)


def test_a_damaged_row_is_run_again_not_an_internal_error(tmp_path, reference, cli):
    """Text in a number column of a journal row (`--verify` failed with "could not convert string
    to float", exit 3): the row is reported as unreadable and ignored; the resumed sweep runs it again."""
    cfg = write(tmp_path, SMALL)
    out = tmp_path / "out"
    run_sweep(cfg, output=out, workers=1, progress=False)
    jpath = journal_path(out, "small")
    lines = jpath.read_text().splitlines()
    row = json.loads(lines[0])
    row["objective"] = "abc"
    jpath.write_text("\n".join([json.dumps(row)] + lines[1:]) + "\n")
    assert row["key"] not in read_journal(jpath)
    r = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert r.code == 1 and "unreadable line 1" in r.err and "missing" in r.out
    outcome = run_sweep(cfg, output=out, workers=1, progress=False)
    assert outcome.ran == 1
    assert_same_rows(table(out), reference)


def test_parallel_gives_the_same_rows_as_serial(tmp_path, reference):
    cfg = write(tmp_path, SMALL)
    run_sweep(cfg, output=tmp_path / "par", workers=2, progress=False)
    par = table(tmp_path / "par")
    assert list(par["key"]) == list(reference["key"])  # same grid order, whatever finished first
    assert_same_rows(par, reference)
    assert par["pid"].nunique() >= 1


def test_sigkill_midway_then_resume(tmp_path, reference):
    cfg = write(tmp_path, SMALL)
    out = tmp_path / "out"
    jpath = journal_path(out, "small")
    cmd = [sys.executable, "-m", "memsched.experiments.cli", "sweep", str(cfg), "--output", str(out), "--workers", "1",
           "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if jpath.exists() and jpath.read_bytes().count(b"\n") >= 5:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait(timeout=60)
    kept = len(read_journal(jpath))
    assert kept >= 5
    outcome = run_sweep(cfg, output=out, workers=1, progress=False)
    assert outcome.resumed == kept
    assert_same_rows(table(out), reference)


def test_cli_sweep_writes_table(tmp_path, cli):
    cfg = write(tmp_path, sweep_toml("small", budgets=["60%"], **SMALL_GRID))
    r = cli("sweep", cfg, "--output", tmp_path / "o", "--workers", "1", "--no-progress")
    assert r.code == 0, r.err
    assert "12 runs" in r.out and "wrote" in r.out
    assert len(table(tmp_path / "o")) == 12
    r = cli("sweep", cfg, "--output", tmp_path / "o", "--list")
    assert r.code == 0 and r.out.count("done") == 12


def test_yaml_sweep_file(tmp_path):
    cfg = write(tmp_path, f"""
name: y
budgets: ["60%"]
instances:
  - file: {EXAMPLES / 'tiny.json'}
solvers:
  - name: rotor
    slots: 0
  - periodic
""", "s.yaml")
    outcome = run_sweep(cfg, output=tmp_path, workers=1, progress=False)
    assert outcome.total == 2 and {r["solver"] for r in outcome.rows} == {"rotor", "periodic"}


def test_default_options_are_for_the_solvers_that_take_them(tmp_path):
    """[defaults] options = {workers = 1} with an exact and a fast solver: the fast one does not take
    it, and that is no error (the file's solvers together take it)."""
    cfg = write(tmp_path, sweep_toml(budgets=["60%"], instances=[{"file": EXAMPLES / "tiny.json"}],
                                     solvers=["milp", "rotor"], defaults={"options": {"workers": 1}}))
    outcome = run_sweep(cfg, output=tmp_path, workers=1, progress=False)
    assert outcome.total == 2
    assert {r["status"] for r in outcome.rows} <= {"optimal", "feasible", "infeasible"}  # no cell failed


def test_solver_errors_become_rows(tmp_path):
    """An option of the right type that one instance cannot take (more segments than the tiny
    chain's stages) is that cell's error, not the sweep file's."""
    cfg = write(tmp_path, sweep_toml(budgets=["60%"], instances=[{"file": EXAMPLES / "tiny.json"}],
                                     solvers=[{"name": "periodic", "options": {"segments": 99}}]))
    outcome = run_sweep(cfg, output=tmp_path, workers=1, progress=False)
    assert outcome.total == 1
    assert outcome.rows[0]["status"] in ("error", "unsupported", "infeasible", "feasible")


BAD = [
    ('budgets = ["60%"]\nbogus = 1\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "rotor"\n', "bogus"),
    ('budgets = ["sixty"]\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "rotor"\n', "budgets[0]"),
    ('budgets = ["60%"]\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "rotr"\n', "solvers[0].name"),
    ('budgets = ["60%"]\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "rotor"\ntime_limit = -1\n',
     "solvers[0].time_limit"),
    ('budgets = ["60%"]\n[[instances]]\nfile = "nope.json"\n[[solvers]]\nname = "rotor"\n', "instances[0].file"),
    ('budgets = ["60%"]\n[[instances]]\nexample = "nope"\n[[solvers]]\nname = "rotor"\n', "instances[0].example"),
    ('budgets = ["60%"]\n[[instances]]\nexample = "tiny"\nfoo = 2\n[[solvers]]\nname = "rotor"\n',
     "instances[0].foo"),
    ('budgets = ["60%"]\n[[solvers]]\nname = "rotor"\n', "instances"),
    ('[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "rotor"\n', "budgets"),
    ('budgets = ["60%"]\nexecute = true\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "rotor"\n',
     "execute"),
    ('budgets = ["60%"]\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "rotor"\nslots = "many"\n',
     "solvers[0].slots"),
    ('budgets = ["60%"\n', "invalid TOML"),
    # a misspelt option was ignored by every cell; one of the wrong type failed in every cell
    ('budgets = ["60%"]\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "periodic"\noptions = {segment = 2}\n',
     "solvers[0].options.segment"),
    ('budgets = ["60%"]\n[[instances]]\nexample = "tiny"\n[[solvers]]\nname = "periodic"\noptions = {segments = "x"}\n',
     "solvers[0].options.segments"),
    ('budgets = ["60%"]\n[defaults]\noptions = {workers = -1}\n[[instances]]\nexample = "tiny"\n'
     '[[solvers]]\nname = "milp"\n', "defaults.options.workers"),
    ('budgets = ["60%"]\n[defaults]\noptions = {worker = 2}\n[[instances]]\nexample = "tiny"\n'
     '[[solvers]]\nname = "milp"\n[[solvers]]\nname = "rotor"\n', "defaults.options.worker"),
    # a zoo network's sizes are checked before it is profiled (torch's error was many lines)
    ('budgets = ["60%"]\n[[instances]]\nmodel = "resnet18"\nbatch = true\n[[solvers]]\nname = "rotor"\n',
     "instances[0].batch"),
    ('budgets = ["60%"]\n[[instances]]\nmodel = "resnet18"\nimage_size = -4\n[[solvers]]\nname = "rotor"\n',
     "instances[0].image_size"),
]


@pytest.mark.parametrize("text,key", BAD, ids=[k for _, k in BAD])
def test_bad_sweep_file_names_the_key(tmp_path, cli, text, key):
    cfg = write(tmp_path, text)
    r = cli("sweep", cfg, "--output", tmp_path / "o", "--no-progress")
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and str(cfg) in lines[0] and key in lines[0], r.err
    assert "Traceback" not in r.err


def test_missing_sweep_file(cli, tmp_path):
    r = cli("sweep", tmp_path / "absent.toml")
    assert r.code == 2 and "absent.toml" in r.err


def test_committed_configs_parse():
    configs = sorted((ROOT / "experiments" / "configs").glob("*.toml"))
    assert any(p.stem == "default" for p in configs)
    for path in configs:
        try:
            load_config(path)
        except InputError as err:  # only a missing optional part may stop a committed config
            pytest.fail(f"{path.name}: {err}")


def test_dask_path_gives_the_same_rows(tmp_path, reference):
    distributed = pytest.importorskip("dask.distributed")
    cfg = write(tmp_path, SMALL)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        run_sweep(cfg, output=tmp_path / "dask", scheduler=client, progress=False)
    assert_same_rows(table(tmp_path / "dask"), reference)
