"""`memsched sweep CONFIG`: run (or resume) an experiment grid and write its table under results/."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from memsched.solvers.errors import InputError

from ._checks import MAX_WORKERS, check_not_empty, count


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` subcommand (run an instances x budgets x solvers grid into results/)."""
    p = sub.add_parser("sweep", help="run an experiment grid (instances x budgets x solvers) into results/",
                       description="Run the grid of a sweep file (TOML or YAML; see experiments/sweep/__init__.py), "
                                   "one row per run, resuming after an interruption.")
    p.add_argument("config", help="sweep file, or the name of one in experiments/configs (e.g. default)")
    p.add_argument("--output", metavar="DIR", help="folder for the table and journal (default: the file's "
                                                   "'output', else results/<name>)")
    p.add_argument("--workers", type=count(1, MAX_WORKERS), metavar="N",
                   help="local worker processes (default: the file's 'workers', else the CPU count; cells always "
                        f"run in workers, so that Ctrl-C reaches them; at most {MAX_WORKERS})")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run on a Dask cluster (e.g. tcp://host:8786; reached "
                                                          "before anything is done, so that --fresh discards "
                                                          "nothing when it cannot be)")
    p.add_argument("--fresh", action="store_true", help="discard the journal of earlier runs and run every cell")
    p.add_argument("--reprofile", action="store_true",
                   help="build generated and profiled instances again instead of reading them from "
                        "<output>/instances/ (rows of the old profile leave the table)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="print the grid's cells and exit")
    p.add_argument("--verify", action="store_true",
                   help="re-solve the table's rows from the stored instances and report every row whose status, "
                        "objective or min_budget is not what the code computes now (writes nothing; exit 1 if any)")
    p.add_argument("--solvers", nargs="+", metavar="LABEL", help="with --verify: only these solver labels")
    p.add_argument("--update", action="store_true",
                   help="with --verify: replace each row that differs by the recomputed one and rewrite the table")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run (or resume) the sweep grid, writing its journal and table; with --list print each task as done/todo; exit
    0, 2 on bad input, 130 (`KeyboardInterrupt`) when interrupted, also while starting (`startup_interrupts`)."""
    from memsched.experiments.sweep.run import startup_interrupts

    with startup_interrupts() as interrupted:
        try:
            code = _main(args)
        except Exception as err:
            if interrupted():  # a Ctrl-C that an import wrapped (ImportError, RuntimeError): report it as one
                raise KeyboardInterrupt from err
            raise
        if interrupted() and code != 130:  # a Ctrl-C that was swallowed on the way (130: answered, `_run`)
            raise KeyboardInterrupt
        return code


def _main(args: argparse.Namespace) -> int:
    """`main` with Ctrl-C noted."""
    from memsched.experiments.sweep import find_config, load_config
    from memsched.experiments.sweep.run import check_output, scheduler_client, unmade_on_error

    check_not_empty(args.config, "config", "a sweep file or the name of one in experiments/configs")  # not "."
    if args.output == "":  # not the default folder: an empty path is bad input, before any work
        raise InputError("is empty, expected a folder name", field="--output")
    config = load_config(find_config(args.config))
    for flag in ("solvers", "update"):
        if getattr(args, flag) and not args.verify:
            raise InputError("only with --verify", field=f"--{flag}")
    if args.list and args.verify:  # two modes: --list would be silently dropped
        raise InputError("not with --verify (one mode at a time: --list prints the cells, --verify re-solves "
                         "the rows)", field="--list")
    _check_run_only(args)
    _check_workers(args)
    out_field = "--output" if args.output else "output"
    if args.verify or args.list:  # they only read the folder, unless --update rewrites its table
        check_output(config.output_dir(args.output), out_field, create=False, writable=args.update)
        return _verify(config, args) if args.verify else _list(config, args)
    out = config.output_dir(args.output)
    # the scheduler is reached (or refused) before anything is made or discarded; a folder made here
    # is removed again when the sweep stops on bad input (an instance that cannot be read) before writing in it
    with scheduler_client(args.scheduler) as client, unmade_on_error(out):
        check_output(out, out_field, create=True)
        return _run(config, args, client)


#: options that only a run of the sweep uses, with the modes that run nothing (`_check_run_only`)
_RUN_ONLY = {"fresh": ("list", "verify"), "scheduler": ("list", "verify"), "workers": ("verify",),
             "reprofile": ("verify",)}


def _check_run_only(args: argparse.Namespace) -> None:
    """Options of a run (`_RUN_ONLY`) are refused with ``--list`` and ``--verify``, which run no
    cell, rather than ignored (``--list --fresh`` listed the journal's cells as done, as if the
    journal were not to be discarded): `InputError` naming the option, exit 2, as ``--update``
    without ``--verify``. ``--list`` keeps ``--reprofile`` (it lists the cells of the instances
    built again) and accepts ``--workers`` (checked, unused)."""
    for option, modes in _RUN_ONLY.items():
        value = getattr(args, option, None)
        if value is None or value is False:
            continue
        for mode in modes:
            if getattr(args, mode):
                raise InputError(f"not with --{mode} (it runs no cell); only when the sweep runs",
                                 field=f"--{option}")


def _check_workers(args: argparse.Namespace) -> None:
    """``--workers`` (local worker processes) is refused with ``--scheduler``, whose cells run on the
    Dask cluster's workers, rather than ignored: `InputError` naming it, exit 2, before the
    scheduler is reached."""
    if args.workers is not None and args.scheduler is not None:
        raise InputError("not with --scheduler (cells run on the Dask cluster's workers; --workers sets local "
                         "worker processes)", field="--workers")


def _list(config: Any, args: argparse.Namespace) -> int:
    """``--list``: each cell of the grid as done or todo, then the notes; exit 0."""
    from memsched.experiments.sweep import InstanceStore, build_tasks
    from memsched.experiments.sweep.verify import rekeyed, stored_rows, table_stale

    notes: list[str] = []
    out = config.output_dir(args.output)
    tasks = build_tasks(config, notes=notes,
                        store=InstanceStore(out / "instances", readonly=True, rebuild=args.reprofile))
    # what a run resumes: the journal's rows, else the table's (a fresh clone), older keys included
    done = rekeyed(stored_rows(out, config.name), tasks, strict=True)
    for t in tasks:
        mark = "done" if t.key in done else "todo"
        print(f"{mark}  {t.loaded.label:<28} {t.budget_spec:>10} {t.solver.label:<16} repeat={t.repeat}")
    stale = table_stale(out, config.name, tasks)  # "done" is the journal's word: say when the table lags it
    for n in notes + ([stale] if stale else []):
        print(f"note: {n}")
    return 0


def _run(config: Any, args: argparse.Namespace, client: Any) -> int:
    """Run the grid's cells not yet journaled (on the Dask cluster of `client`, else in local
    workers), then print the summary (its errors: the table's ``error`` rows, resumed ones
    included) and the files written; exit 0. Stopped while it runs (Ctrl-C, SIGTERM, SIGHUP):
    its one line, ``memsched sweep: interrupted: N/M rows kept in JOURNAL; rerun to resume``,
    exit 130 (a stop before the cells run goes up as `KeyboardInterrupt`: ``memsched sweep:
    interrupted``)."""
    from memsched.experiments.sweep import run_sweep

    said: list[str] = []

    def say(line: str) -> None:  # the sweep's line on a stop, as the command's own
        said.append(line)
        print(f"memsched sweep: {line}", file=sys.stderr)

    start = time.perf_counter()
    try:
        outcome = run_sweep(config, output=args.output, workers=args.workers, scheduler=client,
                            progress=not args.no_progress, fresh=args.fresh, reprofile=args.reprofile, say=say)
    except KeyboardInterrupt:
        if said:  # answered (also when a second signal came after the line): no second line
            return 130
        raise
    for n in outcome.notes:
        print(f"note: {n}", file=sys.stderr)
    took = time.perf_counter() - start
    errors = outcome.error_rows
    print(f"{config.name}: {outcome.total} runs ({outcome.resumed} resumed from the journal, {outcome.ran} run now, "
          f"{errors} error{'' if errors == 1 else 's'} in the table) in {took:.1f} s")
    for path in outcome.paths:
        print(f"wrote {path}")
    return 0


def _verify(config: Any, args: argparse.Namespace) -> int:
    """``--verify``: one line per row that is not ``same``, then the counts, then whether the table
    on disk holds the journal's rows (`table_stale`); exit 1 when a row differs, errs or is
    missing, or the table is stale (``--update`` rewrites it)."""
    from memsched.experiments.sweep import InstanceStore, build_tasks, table_path
    from memsched.experiments.sweep.verify import summary, table_stale, update_stale, verify_sweep

    checks = verify_sweep(config, output=args.output, solvers=args.solvers,
                          progress=not args.no_progress)
    out = config.output_dir(args.output)
    stale = table_stale(out, config.name, build_tasks(config, store=InstanceStore(out / "instances", readonly=True)))
    for c in checks:
        if c.verdict != "same":
            print(c.line())
    counts = summary(checks)
    print(", ".join(f"{n} {v}" for v, n in counts.items()) + f" (of {len(checks)} rows)")
    if args.update:
        replaced = update_stale(config, checks, output=args.output)
        print(f"replaced {replaced} rows by the recomputed ones; redraw the figure (memsched figures)")
        counts["differs"] = 0
        if stale:
            print(f"rewrote the table {table_path(out, config.name)} from the journal (it was stale)")
            stale = None
    elif stale:
        print(stale)
    return 1 if counts["differs"] or counts["error"] or counts["missing"] or stale else 0
