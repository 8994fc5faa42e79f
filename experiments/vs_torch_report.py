"""Verdicts, printed summary and figure of `experiments.bench_vs_torch`'s CSV.

Issue #20's two targets, per model and size, read from the rows alone: memsched's curve lies on
or below every other tool's (`verdicts`: no other tool's point has a lower peak and a lower time
than every memsched point), and memsched's smallest peak is at most checkpoint-per-block's.
Times are compared as overheads over plain torch's time of the same run (1 + overhead), so rows
from another run (``--only-compile``) compare too. Two overheads are judged side by side:
``overhead`` (paired: the median of each step's ratio to the plain step timed just before it),
reported as ``curve_on_or_below``, and ``overhead_unpaired`` (the ratio of the two medians),
reported as ``curve_on_or_below_unpaired``. A third verdict, ``curve_within_noise``, weighs the
paired overheads' 95% intervals (``overhead_ci``): a point breaks it only when it is below every
memsched point at no more memory beyond both intervals (None for rows without intervals).
A fourth, ``curve_on_or_below_duel``, takes the head-to-head duels of `experiments.vs_torch_duel`
(``<csv stem>_duels.csv``) where a point has them: a dueled point is matched when memsched's plan
at its peak (block or layer chain, measured peak at most the point's) took at most 2% more time
in the median over the duel's rounds (a point whose duels all measured memsched above its peak,
``peak_ok`` False, is unmatched); a point not dueled keeps its paired verdict (None when no point
of the model and size was dueled). Memsched rows whose gradient check did not pass (``grad_ok``
False or empty) are no memsched points in any verdict; the duel verdict counts only the duels whose
gradient checks passed (`vs_torch_duel.checked_duels`: unknown ones, of an older duels CSV, as passed).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

SUMMARY_COLUMNS = (
    "model",
    "size",
    "load",
    "per_block_peak",
    "memsched_smallest_peak",
    "smallest_at_most_per_block",
    "curve_on_or_below",
    "unmatched",
    "curve_on_or_below_unpaired",
    "unmatched_unpaired",
    "curve_within_noise",
    "unmatched_beyond_noise",
    "curve_on_or_below_duel",
    "unmatched_duel",
)
DUEL_COLUMNS = (
    "model",
    "size",
    "tool",
    "setting",
    "granularity",
    "their_peak",
    "memsched_peak",
    "peak_ok",
    "memsched_budget",
    "ratio",
    "ratio_ci",
    "ratio_of_least",
    "their_time_ms",
    "memsched_time_ms",
    "rounds",
    "load",
    "grad_ok",
    "their_grad_ok",
)  # experiments.vs_torch_duel's CSV (an older one lacks the last two: unknown, `vs_torch_duel.checked_duels`)
TIME_NOISE = 1.02  # a memsched point matches another tool's at up to 2% more time (1 + overhead)
#: the columns of the bench's CSV and of the duels that hold a whole number (bytes, rounds) where not empty
INT_COLUMNS = ("peak_bytes", "alloc_peak", "predicted_peak", "budget", "rounds", "their_peak", "memsched_peak",
               "memsched_budget")
#: those that hold a finite number (ms, ratios, overheads, s, load) where not empty
FLOAT_COLUMNS = ("time_ms", "overhead", "overhead_unpaired", "overhead_ci", "time_min_ms", "plan_s", "load", "ratio",
                 "ratio_ci", "ratio_of_least", "their_time_ms", "memsched_time_ms")
#: the tools in the order the figure gives them their (colour, marker) pairs (`tool_styles`)
TOOL_ORDER = ("torch", "checkpoint-per-block", "checkpoint_sequential", "torch.compile(aot_eager, min-cut)",
              "torch.compile(inductor)", "memsched-block", "memsched-layer", "rockmate")


def duels_path(csv_path: Path) -> Path:
    """Where `experiments.vs_torch_duel` writes the duels of `csv_path`'s points."""
    return csv_path.with_name(f"{csv_path.stem}_duels.csv")


