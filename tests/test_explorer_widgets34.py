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

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("IPython")
import IPython.display  # noqa: E402
import matplotlib  # noqa: E402

import memsched  # noqa: E402

matplotlib.use("Agg")

NOTEBOOK = Path(memsched.solvers.__file__).resolve().parents[1] / "notebooks" / "04_interactive_explorer.ipynb"
#: the code cells that define the explorer and show its three panels (the demonstration cells after them take a
#: minute on the default network and are left out), by id
CELLS = ["22bcdfa4", "0500f38d", "09acf274", "93400d5e", "3d35deb0", "55b17e7c"]
#: cells before which the explorer loads the tiny chain: the panels are then built and drawn on it (seconds),
#: not on the default network
LOAD_TINY_BEFORE = "09acf274"
EVIL = "<script>alert(1)</script> & x"


def chain_file(folder: Path, name: str, memory_unit: str | None) -> Path:
    """A 4-stage chain named `name` whose reference peak is 28 of its size units (`memory_unit`; bytes for
    None), written under `folder`."""
    stages = [(1.0, 2.0, 4, 8, 0, 0), (2.0, 4.0, 2, 6, 1, 1), (1.0, 2.0, 2, 4, 0, 2), (0.5, 1.0, 1, 2, 0, 0)]
    keys = ("fwd_time", "bwd_time", "out_size", "tape_size", "fwd_overhead", "bwd_overhead")
    units: dict[str, str] = {"time": "ms"} | ({"memory": memory_unit} if memory_unit else {})
    data = {"format": "memsched.chain/1", "name": name, "input_size": 4,
            "stages": [{"name": f"s{i}", **dict(zip(keys, s))} for i, s in enumerate(stages)],
            "loss": {"bwd_time": 0.5, "bwd_overhead": 0}, "meta": {"units": units}}
    path = folder / f"chain-{len(list(folder.iterdir()))}.json"
    path.write_text(json.dumps(data))
    return path


class _Handle:
    """What `display(..., display_id=True)` returns in Jupyter: `update` replaces the shown item."""

    def __init__(self, item: Any):
        self.item = item

    def update(self, item: Any) -> None:
        self.item = item


def _display(*objs: Any, display_id: Any = None, **_: Any) -> _Handle | None:
    return _Handle(objs[0]) if display_id else None


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The namespace of the explorer's cells, run on the tiny byte-sized chain named `EVIL`."""
    folder = tmp_path_factory.mktemp("explorer")
    tiny = chain_file(folder, EVIL, None)
    cells = {c["id"]: "".join(c["source"]) for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]}
    namespace: dict = {"__name__": "explorer"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IPython.display, "display", _display)
        for cell in CELLS:
            if cell == LOAD_TINY_BEFORE:
                namespace["path"].value = str(tiny)
                namespace["load_network"]()
            exec(compile(cells[cell], f"{NOTEBOOK.name}:{cell}", "exec"), namespace)
            if "rendered" in namespace:  # figures kept as drawn: their PNGs (half the time) are not what is tested
                namespace["rendered"] = lambda item: item
    namespace["folder"] = folder
    return namespace


def load(explorer: dict, path: Path) -> None:
    """What the "load / profile" button does, for the file at `path`."""
    explorer["path"].value = str(path)
    explorer["on_load"](None)


def html_shown(panel: Any) -> str:
    """The HTML a panel's outputs show now (its messages), joined."""
    return "\n".join(item.data for item in panel.drawn if type(item).__name__ == "HTML")


def test_a_files_name_is_shown_as_text_in_the_status_line(explorer: dict):
    load(explorer, chain_file(explorer["folder"], EVIL, None))
    status = explorer["status"].value
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; x" in status, status
    assert "<script>" not in status and "reference peak 28 bytes" in status, status


def test_a_panels_error_message_is_shown_as_text(explorer: dict):
    """A chain in a unit that is no byte unit (a word starting with a letter): the offloading and pipeline
    panels refuse it, and their messages quote the unit as the file states it; the status line names it too."""
    load(explorer, chain_file(explorer["folder"], EVIL, "u<b>&</b>"))
    for panel in ("offload", "pipeline"):
        shown = html_shown(explorer[panel])
        assert "u&lt;b&gt;&amp;&lt;/b&gt;" in shown and "<b>&</b>" not in shown, (panel, shown)
    assert explorer["message"]("<i>a</i> & b").data == "<p><i>&lt;i&gt;a&lt;/i&gt; &amp; b</i></p>"
    status = explorer["status"].value
    assert status.endswith("reference peak 28 u&lt;b&gt;&amp;&lt;/b&gt;") and "<script>" not in status, status


@pytest.mark.parametrize("memory_unit", [None, "KiB", "slots"])
def test_each_size_slider_at_its_minimum_solves(explorer: dict, memory_unit: str | None):
    """28 bytes (shown in bytes), 28 KiB (shown in bytes: 1 KiB is the least budget) or 28 slots."""
    load(explorer, chain_file(explorer["folder"], "tiny", memory_unit))
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
