"""Paper figures (review items 6 and 10): a series within a hair of one drawn over it stays visible (rotor
under cpsat within 0.7%: cpsat dashed with smaller markers over rotor's wide pale line), the caption under
the panels explains hollow and dashed series, and a max-batch bar's label sits on its bar's top, not by a
published tick far above it (U-Net: ">=23" under the dashed line at 57, which carries ">=57")."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from memsched.experiments import max_batch_figure as MB  # noqa: E402
from memsched.experiments import paper_figures as P  # noqa: E402
from memsched.experiments.plotting.coincide import mark_near  # noqa: E402

BUDGETS = [1e9, 2e9, 3e9, 4e9, 5e9]
ROTOR = [4.0, 1.30, 1.20, 1.10, 1.00]


def _rows(series: dict[str, list[float]]) -> pd.DataFrame:
    """One chain panel ("net"): each solver's overhead (makespan / store-all - 1) at `BUDGETS`."""
    return pd.DataFrame([{"instance": "net", "solver_label": label, "solver": label, "status": "optimal",
                          "budget": b, "overhead": y - 1.0, "reference_peak": 5e9}
                         for label, ys in series.items() for b, y in zip(BUDGETS, ys)])


def _drawn(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Any]:
    """The figures `module` would save (kept open; the test closes them)."""
    figs: list[Any] = []
    monkeypatch.setattr(module, "save_figure", lambda fig, out, stem: figs.append(fig) or [])
    return figs


def _lines(fig: Any) -> dict[str, Any]:
    return {str(line.get_label()): line for ax in fig.axes for line in ax.get_lines()
            if not str(line.get_label()).startswith("_")}


# ---------------------------------------------------------------------------- 6. nearly equal series
def test_a_series_a_hair_under_another_shows_around_its_dashes():
    fig, ax = plt.subplots()
    rotor = ax.plot([b / 1e9 for b in BUDGETS], ROTOR, ms=3, lw=1, marker="o")[0]
    cpsat = ax.plot([b / 1e9 for b in BUDGETS], [y * 0.995 for y in ROTOR], ms=3, lw=1, marker="D")[0]
    far = ax.plot([b / 1e9 for b in BUDGETS], [3.0] * 5, ms=3, lw=1, marker="v")[0]
    hidden = mark_near(ax, [("rotor", rotor), ("cpsat", cpsat), ("periodic", far)])
    assert hidden == [("rotor", ["cpsat"])]
    assert cpsat.get_linestyle() == "--" and cpsat.get_markersize() < rotor.get_markersize()
    assert cpsat.get_zorder() > rotor.get_zorder()  # the dashes over the line they nearly hide
    assert rotor.get_linewidth() > 2 * cpsat.get_linewidth() and rotor.get_linestyle() == "-"
    assert far.get_linestyle() == "-" and far.get_linewidth() == 1  # far from both: as drawn
    plt.close(fig)


def test_series_apart_at_one_point_are_not_marked():
    fig, ax = plt.subplots()
    rotor = ax.plot(BUDGETS, ROTOR, ms=3, lw=1)[0]
    cpsat = ax.plot(BUDGETS, [1.7] + ROTOR[1:], ms=3, lw=1)[0]  # GPT-2's smallest budget: x1.7 vs x4
    assert mark_near(ax, [("rotor", rotor), ("cpsat", cpsat)]) == []
    assert cpsat.get_linestyle() == "-" and rotor.get_linewidth() == 1
    plt.close(fig)


def test_chain_figure_keeps_rotor_visible_and_explains_it_in_a_caption(monkeypatch, tmp_path):
    figs = _drawn(monkeypatch, P)
    rows = _rows({"rotor": ROTOR, "cpsat": [y * 0.995 for y in ROTOR], "periodic": [y + 1 for y in ROTOR],
                  "sqrt": [y + 1 for y in ROTOR]})
    P.draw(rows, {}, tmp_path)
    (fig,) = figs
    lines = _lines(fig)
    assert lines["cpsat"].get_linestyle() == "--" and lines["cpsat"].get_zorder() > lines["rotor"].get_zorder()
    assert lines["rotor"].get_linestyle() == "-" and lines["rotor"].get_linewidth() > 2
    assert lines["periodic"].get_markerfacecolor() == "none"  # exactly under sqrt: hollow, as `memsched figures`
    (caption,) = [t.get_text() for t in fig.texts]
    assert "larger hollow markers on a wide pale line" in caption
    assert "periodic coincides with sqrt at every point" in caption
    assert "dashed with smaller markers" in caption and "rotor under cpsat" in caption
    box = fig.texts[0].get_window_extent(fig.canvas.get_renderer())
    assert box.y0 >= 0 and all(box.y1 < ax.get_tightbbox().y0 for ax in fig.axes if ax.axison)  # inside, below
    plt.close(fig)


