"""`memsched hrevolve L --level SLOTS,WRITE,READ ...`: H-Revolve on a storage hierarchy.

An abstract model (Herrmann & Pallez): a homogeneous adjoint chain of L steps, forward cost
u_f and backward cost u_b, and storage levels given fastest first, each with a number of
slots ("inf" for unlimited), a write cost and a read cost; transfers are synchronous. Prints
the cost (optimal unless the status says otherwise) and the schedule of abstract operations (the
first 400 characters, --json gives all), written F3 (forward step 3), Fbar3 (backward step 3),
W^1(x2), R^1(x2), D^1(x2) (write, read, discard value x2 at level 1, levels numbered from 0 as
given); --json writes each as [kind, index, level] with kind F, B (= Fbar), W, R or D. When the levels' costs
are incomparable (no order makes write and read costs both non-decreasing), the DP runs on up to
120 orders of the levels; --time-limit bounds that search (the first order always completes). On a terminal a
live line on stderr shows the order being tried and the best cost so far; a Ctrl-C stops the search and prints
the best of the orders finished (exit 130).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memsched.solvers.errors import InputError
from memsched.solvers.exact.interrupt import answer_on_interrupt

from memsched.live import progress_line

from ._checks import MAX_COUNT, MAX_HREVOLVE_LENGTH, MAX_HREVOLVE_LEVELS, cost, count, seconds
from ._common import print_json, stopped_by_user

#: seconds for the search over level orders by default: the length cap keeps one order under about 20 s, the
#: 120 orders of 5 incomparable levels take minutes at l = 500
DEFAULT_TIME_LIMIT = 60.0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``hrevolve`` subcommand (H-Revolve on a storage hierarchy)."""
    p = sub.add_parser("hrevolve", help="H-Revolve: checkpointing on a storage hierarchy (abstract model)",
                       description=__doc__)
    p.add_argument("length", type=count(0, MAX_HREVOLVE_LENGTH),
                   help=f"number of forward steps l (at most {MAX_HREVOLVE_LENGTH}: the DP grows as l^3)")
    p.add_argument("--level", action="append", required=True, metavar="SLOTS,WRITE,READ",
                   help='a storage level, fastest first, e.g. "4,0,0" (memory) then "inf,2,2" (disk); at most '
                   f'{MAX_HREVOLVE_LEVELS}')
    p.add_argument("--uf", type=cost, default=1.0, help="forward step cost")
    p.add_argument("--ub", type=cost, default=1.0, help="backward step cost")
    p.add_argument("--time-limit", type=seconds, default=DEFAULT_TIME_LIMIT, metavar="S",
                   help="seconds for trying orders of levels with incomparable costs (up to 120 orders; the first "
                   f"always completes; default {DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def _level(text: str) -> tuple[int | None, float, float]:
    """One ``--level SLOTS,WRITE,READ``: slots in 0..`MAX_COUNT` or inf, costs as ``--uf`` (`cost`: finite, in
    0..1e15, so that no sum of the DP overflows a float)."""
    parts = text.split(",")
    if len(parts) != 3:
        raise InputError(f"expected SLOTS,WRITE,READ (3 fields), got {text!r}", field="--level")
    try:
        slots = None if parts[0].strip().lower() in ("inf", "unlimited") else int(parts[0])
        float(parts[1]), float(parts[2])
    except (ValueError, IndexError):
        raise InputError(f"expected SLOTS,WRITE,READ, got {text!r}", field="--level") from None
    if slots is not None and not 0 <= slots <= MAX_COUNT:
        raise InputError(f"slots must be in 0..{MAX_COUNT} (or inf), got {text!r}", field="--level")
    try:
        write, read = cost(parts[1]), cost(parts[2])
    except argparse.ArgumentTypeError as err:
        raise InputError(f"write and read costs {err} (in {text!r})", field="--level") from None
    return slots, write, read


def _shortened(text: str, limit: int = 400) -> str:
    """`text` (ops separated by spaces) cut to at most `limit` characters at an op boundary, then `` ...``."""
    if len(text) <= limit:
        return text
    return text[:limit + 1].rsplit(" ", 1)[0] + " ..."


def main(args: argparse.Namespace) -> int:
    """Solve the H-Revolve instance (l steps, storage levels, u_f, u_b) and print its cost and schedule; exit 0, 1
    infeasible, 2 bad input, 130 when a Ctrl-C stopped the search (after printing what it had)."""
    from memsched.solvers.offload.hrevolve import HRevolveInstance, solve_hrevolve

    if args.length < 0:
        raise InputError("must be >= 0", field="L")
    if len(args.level) > MAX_HREVOLVE_LEVELS:
        raise InputError(f"at most {MAX_HREVOLVE_LEVELS} storage levels (each keeps its own tables of about "
                         f"(L + 1)^2 values), got {len(args.level)}", field="--level")
    try:
        instance = HRevolveInstance(args.length, tuple(_level(t) for t in args.level), args.uf, args.ub)
    except ValueError as err:
        raise InputError(str(err)) from None
    with answer_on_interrupt(), progress_line(sys.stderr.isatty(), label="hrevolve", limit=_line_limit(args, instance)):
        result = solve_hrevolve(instance, time_limit=args.time_limit)
    if args.json:
        print_json(result.to_json(objective_key="cost"))
    else:
        print(f"status    {result.status}  [{result.scope}]")
        if result.schedule is not None:
            print(f"cost      {result.objective:.6g}")
            text = " ".join(map(str, result.schedule.ops)) if hasattr(result.schedule, "ops") else ""
            print(f"schedule  {_shortened(text)}")
    if stopped_by_user("hrevolve", result):  # what the search over level orders had is printed above
        return 130
    if result.schedule is None:
        print(f"memsched hrevolve: infeasible: {result.message}; the smallest feasible hierarchy has 1 slot "
              "(in any level)", file=sys.stderr)
        return 1
    return 0


def _line_limit(args: argparse.Namespace, instance: Any) -> float | None:
    """The seconds the progress line counts to: ``--time-limit`` when it bounds a search over several level
    orders, else None (one order runs to its end: the line shows the elapsed time)."""
    from memsched.solvers.offload.hrevolve import level_orders

    return args.time_limit if len(level_orders(instance.levels)[1]) > 1 else None