def read_rows(path: Path, required: tuple[str, ...] = ("model", "size"), field: str = "--out") -> list[dict]:
    """The CSV's rows (strings; a column missing from an older CSV is absent from its rows). A file without a
    column of `required`, with a row of more or fewer fields than its header, or that is not UTF-8 CSV
    (`benchtable.read_table`), or with a value of `INT_COLUMNS` not a whole number or of `FLOAT_COLUMNS` not a
    finite number (empty is no value) is an `InputError` naming it, `field` and the row."""
    from memsched.experiments.benchtable import read_table
    from memsched.solvers.errors import InputError

    rows = read_table(path, field=field, required=required)[1]
    for n, row in enumerate(rows, 1):
        bad = next((c for c in (*INT_COLUMNS, *FLOAT_COLUMNS) if not _number(row.get(c), c in INT_COLUMNS)), None)
        if bad is not None:
            kind = "a whole number" if bad in INT_COLUMNS else "a finite number"
            raise InputError(f"row {n} ({row.get('model')} {row.get('size')} {row.get('tool')}): {bad} "
                             f"{row[bad]!r} is not {kind}", path=str(path), field=field)
    return rows


def _number(text: str | None, whole: bool) -> bool:
    """Whether `text` is no value (None, empty) or a number: an integer with `whole`, else a finite float."""
    if text is None or text == "":
        return True
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        return False
    return math.isfinite(value)


def _keys(rows: list[dict]) -> list[tuple[str, str]]:
    """The (model, size) pairs of `rows`, sizes in the order tiny, small, medium, large."""
    order = ("tiny", "small", "medium", "large")
    return sorted(
        {(r["model"], r["size"]) for r in rows},
        key=lambda k: (k[0], order.index(k[1]) if k[1] in order else len(order), k[1]),
    )


def _peak(r: dict) -> int | None:
    """The row's tracker peak, else its allocator peak (torch.compile(inductor)), else None (bytes;
    None too for a failed or not-run row)."""
    if str(r.get("status", "")).startswith(("failed", "not run")):
        return None
    for column in ("peak_bytes", "alloc_peak"):
        if r.get(column) not in (None, ""):
            return int(r[column])
    return None


def _has(r: dict, column: str) -> bool:
    return r.get(column) not in (None, "")


def _at_most_its_peak(r: dict, ours: list[dict]) -> list[dict]:
    """The memsched rows of `ours` whose peak is at most `r`'s, on `r`'s measure (the tracker's,
    else the allocator's)."""
    column = "peak_bytes" if _has(r, "peak_bytes") else "alloc_peak"
    return [o for o in ours if _has(o, column) and int(o[column]) <= int(r[column])]


def _matched(r: dict, ours: list[dict], overhead: str = "overhead") -> bool:
    """Some memsched row of `ours` has a peak at most `r`'s and a time at most 2% above it
    (1 + `overhead` column, time noise)."""
    return any(
        _has(o, overhead) and 1 + float(o[overhead]) <= TIME_NOISE * (1 + float(r[overhead]))
        for o in _at_most_its_peak(r, ours)
    )


def _beyond_noise(r: dict, ours: list[dict]) -> bool:
    """Every memsched row of `ours` with a peak at most `r`'s is slower than `r` by more than the
    2% noise allowance and by more than the two 95% intervals of the paired overheads
    (``overhead_ci``): `r` is below the curve beyond the noise. False when a row lacks an interval."""
    rivals = _at_most_its_peak(r, ours)
    if not all(_has(x, "overhead_ci") for x in [r, *rivals]):
        return False
    hi = float(r["overhead"]) + float(r["overhead_ci"])
    return all(
        1 + float(o["overhead"]) > TIME_NOISE * (1 + float(r["overhead"]))
        and float(o["overhead"]) - float(o["overhead_ci"]) > hi
        for o in rivals
    )


def _grads_failed(r: dict) -> bool:
    """A memsched row whose gradient check did not pass (``grad_ok`` not "True": False or empty):
    its plan trains something else, so it is no point of memsched's curve. A row of an older CSV
    without the column (absent from the row, `read_rows`) is kept, as the other columns it lacks."""
    return r["tool"].startswith("memsched") and "grad_ok" in r and str(r["grad_ok"]) != "True"


