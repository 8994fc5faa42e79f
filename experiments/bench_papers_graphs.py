"""The papers' graph benchmark: Checkmate's MLSys graphs and Moccasin's random layered (RL) graphs.

    python -m memsched.experiments.bench_papers_graphs --graphs DIR                    # everything (hours)
    python -m memsched.experiments.bench_papers_graphs --graphs DIR --instances RL100 \\
        --time-limit 20 --long-time-limit 20                                            # a short check

DIR holds the graph files of Moccasin's repository (``data/`` of haoming-codes/moccasin: the
Checkmate MLSys training graphs ``<net> (MLSys)_<batch>_<shape>_train_nx.json`` and
``random_layered_n<N>_*.json``). They are GPL-3 data of that repository and are not committed
here: clone it and pass its ``data`` folder.

For every instance and budget (Moccasin's: B = ceil(fraction x the peak of computing each node
once in the file's topological order), as its ``main.py -m 0.9`` / ``-m 0.8``), runs our exact
models (``cpsat``: at most C computations per node, Moccasin-style intervals; ``checkmate``:
Checkmate's MILP) beside greedy, DTR, LP rounding (``checkmate-approx``) and checkpoint-all,
each through `solvers.registry.solve` (schedules replayed by the graph simulator). Exact models
get Moccasin's time limits (its first main.py: 360 s x (1 if n >= 500 else 0.5)): `--time-limit`
(180 s) below 500 nodes, `--long-time-limit` (360 s) from 500 nodes on. Prints a table and writes
one CSV row per run (overhead = makespan / sum of ``cost_cpu`` - 1, the proven bound and gap,
time, the replayed peak) to results/bench_papers_graphs.csv and a figure (overhead per instance
and solver) to results/bench_papers_graphs.png. Each row also states its cell's feasibility:
``feasible`` with the least replayed peak and its solver, ``infeasible`` when B is below
`Graph.necessary_budget` (a node, its workspace and all its inputs at once: a lower bound on the
peak of every schedule, recomputation or not, in ``min_peak_lb``), else ``open``.

Exact solvers run with `--workers` threads (1) and are seeded by the fast solvers (their best
schedule is the CP-SAT hint / MIP start); the CSV has the seconds until each had a first
schedule (``first_schedule_s``) and the load average when it started. The last line says in how
many cells every exact solver is at most every fast solver.

`--published CSV` (columns instance, fraction, source, overhead, and optionally time_limit_s and
note; an empty overhead means no number was published) prints those rows beside ours and adds
the numbers to the figure as hollow markers; results/published_moccasin.csv holds what
Moccasin's repository states (its settings; it has no result table). `--merge CSV [CSV ...]`
rebuilds the CSV, figure and check from earlier runs' CSVs without solving: one row per
(instance, fraction, solver), a later file's row replacing an earlier one's (so ``--merge
all.csv rerun.csv`` replaces rows by a rerun's), each cell's feasibility restated from its rows.

Hours of work: a progress bar (on a terminal's stderr) counts the runs; the table so far is
rewritten atomically after each (instance, fraction) cell to ``<out stem>.partial.csv`` beside --out
(--out itself is written once, at the end, so it is never replaced by a part of a table), so Ctrl-C,
SIGTERM or SIGHUP (exit 130) or a crash keeps every finished cell there (a row cut short by a kill or a full
disk is left out and run again), and the same command run again resumes from
it (`benchtable.resumable`). ``--resume`` keeps every row --out has (other solvers' too) and runs
only the asked solvers a cell lacks.

Arguments are checked before any solving (one line, exit 2): solver names, positive fractions and
time limits, a writable --out, a readable --published CSV, --graphs given unless --merge, and at
least one asked instance in --graphs (a missing one is named; none found leaves --out as it was).
Every --merge CSV (and --out with --resume) must have this script's key and result columns
(`READ_COLUMNS`) and each row its instance, fraction and solver: else one line naming the file, and
--out is left as it was.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import (
    Interrupted,
    Resumable,
    check_out,
    figure_beside,
    guarded,
    positive,
    read_table,
    resumable,
    save_figure,
    settings_of,
    write_csv,
)
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import graph as graphs
from memsched.solvers.errors import InputError
from memsched.solvers.registry import get_problem, solve

#: Short names of the papers' instances -> a pattern of Moccasin's file names.
INSTANCES: dict[str, str] = {
    "VGG-16": r"^VGG16 \(MLSys\).*_train_nx\.json$",
    "VGG-19": r"^VGG19 \(MLSys\).*_train_nx\.json$",
    "MobileNet": r"^MobileNet \(MLSys\).*_train_nx\.json$",
    "U-Net": r"^vgg_unet \(MLSys\).*_train_nx\.json$",
    "FCN-8": r"^fcn_8_vgg \(MLSys\).*_train_nx\.json$",
    "SegNet": r"^segnet \(MLSys\).*_train_nx\.json$",
    "ResNet-50": r"^ResNet50 \(MLSys\).*_train_nx\.json$",
    "RL100": r"^random_layered_n100_.*\.json$",
    "RL250": r"^random_layered_n250_.*\.json$",
    "RL500": r"^random_layered_n500_.*\.json$",
    "RL1000": r"^random_layered_n1000_.*\.json$",
}
EXACT = ("cpsat", "checkmate")
FAST = ("greedy", "dtr", "dtr-orders", "checkmate-approx", "checkpoint-all")
#: what each solver is optimal in (figure and table labels)
LABELS = {
    "cpsat": "cpsat (<= 2 computations per node)",
    "checkmate": "checkmate (file's order)",
    "checkmate-approx": "LP rounding",
    "checkpoint-all": "checkpoint-all",
    "greedy": "greedy",
    "dtr": "DTR",
    "dtr-orders": "DTR in memory-aware orders",
}
FIELDS = (
    "instance",
    "nodes",
    "fraction",
    "budget",
    "solver",
    "label",
    "status",
    "makespan",
    "overhead",
    "bound",
    "gap",
    "time_s",
    "first_schedule_s",
    "time_limit_s",
    "seeded_by",
    "scope",
    "load",
    "peak",
    "ref_peak",
    "min_peak_lb",
    "cell",
)
#: the columns an earlier run's CSV (--merge, --resume's --out) must have: a row's key (instance,
#: fraction, solver) and what the check and the figure read; every CSV this script wrote has them
READ_COLUMNS = ("instance", "fraction", "solver", "makespan", "overhead")
#: graphs of at least this many nodes get the long time limit (Moccasin's main.py: ``n >= 500``)
LONG_FROM = 500


def find_instances(folder: Path, names: list[str]) -> list[tuple[str, Path]]:
    """(name, path) of the asked instances present in `folder` (a missing one is reported; none
    found is an `InputError` on --graphs)."""
    files = sorted(p.name for p in folder.glob("*.json"))
    found = []
    for name in names:
        hits = [f for f in files if re.match(INSTANCES[name], f)]
        if hits:
            found.append((name, folder / hits[0]))
        else:
            print(f"{name}: no file in {folder}", file=sys.stderr)
    if not found:
        raise InputError(f"no graph file of {', '.join(names)} in this folder (Moccasin's data/ folder?)",
                         path=str(folder), field="--graphs")
    return found


def read_published(path: Path | None) -> list[dict[str, Any]]:
    """Rows (instance, fraction, source, overhead or None, time_limit_s or None, note) of a
    published-numbers CSV, or none; a missing file or a bad row is an `InputError` on --published."""
    if path is None:
        return []
    if not path.is_file():
        raise InputError("not a file", path=str(path), field="--published")
    _, rows = read_table(path, field="--published", required=("instance", "fraction", "source"))
    try:
        return [
            {
                "instance": r["instance"],
                "fraction": float(r["fraction"]),
                "source": r["source"],
                "overhead": float(r["overhead"]) if r.get("overhead") else None,
                "time_limit_s": float(r["time_limit_s"]) if r.get("time_limit_s") else None,
                "note": r.get("note") or "",
            }
            for r in rows
        ]
    except (TypeError, ValueError) as err:
        raise InputError(f"a row is not a number where one is needed: {err}", path=str(path),
                         field="--published") from None


def moccasin_budget(graph: graphs.Graph, fraction: float) -> int:
    """Moccasin's budget B = ceil(fraction x topo_mem), topo_mem the peak of each node once in
    the file's order (`graphs.reference_peak`), as in its main.py."""
    return math.ceil(graphs.reference_peak(graph) * fraction)


