"""`SweepResult.plot` keeps a series visible when another is drawn exactly over it (madpipe and cpsat at the
same periods on a pipeline), as `memsched figures` does: larger hollow markers on a wider line, and a note
naming the hidden series; series that differ are drawn as before."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("pandas")

import matplotlib.text  # noqa: E402

from memsched.results import SweepResult  # noqa: E402

FRACTIONS = (1.0, 1.2, 1.6, 2.0)


def sweep(series: dict[str, list[float]], instance: str = "toy") -> list[dict]:
    """Hand-made sweep rows: one per (solver, budget fraction), objective from `series[solver]`."""
    return [{"instance": instance, "solver": solver, "budget": int(1000 * f), "budget_fraction": f,
             "status": "feasible", "objective": y}
            for solver, ys in series.items() for f, y in zip(FRACTIONS, ys)]


def lines_of(ax) -> dict[str, object]:
    return {line.get_label(): line for line in ax.get_lines()}


def texts(fig) -> str:
    """Every text of `fig`, whitespace (a wrapped note's line breaks) as single spaces."""
    return " ".join(" ".join(t.get_text().split()) for t in fig.findobj(matplotlib.text.Text))


def filled(line) -> bool:
    return str(line.get_markerfacecolor()).lower() != "none"


def test_identical_series_both_visible_and_noted():
    same = [4.5, 3.94, 3.94, 3.94]
    fig = SweepResult(sweep({"madpipe": same, "cpsat": same})).plot()
    (ax,) = [a for a in fig.axes if a.get_visible()]
    lines = lines_of(ax)
    under, over = lines["madpipe"], lines["cpsat"]
    assert list(under.get_ydata()) == list(over.get_ydata()) == same  # the data are not changed
    assert under.get_markersize() > over.get_markersize()  # drawn around the line over it
    assert under.get_linewidth() > over.get_linewidth()
    assert not filled(under) and filled(over)
    assert "madpipe coincides with cpsat at every point" in texts(fig)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["madpipe", "cpsat"]


def test_distinct_series_unchanged_and_no_note():
    fig = SweepResult(sweep({"madpipe": [4.5, 3.94, 3.94, 3.94], "pipedream": [5.0, 4.2, 3.94, 3.94]})).plot()
    (ax,) = [a for a in fig.axes if a.get_visible()]
    for line in lines_of(ax).values():
        assert line.get_markersize() == 4
        assert filled(line)
    sizes = {line.get_linewidth() for line in lines_of(ax).values()}
    assert len(sizes) == 1
    assert "coincides" not in texts(fig)


def test_only_the_panel_where_series_coincide_is_marked():
    rows = (sweep({"madpipe": [3.0, 2.0, 2.0, 2.0], "cpsat": [3.0, 2.0, 2.0, 2.0]}, "a")
            + sweep({"madpipe": [3.0, 2.0, 2.0, 2.0], "cpsat": [3.5, 2.0, 2.0, 2.0]}, "b"))
    fig = SweepResult(rows).plot()
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in axes] == ["a", "b"]
    assert not filled(lines_of(axes[0])["madpipe"])
    assert all(filled(line) and line.get_markersize() == 4 for line in lines_of(axes[1]).values())
    assert "madpipe coincides with cpsat at every point (1 of 2 panels)" in texts(fig)


def test_three_equal_series_nest_and_names_with_dollars_stay_literal():
    same = [1.0, 1.0, 1.0, 1.0]
    fig = SweepResult(sweep({"$a$": same, "b": same, "c": same})).plot()
    (ax,) = [a for a in fig.axes if a.get_visible()]
    lines = lines_of(ax)
    a, b, c = (lines[k] for k in ("$a$", "b", "c"))
    assert a.get_markersize() > b.get_markersize() > c.get_markersize()  # the deepest outermost
    assert r"\$a\$ coincides with b" in texts(fig)
    fig.canvas.draw()  # a name with "$" draws as written, not as (invalid) math
