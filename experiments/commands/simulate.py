"""`memsched simulate FILE SCHEDULE.json`: replay a schedule; makespan, peak and memory profile."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.formats import detect_problem
from memsched.solvers.jsonio import check_holds_schedule, read_json
from memsched.solvers.pipeline.schedule import machine_field, machine_from_json, on_machine
from memsched.solvers.units import format_size, parse_bandwidth, time_unit

from ._checks import check_not_empty, cost, latency
from ._common import budget_for, load_problem, print_json, time_text


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` subcommand (replay a schedule: makespan and memory)."""
    p = sub.add_parser("simulate", help="replay a schedule and report its makespan and memory")
    p.add_argument("file", help="instance file")
    p.add_argument("schedule", help="schedule JSON (or the output of `memsched solve --json`)")
    p.add_argument("--budget", help="also check the schedule against this budget: a number in the file's memory "
                                    'unit (bytes by default: "1500000000"), a size ("1.5GB", "800MiB") or "60%%"')
    p.add_argument("--bandwidth", metavar="BW",
                   help='link bandwidth ("12GB/s"): a chain file becomes an offloading instance; for a pipeline '
                        "partition, replaces the bandwidth it was solved with")
    p.add_argument("--latency", type=latency, default=None, metavar="S",
                   help="link latency in seconds (host link; for a pipeline partition, per tensor crossing a "
                        "stage boundary, replacing the partition's)")
    p.add_argument("--weight-factor", type=cost, default=None, metavar="K",
                   help="pipeline partitions: bytes kept per weight byte, replacing the partition's")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def read_schedule_json(path: str) -> Any:
    """Read a schedule JSON file (or ``memsched solve --json`` output); InputError naming the file. An abstract
    H-Revolve schedule (``memsched.hrevolve/1``, as ``memsched hrevolve --json`` writes) is refused here, before
    the instance is read: no simulator replays it (`_check_not_abstract`)."""
    data = read_json(path)
    _check_not_abstract(data, path)
    check_holds_schedule(data, path, "ops")  # before the instance is read: the schedule file is at fault
    return data


def _check_not_abstract(data: Any, path: str) -> None:
    """`InputError` naming `path` and its ``format`` field (``schedule.format`` in a result object) when `data`
    is an abstract H-Revolve schedule: its ops F/B/W/R/D on storage levels of a homogeneous chain are no
    operations of any instance, so it can be neither replayed nor drawn."""
    field, fmt = "format", data.get("format") if isinstance(data, dict) else None
    if isinstance(data, dict) and isinstance(data.get("schedule"), dict) and "format" in data["schedule"]:
        field, fmt = "schedule.format", data["schedule"]["format"]
    if isinstance(fmt, str) and fmt.startswith("memsched.hrevolve/"):
        raise InputError(f"{fmt!r} is an abstract H-Revolve schedule (memsched hrevolve): it cannot be replayed "
                         "or drawn on an instance", path=path, field=field)


def with_partition_machine(instance: Any, data: Any, args: argparse.Namespace) -> Any:
    """The pipeline `instance` on the machine the partition was solved with (`machine_from_json`:
    weight factor, bandwidth, latency, as ``memsched partition --json`` records them; a file
    without them keeps the defaults: weights x 4, communication not charged), each replaced by
    --weight-factor, --bandwidth, --latency when given. A latency needs a bandwidth (`on_machine`,
    which `memsched.simulate` and `memsched.plot` share): without one, an `InputError` naming
    ``--latency``, or the schedule file and the field its latency came from (``schedule.latency``
    or ``latency``)."""
    machine = machine_from_json(data, path=args.schedule)
    if args.weight_factor is not None:
        machine["weight_factor"] = args.weight_factor
    if args.bandwidth is not None:
        machine["bandwidth"] = parse_bandwidth(args.bandwidth)
    if args.latency is not None:
        machine["latency"] = args.latency
        return on_machine(instance, machine, path=None, field="--latency")
    return on_machine(instance, machine, path=args.schedule, field=machine_field(data, "latency"),
                      hint="give --bandwidth or drop the latency")


