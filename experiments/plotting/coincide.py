"""Series drawn exactly under another, made visible (shared by `memsched figures`, the paper figures and
`SweepResult.plot`; no pyplot and no backend choice here, so the library and notebooks may import it).

    marked = mark_coinciding([(label, line), ...])   # one panel's lines, in drawing order, after the legend
    note = coinciding_note(marked, panels)           # "" when no series was hidden
"""

from __future__ import annotations

from typing import Any


def mark_coinciding(lines: list[tuple[str, Any]]) -> list[tuple[str, list[str]]]:
    """Make visible a series drawn exactly under another: of `lines` ((legend text, matplotlib line) in
    drawing order, one panel), each line every point of which is also a point of one later-drawn line
    (the same x and y, to a relative 1e-9) gets larger hollow markers and a wider, paler line, so that it
    shows around the line over it -- the larger, the more such lines lie over it (rotor under cpsat under
    milp: rotor outermost); the data are not changed. Returns (legend text, [text of the line over it])
    for each line so marked. Call after the legend is made, which keeps the lines' own style."""
    import numpy as np

    points = [np.column_stack([np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)])
              for _, line in lines]
    points = [p[np.isfinite(p).all(axis=1)] for p in points]
    depth = [0] * len(lines)  # how many lines lie over each line, one on another
    over: dict[int, int] = {}
    for i in range(len(lines) - 2, -1, -1):  # from the top: a line's depth needs those of the lines over it
        if not len(points[i]):
            continue
        for j in range(i + 1, len(lines)):
            same = np.isclose(points[i][:, None, :], points[j][None, :, :], rtol=1e-9, atol=0).all(axis=2)
            if same.any(axis=1).all() and (i not in over or depth[j] + 1 > depth[i]):
                over[i], depth[i] = j, depth[j] + 1
    from matplotlib.colors import to_rgb

    marked = []
    for i, j in sorted(over.items()):
        line = lines[i][1]
        colour = to_rgb(line.get_color())
        line.set_markeredgecolor(colour)  # the markers in the solver's colour, the line paler (half white)
        line.set_color(tuple(0.5 + 0.5 * c for c in colour))
        line.set_markersize((1 + 0.8 * depth[i]) * line.get_markersize())
        line.set_markerfacecolor("none")
        line.set_markeredgewidth(1.4)
        line.set_linewidth((1 + 2.4 * depth[i]) * line.get_linewidth())
        marked.append((lines[i][0], [lines[j][0]]))
    return marked


def coinciding_note(marked: list[tuple[str, list[str]]], panels: int) -> str:
    """The note line for the series `mark_coinciding` marked over `panels` panels ("" when none): each
    hidden series, the ones over it and in how many panels."""
    count: dict[tuple[str, str], int] = {}
    for text, over in marked:
        key = (text, " / ".join(over))
        count[key] = count.get(key, 0) + 1
    parts = [f"{text} coincides with {over} at every point" + (f" ({n} of {panels} panels)" if panels > 1 else "")
             for (text, over), n in count.items()]
    return ("\nlarger hollow markers on a wide pale line: a series under another with the same values: "
            + "; ".join(parts)) if parts else ""


__all__ = ["mark_coinciding", "coinciding_note"]
