"""Resuming sweeps (hunt 26): the main job's stop and resume, a committed table without its journal,
a moved experiment folder, a full disk while journaling, and the papers' graph bench stopped after
its cells."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import EXAMPLES, ROOT, sigint_as_in_a_terminal, sweep_toml, wait_rows
from memsched.experiments.sweep import build_tasks, journal_path, load_config, read_journal, run_sweep
from memsched.experiments.sweep import store as sweep_store
from memsched.solvers.errors import InputError

#: Eight quick cells (two instances x two budgets x two solvers).
QUICK = sweep_toml("q", budgets=["50%", "80%"], defaults={"slots": 100},
                   instances=[{"example": "tiny"}, {"file": EXAMPLES / "random10.json"}],
                   solvers=["store-all", "rotor"])
#: Two quick cells, then a CP-SAT cell that runs for many seconds.
SLOW = sweep_toml("slow", budgets=["50%"], instances=[{"file": EXAMPLES / "random30.json"}],
                  solvers=["store-all", "rotor", {"name": "cpsat", "time_limit": 120}])


def _quick(tmp_path: Path) -> tuple[Path, Path]:
    cfg = tmp_path / "q.toml"
    cfg.write_text(QUICK)
    return cfg, tmp_path / "out"


def _run(cfg: Path, out: Path, **kw):
    return run_sweep(cfg, output=out, workers=1, progress=False, isolate=False, **kw)


def _no_escape(main, argv: list[str]) -> int:
    """``main(argv)``; a `KeyboardInterrupt` that escapes it fails the test (rather than stopping pytest)."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped: a traceback and no exit 130")


# ------------------------------------------------------------------ 1. the main job: stop, message, resume
def _main_job(cfg: Path, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "memsched.experiments.main_job", "--config", str(cfg), "--output", str(out),
           "--workers", "1"]
    return subprocess.Popen(cmd, cwd=cfg.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_as_in_a_terminal)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_main_job_stopped_exits_130_without_traceback_and_says_resume(tmp_path, sig):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    out = tmp_path / "out"
    proc = _main_job(cfg, out)
    wait_rows(journal_path(out, "slow"), 2, proc)
    time.sleep(0.5)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # a terminal's Ctrl-C
    else:
        os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "2/3 rows kept" in err and "rerun with --resume" in err, err
    assert [ln for ln in err.splitlines() if "interrupted" in ln] == [ln for ln in err.splitlines()
                                                                      if ln.startswith("main_job: interrupted: ")], err
    assert len(read_journal(journal_path(out, "slow"))) == 2


def test_main_job_stopped_while_drawing_exits_130_and_says_resume(tmp_path, monkeypatch, capsys):
    from memsched.experiments import main_job

    cfg, out = _quick(tmp_path)

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(main_job, "render", stop)
    assert _no_escape(main_job.main, ["--config", str(cfg), "--output", str(out), "--workers", "1"]) == 130
    err = capsys.readouterr().err
    assert "--resume" in err and str(out) in err
    assert len(pd.read_csv(out / "q.csv")) == 8  # every row is in the table


def test_main_job_reruns_every_cell_by_default_even_over_a_committed_table(tmp_path, capsys):
    """scripts/main.sh regenerates results/main on a fresh clone (a table, no journal); --resume keeps it."""
    from memsched.experiments import main_job

    cfg, out = _quick(tmp_path)
    _run(cfg, out)
    journal_path(out, "q").unlink()
    assert main_job.main(["--config", str(cfg), "--output", str(out), "--workers", "1"]) == 0
    assert "8 runs (8 run now, 0 resumed)" in capsys.readouterr().out
    journal_path(out, "q").unlink()
    assert main_job.main(["--config", str(cfg), "--output", str(out), "--workers", "1", "--resume"]) == 0
    assert "8 runs (0 run now, 8 resumed)" in capsys.readouterr().out


# ------------------------------------------------------------------ 2. a committed table without its journal
def test_a_table_without_journal_is_resumed_not_recomputed(tmp_path):
    cfg, out = _quick(tmp_path)
    _run(cfg, out)
    before = (out / "q.csv").read_bytes()
    journal_path(out, "q").unlink()  # journals are not committed: a fresh clone has the table only
    outcome = _run(cfg, out)
    assert (outcome.total, outcome.resumed, outcome.ran) == (8, 8, 0)
    assert any("no journal" in n for n in outcome.notes)
    assert (out / "q.csv").read_bytes() == before
    assert len(read_journal(journal_path(out, "q"))) == 8  # the journal now holds the table's rows


