"""`memsched run MODEL --budget B --solver NAME [--problem P]`: solve, then execute the schedule for real.

MODEL is a zoo network or your own (a factory ``FILE.py:FUNCTION``, `models.network`), profiled
first or costed by `--chain FILE`, or an instance file whose costs are used with the network
named by `--model` (the work is `models.run.run`). The schedule
chosen by the solver under the budget is executed as one training step; the command prints the simulator's prediction
(makespan, peak memory) next to the measured step time and peak memory, their ratios to
store-all, and whether every gradient matches plain autograd. Exit codes: 0 ok, 1 no schedule
(infeasible budget, or a time limit passed before any: "memsched run: infeasible: ..." / "timeout: ..."
on stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError, article

from ._checks import (
    MAX_TIME_REPEATS,
    check_exact_combined,
    check_not_empty,
    check_options,
    check_outputs,
    count,
    seconds,
)
from ._common import add_link_arguments, has_host_link, load_problem, parse_options, set_help
from .profile import (
    MODEL_HELP,
    PROFILE_REPEATS,
    ZOO_NAMES,
    _import_models,
    add_granularity_option,
    add_model_options,
    fits_in_memory,
    model_inputs,
    model_sizes,
)

#: the description of ``memsched run --help`` (the rules in full: docs/cli.md; the implementation: this module's
#: docstring). Lines of at most 79 characters, kept as they are.
DESCRIPTION = """\
Solve, then execute the schedule for real as one training step in PyTorch.
MODEL is a zoo network, your own factory (FILE.py:FUNCTION), a join network
(siamese, triplet, clip), or an instance file whose costs are used with the
network named by --model. Prints the simulator's prediction (makespan, peak
memory) next to the measured step time and peak memory, their ratios to
store-all, and whether every gradient matches plain autograd.
Exit: 0 ok; 1 no schedule (infeasible budget, or a time limit passed before
any: "memsched run: infeasible: ..." / "timeout: ..." on stderr); 2 bad input.
Details: docs/cli.md, "memsched run".
"""


def register(subparsers: Any) -> None:
    """Add the ``run`` subcommand (execute a schedule in PyTorch: measured vs predicted)."""
    p = subparsers.add_parser("run", help="execute a schedule for real: measured vs predicted memory and time",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL",
                   help=f"{MODEL_HELP}; join networks: siamese, triplet, clip; or a chain file")
    p.add_argument("--budget", required=True, help='memory budget: bytes, "1.5GB", "800MiB" or "60%%" of store-all')
    p.add_argument("--solver", default=None,
                   help="solver (memsched solvers); default rotor, offload-prefix with --bandwidth, dp for joins, "
                        "checkmate for graphs")
    p.add_argument("--model", dest="model_name", default=None,
                   help="zoo network to run when MODEL is an instance file (default: its meta's model)")
    p.add_argument("--chain", default=None,
                   help="costs from this instance file (chain, join or graph) instead of profiling (MODEL a network)")
    p.add_argument("--profile-file", default=None,
                   help="save the profiled instance file here (refused when an instance file gives the costs)")
    p.add_argument("--early-release", action="store_true",
                   help="chain problem, profiled here: B(i) releases delta_{i+1} and its output early, as one "
                        "loss.backward() does (as `memsched profile --early-release`); refused with an instance "
                        "file, which runs so when profiled so")
    p.add_argument("--slots", type=count(0, 10**9), default=500,
                   help="memory slots for discretising solvers (0: exact)")
    p.add_argument("--time-limit", type=seconds, default=None, help="solver time limit (s)")
    p.add_argument("--time-repeats", type=count(1, MAX_TIME_REPEATS), default=3,
                   help="timed executions of the step (median)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="solver option (e.g. segments=4)")
    p.add_argument("--problem", choices=("chain", "offload", "join", "graph"), default=None,
                   help="chain (default), offload (default with --bandwidth), join (siamese, triplet, clip) or "
                        "graph (the torch.fx training graph, run node by node)")
    p.add_argument("--no-independent", action="store_true",
                   help="skip the second CPU memory measurement (torch.profiler allocator events)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_link_arguments(p)
    add_model_options(p)
    add_granularity_option(p)
    set_help(p, "--timing", "profiling: time each block (graph: each op) alone (isolated), or inside store-all steps "
             "(in_step; default: in_step on cpu, isolated on cuda; with --problem graph in_step on every device); "
             "refused when an instance file gives the costs")
    # --repeats given or not: refused with an instance file (`_check_costs_options`), else PROFILE_REPEATS
    p.set_defaults(func=main, repeats=None)


def _instance_path(args: argparse.Namespace) -> str | None:
    """The instance file of the run's costs: ``--chain``, else MODEL when it is a file (not a zoo name)."""
    if args.chain is not None:
        return str(args.chain)
    return args.model if args.model not in ZOO_NAMES and Path(args.model).is_file() else None