def test_a_figure_with_nothing_hidden_has_no_caption(monkeypatch, tmp_path):
    figs = _drawn(monkeypatch, P)
    P.draw(_rows({"rotor": ROTOR, "sqrt": [y + 1 for y in ROTOR]}), {}, tmp_path)
    (fig,) = figs
    assert fig.texts == [] and fig.get_figheight() == pytest.approx(3.3)
    plt.close(fig)


def test_pipeline_figure_explains_its_hollow_markers(monkeypatch, tmp_path):
    figs = _drawn(monkeypatch, P)
    rows = pd.DataFrame([{"instance": "net", "solver_label": f"{s} P=4", "solver": s, "status": "optimal",
                          "budget": b, "objective": 10.0 - b / 1e9, "problem": "pipeline"}
                         for s in ("madpipe", "cpsat") for b in BUDGETS])
    P.draw_pipeline(rows, {}, tmp_path)
    (fig,) = figs
    (caption,) = [t.get_text() for t in fig.texts]
    assert caption.startswith("larger hollow markers") and "madpipe" in caption and "cpsat" in caption
    plt.close(fig)


# ---------------------------------------------------------------------------- 10. max-batch labels
def _answer(model: str, solver: str, largest: int, overhead: float) -> dict[str, Any]:
    return {"model": model, "solver": solver, "largest": largest, "memory": 16e9, "cost": "flops",
            "max_overhead": "forward", "state_factor": 2.0, "problem": "graph", "status": "interrupted",
            "result": {"status": "feasible", "overhead": overhead}}


def _texts(fig: Any) -> dict[str, Any]:
    return {t.get_text(): t for t in fig.axes[0].texts}


def test_a_label_far_under_its_published_tick_sits_on_its_bar(monkeypatch, tmp_path):
    figs = _drawn(monkeypatch, MB)
    answers = {"unet": {"greedy": _answer("unet", "greedy", 11, 1.29),
                        "checkmate": _answer("unet", "checkmate", 23, 1.16)}}
    MB.draw(answers, tmp_path, published={("unet", "checkmate"): (">=", 57)})
    (fig,) = figs
    texts = _texts(fig)
    assert texts[">=23\nx1.16"].xy[1] == 23  # on its bar, not by the dashed line at 57
    assert texts[">=57"].xy[1] == 57 and texts[">=57"].get_fontstyle() == "italic"  # the tick's own value
    assert texts[">=57"].xy[0] == texts[">=23\nx1.16"].xy[0]
    plt.close(fig)


def test_place_labels_by_distance_to_the_tick():
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.set_yscale("log")
    ax.set_ylim(1, 2000)
    fig.tight_layout()
    labels = [MB.BarLabel(0.0, 190, "190\nx1.32", ("=", 197)),  # just above: the label over the tick
              MB.BarLabel(1.0, 448, "448\nx1.32", (">=", 193)),  # inside the bar: its value under it
              MB.BarLabel(2.0, 23, ">=23\nx1.16", (">=", 57)),  # far above: label on the bar, value by the tick
              MB.BarLabel(3.0, None, "", ("=", 60))]  # no bar: the tick's value alone
    MB.place_labels(ax, labels)
    texts = {t.get_text(): t for t in ax.texts}
    assert texts["190\nx1.32"].xy == (0.0, 197) and "197" not in texts
    assert texts["448\nx1.32"].xy == (1.0, 448) and texts[">=193"].xy == (1.0, 193)
    assert texts[">=193"].get_va() == "top" and texts[">=193"].get_bbox_patch() is not None
    assert texts[">=23\nx1.16"].xy == (2.0, 23) and texts[">=57"].get_va() == "bottom"
    assert texts["60"].xy == (3.0, 60) and len(ax.texts) == 6
    plt.close(fig)