def _split(rows: list[dict], key: tuple[str, str]) -> tuple[list[dict], list[dict], list[dict]]:
    """(measured rows, memsched's, the other tools' except plain torch) of one model and size;
    memsched rows whose gradients differ from plain autograd (`_grads_failed`) are left out."""
    rs = [r for r in rows if (r["model"], r["size"]) == key and _peak(r) is not None and _has(r, "time_ms")
          and not _grads_failed(r)]
    ours = [r for r in rs if r["tool"].startswith("memsched")]
    theirs = [r for r in rs if not r["tool"].startswith("memsched") and r["tool"] != "torch"]
    return rs, ours, theirs


def _unmatched(ours: list[dict], theirs: list[dict], overhead: str) -> list[dict] | None:
    """The points of `theirs` no point of `ours` matches on `overhead`; None when a row lacks it."""
    if not all(_has(r, overhead) for r in ours + theirs):
        return None
    return [r for r in theirs if not _matched(r, ours, overhead)]


def contested(rows: list[dict], key: tuple[str, str], every: bool = False) -> list[dict]:
    """The other tools' measured rows of `key` (model, size) to duel (`experiments.vs_torch_duel`):
    those no memsched row matches on the paired or the unpaired overheads, or every one with
    `every` (torch.compile(inductor)'s excepted: allocator peaks only)."""
    _, ours, theirs = _split(rows, key)
    theirs = [r for r in theirs if r["tool"] != "torch.compile(inductor)"]
    if every:
        return theirs
    lost = [*(_unmatched(ours, theirs, "overhead") or []), *(_unmatched(ours, theirs, "overhead_unpaired") or [])]
    return [r for r in theirs if r in lost]


def _its_duels(r: dict, duels: list[dict]) -> list[dict]:
    """The duels of `r`'s point (same model, size, tool and setting)."""
    return [d for d in duels
            if (d["model"], d["size"], d["tool"], d["setting"]) == (r["model"], r["size"], r["tool"], r["setting"])]


def _duel_ratio(r: dict, duels: list[dict]) -> float | None:
    """The least median time ratio (memsched / `r`'s tool) of `r`'s duels whose memsched peak was
    at most `r`'s (``peak_ok``); ``inf`` when `r` was duelled but by no such duel (memsched's plan
    never fitted under its peak: the point is lost, docs/chain.md); None when `r` has no duel."""
    mine = _its_duels(r, duels)
    ratios = [float(d["ratio"]) for d in mine if d.get("peak_ok") == "True" and _has(d, "ratio")]
    if not ratios:
        return float("inf") if mine else None
    return min(ratios)