def _problem(args: argparse.Namespace, join_models: Any) -> str:
    """The problem run: ``--problem``; else a join network's "join"; else the problem of the
    instance file (MODEL or ``--chain``, whatever MODEL names: a graph file runs as "graph", a join
    file as "join", a chain file as "offload" when `memsched solve` reads it so, `load_problem`: it
    has a ``host_link``, or ``--solver`` names an offloading solver that is no chain solver, pofo
    but not cpsat; without a bandwidth from either that is solve's bad input naming
    ``host_link.bandwidth``); else "offload" with ``--bandwidth``, "chain" without."""
    if args.problem is not None:
        return args.problem
    if args.model in join_models:
        return "join"
    path = _instance_path(args)
    if path is not None:
        from memsched.solvers.formats import detect_problem

        problem = detect_problem(path)
        if problem == "pipeline":
            raise InputError("a pipeline file is run by the pipeline runner (docs/pipeline.md), not by memsched run",
                             path=path)
        if problem in ("graph", "join"):
            return problem
        if args.bandwidth is None and load_problem(path, solver=args.solver)[0] == "offload":
            return "offload"
    return "offload" if args.bandwidth is not None else "chain"


def _check_link(args: argparse.Namespace, problem: str, instance: str | None) -> None:
    """`--bandwidth` only for offloading; `--latency` only with a host link (`--bandwidth`, or an offloading
    instance file's `host_link`), as `memsched.run` checks them."""
    if args.bandwidth is not None and problem != "offload":
        raise InputError(f"a bandwidth makes a chain an offloading instance, not {article(problem)} one",
                         field="--bandwidth")
    if args.latency is not None and args.bandwidth is None and not (
            problem == "offload" and instance is not None and has_host_link(instance)):
        raise InputError("needs --bandwidth: it is the host link's (or an offloading instance file)", field="--latency")


def _link(args: argparse.Namespace, problem: str, instance: str | None) -> tuple[float | None, float]:
    """(bandwidth in bytes/s, latency in s) of the host link the run offloads over: ``--bandwidth`` and
    ``--latency``, each where given, else the instance file's ``host_link`` (as `memsched solve` and
    `memsched.run` take it: the command line wins); (None, 0.0) when the problem is not offloading.
    An offloading run without a bandwidth from either is bad input naming ``--bandwidth``. No torch."""
    from memsched.solvers.units import parse_bandwidth

    bandwidth = None if args.bandwidth is None else parse_bandwidth(args.bandwidth, field="--bandwidth")
    if problem != "offload":
        return bandwidth, args.latency or 0.0
    if instance is not None and has_host_link(instance):
        from memsched.solvers.offload import OffloadInstance

        inst = OffloadInstance.load(instance, bandwidth, args.latency)
        return inst.bandwidth, inst.latency
    if bandwidth is None:
        raise InputError("the offload problem needs a bandwidth: give --bandwidth, or a host_link in the instance file",
                         field="--bandwidth")
    return bandwidth, args.latency or 0.0


#: the solver `run` uses per problem when --solver is not given (as its help says)
_DEFAULT_SOLVER = {"chain": "rotor", "offload": "offload-prefix", "join": "dp", "graph": "checkmate"}


