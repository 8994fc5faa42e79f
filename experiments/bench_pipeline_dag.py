"""Benchmark of the pipeline partitioners over DAG partitions: the exact ``dag-cpsat`` and ``dag-milp`` beside
the DP ``dag`` and PipeDream's planner ``dag-pipedream``.

    python -m memsched.experiments.bench_pipeline_dag [--quick] [--out results/bench_pipeline_dag.csv]

Instances (`instances`), all built without torch: the hand-written residual profile
``solvers/data/pipeline/tiny-resnet.graph.txt`` (10 layers, 11 ideals), PipeDream's ResNet-50 profile
``solvers/data/pipeline/pipedream/resnet50.graph.txt`` (176 layers, 241 ideals) and the synthetic
`generate.parallel_branches` DAGs ``branches3x6`` (20 layers, 345 ideals) and ``branches4x4`` (18 layers,
627 ideals: the widest lattice). On P in {2, 4, 8} devices (``--quick``: tiny-resnet and ``branches2x4``,
P in {2, 4}), 1F1B, straight pipelines, weights x 4, communication not charged, memory per device at factors
1.0, 1.25 and 2.0 (``--quick``: 1.0, 2.0) of the smallest memory of any DAG partition on the lattice
(``min_budget``: `dag_dp.least_memory`, the lattice of the solvers' default ``max_states``), the four DAG
solvers run: ``dag``, ``dag-pipedream``, ``dag-cpsat`` and ``dag-milp`` (the exact ones with a 60 s limit
and one worker each).

One CSV row per run: status, period and lower bound (seconds: the instance's time unit applied), ``gap_pct``
(``100 (period - lower_bound) / period``, 0 when proven; blank without a bound or a period), wall-clock
solve time and the 1-minute load average when the run ended (``load_1min``, `os.getloadavg`): times are
wall-clock on whatever the machine is doing. The table printed is followed by the comparison of the two
exact solvers (`compare`): how many runs each proves optimal, their times, which is faster cell by cell,
and whether each exact answer is never worse than ``dag``'s at the same cell (it must not be: both optimise
over the same lattice, and the exact ones are seeded by ``dag``).

A progress bar on stderr counts the runs; Ctrl-C (exit 130) leaves the CSV as it was and keeps the finished
runs in ``<out stem>.partial.csv``, from which the same command run again resumes (`benchtable.resumable`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsched.experiments.bench_pipeline import gap_pct
from memsched.experiments.benchtable import Resumable, check_out, guarded, resumable, settings_of, write_csv
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import __version__, registry
from memsched.solvers.pipeline import Pipeline, generate, load
from memsched.solvers.pipeline.dag_dp import lattice_for, least_memory

FIELDS = ["profile", "layers", "ideals", "devices", "memory", "memory_factor", "min_budget", "solver", "status",
          "period_s", "lower_bound_s", "gap_pct", "peak_memory", "stages", "solve_time_s", "load_1min", "version"]
#: the exact solvers: 60 s wall-clock limit and one worker each
EXACT = ["dag-cpsat", "dag-milp"]
SOLVERS = ["dag", "dag-pipedream", *EXACT]
TIME_LIMIT = 60.0
#: relative slack of "never worse than dag" (both periods are the simulator's replay; this only absorbs float noise)
REL_TOL = 1e-9
_DATA = Path(__file__).resolve().parents[1] / "solvers" / "data" / "pipeline"


def instances(quick: bool) -> list[tuple[str, Callable[[], Pipeline]]]:
    """(profile name, factory) of the DAG instances of the grid, smallest first; none needs torch."""
    tiny: tuple[str, Callable[[], Pipeline]] = ("tiny-resnet", lambda: load(_DATA / "tiny-resnet.graph.txt"))
    if quick:
        return [tiny, ("branches2x4", lambda: generate.parallel_branches(2, 4))]
    return [tiny,
            ("pipedream-resnet50", lambda: load(_DATA / "pipedream" / "resnet50.graph.txt")),
            ("branches3x6", lambda: generate.parallel_branches(3, 6)),
            ("branches4x4", lambda: generate.parallel_branches(4, 4))]


def grid(quick: bool) -> tuple[list[int], list[float]]:
    """(device counts, memory factors of the smallest feasible memory) of the grid."""
    return ([2, 4] if quick else [2, 4, 8]), ([1.0, 2.0] if quick else [1.0, 1.25, 2.0])


def _options(solver: str) -> dict[str, Any]:
    return {"time_limit": TIME_LIMIT, "workers": 1} if solver in EXACT else {}


def _row(name: str, inst: Pipeline, ideals: int, P: int, memory: int, factor: float, base: int,
         solver: str) -> dict[str, Any]:
    start = time.perf_counter()
    r = registry.solve("pipeline", inst, solver, memory, devices=P, **_options(solver))
    wall = time.perf_counter() - start
    u = inst.time_unit
    return {
        "profile": name, "layers": inst.length, "ideals": ideals, "devices": P, "memory": memory,
        "memory_factor": factor, "min_budget": base, "solver": solver, "status": r.status,
        "period_s": r.objective * u if r.objective is not None else "",
        "lower_bound_s": r.lower_bound * u if r.lower_bound is not None else "",
        "gap_pct": gap_pct(r.objective, r.lower_bound),
        "peak_memory": r.peak_memory if r.peak_memory is not None else "",
        "stages": len(r.schedule.stages) if r.schedule is not None else "",
        "solve_time_s": round(wall, 4), "load_1min": round(os.getloadavg()[0], 2), "version": __version__,
    }


def _cell(table: Resumable, name: str, inst: Pipeline, ideals: int, P: int, memory: int, factor: float, base: int,
          solver: str) -> None:
    """One run (`_row`): taken from `table` when it holds it already, else solved and added to it."""
    table.cell((name, P, memory, solver), lambda: _row(name, inst, ideals, P, memory, factor, base, solver))


def run(quick: bool, table: Resumable) -> list[dict[str, Any]]:
    """Every run of the grid (`instances` x `grid` x `SOLVERS`), the ones `table` holds already not run again;
    returns its rows (each cell's as it finishes, so that an interrupt keeps them)."""
    devices, factors = grid(quick)
    for name, make in instances(quick):
        inst = make()
        lat = lattice_for(inst, None)
        for P in devices:
            base = least_memory(inst, lat, P, "1f1b", None)
            assert base is not None  # straight pipelines of one layer per stage at most: always some partition
            for f in factors:
                memory = int(base * f)
                for solver in SOLVERS:
                    _cell(table, name, inst, lat.n, P, memory, f, base, solver)
    return table.rows


def _cells(rows: list[dict[str, Any]]) -> dict[tuple[str, int, int], dict[str, dict[str, Any]]]:
    """The rows by cell (profile, devices, memory), then by solver."""
    cells: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["profile"], int(r["devices"]), int(r["memory"])), {})[r["solver"]] = r
    return cells