def test_list_counts_the_rows_of_a_table_without_journal_as_done(tmp_path, cli):
    """`--list` says what a run would resume: with the table only (a fresh clone) every cell was
    listed `todo` while `--verify` read the rows and a run resumed them."""
    cfg, out = _quick(tmp_path)
    _run(cfg, out)
    journal_path(out, "q").unlink()
    res = cli("sweep", str(cfg), "--output", str(out), "--list")
    marks = [line.split()[0] for line in res.out.splitlines() if line.startswith(("done", "todo"))]
    assert res.code == 0 and marks == ["done"] * 8


def test_a_stop_keeps_the_rows_of_a_table_without_journal(tmp_path):
    cfg, out = _quick(tmp_path)
    with pytest.raises(KeyboardInterrupt):  # four finished rows
        _run(cfg, out, on_row=_stop_after(4))
    assert len(pd.read_csv(out / "q.csv")) == 4
    journal_path(out, "q").unlink()
    with pytest.raises(KeyboardInterrupt):  # one more row, then Ctrl-C
        _run(cfg, out, on_row=_stop_after(1))
    table = pd.read_csv(out / "q.csv")
    assert len(table) == 5 and table["key"].is_unique  # not the one row of the new journal
    outcome = _run(cfg, out)
    assert (outcome.resumed, outcome.ran) == (5, 3)


def _stop_after(n: int):
    seen = []

    def on_row(row: dict) -> None:
        seen.append(row)
        if len(seen) >= n:
            raise KeyboardInterrupt
    return on_row


def test_fresh_ignores_a_table_without_journal(tmp_path):
    cfg, out = _quick(tmp_path)
    _run(cfg, out)
    journal_path(out, "q").unlink()
    outcome = _run(cfg, out, fresh=True)
    assert (outcome.resumed, outcome.ran) == (0, 8)


def test_table_rows_of_other_cells_are_kept_in_the_journal_and_left_out_of_the_table(tmp_path):
    cfg, out = _quick(tmp_path)
    _run(cfg, out)
    journal_path(out, "q").unlink()
    cfg.write_text(QUICK.replace('"80%"', '"70%"'))  # four cells changed
    outcome = _run(cfg, out)
    assert (outcome.resumed, outcome.ran) == (4, 4)
    assert any(n.startswith("4 journal rows are not in this grid") for n in outcome.notes)
    assert len(read_journal(journal_path(out, "q"))) == 12 and len(pd.read_csv(out / "q.csv")) == 8


def test_a_seeded_row_keeps_text_that_looks_like_a_number(tmp_path):
    cfg, out = _quick(tmp_path)
    _run(cfg, out)
    table = pd.read_csv(out / "q.csv", dtype=str)
    table["memsched_version"] = "1.10"
    table.to_csv(out / "q.csv", index=False)
    journal_path(out, "q").unlink()
    _run(cfg, out)
    assert {r["memsched_version"] for r in read_journal(journal_path(out, "q")).values()} == {"1.10"}


# ------------------------------------------------------------------ 3. a moved experiment folder
MOVED = """name = "mv"
budgets = ["50%", "80%"]
[defaults]
slots = 100
[[instances]]
file = "c.json"
[[solvers]]
name = "rotor"
[[solvers]]
name = "store-all"
"""


def _folder(root: Path) -> Path:
    root.mkdir()
    shutil.copy(EXAMPLES / "random10.json", root / "c.json")
    (root / "s.toml").write_text(MOVED)
    return root


def test_a_moved_experiment_folder_keeps_its_rows(tmp_path):
    a = _folder(tmp_path / "a")
    assert _run(a / "s.toml", a / "out").ran == 4
    b = tmp_path / "b"
    a.rename(b)
    outcome = _run(b / "s.toml", b / "out")
    assert (outcome.resumed, outcome.ran) == (4, 0), outcome.notes
    assert not any("not in this grid" in n for n in outcome.notes)


def test_rows_keyed_with_the_absolute_path_are_taken_under_the_new_keys(tmp_path):
    """Journals written when the key held the absolute path of a file outside the repository."""
    from memsched.experiments.sweep.grid import task_key

    a = _folder(tmp_path / "a")
    _run(a / "s.toml", a / "out")
    tasks = build_tasks(load_config(a / "s.toml"))
    jpath = journal_path(a / "out", "mv")
    rows = read_journal(jpath)
    old = {t.key: task_key(t, t.loaded.source) for t in tasks}  # the key under the absolute source
    assert all(Path(r["source"]).is_absolute() for r in rows.values())
    jpath.write_text("".join(sweep_store._line({**rows[k], "key": old[k]}).decode() for k in rows))
    outcome = _run(a / "s.toml", a / "out")
    assert (outcome.resumed, outcome.ran) == (4, 0), outcome.notes
    assert set(pd.read_csv(a / "out" / "mv.csv", dtype={"key": str})["key"]) == set(old)
    assert not any("not in this grid" in n for n in outcome.notes)


