"""`memsched figures` stopped by a Ctrl-C leaves every figure all-new or all-old (its PNG and PDF from
one run) and has printed a ``wrote`` line for each file it replaced, and for no other (exit 130).
Before, the PNG of the figure being saved could be new beside its old PDF, and the ``wrote`` lines
came only after every figure had been drawn, so an interrupted run named none of the files it had
replaced. Also: figure (g)'s docstring and the note drawn under it say what its memory panels divide
(`memory_ratio`: the measured peak over the replay's peak under the tracker's own overheads)."""

from __future__ import annotations

import signal
from pathlib import Path

import pandas as pd
import pytest
from conftest import main_figure_results
from memsched.experiments.figures import FIGURES, make_figures
from memsched.experiments.sweep import write_table

OLD = {"png": b"old png of an earlier run", "pdf": b"old pdf of an earlier run"}
DRAWN = ("main", "b")  # the figures the results below draw, in the order they are drawn


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder with a one-cell sweep of the main figure and the same rows as sweep (b)."""
    root = main_figure_results(tmp_path_factory.mktemp("results"))
    rows = pd.read_csv(root / "chain_solvers" / "chain_solvers.csv")
    b = rows.assign(sweep="fig_b_solve_time", key=rows["key"] + "b")
    write_table(b.to_dict("records"), root / "fig_b_solve_time", "fig_b_solve_time")
    return root


def old_figures(out: Path) -> dict[Path, bytes]:
    """`out` holding an earlier run's files of every figure drawn (placeholder bytes); returns them."""
    out.mkdir()
    files = {}
    for fid in DRAWN:
        for ext, data in OLD.items():
            path = out / f"{FIGURES[fid].stem}.{ext}"
            path.write_bytes(data)
            files[path] = data
    return files


@pytest.fixture
def sigint_raises():
    """SIGINT at Python's own handler (a Ctrl-C raises `KeyboardInterrupt`), as in a terminal, also
    when the tests run as a background job (which inherits SIGINT ignored); restored after."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def ctrl_c_after_first_png(monkeypatch) -> list[Path]:
    """Make the first atomic write of a PNG send this process a SIGINT (a Ctrl-C) once it has put the
    file in place: the moment a figure's PNG is new and its PDF may not be. Returns the PNGs written."""
    from memsched.solvers import jsonio

    real = jsonio.write_atomic
    pngs: list[Path] = []

    def write_atomic(path, write):
        done = real(path, write)
        if Path(path).suffix == ".png" and not pngs:
            pngs.append(Path(path))
            signal.raise_signal(signal.SIGINT)
        return done

    monkeypatch.setattr(jsonio, "write_atomic", write_atomic)
    return pngs


def test_ctrl_c_while_saving_leaves_each_figure_all_new_or_all_old(results, tmp_path, cli, monkeypatch,
                                                                    sigint_raises):
    out = tmp_path / "figs"
    before = old_figures(out)
    pngs = ctrl_c_after_first_png(monkeypatch)
    r = cli("figures", "--results", results, "--out", out)
    assert pngs == [out / f"{FIGURES[DRAWN[0]].stem}.png"]  # the interrupt came where it was meant to
    assert r.code == 130, (r.code, r.out, r.err)
    assert "memsched figures: interrupted" in r.err and "Traceback" not in r.err
    replaced = set()
    for fid in DRAWN:
        png, pdf = (out / f"{FIGURES[fid].stem}.{ext}" for ext in ("png", "pdf"))
        new = [png.read_bytes() != before[png], pdf.read_bytes() != before[pdf]]
        assert new[0] == new[1], f"figure {fid}: PNG {'new' if new[0] else 'old'}, PDF {'new' if new[1] else 'old'}"
        if all(new):
            assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:4] == b"%PDF"
            replaced |= {png, pdf}
    assert replaced == {out / f"{FIGURES[DRAWN[0]].stem}.{ext}" for ext in ("png", "pdf")}
    wrote = [line.removeprefix("wrote ") for line in r.out.splitlines() if line.startswith("wrote ")]
    assert sorted(wrote) == sorted(str(p) for p in replaced), r.out  # every file replaced, and no other
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in before)  # no temporary file left


def test_uninterrupted_run_prints_notes_then_each_file_once(results, tmp_path, cli):
    """Without an interrupt the output is as before: the notes, then one ``wrote`` line per file, in the
    order drawn (each figure's PNG, then its PDF), the files `make_figures` returns."""
    r = cli("figures", "--results", results, "--out", tmp_path / "figs")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    notes = [n for n in lines if n.startswith("note: ")]
    assert lines[:len(notes)] == notes and notes  # figures (a), (c)-(g) skipped: the notes come first
    expected = [tmp_path / "figs" / f"{FIGURES[fid].stem}.{ext}" for fid in DRAWN for ext in ("png", "pdf")]
    assert lines[len(notes):] == [f"wrote {p}" for p in expected]
    written, returned_notes = make_figures(results, tmp_path / "again")
    assert [p.name for p in written] == [p.name for p in expected]
    assert [f"note: {n}" for n in returned_notes] == notes


def test_make_figures_reports_each_figure_as_its_files_land(results, tmp_path):
    """`on_notes` gets the notes before any figure is drawn; `on_saved` each figure's files once both
    are in place (so a caller can name them even if the run is stopped right after)."""
    events: list[tuple[str, list[str]]] = []

    def saved(paths: list[Path]) -> None:
        assert all(p.is_file() for p in paths)
        events.append(("saved", [p.name for p in paths]))

    written, notes = make_figures(results, tmp_path, on_notes=lambda n: events.append(("notes", list(n))),
                                  on_saved=saved)
    assert events[0] == ("notes", notes)
    assert events[1:] == [("saved", [f"{FIGURES[fid].stem}.png", f"{FIGURES[fid].stem}.pdf"]) for fid in DRAWN]
    assert [p.name for p in written] == [name for _, names in events[1:] for name in names]


# ------------------------------------------------------------------------------ figure (g): what it plots
def test_figure_g_note_and_docstring_name_the_ratio_drawn(tmp_path, monkeypatch):
    """The tracker panel draws `memory_ratio` (measured over the replay's peak under the tracker's own
    overheads, ``tracker_predicted_peak``), not ``measured_peak / peak_memory`` (only the fallback of
    rows without it), and the note under the figure and the module docstring say so."""
    from memsched.experiments import figure_g
    from memsched.experiments import figures as F

    notes: list[str] = []
    monkeypatch.setattr(F, "_finish", lambda fig, rows, out_dir, stem, note="": notes.append(note) or [])
    rows = pd.DataFrame({"instance": ["c1", "c1"], "problem": ["chain", "chain"], "budget_spec": ["50%", "80%"],
                         "measured_peak": [900.0, 1000.0], "peak_memory": [1000.0, 1100.0],
                         "tracker_predicted_peak": [950.0, 1000.0], "memory_ratio": [900 / 950, 1.0],
                         "device": ["cpu", "cpu"]})
    figure_g.measured_ratios(rows, tmp_path, "g", "(g)")
    (note,) = notes
    assert "memory_ratio" in note and "tracker_predicted_peak" in note and "tracker's overheads" in note
    doc = " ".join((figure_g.__doc__ or "").split())
    tracker = doc[doc.index("memory by the tensor tracker"):doc.index("memory by the independent method")]
    assert "memory_ratio" in tracker and "tracker_predicted_peak" in tracker
    assert "measured_peak / peak_memory" not in tracker
