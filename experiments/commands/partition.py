"""`memsched partition FILE --devices P --memory M`: pipeline stages under a per-device memory limit.

FILE is a chain file (memsched.chain/1) or a PipeDream graph.txt profile. The period is printed
in seconds per micro-batch in steady state (the file's times are in ms unless a chain file's
``meta.units.time`` says otherwise). Without ``--bandwidth`` communication is not charged.
Exit codes: 0 a partition was found, 1 infeasible (or no partition within the time limit),
2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import DEFAULT_SOLVER, SCHEDULES, load, reference_peak
from memsched.solvers.pipeline.schedule import contiguous_span
from memsched.solvers.result import INFEASIBLE, SolveResult
from memsched.solvers.units import format_bytes, parse_bandwidth, parse_positive_budget

from ._checks import (
    FLAGS,
    check_not_empty,
    check_options,
    check_work,
    cost,
    count,
    latency,
    option_list,
    options_not_taken,
    seconds,
    solver_parameters,
)
from ._common import add_progress_argument, parse_options, run_solver, stopped_by_user


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``partition`` subcommand (chain -> pipeline stages under a per-device memory)."""
    p = sub.add_parser("partition", help="partition a chain into pipeline stages under a per-device memory limit")
    p.add_argument("file", help="chain file (memsched.chain/1 JSON) or PipeDream graph.txt profile")
    p.add_argument("--devices", required=True, type=count(1), metavar="P", help="number of devices")
    p.add_argument("--memory", required=True, metavar="M",
                   help='memory per device: bytes, units ("16GB", "800MiB") or "X%%" of the one-device need')
    p.add_argument("--solver", default=None, help=f"solver name (default {DEFAULT_SOLVER}; see `memsched solvers`)")
    p.add_argument("--bandwidth", default=None, metavar="BW",
                   help='link bandwidth, bytes/s or units ("12GB/s"); without it communication is not charged')
    p.add_argument("--latency", type=latency, default=None, metavar="S",
                   help="seconds per tensor crossing a stage boundary, each way (with --bandwidth; default 0)")
    p.add_argument("--schedule", default="1f1b", choices=SCHEDULES, help="pipeline schedule (default 1f1b)")
    p.add_argument("--micro-batches", type=count(1), default=None, metavar="m",
                   help="micro-batches per batch (GPipe memory; default 4 x devices)")
    p.add_argument("--weight-factor", type=cost, default=None, metavar="K",
                   help="bytes kept per weight byte: weights, gradients, optimizer state (default 4, Adam)")
    p.add_argument("--replication", action="store_true",
                   help="allow replicated stages (madpipe, pipedream, dag, dag-pipedream; refused for the others)")
    p.add_argument("--time-limit", type=seconds, default=None, metavar="S", help="seconds for exact solvers")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="solver-specific option")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress_argument(p)
    p.set_defaults(func=main)


def run_partition(args: argparse.Namespace) -> tuple[SolveResult, Any]:
    """Load, solve and referee; returns the result and the instance (with its machine)."""
    check_not_empty(args.file, "FILE", "a file name")  # read, "" is the current folder
    inst = load(args.file)
    if args.devices < 1:
        raise InputError(f"must be >= 1, got {args.devices}", field="--devices")
    if args.micro_batches is not None and args.micro_batches < 1:
        raise InputError(f"must be >= 1, got {args.micro_batches}", field="--micro-batches")
    check_micro_batches(args.schedule, args.micro_batches, args.devices)
    if args.weight_factor is not None and not args.weight_factor >= 0:
        raise InputError(f"must be >= 0, got {args.weight_factor}", field="--weight-factor")
    bandwidth = parse_bandwidth(args.bandwidth) if args.bandwidth is not None else None
    if args.latency and bandwidth is None:
        raise InputError("a latency needs a --bandwidth (communication is not charged without one)", field="--latency")
    inst = inst.with_machine(bandwidth=bandwidth, weight_factor=args.weight_factor, latency=args.latency)
    reference = reference_peak(inst) if str(args.memory).strip().endswith("%") else None
    memory = parse_positive_budget(args.memory, reference, field="--memory")
    options = parse_options(args.option)
    if args.solver is not None and not args.solver.strip():  # not silently the default
        raise InputError("is empty, expected a solver name (memsched solvers lists them)", field="--solver")
    name = args.solver or DEFAULT_SOLVER
    check_partition_options(name, options, replication=args.replication)
    for key in POSITIVE_OPTIONS:
        if key in options and options[key] < 1:  # 0 would silently mean the default (check_options allows it)
            raise InputError(f"must be an integer >= 1, got {options[key]!r}", field=f"--option {key}")
    # the DPs' work grows as devices^2 with replication however it is allowed: the flag or the option's true
    replicated = args.replication or options.get("replication") is True
    check_work("pipeline", name, inst, path=args.file, devices=args.devices, replication=replicated,
               replication_given="--replication" if args.replication else "--option replication=true")
    if args.replication:
        if "replication" not in solver_parameters("pipeline", name):
            raise InputError(f"{name} does not replicate stages (its partitions are straight or interleaved); "
                             f"the solvers that do: {', '.join(replicating_solvers())}", field="--replication")
        options["replication"] = True
    result = run_solver("pipeline", inst, name, memory, progress=args.progress, time_limit=args.time_limit,
                        options=options, devices=args.devices, schedule=args.schedule,
                        micro_batches=args.micro_batches)
    return result, inst


