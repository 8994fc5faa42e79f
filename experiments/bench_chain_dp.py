"""Benchmark of the rotor persistent DP (solvers.chain.dp): table + schedule time.

    python -m memsched.experiments.bench_chain_dp [--lengths 50 100 200 400] [--slots 100 500]
                                         [--fraction 0.5] [--repeat 3] [--out results/bench_chain_dp.csv]

For each L and slot count: a seeded random chain (`solvers.chain.generate.random_chain(L, seed)`),
a budget of `fraction` x its store-all peak, and the best of `repeat` runs of
(table fill, schedule reconstruction); wall and process CPU seconds are both recorded, since
the machine may be shared (the load average at the start of each row is written too). The kernel
(`--kernel`; by default the fastest available, `solvers.chain.jit.kernel_backend`: C, numba or
numpy, all giving the same table) is built, compiled or loaded from its cache once before
timing; that warm-up is reported apart.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from memsched.experiments.benchtable import check_out, guarded, positive, resumable, settings_of, write_csv
from memsched.experiments.script_args import ScriptParser
from memsched.solvers.chain import dp as rotor_mod
from memsched.solvers.chain import reference_peak, simulate
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ["L", "slots", "seed", "budget_fraction", "budget", "cells", "table_s", "schedule_s", "total_s",
          "cpu_s", "makespan", "recomputations", "kernel", "numba", "load_avg_1min", "python", "numpy", "numba_version",
          "machine"]


def problem(L: int, slots: int, seed: int, fraction: float) -> tuple[Any, int, Any, int]:
    """(chain, budget, discretised chain, M) of one row: the random chain of L stages, its budget (`fraction` of its
    store-all peak, in its size unit), the chain discretised into `slots` slots of that budget, and the table's top
    memory value M (slots left once the input x_0 is stored)."""
    chain = random_chain(L, seed)
    budget = int(fraction * reference_peak(chain))
    work = chain.discretised(budget / slots)
    return chain, budget, work, slots - int(work.x[0])


def check_sizes(lengths: list[int], slot_counts: list[int], seed: int, fraction: float) -> None:
    """`InputError` (naming --slots, or --lengths when no slot count fits) unless every (L, slots) table fits in
    `rotor_mod.MAX_CELLS` cells: checked before any work, with the most slots that fit the longest chain refused."""
    for L in lengths:
        rows = rotor_mod.table_cells(L, 0)  # (L + 1)(L + 2) / 2: cells per memory value
        most = rotor_mod.MAX_CELLS // rows - 1  # the largest M that fits; slots >= M, so --slots `most` fits
        for slots in slot_counts:
            cells = rotor_mod.table_cells(L, max(problem(L, slots, seed, fraction)[3], 0))
            if cells <= rotor_mod.MAX_CELLS:
                continue
            if most < 1:
                raise InputError(f"L={L}: the rotor table would have more than {rotor_mod.MAX_CELLS:.3g} cells at "
                                 "any slot count; give shorter lengths", field="--lengths")
            raise InputError(f"the rotor table would have {cells:.3g} cells (L={L}, {slots} slots), more than "
                             f"{rotor_mod.MAX_CELLS:.3g}; use --slots {most} or fewer for L={L}",
                             field="--slots")


def run_one(L: int, slots: int, seed: int, fraction: float, repeat: int, kernel: str) -> dict:
    """Best of `repeat` timings (s) of the rotor DP table (with `kernel`) and schedule on a random chain
    of L stages at `fraction` of its store-all peak, `slots` slots; the makespan is checked by the
    simulator. One CSV row. `InputError` (naming --fraction) when that budget has no schedule."""
    chain, budget, work, m_top = problem(L, slots, seed, fraction)
    best = None
    for _ in range(repeat):
        load = os.getloadavg()[0]
        w0, c0 = time.perf_counter(), time.process_time()
        table = rotor_mod.rotor_table(work, m_top, kernel=kernel)
        w1 = time.perf_counter()
        try:
            schedule = table.schedule(m_top)
        except ValueError:  # no schedule within the budget (a short chain at a small fraction, or few slots)
            raise InputError(f"no schedule of the random chain L={L} (seed {seed}) within {fraction} of its "
                             f"store-all peak at {slots} slots: raise --fraction or --slots", field="--fraction") \
                from None
        w2, c2 = time.perf_counter(), time.process_time()
        row = {"table_s": w1 - w0, "schedule_s": w2 - w1, "total_s": w2 - w0, "cpu_s": c2 - c0, "load_avg_1min": load}
        if best is None or row["total_s"] < best["total_s"]:
            best = row
    sim = simulate(chain, schedule, budget).raise_if_invalid()
    assert abs(sim.makespan - table.value(m_top)) <= 1e-6 * sim.makespan
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba_version = ""
    return {"L": L, "slots": slots, "seed": seed, "budget_fraction": fraction, "budget": budget,
            "cells": int(table.C.size), **{k: round(v, 4) for k, v in best.items()},
            "makespan": round(sim.makespan, 6), "recomputations": schedule.recomputations(),
            "kernel": kernel, "numba": rotor_mod.HAVE_NUMBA, "python": platform.python_version(),
            "numpy": np.__version__,
            "numba_version": numba_version, "machine": f"{platform.machine()} x{os.cpu_count()}"}


def _line(row: dict) -> str:
    """The printed line of a row (s), from the row alone (a row read back from a partial file prints as when it
    ran)."""
    return (f"{row['L']:>5} {row['slots']:>6} {row['cells']:>11,} {row['table_s']:>9.3f} {row['schedule_s']:>9.3f} "
            f"{row['total_s']:>9.3f} {row['cpu_s']:>8.3f} {row['load_avg_1min']:>5.1f} {row['recomputations']:>7}")


def main(argv: list[str] | None = None) -> int:
    """Time the chain DP over lengths and slots; print a table, write the CSV (``--out``); exit 0 (2 on a
    bad argument, 130 on Ctrl-C: the CSV as it was, the finished rows
    kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=positive(int), nargs="+", default=[50, 100, 200, 400])
    ap.add_argument("--slots", type=positive(int), nargs="+", default=[100, 500])
    ap.add_argument("--fraction", type=positive(float), default=0.5, help="budget as a fraction of the store-all peak")
    ap.add_argument("--seed", type=positive(int, zero=True), default=0)
    ap.add_argument("--repeat", type=positive(int), default=3, help="best of N runs (1 for L > 200)")
    ap.add_argument("--kernel", choices=rotor_mod.KERNELS, default=None,
                    help="the DP kernel (default: the fastest available)")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_chain_dp.csv"))
    args = ap.parse_args(argv)
    return guarded("bench_chain_dp", lambda: _run(args),
                   interrupted="interrupted")


