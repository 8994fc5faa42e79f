"""One (colour, marker) pair per line of a figure (`distinct_styles`), for `figures` and `paper_figures`."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from matplotlib.colors import to_hex

#: the colours a line without a free pair of its own may take, in order (matplotlib's tab10)
SPARE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf")
#: the markers such a line may take, in order
SPARE_MARKERS = "osD^v<>pPhX*"
#: the (colour, marker) pairs such a line may take, in order: every colour with the first marker, then the next
SPARE_STYLES = tuple((colour, marker) for marker in SPARE_MARKERS for colour in SPARE_COLOURS)
#: past the spare pairs (more than 120 lines in one figure): grey dots, shared
_LAST_RESORT = ("0.5", ".")


def distinct_styles(wanted: Iterable[tuple[str, dict[str, Any] | None]]) -> dict[str, dict[str, Any]]:
    """Key (a legend entry) -> matplotlib line keywords, one (colour, marker) pair per key, given the keywords
    each key wants (None: none) in priority order (a key given twice counts once, at its first place).

    First, every key keeps the keywords it wants unless an earlier key has the same pair (colours compared as
    matplotlib draws them: "C0" is "#1f77b4"). Then the others take a free pair, in order: a key whose pair is
    held by a key of its family (the same first word: "madpipe P=4" of "madpipe P=2") keeps its colour and
    other keywords (a variant's dash) with the first free marker of `SPARE_MARKERS`, when there is one;
    any other key takes the first free pair of `SPARE_STYLES` whose colour, else whose marker, no key has.
    Deterministic: the same keys and keywords in the same order get the same styles."""
    holder: dict[tuple[str, str], str] = {}
    out: dict[str, dict[str, Any]] = {}
    later: dict[str, dict[str, Any] | None] = {}
    for key, kw in wanted:
        if key in out or key in later:
            continue
        if kw is None or _pair(kw) in holder:
            later[key] = kw
            continue
        holder[_pair(kw)] = key
        out[key] = dict(kw)
    for key, kw in later.items():
        kin = kw is not None and holder[_pair(kw)].partition(" ")[0] == key.partition(" ")[0]
        free = _free_pair(set(holder), str(kw["color"]) if kw is not None and kin else None)
        holder[(to_hex(free[0]), free[1])] = key
        out[key] = {**(kw or {}), "color": free[0], "marker": free[1]}
    return out


def _pair(kw: dict[str, Any]) -> tuple[str, str]:
    """The (colour as "#rrggbb", marker) of line keywords."""
    return to_hex(str(kw["color"])), str(kw["marker"])


def _free_pair(taken: set[tuple[str, str]], colour: str | None) -> tuple[str, str]:
    """A (colour, marker) pair not in `taken`: `colour` with the first free marker of `SPARE_MARKERS` when
    given and there is one; else the first free pair of `SPARE_STYLES` whose colour, else whose marker, no
    pair of `taken` has; grey dots when every spare pair is taken."""
    if colour is not None:
        for marker in SPARE_MARKERS:
            if (to_hex(colour), marker) not in taken:
                return colour, marker
    free = [(c, m) for c, m in SPARE_STYLES if (c, m) not in taken]
    if not free:
        return _LAST_RESORT
    colours, markers = {c for c, _ in taken}, {m for _, m in taken}
    return min(free, key=lambda cm: (cm[0] in colours, cm[1] in markers))  # the first of the best
