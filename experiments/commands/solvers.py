"""`memsched solvers`: the solvers available per problem."""

from __future__ import annotations

import argparse

from memsched.solvers import registry

from ._common import print_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``solvers`` subcommand (list the solvers per problem)."""
    p = sub.add_parser("solvers", help="list the solvers available per problem")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the solvers of each problem with their summaries (or JSON); exit 0."""
    rows = registry.solver_table()
    if args.json:
        print_json([{"problem": p, "solver": n, "summary": s} for p, n, s in rows])
        return 0
    width = max(len(n) for _, n, _ in rows)
    current = None
    for problem, name, summary in rows:
        if problem != current:
            print(f"{problem}:")
            current = problem
        print(f"  {name:<{width}}  {summary}")
    return 0
