"""The papers' graph benchmark figure: no marker is cut by the top of its axis, and the overhead ticks are
numbers a reader can read values from (results/bench_papers_graphs.png once clipped DTR's 637% on RL500)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from memsched.experiments.bench_papers_graphs import _overhead_axis  # noqa: E402


@pytest.mark.parametrize("largest", [0.0, 0.3, 3.8, 637.0])
def test_top_marker_inside_axis_with_headroom(largest: float) -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0.1, largest], ls="none", marker="o")
    _overhead_axis(ax)
    bottom, top = ax.get_ylim()
    assert bottom == 0.0
    assert top >= 3 * max(largest, 1.0)  # half a decade above the largest point
    ticks = list(ax.get_yticks())
    assert ticks[0] == 0 and all(t <= top for t in ticks)
    assert any(t >= largest for t in ticks) or largest < 1  # a labelled tick at or above the point
    assert [lab.get_text() for lab in ax.get_yticklabels()][:3] == ["0", "0.25", "0.5"]
    plt.close(fig)
