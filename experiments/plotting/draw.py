"""Drawing timelines: memory over time above the operations, on one shared time axis.

Figures are `matplotlib.figure.Figure` objects made without pyplot (no global state, no
``plt.show``): a notebook shows a returned figure inline, a script saves it with
`save_figure`. Every artist the tests read carries a gid: ``memory`` (the memory line, raw
size units), ``budget``, ``peak`` (the simulator's peak; for a schedule drawn up to a violation
before its peak, the highest memory drawn, "peak so far"; for a pipeline batch drawn below it, were
there one, "batch peak"), ``failure`` (the marker where a replay
stopped), ``failing memory`` (the memory line over the failing operation: what it holds while it
runs, over the budget, or would need).
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator
from memsched.solvers.errors import InputError
from memsched.solvers.jsonio import write_atomic
from memsched.solvers.units import MEMORY_UNIT_BYTES

from .timeline import Bar, Timeline, plateau_middle, timeline_for

SUFFIXES = (".png", ".pdf", ".svg")

# category -> (face colour, legend text); one palette for every problem: blues for first
# forwards, oranges for recomputations, green for backwards, purple for the loss.
STYLE: dict[str, tuple[str, str]] = {
    "F_all": ("#1f5fa8", "forward, keeps tape (F_all)"),
    "F_ck": ("#4f9bd9", "forward, keeps input (F_ck)"),
    "F_n": ("#a6cdf0", "forward, frees input (F_n)"),
    "forward": ("#1f5fa8", "forward"),
    "recompute F_all": ("#d9480f", "recomputed F_all"),
    "recompute F_ck": ("#f08c3a", "recomputed F_ck"),
    "recompute F_n": ("#fcc48b", "recomputed F_n"),
    "recompute forward": ("#f08c3a", "recomputed forward"),
    "recompute backward": ("#b8860b", "recomputed backward"),
    "B": ("#2f9e44", "backward (B)"),
    "backward": ("#2f9e44", "backward"),
    "Loss": ("#7b4fbf", "loss"),
    "offload": ("#8c564b", "offload"),
    "prefetch": ("#e377c2", "prefetch"),
    "failed": ("#e03131", "failing operation"),
}
_EXTRA_COLOURS = ("#7f7f7f", "#bcbd22", "#17becf", "#9467bd", "#8c564b")
MEMORY_COLOUR = "#343a40"
BUDGET_COLOUR = "#e03131"
_BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


class ScheduleFigure(Figure):
    """A `Figure` that also shows itself in notebooks where no pyplot backend registered a
    display formatter (``_repr_png_``); otherwise a plain matplotlib figure."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


# ---------------------------------------------------------------------------- public API
def plot_timeline(timeline: Timeline, *, title: str | None = None, figsize: tuple[float, float] | None = None,
                  ) -> Figure:
    """A two-panel figure of one timeline: memory (top) and operations (bottom)."""
    return _figure([(None, timeline)], title=title, figsize=figsize)


def plot_schedule(problem: str, instance: Any, schedule: Any, *, budget: int | None = None,
                  title: str | None = None, figsize: tuple[float, float] | None = None) -> Figure:
    """Memory over time (the simulator's, with `budget` and the peak marked) above the
    operations of `schedule` on `instance`. A schedule that breaks a rule is drawn up to the
    failing operation, which is marked with the simulator's message."""
    tl = timeline_for(problem, instance, schedule, budget)
    return plot_timeline(tl, title=title if title is not None else _default_title(problem, instance),
                         figsize=figsize)


