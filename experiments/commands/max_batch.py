"""`memsched max-batch MODEL --memory 16GB [--max-overhead 1.2] [--solver rotor]`: the largest
batch (or image side, ``--vary image-size``) with which a zoo network trains within a memory at
a bounded overhead: Checkmate's maximum-batch-size experiment (Jain et al. MLSys 2020, Fig. 6).

Each probe builds the network at one size on fake tensors and profiles it shape-exactly
(`models.chain.profiler`, times from ``--cost``: counted FLOP or a roofline), then runs the
solver on the chain with the activation budget

    B = memory - state_factor x parameter bytes     (weights and gradients: state_factor 2)

A size fits when the solver finds a schedule within B whose makespan is at most
``max_overhead`` x the store-all makespan (sum of u_f, u_b and the loss). Sizes are searched by
doubling from 1 until one does not fit, then by bisection: this assumes that a size that fits
implies that every smaller one fits (activations grow with the batch). Exit 0 with the largest
size, 1 when even the smallest does not fit, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from memsched.solvers.errors import InputError

from .profile import ZOO_NAMES, _import_models, add_cost_option, add_model_options, counted_sizes

VARY = ("batch", "image-size")


@dataclass
class Probe:
    """One size tried: the instance's numbers (bytes, the cost model's time unit) and the verdict."""

    size: int
    fits: bool
    status: str
    budget: int
    parameter_bytes: int
    store_all_peak: int
    store_all_time: float
    makespan: float | None
    overhead: float | None
    peak_memory: int | None


def search_largest(fits: Callable[[int], bool], limit: int, tolerance: float = 0.0) -> int:
    """The largest k in 1..limit with fits(k), assuming fits is monotone (true up to some k, then
    false); 0 when fits(1) is false. Doubling, then bisection: about 2 log2(k) calls. With a
    relative `tolerance`, bisection stops once the bracket is within tolerance x k (the answer
    then fits and is at most that far below the largest)."""
    if not fits(1):
        return 0
    lo, hi = 1, None  # fits(lo) is true, fits(hi) false
    while hi is None:
        nxt = min(2 * lo, limit)
        if nxt == lo:
            return lo
        if fits(nxt):
            lo = nxt
        else:
            hi = nxt
    while hi - lo > max(1.0, tolerance * lo):
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def probe_size(model: str, sizes: dict[str, Any], *, memory: int, max_overhead: float, solver: str, cost: str,
               state_factor: float, slots: int, time_limit: float | None, size: int) -> Probe:
    """Profile `model` at `sizes` shape-exactly and solve it at the activation budget (see the module docstring)."""
    from memsched.models.chain.profiler import profile_model
    from memsched.solvers import registry
    from memsched.solvers.chain import reference_peak

    chain, _ = profile_model(model, cost=cost, **sizes)
    params = int(chain.meta.get("parameter_bytes", 0))
    budget = int(memory - state_factor * params)
    peak, total = int(reference_peak(chain)), float(chain.total_time())
    if budget <= 0:
        return Probe(size, False, "infeasible", budget, params, peak, total, None, None, None)
    result = registry.solve("chain", chain, solver, budget, slots=slots, time_limit=time_limit)
    if result.objective is None or result.status not in ("optimal", "feasible"):
        return Probe(size, False, result.status, budget, params, peak, total, None, None, None)
    overhead = float(result.objective) / total if total > 0 else 1.0
    return Probe(size, overhead <= max_overhead + 1e-9, result.status, budget, params, peak, total,
                 float(result.objective), overhead, result.peak_memory)


def register(subparsers: Any) -> None:
    """Add the ``max-batch`` subcommand (largest batch or image side that trains within --memory)."""
    p = subparsers.add_parser("max-batch", help="largest batch (or image side) that trains within a memory",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help=f"zoo model: {', '.join(ZOO_NAMES)}")
    p.add_argument("--memory", required=True, metavar="M", help='device memory ("16GB", "32GiB", bytes)')
    p.add_argument("--max-overhead", type=float, default=1.2, metavar="X",
                   help="largest allowed makespan / store-all makespan (default 1.2)")
    p.add_argument("--solver", default="rotor", help="chain solver (default rotor; store-all for no recomputation)")
    p.add_argument("--vary", choices=VARY, default="batch", help="what grows: the batch, or the image side")
    p.add_argument("--step", type=int, default=32, metavar="PX", help="image sides searched: multiples of PX (32)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="largest size tried (default: batch 65536, image side 8192 px)")
    p.add_argument("--tolerance", type=float, default=0.01, metavar="R",
                   help="stop the bisection within R x the size (default 0.01; 0 for the exact largest)")
    p.add_argument("--state-factor", type=float, default=2.0, metavar="K",
                   help="resident bytes per parameter byte: weights and gradients 2 (default), 4 with Adam")
    p.add_argument("--slots", type=int, default=500, metavar="N", help="memory slots for the solver (0: exact)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S", help="seconds per solve (exact solvers)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_model_options(p)
    add_cost_option(p, "flops")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Search the largest batch (or image side) whose schedule fits in --memory bytes with the weights; exit 0, 1 if
    none fits, 2 bad input."""
    _import_models()
    from memsched.models.costs import parse_cost
    from memsched.solvers import registry
    from memsched.solvers.units import format_bytes, parse_size

    if args.model not in ZOO_NAMES:
        raise InputError(f"unknown model {args.model!r} (one of {', '.join(ZOO_NAMES)})", field="MODEL")
    if parse_cost(args.cost).measured:
        raise InputError("max-batch profiles shape-exactly: use a counted cost model (flops, roofline:<device>)",
                         field="--cost")
    memory = parse_size(args.memory, field="--memory")
    if memory <= 0:
        raise InputError(f"must be positive, got {args.memory!r}", field="--memory")
    for name, value, low in (("--max-overhead", args.max_overhead, 1.0), ("--state-factor", args.state_factor, 0.0),
                             ("--step", args.step, 1), ("--slots", args.slots, 0), ("--tolerance", args.tolerance, 0)):
        if not value >= low:
            raise InputError(f"must be at least {low:g}, got {value}", field=name)
    registry.get_solver("chain", args.solver)
    sizes = counted_sizes(args)
    vary_batch = args.vary == "batch"
    if vary_batch and args.batch is not None:
        raise InputError("--batch is what max-batch searches; leave it out (or use --vary image-size)",
                         field="--batch")
    if not vary_batch and args.image_size is not None:
        raise InputError("--image-size is what is searched with --vary image-size; leave it out",
                         field="--image-size")
    limit = args.limit or (65536 if vary_batch else 8192 // args.step)
    if not vary_batch and args.limit:
        limit = max(1, args.limit // args.step)
    probes: list[Probe] = []

    def fits(k: int) -> bool:
        size = k if vary_batch else k * args.step
        trial = {**sizes, ("batch" if vary_batch else "image_size"): size}
        try:
            probe = probe_size(args.model, trial, memory=memory, max_overhead=args.max_overhead, solver=args.solver,
                               cost=args.cost, state_factor=args.state_factor, slots=args.slots,
                               time_limit=args.time_limit, size=size)
        except (InputError, ValueError, RuntimeError) as err:
            if isinstance(err, InputError) and (vary_batch or not probes):
                raise
            if not probes:
                raise InputError(f"{args.model} does not run at {args.vary} {size}: {err}",
                                 field="--vary" if not vary_batch else "--image-size") from None
            return False  # a size the network does not accept (too small for its pools)
        probes.append(probe)
        if not args.json:
            print(_row(probe, format_bytes), flush=True)
        return probe.fits

    if not args.json:
        print(f"{args.model}: largest {args.vary} within {format_bytes(memory)}, overhead <= x{args.max_overhead:g}, "
              f"solver {args.solver}, cost {args.cost}")
    best = search_largest(fits, limit, args.tolerance)
    best_size = best if vary_batch else best * args.step
    chosen = next((p for p in probes if p.size == best_size), None)
    if args.json:
        json.dump({"model": args.model, "vary": args.vary, "memory": memory, "max_overhead": args.max_overhead,
                   "tolerance": args.tolerance,
                   "solver": args.solver, "cost": args.cost, "state_factor": args.state_factor,
                   "largest": best_size or None, "result": asdict(chosen) if chosen else None,
                   "probes": [asdict(p) for p in probes]}, sys.stdout)
        print()
    if not best:
        print(f"memsched max-batch: infeasible: {args.model} does not train within {format_bytes(memory)} even at "
              f"{args.vary} {1 if vary_batch else args.step}", file=sys.stderr)
        return 1
    if not args.json and chosen is not None:
        state = format_bytes(args.state_factor * chosen.parameter_bytes)
        print(f"largest {args.vary}: {best_size} (overhead x{chosen.overhead:.3f}, peak "
              f"{format_bytes(chosen.peak_memory or 0)} of activations + {state} of weights and gradients)")
    return 0


def _row(p: Probe, fmt: Callable[[float], str]) -> str:
    over = f"x{p.overhead:.3f}" if p.overhead is not None else "-"
    return (f"  {p.size:>6}  {'fits' if p.fits else 'no':<4}  {p.status:<10} overhead {over:<7} "
            f"budget {fmt(max(p.budget, 0))}  store-all peak {fmt(p.store_all_peak)}")