def declared_problem(data: Any) -> str | None:
    """The problem schedule `data` names: ``schedule.problem``, else its ``problem`` (a result object, as
    ``memsched solve --json`` writes), else "pipeline" for a partition object (`_is_partition`: a bare
    ``memsched.partition/1``, such as ``memsched partition --json``'s "schedule"); None when it names none."""
    declared = data.get("problem") if isinstance(data, dict) else None
    if isinstance(data, dict) and isinstance(data.get("schedule"), dict):
        declared = data["schedule"].get("problem", declared)
    if declared is None and _is_partition(data):
        declared = "pipeline"
    return declared


def load_for_schedule(path: str, data: Any, bandwidth: str | None, latency: float | None) -> tuple[str, Any]:
    """(problem, instance) of instance file `path` as schedule `data` is replayed on it (`memsched simulate`
    and `memsched plot`). The schedule decides first: a partition (or a pipeline file with a schedule naming
    no problem) makes a pipeline, whatever `bandwidth` and `latency`, which then replace the values of the
    partition's machine (`with_partition_machine`, the caller's step); otherwise `load_problem`, where a
    bandwidth (or an offloading schedule) makes a chain file an offloading instance."""
    declared = declared_problem(data)
    if declared == "pipeline" or (declared is None and detect_problem(path) == "pipeline"):
        try:
            registry.get_problem("pipeline")
        except ImportError:
            raise InputError("problem 'pipeline' is not available in this installation", path=path) from None
        problem, instance = load_problem(path, declared=declared)
        if problem == "pipeline":
            return problem, instance
    return load_problem(path, bandwidth, latency, declared=declared)


def _is_partition(data: object) -> bool:
    """True when `data` (or the schedule it holds under ``schedule`` or ``partition``) is a partition: a
    ``memsched.partition/1`` object, or one without a format that has ``stages`` and no operations."""
    if isinstance(data, dict):
        inner = data.get("schedule", data.get("partition"))
        data = inner if isinstance(inner, dict) else data
    return isinstance(data, dict) and (str(data.get("format", "")).startswith("memsched.partition/")
                                       or ("stages" in data and "ops" not in data and "sequence" not in data))


def _check_replayable(replay: Any, path: str) -> None:
    """`InputError` naming the schedule file when the simulator could not replay the schedule at all
    (a violation and no finite objective: e.g. a partition of another pipeline, whose "period" would be
    inf and peak 0): raised before anything is printed, so that bad input leaves stdout empty. A
    schedule that replays but breaks a rule or the budget is still reported (then exit 2)."""
    objective = replay.objective
    if replay.violation is not None and (objective is None or not math.isfinite(objective)):
        raise InputError(f"invalid schedule: {replay.violation}", path=path)


def in_seconds(out: dict[str, Any], unit: float) -> dict[str, Any]:
    """A pipeline replay's JSON object `out` with its times in seconds, as ``memsched partition --json``
    gives them (`unit`: seconds per time unit of the instance file, its ``time_unit``): ``period``
    in seconds per micro-batch, followed by ``period_file_units`` (the simulator's period, in the
    file's unit) and ``time_unit_s``; each ``memory_profile`` entry's ``time`` (the stage time) in
    seconds."""
    seconds: dict[str, Any] = {}
    for key, value in out.items():
        if key == "period":
            seconds.update(period=value * unit, period_file_units=value, time_unit_s=unit)
        elif key == "memory_profile":
            seconds[key] = [{**entry, "time": entry["time"] * unit} for entry in value]
        else:
            seconds[key] = value
    return seconds


def pipeline_period_text(seconds: float, file_units: float, problem: str, instance: Any) -> str:
    """A pipeline period for the text output: in seconds, as `memsched partition` prints it, then (after
    two spaces) per micro-batch and, when the file's time unit is not the second, in that unit:
    "0.00136 s  per micro-batch (1.36 ms in the file's time unit)"."""
    text = f"{seconds:.6g} s  per micro-batch"
    if instance.time_unit != 1.0:
        unit = time_unit(problem, instance)
        text += f" ({time_text(file_units, unit)} in the file's time unit)" if unit else \
            f" ({file_units:.6g} in the file's time unit, {instance.time_unit:g} s each)"
    return text


