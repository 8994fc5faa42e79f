"""offload-exact (remat + offloading, free compute order) at L = 10 with 100 slots, against pofo.

    python -m memsched.experiments.bench_offload_exact [--lengths 10] [--seeds 3] [--time-limit 60]

For seeded random chains (`solvers.offload.generate.random_offload`: integer times 1..3 ms,
sizes 10..100 bytes, so a budget of 100 slots rounds sizes for real) with host links on which
one byte moves in 0.01 ms or 0.05 ms (transfer times are whole ticks, so "optimal" can be
claimed), and budgets at 85%, 100% and 120% of rotor's smallest budget (below it only
offloading helps), it runs ``offload-exact`` (1 worker, sizes in 100 slots, the time limit) and
reports its status, makespan, bound (``lower_bound``: the model's, for its class, or the
problem's every-op-once bound, see docs/offload.md), the gap between them, the time, which fast
solver seeded it, the warm start's makespans (``seed_sequence``: stage 1, the seed's compute
sequence re-timed; ``warm_start``: after the neighbourhood search of `exact_free_lns`, which took
``lns_steps`` steps), where the answer came from, which sizes the model ran with (``sizes``:
``slots``, as the ``slots`` column asked, or ``exact`` when `exact_free_retry` chose or retried
exact sizes), and pofo's
makespan at exact sizes.
Writes results/bench_offload_exact.csv with the machine load (1-minute load average) per row
and the CPU seconds of the process beside the wall-clock time (``cpu_s``: on a shared machine
the 60 s wall-clock limit buys far fewer CPU seconds; with 1 worker, CPU time is what a quiet
machine would need).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
from memsched.experiments.benchtable import check_out, guarded, positive, resumable, settings_of, write_frame
from memsched.experiments.script_args import ScriptParser
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.offload.dp import solve_pofo
from memsched.solvers.offload.exact_free import solve_offload_exact
from memsched.solvers.offload.generate import random_offload

RESULTS = Path(__file__).resolve().parent.parent / "results"
PER_BYTE_MS = (0.01, 0.05)
FRACTIONS = (0.85, 1.0, 1.2)  # of rotor's smallest budget


def run_one(L: int, seed: int, per_byte: float, fraction: float, time_limit: float, slots: int,
            workers: int) -> dict[str, Any]:
    """One cell: offload-exact and pofo on chain (L, seed), `per_byte` ms/byte, budget `fraction` of rotor's least."""
    inst = random_offload(L, seed, bandwidth=1000.0 / per_byte, integer_times=True, size_range=(10, 100))
    budget = int(rotor_min_budget(inst.chain) * fraction)
    t0, c0 = time.perf_counter(), time.process_time()
    res = solve_offload_exact(inst, budget, slots=slots, time_limit=time_limit, workers=workers)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    pofo = solve_pofo(inst, budget, slots=0)
    bound = res.lower_bound
    gap = None
    if res.objective is not None and bound is not None and res.objective > 0:
        gap = max(0.0, (res.objective - bound) / res.objective)
    return {"L": L, "seed": seed, "ms_per_byte": per_byte, "fraction": fraction, "budget": budget, "slots": slots,
            "status": res.status, "makespan": res.objective, "lower_bound": bound,
            "model_bound": res.details.get("model_bound"), "gap": gap,
            "time_s": round(wall, 2), "cpu_s": round(cpu, 2), "time_limit_s": time_limit, "workers": workers,
            "seeded_by": res.seeded_by,
            "seed_sequence": res.details.get("seed_sequence_makespan"),
            "warm_start": res.details.get("warm_start_makespan"),
            "lns_steps": res.details.get("lns", {}).get("steps"),
            "solution_from": res.details.get("solution_from", "model"), "transfers": res.details.get("transfers"),
            "sizes": sizes_used(res),
            "pofo": pofo.objective, "load_1min": round(os.getloadavg()[0], 2)}


def _line(row: dict[str, Any]) -> str:
    """The printed line of a run's row: every column as ``name=value`` (a row read back from a partial file
    prints as when it ran)."""
    return " ".join(f"{k}={v}" for k, v in row.items())


def sizes_used(res: Any) -> str:
    """``exact`` when the model ran with exact sizes (`exact_free_retry`: chosen because pofo at
    exact sizes beat the fast solvers at the slots or no fast solver had a schedule, or retried
    after ``infeasible``), else ``slots``: the sizes the ``slots`` column asked for (0: exact)."""
    return "exact" if res.details.get("exact_sizes") or res.details.get("retried_exact_sizes") else "slots"


def main(argv: list[str] | None = None) -> int:
    """Run the grid, print it, write results/bench_offload_exact.csv; exit 0 (2 on a bad argument, 130 on
    Ctrl-C: the CSV as it was, the finished rows kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=positive(int), nargs="+", default=[10])
    ap.add_argument("--seeds", type=positive(int), default=3, help="seeds 0..N-1 (default %(default)s)")
    ap.add_argument("--time-limit", type=positive(float), default=60.0, help="seconds per solve (default %(default)s)")
    ap.add_argument("--slots", type=positive(int, zero=True), default=100, help="memory slots (0: exact sizes)")
    ap.add_argument("--workers", type=positive(int), default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_offload_exact.csv")
    args = ap.parse_args(argv)
    return guarded("bench_offload_exact", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the grid run, the table written; on Ctrl-C the rows finished
    so far are kept beside --out and a rerun resumes from them (`benchtable.resumable`)."""
    check_out(args.out)
    with resumable(args.out, None, settings_of(args), ("L", "seed", "ms_per_byte", "fraction"), line=_line) as kept:
        for L in args.lengths:
            for seed in range(args.seeds):
                for per_byte in PER_BYTE_MS:
                    for fraction in FRACTIONS:
                        if kept.kept(L, seed, per_byte, fraction) is not None:  # its line printed (`line`)
                            continue
                        row = run_one(L, seed, per_byte, fraction, args.time_limit, args.slots, args.workers)
                        kept.add(row)
                        print(_line(row), flush=True)
        table = pd.DataFrame(kept.rows)
        write_frame(table, args.out)
    proven = (table["status"] == "optimal").sum()
    worse = sum(1 for m, p in zip(table["makespan"], table["pofo"])
                if p == p and p is not None and (m != m or m is None or m > p * (1 + 1e-9)))
    print(f"optimal (for the class, {args.slots} slots): {proven} of {len(table)}; "
          f"median time {table['time_s'].median():.1f} s; worse than pofo: {worse}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