def plot_comparison(problem: str, instance: Any, schedules: Mapping[str, Any], *, budget: int | None = None,
                    title: str | None = None, path: str | Path | None = None,
                    figsize: tuple[float, float] | None = None) -> Figure:
    """Several schedules of one instance stacked on the same time and memory scales (e.g.
    store-all, periodic, rotor, exact at one budget); written to `path` too when given."""
    if not schedules:
        raise InputError("nothing to compare: no schedules given")
    if path is not None:
        check_suffix(path)
    pairs = [(str(label), timeline_for(problem, instance, sched, budget)) for label, sched in schedules.items()]
    fig = _figure(pairs, title=title if title is not None else _default_title(problem, instance), figsize=figsize)
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_to_file(problem: str, instance: Any, schedule: Any, path: str | Path, *, budget: int | None = None,
                 title: str | None = None, dpi: int = 150) -> Path:
    """`plot_schedule` written to `path` (PNG, PDF or SVG by its extension)."""
    check_suffix(path)
    fig = plot_schedule(problem, instance, schedule, budget=budget, title=title)
    return save_figure(fig, path, dpi=dpi)


def check_suffix(path: str | Path, field: str | None = None) -> str:
    """The figure format named by `path`'s extension; `InputError` for any other, naming `field` (the
    option that gave `path`, ``--output``) when given: ``FILE: FIELD: unknown figure format ...``."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"unknown figure format {suffix or '(none)'!r}: use .png, .pdf or .svg", path=str(path),
                         field=field)
    return suffix[1:]


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 150) -> Path:
    """Write `fig` to `path` (format from the extension): rendered into memory first, then its bytes
    written atomically (`jsonio.write_atomic`), so that a failure leaves no half-written figure and a
    target that cannot seek (a named pipe such as ``fig.png``, which matplotlib's PNG and PDF writers refuse
    or leave a fragment in) gets the whole figure. A path without a figure extension is refused
    (`check_suffix`), ``-o >(cmd)`` (``/dev/fd/N``) included: it cannot say the format."""
    fmt = check_suffix(path)
    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi)
    data = buf.getvalue()
    write_atomic(path, lambda tmp: tmp.write_bytes(data))
    return path


# ---------------------------------------------------------------------------- layout
def _figure(pairs: Sequence[tuple[str | None, Timeline]], *, title: str | None,
            figsize: tuple[float, float] | None) -> Figure:
    rows = _union_rows([tl for _, tl in pairs])
    ops_h = 0.32 * len(rows) + 0.35
    mem_h = 2.3 if len(pairs) == 1 else 1.7
    if figsize is None:
        figsize = (11.0, len(pairs) * (mem_h + ops_h) + 1.3)
    fig = ScheduleFigure(figsize=figsize, layout="constrained")
    axes = fig.subplots(2 * len(pairs), 1, sharex=True,
                        gridspec_kw={"height_ratios": [mem_h, ops_h] * len(pairs)})
    axes = np.atleast_1d(axes)
    x_end = max(tl.end_time for _, tl in pairs) or 1.0
    y_top = max(_memory_top(tl) for _, tl in pairs) or 1.0
    top = y_top * (1.4 if any(tl.failure is not None for _, tl in pairs) else 1.22)
    units = pairs[0][1]
    scale, unit = _memory_scale(units.memory_unit, y_top)
    best = min((tl.objective for _, tl in pairs if tl.failure is None), default=None)
    palette = _stage_colours(max(len(tl.memory) for _, tl in pairs))  # one palette: panels match the legend
    categories: list[str] = []
    for k, (label, tl) in enumerate(pairs):
        mem_ax, ops_ax = axes[2 * k], axes[2 * k + 1]
        _draw_memory(mem_ax, tl, scale, unit, top, x_end, palette)
        mem_ax.set_title(literal_text(_summary(label, tl, scale, unit, best if len(pairs) > 1 else None)), fontsize=9,
                         loc="left")
        if k:
            mem_ax.sharey(axes[0])
        _draw_ops(ops_ax, tl, rows, x_end, figsize[0])
        categories += [b.category for b in tl.bars if b.category not in categories]
    axes[-1].set_xlim(0, x_end * 1.01)
    axes[-1].set_xlabel(literal_text(f"time ({units.time_unit})" if units.time_unit else "time"))
    if title:
        fig.suptitle(literal_text(title), fontsize=11)
    _legend(fig, [tl for _, tl in pairs], categories, palette)
    return fig


def _union_rows(timelines: Sequence[Timeline]) -> list[str]:
    rows: list[str] = []
    for tl in timelines:
        rows += [r for r in tl.rows if r not in rows]
        rows += [b.row for b in tl.bars if b.row not in rows]
    return rows


def _memory_top(tl: Timeline) -> float:
    values = [tl.plotted_peak, float(tl.peak_memory)]
    if tl.budget is not None:
        values.append(float(tl.budget))
    if tl.failure is not None and tl.failure.memory is not None:
        values.append(float(tl.failure.memory))
    return max(values)


def _memory_scale(unit: str | None, top: float) -> tuple[float, str | None]:
    """(divisor, unit label) for the memory axis: sizes in bytes (or a byte unit such as
    "KiB" or "MB") are shown in the binary unit that suits the largest value."""
    base = MEMORY_UNIT_BYTES.get(unit.strip().lower()) if unit else None
    if base is None:
        return 1.0, unit
    for name, scale in _BINARY:
        if top * base >= scale:
            return scale / base, name
    return 1.0 / base, "bytes"


def _fmt(value: float, scale: float, unit: str | None) -> str:
    """`value` / `scale` with its `unit`: an integer as it is, else three significant digits, in fixed point
    where that would need an exponent ("1021.6 MiB", never "1.02e+03 MiB"). A non-zero value is never
    written 0: one too small for `unit` (below 1e-4 of it) is written in its own byte unit ("21 bytes" on a
    GiB axis) when `unit` is a byte unit, else with three significant digits ("0.0000000196")."""
    number = value / scale
    if float(number).is_integer():
        text = f"{int(number)}"
    else:
        text = f"{number:.3g}"
        if "e" in text and abs(number) >= 1:  # 999.5 and above: fixed point, at most one decimal
            text = f"{number:.1f}".rstrip("0").rstrip(".")
        elif "e" in text:  # below 1e-4
            own = _own_byte_unit(number, unit)
            if own is not None:
                return _fmt(*own)
            text = f"{number:.{2 - math.floor(math.log10(abs(number)))}f}".rstrip("0")
    return f"{text} {unit}" if unit else text


def _own_byte_unit(number: float, unit: str | None) -> tuple[float, float, str] | None:
    """(bytes, divisor, unit label) that write `number` `unit`s in the binary unit suiting it (`_memory_scale`),
    or None when `unit` is no byte unit or already that unit (no smaller one to fall back to)."""
    per = MEMORY_UNIT_BYTES.get(unit.strip().lower()) if unit else None
    if per is None:
        return None
    nbytes = number * per
    scale, name = _memory_scale("bytes", abs(nbytes))
    return None if name == unit else (nbytes, scale, name or "bytes")


def _fmt_time(value: float, unit: str | None) -> str:
    text = f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return f"{text} {unit}" if unit else text


def _summary(label: str | None, tl: Timeline, scale: float, unit: str | None, best: float | None) -> str:
    """The panel's title: the simulator's objective and peak (the whole schedule's, also for one drawn up
    to its violation: "INVALID, drawn up to the violation"; headed "up to the violation:" when a broken
    rule ended the replay and they are the replayed prefix's, `Timeline.partial`) and the budget; for a pipeline
    whose event replay is slower than the model period (``extra["replay_period"]``), both."""
    parts = [f"{tl.objective_name} {_fmt_time(tl.objective, tl.time_unit)}"]
    if best is not None and best > 0 and tl.failure is None:
        parts[0] += f" (x{tl.objective / best:.3f})"
    replay = tl.extra.get("replay_period")
    if replay is not None:  # a pipeline whose replay is slower than its model period (`pipeline_timeline`)
        parts[0] += f" (model); replay {_fmt_time(float(replay), tl.time_unit)} per micro-batch"
    parts.append(f"peak {_fmt(tl.peak_memory, scale, unit)}")
    if tl.budget is not None:
        parts.append(f"budget {_fmt(tl.budget, scale, unit)}")
    if tl.failure is not None:
        parts.append("INVALID" if tl.partial else "INVALID, drawn up to the violation")
    text = " · ".join(parts)
    if tl.failure is not None and tl.partial:
        text = f"up to the violation: {text}"
    return f"{label}: {text}" if label else text


def literal_text(text: str) -> str:
    """`text` as matplotlib draws it literally: every ``$`` escaped (``\\$``), so that a ``$...$`` pair in a
    user's name, title or label is neither typeset as math nor, when it is no valid math, an error."""
    return str(text).replace("$", r"\$")


def _default_title(problem: str, instance: Any) -> str:
    name = getattr(instance, "name", "") or ""
    return f"{name} ({problem})" if name else problem


# ---------------------------------------------------------------------------- panels
def _draw_memory(ax: Axes, tl: Timeline, scale: float, unit: str | None, top: float, x_end: float,
                 palette: Sequence[Any]) -> None:
    """The memory panel; series k (stage k) is drawn in palette[k], the colour the legend gives "stage k"
    (palette has at least len(tl.memory) entries, shared by every panel of the figure)."""
    several = len(tl.memory) > 1
    for k, series in enumerate(tl.memory):
        colour = palette[k] if several else MEMORY_COLOUR
        ax.plot(series.times, series.values, color=colour, lw=1.3, gid="memory",
                label=series.label if several else "memory",
                marker="o" if len(series.times) == 1 else None, ms=4)  # one vertex (t = 0): a dot, not nothing
        if not several and len(series.times):
            ax.fill_between(series.times, series.values, color=colour, alpha=0.12, lw=0)
    if tl.budget is not None:
        ax.axhline(tl.budget, color=BUDGET_COLOUR, ls="--", lw=1.2, gid="budget", label="budget")
        hot = tl.failure.time if tl.failure is not None and not tl.peak_drawn else tl.peak_time
        left = x_end > 0 and hot / x_end > 0.4  # the label goes on the side away from the peak (or the failure)
        ax.annotate(literal_text(f"budget {_fmt(tl.budget, scale, unit)}"), xy=(0.0 if left else 1.0, tl.budget),
                    xycoords=("axes fraction", "data"), xytext=(4 if left else -4, 3), textcoords="offset points",
                    ha="left" if left else "right", va="bottom", fontsize=8, color=BUDGET_COLOUR)
    if tl.memory and any(len(s.values) for s in tl.memory):
        peak_time, peak, text = _marked_peak(tl, scale, unit)
        ax.plot([peak_time], [peak], marker="v", color="black", ms=7, ls="none", gid="peak", label="peak")
        near = tl.failure is not None and abs(tl.failure.time - peak_time) < 0.1 * max(x_end, 1e-12)
        label = literal_text(text)
        ha, dx = _peak_label_anchor(ax, label, peak_time, x_end, near)
        ax.annotate(label, xy=(peak_time, peak), xytext=(dx, 7), textcoords="offset points", ha=ha,
                    va="bottom", fontsize=8, fontweight="bold")
    if tl.failure is not None:
        _draw_failure(ax, tl, x_end)
    ax.set_yticks(MaxNLocator(6).tick_values(0, top / scale) * scale)
    ax.set_ylim(0, top)
    title = tl.memory_title
    ax.set_ylabel(literal_text(f"{title}\n({unit})" if unit else title), fontsize=9)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    ax.grid(axis="y", alpha=0.3)
    ax.tick_params(labelsize=8)


def _marked_peak(tl: Timeline, scale: float, unit: str | None) -> tuple[float, float, str]:
    """(time, memory, label) of the peak marker: the simulator's peak where the memory line reaches it,
    else the highest memory drawn (the line's, the failing operation's, or the violation's), labelled
    "peak" when that is the simulator's peak (a failing operation drawn at it), "peak so far" for a schedule
    drawn up to a violation before its peak, "batch peak" for a pipeline batch drawn below the simulator's
    peak, were there one (the simulator charges a 1F1B stage the min(S - s, m) micro-batches its batch holds;
    the title gives the simulator's peak in every case)."""
    if tl.peak_drawn:
        return tl.peak_time, float(tl.peak_memory), f"peak {_fmt(tl.peak_memory, scale, unit)}"
    top = tl.plotted_peak
    series = next(s for s in tl.memory if len(s.values) and float(np.max(s.values)) >= top)
    at = plateau_middle(series.times, series.values, top)
    failing = _failing_memory(tl)
    f = tl.failure
    if failing is not None and failing[2] > top:  # the failing op's memory is the highest drawn
        bar, _, top = failing
        at = 0.5 * (bar.start + bar.end)
    elif failing is None and f is not None and f.memory is not None and f.memory > top:  # the violation's marker
        at, top = f.time, float(f.memory)
    if top >= tl.peak_memory:  # the failing op (or the violation) is where the simulator's peak comes
        return at, top, f"peak {_fmt(top, scale, unit)}"
    return at, top, f"{'batch peak' if f is None else 'peak so far'} {_fmt(top, scale, unit)}"


def _failing_memory(tl: Timeline) -> tuple[Bar, float, float] | None:
    """(failing bar, memory line's last level, memory over the failing op) where the figure draws the
    memory line on over the failing operation (`_draw_failure`): a failure with a known memory other
    than the line's last level and a bar marked failed; None otherwise. Memory in the size unit."""
    f = tl.failure
    failed = [b for b in tl.bars if b.failed]
    if f is None or f.memory is None or not failed:
        return None
    level = _last_level(tl, failed[0].row)
    return (failed[0], level, float(f.memory)) if f.memory != level else None


def _last_level(tl: Timeline, row: str) -> float:
    """The last level of the memory line of `row` (a pipeline's device; its series is labelled with the
    row), else of the figure's one memory line; 0 without one. Memory in the size unit."""
    series = next((s for s in tl.memory if s.label == row), tl.memory[0] if tl.memory else None)
    return float(series.values[-1]) if series is not None and len(series.values) else 0.0


def _peak_label_anchor(ax: Axes, label: str, peak_time: float, x_end: float, near: bool) -> tuple[str, float]:
    """(horizontal alignment, x offset in points) of the peak's label: centred over the peak, or left of it
    when a failure is near (its marker and message lie right of it); anchored right of the peak instead
    when that would put the label past the axes' left edge (a peak near t = 0), left of it when a centred
    label would run past the right edge. The axes' width is estimated before the layout, on the low side."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    width = TextPath((0, 0), label, size=8, prop=FontProperties(weight="bold")).get_extents().width  # points
    fig = ax.figure  # (Axes.get_figure(root=True) needs matplotlib 3.10)
    axes_pt = 0.9 * ax.get_position().width * (fig.get_figwidth() if isinstance(fig, Figure) else 11.0) * 72
    left_pt = axes_pt * min(max(peak_time / max(1.01 * x_end, 1e-12), 0.0), 1.0)  # room left of the peak
    ha, dx = ("right", -8.0) if near else ("center", 0.0)
    if (width + 8 if near else width / 2) > left_pt - 2:
        return "left", 4.0
    if not near and width / 2 > axes_pt - left_pt - 2:
        return "right", 0.0
    return ha, dx


def _draw_failure(ax: Axes, tl: Timeline, x_end: float) -> None:
    f = tl.failure
    assert f is not None
    failed = [b for b in tl.bars if b.failed]
    level = _last_level(tl, failed[0].row if failed else "")
    y = f.memory if f.memory is not None else level
    failing = _failing_memory(tl)
    if failing is not None:  # the memory line goes on over the failing op, with the memory it holds (or would need)
        bar, level, memory = failing
        ax.plot([bar.start, bar.start, bar.end], [level, memory, memory], color=BUDGET_COLOUR, lw=1.6,
                gid="failing memory")
        ax.fill_between([bar.start, bar.end], [memory, memory], color=BUDGET_COLOUR, alpha=0.12, lw=0)
    ax.plot([f.time], [y], marker="X", color=BUDGET_COLOUR, ms=11, mec="white", ls="none", gid="failure",
            label="violation")
    ax.axvline(f.time, color=BUDGET_COLOUR, lw=1, ls=":")
    text = literal_text("\n".join(textwrap.wrap(f"✗ {f.message}", 90)[:2]))
    right = x_end > 0 and f.time / x_end > 0.5
    ax.annotate(text, xy=(f.time, 0.97), xycoords=("data", "axes fraction"), xytext=(-6 if right else 6, 0),
                textcoords="offset points", ha="right" if right else "left", va="top", fontsize=8,
                color="#a51111", bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": BUDGET_COLOUR, "alpha": 0.9})


def _draw_ops(ax: Axes, tl: Timeline, rows: list[str], x_end: float, fig_width: float) -> None:
    ypos = {row: len(rows) - 1 - k for k, row in enumerate(rows)}
    min_w = x_end * 0.0015
    edge = 0.4 if len(tl.bars) < 400 else 0.0
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for b in tl.bars:
        groups.setdefault((b.row, b.category), []).append((b.start, max(b.end - b.start, min_w)))
    for (row, cat), spans in groups.items():
        failed = cat == "failed"
        ax.broken_barh(spans, (ypos[row] - 0.38, 0.76), facecolors=colour_of(cat),
                       edgecolors="#a51111" if failed else "white", linewidths=1.2 if failed else edge,
                       hatch="xx" if failed else None, gid=f"ops:{cat}")
    # labels (stage, micro-batch or node name) where the bar is wide enough to hold them
    points_per_unit = fig_width * 72 * 0.82 / max(x_end, 1e-12)
    labelled = 0
    for b in tl.bars:
        if not b.label or labelled > 400:
            continue
        width_pt = (b.end - b.start) * points_per_unit
        if width_pt < 4.3 * len(b.label) + 3:
            continue
        dark = b.category in ("F_all", "forward", "B", "backward", "Loss", "recompute F_all", "failed")
        ax.text(0.5 * (b.start + b.end), ypos[b.row], literal_text(b.label), ha="center", va="center", fontsize=6.5,
                color="white" if dark else "black", clip_on=True)
        labelled += 1
    ax.set_yticks(range(len(rows)), [literal_text(r) for r in reversed(rows)], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=8)
    if tl.failure is not None:
        ax.axvline(tl.failure.time, color=BUDGET_COLOUR, lw=1, ls=":")


def colour_of(category: str) -> str:
    """The face colour of an operation category (the same in every figure)."""
    if category in STYLE:
        return STYLE[category][0]
    return _EXTRA_COLOURS[sum(map(ord, category)) % len(_EXTRA_COLOURS)]


def _stage_colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.85 * k / max(n - 1, 1)) for k in range(n)]


def _legend(fig: Figure, timelines: Sequence[Timeline], categories: list[str], palette: Sequence[Any]) -> None:
    """The figure legend; "stage k" gets palette[k], the colour _draw_memory used for stage k."""
    handles: list[Any] = []
    if not any(len(tl.memory) > 1 for tl in timelines):
        handles.append(Line2D([], [], color=MEMORY_COLOUR, lw=1.3, label="memory"))
    else:
        n = max(len(tl.memory) for tl in timelines)
        handles += [Line2D([], [], color=c, lw=1.3, label=f"stage {k}") for k, c in enumerate(palette[:n])]
    if any(tl.budget is not None for tl in timelines):
        handles.append(Line2D([], [], color=BUDGET_COLOUR, ls="--", lw=1.2, label="budget"))
    handles.append(Line2D([], [], color="black", marker="v", ls="none", label="peak"))
    if any(tl.failure is not None for tl in timelines):
        handles.append(Line2D([], [], color=BUDGET_COLOUR, marker="X", ls="none", ms=9, label="violation"))
    order = list(STYLE) + sorted(c for c in categories if c not in STYLE)
    for cat in order:
        if cat in categories:
            label = literal_text(STYLE[cat][1] if cat in STYLE else cat)
            handles.append(Patch(facecolor=colour_of(cat), edgecolor="#a51111" if cat == "failed" else "none",
                                 hatch="xx" if cat == "failed" else None, label=label))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), max(1, math.ceil(len(handles) / 2))),
               fontsize=8, frameon=False)
