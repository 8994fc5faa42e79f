"""The papers' graph benchmark figure: no marker is cut by its axis (results/bench_papers_graphs.png once clipped
DTR's 637% on RL500 at the top and every 0% marker at the bottom), the overhead ticks are numbers a reader can
read values from, and a cell without a schedule is drawn (hollow, on the strip "none"), not left out."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from memsched.experiments import bench_papers_graphs as bench  # noqa: E402


@pytest.mark.parametrize("largest", [0.0, 0.3, 3.8, 637.0])
def test_markers_inside_axis_with_headroom(largest: float) -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0.0, largest], ls="none", marker="o")
    bench._overhead_axis(ax)
    bottom, top = ax.get_ylim()
    assert bottom < bench.NO_SCHEDULE_Y < 0.0  # the 0% markers and the strip below them are whole
    assert top >= 3 * max(largest, 1.0)  # half a decade above the largest point
    ticks = list(ax.get_yticks())
    assert ticks[0] == bench.NO_SCHEDULE_Y and ticks[1] == 0 and all(t <= top for t in ticks)
    assert any(t >= largest for t in ticks) or largest < 1  # a labelled tick at or above the point
    assert [lab.get_text() for lab in ax.get_yticklabels()][:4] == ["none", "0", "0.25", "0.5"]
    plt.close(fig)


def test_a_cell_without_schedule_is_drawn_hollow_on_the_strip(tmp_path: Path, monkeypatch) -> None:
    drawn = []
    monkeypatch.setattr(bench, "save_figure", lambda fig, path, dpi: drawn.append(fig))
    monkeypatch.setattr(plt, "close", lambda fig: None)
    rows = [{"instance": "RL100", "fraction": 0.9, "solver": "cpsat", "overhead": 0.0},
            {"instance": "RL100", "fraction": 0.9, "solver": "greedy", "overhead": None}]
    bench.figure(rows, [], tmp_path / "f.png")
    (ax,) = drawn[0].axes
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata())]
    strip = [ln for ln in lines if list(ln.get_ydata()) == [bench.NO_SCHEDULE_Y]]
    assert len(strip) == 1 and strip[0].get_markerfacecolor() == "none"
    assert any(list(ln.get_ydata()) == [0.0] and ln.get_markerfacecolor() != "none" for ln in lines)
    labels = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert labels[:2] == [bench.LABELS.get("cpsat", "cpsat"), bench.LABELS.get("greedy", "greedy")]
    assert any("no schedule" in lab for lab in labels)
