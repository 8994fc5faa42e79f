"""Benchmark of the graph solvers (docs/graph.md).

    python -m memsched.experiments.bench_graph [--quick] [--solvers checkmate,cpsat,...] [--backends]

For each graph (Checkmate's linear graph, a random layered graph of 100 nodes, a VGG-16-like
and a ResNet-50-like training graph) and budget (90%, 80%, 70% of the reference peak, that of
computing each node once in the given order), every solver's makespan overhead over computing
each node once, its status, bound, gap and solve time, plus Checkmate's LP bound. Prints a table
and writes ``results/bench_graph.csv`` (``results/bench_graph_quick.csv`` with --quick).
``--backends`` instead times Checkmate's MILP on each OR-Tools backend (how the default was
chosen) and writes ``results/bench_graph_backends.csv``.

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
import csv
import time
from pathlib import Path

from memsched.experiments.benchtable import write_csv
from memsched.solvers import registry
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


def run(quick: bool, solvers: tuple[str, ...], threads: int, out: Path, only: tuple[str, ...] = GRAPHS
        ) -> list[dict]:
    """Solve each selected graph with each solver; the rows (objective, bound, status, seconds), also written to
    `out`."""
    selected = graphs(quick, only)
    names = {g.name for g, _, _ in selected}
    rows = []
    if out.exists():  # keep the rows of the graphs not rerun now
        with out.open() as fh:
            rows = [r for r in csv.DictReader(fh) if r["graph"] not in names]
    print(f"{'graph':24s} {'B%':>3s} {'solver':17s} {'status':10s} {'overhead%':>9s} {'gap%':>7s} "
          f"{'time s':>7s}  scope")
    for g, limit, budgets in selected:
        ref = reference_peak(g)
        total = g.total_cpu()
        for pct in budgets:
            budget = int(ref * pct / 100)
            try:
                lb = lp_bound(g, budget, time_limit=limit) if g.n <= LP_MAX_NODES else None
            except Exception:  # the LP is only a reference column
                lb = None
            for name in solvers:
                if name == "checkmate-approx" and g.n > LP_MAX_NODES:
                    continue  # its LP alone outlasts the limit on the largest graph
                options = {"time_limit": limit, "threads": threads}
                start = time.perf_counter()
                try:
                    res = registry.solve("graph", g, name, budget, **options)
                except Exception as err:  # a crash is a result too
                    print(f"{g.name:24s} {pct:3d} {name:17s} error: {err}")
                    continue
                wall = time.perf_counter() - start
                over = None if res.objective is None else 100 * (res.objective / total - 1)
                gap = None if res.gap is None else 100 * res.gap
                row = {"graph": g.name, "nodes": g.n, "edges": len(g.edges), "budget_pct": pct, "budget": budget,
                       "reference_peak": ref, "solver": name, "status": res.status,
                       "makespan": res.objective, "overhead_pct": None if over is None else round(over, 4),
                       "lower_bound": res.lower_bound, "gap_pct": None if gap is None else round(gap, 4),
                       "lp_bound": lb, "solve_time_s": round(wall, 2),
                       "time_limit_s": limit if name in EXACT else None, "peak_memory": res.peak_memory,
                       "scope": res.scope}
                rows.append(row)
                print(f"{g.name:24s} {pct:3d} {name:17s} {res.status:10s} "
                      f"{'-' if over is None else f'{over:9.3f}':>9s} {'-' if gap is None else f'{gap:7.3f}':>7s} "
                      f"{wall:7.1f}  {res.scope}", flush=True)
                _write(out, rows)
    return rows


def backends(out: Path, threads: int) -> None:
    """Checkmate's MILP on each backend, on instances all of them can finish."""
    from memsched.solvers.graph.linmodel import BACKENDS
    from memsched.solvers.graph.milp import solve_checkmate

    rows = []
    cases = [(generate.linear_graph(20), 0.7), (generate.vgg16(), 0.8), (generate.vgg16(), 0.7),
             (generate.random_layered(30, 1), 0.95), (generate.random_layered(30, 2), 0.9)]
    print(f"{'graph':24s} {'B%':>4s} {'backend':8s} {'status':10s} {'makespan':>12s} {'time s':>7s}")
    for g, frac in cases:
        budget = int(reference_peak(g) * frac)
        for be in BACKENDS:
            res = solve_checkmate(g, budget, backend=be, time_limit=60, threads=threads)
            rows.append({"graph": g.name, "budget_pct": int(frac * 100), "backend": be, "status": res.status,
                         "makespan": res.objective, "lower_bound": res.lower_bound,
                         "solve_time_s": round(res.solve_time_s, 2)})
            print(f"{g.name:24s} {int(frac * 100):4d} {be:8s} {res.status:10s} "
                  f"{'-' if res.objective is None else f'{res.objective:12.3f}':>12s} {res.solve_time_s:7.1f}",
                  flush=True)
    _write(out, rows, list(rows[0]))


def _write(path: Path, rows: list[dict], fields: list[str] | None = None) -> None:
    write_csv(rows, path, fields or FIELDS)


def main(argv: list[str] | None = None) -> int:
    """Benchmark the graph solvers; print a table, write results/bench_graph.csv (or the backends CSV); exit 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller linear graph, shorter limits")
    ap.add_argument("--solvers", default=",".join(ALL), help="comma-separated solver names")
    ap.add_argument("--threads", type=int, default=2, help="CP-SAT / MILP threads (default 2)")
    ap.add_argument("--backends", action="store_true", help="time Checkmate's MILP on each backend")
    ap.add_argument("--out", default=None, help="CSV path")
    ap.add_argument("--graphs", default=",".join(GRAPHS),
                    help="comma-separated subset of linear,random,vgg,resnet (other rows of the CSV are kept)")
    args = ap.parse_args(argv)
    if args.backends:
        backends(Path(args.out or "results/bench_graph_backends.csv"), args.threads)
        return 0
    out = Path(args.out or ("results/bench_graph_quick.csv" if args.quick else "results/bench_graph.csv"))
    run(args.quick, tuple(s for s in args.solvers.split(",") if s), args.threads, out,
        tuple(s for s in args.graphs.split(",") if s))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
