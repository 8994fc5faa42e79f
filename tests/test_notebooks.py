"""The notebooks under notebooks/ execute top to bottom (nbclient, a fresh kernel each) within
two minutes, show their figures, and assert their own key numbers.

Each executed copy is saved (under pytest's temporary folder, path printed on failure) and its
``image/png`` outputs are counted: a notebook that draws nothing visible (e.g. one that sets
the Agg backend, so that Jupyter never shows a plot) fails. Every figure a notebook shows is
also checked, in the same run, for a legend-listed series drawn exactly under a later one and
not drawn wider or with larger markers (`experiments/plotting/coincide.py`'s rule).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Figures each notebook must show (image/png outputs); 1 for any notebook not listed.
MIN_IMAGES = {
    "01_budget_tradeoff": 2,
    "02_dp_vs_exact_vs_heuristics": 2,
    "03_pipeline_partitioning": 2,
    "04_interactive_explorer": 8,
    "05_paper_rotor": 2,
    "06_paper_join": 2,
    "07_paper_checkmate": 3,
    "08_paper_pofo": 2,
    "09_paper_pipelines": 3,
    "10_your_own_network": 2,
}
TIME_LIMIT_S = 120.0

#: solvers optimal in a model (exactly, or within a class) that a legend names with it (`plotting.labels.model_labels`:
#: "dp (persistent per branch)"), never bare
MODEL_SOLVERS = ("rotor", "dp", "remat-only", "pofo", "cpsat", "checkmate", "milp", "madpipe", "pipedream", "exact",
                 "revolve", "exact-combined", "offload-exact")
#: Run in the kernel before the notebook's first cell: every figure printed (each one Jupyter shows, and any
#: savefig) is checked first, and each series under another is recorded in `_memsched_hidden`. A line
#: (legend text not starting with "_") every point of which (x, y to a relative 1e-9) is also a point of a
#: line drawn after it in the same axes is hidden unless drawn wider than that line or with larger markers
#: than its filled ones (a hollow marker, as `mark_coinciding` draws, covers nothing inside it).
#: Only matplotlib's canvas is patched, not pyplot, so the notebook still picks its own backend.
PROBE = r"""
def _memsched_probe(MODEL_SOLVERS=%r):
    import numpy as np
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.colors import to_rgba

    hidden = []
    bare = []  # legend texts that name a solver optimal in a model without that model

    def width(line):  # points; 0 when no line is drawn
        return line.get_linewidth() if line.get_linestyle() not in ("None", "none", "", " ") else 0.0

    def marker(line):  # points; 0 when no marker is drawn
        return line.get_markersize() if line.get_marker() not in (None, "None", "none", "", " ") else 0.0

    def cover(line):  # points: the markers' size, 0 when they are hollow
        return marker(line) if to_rgba(line.get_markerfacecolor())[3] > 0 else 0.0

    def check(fig):
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
        for text in (t.get_text() for legend in legends if legend is not None for t in legend.get_texts()):
            if text in MODEL_SOLVERS and text not in bare:
                bare.append(text)
        for k, ax in enumerate(fig.axes):
            lines = [ln for ln in ax.get_lines() if ln.get_visible() and not str(ln.get_label()).startswith("_")]
            pts = [np.column_stack([np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)])
                   for ln in lines]
            pts = [p[np.isfinite(p).all(axis=1)] for p in pts]
            for i, (a, pa) in enumerate(zip(lines, pts)):
                for b, pb in zip(lines[i + 1:], pts[i + 1:]):
                    if (len(pa) and np.isclose(pa[:, None, :], pb[None, :, :], rtol=1e-9, atol=0).all(axis=2)
                            .any(axis=1).all() and width(a) <= width(b) and marker(a) <= cover(b)):
                        text = (f"panel {k} {ax.get_title()!r}: {a.get_label()!r} ({len(pa)} points, lw "
                                f"{width(a):g}, ms {marker(a):g}) under {b.get_label()!r} (lw {width(b):g}, "
                                f"filled ms {cover(b):g})")
                        if text not in hidden:
                            hidden.append(text)

    original = FigureCanvasBase.print_figure

    def print_figure(self, *args, **kwargs):
        check(self.figure)
        return original(self, *args, **kwargs)

    FigureCanvasBase.print_figure = print_figure
    return hidden, bare, check


