"""Figure labels (issue 19 item 6): a series covered piecewise by later series is marked, pofo's and
revolve's class-optimal rows name their model, and the max-batch bars' labels clear the published ticks
and name rotor's model."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from memsched.experiments import max_batch_figure as MB  # noqa: E402
from memsched.experiments.plotting.coincide import coinciding_note, mark_coinciding  # noqa: E402
from memsched.experiments.plotting.labels import model_labels, row_labels  # noqa: E402

POFO = ("persistent schedules with offloaded checkpoints (prefetch not overlapped), 200-slot discretisation; "
        "heuristic for the two-stream model")
REVOLVE = ("Revolve (optimal number of forwards for its homogeneous model with c=12 checkpoints; "
           "no optimality claim for this memory model)")


# ---------------------------------------------------------------------------- coinciding series
def test_series_covered_piecewise_by_two_later_series_is_marked():
    fig, ax = plt.subplots()
    lines = [("rotor-offload", ax.plot([1, 2, 3, 4], [9, 8, 7, 6], ms=4, lw=1)[0]),
             ("remat-only", ax.plot([1, 2, 3, 4], [9, 8, 5, 4], ms=4, lw=1)[0]),
             ("pofo", ax.plot([1, 2, 3, 4], [8, 7, 7, 6], ms=4, lw=1)[0]),
             ("vdnn", ax.plot([1, 4], [20, 6.5], ms=4, lw=1)[0])]
    marked = mark_coinciding(lines)
    plt.close(fig)
    assert marked == [("rotor-offload", ["remat-only", "pofo"])]
    hidden = lines[0][1]
    assert hidden.get_markerfacecolor() == "none" and hidden.get_markersize() > 4
    assert list(hidden.get_ydata()) == [9, 8, 7, 6]  # the data unchanged
    note = coinciding_note(marked, 1)
    assert "rotor-offload coincides at each point with one of remat-only and pofo" in note


def test_partly_covered_series_is_not_marked_and_whole_cover_is_unchanged():
    fig, ax = plt.subplots()
    lines = [("a", ax.plot([1, 2, 3], [5, 6, 7], ms=4, lw=1)[0]),   # point (3, 7) under no line
             ("b", ax.plot([1, 2], [5, 1], ms=4, lw=1)[0]),
             ("c", ax.plot([2, 3], [6, 8], ms=4, lw=1)[0]),
             ("d", ax.plot([1, 2], [5, 1], ms=4, lw=1)[0])]          # b under d, whole
    marked = mark_coinciding(lines)
    plt.close(fig)
    assert marked == [("b", ["d"])]
    assert coinciding_note(marked, 2) == ("\nlarger hollow markers on a wide pale line: a series under another with "
                                          "the same values: b coincides with d at every point (1 of 2 panels)")


# ---------------------------------------------------------------------------- class-optimal labels
def test_pofo_and_revolve_feasible_rows_name_their_class_model():
    rows = pd.DataFrame({
        "solver": ["pofo", "pofo", "pofo", "revolve", "revolve", "vdnn", "rotor"],
        "status": ["feasible", "feasible", "infeasible", "feasible", "unsupported", "feasible", "optimal"],
        "scope": [POFO, POFO + "; store-all fits", POFO, REVOLVE, None, None, "persistent schedules, exact sizes"],
    })
    labels = model_labels(rows)
    assert labels["pofo"] == "pofo (persistent, offloaded checkpoints)"
    assert labels["revolve"] == "revolve (Revolve's model)"
    assert labels["vdnn"] == "vdnn"  # a heuristic keeps its bare name
    assert labels["rotor"] == "rotor (persistent)"
    assert list(row_labels(rows))[0] == "pofo (persistent, offloaded checkpoints)"


def test_cut_short_pofo_rows_get_no_model():
    rows = pd.DataFrame({"solver": ["pofo", "pofo"], "status": ["feasible", "feasible"], "scope": [POFO, POFO],
                         "details": ['{"skipped": ["exact-size retry"]}', None]})
    assert model_labels(rows.iloc[:1])["pofo"] == "pofo"  # stages skipped under a time limit: no claim
    assert model_labels(rows.iloc[1:])["pofo"] == "pofo (persistent, offloaded checkpoints)"
    timed = rows.iloc[1:].assign(timed_out=True)
    assert model_labels(timed)["pofo"] == "pofo"

# ---------------------------------------------------------------------------- max-batch bars
def _answer(model: str, solver: str, largest: int, overhead: float, status: str) -> dict[str, Any]:
    return {"model": model, "solver": solver, "largest": largest, "memory": 16e9, "cost": "flops",
            "max_overhead": 1.5, "state_factor": 4, "problem": "graph",
            "result": {"status": status, "overhead": overhead}}


def _drawn(monkeypatch, tmp_path, answers, published):
    figs: list[Any] = []
    monkeypatch.setattr(MB, "save_figure", lambda fig, out, stem: figs.append(fig) or [])
    MB.draw(answers, tmp_path, published=published)
    (fig,) = figs
    return fig


def test_max_batch_labels_clear_the_published_tick(monkeypatch, tmp_path):
    answers = {"vgg19": {"sqrt": _answer("vgg19", "sqrt", 190, 1.32, "feasible"),
                         "greedy": _answer("vgg19", "greedy", 250, 1.10, "feasible")}}
    fig = _drawn(monkeypatch, tmp_path, answers, {("vgg19", "sqrt"): ("=", 197), ("vgg19", "greedy"): (">=", 60)})
    ax = fig.axes[0]
    notes = {t.get_text(): t for t in ax.texts}
    assert notes["190\nx1.32"].xy[1] >= 197  # above the tick at 197, not at the bar's top (190)
    assert notes["250\nx1.10"].xy[1] == 250  # the tick at 60 lies under the bar's top: the label stays on the bar
    plt.close(fig)


def test_max_batch_legend_names_rotors_model(monkeypatch, tmp_path):
    answers = {"resnet50": {"store-all": _answer("resnet50", "store-all", 64, 1.0, "feasible"),
                            "rotor": _answer("resnet50", "rotor", 200, 1.4, "optimal")}}
    fig = _drawn(monkeypatch, tmp_path, answers, {})
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert texts == ["store-all", "rotor (persistent)"]
    plt.close(fig)
    answers["resnet50"]["rotor"]["result"]["status"] = "feasible"
    fig = _drawn(monkeypatch, tmp_path, answers, {})
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["store-all", "rotor"]
    plt.close(fig)