def cell_feasibility(rows: list[dict[str, Any]], budget: int, lower: int) -> str:
    """A cell's feasibility: ``feasible: peak P <= B (solver)`` for the least replayed peak among
    its rows' schedules, ``infeasible: B < lower bound LB`` (`Graph.necessary_budget`), else
    ``open``."""
    peaks = [(int(r["peak"]), r["solver"]) for r in rows if r["makespan"] is not None and r["peak"] is not None]
    if peaks:
        peak, solver = min(peaks)
        return f"feasible: peak {peak} <= B {budget} ({solver}, replayed)"
    if budget < lower:
        return f"infeasible: B {budget} < lower bound {lower}"
    return f"open: no schedule, B {budget} >= lower bound {lower}"


def plan(instances: list[tuple[str, Path]], fractions: list[float], solvers: list[str],
         kept: list[dict[str, Any]]) -> list[tuple[str, Path, float, list[str]]]:
    """(instance, path, fraction, the asked solvers that cell still lacks) per cell with any to run:
    a solver counts as done in a cell when `kept` has its row there."""
    have = {(r["instance"], r["fraction"], r["solver"]) for r in kept}
    todo = []
    for name, path in instances:
        for frac in fractions:
            lacking = [s for s in solvers if (name, frac, s) not in have]
            if lacking:
                todo.append((name, path, frac, lacking))
    return todo


