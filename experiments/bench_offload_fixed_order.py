"""The two exact offload-only solvers side by side: CP-SAT (``cpsat``) and its MILP (``milp``, SCIP).

    python -m memsched.experiments.bench_offload_fixed_order [--lengths 4 6 8 10] [--seeds 2] [--time-limit 30]

Both solve the same model in the same scope (offloading without recomputation, store-all compute order, each
tape offloaded at most once, durations in whole ticks: `solvers/offload/cpsat.py`, `solvers/offload/milp.py`).
For seeded random chains with a host link (`solvers.offload.generate.random_offload`, integer times and a link
of 1000 bytes/s, so every duration is a whole tick and ``optimal`` can be claimed), exact sizes (slots 0) and
budgets at `FRACTIONS` of the way from the least budget the model can meet (`least_budget`: the input plus
`cpsat.forced_memory`, a necessary bound) to the store-all peak, it runs ``cpsat`` and ``milp`` (one worker
each, the exact layer's defaults otherwise: warm start from the fast solvers, referee; ``--time-limit`` seconds
each) and, for reference, the fast ``pofo`` and ``offload-prefix``. One row per solver: its status, makespan,
the model's bound (``details.model_bound``: for the scope, exact solvers only), the wall-clock time and the
machine's 1-minute load. An exact solver's status and makespan are its model's, even where the exact layer
returned a fast solver's faster schedule (pofo may recompute, outside the scope: `run_one`). Prints the rows
and a summary (optimal runs, median and largest time per exact solver, whether the two optima agree), writes
``--out`` (default results/bench_offload_fixed_order.csv).
Resumable: a rerun after Ctrl-C (exit 130) takes the finished cells from the partial file beside ``--out``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import check_out, guarded, positive, resumable, settings_of, write_csv
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import registry
from memsched.solvers.offload import reference_peak
from memsched.solvers.offload.cpsat import forced_memory
from memsched.solvers.offload.generate import random_offload
from memsched.solvers.offload.instance import OffloadInstance
from memsched.solvers.result import OPTIMAL

RESULTS = Path(__file__).resolve().parent.parent / "results"
FIELDS = ["L", "seed", "budget", "solver", "status", "makespan", "bound", "time_s", "load_1min"]
EXACT = ("cpsat", "milp")
FAST = ("pofo", "offload-prefix")
FRACTIONS = (0.25, 0.6)  # of the way from `least_budget` to the store-all peak
BANDWIDTH = 1000.0  # bytes/s: transfer times in whole ticks with integer chain times
TOLERANCE = 1e-6  # relative: two makespans "agree" within it


def instance(L: int, seed: int) -> OffloadInstance:
    """The chain of cell (L, seed): `random_offload` with integer times and a `BANDWIDTH` link."""
    return random_offload(L, seed, bandwidth=BANDWIDTH, integer_times=True)


def least_budget(inst: OffloadInstance) -> int:
    """The least budget (bytes, exact sizes) the store-all-order model may meet: the input x[0] plus the memory
    every plan holds during some op (`cpsat.forced_memory`, the tapes that cannot travel held throughout). A
    necessary bound: below it both exact solvers answer ``infeasible`` at once."""
    chain = inst.chain
    fixed = {j for j in range(1, chain.length) if inst.transfer_time(int(chain.xbar[j])) <= 0}
    return int(chain.x[0]) + forced_memory(chain, int, fixed)[0]


def budgets(inst: OffloadInstance) -> list[int]:
    """The budgets of a chain (bytes): `FRACTIONS` of the way from `least_budget` to the store-all peak, rounded
    down, duplicates dropped (ascending)."""
    lo, hi = least_budget(inst), reference_peak(inst)
    return sorted({int(lo + f * (hi - lo)) for f in FRACTIONS})


def run_one(inst: OffloadInstance, L: int, seed: int, budget: int, solver: str, time_limit: float) -> dict[str, Any]:
    """One row: `solver` on `inst` at `budget` (exact sizes); the exact ones with one worker and `time_limit` s.
    For an exact solver ``status`` and ``makespan`` are its model's own: where the exact layer's referee returned
    a fast solver's faster schedule (pofo recomputes, outside the scope), ``details.model_status`` and
    ``model_objective``. ``bound`` is the model's (``details.model_bound``), empty for the fast solvers;
    ``time_s`` wall clock (for the exact solvers, their warm start from the fast solvers included)."""
    opts: dict[str, Any] = {"slots": 0}
    if solver in EXACT:
        opts.update(time_limit=time_limit, workers=1)
    t0 = time.perf_counter()
    res = registry.solve("offload", inst, solver, budget, **opts)
    wall = time.perf_counter() - t0
    details = res.details or {}
    status, makespan = res.status, res.objective
    if solver in EXACT and "model_status" in details:  # the referee returned a faster fast solver's schedule
        status, makespan = details["model_status"], details.get("model_objective")
    return {"L": L, "seed": seed, "budget": budget, "solver": solver, "status": status,
            "makespan": makespan, "bound": details.get("model_bound") if solver in EXACT else None,
            "time_s": round(wall, 3), "load_1min": round(os.getloadavg()[0], 2)}


def line(row: dict[str, Any]) -> str:
    """The printed line of a row (a row read back from the partial file prints as when it ran)."""
    return " ".join(f"{k}={row.get(k)}" for k in FIELDS)


def _number(value: Any) -> float | None:
    """`value` as a float, None when empty (None, "", NaN)."""
    if value is None or value == "":
        return None
    v = float(value)
    return None if v != v else v


def disagreements(rows: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(how many cells both exact solvers proved optimal, those among them whose makespans differ by more than
    `TOLERANCE`, as "L=.. seed=.. budget=.." texts)."""
    cells: dict[tuple[str, str, str], dict[str, float | None]] = {}
    for r in rows:
        if r["solver"] in EXACT and r["status"] == OPTIMAL:
            cells.setdefault((str(r["L"]), str(r["seed"]), str(r["budget"])), {})[r["solver"]] = _number(r["makespan"])
    both = [(k, v) for k, v in cells.items() if len(v) == 2]
    bad = [f"L={k[0]} seed={k[1]} budget={k[2]}" for k, v in both
           if v["cpsat"] is None or v["milp"] is None
           or abs(v["cpsat"] - v["milp"]) > TOLERANCE * max(1.0, abs(v["cpsat"]))]
    return len(both), bad


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The summary lines: per exact solver its optimal count and median / largest time (s); then the agreement."""
    out = []
    for s in EXACT:
        mine = [r for r in rows if r["solver"] == s]
        times = [float(r["time_s"]) for r in mine]
        if times:
            optimal = sum(1 for r in mine if r["status"] == OPTIMAL)
            out.append(f"{s:6}: {optimal} of {len(mine)} optimal; time median {statistics.median(times):.2f} s, "
                       f"max {max(times):.2f} s")
    both, bad = disagreements(rows)
    out.append(f"optima: {both} cells proven by both, " + (f"{len(bad)} differ: {'; '.join(bad)}" if bad
                                                           else "all agree"))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the grid, print it, write --out; exit 0 (2 on a bad argument, 130 on Ctrl-C: the CSV as it was, the
    finished cells kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=positive(int), nargs="+", default=[4, 6, 8, 10])
    ap.add_argument("--seeds", type=positive(int), default=2, help="seeds 0..N-1 (default %(default)s)")
    ap.add_argument("--time-limit", type=positive(float), default=30.0,
                    help="seconds per exact solve (default %(default)s)")
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_offload_fixed_order.csv")
    args = ap.parse_args(argv)
    return guarded("bench_offload_fixed_order", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the grid run cell by cell (one cell: a chain and budget, every
    solver), the table and summary printed, the CSV written atomically."""
    check_out(args.out)
    cells = [(L, seed) for L in args.lengths for seed in range(args.seeds)]
    with resumable(args.out, FIELDS, settings_of(args), ("L", "seed", "budget"), bar="bench_offload_fixed_order",
                   total=len(cells) * len(FRACTIONS), line=line) as table:
        for L, seed in cells:
            inst = instance(L, seed)
            for budget in budgets(inst):
                if table.kept(L, seed, budget) is not None:
                    continue
                rows = [run_one(inst, L, seed, budget, s, args.time_limit) for s in (*EXACT, *FAST)]
                table.add(*rows)
                for row in rows:
                    print(line(row), flush=True)
        for text in summary(table.rows):
            print(text)
        write_csv(table.rows, args.out, FIELDS)
    print(f"wrote {args.out} ({len(table.rows)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
