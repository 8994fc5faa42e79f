"""Series drawn exactly under another, made visible (shared by `memsched figures`, the paper figures and
`SweepResult.plot`; no pyplot and no backend choice here, so the library and notebooks may import it).

    marked = mark_coinciding([(label, line), ...])   # one panel's lines, in drawing order, after the legend
    note = coinciding_note(marked, panels)           # "" when no series was hidden

Series drawn nearly under another (within `NEAR` of the panel) are kept visible by `mark_near` / `near_note`.
"""

from __future__ import annotations

from typing import Any


def mark_coinciding(lines: list[tuple[str, Any]]) -> list[tuple[str, list[str]]]:
    """Make visible a series drawn exactly under others: of `lines` ((legend text, matplotlib line) in
    drawing order, one panel), each line every point of which is also a point of a later-drawn line
    (the same x and y, to a relative 1e-9) gets larger hollow markers and a wider, paler line, so that it
    shows around the lines over it -- the larger, the more such lines lie over it (rotor under cpsat under
    milp: rotor outermost); the data are not changed. A marked line whose points all lie within its panel's
    view limits is drawn unclipped, so that its enlarged markers at an edge of the panel are not cut. A line
    held whole by one later line is matched to that line (the deepest such); else, when its points are held
    piecewise by several later lines (each point by some), it is matched to a few of them that together hold
    every point (`_piecewise_cover`).
    Returns (legend text, [texts of the lines over it]) for each line so marked. Call after the legend is
    made, which keeps the lines' own style."""
    import numpy as np

    points = [np.column_stack([np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)])
              for _, line in lines]
    points = [p[np.isfinite(p).all(axis=1)] for p in points]
    held = {(i, j): _held(points[i], points[j]) for i in range(len(lines)) for j in range(i + 1, len(lines))
            if len(points[i])}
    whole = {i: [j for j in range(i + 1, len(lines)) if (i, j) in held and held[i, j].all()] for i in range(len(lines))}
    depth = [0] * len(lines)  # how many lines lie over each line, one on another
    over: dict[int, list[int]] = {}
    for i in range(len(lines) - 2, -1, -1):  # from the top: a line's depth needs those of the lines over it
        for j in whole[i]:  # the deepest line holding it whole (the first of equals) names it
            if i not in over or depth[j] + 1 > depth[i]:
                over[i], depth[i] = [j], depth[j] + 1
    for i in range(len(lines) - 2, -1, -1):  # then the lines held only piecewise, and the depths again
        if i not in over and len(points[i]):
            over[i] = _piecewise_cover({j: held[i, j] for j in range(i + 1, len(lines))})
            if not over[i]:
                del over[i]
        if i in over:  # deeper than every line over it, so that its markers show around theirs
            depth[i] = 1 + max(depth[j] for j in [*whole[i], *over[i]])
    from matplotlib.colors import to_rgb

    marked = []
    for i, js in sorted(over.items()):
        line = lines[i][1]
        colour = to_rgb(line.get_color())
        line.set_markeredgecolor(colour)  # the markers in the solver's colour, the line paler (half white)
        line.set_color(tuple(0.5 + 0.5 * c for c in colour))
        line.set_markersize((1 + 0.8 * depth[i]) * line.get_markersize())
        line.set_markerfacecolor("none")
        line.set_markeredgewidth(1.4)
        line.set_linewidth((1 + 2.4 * depth[i]) * line.get_linewidth())
        if _inside_view(line, points[i]):  # its larger markers at an edge of the panel: drawn whole, not cut
            line.set_clip_on(False)
        marked.append((lines[i][0], [lines[j][0] for j in js]))
    return marked


def _inside_view(line: Any, points: Any) -> bool:
    """Whether every point of `points` ((n, 2) data x, y of `line`) lies within its axes' view limits (as
    autoscaling leaves them), so that drawing the line unclipped shows nothing outside the panel but the
    parts of its markers and line width that stick out of it at an edge; False for a line in no axes."""
    ax = line.axes
    if ax is None or not len(points):
        return ax is not None
    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    xs, ys = points[:, 0], points[:, 1]
    return bool(((xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)).all())


def _held(mine: Any, other: Any) -> Any:
    """Boolean array over the points of `mine` ((n, 2) x, y): whether `other` ((m, 2)) has that point,
    to a relative 1e-9."""
    import numpy as np

    if not len(other):
        return np.zeros(len(mine), dtype=bool)
    return np.isclose(mine[:, None, :], other[None, :, :], rtol=1e-9, atol=0).all(axis=2).any(axis=1)


def _piecewise_cover(held: dict[int, Any]) -> list[int]:
    """Later lines (indices, in drawing order) that together hold every point of a line, chosen greedily
    (each time the line holding most of the points still free; ties: the one drawn later, on top), from
    `held` (line index -> which of the points it holds); [] when the lines together miss a point."""
    import numpy as np

    free = np.ones(len(next(iter(held.values()))), dtype=bool) if held else np.zeros(0, dtype=bool)
    if not held or not np.logical_or.reduce(list(held.values())).all():
        return []
    chosen: list[int] = []
    while free.any():
        j = max(held, key=lambda k: (int((held[k] & free).sum()), k))
        chosen.append(j)
        free &= ~held[j]
    return sorted(chosen)


