"""`memsched solve FILE --budget B [--solver NAME]`: the best schedule a solver finds."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.jsonio import write_text_atomic
from memsched.solvers.result import INFEASIBLE, TIMEOUT, SolveResult
from memsched.solvers.units import format_size, memory_unit, time_unit

from ._checks import check_options, check_outputs, check_work
from ._common import (
    add_link_arguments,
    add_progress_argument,
    add_solver_arguments,
    budget_for,
    load_problem,
    parse_options,
    print_json,
    run_solver,
    stopped_by_user,
    time_text,
)
from ._infeasible import NOT_APPLICABLE, find_min_budget


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``solve`` subcommand (schedule an instance under a memory budget)."""
    p = sub.add_parser("solve", help="find a schedule for an instance under a memory budget")
    p.add_argument("file", help="instance file (chain JSON, node-link graph JSON, join JSON)")
    p.add_argument("--budget", required=True,
                   help="a number in the file's memory unit (bytes by default: \"1500000000\"), a size "
                        '("1.5GB", "800MiB") or "60%%"')
    add_solver_arguments(p)
    add_link_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-o", "--output", metavar="SCHEDULE.json", help="also write the schedule to this file")
    p.add_argument("--plot", metavar="FIG", help="also draw the schedule (PNG, PDF or SVG by extension)")
    add_progress_argument(p)
    p.set_defaults(func=main)


def default_solver(problem: str) -> str:
    """The problem's default solver when it is available here, else the first available one."""
    names = [n for _, n, _ in registry.solver_table(problem)]
    preferred = registry.get_problem(problem).default_solver
    if preferred in names:
        return preferred
    if not names:
        raise InputError(f"no solver is available for {problem}")
    return names[0]


def main(args: argparse.Namespace) -> int:
    """Run the solver, replay its schedule and print the result; exit 0, 1 infeasible, 2 bad input."""
    # before a long solve, not after: writable, not the instance, not one file for both
    check_outputs([("--output", args.output), ("--plot", args.plot)], [("FILE", args.file)])
    if args.plot:
        from memsched.experiments.plotting import check_suffix

        check_suffix(args.plot, field="--plot")
    if args.solver is not None and not args.solver.strip():
        raise InputError("is empty, expected a solver name (memsched solvers lists them)", field="--solver")
    try:
        problem, instance, budget, name, options, result = _solve(args)
    except KeyboardInterrupt:  # before any answer (loading, a fast solver, a warm start): nothing is written
        _note_unchanged(args, "interrupted before a schedule was found")
        raise
    # a Ctrl-C after the solve (the smallest-budget search, the figure) keeps the answer: printed, then exit 130
    cut_short: list[str] = []
    if not result.details.get("interrupted") and find_min_budget(
            problem, instance, result, {"slots": args.slots, "time_limit": args.time_limit, **options}):
        cut_short.append("the search for the smallest feasible budget")
    if result.schedule is not None:  # the figure first: one that fails (exit 2) leaves no -o written
        if args.plot and not _draw(args, problem, instance, result, budget, name):
            cut_short.append(f"drawing {args.plot}")
        if args.output:
            write_text_atomic(args.output, json.dumps(result.schedule.to_json()) + "\n")
    if args.json:
        print_json(result.to_json(objective_key=registry.get_problem(problem).objective))
    else:
        _print_human(result, instance)
    interrupted = stopped_by_user("solve", result)  # Ctrl-C during an exact solve: what it had is printed above
    if cut_short and not interrupted:
        print(f"memsched solve: interrupted during {' and '.join(cut_short)}; the answer above is "
              f"{result.solver}'s ({result.status})", file=sys.stderr)
    if result.schedule is None:
        if not interrupted:
            print(f"memsched solve: {_why_none(result, instance)}", file=sys.stderr)
        _note_unchanged(args)
    if interrupted or cut_short:
        return 130
    return 1 if result.schedule is None else 0


def _solve(args: argparse.Namespace) -> tuple[str, Any, int, str, dict[str, Any], SolveResult]:
    """Load the instance, check the budget, solver and options, and run the solver: (problem, instance,
    budget, solver name, its options, result)."""
    problem, instance = load_problem(args.file, args.bandwidth, args.latency, args.solver)
    if problem == "pipeline":  # its solvers need a device count, which `partition` takes
        raise InputError("a pipeline is partitioned over devices: memsched partition FILE --devices P --memory M",
                         path=args.file)
    budget = budget_for(problem, instance, args.budget)
    name = args.solver or default_solver(problem)
    if args.slots < 0:
        raise InputError("must be >= 0", field="--slots")
    options = parse_options(args.option)
    check_options(problem, name, options)
    check_work(problem, name, instance, path=args.file)
    try:
        result = run_solver(problem, instance, name, budget, progress=args.progress, time_limit=args.time_limit,
                            options=options, slots=args.slots)
    except InputError as err:
        # a solver's refusal of the instance (the join DP's branch count: field ``branches``) names the file,
        # as the loader's errors do; an option's (``--slots``) stays as it is
        if err.path is not None or not err.field or err.field.startswith("-"):
            raise
        raise InputError(err.message, path=args.file, field=err.field) from None
    return problem, instance, budget, name, options, result