def verdicts(rows: list[dict], duels: list[dict] | None = None) -> list[dict]:
    """Per (model, size), the issue's two targets (``curve_on_or_below`` on the paired overheads,
    ``curve_on_or_below_unpaired`` on the unpaired ones, None where the CSV lacks them; with the
    head-to-head `duels` where a point has them, ``curve_on_or_below_duel``), the points that
    break each (``unmatched``...), and whether memsched's smallest measured peak is at most
    checkpoint-per-block's (``smallest_at_most_per_block``; bytes). `duels` count as `vs_torch_duel.checked_duels`
    leaves them (a failed gradient check on either side: module docstring)."""
    from memsched.experiments.vs_torch_duel import checked_duels

    duels = checked_duels(duels or [], rows)
    out = []
    for key in _keys(rows):
        rs, ours, theirs = _split(rows, key)
        per_block = min((int(r["peak_bytes"]) for r in rs if r["tool"] == "checkpoint-per-block"), default=None)
        smallest = min((int(r["peak_bytes"]) for r in ours if _has(r, "peak_bytes")), default=None)
        row = {
            "model": key[0],
            "size": key[1],
            "load": next((r.get("load") for r in rs), ""),
            "per_block_peak": per_block,
            "memsched_smallest_peak": smallest,
            "smallest_at_most_per_block": None if per_block is None or smallest is None else smallest <= per_block,
        }
        for suffix, overhead in (("", "overhead"), ("_unpaired", "overhead_unpaired")):
            beaten = _unmatched(ours, theirs, overhead)
            row[f"curve_on_or_below{suffix}"] = None if beaten is None else not beaten
            row[f"unmatched{suffix}"] = (
                "" if beaten is None else "; ".join(f"{r['tool']} {r['setting']}" for r in beaten)
            )
        has_ci = bool(ours) and all(_has(r, "overhead_ci") for r in ours + theirs)
        beyond = [r for r in theirs if _beyond_noise(r, ours)]
        row["curve_within_noise"] = (not beyond) if has_ci else None
        row["unmatched_beyond_noise"] = "; ".join(f"{r['tool']} {r['setting']}" for r in beyond)
        ratios = {id(r): _duel_ratio(r, duels or []) for r in theirs}
        if any(v is not None for v in ratios.values()):
            paired = _unmatched(ours, theirs, "overhead") or []
            lost = []
            for r in theirs:
                ratio = ratios[id(r)]
                if ratio > TIME_NOISE if ratio is not None else r in paired:
                    lost.append(r)
            row["curve_on_or_below_duel"] = not lost
            row["unmatched_duel"] = "; ".join(f"{r['tool']} {r['setting']}" for r in lost)
        out.append(row)
    return out


def summary(rows: list[dict], duels: list[dict] | None = None) -> list[str]:
    """Per (model, size): each tool's smallest peak with its overhead (the tracker's; the
    allocator's for torch.compile(inductor)); the other tools' points no memsched point matches,
    on the paired and on the unpaired overheads, and after the `duels`."""
    out = []
    for key, verdict in zip(_keys(rows), verdicts(rows, duels)):
        rs, _, _ = _split(rows, key)
        out.append(f"{key[0]} {key[1]} (load {next((r.get('load') for r in rs), '?')}):")
        for tool in dict.fromkeys(r["tool"] for r in rs):
            best = min((r for r in rs if r["tool"] == tool), key=lambda r: (_peak(r), float(r["time_ms"])))
            kind = "tracker" if _has(best, "peak_bytes") else "allocator"
            out.append(
                f"    {tool:>22}: smallest peak {_peak(best) / 2**20:8.2f} MiB ({kind}) at "
                f"{100 * float(best['overhead']):+6.1f}% ({best['setting']})"
            )
        out.append(
            "    points of other tools no memsched point matches (paired times): " + (verdict["unmatched"] or "none")
        )
        if verdict["curve_within_noise"] is not None:
            out.append("    ... beyond the 95% intervals: " + (verdict["unmatched_beyond_noise"] or "none"))
        if verdict["curve_on_or_below_unpaired"] is not None:
            out.append("    ... (unpaired times): " + (verdict["unmatched_unpaired"] or "none"))
        if verdict.get("curve_on_or_below_duel") is not None:
            out.append("    ... after the head-to-head duels: " + (verdict["unmatched_duel"] or "none"))
    return out


def save_png(fig: Any, path: Path, dpi: int = 110) -> None:
    """Write the matplotlib figure `fig` to `path` as a PNG of `dpi` dots per inch, atomically, with the writer of
    `figures._save_figure`: drawn in memory first, then written to a temporary file beside `path` and renamed into
    place (`figures._write_together`) with interrupts held back (`cli.interrupts_deferred`), so that a Ctrl-C or a
    full disk leaves the old figure or the new one, never a torn file; `fig` is closed. A path that cannot be
    written is an `InputError` naming it."""
    import io

    import matplotlib.pyplot as plt
    from memsched.experiments.cli import interrupts_deferred
    from memsched.experiments.figures import _write_together

    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    with interrupts_deferred():
        _write_together([(path, buf.getvalue())])


