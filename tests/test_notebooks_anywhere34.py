"""Notebooks that work from any working folder and leave nothing behind; the instance sweep's overheads.

The paper notebook 08 and the explorer 04 read the chains committed under results/offload/profiles/
wherever the kernel's working folder is; notebook 02's scratch folder is removed; notebook 10 says
which budgets its sweep runs; ``memsched.sweep`` on an instance gives an overhead of exactly 0.0 where
the objective matches the baseline up to float rounding, as a sweep file's rows do.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import memsched

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PROFILES = ROOT / "results" / "offload" / "profiles"


def code_cells(name: str) -> list[str]:
    """The sources of notebook `name`'s code cells, in order."""
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    return [c.source for c in book.cells if c.cell_type == "code"]


def run_cells(sources: list[str], workdir: Path) -> list[dict]:
    """Execute `sources` as one notebook in a fresh kernel whose working folder is `workdir`;
    the outputs of all cells (a failing cell raises CellExecutionError)."""
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(book, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}}).execute()
    return [o for c in book.cells for o in c.get("outputs", [])]


def printed(outputs: list[dict]) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")


def test_paper_pofo_loads_the_committed_profiles_from_any_working_folder(tmp_path: Path):
    """Notebook 08's loading lines (the first code cell up to ``chains = ...``; its sweeps are left out)
    read results/offload/profiles/ with the kernel in an unrelated folder."""
    first = code_cells("08_paper_pofo")[0].splitlines()
    end = next(i for i, line in enumerate(first) if line.startswith("chains = "))
    probe = "import json\nprint(json.dumps([c.name for c in chains]))"
    out = run_cells(["\n".join(first[: end + 1]), probe], tmp_path)
    expected = [memsched.load(PROFILES / f"{name}.json").name for name in ("resnet50", "gpt2")]
    assert json.loads(printed(out).strip().splitlines()[-1]) == expected


def test_explorer_defaults_to_the_resnet50_profile_from_any_working_folder(tmp_path: Path):
    """Notebook 04's first cell loads the committed ResNet-50 profile, not the cnn12 fallback, with the
    kernel in an unrelated folder."""
    probe = ("import json\nfrom pathlib import Path\n"
             "print(json.dumps([str(Path(DEFAULT_FILE).resolve()), state['instance'].name]))")
    out = run_cells([code_cells("04_interactive_explorer")[0], probe], tmp_path)
    path, name = json.loads(printed(out).strip().splitlines()[-1])
    expected = PROFILES / "resnet50.json"
    assert Path(path) == expected.resolve()
    assert name == memsched.load(expected).name


@pytest.mark.slow
def test_dp_vs_exact_notebook_removes_its_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Notebook 02 run whole (its kernel's TMPDIR an empty folder) leaves that folder empty."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # the kernel inherits it; tempfile reads it there
    book = nbformat.read(NOTEBOOKS / "02_dp_vs_exact_vs_heuristics.ipynb", as_version=4)
    nbclient.NotebookClient(book, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    last = book.cells[-1].outputs[-1]["data"]["text/plain"]
    assert "compare.csv" in last  # the sweep did write into the scratch folder
    assert list(scratch.iterdir()) == []


def test_your_own_network_states_its_sweep_budgets():
    """Notebook 10's text before its sweep names the first and last budgets the sweep runs."""
    book = nbformat.read(NOTEBOOKS / "10_your_own_network.ipynb", as_version=4)
    cells = book.cells
    at = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "memsched.sweep(" in c.source)
    budgets = re.findall(r'"(\d+%)"', cells[at].source.split("solvers=")[0])
    assert len(budgets) >= 2
    text = cells[at - 1].source
    assert cells[at - 1].cell_type == "markdown"
    assert budgets[0] in text and budgets[-1] in text, (budgets, text)
    assert "smallest that fits" not in text  # the sweep does not start at the smallest budget that fits


def test_instance_sweep_overhead_at_the_baseline_is_exactly_zero():
    """siamese8's DP at 100% matches the baseline up to float rounding (66.6 against 66.60000000000001):
    the overhead is 0.0, not -2.2e-16, as a sweep file's row says."""
    join = memsched.load(memsched.data_path("join", "siamese8.json"))
    rows = memsched.sweep(join, budgets=["100%"], solvers=["dp"]).to_pandas()
    overhead = float(rows["overhead"].iloc[0])
    assert overhead == 0.0 and math.copysign(1.0, overhead) == 1.0, overhead
    assert f"{round(overhead, 3):.3f}" == "0.000"
