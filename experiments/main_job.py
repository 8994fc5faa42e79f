"""The default end-to-end job (README, scripts/main.sh): every chain solver on the built-in examples.

Runs the sweep experiments/configs/default.toml (the example chains of solvers/data/examples
at several budgets, every chain solver that is importable here; each schedule replayed by the
simulator through `solvers.registry.solve`), then writes under results/main/:

- ``chain_solvers.csv`` — one row per run (parameters, status, makespan, bound, gap, peak,
  solve time, versions); ``chain_solvers.jsonl`` is the sweep's journal;
- ``summary.csv`` — makespan overhead (%) per instance and budget (rows) and solver (columns),
  also printed;
- ``main_overhead.png`` / ``.pdf`` — overhead versus budget, one panel per example.

A few minutes at most on 2 cores. Every run solves every cell again (results/main is regenerated,
also on a fresh clone, whose committed table ``memsched sweep default`` would take as done);
``--resume`` keeps the rows of an earlier (interrupted) run instead. Ctrl-C or SIGTERM stops the
job with exit 130: the finished rows are kept, and a line says to rerun with ``--resume``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
from memsched.experiments.cli import terminate_as_interrupt
from memsched.experiments.commands._checks import MAX_WORKERS, count
from memsched.experiments.figures import budget_percent, render
from memsched.experiments.script_args import ScriptParser
from memsched.experiments.sweep import CONFIGS, load_config, run_sweep
from memsched.experiments.sweep.run import SweepInterrupted
from memsched.solvers.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "main"


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Overhead (%) of each solver (columns) per instance and budget (rows); '-' where the
    solver found no schedule within the budget."""
    r = rows.assign(budget_pct=budget_percent(rows), overhead_pct=100 * rows["overhead"].astype(float))
    order = list(dict.fromkeys(r["solver_label"]))
    table = r.pivot_table(index=["instance", "size", "budget_pct"], columns="solver_label", values="overhead_pct",
                          aggfunc="first", sort=False)
    table = table.reindex(columns=[c for c in order if c in table.columns])
    table.index = table.index.set_names(["instance", "L", "budget %"])
    return table


#: what to run to resume the job after a stop: a plain rerun runs every cell again (results/main is regenerated)
RESUME_HINT = "rerun with --resume to keep them"


def main(argv: list[str] | None = None) -> int:
    """Run the default sweep, print the overhead table, write the CSVs and figure under --output; exit 0, 1 if a run
    errored, 2 on bad input (an unknown option, a bad --workers, a --config that is not a sweep file: one line on
    stderr, no traceback, before any run), 130 when stopped by Ctrl-C or SIGTERM (one line on stderr says how to
    resume, no traceback)."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(CONFIGS / "default.toml"), help="sweep file (default: %(default)s)")
    parser.add_argument("--output", default=str(RESULTS), help="folder for table and figure (default: %(default)s)")
    parser.add_argument("--workers", type=count(1, MAX_WORKERS), default=None,
                        help=f"local worker processes, 1..{MAX_WORKERS} (default: CPU count)")
    parser.add_argument("--resume", action="store_true", help="keep the rows of an earlier run (default: rerun all)")
    args = parser.parse_args(argv)
    step = ["the sweep"]
    try:
        with terminate_as_interrupt():
            return _job(args, step)
    except KeyboardInterrupt as stop:
        if isinstance(stop, SweepInterrupted):  # its one line is said: how many rows it kept, and RESUME_HINT
            pass
        elif step[0] == "the sweep":  # stopped before any cell ran
            print("main_job: interrupted", file=sys.stderr)
        else:
            print(f"main_job: interrupted while writing {step[0]}: every row is in {args.output}; "
                  f"rerun with --resume to write the rest without solving again", file=sys.stderr)
        return 130
    except InputError as err:  # a --config that is not a sweep file, or other bad input the sweep reports
        print(f"main_job: error: {err}", file=sys.stderr)
        return 2


def _job(args: argparse.Namespace, step: list[str]) -> int:
    """`main` once the arguments are read; `step[0]` names what is being done (for the message of a stop)."""
    start = time.perf_counter()
    config = load_config(args.config)
    out = Path(args.output)
    outcome = run_sweep(config, output=out, workers=args.workers, fresh=not args.resume, resume_hint=RESUME_HINT,
                        say=lambda line: print(f"main_job: {line}", file=sys.stderr))
    step[0] = "the summary and figure"
    for note in outcome.notes:
        print(f"note: {note}", file=sys.stderr)
    rows = pd.DataFrame(outcome.rows)
    table = summary_table(rows)
    table.to_csv(out / "summary.csv", float_format="%.4g")
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_columns", 20):
        print("makespan overhead (%) = makespan / (sum of forward and backward times) - 1; NaN: no schedule")
        print(table.to_string(float_format=lambda v: f"{v:.2f}"))
    figs, note = render("main", rows, out)
    if note:
        print(f"note: {note}")
    statuses = rows["status"].value_counts().to_dict()
    print(f"{outcome.total} runs ({outcome.ran} run now, {outcome.resumed} resumed), statuses {statuses}, "
          f"{outcome.errors} errors, in {time.perf_counter() - start:.1f} s")
    for path in [*outcome.paths, out / "summary.csv", *figs]:
        print(f"wrote {path}")
    return 1 if outcome.errors else 0


if __name__ == "__main__":
    sys.exit(main())