#: problems whose simulator replays every step past a broken rule (the graph simulator: a missing predecessor is
#: reported, the step still charged), so their makespan and peak are the whole schedule's, as --json gives them
WHOLE_REPLAY = frozenset({"graph"})


def _violation_label(problem: str, broken: bool) -> str:
    """The text output's label after the makespan (period) and peak memory when `broken` (a rule other than the
    budget is broken): " (up to the violation)" where that rule ends the replay and the numbers are the prefix's,
    " (whole schedule, replayed past the violation)" for the problems of `WHOLE_REPLAY`; "" when not `broken`
    (memory over the budget never ends a replay: the numbers are the whole schedule's)."""
    if not broken:
        return ""
    return " (whole schedule, replayed past the violation)" if problem in WHOLE_REPLAY else " (up to the violation)"


def main(args: argparse.Namespace) -> int:
    """Replay the schedule and print its objective and peak memory (the instance's memory unit); exit 0 if valid,
    2 on bad input or a broken rule or --budget. A pipeline partition is replayed on the machine it records (weight
    factor, bandwidth, latency), each replaced by the command's option when given; its period and stage times are
    reported in seconds, as `memsched partition` reports them (`in_seconds`, `pipeline_period_text`)."""
    check_not_empty(args.file, "FILE", "a file name")  # read, "" is the current folder
    check_not_empty(args.schedule, "SCHEDULE", "a file name")
    data = read_schedule_json(args.schedule)
    machine: dict[str, Any] | None = None
    problem, instance = load_for_schedule(args.file, data, args.bandwidth, args.latency)
    if problem != "pipeline":
        if args.weight_factor is not None:
            raise InputError("applies to pipeline partitions", field="--weight-factor")
    else:
        instance = with_partition_machine(instance, data, args)
        machine = {"weight_factor": instance.weight_factor, "bandwidth": instance.bandwidth,
                   "latency": instance.latency}
    desc = registry.get_problem(problem)
    schedule = desc.schedule_from_json(data, instance, path=args.schedule)
    budget = budget_for(problem, instance, args.budget) if args.budget is not None else None  # "": refused
    replay = desc.replay(instance, schedule, budget)
    _check_replayable(replay, args.schedule)
    out = {"problem": problem, "valid": replay.violation is None, "violation": replay.violation,
           desc.objective: replay.objective, "peak_memory": replay.peak_memory, "budget": budget,
           "memory_profile": desc.memory_profile(instance, schedule), **(machine or {})}
    if problem == "pipeline":
        out = in_seconds(out, instance.time_unit)
    if args.json:
        print_json(out)
    else:
        prefix = _violation_label(problem, replay.violation is not None and (
            budget is None or desc.replay(instance, schedule, None).violation is not None))
        print(f"problem      {problem}  ({getattr(instance, 'name', '')})")
        print(f"{'stages' if desc.objective == 'period' else 'operations':<12} {len(schedule)}")
        if problem == "pipeline":
            print(f"period       {pipeline_period_text(out['period'], replay.objective, problem, instance)}{prefix}")
        else:
            print(f"{desc.objective:<12} {time_text(replay.objective, time_unit(problem, instance))}{prefix}")
        if machine is not None:
            link = ("communication not charged" if machine["bandwidth"] is None
                    else f"bandwidth {machine['bandwidth']:.4g} bytes/s, latency {machine['latency']:g} s per tensor")
            print(f"machine      weights x {machine['weight_factor']:g}, {link}")
        print(f"peak memory  {replay.peak_memory} ({format_size(replay.peak_memory, instance)}){prefix}")
        if budget is not None:
            print(f"budget       {budget} ({format_size(budget, instance)})")
    if replay.violation is not None:
        print(f"memsched simulate: error: {args.schedule}: invalid schedule: {replay.violation}", file=sys.stderr)
        return 2
    return 0