def check_micro_batches(schedule: str, micro_batches: int | None, devices: int) -> None:
    """`solvers.pipeline.dp.check_micro_batches` (1F1B needs at least `devices` micro-batches), its
    error naming ``--micro-batches``."""
    from memsched.solvers.pipeline.dp import check_micro_batches as check

    try:
        check(schedule, micro_batches, devices)
    except InputError as err:
        raise InputError(err.message.replace("give at least", "give --micro-batches >="),
                         field="--micro-batches") from None


def check_partition_options(name: str, options: dict[str, Any], *, replication: bool) -> None:
    """`check_options` for pipeline solver `name`, whose unknown-option message lists only what
    ``--option`` takes (not the options the command sets with its own flags: devices, schedule,
    micro_batches); ``--option replication`` with the ``--replication`` flag is refused (one of the
    two would silently win). An unknown `name` is an `InputError` naming ``--solver``."""
    valid = solver_parameters("pipeline", name)
    unused = options_not_taken("pipeline", name)  # memory_gb for the CP-SAT models: check_options names it
    for key in options:
        if key not in valid and key not in FLAGS and key not in unused:
            raise InputError(f"unknown option {key!r} for {name} (its options: {option_list(set(valid) - set(FLAGS))})",
                             field="--option")
    if replication and "replication" in options:
        raise InputError("replication is given twice, with --replication and --option replication: give one",
                         field="--option replication")
    check_options("pipeline", name, options)


#: solver options that count something (ideals, states, stages) and must be >= 1
POSITIVE_OPTIONS = ("max_states", "max_stages")


def replicating_solvers() -> list[str]:
    """The pipeline solvers that take ``replication`` (``--replication``)."""
    from memsched.solvers.pipeline import SOLVERS

    return [n for n in SOLVERS if "replication" in solver_parameters("pipeline", n)]


def to_json(result: SolveResult, inst: Any) -> dict[str, Any]:
    """The `--json` object: periods and stage times in seconds."""
    unit = inst.time_unit
    out = result.to_json(objective_key="period")
    out["period"] = result.objective * unit if result.objective is not None else None
    out["lower_bound"] = result.lower_bound * unit if result.lower_bound is not None else None
    if "log" in out:  # (seconds of search, period, bound): the period and bound in seconds too
        out["log"] = [[t, _scaled(o, unit), _scaled(b, unit)] for t, o, b in out["log"]]
    if isinstance(out.get("fast"), dict):  # the seeding fast solvers' periods (an exact solver's details)
        out["fast"] = {name: _scaled(period, unit) for name, period in out["fast"].items()}
    if isinstance(out.get("model_objective"), (int, float)):  # the model's period where a fast solver's was returned
        out["model_objective"] = _scaled(out["model_objective"], unit)
    out["period_file_units"] = result.objective
    out["time_unit_s"] = unit
    out["memory_per_device"] = result.budget
    out["instance"] = inst.name
    out["layers"] = inst.length
    out["weight_factor"] = inst.weight_factor
    note = weights_note(inst)
    out["weights"] = "charged" if note is None else f"not charged ({note})"
    out["bandwidth"] = inst.bandwidth
    out["communication"] = "charged" if inst.bandwidth is not None else "not charged (no --bandwidth)"
    part = result.schedule
    if out.get("schedule") is not None:
        out["schedule"]["time_unit_s"] = unit  # the partition's own times are in the file's unit
        # the machine it was solved with, so that `memsched simulate` replays it as reported
        out["schedule"].update(weight_factor=inst.weight_factor, bandwidth=inst.bandwidth, latency=inst.latency)
    out["latency"] = inst.latency
    dag = part is not None and (part.order is not None or result.solver in DAG_SOLVERS)
    out["stages"] = [] if part is None else [
        {**stage_span_keys(s, layers, dag=dag, ordered=part.order is not None), "time": s.time * unit,
         "memory": s.memory, "devices": s.replicas, "replicas": s.replicas, "in_flight": s.in_flight,
         "link_time": (s.link_time or 0.0) * unit, **({"layers": layers} if dag else {}),
         **({"first_position": s.first, "last_position": s.last} if part.order is not None else {}),
         **({"device": part.device_of[k]} if part.device_of is not None else {})}
        for k, (s, layers) in enumerate(zip(part.stages, part.stage_layers()))]
    if part is not None and part.device_of is not None:
        out["device_totals"] = [{"device": d, "stages": stages, "load": load * unit, "memory": memory}
                                for d, stages, load, memory in device_totals(part)]
    return out


