"""Figure (g): executed schedules, measured / predicted peak memory and step time.

Three panels, one row of points per instance and budget (instances grouped by problem: chain, join,
offload, graph; the instance is named at its first budget), one point per solver in that row, each
solver label with its own colour and marker, named in the legend with the model its optimal rows are
optimal in (`experiments.plotting.labels.model_labels`, `experiments.figures.figure_styles`, as the other
figures); the points of several solvers (or repeats) in one row are set apart vertically, so that none
hides another:

- memory by the tensor tracker (`models.memory.LiveTensorTracker` on CPU,
  ``torch.cuda.max_memory_allocated`` on CUDA): the row's ``memory_ratio``, ``measured_peak`` over
  ``tracker_predicted_peak``, the peak of the simulator's replay of the schedule under the tracker's own
  overheads (`models.chain.overheads.tracker_chain`), or ``predicted_peak`` where the instance has no
  separate tracker overheads (and on CUDA); offloading on CPU: the sequential replay's peak under the
  tracker's overheads (`models.offload.executor.OffloadStepResult`). Each panel divides the pair of
  `models.measure.StepResult.comparisons`, whose divisors the row holds (`models.run.execute_schedule`);
- memory by the independent method (`models.alloc_probe`: torch.profiler allocator events,
  sharing no code with the tracker that also profiled the instance): ``independent_ratio``,
  ``independent_peak`` over ``independent_predicted_peak``, the allocator's ``predicted_peak``
  (offloading on CPU: the sequential replay's);
- step time: ``time_ratio``, ``measured_time_ms`` (median of the timed repeats) over the replay's
  makespan in ms (``compared_makespan``; offloading on CPU: the sequential replay's), with a bar from the
  fastest to the slowest run (``time_ratio_min`` .. ``time_ratio_max``).

Rows without ``memory_ratio`` / ``independent_ratio`` (older tables): ``measured_peak /
peak_memory`` and ``independent_peak / peak_memory`` (the solver's peak) instead.

Rows with nothing to draw (no ``measured_peak``: an execution that failed, status ``error``, an executed
row without a measurement, a cell without a schedule) are counted and named in the note under the
figure with why (``not drawn: flaky (rotor, 90%): execution failed: ...``), never dropped silently.

The shaded bands are the targets (memory +-5%, time +-15%); the note under the figure states
the measuring settings (threads, warm-up, repeats) and the machine's load average during the
runs, so that a reader can judge the times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

PROBLEM_ORDER = ("chain", "join", "offload", "graph")
#: the vertical room (in rows) that the points of one instance and budget share
ROW_SPREAD = 0.7
#: the most a note names of the rows not drawn (the count covers them all)
NOT_DRAWN_NAMED = 12

__all__ = ["measured_ratios", "not_drawn_note", "PROBLEM_ORDER"]


def _num(rows: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(rows[col], errors="coerce") if col in rows else pd.Series(float("nan"), index=rows.index)


def _text(rows: pd.DataFrame, col: str, empty: str = "") -> pd.Series:
    """Column `col` of `rows` as text, `empty` where it is missing (or the whole column is absent)."""
    if col not in rows:
        return pd.Series(empty, index=rows.index, dtype=object)
    return rows[col].astype(object).where(rows[col].notna(), empty).astype(str)


def _ranged(values: pd.Series) -> str:
    v = values.dropna()
    if v.empty:
        return "?"
    lo, hi = v.min(), v.max()
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def solver_labels(rows: pd.DataFrame) -> pd.Series:
    """Each row's solver label as the figures name it: ``solver_label``, else ``solver``, else "?"."""
    label = _text(rows, "solver_label")
    return label.where(label != "", _text(rows, "solver", "?")).replace("", "?")


def _drawable(rows: pd.DataFrame) -> pd.Series:
    """Which rows have a measurement to draw (a boolean Series on the index)."""
    return _num(rows, "measured_peak").notna() & _num(rows, "peak_memory").notna()


def _why_not_drawn(row: pd.Series) -> str:
    """Why a row without a measurement is not drawn: its error message (a failed execution), "no
    measurement" for a schedule that was found (executed or not), else its status ("infeasible", ...)."""
    from .figures import FOUND, clip_text

    status = str(row.get("status")) if pd.notna(row.get("status")) else "no status"
    message = str(row.get("message")) if pd.notna(row.get("message")) else ""
    if status == "error":
        return clip_text(message or "error", 90)
    if status in FOUND:
        executed = str(row.get("execute")).lower() not in ("false", "0", "0.0")
        return "executed, no measurement" if executed else "not executed"
    return status


