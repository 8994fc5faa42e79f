"""Benchmark of the pipeline partitioners: period versus memory per device, and solver times.

    python -m memsched.experiments.bench_pipeline [--quick] [--out results/bench_pipeline.csv]

Part 1 (kind=sweep): synthetic VGG-16, ResNet-50 and GPT-style profiles
(`solvers.pipeline.profiles`, 12 GB/s links, weights x 4) on P in {2, 4, 8} devices, memory per
device from the smallest feasible one (madpipe's `min_budget`) up to 3x, for every solver.
Part 2 (kind=timing): the targets of issue 7: the CP-SAT model proving optimality for 100 layers
on 8 devices (within 60 s), the DPs on 300 layers and 16 devices (under a second). The exact
solvers ``cpsat`` and ``milp`` (the same model as a MILP, SCIP) run side by side in both parts,
60 s each, one worker each (both defaults); ``gap_pct`` is each row's
``100 (period - lower_bound) / period`` (0 when proven optimal; blank without a bound), and the
last lines printed compare the two exact solvers' statuses and times (`exact_times`).
One CSV row per run; times are wall-clock on whatever the machine is doing. A progress bar on
stderr counts the runs; Ctrl-C (exit 130) leaves the CSV as it was and keeps the finished runs in
``<out stem>.partial.csv``, from which the same command run again resumes (`benchtable.resumable`).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from memsched.experiments.benchtable import Resumable, check_out, guarded, resumable, settings_of, write_csv
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import __version__, registry
from memsched.solvers.pipeline import generate, profiles
from memsched.solvers.pipeline.dp import min_budget

FIELDS = ["kind", "profile", "layers", "devices", "memory", "memory_factor", "solver", "options", "status", "period_s",
          "peak_memory", "lower_bound_s", "gap_pct", "min_budget", "solve_time_s", "stages", "partition", "version"]
BANDWIDTH = 12e9
SOLVERS: list[tuple[str, dict[str, Any]]] = [
    ("madpipe", {}), ("pipedream", {}), ("pipedream", {"replication": True}), ("balance-time", {}),
    ("cpsat", {"time_limit": 60}), ("milp", {"time_limit": 60}),
]
#: the exact solvers, each with a 60 s limit: run side by side in both parts
EXACT: list[tuple[str, dict[str, Any]]] = [("cpsat", {"time_limit": 60}), ("milp", {"time_limit": 60})]


def gap_pct(period: float | None, bound: float | None) -> float | str:
    """``100 (period - bound) / period`` (percent, rounded to 4 decimals, never below 0), or ``""`` when either
    is missing or the period is not positive."""
    if period is None or bound is None or period <= 0:
        return ""
    return round(max(0.0, 100 * (period - bound) / period), 4)


def _row(kind: str, inst: Any, P: int, memory: int, factor: float, solver: str, opts: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    r = registry.solve("pipeline", inst, solver, memory, devices=P, **opts)
    wall = time.perf_counter() - start
    u = inst.time_unit
    return {
        "kind": kind, "profile": inst.name, "layers": inst.length, "devices": P, "memory": memory,
        "memory_factor": round(factor, 3), "solver": solver,
        "options": ";".join(f"{k}={v}" for k, v in opts.items() if k != "time_limit"),
        "status": r.status, "period_s": r.objective * u if r.objective is not None else "",
        "peak_memory": r.peak_memory if r.peak_memory is not None else "",
        "lower_bound_s": r.lower_bound * u if r.lower_bound is not None else "",
        "gap_pct": gap_pct(r.objective, r.lower_bound),
        "min_budget": r.min_budget if r.min_budget is not None else "", "solve_time_s": round(wall, 4),
        "stages": len(r.schedule.stages) if r.schedule is not None else "",
        "partition": str(r.schedule) if r.schedule is not None else "", "version": __version__,
    }


def _run(table: Resumable | None, rows: list[dict[str, Any]], kind: str, inst: Any, P: int, memory: int,
         factor: float, solver: str, opts: dict[str, Any]) -> None:
    """One run (`_row`): taken from `table` when it holds it already, else solved and added to it (to `rows`
    without a table)."""
    if table is None:
        rows.append(_row(kind, inst, P, memory, factor, solver, opts))
        return
    options = ";".join(f"{k}={v}" for k, v in opts.items() if k != "time_limit")
    table.cell((kind, inst.name, P, memory, solver, options),
               lambda: _row(kind, inst, P, memory, factor, solver, opts))


def sweep(quick: bool, rows: list[dict[str, Any]] | None = None, table: Resumable | None = None
          ) -> list[dict[str, Any]]:
    """Period of each pipeline solver on VGG-16, ResNet-50 and a 24-layer transformer, P = 2, 4, 8 devices,
    memory at factors of the smallest feasible one; one row per point, appended to `rows` (when given: a
    caller interrupted keeps the finished ones; with `table`, `benchtable.resumable`, to its rows, those it
    holds already not run again)."""
    rows = table.rows if table is not None else [] if rows is None else rows
    insts = [profiles.vgg16(), profiles.resnet50(), profiles.transformer(layers=24)]
    factors = [1.0, 1.25, 2.0] if quick else [1.0, 1.1, 1.25, 1.5, 2.0, 3.0]
    for base in insts:
        inst = base.with_machine(bandwidth=BANDWIDTH)
        for P in [2, 4, 8]:
            lo = min_budget(inst, P)
            for f in factors:
                for solver, opts in SOLVERS:
                    _run(table, rows, "sweep", inst, P, int(lo * f), f, solver, opts)
    return rows


def timing(quick: bool, rows: list[dict[str, Any]] | None = None, table: Resumable | None = None
           ) -> list[dict[str, Any]]:
    """Solve time (seconds) of the pipeline solvers on large instances (CP-SAT and MILP capped at 60 s); one row per
    instance, memory factor and solver, appended to `rows` (when given: a caller interrupted keeps the
    finished ones; `table`: as for `sweep`)."""
    rows = table.rows if table is not None else [] if rows is None else rows
    exact = [profiles.transformer(layers=98)] if quick else [profiles.transformer(layers=98),
                                                            generate.scaled(profiles.resnet50(), 100),
                                                            generate.scaled(profiles.vgg16(), 100)]
    for base in exact:
        inst = base.with_machine(bandwidth=BANDWIDTH)
        lo = min_budget(inst, 8)
        for f in [1.25] if quick else [1.0, 1.25, 2.0, 1000.0]:
            for solver, opts in EXACT:
                _run(table, rows, "timing", inst, 8, int(lo * f), f, solver, opts)
            _run(table, rows, "timing", inst, 8, int(lo * f), f, "madpipe", {})
    big = generate.scaled(profiles.vgg16(), 300).with_machine(bandwidth=BANDWIDTH)
    lo = min_budget(big, 16)
    for solver, opts in [("madpipe", {}), ("pipedream", {}), ("balance-time", {}), ("madpipe", {"replication": True}),
                         ("pipedream", {"replication": True})]:
        _run(table, rows, "timing", big, 16, int(lo * 1.25), 1.25, solver, opts)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the pipeline benchmark (sweep and/or timing); print a table, write the CSV (``--out``); exit 0 (2 on a
    bad argument, 130 on Ctrl-C: the CSV as it was, the finished rows kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer memory points and timing cases")
    ap.add_argument("--out", default="results/bench_pipeline.csv")
    ap.add_argument("--part", choices=("all", "sweep", "timing"), default="all")
    args = ap.parse_args(argv)
    return guarded("bench_pipeline", lambda: _main(args))


def exact_times(rows: list[dict[str, Any]]) -> list[str]:
    """One line per part (kind) and exact solver of `EXACT` with rows: how many ended ``optimal``, the total,
    median and largest solve time (seconds, the ``solve_time_s`` column) and the largest ``gap_pct``."""
    lines = []
    for kind in dict.fromkeys(r["kind"] for r in rows):
        for solver, _ in EXACT:
            mine = [r for r in rows if r["kind"] == kind and r["solver"] == solver]
            if not mine:
                continue
            times = sorted(float(r["solve_time_s"]) for r in mine)
            mid = len(times) // 2
            median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
            gaps = [float(r["gap_pct"]) for r in mine if r.get("gap_pct", "") != ""]
            optimal = sum(r["status"] == "optimal" for r in mine)
            lines.append(f"{kind:<7} {solver:<6}: {optimal} of {len(mine)} optimal; time total {sum(times):.2f} s, "
                         f"median {median:.3f} s, max {times[-1]:.3f} s; largest gap "
                         f"{max(gaps) if gaps else 0.0:.2f}%")
    return lines


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the parts run, the table printed and written; on Ctrl-C the
    rows finished so far are kept beside --out and a rerun resumes from them (`benchtable.resumable`)."""
    check_out(args.out)
    key = ("kind", "profile", "devices", "memory", "solver", "options")
    with resumable(args.out, FIELDS, settings_of(args), key, bar="bench_pipeline") as table:
        if args.part in ("all", "sweep"):
            sweep(args.quick, table=table)
        if args.part in ("all", "timing"):
            timing(args.quick, table=table)
        rows = table.rows
        out = write_csv(rows, args.out, FIELDS)
    print(f"{'kind':<7} {'profile':<22} {'L':>4} {'P':>3} {'mem x':>6} {'solver':<13} {'opt':<16} {'status':<10} "
          f"{'period (s)':>11} {'gap %':>7} {'peak GiB':>9} {'time (s)':>9}")
    for r in rows:
        period = f"{r['period_s']:.5g}" if r["period_s"] != "" else "-"
        peak = f"{r['peak_memory'] / 2**30:.2f}" if r["peak_memory"] != "" else "-"
        gap = f"{r['gap_pct']:.2f}" if r.get("gap_pct", "") != "" else "-"
        print(f"{r['kind']:<7} {r['profile']:<22} {r['layers']:>4} {r['devices']:>3} {r['memory_factor']:>6} "
              f"{r['solver']:<13} {r['options']:<16} {r['status']:<10} {period:>11} {gap:>7} {peak:>9} "
              f"{r['solve_time_s']:>9}")
    for line in exact_times(rows):
        print(line)
    print(f"wrote {len(rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