#: the solvers whose partitions split the layer DAG at antichains (a `Partition` with an ``order``
#: unless the order they found is the layers' own)
DAG_SOLVERS = ("dag", "dag-pipedream", "dag-cpsat", "dag-milp")


def stage_span_keys(stage: Any, layers: list[int], *, dag: bool, ordered: bool) -> dict[str, int | None]:
    """A stage's ``first_layer`` and ``last_layer`` for the top-level ``stages`` of the JSON: always in
    the instance's layer order (0-based, inclusive), as the design contract says. For a contiguous
    partition they are the stage's bounds; for a DAG partition (`dag`) they are the smallest and largest
    of its `layers` (instance indices) when those are contiguous in the instance's order, else None
    (null): never positions in the partition's ``order`` (`ordered`), which ``first_position`` and
    ``last_position`` give, and ``schedule.stages`` keeps (its own ``memsched.partition/1`` format)."""
    if not dag:
        return {"first_layer": stage.first, "last_layer": stage.last}
    span = contiguous_span(layers) if ordered else (stage.first, stage.last)
    first, last = span if span is not None else (None, None)
    return {"first_layer": first, "last_layer": last}


def _scaled(value: float | None, unit: float) -> float | None:
    """`value` in the file's time unit as seconds (`unit` seconds each); None stays None."""
    return None if value is None else value * unit


def device_totals(part: Any) -> list[tuple[int, list[int], float, int]]:
    """Per device of an interleaved allocation (``part.device_of`` set, stages evaluated), in
    device order: (device, its stages, load = the sum of their times in the file's time unit,
    memory = the sum of their memories in bytes), as the simulator charges a device."""
    held: dict[int, list[int]] = {}
    for k, d in enumerate(part.device_of):
        held.setdefault(d, []).append(k)
    return [(d, ks, sum(part.stages[k].time or 0.0 for k in ks), sum(part.stages[k].memory or 0 for k in ks))
            for d, ks in sorted(held.items())]


