"""pofo's dynamic program against rotor-offload and the exact ground truth on seeded random chains.

    python -m memsched.experiments.bench_offload_pofo [--seeds 6] [--exact-lengths 2 3]

For chains from `solvers.chain.generate.random_chain` (integer times, sizes 1..8 bytes), host
links of 500, 2000 and 8000 bytes/s (a byte moves in 2, 0.5, 0.125 ms) and budgets at 80%,
100% and midway between rotor's smallest budget and the store-all peak, with exact sizes:

- ``pofo-dp``: the DP's own schedule (``details.dp_makespan``; its class: persistent schedules
  with offloaded checkpoints and offloaded inputs of F_all, or rotor's schedule),
- ``pofo``: what the solver returns (the DP, or rotor-offload's schedule when it is faster),
- ``rotor-offload`` and, for the lengths in `--exact-lengths`, ``exact-combined`` (CP-SAT over
  every phase-form compute sequence, the ground truth of docs/offload.md).

Prints how often each loses to another and writes every row to
results/offload/pofo_versus.csv (makespans in the chain's time unit, solve times in s).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pandas as pd
from memsched.solvers.chain import reference_peak
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.offload import OffloadInstance
from memsched.solvers.offload.combined import solve_rotor_offload
from memsched.solvers.offload.dp import solve_pofo
from memsched.solvers.offload.exact_combined import solve_exact_combined

RESULTS = Path(__file__).resolve().parent.parent / "results" / "offload"
TOL = 1e-9


def rows_for(L: int, seed: int, exact: bool, time_limit: float) -> list[dict[str, Any]]:
    """One row per (bandwidth, budget) of the chain (L, seed)."""
    chain = random_chain(L, seed, integer_times=True, size_range=(1, 8))
    lo, hi = rotor_min_budget(chain), reference_peak(chain)
    out = []
    for bw in (500.0, 2000.0, 8000.0):
        inst = OffloadInstance(chain, bw)
        for budget in sorted({int(lo * 0.8), lo, (lo + hi) // 2}):
            row: dict[str, Any] = {"L": L, "seed": seed, "bandwidth": bw, "budget": budget}
            t0 = time.perf_counter()
            p = solve_pofo(inst, budget, slots=0)
            row["pofo_s"] = time.perf_counter() - t0
            row["pofo"] = p.objective
            row["pofo-dp"] = p.details.get("dp_makespan", p.objective)
            row["from"] = p.details.get("solution_from", "dp")
            r = solve_rotor_offload(inst, budget, slots=0)
            row["rotor-offload"] = r.objective
            if exact:
                t0 = time.perf_counter()
                e = solve_exact_combined(inst, budget, slots=0, time_limit=time_limit)
                row["exact-combined_s"] = time.perf_counter() - t0
                row["exact-combined"] = e.objective
                row["exact_status"] = e.status
            out.append(row)
    return out


def loses(a: float | None, b: float | None) -> bool:
    """True when `b` found a schedule and `a` found none or a slower one."""
    return b is not None and (a is None or a > b * (1 + TOL) + TOL)


def main(argv: list[str] | None = None) -> int:
    """Compare pofo with the other offload solvers; print a table, write results/offload/pofo_versus.csv; exit 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--lengths", type=int, nargs="+", default=[3, 5, 8])
    ap.add_argument("--exact-lengths", type=int, nargs="*", default=[2, 3])
    ap.add_argument("--time-limit", type=float, default=20.0, help="exact-combined, per run (s)")
    ap.add_argument("--out", type=Path, default=RESULTS / "pofo_versus.csv")
    args = ap.parse_args(argv)
    rows = []
    for L in sorted(set(args.lengths) | set(args.exact_lengths)):
        for seed in range(args.seeds):
            rows += rows_for(L, seed, L in args.exact_lengths, args.time_limit)
    table = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    pairs = [("pofo-dp", "rotor-offload"), ("pofo", "rotor-offload")]
    if "exact-combined" in table:
        pairs += [("exact-combined", "pofo"), ("pofo", "exact-combined"), ("exact-combined", "rotor-offload")]
    print(f"{'solver':<16} {'loses to':<16} {'cells':>6} {'of':>4}")
    for a, b in pairs:
        sub = table.dropna(subset=[a]) if a == "exact-combined" else table
        if b == "exact-combined":
            sub = sub[sub["exact_status"] == "optimal"] if "exact_status" in sub else sub.iloc[0:0]
        n = sum(loses(x, y) for x, y in zip(sub[a].where(sub[a].notna(), None), sub[b].where(sub[b].notna(), None)))
        print(f"{a:<16} {b:<16} {n:>6} {len(sub):>4}")
    print(f"pofo returned rotor-offload's schedule in {(table['from'] == 'rotor-offload').sum()} of {len(table)}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
