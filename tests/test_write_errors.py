"""Output paths that cannot be written are bad input naming the path (exit 2), found before any
work: `memsched figures` with a folder in place of a figure's file or an ``--out`` that cannot be
made, `memsched sweep` with a folder in place of its journal, table or lock file, or a file in
place of ``<output>/instances``. They were internal errors (exit 3), or (the table) found only
once every cell had run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import main_figure_results, sweep_toml
from memsched.experiments.figures import FIGURES, make_figures, render
from memsched.experiments.sweep import InstanceStore, load_config, run_sweep
from memsched.experiments.sweep.lock import LOCK_NAME, SweepLock
from memsched.experiments.sweep.store import Journal
from memsched.solvers.errors import InputError

TINY = sweep_toml("s", budgets=["60%"], instances=[{"example": "tiny"}], solvers=["rotor"])
MAIN = FIGURES["main"].stem


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder with a one-cell sweep of the main figure (rotor on the tiny example)."""
    return main_figure_results(tmp_path_factory.mktemp("results"))


def one_line_error(err: str, path: Path | str) -> None:
    """`err` (stderr of the command) is one error line naming `path`, no traceback."""
    assert err.count("\n") == 1 and "error:" in err and str(path) in err, err
    assert "internal error" not in err and "Traceback" not in err


# ------------------------------------------------------------------ figures
def test_figures_a_folder_in_place_of_a_figure_is_exit_2(results, tmp_path, cli):
    figs = tmp_path / "figs"
    (figs / f"{MAIN}.png").mkdir(parents=True)
    r = cli("figures", "--results", results, "--out", figs, "--only", "main")
    assert r.code == 2
    one_line_error(r.err, figs / f"{MAIN}.png")
    assert not (figs / f"{MAIN}.pdf").exists()


def test_figures_nothing_is_written_before_the_error(results, tmp_path):
    """The folder in place of the PDF is found before the PNG is written."""
    figs = tmp_path / "figs"
    (figs / f"{MAIN}.pdf").mkdir(parents=True)
    with pytest.raises(InputError, match="is a folder") as info:
        make_figures(results, figs, ["main"])
    assert info.value.path == str(figs / f"{MAIN}.pdf")
    assert sorted(p.name for p in figs.iterdir()) == [f"{MAIN}.pdf"]


def test_figures_a_default_folder_that_is_a_file_is_exit_2(results, tmp_path, cli):
    """Without --out the figures go to <results>/figures, which the command did not check."""
    copy = tmp_path / "results"
    shutil.copytree(results / "chain_solvers", copy / "chain_solvers")
    (copy / "figures").write_text("not a folder")
    r = cli("figures", "--results", copy, "--only", "main")
    assert r.code == 2
    one_line_error(r.err, copy / "figures")


def test_figures_a_folder_that_cannot_be_made_is_input_error(results, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="cannot make the folder") as info:
        make_figures(results, tmp_path / "file" / "figs", ["main"])
    assert info.value.path == str(tmp_path / "file" / "figs")


def test_render_a_figure_that_cannot_be_written_is_input_error(results, tmp_path):
    from memsched.experiments.figures import load_results

    (tmp_path / f"{MAIN}.png").mkdir()
    with pytest.raises(InputError, match="cannot write") as info:
        render("main", load_results(results), tmp_path)
    assert info.value.path == str(tmp_path / f"{MAIN}.png")


def test_figures_all_skipped_make_no_folder(tmp_path):
    written, notes = make_figures(tmp_path, tmp_path / "out")
    assert written == [] and notes and not (tmp_path / "out").exists()


# ------------------------------------------------------------------ sweep: checked before any work
def blocked_sweep(tmp_path: Path, entry: str, kind: str) -> tuple[Path, Path]:
    """(sweep file, output folder) where the output folder holds `entry`, a folder (`kind` "dir")
    or an empty file, in the way of what the sweep writes."""
    cfg = tmp_path / "s.toml"
    cfg.write_text(TINY)
    out = tmp_path / "out"
    out.mkdir()
    if kind == "dir":
        (out / entry).mkdir()
    else:
        (out / entry).write_text("")
    return cfg, out


@pytest.mark.parametrize(("entry", "kind", "message"), [
    ("s.jsonl", "dir", "journal"), ("s.csv", "dir", "table"), (LOCK_NAME, "dir", "lock file"),
    ("instances", "file", "stored instances")])
def test_sweep_output_path_in_the_way_is_input_error_before_any_work(tmp_path, entry, kind, message):
    cfg, out = blocked_sweep(tmp_path, entry, kind)
    with pytest.raises(InputError, match=message) as info:
        run_sweep(cfg, output=out, workers=1, progress=False, isolate=False)
    assert info.value.path == str(out / entry)
    assert [p.name for p in out.iterdir()] == [entry]  # no journal, instance, lock or table written


@pytest.mark.parametrize(("entry", "kind"), [("s.jsonl", "dir"), ("instances", "file"), (LOCK_NAME, "dir")])
def test_sweep_command_output_path_in_the_way_is_exit_2(tmp_path, cli, entry, kind):
    cfg, out = blocked_sweep(tmp_path, entry, kind)
    r = cli("sweep", cfg, "--output", out, "--workers", "1", "--no-progress")
    assert r.code == 2
    one_line_error(r.err, out / entry)
    assert [p.name for p in out.iterdir()] == [entry]


# ------------------------------------------------------------------ sweep: the writers themselves
def test_journal_that_cannot_be_opened_is_input_error(tmp_path):
    (tmp_path / "s.jsonl").mkdir()
    with pytest.raises(InputError, match="journal") as info:
        Journal(tmp_path / "s.jsonl")
    assert info.value.path == str(tmp_path / "s.jsonl")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="cannot make the folder") as info:
        Journal(tmp_path / "file" / "s.jsonl")
    assert info.value.path == str(tmp_path / "file")


def test_instance_store_folder_that_is_a_file_is_input_error(tmp_path):
    (tmp_path / "instances").write_text("")
    spec = load_config(_write(tmp_path, TINY)).instances[0]
    store = InstanceStore(tmp_path / "instances")
    with pytest.raises(InputError, match="stored instances") as info:
        store.put(spec, b"{}", label="tiny", problem="chain", source="test")
    assert info.value.path == str(tmp_path / "instances")


def test_lock_file_that_cannot_be_opened_is_input_error(tmp_path):
    (tmp_path / LOCK_NAME).mkdir()
    with pytest.raises(InputError, match="lock file") as info, SweepLock(tmp_path, "s"):
        pass
    assert info.value.path == str(tmp_path / LOCK_NAME)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path
