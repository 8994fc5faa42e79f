"""Do the exact solvers keep their time limits? Every exact solver of every problem, on an
instance large enough to hit the limit, at time limits 0.1 / 1 / 10 s (``--quick``: 0.1 / 1 s).

The time limit is a wall-clock limit on the whole solve (fast solvers of the warm start, model
building, presolve, search, replay). A run *keeps* it when its wall time is at most
max(1.1 x limit, limit + 2 s). Each problem's fast solvers run once before timing and OR-Tools
is imported first, so one-time JIT compilation (numba) and imports are not charged to a solve.

    python -m memsched.experiments.bench_time_limits [--quick] [--limits 0.1 1 10] [--hog N] [--out CSV]

``--hog N`` runs N busy Python processes (``while 1: pass``) during the timed solves, to check
the limits under load (a wall-clock limit must hold there too; a CPU-time limit would not).

Prints a table and writes results/bench_time_limits.csv (one row per solver and limit: wall
time, allowed time, kept, status, objective, lower bound, seeded_by, hogs, 1-minute load).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from memsched.experiments.benchtable import (
    Resumable,
    check_out,
    guarded,
    positive,
    resumable,
    settings_of,
    write_frame,
)
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import registry

OUT = Path("results/bench_time_limits.csv")


def _chain(L: int, seed: int) -> Any:
    from memsched.solvers.chain.generate import random_chain

    return random_chain(L, seed)


def _graph() -> Any:
    from memsched.solvers.graph.generate import resnet

    return resnet((2, 2, 2, 2), name="resnet18-like")  # 189 nodes


def _large_graph(n: int) -> Any:
    from memsched.solvers.graph.generate import random_layered

    return random_layered(n, 0)  # Checkmate's model: 1.5 (n = 300) and 2.6 (n = 400) million nonzeros


def _join() -> Any:
    from memsched.solvers.join.generate import random_join

    return random_join([20, 20], 0)


def _join_tiny() -> Any:
    from memsched.solvers.join.generate import random_join

    return random_join([7, 7], 0)


def _offload(L: int) -> Any:
    from memsched.solvers.offload.generate import random_offload

    return random_offload(L, 2)  # a transfer of the mean tape takes about one mean compute op


def _pipeline() -> Any:
    from memsched.solvers.pipeline.generate import random_pipeline

    return random_pipeline(np.random.default_rng(0), 120)


def _dag_pipeline() -> Any:
    from memsched.solvers.pipeline.generate import parallel_branches

    return parallel_branches(4, 12)  # 28,563 ideals: the lattice alone takes seconds


#: (problem, solver, instance name, instance factory, budget as a fraction of the reference peak, options)
CASES: list[tuple[str, str, str, Callable[[], Any], float, dict[str, Any]]] = [
    ("chain", "milp", "random_chain(100)", lambda: _chain(100, 1), 0.3, {}),
    ("chain", "milp", "random_chain(100), portfolio", lambda: _chain(100, 1), 0.3, {"backend": "portfolio"}),
    ("chain", "cpsat", "random_chain(100)", lambda: _chain(100, 1), 0.3, {}),
    ("graph", "checkmate", "resnet18-like (189 nodes)", _graph, 0.6, {}),
    ("graph", "cpsat", "resnet18-like (189 nodes)", _graph, 0.6, {}),
    # presolve / first root LP that ignore the clock (bench_model_memory: 30 s past a 30 s limit)
    ("graph", "checkmate", "random_layered(400), scip", lambda: _large_graph(400), 0.7, {"backend": "scip"}),
    ("graph", "checkmate", "random_layered(300), highs", lambda: _large_graph(300), 0.7, {"backend": "highs"}),
    # emitting the model for the CBC program (seconds, in C++ and file writing) does not look at the clock either
    ("graph", "checkmate", "random_layered(300), cbc", lambda: _large_graph(300), 0.7, {"backend": "cbc"}),
    ("join", "cpsat", "random_join([20, 20])", _join, 0.4, {}),
    ("join", "milp", "random_join([20, 20])", _join, 0.4, {}),
    ("join", "exact", "random_join([7, 7])", _join_tiny, 0.5, {}),
    ("offload", "cpsat", "random_offload(60)", lambda: _offload(60), 0.5, {}),
    ("offload", "milp", "random_offload(60)", lambda: _offload(60), 0.5, {}),
    ("offload", "exact-combined", "random_offload(6)", lambda: _offload(6), 0.5, {}),
    ("offload", "offload-exact", "random_offload(20)", lambda: _offload(20), 0.5, {}),
    ("pipeline", "cpsat", "random_pipeline(120), 8 devices", _pipeline, 0.5, {"devices": 8}),
    ("pipeline", "milp", "random_pipeline(120), 8 devices", _pipeline, 0.5, {"devices": 8}),
    ("pipeline", "interleave-cpsat", "random_pipeline(120), 8 devices", _pipeline, 0.5, {"devices": 8}),
    ("pipeline", "dag-cpsat", "parallel_branches(4, 12), 4 devices", _dag_pipeline, 0.5,
     {"devices": 4, "max_states": 100_000}),
    ("pipeline", "dag-milp", "parallel_branches(4, 12), 4 devices", _dag_pipeline, 0.5,
     {"devices": 4, "max_states": 100_000}),
]


def allowed(limit: float) -> float:
    """The wall time a solve with this limit may take: max(1.1 x limit, limit + 2 s)."""
    return max(1.1 * limit, limit + 2.0)


def run(limits: list[float], only: str | None = None, hogs: int = 0,
        rows: list[dict[str, Any]] | None = None, table: Resumable | None = None) -> pd.DataFrame:
    """Run each case at each time limit (seconds); one row per solver and limit (status, objective, bound, wall s).
    `hogs` busy processes run during the timed solves (not during the warm-up). Each row is appended to
    `rows` (when given) as soon as it is measured, so a caller interrupted keeps the finished ones; with
    `table` (`benchtable.resumable`; then `rows` is its rows) the runs it holds already are not made again."""
    rows = table.rows if table is not None else [] if rows is None else rows
    for problem, solver, label, make, frac, opts in CASES:
        if only and only not in (problem, f"{problem}/{solver}"):
            continue
        if table is not None:
            kept = [limit for limit in limits if table.kept(problem, solver, label, limit) is not None]
            if len(kept) == len(limits):
                continue  # no warm-up for a case already done
        else:
            kept = []
        inst = make()
        desc = registry.get_problem(problem)
        budget = max(1, int(frac * desc.reference_peak(inst)))
        fast = registry.get_solver(problem, solver).fast_solvers
        import ortools.linear_solver.pywraplp  # noqa: F401  - warm-up: one-time imports are not part of a solve
        import ortools.sat.python.cp_model  # noqa: F401
        for name in fast:  # warm-up: JIT compilation is not part of a solve
            try:
                registry.solve(problem, inst, name, budget, **opts)
            except Exception:  # noqa: BLE001 - a fast solver that cannot run here is skipped by the layer too
                pass
        busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(hogs)]
        try:
            for limit in limits:
                if limit in kept:
                    continue
                start = time.perf_counter()
                res = registry.solve(problem, inst, solver, budget, time_limit=limit, **opts)
                wall = time.perf_counter() - start
                row = _row(problem, solver, label, budget, limit, wall, res, hogs)
                if table is not None:
                    table.add(row)
                else:
                    rows.append(row)
        finally:
            for proc in busy:
                proc.kill()
                proc.wait()
    return pd.DataFrame(rows)


def only_choices() -> list[str]:
    """The values ``--only`` accepts: every problem of `CASES`, and every problem/solver."""
    return sorted({p for p, *_ in CASES} | {f"{p}/{s}" for p, s, *_ in CASES})


def _row(problem: str, solver: str, label: str, budget: int, limit: float, wall: float, res: Any,
         hogs: int) -> dict[str, Any]:
    """One CSV row (and its printed line, `_line`) for a timed solve."""
    kept = wall <= allowed(limit)
    row = {"problem": problem, "solver": solver, "instance": label, "budget": budget,
           "time_limit_s": limit, "wall_s": round(wall, 3), "allowed_s": round(allowed(limit), 3),
           "kept": kept, "status": res.status, "objective": res.objective,
           "lower_bound": res.lower_bound, "seeded_by": res.seeded_by,
           "solution_from": res.details.get("solution_from", "model"), "hogs": hogs,
           "load_1min": round(os.getloadavg()[0], 1)}
    print(_line(row), flush=True)
    return row


def _line(row: dict[str, Any]) -> str:
    """The printed line of a timed solve's row (s), from the row alone (a row read back from a partial file
    prints as when it ran)."""
    return (f"{row['problem']:9s} {row['solver']:15s} limit {row['time_limit_s']:5.1f} s  wall {row['wall_s']:7.2f} s  "
            f"{'kept' if row['kept'] else 'OVERRAN'}  {row['status']}")


def main(argv: list[str] | None = None) -> int:
    """Check that solvers keep their time limits; print a table, write results/bench_time_limits.csv; exit 0 (2 on
    a bad argument, 130 on Ctrl-C: the CSV as it was, the finished rows kept beside it for a rerun to resume
    from)."""
    parser = ScriptParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="limits 0.1 and 1 s only")
    parser.add_argument("--limits", type=positive(float), nargs="+",
                        help="time limits in seconds, > 0 (default 0.1 1 10)")
    parser.add_argument("--only", help="one problem, or problem/solver")
    parser.add_argument("--hog", type=positive(int, zero=True), default=0, metavar="N",
                        help="N busy processes run during the timed solves (default 0)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.only is not None and args.only not in only_choices():
        parser.error(f"--only: {args.only!r} is none of {', '.join(only_choices())}")
    return guarded("bench_time_limits", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, the cases run, the table printed and written; on Ctrl-C the
    rows finished so far are kept beside --out and a rerun resumes from them (`benchtable.resumable`)."""
    check_out(args.out)
    limits = args.limits or ([0.1, 1.0] if args.quick else [0.1, 1.0, 10.0])
    key = ("problem", "solver", "instance", "time_limit_s")
    with resumable(args.out, None, {**settings_of(args), "limits": limits}, key, line=_line) as table:
        df = run(limits, args.only, args.hog, table=table)
        print()
        print(df.drop(columns=["budget"]).to_string(index=False))
        write_frame(df, args.out)
    print(f"\n{int(df['kept'].sum())}/{len(df)} runs kept max(1.1 x limit, limit + 2 s); wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