def not_drawn_note(rows: pd.DataFrame) -> str:
    """The note line naming the rows of `rows` that figure (g) cannot draw (no ``measured_peak``), each
    as ``instance (solver, budget): why`` (`_why_not_drawn`), at most `NOT_DRAWN_NAMED` of them; "" when
    every row is drawn."""
    missed = rows[~_drawable(rows)]
    if missed.empty:
        return ""
    labels, budgets = solver_labels(missed), _text(missed, "budget_spec", "?")
    # instance names arrive escaped for matplotlib (`figures.predicted_vs_measured`); `_finish` escapes the note
    names = _text(missed, "instance", "?").str.replace("\\$", "$", regex=False)
    parts = [f"{name} ({label}, {budget}): {_why_not_drawn(row)}"
             for name, label, budget, (_, row) in zip(names, labels, budgets, missed.iterrows())]
    more = f"; ... and {len(parts) - NOT_DRAWN_NAMED} more" if len(parts) > NOT_DRAWN_NAMED else ""
    return f"not drawn, {len(parts)} of {len(rows)} rows: " + "; ".join(parts[:NOT_DRAWN_NAMED]) + more


def _layout(r: pd.DataFrame) -> tuple[pd.Series, list[str], list[int]]:
    """The y position of each drawn row (a Series on the index), the tick label of each row of the
    figure and the rows that start an instance: one row per (instance, budget), instances in
    `PROBLEM_ORDER` then as they come, budgets in order; the points of one row (several solvers or
    repeats, in the styles' order ``_rank``) spread over `ROW_SPREAD`, so that none is drawn over another."""
    from .figures import _budget_sort

    order = r["problem"].map({p: i for i, p in enumerate(PROBLEM_ORDER)}).fillna(len(PROBLEM_ORDER))
    first = {inst: i for i, inst in enumerate(dict.fromkeys(r["instance"]))}
    keys = sorted({(float(o), first[inst], _budget_sort(b), inst, b)
                   for o, inst, b in zip(order, r["instance"], r["_budget"])})
    slot = {(inst, b): i for i, (_, _, _, inst, b) in enumerate(keys)}
    ticks: list[str] = []
    starts: list[int] = []
    for i, (_, _, _, inst, b) in enumerate(keys):
        if i and keys[i - 1][3] == inst:
            ticks.append(b)
            continue
        starts.append(i)
        problem = str(r.loc[r["instance"] == inst, "problem"].iloc[0])
        ticks.append(f"{inst} ({problem})  {b}".rstrip())
    y = pd.Series(0.0, index=r.index)
    for (inst, b), group in r.groupby(["instance", "_budget"], sort=False):
        members = group.sort_values(["_rank", "_label"], kind="stable").index
        step = min(0.25, ROW_SPREAD / len(members))
        for k, idx in enumerate(members):
            y[idx] = slot[(inst, b)] + (k - (len(members) - 1) / 2) * step
    return y, ticks, starts


def measured_ratios(rows: pd.DataFrame, out_dir: Path, stem: str, title: str) -> list[Path]:
    """Draw figure (g) from the executed rows of `rows` (module docstring); returns the PNG and PDF."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from .figures import _finish, figure_styles, literal_text
    from .plotting.labels import model_labels

    r = rows[_drawable(rows)].copy()
    # the budget as text ("" when empty: NaN, which astype(str) keeps under pandas 3, has no text methods)
    r["_budget"] = _text(r, "budget_spec")
    r["_label"] = solver_labels(r)
    styles = figure_styles(r["_label"])
    shown = model_labels(rows.assign(solver_label=solver_labels(rows))) if len(rows) else {}
    r["_rank"] = r["_label"].map({label: i for i, label in enumerate(styles)})
    y, ticks, starts = _layout(r)
    # each method against the prediction under its own overheads (models.chain.overheads; offload on CPU:
    # the sequential replay), as the executors' memory_ratio / independent_ratio; older tables: the solver's peak
    mem = _num(r, "memory_ratio").fillna(_num(r, "measured_peak") / _num(r, "peak_memory"))
    ind = _num(r, "independent_ratio").fillna(_num(r, "independent_peak") / _num(r, "peak_memory"))
    tim, tlo, thi = _num(r, "time_ratio"), _num(r, "time_ratio_min"), _num(r, "time_ratio_max")
    tracker = ", ".join(sorted({str(v) for v in r.get("memory_method", pd.Series(dtype=object)).dropna()})) or \
        "LiveTensorTracker"
    indep = ", ".join(sorted({str(v) for v in r.get("independent_method", pd.Series(dtype=object)).dropna()})) or \
        "models.alloc_probe"
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.3 * max(len(ticks), 1) + 2.4), sharey=True)
    panels = ((axes[0], mem, None, None, 0.05, f"memory, tracker ({tracker})"),
              (axes[1], ind, None, None, 0.05, f"memory, independent ({indep})"),
              (axes[2], tim, tlo, thi, 0.15, "step time (median; bar: fastest..slowest run)"))
    for ax, val, lo, hi, band, name in panels:
        _panel(ax, r, y, styles, (val, lo, hi), band, name)
    for ax in axes:  # a faint line between two instances' rows
        for i in starts[1:]:
            ax.axhline(i - 0.5, color="#bbbbbb", lw=0.6)
    axes[0].set_yticks(range(len(ticks)))
    axes[0].set_yticklabels(ticks, fontsize=7.5)
    axes[0].set_ylim(len(ticks) - 0.5, -0.5)
    handles = [Line2D([], [], ls="", color=kw["color"], marker=kw["marker"], label=literal_text(shown.get(lab, lab)))
               for lab, kw in styles.items()]
    _heading(fig, title, handles)
    note = _settings_note(r)
    missed = not_drawn_note(rows)
    return _finish(fig, rows, out_dir, stem, f"{note}\n{missed}" if missed else note)


def _heading(fig: Any, title: str, handles: list[Any]) -> None:
    """The title, the legend below it (up to 4 entries a line) and the panels below both: placed in
    inches from the top, so that neither overlaps the other whatever the figure's height."""
    inch = 1 / fig.get_figheight()
    ncol = max(1, min(len(handles), 4))
    lines = -(-len(handles) // ncol)
    fig.suptitle(title, fontsize=10, y=1 - 0.06 * inch, va="top")
    if handles:
        fig.legend(handles=handles, loc="upper center", ncol=ncol, fontsize=7, frameon=False,
                   bbox_to_anchor=(0.5, 1 - 0.24 * inch))
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.3 + 0.2 * lines) * inch))


