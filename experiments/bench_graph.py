"""Benchmark of the graph solvers (docs/graph.md).

    python -m memsched.experiments.bench_graph [--quick] [--solvers checkmate,cpsat,...] [--backends]

For each graph (Checkmate's linear graph, a random layered graph of 100 nodes, a VGG-16-like
and a ResNet-50-like training graph) and budget (90%, 80%, 70% of the reference peak, that of
computing each node once in the given order), every solver's makespan overhead over computing
each node once, its status, bound, gap and solve time, plus Checkmate's LP bound. Prints a table
and writes ``results/bench_graph.csv`` (``results/bench_graph_quick.csv`` with --quick).
``--backends`` instead times Checkmate's MILP on each OR-Tools backend (how the default was
chosen) and writes ``results/bench_graph_backends.csv``.

``--graphs`` and ``--solvers`` rerun a part: the CSV's rows of the other (graph, solver) pairs are
kept. The CSV is rewritten (atomically) once every run finished; Ctrl-C (exit 130) leaves it as it
was and keeps the finished runs in ``<out stem>.partial.csv``, from which the same command run again
resumes (`benchtable.resumable`), printing their lines too, in order: the printed table is whole.
Unknown names, a --threads below 1, an unwritable --out and an --out whose rows cannot be kept (not
UTF-8, not CSV, a row with more or fewer fields than its header or cut short, no graph or solver column,
a column not of this table: `benchtable.read_table`) are refused before any solving (one line naming
the file and --out, exit 2; the file is left as it was).

``--quick`` uses a 30-stage linear graph with a 10 s limit and only the 90% and 80% budgets on
the ResNet-50-like graph. Checkmate's LP (the ``lp_bound`` column and ``checkmate-approx``) is
skipped on graphs above ``LP_MAX_NODES`` nodes: its O(n^2) variables make it slower than the
limit there. ``threads`` (default 2) is passed to every solver.

Targets (issue 4): random layered 100 nodes at 90% proven optimal within 60 s; VGG-16-like at
80% and 90% proven optimal within 10 s; ResNet-50-like at 80% and 90% a valid schedule within
120 s, with its gap.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import check_out, guarded, positive, read_table, resumable, write_csv
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.graph import generate, reference_peak
from memsched.solvers.graph.lp_bounds import lp_bound

EXACT = ("checkmate", "cpsat")
ALL = ("checkmate", "cpsat", "checkmate-approx", "checkpoint-all", "dtr", "sqrt", "greedy", "griewank")
LP_MAX_NODES = 120  # Checkmate's LP has O(n^2) variables: skipped above this size
FIELDS = ["graph", "nodes", "edges", "budget_pct", "budget", "reference_peak", "solver", "status", "makespan",
          "overhead_pct", "lower_bound", "gap_pct", "lp_bound", "solve_time_s", "time_limit_s", "peak_memory", "scope"]


GRAPHS = ("linear", "random", "vgg", "resnet")


def graphs(quick: bool, only: tuple[str, ...] = GRAPHS) -> list[tuple[object, float, tuple[int, ...]]]:
    """(graph, time limit for the exact solvers, budgets in % of the reference peak)."""
    return [row for key, row in zip(GRAPHS, [
        (generate.linear_graph(30 if quick else 50), 10.0 if quick else 60.0, (90, 80, 70)),
        (generate.random_layered(100, 0), 60.0, (90, 80, 70)),
        (generate.vgg16(), 10.0, (90, 80, 70)),
        (generate.resnet(), 120.0, (90, 80) if quick else (90, 80, 70)),
    ]) if key in only]


def kept_rows(out: Path, rerun: set[tuple[str, str]]) -> list[dict]:
    """The rows of the CSV `out` (none when it does not exist) but those of the (graph, solver) pairs
    in `rerun`, every value as its text. Read through `benchtable.read_table`, before any solving: a file
    that is not UTF-8 or not CSV, a row with more or fewer fields than the header, no graph or solver column
    or a column not in `FIELDS` (which the rewritten table could not hold) is an `InputError` naming it and
    --out; so is a last row without its line end (the table is written whole, atomically: a cut file)."""
    if not out.exists():
        return []
    _, rows = read_table(out, field="--out", required=("graph", "solver"), known=FIELDS, of="bench_graph")
    if rows and not out.read_bytes().endswith(b"\n"):
        raise InputError("its last row has no line end: cut short (not a whole bench_graph CSV)", path=str(out),
                         field="--out")
    return [r for r in rows if (r["graph"], r["solver"]) not in rerun]


def run(quick: bool, solvers: tuple[str, ...], threads: int, out: Path, only: tuple[str, ...] = GRAPHS
        ) -> list[dict]:
    """Solve each selected graph with each solver; the new rows (objective, bound, status, seconds).
    `out` is rewritten once, at the end, with its rows of every other (graph, solver) pair followed by
    those of this run (those of a pair being rerun are dropped); a Ctrl-C leaves it as it was and keeps
    the finished runs for a rerun to resume from (`benchtable.resumable`: one cell per graph, budget
    and solver)."""
    selected = graphs(quick, only)
    rerun = {(g.name, name) for g, _, _ in selected for name in solvers}
    kept = kept_rows(out, rerun)
    print(f"{'graph':24s} {'B%':>3s} {'solver':17s} {'status':10s} {'overhead%':>9s} {'gap%':>7s} "
          f"{'time s':>7s}  scope")
    settings = {"quick": quick, "solvers": list(solvers), "threads": threads, "graphs": list(only)}
    with resumable(out, FIELDS, settings, ("graph", "budget_pct", "solver"), line=_line) as table:
        for g, limit, budgets in selected:
            ref = reference_peak(g)
            total = g.total_cpu()
            for pct in budgets:
                budget = int(ref * pct / 100)
                lb: list[float | None] = []  # Checkmate's LP bound, once the first solver not kept needs it
                for name in solvers:
                    if name == "checkmate-approx" and g.n > LP_MAX_NODES:
                        continue  # its LP alone outlasts the limit on the largest graph
                    if table.kept(g.name, pct, name) is not None:  # printed too (`line`): the table is whole
                        continue
                    if not lb:
                        lb.append(_lp_bound(g, budget, limit))
                    row = _solve(g, pct, budget, ref, total, name, limit, threads, lb[0])
                    if row is not None:
                        table.add(row)
        if table.rows:
            _write(out, kept + table.rows)
    return table.rows


def _lp_bound(g: Any, budget: int, limit: float) -> float | None:
    """Checkmate's LP bound of `g` under `budget` (None above `LP_MAX_NODES` nodes or when it fails)."""
    try:
        return lp_bound(g, budget, time_limit=limit) if g.n <= LP_MAX_NODES else None
    except Exception:  # the LP is only a reference column
        return None


