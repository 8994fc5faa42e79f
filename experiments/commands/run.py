"""`memsched run MODEL --budget B --solver NAME`: solve, then execute the schedule for real.

MODEL is a zoo network (profiled first, or costed by `--chain FILE`), or a chain file whose
costs are used with the network named by `--model`. The schedule chosen by the solver under
the budget is executed as one training step; the command prints the simulator's prediction
(makespan, peak memory) next to the measured step time and peak memory, their ratios to
store-all, and whether every gradient matches plain autograd. Exit codes: 0 ok, 1 infeasible
budget, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError

from ._common import add_link_arguments, budget_for, parse_options
from .profile import ZOO_NAMES, _import_models, add_model_options, model_sizes


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="execute a schedule for real: measured vs predicted memory and time",
                              description=__doc__)
    p.add_argument("model", metavar="MODEL",
                   help=f"zoo model ({', '.join(ZOO_NAMES)}; join networks: siamese, triplet, clip) or a chain file")
    p.add_argument("--budget", required=True, help='memory budget: bytes, "1.5GB", "800MiB" or "60%%" of store-all')
    p.add_argument("--solver", default=None,
                   help="solver (memsched solvers); default rotor, or offload-prefix with --bandwidth, dp for joins")
    p.add_argument("--model", dest="model_name", default=None, help="zoo network to run when MODEL is a chain file")
    p.add_argument("--chain", default=None, help="costs from this chain file instead of profiling")
    p.add_argument("--profile-file", default=None, help="save the profiled chain file here")
    p.add_argument("--slots", type=int, default=500, help="memory slots for discretising solvers (0: exact)")
    p.add_argument("--time-limit", type=float, default=None, help="solver time limit (s)")
    p.add_argument("--time-repeats", type=int, default=3, help="timed executions of the step (median)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="solver option (e.g. segments=4)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_link_arguments(p)
    add_model_options(p)
    p.set_defaults(func=main)


def _chain_file(path: str) -> Any:
    from memsched.solvers.chain import Chain

    return Chain.load(path)


def main(args: argparse.Namespace) -> int:
    _import_models()
    from memsched.models.chain.executor import ChainExecutor, compare_gradients, measured_vs_predicted, reference_step
    from memsched.models.chain.profiler import profile_chain
    from memsched.models.join.zoo import JOIN_MODELS
    from memsched.models.zoo import build_model
    from memsched.solvers import registry
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.chain.baselines import store_all_schedule
    from memsched.solvers.units import format_bytes

    if args.model in JOIN_MODELS:
        return _run_join(args)
    if args.bandwidth is not None:
        return _run_offload(args)
    args.solver = args.solver or "rotor"
    chain = None
    name = args.model
    if name not in ZOO_NAMES:
        if not Path(name).exists() and not name.endswith(".json"):
            raise InputError(f"unknown model {name!r} (one of {', '.join(ZOO_NAMES)}, or a chain file)",
                             field="MODEL")
        chain = _chain_file(name)
        name = args.model_name or chain.meta.get("model")
        if name not in ZOO_NAMES:
            raise InputError("a chain file needs --model NAME (the zoo network to execute)", field="--model")
    elif args.chain:
        chain = _chain_file(args.chain)
    if args.slots < 0:
        raise InputError(f"must be >= 0, got {args.slots}", field="--slots")
    model = build_model(name, **model_sizes(args))
    if chain is None:
        chain = profile_chain(model.blocks, model.loss_fn, model.example_input, model.target, repeats=args.repeats,
                              name=model.label, meta={"model": name, **model.config}, timing=args.timing)
        if args.profile_file:
            chain.save(args.profile_file)
    elif chain.length != len(model.blocks):
        raise InputError(f"the chain has {chain.length} stages but {name} with these sizes has {len(model.blocks)}"
                         " blocks", field="--chain")
    reference = reference_peak(chain)
    budget = budget_for("chain", chain, args.budget)
    options: dict[str, Any] = {**parse_options(args.option), "slots": args.slots}
    if args.time_limit is not None:
        options["time_limit"] = args.time_limit
    result = registry.solve("chain", chain, args.solver, budget, **options)
    out: dict[str, Any] = {"model": name, "chain": chain.name, "budget": budget, "solver": args.solver,
                           "status": result.status, "device": str(model.example_input.device),
                           "units": {"time": "ms", "memory": "bytes"}, "store_all_peak": reference}
    if not result.found:
        msg = f"{args.solver} finds no schedule within budget {budget} bytes"
        if result.min_budget is not None:
            msg += f" (smallest feasible budget: {result.min_budget} bytes)"
        out.update(message=msg, min_budget=result.min_budget, predicted=None, measured=None, grad_check=None)
        if args.json:
            print(json.dumps(out))
        else:
            print(f"memsched run: infeasible: {msg}", file=sys.stderr)
        return 1
    executor = ChainExecutor(model.blocks, model.loss_fn)
    x, target = model.example_input, model.target
    base = executor.step(store_all_schedule(chain.length), x, target, chain=chain, seed=args.seed,
                         time_repeats=args.time_repeats)
    step = executor.step(result.schedule, x, target, chain=chain, seed=args.seed, time_repeats=args.time_repeats)
    _, ref, _ = reference_step(model.blocks, model.loss_fn, x, target, seed=args.seed)
    grad_ok, grad_msg = compare_gradients(step.grads, ref)
    out.update(measured_vs_predicted(result.objective, result.peak_memory, step, base))
    out.update(
        grad_check=grad_ok, memory_method=step.memory_method, recomputations=result.schedule.recomputations(),
        loss=step.loss,
    )
    if grad_msg:
        out["grad_message"] = grad_msg
    if args.json:
        print(json.dumps(out))
        return 0
    vs = out["vs_store_all"]
    print(f"{chain.name} on {out['device']}, solver {args.solver} ({result.status}), budget {format_bytes(budget)}")
    print(f"  predicted: makespan {result.objective:.2f} ms, peak {format_bytes(result.peak_memory)}")
    print(f"  measured:  time     {step.time_ms:.2f} ms, peak {format_bytes(step.peak_memory)} "
          f"({step.memory_method})")
    print(f"  vs store-all: predicted time x{vs['predicted']['time']:.3f}, memory x{vs['predicted']['memory']:.3f};"
          f" measured time x{vs['measured']['time']:.3f}, memory x{vs['measured']['memory']:.3f}")
    print(f"  grad check: {'ok' if grad_ok else 'FAILED ' + grad_msg}")
    return 0


def _run_join(args: argparse.Namespace) -> int:
    """Join networks (siamese, triplet, clip): the join DP and its heuristics, run for real."""
    from memsched.models.join.executor import run_join

    if args.slots < 0:
        raise InputError(f"must be >= 0, got {args.slots}", field="--slots")
    solver = "dp" if args.solver in (None, "rotor") else args.solver
    out = run_join(args.model, args.budget, solver, join=args.chain, slots=args.slots, time_limit=args.time_limit,
                   options=parse_options(args.option), time_repeats=args.time_repeats, repeats=args.repeats,
                   timing=args.timing, profile_file=args.profile_file, **model_sizes(args))
    if args.json:
        print(json.dumps(out))
    if out["status"] == "infeasible":
        print(f"memsched run: infeasible: {out.get('message', '')}", file=sys.stderr)
        return 1
    if not args.json:
        pred, meas = out["predicted"], out["measured"]
        print(f"{args.model} on {out['device']}, solver {solver} ({out['status']}), budget {out['budget']} bytes")
        print(f"  predicted: makespan {pred['makespan']:.2f} ms, peak {pred['peak_memory']} bytes")
        print(f"  measured:  time     {meas['time']:.2f} ms, peak {meas['peak_memory']} bytes")
        print(f"  grad check: {'ok' if out['grad_check'] else 'FAILED'}")
    return 0


def _run_offload(args: argparse.Namespace) -> int:
    """A chain network with a host link: an offloading schedule, executed with real transfers."""
    from memsched.models.offload.executor import describe_offload, run_offload

    if args.slots < 0:
        raise InputError(f"must be >= 0, got {args.slots}", field="--slots")
    chain = _chain_file(args.chain) if args.chain else None
    out = run_offload(args.model, args.budget, bandwidth=args.bandwidth, latency=args.latency or 0.0,
                      solver=args.solver or "offload-prefix", chain=chain, sizes=model_sizes(args), seed=args.seed,
                      time_repeats=args.time_repeats, profile_repeats=args.repeats, timing=args.timing,
                      slots=args.slots, time_limit=args.time_limit, options=parse_options(args.option))
    print(json.dumps(out) if args.json else describe_offload(out))
    if out.get("predicted") is None:
        print(f"memsched run: infeasible: {out.get('message', '')}", file=sys.stderr)
        return 1
    return 0