def main(args: argparse.Namespace) -> int:
    """Partition the chain and print the stages and period (or JSON); exit 0, 1 infeasible, 2 bad input."""
    result, inst = run_partition(args)
    if args.json:
        json.dump(to_json(result, inst), sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        _print_human(result, inst)
    if stopped_by_user("partition", result):
        return 130
    if result.schedule is None:
        msg = f"{result.status}: {result.solver} finds no partition within {result.budget} bytes per device"
        needs = result.details.get("needs")
        if result.status == INFEASIBLE and needs is not None:
            # a period-only baseline: the smallest memory *it* meets is what its own partition needs, not the
            # smallest memory of any partition (docs/CONVENTIONS.md, "Status words")
            msg += (f"; {result.solver}'s smallest feasible memory: {needs} bytes ({format_bytes(needs)}), what its"
                    " own partition needs (a period-only baseline: a memory-aware solver such as madpipe or dag may"
                    " fit in less)")
        elif result.status == INFEASIBLE and result.min_budget is not None:
            # a coarsened lattice (dag, dag-cpsat) proves nothing about the DAG partitions it lacks
            where = " on this lattice" if result.details.get("coarse_lattice") else ""
            msg += f"; smallest feasible memory{where}: {result.min_budget} bytes ({format_bytes(result.min_budget)})"
            if where:
                msg += " (a larger --option max_states searches a finer lattice, which may need less)"
        elif result.status == INFEASIBLE and result.details.get("min_budget_note"):
            msg += f"; smallest feasible budget unknown: {result.details['min_budget_note']}"
        elif result.status == INFEASIBLE and result.details.get("heuristic"):
            # a heuristic's failure proves nothing about its scope (the solver's message says which solvers search it)
            msg += f"; smallest feasible budget unknown: {result.message}"
        elif result.status == INFEASIBLE:
            msg += ("; smallest feasible budget unknown: this solver does not compute it (madpipe gives the"
                    " straight pipelines' one)")
        print(f"memsched partition: {msg}", file=sys.stderr)
        return 1
    return 0


#: the ``meta.source`` a PipeDream ``graph.txt`` pipeline gets from its loader (`pipeline.instance.from_graph_txt`)
GRAPH_TXT_SOURCE = "pipedream graph.txt"


def weights_note(inst: Any) -> str | None:
    """Why pipeline `inst` charges no weights, when it was read from a chain file without per-layer weights
    (no ``meta.param_sizes``: every layer's weights are then 0 bytes, whatever the weight factor), such as a
    file ``memsched profile`` writes, whose ``meta.parameter_bytes`` is the network's total, not split over
    layers (named with its size when present). None when some layer has weights (``inst.params``, bytes) or
    the weights come from the file: a chain file's ``meta.param_sizes`` (zeros included), a PipeDream
    ``graph.txt``'s ``parameter_size`` of each node."""
    meta = inst.meta if isinstance(inst.meta, dict) else {}
    if bool(np.any(inst.params)) or "param_sizes" in meta or (
            meta.get("source") == GRAPH_TXT_SOURCE and "node_ids" in meta):
        return None
    note = "the file gives no per-layer weights, no meta.param_sizes"
    total = meta.get("parameter_bytes")
    if isinstance(total, int) and not isinstance(total, bool):
        note += f"; its meta.parameter_bytes, {total} bytes ({format_bytes(total)}), is a total, not per layer"
    return note


def _print_human(result: SolveResult, inst: Any) -> None:
    unit = inst.time_unit
    print(f"instance     {inst.name}  ({inst.length} layers)")
    print(f"solver       {result.solver}  [{result.scope}]")
    print(f"status       {result.status}")
    note = weights_note(inst)
    weights = f"weights x {inst.weight_factor:g}" if note is None else "no weights charged"
    print(f"memory       {result.budget} bytes per device ({format_bytes(result.budget)}), {weights}")
    if note is not None:
        print(f"weights      none charged: {note}")
    if inst.bandwidth is None:
        print("bandwidth    communication not charged (no --bandwidth)")
    else:
        print(f"bandwidth    {inst.bandwidth:.4g} bytes/s, latency {inst.latency:g} s per tensor")
    part = result.schedule
    if part is not None:
        _print_stages(part, unit)
        if part.order is not None:
            print("             (a DAG partition: layers are the instance's, 0-based; each stage is contiguous in"
                  " its topological order, --json's schedule.order)")
        print(f"period       {result.objective * unit:.6g} s per micro-batch ({part.schedule})")
        print(f"peak memory  {result.peak_memory} bytes ({format_bytes(result.peak_memory)})")
    if result.lower_bound is not None and part is not None:
        print(f"lower bound  {result.lower_bound * unit:.6g} s")
    if result.message:
        print(f"note         {result.message}")
    print(f"solve time   {result.solve_time_s:.3f} s")


def _print_stages(part: Any, unit: float) -> None:
    """The stage table (times in seconds: `unit` seconds per file time unit); for an interleaved
    allocation (``part.device_of``) with a device column and then one line per device: its stages,
    load (the sum of their times) and memory (the sum of theirs), as the simulator charges it."""
    interleaved = part.device_of is not None
    dev = f" {'device':>6}" if interleaved else ""
    spans = [part.stage_span(k) for k in range(len(part.stages))]  # instance indices, also for a DAG partition
    width = max([11, *map(len, spans)])
    print(f"{'stage':>5} {'layers':>{width}} {'devices':>7}{dev} {'in flight':>9} {'time (s)':>12} "
          f"{'link in (s)':>12} {'memory':>14}")
    for k, s in enumerate(part.stages):
        dev = f" {part.device_of[k]:>6}" if interleaved else ""
        print(f"{k:>5} {spans[k]:>{width}} {s.replicas:>7}{dev} {s.in_flight:>9} {s.time * unit:>12.6g} "
              f"{(s.link_time or 0.0) * unit:>12.6g} {format_bytes(s.memory):>14}")
    if interleaved:
        for d, stages, load, memory in device_totals(part):
            print(f"device {d:<5} stages {', '.join(map(str, stages))}: load {load * unit:.6g} s, memory {memory} "
                  f"bytes ({format_bytes(memory)})")
