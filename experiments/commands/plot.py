"""`memsched plot FILE SCHEDULE.json [SCHEDULE.json ...] -o FIG [--budget B]`: draw schedules.

One schedule: memory over time (the simulator's, budget and peak marked) above the
operations. Several (or ``--compare``): stacked on the same time and memory scales. The
figure format comes from the extension of FIG (.png, .pdf, .svg). A schedule that breaks a
rule is drawn up to the failing operation, marked; the command still writes the figure and
says so on stderr (exit 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError

from ._checks import check_outputs, count
from ._common import add_link_arguments, budget_for
from .simulate import load_for_schedule, read_schedule_json

#: the lowest resolution accepted: below, the smallest text of the figure is under one pixel and
#: the font renderer fails (dpi 5 did, "invalid ppem value")
MIN_DPI = 20


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plot`` subcommand (memory over time and operations of schedules)."""
    p = sub.add_parser("plot", help="draw a schedule: memory over time and the operations (PNG, PDF, SVG)")
    p.add_argument("file", help="instance file")
    p.add_argument("schedules", nargs="+", metavar="SCHEDULE.json",
                   help="schedule JSON (or `memsched solve --json` output); several are stacked for comparison")
    p.add_argument("-o", "--output", required=True, metavar="FIG", help="figure file: .png, .pdf or .svg")
    p.add_argument("--budget", help="draw this budget and check against it: a number in the file's memory unit "
                                    '(bytes by default: "1500000000"), a size ("1.5GB", "800MiB") or "60%%"')
    p.add_argument("--compare", action="store_true", help="comparison layout even for one schedule")
    p.add_argument("--label", action="append", metavar="NAME",
                   help="label of each schedule in order (default: the solver named in the file with the model its "
                        'answer is optimal in, "rotor (persistent)", else the file name)')
    p.add_argument("--title", help="figure title")
    p.add_argument("--dpi", type=count(MIN_DPI, 1200), default=150, help="resolution of PNG output (default 150)")
    add_link_arguments(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Replay the schedules and draw them to the output file; exit 0, 2 on bad input."""
    from memsched.experiments.plotting import (
        check_suffix,
        plot_comparison,
        plot_schedule,
        save_figure,
        schedule_from_json,
    )
    from memsched.experiments.plotting.timeline import timeline_for

    # not empty, not an input (FILE, a SCHEDULE.json): writing the figure would destroy it
    check_outputs([("--output", args.output)], [("FILE", args.file), *(("SCHEDULE", p) for p in args.schedules)])
    check_suffix(args.output, field="--output")
    if args.label and len(args.label) != len(args.schedules):
        raise InputError(f"{len(args.label)} labels for {len(args.schedules)} schedules", field="--label")
    raw = [(path, read_schedule_json(path)) for path in args.schedules]
    problem, instance = load_for_schedule(args.file, raw[0][1], args.bandwidth, args.latency)
    if problem == "pipeline":  # on the machine the (first) partition records, as `memsched simulate` replays it
        from .simulate import with_partition_machine

        instance = with_partition_machine(instance, raw[0][1], argparse.Namespace(
            schedule=raw[0][0], weight_factor=None, bandwidth=args.bandwidth, latency=args.latency))
    budget = budget_for(problem, instance, args.budget) if args.budget is not None else None  # "": refused
    schedules: dict[str, Any] = {}
    for k, (path, data) in enumerate(raw):
        label = args.label[k] if args.label else _label(path, data)
        while label in schedules:
            label += "'"
        schedules[label] = schedule_from_json(problem, data, instance, path=path)
        if problem == "pipeline":
            _check_drawable_partition(instance, schedules[label], budget, path)
    if len(schedules) == 1 and not args.compare:
        fig = plot_schedule(problem, instance, next(iter(schedules.values())), budget=budget, title=args.title)
    else:
        fig = plot_comparison(problem, instance, schedules, budget=budget, title=args.title)
    save_figure(fig, args.output, dpi=args.dpi)
    for label, schedule in schedules.items():
        failure = timeline_for(problem, instance, schedule, budget).failure
        if failure is not None:
            print(f"memsched plot: note: {label}: invalid schedule, drawn up to the violation: {failure.message}",
                  file=sys.stderr)
    print(args.output)
    return 0


def _check_drawable_partition(instance: Any, partition: Any, budget: int | None, path: str) -> None:
    """The pipeline timeline of `partition` can be drawn; else its `InputError` (a partition of another
    pipeline, a replicated stage) re-raised naming the schedule file `path`, as `memsched simulate` does."""
    from memsched.experiments.plotting.timeline import timeline_for

    try:
        timeline_for("pipeline", instance, partition, budget)
    except InputError as err:
        if err.path is not None:
            raise
        raise InputError(err.message, path=path, field=err.field) from None


def _label(path: str, data: Any) -> str:
    """The default label of schedule file `path` holding `data`: the solver the file names, with the model
    its answer is optimal in (`solver_text`: "rotor (persistent)"), else the file's name without extension."""
    if isinstance(data, dict) and isinstance(data.get("solver"), str):
        return solver_text(data["solver"], data)
    return Path(path).stem


def solver_text(solver: str, answer: dict[str, Any]) -> str:
    """`solver` as figures name it: with the restricted model its answer is optimal in, as the figures'
    legends word it (`experiments.plotting.labels.model_labels`: "rotor (persistent)", "cpsat (phase
    model)", "pofo (persistent, offloaded checkpoints)"), read from `answer`'s ``status`` and ``scope``
    (and ``skipped``, ``timed_out``: a class-optimal answer cut short names no model), as ``memsched
    solve --json`` writes them; `solver` itself for an answer that claims no model (a heuristic's, a
    ``feasible`` one, a plain schedule file without ``status`` or ``scope``)."""
    import pandas as pd
    from memsched.experiments.plotting.labels import model_labels

    status, scope = answer.get("status"), answer.get("scope")
    if not isinstance(status, str) or not isinstance(scope, str):
        return solver
    row = {"solver": solver, "status": status, "scope": scope,
           "details": {"skipped": answer.get("skipped")}, "timed_out": answer.get("timed_out") is True}
    return model_labels(pd.DataFrame([row])).get(solver, solver)