def _run(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the kernel warmed up, one row per (L, slots); on Ctrl-C the
    rows finished so far are kept beside --out (`benchtable.resumable`), and a rerun resumes from them."""
    check_out(args.out)
    check_sizes(args.lengths, args.slots, args.seed, args.fraction)
    t0 = time.perf_counter()
    kernel = args.kernel or rotor_mod.kernel_backend()
    rotor_mod.rotor_table(random_chain(3, 0), 10, kernel=kernel)
    warm = time.perf_counter() - t0
    print(f"kernel: {kernel}; warm-up (build, compile or cache load) "
          f"{warm:.2f} s; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", file=sys.stderr)
    header = f"{'L':>5} {'slots':>6} {'cells':>11} {'table s':>9} {'sched s':>9} {'total s':>9} {'cpu s':>8} " \
             f"{'load':>5} {'recomp':>7}"
    print(header)
    with resumable(args.out, FIELDS, settings_of(args), ("L", "slots"), line=_line) as table:
        for L in args.lengths:
            for slots in args.slots:
                if table.kept(L, slots) is None:  # else printed by `table` (`line`)
                    row = run_one(L, slots, args.seed, args.fraction, args.repeat if L <= 200 else 1, kernel)
                    table.add(row)
                    print(_line(row), flush=True)
        out = write_csv(table.rows, args.out, FIELDS)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
