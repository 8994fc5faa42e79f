"""Benchmark for join networks: makespan versus memory for the join DP, the exact methods and the
heuristics (equal / proportional shares, sequential), on 2, 3 and 4 branches of equal and
unequal lengths.

Two groups of instances (seeded, `solvers.join.generate.random_join`):

- ``small``: a few stages per branch, exact sizes (``slots = 0``); the exact A* search (all
  schedules of the join simulator), the CP-SAT join phase model (``cpsat``) and the same model as
  a MILP (``milp``, SCIP) run too (one worker each, so that a schedule, not only its makespan, is
  the same at every run; 60 s each), so the table gives each method's gap to the true optimum and
  the two exact solvers' times side by side;
- ``medium``: 6-24 stages per branch, every method at ``--slots`` (default 100) memory slots
  (``cpsat`` and ``milp`` too with ``--cpsat-medium S``).

Budgets are fractions of the store-all peak. Prints a table, writes ``--out`` (default
``results/bench_join.csv``; one row per instance, budget and solver) and, with ``--figure``, the
figure beside it (``--out`` with ``.png``: ``results/bench_join.png`` by default); ``--replot`` runs
nothing and redraws that figure from ``--out``. Usage: ``python -m memsched.experiments.bench_join [--quick]
[--slots N] [--figure | --replot] [--cpsat-medium S] [--out CSV]``.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import (
    Resumable,
    check_out,
    figure_beside,
    guarded,
    positive,
    progress,
    resumable,
    save_figure,
    settings_of,
    write_csv,
)
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import __version__, registry
from memsched.solvers.join import reference_peak
from memsched.solvers.join.generate import random_join
from memsched.solvers.result import OPTIMAL

ROOT = Path(__file__).resolve().parent.parent
SOLVERS = ("dp", "equal", "proportional", "sequential", "store-all")
SMALL = {  # name: lengths
    "2x3": [3, 3], "2:4+2": [4, 2], "3x2": [2, 2, 2], "3:3+2+1": [3, 2, 1], "4x2": [2, 2, 2, 2],
    "4:3+2+1+1": [3, 2, 1, 1],
}
MEDIUM = {
    "2x12": [12, 12], "2:16+6": [16, 6], "3x8": [8, 8, 8], "3:16+8+4": [16, 8, 4], "4x6": [6, 6, 6, 6],
    "4:24+12+6+3": [24, 12, 6, 3],
}
FIELDS = ["group", "instance", "k", "lengths", "seed", "budget_frac", "budget", "solver", "status", "makespan",
          "peak_memory", "overhead_pct", "gap_to_exact_pct", "gap_to_dp_pct", "solve_time_s", "slots", "scope",
          "memsched_version", "python"]


def _value(res) -> float:
    return res.objective if res.objective is not None else math.inf


def run(quick: bool = False, slots: int = 100, seed: int = 0, cpsat_medium: float = 0.0,
        rows: list[dict] | None = None, table: Resumable | None = None) -> list[dict]:
    """Solve the small and medium join instances at each budget fraction with each solver; one row per run,
    appended to `rows` (when given) as soon as its instance and budget are done, so a caller interrupted
    keeps the finished ones; with `table` (`benchtable.resumable`; then `rows` is its rows), the
    (instance, budget fraction) cells it holds already are taken from it, the others added to it. A
    progress bar on stderr counts the cells."""
    medium_fracs = [0.4, 0.55, 0.7, 0.85, 1.0] if quick else [0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 1.0]
    small_fracs = [0.65, 0.75, 0.85, 1.0] if quick else [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0]
    rows = table.rows if table is not None else [] if rows is None else rows
    groups = [("small", SMALL, 0, small_fracs), ("medium", MEDIUM, slots, medium_fracs)]
    instances = [(group, name, lengths, group_slots, fracs) for group, family, group_slots, fracs in groups
                 for name, lengths in family.items() if not (quick and group == "medium" and sum(lengths) > 30)]
    with progress(desc="bench_join", total=sum(len(inst[-1]) for inst in instances)) as bar:
        for group, name, lengths, group_slots, fracs in instances:
            join = random_join(lengths, seed, size_range=(1, 6) if group == "small" else (1, 10), name=name)
            ref = reference_peak(join)
            base = join.total_time()
            for frac in fracs:
                bar.update()
                if table is not None and table.kept(name, frac) is not None:
                    continue
                budget = int(ref * frac)
                results = {s: registry.solve("join", join, s, budget, slots=group_slots) for s in SOLVERS}
                # one CP-SAT worker: among equally fast optimal schedules two workers return either (the
                # peak column then changes from run to run); one makes the table regenerate as committed
                if group == "small":
                    results["cpsat"] = registry.solve("join", join, "cpsat", budget, slots=0, time_limit=60,
                                                      workers=1)
                    results["milp"] = registry.solve("join", join, "milp", budget, slots=0, time_limit=60,
                                                     workers=1)
                    results["exact"] = registry.solve("join", join, "exact", budget, time_limit=60)
                elif cpsat_medium > 0:
                    results["cpsat"] = registry.solve("join", join, "cpsat", budget, slots=group_slots,
                                                      time_limit=cpsat_medium, workers=1)
                    results["milp"] = registry.solve("join", join, "milp", budget, slots=group_slots,
                                                     time_limit=cpsat_medium, workers=1)
                exact = results.get("exact")
                exact_v = _value(exact) if exact is not None and exact.status == OPTIMAL else math.nan
                dp_v = _value(results["dp"])
                cell = []
                for solver, res in results.items():
                    v = _value(res)
                    cell.append({
                        "group": group, "instance": name, "k": join.k, "lengths": "+".join(map(str, lengths)),
                        "seed": seed, "budget_frac": frac, "budget": budget, "solver": solver, "status": res.status,
                        "makespan": _fmt(v), "peak_memory": res.peak_memory if res.found else "",
                        "overhead_pct": _fmt(100 * (v / base - 1)) if math.isfinite(v) else "",
                        "gap_to_exact_pct": _fmt(100 * (v / exact_v - 1)) if math.isfinite(v) and exact_v == exact_v
                        else "",
                        "gap_to_dp_pct": _fmt(100 * (v / dp_v - 1)) if math.isfinite(v) and math.isfinite(dp_v) else "",
                        "solve_time_s": round(res.solve_time_s, 4), "slots": group_slots, "scope": res.scope,
                        "memsched_version": __version__, "python": platform.python_version(),
                    })
                if table is not None:
                    table.add(*cell)
                else:
                    rows.extend(cell)
    return rows


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return ""
    return f"{0.0 if abs(v) < 5e-9 else v:.4f}"


def print_table(rows: list[dict]) -> None:
    """Print each solver's makespan overhead (%) per instance and budget fraction, then the gap to the
    exact solver on the small instances."""
    names = ["dp", "cpsat", "milp", "exact", "equal", "proportional", "sequential", "store-all"]
    key = {}
    for r in rows:
        key.setdefault((r["group"], r["instance"], r["budget_frac"]), {})[r["solver"]] = r
    print(f"{'group':7} {'instance':14} {'budget':>6}  " + "  ".join(f"{n:>12}" for n in names))
    print("        (makespan overhead over no recomputation, %; '-' = no schedule, blank = not run)")
    for (group, inst, frac), by in key.items():
        cells = []
        for n in names:
            r = by.get(n)
            if r is None:
                cells.append(f"{'':>12}")
            elif r["overhead_pct"] == "":
                cells.append(f"{'-':>12}")
            else:
                cells.append(f"{float(r['overhead_pct']):>11.1f}%")
        print(f"{group:7} {inst:14} {frac:>6.2f}  " + "  ".join(cells))
    small = [r for r in rows if r["group"] == "small" and r["gap_to_exact_pct"] != ""]
    for n in ["dp", "cpsat", "milp", "equal", "proportional", "sequential"]:
        gaps = [float(r["gap_to_exact_pct"]) for r in small if r["solver"] == n]
        if gaps:
            print(f"gap to exact, {n:12}: mean {sum(gaps) / len(gaps):6.2f}%  max {max(gaps):6.2f}%  "
                  f"({len(gaps)} feasible runs)")
    print_exact_times(rows)


def exact_time_summary(rows: list[dict], solver: str) -> dict[str, float] | None:
    """Over the small rows of `solver` (an exact one: ``cpsat``, ``milp``, ``exact``): the number of runs
    (``runs``), of ``optimal`` ones (``optimal``), and the total, median and largest solve time (seconds,
    wall clock as the CSV's ``solve_time_s``); None when it has no small row."""
    times = sorted(float(r["solve_time_s"]) for r in rows if r["group"] == "small" and r["solver"] == solver)
    if not times:
        return None
    optimal = sum(1 for r in rows if r["group"] == "small" and r["solver"] == solver and r["status"] == OPTIMAL)
    mid = len(times) // 2
    median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
    return {"runs": len(times), "optimal": optimal, "total": sum(times), "median": median, "max": times[-1]}


def print_exact_times(rows: list[dict]) -> None:
    """Print the status count and solve times of the exact solvers on the small instances (`exact_time_summary`)."""
    for n in ["cpsat", "milp", "exact"]:
        s = exact_time_summary(rows, n)
        if s is not None:
            print(f"time, {n:6}: {s['optimal']:.0f} of {s['runs']:.0f} optimal; total {s['total']:7.2f} s, median "
                  f"{s['median']:.3f} s, max {s['max']:.3f} s (small instances)")


def figure(rows: list[dict], path: Path) -> None:
    """Draw makespan against budget fraction per instance and solver into `path` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from memsched.experiments.plotting.labels import model_labels

    legend = model_labels(pd.DataFrame(rows))  # "dp (persistent per branch)": the model its optimal rows are in
    insts = list(dict.fromkeys((r["group"], r["instance"]) for r in rows))
    cols = 4
    nrows = math.ceil(len(insts) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3 * nrows), squeeze=False)
    for ax, (group, inst) in zip(axes.flat, insts):
        for solver, style, color in [("dp", "o-", "tab:blue"), ("exact", "x--", "black"), ("cpsat", "+:", "tab:purple"),
                                     ("milp", "1:", "tab:brown"),
                                     ("equal", "s-", "tab:orange"), ("proportional", "^-", "tab:green"),
                                     ("sequential", "v-", "tab:red"), ("store-all", "D-", "tab:gray")]:
            pts = [(r["budget_frac"], float(r["makespan"])) for r in rows
                   if r["instance"] == inst and r["solver"] == solver and r["makespan"] != ""]
            ax.plot(*(zip(*pts) if pts else ([], [])), style, color=color, label=legend.get(solver, solver),
                    markersize=4)
        ax.set_title(f"{inst} ({group})", fontsize=9)
        ax.set_xlabel("budget / store-all peak", fontsize=8)
        ax.set_ylabel("makespan", fontsize=8)
    for ax in list(axes.flat)[len(insts):]:
        ax.axis("off")
    fig.tight_layout(rect=(0, _figure_legend(fig, list(axes.flat)[:len(insts)]), 1, 1))
    save_figure(fig, path, dpi=120)
    plt.close(fig)


#: the columns of the figure legend below the panels (`_figure_legend`)
LEGEND_COLUMNS = 4


def _figure_legend(fig: Any, axes: list[Any]) -> float:
    """One legend for the whole figure, below the panels (outside every one, so it covers no point): each
    solver once, in the order the panels draw them; returns the height it takes (a fraction of the figure's
    height, the bottom of the `tight_layout` rectangle above it)."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if not handles:
        return 0.0
    rows = math.ceil(len(handles) / LEGEND_COLUMNS)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=LEGEND_COLUMNS, fontsize=8,
               frameon=False)
    return min(0.5, (0.15 + 0.2 * rows) / fig.get_figheight())  # a line of 8 pt text and its spacing: 0.2 in