def main(args: argparse.Namespace) -> int:
    """Solve, execute and measure the schedule; print measured vs predicted; exit 0, 1 no schedule (infeasible or
    timeout), 2 bad input.

    Every argument that needs no network (the budget's form, the output file, MODEL or the instance
    file, the link, the solver and its options) is checked before torch is imported and anything is
    profiled or written; the sizes an instance file was profiled at are the run's unless given
    (`models.run.instance_sizes`: a size that contradicts the file is bad input)."""
    from memsched.api import budget_bytes
    from memsched.execute import JOIN_NAMES

    budget_bytes(args.budget, field="--budget")  # the form ("abc", "-5", "nan"): before building anything
    _check_names(args)
    _check_costs_options(args)
    # the profile must not replace the network's source or an instance file it reads
    check_outputs([("--profile-file", args.profile_file)], [*model_inputs(args.model), ("--chain", args.chain)])
    problem = _problem(args, JOIN_NAMES)
    if args.early_release and problem != "chain":
        raise InputError(f"applies to the chain problem (B(i) of a profiled chain), not to {problem}",
                         field="--early-release")
    name, instance = _network(args, problem)
    from memsched.models.network import check_factory_file

    with _network_source(args, instance):  # a factory file not found: before torch, naming where it was written
        check_factory_file(name)
    _check_link(args, problem, instance)
    bandwidth, latency = _link(args, problem, instance)
    solver, options = _solver_and_options(args, problem, instance)
    check_exact_combined(problem, solver, instance)  # before torch is imported, naming the file
    _import_models()  # before importing torch: the checks above take no seconds
    from memsched.models.run import describe, run

    try:
        # a factory named by the file (or --model) is built inside; sizes this machine cannot allocate are bad input
        with _network_source(args, instance), fits_in_memory():
            out = run(name, args.budget, problem=problem, solver=solver, instance=instance, sizes=model_sizes(args),
                      slots=args.slots, time_limit=args.time_limit, options=options, seed=args.seed,
                      time_repeats=args.time_repeats,
                      profile_repeats=PROFILE_REPEATS if args.repeats is None else args.repeats, timing=args.timing,
                      profile_file=args.profile_file, bandwidth=bandwidth, latency=latency,
                      independent=not args.no_independent, early_release=args.early_release)
    except InputError as err:
        if instance is not None and args.chain is None and err.field == "--chain":
            raise InputError(err.message, path=instance) from None  # the file came as MODEL, not --chain
        if instance is not None and err.field == "meta.model" and err.path is None:  # the network's, found running it
            raise InputError(err.message, path=instance, field=err.field) from None
        raise
    if args.json:
        print(json.dumps(out))
    elif out.get("predicted") is not None:
        print(describe(out))
    if out.get("predicted") is None:
        print(f"memsched run: {out.get('status') or 'infeasible'}: {no_schedule_text(out)}", file=sys.stderr)
        return 1
    return 0


#: a human form right after a size (`format_bytes`: " (48.43 KiB)", " (512 B)"), which needs no second one
_HUMAN_SIZE = r" \(\d+(?:\.\d+)? (?:[KMGT]i)?B\)"


def no_schedule_text(out: dict[str, Any]) -> str:
    """The message of `out`, a run without a schedule (`models.run.run`), with its sizes in units as
    ``memsched solve`` prints them: each bare ``budget`` and ``min_budget`` (bytes) that it names, a solver's
    wording such as rotor's "no persistent schedule fits 49588; the smallest feasible budget is 3247360",
    reads "49588 bytes (48.43 KiB)" (`format_bytes`); one that says "bytes" already gets the human form, one
    followed by its human form is left as it is. Other numbers (a slot count, a stage) are not sizes."""
    from memsched.solvers.units import format_bytes

    message = str(out.get("message") or "")
    sizes = {int(n) for n in (out.get("budget"), out.get("min_budget")) if isinstance(n, (int, float))}
    if (out.get("units") or {}).get("memory", "bytes") != "bytes":
        return message
    for n in sorted(sizes, reverse=True):
        pattern = rf"(?<![\w.-]){n}(?![\w-]|\.\d)(?: bytes\b| B\b)?(?P<human>{_HUMAN_SIZE})?"
        message = re.sub(pattern, lambda m, n=n: m.group(0) if m.group("human") else f"{n} bytes ({format_bytes(n)})",
                         message)
    return message


