"""pofo's dynamic program against rotor-offload and the exact ground truth on seeded random chains.

    python -m memsched.experiments.bench_offload_pofo [--seeds 6] [--exact-lengths 2 3]
    python -m memsched.experiments.bench_offload_pofo --port 30     (pofo against ColossalAI's port)

For chains from `solvers.chain.generate.random_chain` (integer times, sizes 1..8 bytes), host
links of 500, 2000 and 8000 bytes/s (a byte moves in 2, 0.5, 0.125 ms) and budgets at 80%,
100% and midway between rotor's smallest budget and the store-all peak, with exact sizes:

- ``pofo-dp``: the DP's own schedule (``details.dp_makespan``; its class: persistent schedules
  with offloaded checkpoints and offloaded inputs of F_all, or rotor's schedule),
- ``pofo``: what the solver returns (the DP, or rotor-offload's schedule when it is faster),
- ``rotor-offload`` and, for the lengths in `--exact-lengths`, ``exact-combined`` (CP-SAT over
  every phase-form compute sequence with offloaded values fetched back, docs/offload.md).

Prints how often each loses to another and writes every row to --out (default
results/offload/pofo_versus.csv; makespans in the chain's time unit, solve times in s), written
atomically once every chain is done (a progress bar on stderr counts them). Ctrl-C (exit 130) leaves
--out as it was and keeps the finished chains' rows in ``<out stem>.partial.csv``, from which the same
command run again resumes (`benchtable.resumable`). ``--port N``
writes its rows to --out too (default results/bench_offload_pofo.csv). Bad arguments (a seed count,
length or slot count below 1, a time limit <= 0, an unwritable --out) are refused before any
solving (one line, exit 2).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
from memsched.experiments.benchtable import check_out, guarded, positive, progress, resumable, settings_of, write_frame
from memsched.experiments.script_args import ScriptParser
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


def port_rows(chains: int, port_slots: int) -> list[dict[str, Any]]:
    """pofo against ColossalAI's POFO port (`experiments.pofo_port`, our restatement of its
    recurrence, replayed by our simulator) on `chains` random chains: L = 4..8, sizes 100..1000
    bytes, a link moving the mean tape in 0.5, 1 or 2 mean forward times, budgets at rotor's
    least and midway to the store-all peak."""
    return [row for n in range(chains) for row in port_chain_rows(n, port_slots)]


def port_chain_rows(n: int, port_slots: int) -> list[dict[str, Any]]:
    """The rows of `port_rows`' chain number `n` (L = 4 + n mod 5, seed n, transfer ratio 0.5, 1 or 2)."""
    from memsched.experiments.pofo_port import port_makespan
    from memsched.solvers.offload.generate import random_offload

    out = []
    L, seed, ratio = 4 + n % 5, n, (0.5, 1.0, 2.0)[n % 3]
    inst = random_offload(L, seed, transfer_ratio=ratio, size_range=(100, 1000))
    lo, hi = rotor_min_budget(inst.chain), reference_peak(inst.chain)
    for budget in (lo, (lo + hi) // 2):
        row: dict[str, Any] = {"L": L, "seed": seed, "transfer_ratio": ratio, "budget": budget}
        t0 = time.perf_counter()
        p = solve_pofo(inst, budget)
        row["pofo_s"] = time.perf_counter() - t0
        row["pofo"] = p.objective
        row["pofo_from"] = p.details.get("solution_from", "dp")
        row["pofo_unpinned"] = "dp_unpinned" in p.details
        t0 = time.perf_counter()
        row["port"], row["port_note"] = port_makespan(inst, budget, port_slots)
        row["port_s"] = time.perf_counter() - t0
        row["port_slots"] = port_slots
        out.append(row)
    return out


def write_table(table: pd.DataFrame, out: Path) -> None:
    """Replace the CSV `out` by `table` (parents created) through a temporary file renamed into place."""
    write_frame(table, out)


def loses(a: float | None, b: float | None) -> bool:
    """True when `b` found a schedule and `a` found none or a slower one."""
    return b is not None and (a is None or a > b * (1 + TOL) + TOL)


def main(argv: list[str] | None = None) -> int:
    """Compare pofo with the other offload solvers; print a table, write --out (results/offload/pofo_versus.csv;
    with --port, results/bench_offload_pofo.csv); exit 0, 2 on bad arguments (before any solving), 130 on Ctrl-C
    (--out as it was, the finished chains' rows kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=positive(int), default=6, help="seeds 0..N-1 per length")
    ap.add_argument("--lengths", type=positive(int), nargs="+", default=[3, 5, 8])
    ap.add_argument("--exact-lengths", type=positive(int), nargs="*", default=[2, 3])
    ap.add_argument("--time-limit", type=positive(float), default=20.0, help="exact-combined, per run (s)")
    ap.add_argument("--out", type=Path, default=None,
                    help="CSV (default results/offload/pofo_versus.csv; with --port, results/bench_offload_pofo.csv)")
    ap.add_argument("--port", type=positive(int, zero=True), default=0, metavar="N",
                    help="instead: pofo against ColossalAI's POFO port on N random chains "
                         "(written to --out, default results/bench_offload_pofo.csv)")
    ap.add_argument("--port-slots", type=positive(int), default=20, help="memory slots of the port's table")
    args = ap.parse_args(argv)
    if args.out is None:  # RESULTS read now (tests point it elsewhere)
        args.out = RESULTS.parent / "bench_offload_pofo.csv" if args.port else RESULTS / "pofo_versus.csv"
    return guarded("bench_offload_pofo", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """`main` once the arguments are read: --out checked, then the runs (one `benchtable.resumable` cell per
    chain), --out written at the end."""
    check_out(args.out)
    if args.port:
        return port_main(args.port, args.port_slots, args.out)
    chains = [(L, seed) for L in sorted(set(args.lengths) | set(args.exact_lengths)) for seed in range(args.seeds)]
    with resumable(args.out, None, settings_of(args, "port_slots"), ("L", "seed")) as kept:
        for L, seed in progress(chains, desc="bench_offload_pofo", unit="chain"):
            if kept.kept(L, seed) is None:
                kept.add(*rows_for(L, seed, L in args.exact_lengths, args.time_limit))
        table = pd.DataFrame(kept.rows)
        write_table(table, args.out)
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


def port_main(chains: int, port_slots: int, out: Path | None = None) -> int:
    """Write `out` (default results/bench_offload_pofo.csv; at the end, the finished chains kept beside it on
    Ctrl-C for a rerun to resume from, `benchtable.resumable`; ``load_1min`` the load average when its chain
    started) and print pofo's wins, ties and losses against the port."""
    out = RESULTS.parent / "bench_offload_pofo.csv" if out is None else Path(out)
    with resumable(out, None, {"port": chains, "port_slots": port_slots}, ("seed",)) as kept:
        for n in progress(range(chains), desc="bench_offload_pofo --port", unit="chain"):
            if kept.kept(n) is None:
                load = round(os.getloadavg()[0], 2)
                kept.add(*[{**row, "load_1min": load} for row in port_chain_rows(n, port_slots)])
        table = pd.DataFrame(kept.rows)
        write_table(table, out)
    def val(v: Any) -> float | None:
        return None if v is None or v != v else float(v)

    both = [(val(a), val(b)) for a, b in zip(table["pofo"], table["port"])]
    loss = sum(loses(a, b) for a, b in both)
    win = sum(a is not None and b is not None and b > a * (1 + TOL) + TOL for a, b in both)
    tie = sum(a is not None and b is not None and not loses(a, b) and not loses(b, a) for a, b in both)
    alone = sum(a is not None and b is None for a, b in both)
    print(f"pofo vs the port over {len(table)} cells ({chains} chains), where both have a schedule: pofo faster "
          f"{win}, equal {tie}, slower {loss}; the port's schedule broke the budget or a rule in "
          f"{table['port_note'].str.startswith('invalid').sum()} and it found none in "
          f"{(table['port_note'] == 'none').sum()} (pofo found one in {alone})")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
