"""Interleaved allocations (several stages per device) beside the straight memory-aware DP.

    python -m memsched.experiments.bench_pipeline_interleave [--out results/bench_pipeline_interleave.csv]

On the synthetic VGG-16 (21 layers) and GPT-style (26 layers) profiles of
`solvers.pipeline.profiles` (12 GB/s links, weights x 4, 1F1B) on P = 2 and 4 devices, with the
memory per device at 1.0x and 1.5x the smallest one a contiguous partition needs (`min_budget`):
``madpipe`` (contiguous, optimal), ``interleave-v`` (V-shaped DP), ``interleave-dp`` (the
general DP over device maps, exact unless a level is cut to its beam) and ``interleave-cpsat``
(exact CP-SAT, 30 s; ``feasible`` when its integer times round the profile's). One CSV row per
run: status, period (s per micro-batch), peak memory per device, wall time (s), and the 1-minute
load average of the machine.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from memsched.experiments.benchtable import Resumable, check_out, guarded, resumable, write_csv
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import __version__, registry
from memsched.solvers.pipeline import profiles
from memsched.solvers.pipeline.dp import min_budget

FIELDS = ["profile", "layers", "devices", "memory", "memory_factor", "solver", "status", "period_s", "peak_memory",
          "stages", "device_of", "solve_time_s", "scope", "load_1min", "version"]
SOLVERS: list[tuple[str, dict[str, Any]]] = [("madpipe", {}), ("interleave-v", {}), ("interleave-dp", {}),
                                             ("interleave-cpsat", {"time_limit": 30})]


def run(rows: list[dict[str, Any]] | None = None, table: Resumable | None = None) -> list[dict[str, Any]]:
    """Every profile, P, memory factor and solver of the module docstring; prints one line per run (`_line`). Each
    row is appended to `rows` (when given) as soon as it is measured: a caller interrupted keeps the finished ones;
    with `table` (`benchtable.resumable`; then `rows` is its rows) the runs it holds already are not made again
    (their lines printed by `table`, given `_line`)."""
    rows = table.rows if table is not None else [] if rows is None else rows
    for inst in (profiles.vgg16(), profiles.transformer(layers=24)):
        inst = inst.with_machine(bandwidth=12e9)
        for P in (2, 4):
            base = min_budget(inst, P)
            for factor in (1.0, 1.5):
                memory = int(base * factor)
                for solver, opts in SOLVERS:
                    if table is not None and table.kept(inst.name, P, factor, solver) is not None:
                        continue
                    start = time.perf_counter()
                    r = registry.solve("pipeline", inst, solver, memory, devices=P, **opts)
                    wall = time.perf_counter() - start
                    part = r.schedule
                    x = {
                        "profile": inst.name, "layers": inst.length, "devices": P, "memory": memory,
                        "memory_factor": factor, "solver": solver, "status": r.status,
                        "period_s": r.objective * inst.time_unit if r.objective is not None else "",
                        "peak_memory": r.peak_memory if r.peak_memory is not None else "",
                        "stages": len(part.stages) if part is not None else "",
                        "device_of": " ".join(map(str, part.device_of)) if part is not None and part.device_of else "",
                        "solve_time_s": round(wall, 3), "scope": r.scope, "load_1min": round(os.getloadavg()[0], 2),
                        "version": __version__,
                    }
                    if table is not None:
                        table.add(x)
                    else:
                        rows.append(x)
                    print(_line(x), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    """The printed line of a run's row (period and solve time in s), from the row alone: a row read back from a
    partial file prints as when it ran."""
    period = row["period_s"]
    return (f"{row['profile']:16s} P={row['devices']} mem x{row['memory_factor']}  {row['solver']:16s} "
            f"{row['status']:10s} {period if period == '' else round(period, 6)!s:>10s} s  "
            f"stages {row['stages']!s:>2s}  {row['solve_time_s']:7.2f} s")


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, print it and write the CSV (``--out``); exit 0 (2 on a bad argument, 130 on Ctrl-C:
    the CSV as it was, the finished rows kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/bench_pipeline_interleave.csv")
    args = ap.parse_args(argv)
    return guarded("bench_pipeline_interleave", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the runs made and written; on Ctrl-C the rows finished so far
    are kept beside --out and a rerun resumes from them (`benchtable.resumable`)."""
    check_out(args.out)
    with resumable(args.out, FIELDS, {}, ("profile", "devices", "memory_factor", "solver"), line=_line) as table:
        run(table=table)
        written = write_csv(table.rows, args.out, FIELDS)
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
