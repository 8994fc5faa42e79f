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

A Ctrl-C while the job's modules are imported (pandas, matplotlib, the sweep: about a second) is the
same one line, ``main_job: interrupted``, and exit 130, not a traceback: at its top this module imports
only modules that Python's start-up or the ``memsched`` package have loaded (sys, pathlib, typing) and the
small `interrupts`, the others inside `main`'s handling of interrupts (`interrupts.script_main`).
What comes before this module runs is not covered: Python's start-up and the import of the ``memsched``
package.

``--output`` is checked before any run: an empty value, a path under a file, a folder that cannot be
written is one line naming ``--output`` and exit 2. ``summary.csv`` is written atomically (a temporary
file beside it, then renamed): a stop or a full disk leaves the old table or the new one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memsched.experiments.interrupts import INTERRUPTED, script_main

if TYPE_CHECKING:
    import argparse

    import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "main"


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Overhead (%) of each solver (columns) per instance and budget (rows); '-' where the
    solver found no schedule within the budget."""
    from memsched.experiments.figures import budget_percent

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
    errored, 2 on bad input (an unknown option, a bad --workers, a --config that is not a sweep file, an --output
    that is empty or no folder that can be written: one line on stderr, no traceback, before any run), 130 when
    stopped by Ctrl-C or SIGTERM (one line on stderr says how to resume, no traceback), also while the modules
    it needs are imported (one line, ``main_job: interrupted``)."""
    return script_main("main_job", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    """`main` with its modules imported here (see the module docstring): a Ctrl-C before the sweep starts
    leaves as `KeyboardInterrupt`."""
    import argparse

    from memsched.experiments.cli import terminate_as_interrupt
    from memsched.experiments.commands._checks import MAX_WORKERS, check_output_dir, count
    from memsched.experiments.script_args import ScriptParser
    from memsched.experiments.sweep import CONFIGS
    from memsched.experiments.sweep.run import SweepInterrupted
    from memsched.solvers.errors import InputError

    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(CONFIGS / "default.toml"), help="sweep file (default: %(default)s)")
    parser.add_argument("--output", default=str(RESULTS), help="folder for table and figure (default: %(default)s)")
    parser.add_argument("--workers", type=count(1, MAX_WORKERS), default=None,
                        help=f"local worker processes, 1..{MAX_WORKERS} (default: CPU count)")
    parser.add_argument("--resume", action="store_true", help="keep the rows of an earlier run (default: rerun all)")
    args = parser.parse_args(argv)
    step = ["the sweep"]
    try:
        check_output_dir(args.output, "--output")  # before the sweep, which would name it "output" (or run in ".")
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
        return INTERRUPTED
    except InputError as err:  # a --config that is not a sweep file, or other bad input the sweep reports
        print(f"main_job: error: {err}", file=sys.stderr)
        return 2


def render(figure_id: str, rows: pd.DataFrame, out: Path) -> tuple[list[Path], str | None]:
    """`figures.render` (its module imported on the first call, inside `main`'s handling of interrupts)."""
    from memsched.experiments.figures import render as draw

    return draw(figure_id, rows, out)


def _job(args: argparse.Namespace, step: list[str]) -> int:
    """`main` once the arguments are read; `step[0]` names what is being done (for the message of a stop)."""
    import time

    import pandas as pd
    from memsched.experiments.sweep import load_config, run_sweep
    from memsched.solvers.jsonio import write_atomic

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
    write_atomic(out / "summary.csv", lambda tmp: table.to_csv(tmp, float_format="%.4g"))
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
