"""`memsched simulate FILE SCHEDULE.json`: replay a schedule; makespan, peak and memory profile."""

from __future__ import annotations

import argparse
import sys

from memsched.solvers import registry
from memsched.solvers.jsonio import read_json
from memsched.solvers.units import format_bytes

from ._common import add_link_arguments, budget_for, load_problem, print_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` subcommand (replay a schedule: makespan and memory)."""
    p = sub.add_parser("simulate", help="replay a schedule and report its makespan and memory")
    p.add_argument("file", help="instance file")
    p.add_argument("schedule", help="schedule JSON (or the output of `memsched solve --json`)")
    p.add_argument("--budget", help="also check the schedule against this budget")
    add_link_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def read_schedule_json(path: str):
    """Read a schedule JSON file (or ``memsched solve --json`` output); InputError naming the file."""
    return read_json(path)


def _is_partition(data: object) -> bool:
    """True when `data` (or the schedule it holds) is a ``memsched.partition/1`` object."""
    if isinstance(data, dict) and isinstance(data.get("schedule"), dict):
        data = data["schedule"]
    return isinstance(data, dict) and str(data.get("format", "")).startswith("memsched.partition/")


def main(args: argparse.Namespace) -> int:
    """Replay the schedule and print its objective and peak memory (bytes); exit 0 if valid, 2 on bad input or a
    broken rule or --budget."""
    data = read_schedule_json(args.schedule)
    declared = data.get("problem") if isinstance(data, dict) else None
    if isinstance(data, dict) and isinstance(data.get("schedule"), dict):
        declared = data["schedule"].get("problem", declared)
    if declared is None and _is_partition(data):
        declared = "pipeline"  # a bare memsched.partition/1 object (`partition --json`'s "schedule", as plot reads)
    problem, instance = load_problem(args.file, args.bandwidth, args.latency, declared=declared)
    desc = registry.get_problem(problem)
    schedule = desc.schedule_from_json(data, instance, path=args.schedule)
    budget = budget_for(problem, instance, args.budget) if args.budget else None
    replay = desc.replay(instance, schedule, budget)
    out = {"problem": problem, "valid": replay.violation is None, "violation": replay.violation,
           desc.objective: replay.objective, "peak_memory": replay.peak_memory, "budget": budget,
           "memory_profile": desc.memory_profile(instance, schedule)}
    if args.json:
        print_json(out)
    else:
        print(f"problem      {problem}  ({getattr(instance, 'name', '')})")
        print(f"{'stages' if desc.objective == 'period' else 'operations':<12} {len(schedule)}")
        print(f"{desc.objective:<12} {replay.objective:.6g}")
        print(f"peak memory  {replay.peak_memory} ({format_bytes(replay.peak_memory)})")
        if budget is not None:
            print(f"budget       {budget} ({format_bytes(budget)})")
    if replay.violation is not None:
        print(f"memsched simulate: error: {args.schedule}: invalid schedule: {replay.violation}", file=sys.stderr)
        return 2
    return 0
