"""Notebook 04's widgets, driven from code: the notebook's code cells that define the explorer run here
(a stub `display`, no kernel) on a tiny chain file, then the test loads files as the "load / profile" button
does and moves the size sliders.

- A name or message from a file is shown as text: the status line and a panel's message escape it
  (a chain named ``<script>...`` shows that text, not a script).
- A size slider never offers a budget that rounds down to 0 instance units on a byte-sized (or slot-sized)
  network: each slider at its minimum gives a panel that solved, not "must be positive".

The notebook is the one of the repository `memsched` is imported from (its `solvers` folder's parent), so
the test checks the tree under test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("IPython")
import matplotlib  # noqa: E402
from conftest import explorer_chain_file, explorer_load, run_explorer  # noqa: E402

matplotlib.use("Agg")

EVIL = "<script>alert(1)</script> & x"


def chain_file(folder: Path, name: str, memory_unit: str | None) -> Path:
    """`explorer_chain_file` named `name` in `memory_unit` (bytes for None)."""
    return explorer_chain_file(folder, name, memory_unit=memory_unit)


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The namespace of the explorer's cells, run on the tiny byte-sized chain named `EVIL`."""
    folder = tmp_path_factory.mktemp("explorer")
    return run_explorer(folder, chain_file(folder, EVIL, None))


def html_shown(panel: Any) -> str:
    """The HTML a panel's outputs show now (its messages), joined."""
    return "\n".join(item.data for item in panel.drawn if type(item).__name__ == "HTML")


def test_a_files_name_is_shown_as_text_in_the_status_line(explorer: dict):
    explorer_load(explorer, chain_file(explorer["folder"], EVIL, None))
    status = explorer["status"].value
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; x" in status, status
    assert "<script>" not in status and "reference peak 28 bytes" in status, status


def test_a_panels_error_message_is_shown_as_text(explorer: dict):
    """A chain in a unit that is no byte unit (a word starting with a letter): the offloading and pipeline
    panels refuse it, and their messages quote the unit as the file states it; the status line names it too."""
    explorer_load(explorer, chain_file(explorer["folder"], EVIL, "u<b>&</b>"))
    for panel in ("offload", "pipeline"):
        shown = html_shown(explorer[panel])
        assert "u&lt;b&gt;&amp;&lt;/b&gt;" in shown and "<b>&</b>" not in shown, (panel, shown)
    assert explorer["message"]("<i>a</i> & b").data == "<p><i>&lt;i&gt;a&lt;/i&gt; &amp; b</i></p>"
    status = explorer["status"].value
    assert status.endswith("reference peak 28 u&lt;b&gt;&amp;&lt;/b&gt;") and "<script>" not in status, status


@pytest.mark.parametrize("memory_unit", [None, "KiB", "slots"])
def test_each_size_slider_at_its_minimum_solves(explorer: dict, memory_unit: str | None):
    """28 bytes (shown in bytes), 28 KiB (shown in bytes: 1 KiB is the least budget) or 28 slots."""
    explorer_load(explorer, chain_file(explorer["folder"], "tiny", memory_unit))
    state, bandwidth = explorer["state"], explorer["bandwidth"]
    panels = {"remat": (explorer["remat_budget"], lambda: state["instance"])}
    if memory_unit != "slots":  # offloading and pipelines need sizes in bytes (the panels say so)
        panels["offload"] = (explorer["offload_budget"], lambda: explorer["offload_instance"](bandwidth.value))
        panels["pipeline"] = (explorer["memory"], explorer["pipeline_instance"])
    for panel, (slider, instance) in panels.items():
        assert slider.value != slider.min
        slider.value = slider.min  # a change: the panel solves again
        shown = html_shown(explorer[panel])
        assert "must be positive" not in shown, (panel, slider.description, slider.min, shown)
        assert type(explorer[panel].drawn[1]).__name__ == "DataFrame", (panel, shown)  # the solvers' table
        unit = explorer["size_unit"](instance())[0]  # the panel's instance's units per unit shown
        assert explorer["in_units"](slider.min, unit) >= 1, (panel, slider.min)
        # where a unit shown is at most one instance unit, the slider moves in whole instance units
        assert explorer["in_units"](slider.step, unit) >= 1 and slider.step * unit == round(slider.step * unit)