def _check_names(args: argparse.Namespace) -> None:
    """MODEL, ``--chain``, ``--model`` and ``--solver`` given as empty strings are bad input naming
    the argument (`check_not_empty`), as in `memsched solve`: an empty path reads as the current folder, and
    an empty ``--model`` or ``--solver`` would silently be the file's ``meta.model`` or the default solver
    (or be named as the unknown value None or '')."""
    check_not_empty(args.model, "MODEL", "a network name or an instance file", name=True)
    check_not_empty(args.chain, "--chain", "a file name")
    check_not_empty(args.model_name, "--model", "a network name", name=True)
    check_not_empty(args.solver, "--solver", "a solver name (memsched solvers lists them)", name=True)


def _network_source(args: argparse.Namespace, instance: str | None) -> contextlib.AbstractContextManager[None]:
    """Where the network run was named, for its errors and its factory's file (`models.network.network_source`):
    MODEL itself (no context) unless MODEL is an instance file; then ``--model``, or the file's
    ``meta.model``, whose relative ``FILE.py`` is also looked up beside the file. No torch."""
    from memsched.models.network import network_source

    if instance is None or args.chain is not None:
        return contextlib.nullcontext()
    if args.model_name is not None:
        return network_source("--model")
    return network_source("meta.model", path=instance)


def _model_is_file(args: argparse.Namespace) -> bool:
    """True when MODEL is an instance file (the run's costs, `_network`), not a network: neither a zoo
    name nor ``FILE.py:FUNCTION``, and an existing path or a ``.json`` name. No torch."""
    from memsched.models.network import is_factory_spec

    name = args.model
    if name in ZOO_NAMES or is_factory_spec(name):
        return False
    return Path(name).exists() or name.endswith(".json")


def _model_is_network(name: str) -> bool:
    """True when MODEL names a network: a zoo or join network, or ``FILE.py:FUNCTION``. No torch."""
    from memsched.models.network import is_factory_spec

    from memsched.execute import JOIN_NAMES

    return name in ZOO_NAMES or name in JOIN_NAMES or is_factory_spec(name)


def _check_costs_options(args: argparse.Namespace) -> None:
    """The options that where the costs come from would leave without effect are bad input, before
    any work: ``--chain`` when MODEL is itself an instance file; ``--model`` (the network of an
    instance file given as MODEL) when MODEL names the network; ``--profile-file``,
    ``--early-release`` and the profiling options ``--repeats`` and ``--timing`` when an instance
    file (MODEL or ``--chain``) gives the costs, as nothing is profiled then (the executor releases
    early when the file was profiled so: its ``bwd_overhead_released``; ``--time-repeats`` times
    the executed steps). No torch."""
    model_file = _model_is_file(args)
    if model_file and args.chain is not None:
        raise InputError(f"MODEL {args.model} is an instance file already (the run's costs); --chain gives the costs "
                         "of a network named as MODEL: give one of the two", field="--chain")
    if args.model_name is not None and _model_is_network(args.model):
        raise InputError(f"names the network to run when MODEL is an instance file; MODEL {args.model} names the "
                         "network here: leave --model out", field="--model")
    path = args.chain if args.chain is not None else (args.model if model_file else None)
    if path is None:
        return
    if args.profile_file is not None:
        raise InputError(f"nothing is profiled: the costs come from the instance file {path}", field="--profile-file")
    if args.early_release:
        raise InputError(f"applies to a chain profiled by this run; the costs come from the instance file {path}, "
                         "which is executed releasing early when it was profiled so (`memsched profile "
                         "--early-release`)", field="--early-release")
    from memsched.execute import refuse_profiling_options

    refuse_profiling_options(f"the instance file {path}", repeats=args.repeats, timing=args.timing)