def main(argv: list[str] | None = None) -> int:
    """Benchmark the join solvers; print a table, write --out (and the PNG beside it with --figure); exit 0 (2 on
    a bad argument, 130 on Ctrl-C: the files as they were, the finished rows kept beside them for a rerun to
    resume from)."""
    parser = ScriptParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer budgets, skip the largest instance")
    parser.add_argument("--slots", type=positive(int, zero=True), default=100,
                        help="memory slots for the medium instances (0: exact sizes)")
    parser.add_argument("--seed", type=positive(int, zero=True), default=0)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench_join.csv"))
    parser.add_argument("--figure", action="store_true",
                        help="also write the figure beside --out: its name with .png (default "
                             "results/bench_join.png)")
    parser.add_argument("--cpsat-medium", type=positive(float, zero=True), default=0.0, metavar="S",
                        help="also run the CP-SAT model and its MILP on the medium instances, S seconds each "
                             "(0: no)")
    parser.add_argument("--replot", action="store_true", help="run nothing: redraw the figure of --out beside it")
    args = parser.parse_args(argv)
    return guarded("bench_join", lambda: _replot(Path(args.out)) if args.replot else _main(args))


def _replot(out: Path) -> int:
    """``--replot``: the figure beside `out` drawn from its rows (`InputError` naming `out` when it is not a table
    of this bench or has no row to draw); `out` is left as it is."""
    from memsched.experiments.benchtable import read_table
    from memsched.solvers.errors import InputError

    png = figure_beside(out)
    _, rows = read_table(out, field="--out", required=FIELDS, known=FIELDS, of="bench_join")
    if not rows:
        raise InputError("no row to draw", path=str(out), field="--out")
    for row in rows:
        try:
            row["budget_frac"] = float(row["budget_frac"])
            if row["makespan"] != "":  # empty: no schedule, drawn as no point
                float(row["makespan"])
        except ValueError:
            raise InputError(f"row {row['instance']!r} at {row['budget_frac']!r}: budget_frac or makespan is not a "
                             "number", path=str(out), field="--out") from None
    figure(rows, png)
    print(f"wrote {png}")
    return 0


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the instances solved, the table printed and written (the CSV
    and figure atomically); on Ctrl-C the rows finished so far are kept beside --out and a rerun resumes
    from them (`benchtable.resumable`)."""
    out = Path(args.out)
    check_out(out)
    png = figure_beside(out) if args.figure else None  # checked before any work: not --out itself
    t0 = time.perf_counter()
    with resumable(out, FIELDS, settings_of(args), ("instance", "budget_frac")) as table:
        rows = run(args.quick, args.slots, args.seed, args.cpsat_medium, table=table)
        print_table(rows)
        write_csv(rows, out, FIELDS)
        print(f"wrote {out} ({len(rows)} rows) in {time.perf_counter() - t0:.1f} s")
        if png is not None:
            figure(rows, png)
            print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