def test_a_run_takes_no_row_of_the_same_source_under_another_key(tmp_path):
    """Its key differs in something the compared parameters do not show (a host link, measurement
    settings): a resumed run solves the cell again (``--verify`` still re-keys it)."""
    cfg, out = _quick(tmp_path)
    _run(cfg, out)
    jpath = journal_path(out, "q")
    rows = read_journal(jpath).values()
    jpath.write_text("".join(json.dumps({**r, "key": "x" + r["key"]}) + "\n" for r in rows))
    outcome = _run(cfg, out)
    assert (outcome.resumed, outcome.ran) == (0, 8)


@pytest.mark.parametrize("name", ["default", "fig_d_join"])
def test_committed_tables_keep_their_keys(name):
    from memsched.experiments.sweep import CONFIGS, InstanceStore

    config = load_config(CONFIGS / f"{name}.toml")
    out = ROOT / "results" / ("main" if name == "default" else name)
    tasks = build_tasks(config, store=InstanceStore(out / "instances", readonly=True))
    table = pd.read_csv(out / f"{config.name}.csv", dtype={"key": str})
    assert set(table["key"]) == {t.key for t in tasks}


# ------------------------------------------------------------------ 4. a full disk while journaling
def _enospc_on_journal_fsync(monkeypatch, after: int) -> None:
    """os.fsync of a journal (``*.jsonl``) fails with ENOSPC after `after` successful ones."""
    real = os.fsync
    count = [0]

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
            count[0] += 1
            if count[0] > after:
                raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_full_disk_while_journaling_is_one_line_naming_the_journal(tmp_path, monkeypatch, cli):
    cfg, out = _quick(tmp_path)
    _enospc_on_journal_fsync(monkeypatch, after=3)
    res = cli("sweep", str(cfg), "--output", str(out), "--no-progress", "--workers", "1")
    assert res.code == 2, res.err
    assert str(journal_path(out, "q")) in res.err and "No space left on device" in res.err, res.err
    assert "internal error" not in res.err and len(res.err.strip().splitlines()) == 1, res.err
    monkeypatch.undo()
    kept = read_journal(journal_path(out, "q"))  # 4: the fourth row's bytes were written, not synced
    assert len(kept) >= 3 and sorted(pd.read_csv(out / "q.csv", dtype={"key": str})["key"]) == sorted(kept)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_full_disk_for_journal_and_table_names_the_journal_first(tmp_path, monkeypatch):
    from memsched.experiments.sweep import run as sweep_run

    cfg, out = _quick(tmp_path)
    _enospc_on_journal_fsync(monkeypatch, after=2)

    def full(rows, out_dir, name):
        raise InputError("cannot write (No space left on device)", path=str(out_dir / f"{name}.csv"))

    monkeypatch.setattr(sweep_run, "write_table", full)
    with pytest.raises(InputError, match="the table is not written either") as err:
        _run(cfg, out)
    assert err.value.path == str(journal_path(out, "q")) and "q.csv" in str(err.value)


def test_a_journal_that_cannot_be_closed_still_leaves_the_table_written(tmp_path, monkeypatch):
    cfg, out = _quick(tmp_path)
    real_init = sweep_store.Journal.__init__

    class Unclosable:
        def __init__(self, f):
            self._f = f

        def __getattr__(self, name):
            return getattr(self._f, name)

        def close(self):
            self._f.close()
            raise OSError(errno.ENOSPC, "No space left on device")

    def init(self, path):
        real_init(self, path)
        self._f = Unclosable(self._f)

    monkeypatch.setattr(sweep_store.Journal, "__init__", init)
    with pytest.raises(InputError, match="No space left on device") as err:
        _run(cfg, out)
    assert err.value.path == str(journal_path(out, "q"))
    assert len(pd.read_csv(out / "q.csv")) == 8


# ------------------------------------------------------------------ 5. the papers' graph bench after its cells
@pytest.mark.parametrize("step", ["figure", "published_beside"])
def test_bench_papers_graphs_stopped_after_its_cells_exits_130(tmp_path, monkeypatch, capsys, step):
    from memsched.experiments import bench_papers_graphs as bench
    from memsched.solvers.graph import generate

    generate.random_layered(12, 2).save(tmp_path / "random_layered_n100_stand-in.json")
    out = tmp_path / "out.csv"

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, step, stop)
    args = ["--graphs", str(tmp_path), "--instances", "RL100", "--fractions", "0.9", "--time-limit", "1",
            "--out", str(out), "--solvers", "dtr"]
    assert _no_escape(bench.main, args) == 130
    err = capsys.readouterr().err
    assert str(out) in err and "--merge" in err
    assert len(list(out.read_text().splitlines())) == 2  # header and the one cell's row