def tool_styles(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Tool -> matplotlib line keywords (colour, marker): one pair per tool, none shared, the same in every panel
    of the figure (`plotting.styles.distinct_styles`: the tools of `TOOL_ORDER` first, in its order, so that
    theirs do not depend on which other tools `rows` hold; then the others by name)."""
    from memsched.experiments.plotting.styles import distinct_styles

    tools = [*TOOL_ORDER, *sorted({r["tool"] for r in rows} - set(TOOL_ORDER))]
    return distinct_styles((tool, None) for tool in tools)


def lower_envelope(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points of `points` (peak, time) that no other one beats in both: none has a peak and a time at most
    theirs with one of the two smaller; sorted by peak (time then decreases strictly), a point given twice once.
    The figure's line of a tool: its repeat or noisy points off this envelope are marks, not joined."""
    out: list[tuple[float, float]] = []
    for peak, time in sorted(set(points)):
        if not out or time < out[-1][1]:  # sorted by peak, then time: beaten unless faster than every smaller peak
            out.append((peak, time))
    return out


#: the note above the figure's panels: what its lines and hollow marks are (`figure`)
ENVELOPE_NOTE = ("line: each tool's lower envelope (its points that no other point of the same tool beats in both "
                 "peak and time); hollow: its other points (another of its points is no slower at no more memory)")


def figure(rows: list[dict], path: Path) -> None:
    """Time overhead (%, paired) against peak memory (MiB), per tool (its colour and marker the same in every
    panel: `tool_styles`) a line through its lower envelope (`lower_envelope`: the points of its own it does not
    beat in both, filled) and its other points hollow, unjoined (noisy repeats at one peak do not zigzag into a
    curve), one panel per model/size; second row: against the allocator's peak (torch.compile(inductor) only
    there). Written atomically (`save_png`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = _keys(rows)
    styles = tool_styles(rows)
    fig, axes = plt.subplots(2, len(keys), figsize=(4.6 * len(keys), 7.6), squeeze=False)
    for col, key in enumerate(keys):
        for ax, column, label in (
            (axes[0][col], "peak_bytes", "live-tensor tracker"),
            (axes[1][col], "alloc_peak", "CPU allocator"),
        ):
            rs = [
                r
                for r in rows
                if (r["model"], r["size"]) == key and _has(r, column) and _peak(r) is not None and _has(r, "overhead")
            ]
            for tool in dict.fromkeys(r["tool"] for r in rs):
                pts = [(int(r[column]) / 2**20, 100 * float(r["overhead"])) for r in rs if r["tool"] == tool]
                _draw_tool(ax, tool, pts, styles[tool])
            ax.set_title(f"{key[0]} ({key[1]})", fontsize=9)
            ax.set_xlabel(f"peak memory (MiB, {label})", fontsize=8)
            ax.set_ylabel("time overhead vs plain torch (%, paired median)", fontsize=8)
            ax.grid(alpha=0.3)
            if rs:
                ax.legend(fontsize=6)
            else:
                ax.text(0.5, 0.5, "not measured (--no-probe)", ha="center", transform=ax.transAxes, fontsize=8)
    fig.text(0.5, 0.995, ENVELOPE_NOTE, ha="center", va="top", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.975))
    save_png(fig, path)


def _draw_tool(ax: Any, tool: str, points: list[tuple[float, float]], style: dict[str, Any]) -> None:
    """One tool's `points` (peak MiB, overhead %) on `ax`: its lower envelope as a line with filled marks (the
    legend's entry, labelled `tool`), the points off it as hollow marks of its colour and marker, unjoined."""
    front = lower_envelope(points)
    ax.plot([p for p, _ in front], [o for _, o in front], linestyle="-" if len(front) > 1 else "none",
            label=tool, markersize=3, **style)
    from matplotlib.markers import MarkerStyle

    off = [p for p in points if p not in front]
    if off:  # hollow: an unfilled marker ("x") has no face to empty, so it is drawn faded instead
        look = ({"facecolors": "none", "edgecolors": style["color"]} if MarkerStyle(style["marker"]).is_filled()
                else {"color": style["color"], "alpha": 0.4})
        ax.scatter([p for p, _ in off], [o for _, o in off], s=9, marker=style["marker"], linewidths=0.8,
                   label=f"_{tool} (off its envelope)", **look)