def place(rows: list[dict[str, Any]], cell: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with the new rows `cell` (one instance and fraction) after that cell's last row, or at
    the end when it has none."""
    key = (cell[0]["instance"], cell[0]["fraction"])
    last = max((i for i, r in enumerate(rows) if (r["instance"], r["fraction"]) == key), default=len(rows) - 1)
    return rows[: last + 1] + cell + rows[last + 1:]


def run(args: argparse.Namespace, instances: list[tuple[str, Path]], kept: list[dict[str, Any]],
        table: Resumable | None = None) -> list[dict[str, Any]]:
    """Every (instance, fraction, solver) run, printed as it ends, after the rows `kept` (``--resume``:
    those --out has; or those of an interrupted run's partial file). With `table` (`benchtable.resumable`)
    its partial file is rewritten (atomically) after each cell with the kept rows, every finished cell's
    rows and the cells' feasibility (restated from all a cell's rows), so an interrupted run keeps its
    finished cells; an asked solver whose row a kept cell has is not run again, and the kept rows of
    solvers not asked stay."""
    todo = plan(instances, args.fractions, args.solvers, kept)
    rows = list(kept)
    if kept:
        cells = len(instances) * len(args.fractions)
        source = table.partial if table is not None and table.reused else Path(args.out)
        print(f"resumed: {cells - len(todo)} of {cells} cells complete in {source}, "
              f"{sum(len(s) for *_, s in todo)} runs to do", file=sys.stderr)
    from tqdm import tqdm

    bar = tqdm(total=sum(len(s) for *_, s in todo), unit="run", file=sys.stderr, leave=False,
               disable=not sys.stderr.isatty())
    header = f"{'instance':<10} {'n':>5} {'M':>4} {'solver':<16} {'status':<10} {'overhead':>9} {'gap':>8} {'time':>7}"
    tqdm.write(header, file=sys.stdout)
    # the kept rows first, as they printed when they ran (a complete cell with its feasibility line), so that the
    # printed table of a resumed run is whole; a cell still to finish gets its line after its runs, below
    open_cells = {(name, frac) for name, _, frac, _ in todo}
    for i, row in enumerate(kept):
        tqdm.write(_row_line(row), file=sys.stdout)
        here = (row["instance"], row["fraction"])
        last = i + 1 == len(kept) or (kept[i + 1]["instance"], kept[i + 1]["fraction"]) != here
        if last and here not in open_cells and row.get("cell"):
            tqdm.write(f"{row['instance']:<10} {row['fraction']:>4.0%} {row['cell']}", file=sys.stdout)
    graph_of: dict[str, graphs.Graph] = {}
    for name, path, frac, solvers in todo:
        g = graph_of.setdefault(name, graphs.load(str(path)))
        once = g.total_cpu()
        ref, lower = graphs.reference_peak(g), g.necessary_budget()
        limit = args.time_limit if g.n < LONG_FROM else args.long_time_limit
        budget = moccasin_budget(g, frac)
        cell: list[dict[str, Any]] = []
        for solver in solvers:
            bar.set_description(f"{name} {frac:.0%} {solver}")
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            kw: dict[str, Any] = {"time_limit": limit}  # LP rounding: its LP gets the limit too
            if solver in EXACT:
                kw["workers"] = args.workers
            elif solver != "checkmate-approx":
                kw = {}
            res = solve("graph", g, solver, budget, slots=args.slots, **kw)
            elapsed = time.perf_counter() - t0
            over = None if res.objective is None else res.objective / once - 1
            cell.append(
                {
                    "instance": name,
                    "nodes": g.n,
                    "fraction": frac,
                    "budget": budget,
                    "solver": solver,
                    "label": LABELS.get(solver, solver),
                    "status": res.status,
                    "makespan": res.objective,
                    "overhead": over,
                    "bound": res.lower_bound,
                    "gap": res.gap,
                    "time_s": round(elapsed, 2),
                    "first_schedule_s": _first(res, elapsed),
                    "time_limit_s": limit if solver in EXACT else None,
                    "seeded_by": res.seeded_by,
                    "scope": res.scope,
                    "load": round(load, 2),
                    "peak": res.peak_memory if res.objective is not None else None,
                    "ref_peak": ref,
                    "min_peak_lb": lower,
                }
            )
            tqdm.write(_row_line(cell[-1]), file=sys.stdout)
            bar.update()
        before = [r for r in rows if (r["instance"], r["fraction"]) == (name, frac)]
        feas = cell_feasibility(before + cell, budget, lower)
        tqdm.write(f"{name:<10} {frac:>4.0%} {feas}", file=sys.stdout)
        for row in before + cell:
            row["cell"] = feas
        rows = place(rows, cell)
        if table is not None:
            table.rows = rows
            table.keep()
    bar.close()
    return rows


def read_rows(paths: list[Path], field: str = "--merge") -> list[dict[str, Any]]:
    """The rows of earlier runs' CSVs (numbers parsed back; a missing column other than
    `READ_COLUMNS` is left empty: an older run's CSV); a missing file, one without a column of
    `READ_COLUMNS` (not this script's CSV), a row without its instance, fraction or solver, or a row
    that is not a number where one is needed is an `InputError` on `field`, raised before any row is
    returned (so before --out is written)."""
    rows = []
    for path in paths:
        if not path.is_file():
            raise InputError("not a file", path=str(path), field=field)
        _, records = read_table(path, field=field, required=READ_COLUMNS, of="bench_papers_graphs")
        for n, r in enumerate(records, start=1):
            empty = [k for k in ("instance", "fraction", "solver") if not r.get(k)]
            if empty:
                raise InputError(f"row {n}: no {', '.join(empty)}", path=str(path), field=field)
            row: dict[str, Any] = {k: r.get(k) or "" for k in FIELDS}
            try:
                for k in ("fraction", "makespan", "overhead", "bound", "gap", "time_s"):
                    row[k] = float(row[k]) if row[k] != "" else None
                row["peak"] = int(float(row["peak"])) if row["peak"] != "" else None
            except ValueError as err:
                raise InputError(f"a row is not a number where one is needed: {err}", path=str(path),
                                 field=field) from None
            rows.append(row)
    return rows


def merged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` (the --merge CSVs' rows, in file order) with one row per (instance, fraction, solver): a
    later row replaces an earlier one in its place (a rerun's row replaces the old run's). A cell's
    feasibility is restated from its rows (`cell_feasibility`) when they all have its budget and
    lower bound."""
    by_key: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for r in rows:
        by_key[(r["instance"], r["fraction"], r["solver"])] = r
    out = list(by_key.values())
    cells: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in out:
        cells.setdefault((r["instance"], r["fraction"]), []).append(r)
    for cell in cells.values():
        try:
            budgets = {int(float(r["budget"])) for r in cell}
            lower = {int(float(r["min_peak_lb"])) for r in cell}
        except ValueError:  # an older CSV without these columns: its cells stay as written
            continue
        if len(budgets) == 1 and len(lower) == 1:
            feas = cell_feasibility(cell, budgets.pop(), lower.pop())
            for r in cell:
                r["cell"] = feas
    return out


def published_beside(rows: list[dict[str, Any]], published: list[dict[str, Any]]) -> list[str]:
    """Lines: per published (instance, fraction) of an instance in `rows`, our best exact and best
    fast overhead beside the published one ("none published" when it has no number; each note
    once)."""
    lines, notes = [], set()
    names = {r["instance"] for r in rows}
    for p in published:
        if p["instance"] not in names:
            continue
        ours = [
            r
            for r in rows
            if r["instance"] == p["instance"] and r["fraction"] == p["fraction"] and r["overhead"] is not None
        ]
        ex = min((r["overhead"] for r in ours if r["solver"] in EXACT), default=None)
        fa = min((r["overhead"] for r in ours if r["solver"] not in EXACT), default=None)
        theirs = _p(p["overhead"]) if p["overhead"] is not None else "none published"
        limit = "" if p["time_limit_s"] is None else f" (their limit {p['time_limit_s']:.0f} s)"
        lines.append(
            f"{p['instance']:<10} {p['fraction']:>4.0%} {p['source']}: {theirs}{limit}; "
            f"ours: exact {_p(ex)}, fast {_p(fa)}"
            + (f"  [{p['note']}]" if p["note"] and p["note"] not in notes else "")
        )
        notes.add(p["note"])
    return lines


def exact_vs_fast(rows: list[dict[str, Any]]) -> tuple[int, int, list[str]]:
    """(cells where every exact solver that ran is at most every fast solver, cells, the others
    named): a cell is an instance and a fraction; a missing makespan counts as infinite."""
    cells: dict[tuple[str, float], dict[str, float]] = {}
    for r in rows:
        cells.setdefault((r["instance"], r["fraction"]), {})[r["solver"]] = (
            math.inf if r["makespan"] is None else float(r["makespan"])
        )
    good, bad = 0, []
    for (name, frac), by in cells.items():
        exact = [by[s] for s in EXACT if s in by]
        fast = [by[s] for s in by if s not in EXACT]
        if not exact or not fast:
            continue
        if all(e <= min(fast) * (1 + 1e-9) for e in exact):
            good += 1
        else:
            bad.append(f"{name} {frac:.0%}")
    return good, good + len(bad), bad


def figure(rows: list[dict[str, Any]], published: list[dict[str, Any]], path: Path) -> None:
    """Overhead per instance (x) and solver (colour, marker), one panel per budget fraction; a cell without
    a schedule (infeasible, timeout) as the solver's marker, hollow, on the strip "none" below 0; published
    numbers as hollow black markers. One legend beside the panels: each solver's marker, then the hollow one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from memsched.experiments.figures import style

    fracs = sorted({r["fraction"] for r in rows}, reverse=True)
    names = list(dict.fromkeys(r["instance"] for r in rows))
    fig, axes = plt.subplots(1, len(fracs), figsize=(5 * len(fracs) + 2.2, 3.6), squeeze=False)
    solvers = list(dict.fromkeys(r["solver"] for r in rows))
    for ax, frac in zip(axes[0], fracs):
        for k, solver in enumerate(solvers):
            cell = [r for r in rows if r["fraction"] == frac and r["solver"] == solver]
            dx = 0.08 * (k - len(solvers) / 2)
            pts = [(names.index(r["instance"]) + dx, 100 * r["overhead"]) for r in cell if r["overhead"] is not None]
            none = [names.index(r["instance"]) + dx for r in cell if r["overhead"] is None]
            label = LABELS.get(solver, solver)
            kw = style(label, solver)
            if pts:
                ax.plot(*zip(*pts), ls="none", ms=5, **kw)
            if none:  # no schedule (infeasible, timeout): the solver's marker, hollow, on the strip below 0
                ax.plot(none, [NO_SCHEDULE_Y] * len(none), ls="none", ms=5, mfc="none", **kw)
        for src in sorted({p["source"] for p in published}):
            pts = [
                (names.index(p["instance"]), 100 * p["overhead"])
                for p in published
                if p["source"] == src and p["fraction"] == frac and p["instance"] in names and p["overhead"] is not None
            ]
            if pts:
                ax.plot(*zip(*pts), ls="none", marker="o", mfc="none", mec="black", ms=9, label=f"{src} (published)")
        ax.set_xticks(range(len(names)), names, rotation=30, fontsize=7.5)
        ax.set_title(f"budget {frac:.0%} of the file order's peak (Moccasin's B)", fontsize=9)
        ax.set_ylabel("compute overhead (%)", fontsize=8)
        _overhead_axis(ax)
    from matplotlib.lines import Line2D

    handles = {LABELS.get(s, s): Line2D([], [], ls="none", ms=5, **style(LABELS.get(s, s), s)) for s in solvers}
    handles["hollow, on 'none': no schedule\n(infeasible, timeout)"] = Line2D([], [], ls="none", ms=5, marker="o",
                                                                             mfc="none", color="0.3")
    for ax in axes[0]:  # the published sources
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    share = 0.8 if len(fracs) > 1 else 0.68  # the panels' share of the width: the legend beside them hides nothing
    fig.legend(list(handles.values()), list(handles), fontsize=7, frameon=False, loc="center left",
               bbox_to_anchor=(share, 0.5))
    fig.tight_layout(rect=(0.0, 0.0, share, 1.0))
    save_figure(fig, path, dpi=130)
    plt.close(fig)


#: The overhead ticks (%) of `_overhead_axis`, those up to the axis's top drawn.
OVERHEAD_TICKS = (0, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
#: Where a cell without a schedule (infeasible, timeout) is drawn: a strip below 0 (the symlog axis is linear there).
NO_SCHEDULE_Y = -0.45
#: The axis's bottom: below the strip, so that its markers and those at 0% are whole.
AXIS_BOTTOM = -0.7


def _overhead_axis(ax: Any) -> None:
    """A symlog overhead axis (%, linear below 1%): gaps of 0.1-1% apart and a 600% heuristic on one axis, its
    top half a decade above the largest point drawn (a marker at the top is whole), ticks labelled as numbers;
    below 0 a strip labelled "none" for the cells without a schedule (`NO_SCHEDULE_Y`), under a grey rule."""
    ax.set_yscale("symlog", linthresh=1.0)
    values = [y for line in ax.get_lines() for y in line.get_ydata() if math.isfinite(y) and y >= 0]
    top = 10 ** (math.log10(max(max(values, default=1.0), 1.0)) + 0.5)
    ax.set_ylim(AXIS_BOTTOM, top)
    ax.axhline(NO_SCHEDULE_Y / 2, color="0.8", lw=0.6, zorder=0)
    ticks = [t for t in OVERHEAD_TICKS if t <= top]
    ax.set_yticks([NO_SCHEDULE_Y, *ticks], ["none", *(f"{t:g}" for t in ticks)])
    ax.minorticks_off()


def main(argv: list[str] | None = None) -> int:
    """Solve the papers' graphs (Moccasin's files in --graphs) at each budget fraction; print a table, write the CSV
    and PNG; exit 0, 2 on bad arguments (checked before any solving), 130 on Ctrl-C, SIGTERM or SIGHUP (finished
    cells kept)."""
    ap = ScriptParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", help="folder with Moccasin's data/ graph files (required unless --merge)")
    ap.add_argument("--instances", nargs="+", default=list(INSTANCES), choices=list(INSTANCES))
    ap.add_argument("--fractions", type=positive(float), nargs="+", default=[0.9, 0.8],
                    help="budgets as fractions (> 0) of the file order's peak (default 0.9 0.8)")
    ap.add_argument("--solvers", nargs="+", default=list(EXACT + FAST), choices=list(get_problem("graph").solvers),
                    metavar="SOLVER", help=f"graph solvers (default {' '.join(EXACT + FAST)})")
    ap.add_argument("--time-limit", type=positive(float), default=180.0,
                    help="exact solvers, graphs below 500 nodes (s)")
    ap.add_argument("--long-time-limit", type=positive(float), default=360.0,
                    help="exact solvers, graphs of 500 nodes or more (s)")
    ap.add_argument("--slots", type=positive(int, zero=True), default=0, help="memory slots (0: exact sizes)")
    ap.add_argument("--workers", type=positive(int), default=1, help="threads of the exact solvers' backends")
    ap.add_argument("--published", type=Path, default=None, help="CSV: instance, fraction, source, overhead")
    ap.add_argument("--out", default="results/bench_papers_graphs.csv")
    ap.add_argument("--resume", action="store_true",
                    help="keep every row --out already has (other solvers' too); run only the asked solvers a "
                         "cell lacks")
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="rebuild --out, its figure and the check from these CSVs (no solving); one row per (instance, "
             "fraction, solver), a later file's row replacing an earlier one's (to replace rows by a rerun's)",
    )
    args = ap.parse_args(argv)
    step = ["cells"]

    def body() -> int:
        try:
            return _main(args, step)
        except Interrupted as err:  # `resumable` says what it kept
            print(f"\nbench_papers_graphs: interrupted: {err}", file=sys.stderr)
            return 130
        except KeyboardInterrupt:
            print(f"\nbench_papers_graphs: {_interrupted(args, step[0])}", file=sys.stderr)
            return 130

    return guarded("bench_papers_graphs", body)


def _interrupted(args: argparse.Namespace, step: str) -> str:
    """The line printed when a Ctrl-C stops `step` (``cells``: solving; ``merge``: reading the
    --merge CSVs; ``report``: the check, the table beside the published numbers and the figure, once
    --out holds every cell): what is kept and how to go on."""
    if step == "cells":
        return f"interrupted: {args.out} is unchanged; the same command resumes from the cells kept beside it"
    if step == "merge":
        return f"interrupted: {args.out} is as it was or fully merged (it is written at once); run the --merge again"
    png = Path(args.out).with_suffix(".png")
    return (f"interrupted: every cell is in {args.out}; the figure {png} may be missing or old (it is written at "
            f"once): --merge {args.out} --out {args.out} draws it without solving")


def _main(args: argparse.Namespace, step: list[str]) -> int:
    """`main` once the arguments are read; `step[0]` names what is being done (`_interrupted`).
    Every input is checked (`InputError`) before --out is touched."""
    check_out(args.out)
    png = figure_beside(args.out)  # checked before any work: not --out itself
    published = read_published(args.published)
    if args.merge is not None:
        missing = [p for p in args.merge if not p.is_file()]
        if missing:
            raise InputError("not a file", path=str(missing[0]), field="--merge")
        step[0] = "merge"
        rows = merged(read_rows(args.merge))
        if not rows:
            raise InputError("no rows in these CSVs (--out left as it was)", path=" ".join(map(str, args.merge)),
                             field="--merge")
        write_csv(rows, args.out, FIELDS)
        wrote_out = True
    elif args.graphs is None:
        raise InputError("required unless --merge", field="--graphs")
    elif not Path(args.graphs).is_dir():
        raise InputError("not a folder", path=str(args.graphs), field="--graphs")
    else:
        instances = find_instances(Path(args.graphs), args.instances)
        out = Path(args.out)
        with resumable(out, FIELDS, settings_of(args, "published", "merge"), ("instance", "fraction", "solver")) \
                as table:
            resumed = table.take_all()  # the whole table of an interrupted run of the same command
            kept = resumed if resumed is not None else \
                read_rows([out], field="--out") if args.resume and out.is_file() else []
            rows = run(args, instances, kept, table)
            wrote_out = len(rows) > len(kept) or resumed is not None  # none ran, none resumed: --out as it was
            if wrote_out:
                write_csv(rows, out, FIELDS)
        if not wrote_out:
            print(f"nothing to run: {out} has every asked solver's row in every asked cell (left as it was)",
                  file=sys.stderr)
    step[0] = "report"
    good, total, bad = exact_vs_fast(rows)
    print(f"exact <= every fast solver in {good}/{total} cells" + (f" (not: {', '.join(bad)})" if bad else ""))
    for line in published_beside(rows, published):
        print(line)
    if rows:
        figure(rows, published, png)
        print(f"wrote {args.out} ({len(rows)} rows) and {png}" if wrote_out else f"wrote {png}",
              file=sys.stderr)
    return 0


def _first(res: Any, elapsed: float) -> float:
    """Seconds until the solver had its first schedule: the first entry of an exact solver's
    log (its hinted warm start at the latest), else the whole run."""
    times = [t for t, objective, _ in (res.log or []) if objective is not None]
    return round(min(times), 2) if times and res.objective is not None else round(elapsed, 2)


def _p(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _row_line(row: dict[str, Any]) -> str:
    """The printed line of a run's row (the header of `run`), from the row alone: a kept row (an interrupted run's
    partial file, or --out with ``--resume``) prints as it did when it ran (a missing value: ``-``)."""
    def value(key: str) -> Any:
        return None if row.get(key) in (None, "") else row[key]

    nodes, elapsed, status = value("nodes"), value("time_s"), value("status")
    return (f"{row['instance']:<10} {'-' if nodes is None else nodes:>5} {row['fraction']:>4.0%} "
            f"{row['solver']:<16} {status or '-':<10} {_p(value('overhead')):>9} {_p(value('gap')):>8} "
            f"{'-' if elapsed is None else f'{float(elapsed):.1f}':>7}")


if __name__ == "__main__":
    raise SystemExit(main())
