"""`memsched figures` on a table that does not cover its sweep's grid, and on rows of one sweep from two
tables run with other settings.

1. A stopped sweep keeps a few rows; the figure was drawn as if complete, its caption saying every missing
   point had no schedule within the budget. Now a one-line note (and the caption) name the sweep with its
   done/total cells of the grid (rebuilt from the committed sweep file, as ``memsched sweep --list``), or
   say the grid is not known when the rows are no cells of that file.
2. ``--results`` is read recursively: two runs of one sweep with other slots were merged and the figure
   drew the median of both. Now exit 2 naming both tables.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
from conftest import run_cli  # noqa: E402
from memsched.experiments import figures as F  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MAIN = ROOT / "results" / "main" / "chain_solvers.csv"  # every cell of experiments/configs/default.toml

pytestmark = pytest.mark.skipif(not MAIN.is_file(), reason="needs the committed results/main table")


def _captions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The caption of every figure drawn (the text under it), recorded as each is finished."""
    seen: list[str] = []
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append("\n".join(t.get_text() for t in fig.texts))
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    return seen


def _only_no_schedule(caption: str) -> bool:
    """Whether `caption` says a missing point is a cell without a schedule, and nothing else."""
    return re.search(r"missing points: no schedule within the budget(?!, or a cell)", " ".join(caption.split())) \
        is not None


def _table(folder: Path, rows: pd.DataFrame) -> Path:
    """`rows` written as ``<folder>/chain_solvers.csv`` (the main job's sweep table); returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    rows.to_csv(folder / "chain_solvers.csv", index=False)
    return folder / "chain_solvers.csv"


def _figures(results: Path, out: Path) -> Any:
    return run_cli("figures", "--results", results, "--out", out, "--only", "main")


# ---------------------------------------------------------------------------- 1. partial tables
def test_a_stopped_sweep_is_drawn_with_its_done_and_total_cells(tmp_path, monkeypatch):
    captions = _captions(monkeypatch)
    full = pd.read_csv(MAIN)
    _table(tmp_path / "r" / "main", full[full["instance"] == "random10"].head(8))
    r = _figures(tmp_path / "r", tmp_path / "out")
    assert r.code == 0, r.err
    (line,) = [n for n in r.out.splitlines() if n.startswith("note: figure main:")]
    assert "sweep chain_solvers: 8 of 180 cells of experiments/configs/default.toml have a row, 172 never ran" \
        in line, r.out
    assert (tmp_path / "out" / "main_overhead.png").is_file()
    (caption, *_) = captions
    assert "8 of 180 cells" in caption
    assert not _only_no_schedule(caption)  # not "no schedule" for cells that never ran
    assert "or a cell that never ran" in " ".join(caption.split())


def test_rows_of_another_sweep_file_say_the_grid_is_not_known(tmp_path, monkeypatch):
    """The hunter's case: a stopped run of a sweep file of one's own named chain_solvers (other slots): its
    rows are no cells of the committed file, so whether all cells ran cannot be known, and is said."""
    captions = _captions(monkeypatch)
    full = pd.read_csv(MAIN)
    own = full[full["instance"] == "random10"].head(8)
    _table(tmp_path / "r" / "main", own.assign(slots=200, key=own["key"] + "-s200"))  # its keys: other settings
    r = _figures(tmp_path / "r", tmp_path / "out")
    assert r.code == 0, r.err
    assert "note: figure main: sweep chain_solvers: its 8 rows are no cells of experiments/configs/default.toml" \
        in r.out, r.out
    assert "not known whether every cell of its grid ran" in r.out
    (caption, *_) = captions
    assert not _only_no_schedule(caption)


def test_a_complete_table_has_no_note_and_the_plain_caption(tmp_path, monkeypatch):
    """Rows whose status means no schedule (infeasible, ...) are cells that ran: the full table of the
    committed grid gets no note, and its caption keeps "missing points: no schedule"."""
    captions = _captions(monkeypatch)
    full = pd.read_csv(MAIN)
    assert (~full["status"].isin(F.FOUND)).any()  # rows without a schedule are there
    _table(tmp_path / "r" / "main", full)
    shutil.copytree(MAIN.parent / "instances", tmp_path / "r" / "main" / "instances")
    r = _figures(tmp_path / "r", tmp_path / "out")
    assert r.code == 0, r.err
    assert "note:" not in r.out, r.out
    (caption, *_) = captions
    assert _only_no_schedule(caption)


def test_grid_note_counts_cells_as_sweep_list_does():
    full = F.load_results(MAIN.parent)
    assert F.grid_note("main", full) is None
    assert F.grid_note("main", full.iloc[:-3]).startswith("sweep chain_solvers: 177 of 180 cells")
    assert F.grid_note("main", full.drop(columns=[F.TABLE_COLUMN])) is None  # rows naming no table: not checked


# ---------------------------------------------------------------------------- 2. two tables of one sweep
def test_two_runs_of_one_sweep_with_other_slots_are_refused(tmp_path):
    full = pd.read_csv(MAIN)
    rows = full[full["instance"] == "random10"]
    a = _table(tmp_path / "r" / "run_10", rows.assign(slots=10))
    b = _table(tmp_path / "r" / "run_500", rows)
    r = _figures(tmp_path / "r", tmp_path / "out")
    assert r.code == 2, (r.code, r.out, r.err)
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert str(a) in r.err and str(b) in r.err and "slots 10 vs 500" in r.err, r.err
    assert not (tmp_path / "out").exists()


def test_other_instance_under_the_same_name_or_other_options_is_refused(tmp_path):
    full = pd.read_csv(MAIN)
    rows = full[full["instance"] == "random10"]
    _table(tmp_path / "h" / "a", rows)
    _table(tmp_path / "h" / "b", rows.assign(instance_hash="0123456789abcdef"))
    with pytest.raises(InputError, match="instance_hash"):
        F.load_results(tmp_path / "h")
    _table(tmp_path / "o" / "a", rows)
    _table(tmp_path / "o" / "b", rows.assign(options='{"x":1}'))
    with pytest.raises(InputError, match="options"):
        F.load_results(tmp_path / "o")


def test_tables_of_one_sweep_with_the_same_settings_are_read_together(tmp_path):
    """A grid split over two folders (one instance each), same settings: read together, as before."""
    full = pd.read_csv(MAIN)
    _table(tmp_path / "r" / "a", full[full["instance"] == "random10"])
    _table(tmp_path / "r" / "b", full[full["instance"] == "tiny"])
    rows = F.load_results(tmp_path / "r")
    assert set(rows["instance"]) == {"random10", "tiny"}
    r = _figures(tmp_path / "r", tmp_path / "out")
    assert r.code == 0, r.err
