"""Figure (g): executed schedules, measured / predicted peak memory and step time.

Three panels, one row of points per instance (grouped by problem: chain, join, offload,
graph), one marker per budget:

- memory by the tensor tracker (`models.memory.LiveTensorTracker` on CPU,
  ``torch.cuda.max_memory_allocated`` on CUDA): the row's ``memory_ratio``, ``measured_peak`` over
  ``tracker_predicted_peak``, the peak of the simulator's replay of the schedule under the tracker's own
  overheads (`models.chain.overheads.tracker_chain`), or over ``predicted_peak`` where the instance has no
  separate tracker overheads (and on CUDA); offloading on CPU: over the sequential replay's peak under the
  tracker's overheads (`models.offload.executor.OffloadStepResult`). Each panel divides the pair of
  `models.measure.StepResult.comparisons`;
- memory by the independent method (`models.alloc_probe`: torch.profiler allocator events,
  sharing no code with the tracker that also profiled the instance): ``independent_ratio``,
  ``independent_peak`` over the allocator's ``predicted_peak`` (offloading on CPU: the sequential
  replay's);
- step time: ``time_ratio``, ``measured_time_ms`` (median of the timed repeats) over the replay's
  makespan in ms (offloading on CPU: the sequential replay's), with a bar from the fastest to the
  slowest run (``time_ratio_min`` .. ``time_ratio_max``).

Rows without ``memory_ratio`` / ``independent_ratio`` (older tables): ``measured_peak /
peak_memory`` and ``independent_peak / peak_memory`` (the solver's peak) instead.

The shaded bands are the targets (memory +-5%, time +-15%); the note under the figure states
the measuring settings (threads, warm-up, repeats) and the machine's load average during the
runs, so that a reader can judge the times.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PROBLEM_ORDER = ("chain", "join", "offload", "graph")
#: Marker per budget (fraction of the store-all peak), in budget order.
BUDGET_MARKERS = ("o", "s", "^", "D", "v", "P")

__all__ = ["measured_ratios", "PROBLEM_ORDER"]


def _num(rows: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(rows[col], errors="coerce") if col in rows else pd.Series(float("nan"), index=rows.index)


def _ranged(values: pd.Series) -> str:
    v = values.dropna()
    if v.empty:
        return "?"
    lo, hi = v.min(), v.max()
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def measured_ratios(rows: pd.DataFrame, out_dir: Path, stem: str, title: str) -> list[Path]:
    """Draw figure (g) from the executed rows of `rows` (module docstring); returns the PNG and PDF."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from .figures import _FALLBACK, _budget_sort, _finish

    r = rows[_num(rows, "measured_peak").notna() & _num(rows, "peak_memory").notna()].copy()
    r["_order"] = r["problem"].map({p: i for i, p in enumerate(PROBLEM_ORDER)}).fillna(len(PROBLEM_ORDER))
    r = r.sort_values(["_order"], kind="stable")
    # the budget as text ("" when empty: NaN, which astype(str) keeps under pandas 3, has no text methods)
    r["_budget"] = r["budget_spec"].astype(object).where(r["budget_spec"].notna(), "").astype(str)
    instances = list(dict.fromkeys(r["instance"]))
    ypos = {inst: i for i, inst in enumerate(instances)}
    problems = {inst: str(p) for inst, p in zip(r["instance"], r["problem"])}
    budgets = sorted(set(r["_budget"]), key=_budget_sort)
    markers = {b: BUDGET_MARKERS[i % len(BUDGET_MARKERS)] for i, b in enumerate(budgets)}
    colours = {p: _FALLBACK[i % len(_FALLBACK)] for i, p in enumerate(PROBLEM_ORDER)}
    offsets = {b: (i - (len(budgets) - 1) / 2) * 0.18 for i, b in enumerate(budgets)}
    # each method against the prediction under its own overheads (models.chain.overheads; offload on CPU:
    # the sequential replay), as the executors' memory_ratio / independent_ratio; older tables: the solver's peak
    mem = _num(r, "memory_ratio").fillna(_num(r, "measured_peak") / _num(r, "peak_memory"))
    ind = _num(r, "independent_ratio").fillna(_num(r, "independent_peak") / _num(r, "peak_memory"))
    tim, tlo, thi = _num(r, "time_ratio"), _num(r, "time_ratio_min"), _num(r, "time_ratio_max")
    tracker = ", ".join(sorted({str(v) for v in r.get("memory_method", pd.Series(dtype=object)).dropna()})) or \
        "LiveTensorTracker"
    indep = ", ".join(sorted({str(v) for v in r.get("independent_method", pd.Series(dtype=object)).dropna()})) or \
        "models.alloc_probe"
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.42 * len(instances) + 2.2), sharey=True)
    panels = ((axes[0], mem, None, None, 0.05, f"memory, tracker ({tracker})"),
              (axes[1], ind, None, None, 0.05, f"memory, independent ({indep})"),
              (axes[2], tim, tlo, thi, 0.15, "step time (median; bar: fastest..slowest run)"))
    for ax, val, lo, hi, band, name in panels:
        ax.axvspan(1 - band, 1 + band, color="#dddddd", alpha=0.6, lw=0)
        ax.axvline(1.0, color="#777777", lw=0.8, ls="--")
        for idx, row in r.iterrows():
            v = val.get(idx)
            if v is None or pd.isna(v):
                continue
            y = ypos[row["instance"]] + offsets[row["_budget"]]
            colour = colours.get(str(row["problem"]), "#333333")
            if lo is not None and hi is not None and pd.notna(lo.get(idx)) and pd.notna(hi.get(idx)):
                ax.plot([lo[idx], hi[idx]], [y, y], color=colour, lw=1.2, alpha=0.7)
            ax.scatter([v], [y], color=colour, marker=markers[row["_budget"]], s=24, zorder=3)
        ax.set_title(f"{name}\nband: +-{band:.0%}", fontsize=8.5)
        ax.set_xlabel("measured / predicted (simulator)", fontsize=8)
        ax.grid(alpha=0.3, axis="x")
        ax.tick_params(labelsize=7.5)
        finite = val.dropna()
        if hi is not None:
            finite = pd.concat([finite, lo.dropna(), hi.dropna()])
        # (`load_results` refuses a non-finite ratio; rows given to `render` directly may hold one)
        finite = finite[finite.abs() != float("inf")]
        if len(finite):
            lo_x, hi_x = min(float(finite.min()), 1 - band), max(float(finite.max()), 1 + band)
            pad = 0.08 * (hi_x - lo_x)
            ax.set_xlim(lo_x - pad, hi_x + pad)
    axes[0].set_yticks(range(len(instances)))
    axes[0].set_yticklabels([f"{inst} ({problems[inst]})" for inst in instances], fontsize=7.5)
    axes[0].invert_yaxis()
    handles = [Line2D([], [], color="#333333", marker=markers[b], ls="", label=f"budget {b}") for b in budgets]
    handles += [Line2D([], [], color=colours[p], lw=3, label=p) for p in PROBLEM_ORDER if p in set(r["problem"])]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7, frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.22 / fig.get_figheight()))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.32 / fig.get_figheight()))
    checks = r["grad_check"].dropna() if "grad_check" in r else pd.Series(dtype=object)
    ok = int(sum(str(v).lower() in ("true", "1", "1.0") for v in checks))  # bool, or 1.0 in a mixed table
    devices = ", ".join(sorted({str(v) for v in r["device"].dropna()})) if "device" in r else "?"
    note = (f"device: {devices}; torch threads {_ranged(_num(r, 'threads'))}, warm-up runs "
            f"{_ranged(_num(r, 'warmup'))}, timed repeats {_ranged(_num(r, 'time_repeats'))}, one executing run at "
            f"a time; 1-minute load average during the runs {_ranged(_num(r, 'load_1min'))} (a shared machine: "
            f"times vary with its load); gradients equal to plain autograd (allclose) in {ok}/{len(checks)} runs; "
            f"each instance profiled once and stored; the tracker also measured the profiles (its panel checks the "
            f"simulator's accounting), the independent method shares no code with it; "
            f"predicted = the simulator's replay of the solver's schedule on that profile (graph: torch.fx graph "
            f"with measured costs; offload on CPU: the sequential replay, one op at a time), under each method's "
            f"own overheads: tracker panel memory_ratio = measured_peak / the replay's peak under the tracker's "
            f"overheads (tracker_predicted_peak; offload on CPU: the sequential replay's), independent panel "
            f"independent_peak / the allocator's predicted_peak; a chain's tracker ratio below 1 is the "
            f"model's upper bound: it charges the network's output a_L inside the tape until B(L-1), where the "
            f"executor frees it after the loss when block L-1 does not save it (docs/chain.md)")
    return _finish(fig, r.drop(columns=["_order", "_budget"]), out_dir, stem, note)
