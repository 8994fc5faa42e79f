"""Fixes from a bug hunt on sweeps: Dask failures, Ctrl-C at start-up, the API's output and
budgets, duplicate budgets, a table that lags its journal, the rotor option list."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import EXAMPLES, ROOT, sweep_toml
from memsched.experiments.sweep import journal_path, read_journal, run_sweep
from memsched.experiments.sweep import run as sweep_run
from memsched.solvers import registry
from memsched.solvers.errors import InputError

import memsched

TINY = EXAMPLES / "tiny.json"


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def small(tmp_path: Path, name: str = "small") -> Path:
    """Four quick cells: tiny.json x 2 budgets x (rotor, store-all)."""
    return write(tmp_path, sweep_toml(name, budgets=["90%", "100%"], instances=[{"file": TINY}],
                                      solvers=["rotor", "store-all"]), f"{name}.toml")


@pytest.fixture
def sigint_default():
    """SIGINT raises KeyboardInterrupt in this process (a background test run may inherit it ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


# ------------------------------------------------------------------ 1. Dask: a failed task, a lost scheduler
def kill_first_cell(task):
    """A Dask task whose worker died each time it ran the cell (as Dask reports it), for cell 0."""
    from distributed.scheduler import KilledWorker
    from memsched.experiments.sweep.cell import run_task

    if task.position == 0:
        last_worker = type("WorkerState", (), {"address": "tcp://127.0.0.1:1"})()
        raise KilledWorker(f"memsched-{task.key}", last_worker, 3)
    return run_task(task)


def test_a_killed_dask_worker_is_an_error_row_not_the_end_of_the_sweep(tmp_path, monkeypatch):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr(sweep_run, "run_task", kill_first_cell)
    cfg = small(tmp_path)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        outcome = run_sweep(cfg, output=tmp_path / "out", scheduler=client, progress=False)
    assert outcome.ran == outcome.total == 4 and outcome.errors == 1
    first = outcome.rows[0]
    assert first["status"] == "error" and "KilledWorker" in first["message"], first
    assert all(r["status"] != "error" for r in outcome.rows[1:])
    assert len(read_journal(journal_path(tmp_path / "out", "small"))) == 4  # a rerun does not run it again


class FakeFuture:
    def __init__(self, key: str, task, lost: bool) -> None:
        self.key, self.task, self.lost = key, task, lost
        self.status = "cancelled" if lost else "finished"

    def result(self):
        from distributed.client import FutureCancelledError

        logging.getLogger("distributed.client").error("NOISE: a dozen lines of tracebacks")
        if self.lost:
            raise FutureCancelledError(self.key, "scheduler-connection-lost")
        return sweep_run.run_task(self.task)


class FakeClient:
    """A Dask client whose scheduler is lost after the first cell."""

    def __init__(self) -> None:
        self.futures: list[FakeFuture] = []
        self.scheduler = type("Rpc", (), {"address": "tcp://127.0.0.1:8786"})()

    def submit(self, fn, task, **kwargs) -> FakeFuture:
        fut = FakeFuture(kwargs["key"], task, lost=bool(self.futures))
        self.futures.append(fut)
        return fut

    def cancel(self, futures) -> None:
        pass


def test_a_lost_dask_scheduler_is_one_clean_error_and_keeps_the_finished_rows(tmp_path, monkeypatch, capfd):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setattr(distributed, "as_completed", lambda futures: iter(futures))
    cfg = small(tmp_path)
    with pytest.raises(sweep_run.SchedulerLost) as err:
        run_sweep(cfg, output=tmp_path / "out", scheduler=FakeClient(), progress=False)
    assert isinstance(err.value, InputError) and err.value.field == "--scheduler"
    assert "lost the Dask scheduler" in str(err.value) and "1/4 rows kept" in str(err.value)
    assert "\n" not in str(err.value)
    assert len(read_journal(journal_path(tmp_path / "out", "small"))) == 1
    assert len(pd.read_csv(tmp_path / "out" / "small.csv")) == 1  # the table is written
    assert "NOISE" not in capfd.readouterr().err  # Dask's own logs are kept off stderr meanwhile


# ------------------------------------------------------------------ 2. Ctrl-C while workers start
SIGNALLED_POOL = """
import json, os, signal, sys
from memsched.experiments.sweep import build_tasks, load_config
from memsched.experiments.sweep.cell import failed_row, run_task
from memsched.experiments.sweep.pool import WorkerPool

class Signalled(WorkerPool):
    def _start_worker(self):
        worker = super()._start_worker()
        os.kill(worker.proc.pid, signal.SIGINT)  # a Ctrl-C while it is still importing memsched
        return worker

tasks = build_tasks(load_config(sys.argv[1]))
rows = list(Signalled(2, run_task).results(tasks, crashed=failed_row))
print(json.dumps([[r["status"], r.get("message")] for r in rows]))
"""


def test_a_ctrl_c_while_a_worker_imports_does_not_kill_it(tmp_path):
    """In a fresh process (the first worker also starts multiprocessing's resource tracker)."""
    cfg = small(tmp_path)
    proc = subprocess.run([sys.executable, "-c", SIGNALLED_POOL, str(cfg)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False, preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                                              signal.SIG_DFL))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 4 and all(status != "error" for status, _ in rows), rows
    assert "KeyboardInterrupt" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_signal_while_a_worker_starts_is_held_then_delivered(sigint_default):
    from memsched.experiments.sweep.pool import _starting

    reached = False
    with pytest.raises(KeyboardInterrupt):
        with _starting():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)  # the handler would run here
            reached = True
    assert reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ------------------------------------------------------------------ 3. Ctrl-C while the sweep starts