def _network(args: argparse.Namespace, problem: str) -> tuple[str, str | None]:
    """(the network to run, the instance file of its costs or None): MODEL and ``--chain``, or an
    instance file given as MODEL (a join file too) with the network its meta names (or ``--model``).
    A join network (`JOIN_NAMES`) with another problem (``--problem chain``) is bad input naming
    ``--problem``. No torch."""
    from memsched.models.network import is_factory_spec

    from memsched.execute import JOIN_NAMES, check_join_network

    name, instance = args.model, args.chain
    is_file = Path(name).exists() or name.endswith(".json")
    if name in ZOO_NAMES or is_factory_spec(name) or (problem == "join" and not is_file):
        return name, instance  # a join network by name (an unknown one is refused by the join zoo)
    if not is_file:
        check_join_network(name, problem)  # siamese with --problem chain: not an unknown model
        raise InputError(f"unknown model {name!r} (one of {', '.join(ZOO_NAMES)}, FILE.py:FUNCTION, or an "
                         "instance file)", field="MODEL")
    network = args.model_name or _model_of(problem, name)
    if problem == "join":
        if args.model_name is not None and network not in JOIN_NAMES:
            raise InputError(f"unknown join network {network!r} (one of {', '.join(JOIN_NAMES)})", field="--model")
        if network is not None and network not in JOIN_NAMES:
            raise _unknown_meta_model(name, network, f"one of {', '.join(JOIN_NAMES)}", kind="join network")
        if network not in JOIN_NAMES:
            raise InputError(f"a join file needs --model NAME (the join network to execute: {', '.join(JOIN_NAMES)})",
                             field="--model")
    elif network not in ZOO_NAMES and not (isinstance(network, str) and is_factory_spec(network)):
        if args.model_name is not None:
            raise InputError(f"unknown model {network!r} (one of {', '.join(ZOO_NAMES)}, or FILE.py:FUNCTION)",
                             field="--model")
        if network is not None:
            raise _unknown_meta_model(name, network, f"one of {', '.join(ZOO_NAMES)}, or FILE.py:FUNCTION")
        raise InputError("an instance file needs --model NAME (the zoo network or FILE.py:FUNCTION to execute)",
                         field="--model")
    return network, name


def _unknown_meta_model(path: str, value: Any, known: str, *, kind: str = "network") -> InputError:
    """The error for an instance file whose ``meta.model`` (the network `memsched run` executes when
    --model is left out) is no `kind` of network it knows: `value` is the field's JSON value, `known`
    lists the names it could be. Names the file and the field, not --model, which was not given."""
    what = f"{value!r} is not a {kind} name" if not isinstance(value, str) else f"unknown {kind} {value!r}"
    return InputError(f"{what} ({known}); give --model NAME to execute another", path=path, field="meta.model")


def _solver_and_options(args: argparse.Namespace, problem: str,
                        instance: str | None = None) -> tuple[str | None, dict[str, Any]]:
    """The solver asked for (None: the problem's default) and the ``--option`` values, both checked
    against the solver registry (an unknown name fails before the network is profiled), the values
    also by the solver's own checks that need no instance (`memsched.api.check_option_values`:
    ``--option parameters=bogus`` of a CP-SAT solver). An explicit
    name is the problem's or bad input, as in `memsched solve`: ``--solver rotor`` on a join is
    refused, never renamed (the default, ``_DEFAULT_SOLVER``, applies only when none is given); an
    offloading one named with ``--problem chain`` on an `instance` file with a host link says to drop it."""
    from memsched.solvers import registry

    solver = args.solver
    if solver is not None:
        link = problem == "chain" and instance is not None and has_host_link(instance)  # set aside: say so
        registry.get_solver(problem, solver, host_link=link)
    options = parse_options(args.option)
    if options:
        from memsched.api import check_option_values

        name = solver or _DEFAULT_SOLVER.get(problem, registry.get_problem(problem).default_solver)
        check_options(problem, name, options)
        check_option_values(problem, [name], options)  # CP-SAT's parameters...: the solver's own check, no instance
    return solver, options


def _model_of(problem: str, path: str) -> str | None:
    """The zoo network an instance file was profiled from (its meta's "model")."""
    from memsched.solvers import registry

    inst = registry.problem_module("chain" if problem == "offload" else problem).load(path)
    return inst.meta.get("model")