_memsched_hidden, _memsched_bare, _memsched_check = _memsched_probe()
del _memsched_probe
"""
#: Run after the notebook's last cell: figures still open (never shown) are checked too; one line of JSON.
REPORT = r"""
import json as _json
import sys as _sys

if "matplotlib.pyplot" in _sys.modules:
    for _n in _sys.modules["matplotlib.pyplot"].get_fignums():
        _memsched_check(_sys.modules["matplotlib.pyplot"].figure(_n))
print("HIDDEN-SERIES", _json.dumps({"hidden": _memsched_hidden, "bare": _memsched_bare}))
"""


def execute(path: Path, workdir: Path) -> tuple[object, float, list[str], list[str]]:
    """Run the notebook at `path` with `workdir` as its working folder; (executed book, seconds, hidden
    series: one text per series of a shown figure drawn exactly under a later one, see `PROBE`; legend
    texts naming one of `MODEL_SOLVERS` bare). The executed book has the probe's two cells first and last."""
    book = nbformat.read(path, as_version=4)
    probe = nbformat.v4.new_code_cell(PROBE % (MODEL_SOLVERS,))
    book.cells = [probe, *book.cells, nbformat.v4.new_code_cell(REPORT)]
    client = nbclient.NotebookClient(book, timeout=TIME_LIMIT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell on any error
    seconds = time.perf_counter() - start
    report = [line for o in book.cells[-1].get("outputs", []) if o.get("output_type") == "stream"
              for line in o["text"].splitlines() if line.startswith("HIDDEN-SERIES ")]
    assert len(report) == 1, book.cells[-1].get("outputs")
    found = json.loads(report[0].removeprefix("HIDDEN-SERIES "))
    return book, seconds, found["hidden"], found["bare"]


def outputs(book) -> list[dict]:
    return [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def test_there_are_notebooks():
    names = {p.stem for p in NOTEBOOKS}
    assert len(NOTEBOOKS) >= 9
    assert set(MIN_IMAGES) <= names, set(MIN_IMAGES) - names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_clean_source(path: Path):
    """Committed without outputs, never hiding plots behind Agg, each with an assert of its numbers."""
    book = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in book.cells if c.cell_type == "code")
    assert not re.search(r"""matplotlib\.use\(|MPLBACKEND|["']Agg["']""", code)
    assert "assert " in code
    assert not outputs(book), "commit notebooks without outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_shows_its_figures(path: Path, tmp_path_factory: pytest.TempPathFactory):
    book, seconds, hidden, bare = execute(path, path.parent)
    saved = tmp_path_factory.mktemp("executed") / path.name
    nbformat.write(book, saved)
    outs = outputs(book)
    assert not [o for o in outs if o.get("output_type") == "error"], saved
    images = sum("image/png" in o.get("data", {}) for o in outs)
    assert images >= MIN_IMAGES.get(path.stem, 1), f"{images} figures shown; executed copy: {saved}"
    assert seconds < TIME_LIMIT_S, f"{path.name} took {seconds:.0f} s"
    # a series the legend lists but drawn exactly under a later one: use mark_coinciding / coinciding_note
    assert not hidden, f"series hidden under another in {path.name} ({saved}):\n" + "\n".join(hidden)
    # each solver with the model it is optimal in, as the library's figures name it (plotting.labels.model_labels)
    assert not bare, f"legend of {path.name} names {bare} without their model ({saved})"


def test_a_notebook_next_to_its_own_models_package(tmp_path: Path):
    """A researcher's folder with its own `models/` (and `experiments/`) package: the notebook
    still gets memsched's parts under memsched.*, and its own package under its own name."""
    for name in ("models", "experiments", "solvers"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("MINE = True\n")
    cells = [
        "import models, experiments, solvers\nimport memsched\nimport memsched.models, memsched.solvers",
        "assert models.MINE and experiments.MINE and solvers.MINE\n"
        "assert memsched.models.__file__ != models.__file__ and memsched.solvers.__file__ != solvers.__file__",
        "r = memsched.solve(memsched.data_path('examples', 'cnn12.json'), '60%', solver='rotor', slots=100)\n"
        "assert r.status == 'optimal'\nr.plot()",
    ]
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in cells])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "mine.ipynb"
    nbformat.write(book, path)
    executed, _, hidden, _ = execute(path, tmp_path)
    assert sum("image/png" in o.get("data", {}) for o in outputs(executed)) == 1
    assert not hidden
