"""`memsched export-graph MODEL -o FILE`: a zoo network's training graph for Problem 2.

Traces the network with torch.fx and writes a networkx node-link JSON (the format Checkmate
exports and Moccasin reads): one forward node per operation (or per block with
``--granularity module``), the loss, and a backward node per forward node, with compute costs
in MFLOP (``--cost flops``) or measured ms, and output sizes in bytes.
"""

from __future__ import annotations

import argparse
from typing import Any

from .profile import ZOO_NAMES, _import_models, add_model_options, model_sizes


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("export-graph", help="trace a zoo network into a training graph (node-link JSON)",
                              description=__doc__)
    p.add_argument("model", metavar="MODEL", help=f"zoo model ({', '.join(ZOO_NAMES)})")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="graph file to write")
    p.add_argument("--cost", choices=("flops", "measured"), default="flops", help="cost_cpu: MFLOP or measured ms")
    p.add_argument("--granularity", choices=("op", "module"), default="op", help="one node per op, or per block")
    p.add_argument("--deps", choices=("checkmate", "saved"), default="checkmate",
                   help="backward dependencies: Checkmate's (forward node and its inputs) or what autograd saves")
    p.add_argument("--ram", choices=("output", "tape"), default="output",
                   help="cost_ram of a forward node: its output, or its output plus what autograd saves")
    add_model_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    _import_models()
    from memsched.models.graph.export import export_training_graph

    graph = export_training_graph(args.model, cost=args.cost, granularity=args.granularity, deps=args.deps,
                                  ram=args.ram, repeats=args.repeats, out=args.output, **model_sizes(args))
    print(f"wrote {args.output}: {graph.n} nodes")
    return 0