def _solve(g: Any, pct: int, budget: int, ref: int, total: float, name: str, limit: float, threads: int,
           lb: float | None) -> dict | None:
    """One run of solver `name` on `g` under `budget` (`pct` % of the reference peak `ref`; `total`: the
    makespan of computing each node once): its row, printed; None (a line printed) when it crashed."""
    options = {"time_limit": limit, "threads": threads}
    start = time.perf_counter()
    try:
        res = registry.solve("graph", g, name, budget, **options)
    except Exception as err:  # a crash is a result too
        print(f"{g.name:24s} {pct:3d} {name:17s} error: {err}")
        return None
    wall = time.perf_counter() - start
    over = None if res.objective is None else 100 * (res.objective / total - 1)
    gap = None if res.gap is None else 100 * res.gap
    row = {"graph": g.name, "nodes": g.n, "edges": len(g.edges), "budget_pct": pct,
           "budget": budget, "reference_peak": ref, "solver": name, "status": res.status,
           "makespan": res.objective, "overhead_pct": None if over is None else round(over, 4),
           "lower_bound": res.lower_bound, "gap_pct": None if gap is None else round(gap, 4),
           "lp_bound": lb, "solve_time_s": round(wall, 2),
           "time_limit_s": limit if name in EXACT else None, "peak_memory": res.peak_memory,
           "scope": res.scope}
    print(_line(row), flush=True)
    return row


def _line(row: dict[str, Any]) -> str:
    """The printed line of a solver run's row (the header of `run`: overhead and gap in %, time in s), from the
    row alone: a row read back from a partial file prints as it did when it ran (a missing value: ``-``)."""
    over, gap = row.get("overhead_pct"), row.get("gap_pct")
    return (f"{row['graph']:24s} {row['budget_pct']:3d} {row['solver']:17s} {row['status']:10s} "
            f"{'-' if over is None else f'{over:9.3f}':>9s} {'-' if gap is None else f'{gap:7.3f}':>7s} "
            f"{row['solve_time_s']:7.1f}  {row.get('scope')}")