def coinciding_note(marked: list[tuple[str, list[str]]], panels: int) -> str:
    """The note line for the series `mark_coinciding` marked over `panels` panels ("" when none): each
    hidden series, the ones over it ("rotor coincides with cpsat at every point"; held piecewise by several:
    "rotor-offload coincides at each point with one of remat-only and pofo") and in how many panels."""
    count: dict[tuple[str, tuple[str, ...]], int] = {}
    for text, over in marked:
        key = (text, tuple(over))
        count[key] = count.get(key, 0) + 1
    parts = [_coincide_text(text, over) + (f" ({n} of {panels} panels)" if panels > 1 else "")
             for (text, over), n in count.items()]
    return ("\nlarger hollow markers on a wide pale line: a series under another with the same values: "
            + "; ".join(parts)) if parts else ""


def _coincide_text(text: str, over: tuple[str, ...]) -> str:
    """One hidden series in words: under one series, or point by point under several."""
    if len(over) == 1:
        return f"{text} coincides with {over[0]} at every point"
    return f"{text} coincides at each point with one of {', '.join(over[:-1])} and {over[-1]}"


__all__ = ["mark_coinciding", "coinciding_note"]

#: a point of a series lies close to one of another series when both are within this fraction of their panel's
#: width and of its height (about the size of a marker: `mark_near`)
NEAR = 0.025


def mark_near(ax: Any, lines: list[tuple[str, Any]]) -> list[tuple[str, list[str]]]:
    """Keep a series visible that lies close to, but not exactly on, a series drawn over it in the panel `ax`:
    of `lines` ((legend text, matplotlib line) in drawing order), a line every point of which lies within `NEAR`
    of the panel's width and height of a point of one later line (in the panel's axes, log or linear, at its
    limits when called) is hidden by that line (by each such line): the hidden line is drawn `NEAR_WIDEN`
    times wider and paler (`_widen`), each line over it dashed, with markers `NEAR_SHRINK` times smaller, and
    above it (a zorder higher), so that both show (rotor under cpsat within 0.7%: cpsat's dashes over rotor's
    wide pale line). Pass no line that `mark_coinciding` marked (drawn exactly under another: restyled already). The
    data are not changed. Returns (legend text, [texts of the lines over it]) for each hidden line."""
    import numpy as np

    ax.get_xlim(), ax.get_ylim()  # the limits brought up to date (matplotlib scales the view lazily)
    to_axes = ax.transData + ax.transAxes.inverted()
    points = []
    for _, line in lines:
        xy = np.column_stack([np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)])
        xy = xy[np.isfinite(xy).all(axis=1)]
        points.append(to_axes.transform(xy) if len(xy) else xy.reshape(0, 2))
    hidden: list[tuple[str, list[str]]] = []
    dashed: set[int] = set()
    for i in range(len(lines)):
        over = [j for j in range(i + 1, len(lines)) if _all_close(points[i], points[j])]
        if not over:
            continue
        line = lines[i][1]
        _widen(line)
        for j in over:
            top = lines[j][1]
            if j not in dashed:
                top.set_linestyle("--")
                top.set_markersize(top.get_markersize() / NEAR_SHRINK)
                dashed.add(j)
            top.set_zorder(max(top.get_zorder(), line.get_zorder() + 0.1))
        hidden.append((lines[i][0], [lines[j][0] for j in over]))
    return hidden


def _widen(line: Any) -> None:
    """Draw the hidden `line` `NEAR_WIDEN` times wider and paler (its colour half white), its markers in its
    own colour, so that a dashed line over it stands out on it (`mark_near`)."""
    from matplotlib.colors import to_rgb

    colour = to_rgb(line.get_color())
    line.set_markeredgecolor(colour)
    line.set_markerfacecolor(colour)
    line.set_color(tuple(0.5 + 0.5 * c for c in colour))
    line.set_linewidth(NEAR_WIDEN * line.get_linewidth())


#: `mark_near`: how much wider a hidden series' line is drawn, and how much smaller the markers over it
NEAR_WIDEN = 2.4
NEAR_SHRINK = 1.6


def _all_close(mine: Any, other: Any) -> bool:
    """Whether every point of `mine` ((n, 2), axes fractions; at least one) lies within `NEAR` of a point of
    `other` ((m, 2)) in both x and y."""
    import numpy as np

    if not len(mine) or not len(other):
        return False
    return bool((np.abs(mine[:, None, :] - other[None, :, :]) <= NEAR).all(axis=2).any(axis=1).all())


def near_note(hidden: list[tuple[str, list[str]]], panels: int) -> str:
    """The note line for the series `mark_near` kept visible over `panels` panels ("" when none), as
    `plotting.coincide.coinciding_note` writes its own: each hidden series, the ones over it and in how many
    panels."""
    count: dict[tuple[str, tuple[str, ...]], int] = {}
    for text, over in hidden:
        count[(text, tuple(over))] = count.get((text, tuple(over)), 0) + 1
    parts = [f"{text} under {' and '.join(over)}" + (f" ({n} of {panels} panels)" if panels > 1 else "")
             for (text, over), n in count.items()]
    return (f"\ndashed with smaller markers over a wide pale line: a series drawn over another that it nearly hides "
            f"(every point of that one within {100 * NEAR:g}% of the panel's width and height of one of its own): "
            + "; ".join(parts)) if parts else ""