def _panel(ax: Any, r: pd.DataFrame, y: pd.Series, styles: dict[str, dict[str, Any]],
           series: tuple[pd.Series, pd.Series | None, pd.Series | None], band: float, name: str) -> None:
    """One panel: the target band, each row's ratio at its `y` in its solver's style, the spread bars
    (`lo` .. `hi`, time panel) and the x limits over the finite values."""
    val, lo, hi = series
    ax.axvspan(1 - band, 1 + band, color="#dddddd", alpha=0.6, lw=0)
    ax.axvline(1.0, color="#777777", lw=0.8, ls="--")
    for idx, label in r["_label"].items():
        v = val.get(idx)
        if v is None or pd.isna(v):
            continue
        kw = styles[label]
        if lo is not None and hi is not None and pd.notna(lo.get(idx)) and pd.notna(hi.get(idx)):
            ax.plot([lo[idx], hi[idx]], [y[idx], y[idx]], color=kw["color"], lw=1.2, alpha=0.7)
        ax.scatter([v], [y[idx]], color=kw["color"], marker=kw["marker"], s=24, zorder=3)
    ax.set_title(f"{name}\nband: +-{band:.0%}", fontsize=8.5)
    ax.set_xlabel("measured / predicted (simulator)", fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    ax.tick_params(labelsize=7.5)
    finite = val.dropna()
    if hi is not None and lo is not None:
        finite = pd.concat([finite, lo.dropna(), hi.dropna()])
    # (`load_results` refuses a non-finite ratio; rows given to `render` directly may hold one)
    finite = finite[finite.abs() != float("inf")]
    if len(finite):
        lo_x, hi_x = min(float(finite.min()), 1 - band), max(float(finite.max()), 1 + band)
        pad = 0.08 * (hi_x - lo_x)
        ax.set_xlim(lo_x - pad, hi_x + pad)


def _settings_note(r: pd.DataFrame) -> str:
    """The note's measuring settings and what each panel divides (module docstring), of the drawn rows `r`."""
    checks = r["grad_check"].dropna() if "grad_check" in r else pd.Series(dtype=object)
    ok = int(sum(str(v).lower() in ("true", "1", "1.0") for v in checks))  # bool, or 1.0 in a mixed table
    devices = ", ".join(sorted({str(v) for v in r["device"].dropna()})) if "device" in r else "?"
    return (f"device: {devices}; torch threads {_ranged(_num(r, 'threads'))}, warm-up runs "
            f"{_ranged(_num(r, 'warmup'))}, timed repeats {_ranged(_num(r, 'time_repeats'))}, one executing run at "
            f"a time; 1-minute load average during the runs {_ranged(_num(r, 'load_1min'))} (a shared machine: "
            f"times vary with its load); gradients equal to plain autograd (allclose) in {ok}/{len(checks)} runs; "
            f"each instance profiled once and stored; the tracker also measured the profiles (its panel checks the "
            f"simulator's accounting), the independent method shares no code with it; "
            f"predicted = the simulator's replay of the solver's schedule on that profile (graph: torch.fx graph "
            f"with measured costs; offload on CPU: the sequential replay, one op at a time), under each method's "
            f"own overheads: tracker panel memory_ratio = measured_peak / the replay's peak under the tracker's "
            f"overheads (tracker_predicted_peak; offload on CPU: the sequential replay's), independent panel "
            f"independent_peak / the allocator's (independent_predicted_peak); a chain's tracker ratio below 1 is "
            f"the model's upper bound: it charges the network's output a_L inside the tape until B(L-1), where the "
            f"executor frees it after the loss when block L-1 does not save it (docs/chain.md)")