def test_an_import_failed_by_ctrl_c_is_an_interrupt_not_a_missing_solver(monkeypatch):
    import memsched.solvers.problem as problem_module

    def interrupted_import(target):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as err:  # pybind11's module init: ImportError caused by the interrupt
            raise ImportError("initialization failed") from err

    monkeypatch.setattr(problem_module, "resolve", interrupted_import)
    with pytest.raises(KeyboardInterrupt):
        registry.get_problem("chain").solver("cpsat")

    def missing(target):
        raise ImportError("No module named 'ortools'")

    monkeypatch.setattr(problem_module, "resolve", missing)
    with pytest.raises(InputError, match="not available here"):
        registry.get_problem("chain").solver("cpsat")


def test_a_problem_package_import_failed_by_ctrl_c_is_not_skipped(monkeypatch):
    from memsched.experiments.sweep import config as sweep_config

    def interrupted_import(problem):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as err:
            raise ImportError("initialization failed") from err

    monkeypatch.setattr(sweep_config.registry, "get_problem", interrupted_import)
    with pytest.raises(KeyboardInterrupt):
        sweep_config._has_problem("graph")


def interrupt_then(wrap: bool):
    """A Ctrl-C arrives (SIGINT to this process); an import wraps it in a RuntimeError (as
    ``__set_name__`` does) or swallows it (`wrap` false)."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(2)
    except KeyboardInterrupt as err:
        if wrap:
            raise RuntimeError("Error calling __set_name__ on 'cached_property' instance") from err
        return
    raise AssertionError("no SIGINT came")


def test_a_ctrl_c_wrapped_while_reading_the_file_exits_130(tmp_path, monkeypatch, cli, sigint_default):
    import memsched.experiments.sweep as sweep_pkg

    cfg = small(tmp_path)
    real = sweep_pkg.load_config

    def load(path):
        interrupt_then(wrap=True)
        return real(path)

    monkeypatch.setattr(sweep_pkg, "load_config", load)
    r = cli("sweep", cfg, "--output", tmp_path / "out", "--list")
    assert r.code == 130, r.err
    assert "interrupted" in r.err and "internal error" not in r.err


def test_a_ctrl_c_swallowed_while_reading_the_file_exits_130(tmp_path, monkeypatch, cli, sigint_default):
    import memsched.experiments.sweep as sweep_pkg

    cfg = small(tmp_path)
    real = sweep_pkg.load_config

    def load(path):
        interrupt_then(wrap=False)
        return real(path)

    monkeypatch.setattr(sweep_pkg, "load_config", load)
    r = cli("sweep", cfg, "--output", tmp_path / "out", "--workers", "1", "--no-progress")
    assert r.code == 130, (r.out, r.err)
    assert not journal_path(tmp_path / "out", "small").exists()  # no cell ran


def test_run_sweep_stops_before_any_cell_after_a_swallowed_ctrl_c(tmp_path, monkeypatch, sigint_default):
    cfg = small(tmp_path)
    real = sweep_run.build_tasks

    def build(*args, **kwargs):
        interrupt_then(wrap=False)  # e.g. a solver skipped as "not importable"
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_run, "build_tasks", build)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, output=tmp_path / "out", workers=1, progress=False)
    assert not journal_path(tmp_path / "out", "small").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the caller's handler is back


# ------------------------------------------------------------------ 4. the API's output folder
@pytest.mark.parametrize("where", ["file", "under-file", "proc"])
def test_api_sweep_of_a_bad_output_is_input_error_naming_output(tmp_path, where):
    cfg = small(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("")
    out = {"file": afile, "under-file": afile / "sub", "proc": Path("/proc/memsched-x/y")}[where]
    if where == "proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    with pytest.raises(InputError) as err:
        memsched.sweep(cfg, output=out)
    assert err.value.field == "output"
    assert afile.read_text() == ""


# ------------------------------------------------------------------ 5. duplicate budgets
def test_a_budget_given_twice_is_refused(tmp_path, cli):
    cfg = write(tmp_path, sweep_toml("dup", budgets=["90%", "100%", "90%"], instances=[{"example": "tiny"}],
                                     solvers=["rotor"]))
    r = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress")
    assert r.code == 2 and "budgets[2]" in r.err and "Traceback" not in r.err, r.err
    assert not (tmp_path / "out" / "dup.csv").exists()
    cfg = write(tmp_path, sweep_toml("dup", budgets=["90%"], instances=[{"example": "tiny", "budgets": [1000, "1000"]}],
                                     solvers=["rotor"]))
    r = cli("sweep", cfg, "--list")
    assert r.code == 2 and "instances[0].budgets[1]" in r.err, r.err


def test_api_instance_sweep_budgets_are_checked_by_index():
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, ["90%", "90%"])
    assert err.value.field == "budgets[1]"
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, [])
    assert err.value.field == "budgets"
    with pytest.raises(InputError) as err:
        memsched.sweep(TINY, ["90%", "100%", "lots"])
    assert err.value.field == "budgets[2]"
    assert len(memsched.sweep(TINY, ["90%", "100%"]).to_pandas()) == 2


# ------------------------------------------------------------------ 6. a table that lags its journal
def test_verify_and_list_say_when_the_table_is_stale(tmp_path, cli):
    inst = tmp_path / "inst.json"
    inst.write_text(TINY.read_text())
    cfg = write(tmp_path, sweep_toml("rv", budgets=["90%", "100%"], instances=[{"file": "inst.json"}],
                                     solvers=["rotor", "store-all"]))
    out = tmp_path / "out"
    args = ("--output", out, "--workers", "1", "--no-progress")
    assert cli("sweep", cfg, *args).code == 0  # file A
    data = json.loads(TINY.read_text())
    data["stages"][0]["fwd_time"] = 3.0
    inst.write_text(json.dumps(data))
    assert cli("sweep", cfg, *args).code == 0  # file B: the table holds B's rows
    inst.write_text(TINY.read_text())  # back to A: the journal's rows of the grid are A's again

    r = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert r.code == 1 and "stale" in r.out and "rerun the sweep" in r.out, r.out
    r = cli("sweep", cfg, "--output", out, "--list")
    assert r.code == 0 and "stale" in r.out, r.out

    assert cli("sweep", cfg, *args).code == 0  # every cell done: the table is rewritten from the journal
    r = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert r.code == 0 and "stale" not in r.out, r.out
    assert "stale" not in cli("sweep", cfg, "--output", out, "--list").out


def test_verify_update_rewrites_a_stale_table(tmp_path, cli):
    cfg = small(tmp_path)
    out = tmp_path / "out"
    assert cli("sweep", cfg, "--output", out, "--workers", "1", "--no-progress").code == 0
    csv = out / "small.csv"
    frame = pd.read_csv(csv)
    frame.iloc[:2].to_csv(csv, index=False)  # a table that lost rows (e.g. hand-edited)
    r = cli("sweep", cfg, "--output", out, "--verify", "--no-progress")
    assert r.code == 1 and "2 journaled rows missing" in r.out, r.out
    r = cli("sweep", cfg, "--output", out, "--verify", "--update", "--no-progress")
    assert r.code == 0 and "rewrote the table" in r.out, r.out
    assert len(pd.read_csv(csv)) == 4


# ------------------------------------------------------------------ the rotor option list
def test_an_unknown_rotor_option_does_not_list_table_budget(tmp_path, cli):
    cfg = write(tmp_path, sweep_toml("opt", budgets=["90%"], instances=[{"example": "tiny"}],
                                     solvers=[{"name": "rotor", "options": {"foo": 1}}]))
    r = cli("sweep", cfg, "--list")
    assert r.code == 2 and "solvers[0].options.foo" in r.err and "table_budget" not in r.err, r.err
