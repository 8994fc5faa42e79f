"""`Result.details` (the solver's details of a run, documented in `Result`'s docstring) exists, and the
notebooks use it rather than the registry result behind it; notebook 04's size sliders read in the binary
unit their network's reference peak reaches, with a readout that tells every position apart.

The notebooks are those of the repository `memsched` is imported from (its `solvers` folder's parent), so
the test checks the tree under test.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import memsched

NOTEBOOKS = Path(memsched.solvers.__file__).resolve().parents[1] / "notebooks"
#: notebook 04's code cells that define its size helpers (`size_unit`, `budget_slider`, ...), by id
EXPLORER_CELLS = ["22bcdfa4", "0500f38d", "09acf274"]


def code_cells(name: str) -> dict[str, str]:
    """The code cells of notebook `name` (its .ipynb JSON), by cell id."""
    book = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    return {c["id"]: "".join(c["source"]) for c in book["cells"] if c["cell_type"] == "code"}


def test_details_is_the_solvers_details():
    chain = memsched.load(memsched.data_path("examples", "homogeneous20.json"))
    result = memsched.solve(chain, "30%", solver="rotor")
    assert result.found
    assert result.details == result.raw.details and result.details["slots"] == 500
    with pytest.raises(AttributeError):
        result.details = {}  # type: ignore[misc]
    assert json.loads(json.dumps(result.details)) == result.raw.details


def test_details_of_an_infeasible_comparison_member():
    """Each result of a comparison has its own details (here a budget no schedule fits)."""
    chain = memsched.load(memsched.data_path("examples", "tiny.json"))
    comparison = memsched.solve(chain, "10%", solver=["rotor", "periodic"])
    for result in comparison:
        assert result.details == result.raw.details, result.solver
    assert comparison["rotor"].status == "infeasible" and "slots" in comparison["rotor"].details


def test_notebook_05_reads_details_not_raw():
    cells = code_cells("05_paper_rotor")
    assert any("rotor.details" in source for source in cells.values())
    for cell_id, source in cells.items():
        assert ".raw." not in source and ".raw\n" not in source, cell_id


def explorer_helpers() -> dict[str, Any]:
    """Notebook 04's imports, constants, functions and classes (its `def`s and ALL-CAPS assignments), run
    without the statements that load a network, build widgets or show panels."""
    namespace: dict[str, Any] = {"__name__": "explorer_helpers"}
    cells = code_cells("04_interactive_explorer")
    for cell_id in EXPLORER_CELLS:
        tree = ast.parse(cells[cell_id])
        keep = [node for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
                or (isinstance(node, (ast.Assign, ast.AnnAssign)) and all(
                    isinstance(t, ast.Name) and t.id.isupper()
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])))]
        exec(compile(ast.Module(body=keep, type_ignores=[]), f"04:{cell_id}", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("where, expected_unit", [
    (("pipeline", "mlp7.chain.json"), "MiB"),  # 2949120 B
    (("examples", "cnn12.json"), "GiB"),  # 1785462784 B
    (("examples", "tiny.json"), "bytes"),  # 28 B
    (("join", "siamese8.json"), "MiB"),  # 168 MB
])
def test_explorer_slider_unit_and_readout(where: tuple[str, str], expected_unit: str):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("IPython")
    helpers = explorer_helpers()
    instance = memsched.load(memsched.data_path(*where))
    reference = memsched.reference_peak(instance)
    unit, name = helpers["size_unit"](instance)
    slider = helpers["budget_slider"](reference, unit, name, 0.5, 1.2)
    count = int((slider.max - slider.min) / slider.step + 1e-9) + 1
    positions = [slider.min + k * slider.step for k in range(count)]
    readouts = {f"{p:{slider.readout_format}}" for p in positions}
    assert count >= 20 and len(readouts) == count, (slider.readout_format, count, len(readouts))
    assert name == expected_unit and slider.description == f"budget ({expected_unit})"
    # the slider's value is the network's size, converted back to its own unit
    assert helpers["in_units"](slider.value, unit) == int(0.5 * reference)
