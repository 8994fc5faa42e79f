"""Notebook 04's panels, driven from code (its explorer cells run with a stub `display`, on tiny chain files), and
`memsched.live.line_size` (the progress line's width):

1. Where no fast solver ticked finds a schedule at the curve's budgets, only the curve's place says so: the table
   and the schedule an exact solver found are still drawn (they were replaced by "no solver found a schedule").
2. An offloading chain file (a ``host_link``) is solved by the rematerialization and pipeline panels as the chain it
   holds (it was refused: "... not a offload instance"); the status line says "an offload instance".
3. A stream that is no terminal gets no width, whatever terminal its ``fileno()`` is (ipykernel's stream's is
   the Jupyter server's); a terminal still gets its own.
4. With no solver ticked a panel says so and solves nothing (it ran an unticked rotor, or "unknown solver 'rotor'"
   for a graph).
5. The table shows each row's ``scope`` (shortened as in the figures' legends) and ``min_budget``.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import termios
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("IPython")
import matplotlib  # noqa: E402
from conftest import explorer_chain_file, explorer_load, explorer_notebook, run_explorer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import memsched  # noqa: E402
from memsched.live import line_size  # noqa: E402

matplotlib.use("Agg")



@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The namespace of the explorer's cells, run on the tiny chain; figures are kept as drawn (not as PNGs)."""
    folder = tmp_path_factory.mktemp("explorer47")
    return run_explorer(folder, chain_file(folder, "tiny"))


def chain_file(folder: Path, name: str, host_link: bool = False) -> Path:
    """`explorer_chain_file` in bytes (an offloading chain file with `host_link`)."""
    return explorer_chain_file(folder, name, host_link=host_link)


def tick(explorer: dict, panel: Any, names: set[str]) -> None:
    """Tick exactly `names` among `panel`'s solver checkboxes, then redraw it once."""
    state = explorer["state"]
    state["loading"] = True  # no redraw per checkbox
    try:
        for name, check in panel.checks.items():
            check.value = name in names
    finally:
        state["loading"] = False
    panel.refresh()


def kinds(panel: Any) -> list[str]:
    """The type names of what a panel's 3 outputs show now."""
    return [type(item).__name__ for item in panel.drawn]


def html_shown(panel: Any) -> str:
    return "\n".join(item.data for item in panel.drawn if type(item).__name__ == "HTML")


def test_an_empty_curve_leaves_the_table_and_the_exact_schedule(explorer: dict):
    explorer_load(explorer, chain_file(explorer["folder"], "tiny"))
    remat = explorer["remat"]
    explorer["state"]["loading"] = True
    explorer["remat_budget"].value = explorer["remat_budget"].max  # 1.2 times the reference peak: feasible
    tick(explorer, remat, {"revolve", "cpsat"})  # revolve refuses a heterogeneous chain; cpsat solves it
    cmp = explorer["state"]["remat"]
    assert cmp["revolve"].status == "unsupported" and cmp["cpsat"].found
    assert kinds(remat)[:2] == ["HTML", "DataFrame"], (kinds(remat), html_shown(remat))
    assert isinstance(remat.drawn[2], Figure), kinds(remat)  # cpsat's schedule (the best found)
    assert "no curve of revolve" in html_shown(remat), html_shown(remat)
    assert list(remat.drawn[1]["solver"]) == ["revolve", "cpsat"]


def test_an_offloading_chain_file_is_solved_as_its_chain_by_the_other_panels(explorer: dict):
    offload_file = chain_file(explorer["folder"], "linked", host_link=True)
    explorer_load(explorer, offload_file)
    state = explorer["state"]
    assert state["problem"] == "offload"
    for name in ("remat", "offload", "pipeline"):
        panel = explorer[name]
        assert panel.checks, name  # the solvers of the panel's problem
        assert kinds(panel)[1] == "DataFrame", (name, html_shown(panel))
    assert set(explorer["remat"].checks) >= {"rotor", "periodic", "cpsat"}
    assert explorer["state"]["remat"]["rotor"].problem == "chain"
    expected = memsched.reference_peak(memsched.load(offload_file, problem="pipeline"))
    assert memsched.reference_peak(explorer["pipeline_instance"]()) == expected
    assert abs(explorer["memory"].max - 3 * expected / explorer["size_unit"](explorer["pipeline_instance"]())[0]) < 1e-9


def test_no_message_writes_a_before_a_problem_name():
    """No "a offload": a problem name in a message or the status line takes `article` ("an offload")."""
    cells = [cell["source"] for cell in json.loads(explorer_notebook().read_text(encoding="utf-8"))["cells"]]
    assert not any("a {state" in "".join(source) for source in cells)


def test_the_status_line_names_an_offloading_file_with_an_article(explorer: dict):
    explorer_load(explorer, chain_file(explorer["folder"], "linked", host_link=True))
    assert ": an offload instance;" in explorer["status"].value, explorer["status"].value


@pytest.mark.parametrize("panel", ["remat", "offload", "pipeline"])
def test_no_solver_ticked_solves_nothing_and_says_so(explorer: dict, panel: str):
    explorer_load(explorer, chain_file(explorer["folder"], "tiny"))
    shown = explorer[panel]
    tick(explorer, shown, set())
    assert "DataFrame" not in kinds(shown), kinds(shown)
    assert "no solver ticked" in html_shown(shown), html_shown(shown)


def test_no_solver_ticked_on_a_graph_names_no_solver(explorer: dict):
    explorer_load(explorer, memsched.data_path("graphs", "linear10.json"))
    remat = explorer["remat"]
    tick(explorer, remat, set())
    assert "unknown solver" not in html_shown(remat) and "no solver ticked" in html_shown(remat), html_shown(remat)


def test_the_table_shows_scope_and_min_budget(explorer: dict):
    explorer_load(explorer, chain_file(explorer["folder"], "tiny"))
    remat, state = explorer["remat"], explorer["state"]
    tick(explorer, remat, {"rotor", "periodic"})
    explorer["remat_budget"].value = explorer["remat_budget"].min  # below the least budget: infeasible
    frame = remat.drawn[1]
    assert {"scope", "min_budget"} <= set(frame.columns), list(frame.columns)
    rotor = frame.set_index("solver").loc["rotor"]
    assert rotor["scope"] == "persistent"  # "persistent schedules, ...", as the legends name its model
    assert explorer["short_scope"]("sqrt baseline (no optimality claim)") == "no claim"
    assert state["remat"]["rotor"].status == "infeasible"
    assert rotor["min_budget"] == state["remat"]["rotor"].min_budget > 0


class _NotATerminal:
    """A notebook's stream: ``isatty()`` false, ``fileno()`` that of a terminal (ipykernel's: the server's)."""

    def __init__(self, fd: int):
        self.fd = fd

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fd


def test_a_stream_that_is_no_terminal_has_no_width_whatever_its_fileno():
    main, child = pty.openpty()
    try:
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))  # rows, columns
        with os.fdopen(os.dup(child), "w") as terminal:
            assert line_size(terminal) == (99, 29)  # a terminal: its own size, less one
        assert line_size(_NotATerminal(child)) == (None, None)
    finally:
        os.close(main)
        os.close(child)
