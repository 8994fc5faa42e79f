"""The notebooks under notebooks/ execute top to bottom (nbclient, a fresh kernel each) within
two minutes, show their figures, and assert their own key numbers.

Each executed copy is saved (under pytest's temporary folder, path printed on failure) and its
``image/png`` outputs are counted: a notebook that draws nothing visible (e.g. one that sets
the Agg backend, so that Jupyter never shows a plot) fails.
"""

from __future__ import annotations

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


def execute(path: Path, workdir: Path) -> tuple[object, float]:
    """Run the notebook at `path` with `workdir` as its working folder; (executed book, seconds)."""
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(book, timeout=TIME_LIMIT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell on any error
    return book, time.perf_counter() - start


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
    book, seconds = execute(path, path.parent)
    saved = tmp_path_factory.mktemp("executed") / path.name
    nbformat.write(book, saved)
    outs = outputs(book)
    assert not [o for o in outs if o.get("output_type") == "error"], saved
    images = sum("image/png" in o.get("data", {}) for o in outs)
    assert images >= MIN_IMAGES.get(path.stem, 1), f"{images} figures shown; executed copy: {saved}"
    assert seconds < TIME_LIMIT_S, f"{path.name} took {seconds:.0f} s"


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
    executed, _ = execute(path, tmp_path)
    assert sum("image/png" in o.get("data", {}) for o in outputs(executed)) == 1