def _draw(args: argparse.Namespace, problem: str, instance: Any, result: SolveResult, budget: int, name: str) -> bool:
    """Draw `result`'s schedule into ``--plot`` (written atomically: the file is the old one or the new
    one, never half of one), titled with the instance and the solver with the model its answer is optimal
    in (`plot.solver_text`: "random10 — rotor (persistent)"); False when a Ctrl-C stopped the drawing: the
    file is left as it was, and a note says so (the schedule, written to ``--output`` after this, is still
    the answer)."""
    try:
        from memsched.experiments.plotting import plot_to_file

        from .plot import solver_text

        answer = {**result.details, "status": result.status, "scope": result.scope}
        plot_to_file(problem, instance, result.schedule, args.plot, budget=budget,
                     title=f"{getattr(instance, 'name', '')} — {solver_text(name, answer)}")
    except KeyboardInterrupt:
        print(f"memsched solve: note: {args.plot} (--plot) left unchanged: interrupted while drawing",
              file=sys.stderr)
        return False
    return True


def _note_unchanged(args: argparse.Namespace, why: str = "no schedule was found") -> None:
    """Without a schedule nothing is written: one line on stderr per output file given (--output,
    --plot) saying it was left unchanged (`why`), so that a file from an earlier run is not taken for
    this run's answer (it is not deleted either: it is the user's)."""
    for field, path in (("--output", args.output), ("--plot", args.plot)):
        if path is not None:
            print(f"memsched solve: note: {path} ({field}) left unchanged: {why}", file=sys.stderr)


def _why_none(result: SolveResult, instance: Any = None) -> str:
    """The line `memsched solve` prints when there is no schedule: for ``infeasible``, the smallest
    feasible budget (or why it is unknown); for a solver that refuses the instance's structure
    (``details["not_applicable"]``), the solver's own message; for ``timeout``, the solver's message
    when it gives one (a ``timeout`` is not always the clock's: a search limit such as the join
    `exact` solver's ``max_states``, a model too large to build), else "within the time limit"."""
    if result.status == INFEASIBLE and result.details.get(NOT_APPLICABLE):
        return f"infeasible: {result.solver} does not apply to this instance: {result.message}"
    if result.status == INFEASIBLE:
        unit = memory_unit(instance) or "bytes"
        msg = f"infeasible: {result.solver} finds no schedule within budget {result.budget}"
        if result.budget is not None:  # in the file's unit and in binary units, as the smallest budget
            msg += f" {unit} ({format_size(result.budget, instance)})"
        if result.min_budget is not None:
            need = result.min_budget
            msg += f"; smallest feasible budget: {need} {unit} ({format_size(need, instance)})"
        else:
            msg += f"; smallest feasible budget unknown: {result.details.get('min_budget_note', result.message)}"
        if result.details.get("class_only"):  # infeasible in the solver's class only: another may fit
            msg += f" ({result.details['class_only']})"
        return msg
    if result.status == TIMEOUT and result.message:  # why it stopped: a search limit, a model not built, the clock
        return f"timeout: {result.solver} found no schedule: {result.message}"
    if result.status == TIMEOUT:
        return f"timeout: {result.solver} found no schedule within the time limit"
    return f"{result.status}: no schedule ({result.message})"


def _print_human(result: SolveResult, instance: Any) -> None:
    """The text output: one "key  value" line each; the makespan (a pipeline's period) and its lower bound
    in the instance's time unit (`units.time_unit`), sizes in its memory unit and in binary units."""
    unit = time_unit(result.problem, instance)
    print(f"problem      {result.problem}  ({getattr(instance, 'name', '')})")
    print(f"solver       {result.solver}  [{result.scope}]" if result.scope else f"solver       {result.solver}")
    print(f"status       {result.status}")
    if result.budget is not None:
        print(f"budget       {result.budget} ({format_size(result.budget, instance)})")
    if result.schedule is not None:
        print(f"{'period' if result.problem == 'pipeline' else 'makespan':<12} {time_text(result.objective, unit)}")
        print(f"peak memory  {result.peak_memory} ({format_size(result.peak_memory, instance)})")
    if result.lower_bound is not None:
        print(f"lower bound  {time_text(result.lower_bound, unit)}"
              + (f"  (gap {100 * result.gap:.2f}%)" if result.gap is not None else ""))
    print(f"solve time   {result.solve_time_s:.3f} s")
    if result.schedule is not None and result.message:  # why the answer is what it is (without one: on stderr)
        print(f"note         {result.message}")
    if result.schedule is not None:
        text = str(result.schedule)
        print(f"schedule     {text if len(text) <= 400 else text[:400] + ' ...'}")