def _period(r: dict[str, Any] | None) -> float | None:
    return float(r["period_s"]) if r is not None and r.get("period_s", "") != "" else None


def compare(rows: list[dict[str, Any]]) -> list[str]:
    """Lines comparing the exact solvers: per solver, how many runs it proved ``optimal``, its total, median and
    largest solve time (s) and largest ``gap_pct``, and how many of its periods are at most ``dag``'s at the
    same cell (within `REL_TOL`; each one that is not, or a run without a period, is listed); then, over the
    cells both exact solvers ran, which was faster and whether their periods agree."""
    cells = _cells(rows)
    lines = []
    for solver in EXACT:
        mine = [(key, by[solver]) for key, by in cells.items() if solver in by]
        if not mine:
            continue
        times = [float(r["solve_time_s"]) for _, r in mine]
        gaps = [float(r["gap_pct"]) for _, r in mine if r.get("gap_pct", "") != ""]
        optimal = sum(r["status"] == "optimal" for _, r in mine)
        ok, bad = 0, []
        for key, r in mine:
            p, d = _period(r), _period(cells[key].get("dag"))
            if p is not None and d is not None and p <= d * (1 + REL_TOL):
                ok += 1
            else:
                bad.append(f"{key[0]} P={key[1]} memory={key[2]}: {solver} {p} ({r['status']}) vs dag {d}")
        lines.append(f"{solver:<9}: {optimal} of {len(mine)} optimal; time total {sum(times):.2f} s, median "
                     f"{statistics.median(times):.3f} s, max {max(times):.3f} s; largest gap "
                     f"{max(gaps) if gaps else 0.0:.2f}%; period <= dag's in {ok} of {len(mine)}")
        lines += [f"  not <= dag: {b}" for b in bad]
    both = [(key, by) for key, by in cells.items() if all(s in by for s in EXACT)]
    if both:
        a, b = EXACT
        faster = sum(float(by[a]["solve_time_s"]) < float(by[b]["solve_time_s"]) for _, by in both)
        same = sum(_period(by[a]) is not None and _period(by[a]) == _period(by[b]) for _, by in both)
        ratio = statistics.median(float(by[b]["solve_time_s"]) / max(float(by[a]["solve_time_s"]), 1e-9)
                                  for _, by in both)
        lines.append(f"{a} faster than {b} in {faster} of {len(both)} cells ({b} in {len(both) - faster}); median "
                     f"time ratio {b}/{a} {ratio:.2f}; equal periods in {same} of {len(both)}")
    loads = [float(r["load_1min"]) for r in rows if r.get("load_1min", "") != ""]
    if loads:
        lines.append(f"1-minute load average during the runs: {min(loads):.2f} to {max(loads):.2f} "
                     f"(median {statistics.median(loads):.2f}) on {os.cpu_count()} CPUs")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the DAG pipeline benchmark; print a table and the exact solvers' comparison, write the CSV (``--out``);
    exit 0 (2 on a bad argument, 130 on Ctrl-C: the CSV as it was, the finished rows kept beside it for a rerun
    to resume from)."""
    ap = ScriptParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="two small DAGs, P = 2 and 4, two memory points")
    ap.add_argument("--out", default="results/bench_pipeline_dag.csv")
    args = ap.parse_args(argv)
    return guarded("bench_pipeline_dag", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the grid run, the table printed and written; on Ctrl-C the rows
    finished so far are kept beside --out and a rerun resumes from them (`benchtable.resumable`)."""
    check_out(args.out)
    devices, factors = grid(args.quick)
    total = len(instances(args.quick)) * len(devices) * len(factors) * len(SOLVERS)
    key = ("profile", "devices", "memory", "solver")
    with resumable(args.out, FIELDS, settings_of(args), key, bar="bench_pipeline_dag", total=total) as table:
        rows = run(args.quick, table)
        out = write_csv(rows, args.out, FIELDS)
    print(f"{'profile':<19} {'ideals':>6} {'P':>2} {'mem x':>5} {'solver':<13} {'status':<10} {'period (s)':>11} "
          f"{'bound (s)':>11} {'gap %':>6} {'time (s)':>9} {'load':>5}")
    for r in rows:
        period = f"{float(r['period_s']):.5g}" if r["period_s"] != "" else "-"
        bound = f"{float(r['lower_bound_s']):.5g}" if r["lower_bound_s"] != "" else "-"
        gap = f"{float(r['gap_pct']):.2f}" if r["gap_pct"] != "" else "-"
        print(f"{r['profile']:<19} {r['ideals']:>6} {r['devices']:>2} {r['memory_factor']:>5} {r['solver']:<13} "
              f"{r['status']:<10} {period:>11} {bound:>11} {gap:>6} {r['solve_time_s']:>9} {r['load_1min']:>5}")
    for line in compare(rows):
        print(line)
    print(f"wrote {len(rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