def _backend_line(row: dict[str, Any]) -> str:
    """The printed line of a backend run's row (the header of `backends`: time in s), from the row alone."""
    makespan = row.get("makespan")
    return (f"{row['graph']:24s} {row['budget_pct']:4d} {row['backend']:8s} {row['status']:10s} "
            f"{'-' if makespan is None else f'{makespan:12.3f}':>12s} {row['solve_time_s']:7.1f}")


def backends(out: Path, threads: int) -> None:
    """Checkmate's MILP on each backend, on instances all of them can finish; `out` is written at the
    end (a Ctrl-C keeps the finished runs beside it for a rerun to resume from, `benchtable.resumable`)."""
    from memsched.solvers.graph.linmodel import BACKENDS

    fields = ["graph", "budget_pct", "backend", "status", "makespan", "lower_bound", "solve_time_s"]
    cases = [(generate.linear_graph(20), 0.7), (generate.vgg16(), 0.8), (generate.vgg16(), 0.7),
             (generate.random_layered(30, 1), 0.95), (generate.random_layered(30, 2), 0.9)]
    print(f"{'graph':24s} {'B%':>4s} {'backend':8s} {'status':10s} {'makespan':>12s} {'time s':>7s}")
    with resumable(out, fields, {"threads": threads}, ("graph", "budget_pct", "backend"), line=_backend_line) as table:
        for g, frac in cases:
            budget = int(reference_peak(g) * frac)
            for be in BACKENDS:
                if table.kept(g.name, int(frac * 100), be) is None:  # else printed (`line`): the table is whole
                    row = _backend_row(g, frac, budget, be, threads)
                    table.add(row)
                    print(_backend_line(row), flush=True)
        _write(out, table.rows, fields)


def _backend_row(g: Any, frac: float, budget: int, backend: str, threads: int) -> dict[str, Any]:
    """Checkmate's MILP on `g` under `budget` (`frac` of its reference peak) with `backend`: its row (seconds)."""
    from memsched.solvers.graph.milp import solve_checkmate

    res = solve_checkmate(g, budget, backend=backend, time_limit=60, threads=threads)
    return {"graph": g.name, "budget_pct": int(frac * 100), "backend": backend, "status": res.status,
            "makespan": res.objective, "lower_bound": res.lower_bound, "solve_time_s": round(res.solve_time_s, 2)}


def _write(path: Path, rows: list[dict], fields: list[str] | None = None) -> None:
    write_csv(rows, path, fields or FIELDS)


def names(text: str, known: tuple[str, ...], field: str) -> tuple[str, ...]:
    """The comma-separated names of `text` (at least one), each one of `known` (else an `InputError`
    on `field`)."""
    picked = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in picked if s not in known]
    if unknown or not picked:
        raise InputError(f"unknown {', '.join(map(repr, unknown))}; expected some of {','.join(known)}" if unknown
                         else f"no name; expected some of {','.join(known)}", field=field)
    return picked


def main(argv: list[str] | None = None) -> int:
    """Benchmark the graph solvers; print a table, write results/bench_graph.csv (or the backends CSV); exit 0,
    2 on bad arguments (before any solving), 130 on Ctrl-C (the CSV as it was, the finished runs
    kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller linear graph, shorter limits")
    ap.add_argument("--solvers", default=",".join(ALL),
                    help="comma-separated graph solver names (rows of the other solvers are kept)")
    ap.add_argument("--threads", type=positive(int), default=2, help="CP-SAT / MILP threads (default 2)")
    ap.add_argument("--backends", action="store_true", help="time Checkmate's MILP on each backend")
    ap.add_argument("--out", default=None, help="CSV path")
    ap.add_argument("--graphs", default=",".join(GRAPHS),
                    help="comma-separated subset of linear,random,vgg,resnet (other rows of the CSV are kept)")
    args = ap.parse_args(argv)
    if args.backends:
        out = Path(args.out or "results/bench_graph_backends.csv")
    else:
        out = Path(args.out or ("results/bench_graph_quick.csv" if args.quick else "results/bench_graph.csv"))
    return guarded("bench_graph", lambda: _main(args, out))


def _main(args: argparse.Namespace, out: Path) -> int:
    """`main` once the arguments are read: check them (`InputError`), then run and say what was written."""
    check_out(out)
    if args.backends:
        backends(out, args.threads)
        print(f"wrote {out}")
        return 0
    solvers = names(args.solvers, tuple(registry.get_problem("graph").solvers), "--solvers")
    only = names(args.graphs, GRAPHS, "--graphs")
    new = run(args.quick, solvers, args.threads, out, only)
    print(f"wrote {out} ({len(new)} rows of this run)" if new else f"no run finished: {out} left as it was")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
