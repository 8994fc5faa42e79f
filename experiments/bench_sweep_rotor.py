"""A many-budget rotor sweep with one shared DP table against one DP per budget.

The sweep: one random chain (`solvers.chain.generate.random_chain(L, seed=0)`), `k` budgets
evenly spread over 30%..97% of its store-all peak, the rotor DP at 500 slots, run in this
process (`run_sweep(..., workers=1, isolate=False)`) twice: with ``shared_table = true`` (one
table, that of the largest budget, read at every budget; each schedule still replayed by the
simulator) and without (one DP per budget). Reference: one `solve_rotor` at the largest budget.
Before any timing, `solve_rotor` runs once and each variant sweeps two budgets (the smallest and
the largest) untimed, so that neither timed sweep pays a one-time start-up (numba's kernel loaded,
`run_sweep`'s imports and first-call set-up: about 1.5 s, which the first timed sweep paid alone
before).

Prints a table and writes ``results/bench_sweep_rotor.csv`` (wall-clock seconds; also the
largest relative makespan difference shared vs per-budget, which comes from the coarser slots
of the smaller budgets). A progress bar on stderr counts the steps. Its rows are timed against
each other (``x_one_dp``), so a Ctrl-C (exit 130, a run takes seconds) keeps nothing: the CSV stays
as it was, and it is written atomically at the end.

    python -m memsched.experiments.bench_sweep_rotor [--length 200] [--budgets 20] [--slots 500]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import (
    check_out,
    guarded,
    positive,
    print_and_write_frame,
    progress,
)
from memsched.experiments.script_args import ScriptParser

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ["case", "L", "budgets", "slots", "seconds", "x_one_dp", "max_rel_makespan_diff"]


def sweep_file(folder: Path, chain_file: Path, fractions: list[float], slots: int, shared: bool) -> Path:
    """Write the sweep TOML for rotor on `chain_file` at each budget fraction; shared or per-budget DP. Returns its
    path."""
    budgets = ", ".join(f'"{100 * f:.4g}%"' for f in fractions)
    path = folder / f"rotor_{'shared' if shared else 'per_budget'}.toml"
    path.write_text(f"""name = "bench_rotor_{'shared' if shared else 'per_budget'}"
budgets = [{budgets}]
[[instances]]
file = "{chain_file}"
[[solvers]]
name = "rotor"
slots = {slots}
shared_table = {str(shared).lower()}
""")
    return path


def _sweep(cfg: Path, output: Path) -> Any:
    """`run_sweep` of `cfg` into `output`, in this process, its stderr held back and passed on after it, less
    its line on Ctrl-C (which names its journal, in the scratch folder removed after: `main` says what was
    kept). Returns the sweep's outcome."""
    from memsched.experiments.sweep import run_sweep

    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            return run_sweep(cfg, output=output, workers=1, progress=False, isolate=False)
    finally:
        sys.stderr.write("".join(line for line in held.getvalue().splitlines(keepends=True)
                                 if not line.startswith("interrupted:")))


def main(argv: list[str] | None = None) -> int:
    """Time a rotor sweep (shared vs per-budget DP); print a table, write results/bench_sweep_rotor.csv; exit 0
    (2 on a bad argument, 130 on Ctrl-C: nothing kept, the CSV as it was)."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=positive(int), default=200, help="stages L (default %(default)s)")
    parser.add_argument("--budgets", type=positive(int), default=20, help="budgets k (default %(default)s)")
    parser.add_argument("--slots", type=positive(int), default=500, help="memory slots (default %(default)s)")
    parser.add_argument("--output", default=str(ROOT / "results" / "bench_sweep_rotor.csv"))
    args = parser.parse_args(argv)
    return guarded("bench_sweep_rotor", lambda: _main(args),
                   interrupted=f"interrupted: nothing kept; {args.output} is unchanged")


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --output checked, the sweeps timed in a scratch folder (removed after), the
    table printed and written atomically; on Ctrl-C nothing is written (the rows are timed against each
    other: a part of them is no table)."""
    check_out(args.output, "--output")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sweep-rotor-") as work, \
            progress(desc="bench_sweep_rotor", total=5, unit="step") as bar:
        _measure(args, Path(work), rows, bar.update)

    import pandas as pd

    frame = pd.DataFrame(rows)
    print_and_write_frame(frame, args.output, lambda v: f"{v:.4g}")
    return 0


def _measure(args: argparse.Namespace, work: Path, rows: list[dict[str, Any]],
             step: Callable[[], object] = lambda: None) -> None:
    """Append to `rows` the reference solve's row and each sweep's (shared table, one DP per budget; wall
    seconds, each after an untimed warm-up of both), with the sweeps' files under `work`; `step()` after
    each of the 5 steps (the reference, 2 warm-ups, 2 sweeps)."""
    from memsched.solvers.chain.dp import solve_rotor
    from memsched.solvers.chain.generate import random_chain
    from memsched.solvers.registry import get_problem

    chain = random_chain(args.length, seed=0)
    peak = get_problem("chain").reference_peak(chain)
    k = args.budgets
    fractions = [0.30 + (0.97 - 0.30) * i / (k - 1) for i in range(k)] if k > 1 else [0.97]
    chain_file = work / "chain.json"
    chain.save(chain_file)
    solve_rotor(chain, int(peak * fractions[-1]), slots=args.slots)  # warm-up: numba's compiled kernel loaded
    t0 = time.perf_counter()
    solve_rotor(chain, int(peak * fractions[-1]), slots=args.slots)
    one = time.perf_counter() - t0
    rows.append({"case": "one solve_rotor (largest budget)", "L": args.length, "budgets": 1, "slots": args.slots,
                 "seconds": one, "x_one_dp": 1.0, "max_rel_makespan_diff": None})
    step()
    warm = work / "warmup"
    warm.mkdir()
    for shared in (True, False):  # untimed: run_sweep's one-time start-up is paid here, by neither timed sweep
        cfg = sweep_file(warm, chain_file, [fractions[0], fractions[-1]], args.slots, shared)
        _sweep(cfg, warm / cfg.stem)
        step()
    objectives = {}
    for shared in (True, False):
        cfg = sweep_file(work, chain_file, fractions, args.slots, shared)
        t0 = time.perf_counter()
        outcome = _sweep(cfg, work / cfg.stem)
        took = time.perf_counter() - t0
        objectives[shared] = [r["objective"] for r in outcome.rows]
        rows.append({"case": f"sweep, {'one shared table' if shared else 'one DP per budget'}", "L": args.length,
                     "budgets": k, "slots": args.slots, "seconds": took, "x_one_dp": took / one,
                     "max_rel_makespan_diff": None})
        step()
    diffs = [abs(a - b) / b for a, b in zip(objectives[True], objectives[False]) if a is not None and b]
    rows[1]["max_rel_makespan_diff"] = max(diffs) if diffs else None


if __name__ == "__main__":
    sys.exit(main())
