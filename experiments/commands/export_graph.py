"""`memsched export-graph MODEL -o FILE`: a zoo network's training graph for Problem 2.

Traces the network with torch.fx and writes a networkx node-link JSON (the format Checkmate
exports and Moccasin reads): one forward node per operation (or per block with
``--granularity module``), the loss, and a backward node per forward node, with compute costs
in MFLOP (``--cost flops``), roofline ms (``--cost roofline:a100``) or measured ms, and output
sizes in bytes. The counted cost models trace fake tensors: exact sizes, nothing allocated.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._checks import check_outputs
from ._common import set_help
from .profile import (
    MODEL_HELP,
    PROFILE_REPEATS,
    _import_models,
    add_cost_option,
    add_model_options,
    check_model,
    counted_sizes,
    fits_in_memory,
    model_inputs,
)


def register(subparsers: Any) -> None:
    """Add the ``export-graph`` subcommand (zoo network -> node-link training graph JSON)."""
    p = subparsers.add_parser("export-graph", help="trace a zoo network into a training graph (node-link JSON)",
                              description=__doc__)
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="graph file to write")
    p.add_argument("--granularity", choices=("op", "module"), default="op", help="one node per op, or per block")
    p.add_argument("--deps", choices=("checkmate", "saved"), default="checkmate",
                   help="backward dependencies: Checkmate's (forward node and its inputs) or what autograd saves")
    p.add_argument("--ram", choices=("output", "tape"), default="output",
                   help="cost_ram of a forward node: its output, or its output plus what autograd saves")
    add_model_options(p)
    add_cost_option(p, "flops")
    # a counted cost model (the default) traces fake CPU tensors (`counted_sizes`); --cost measured runs on a device
    set_help(p, "--device", "cpu or cuda with --cost measured (default: cuda when present); the counted cost models "
             "(flops, the default, and roofline:*) trace fake CPU tensors: leave it out or give cpu")
    set_help(p, "--timing", "with --cost measured: time each node inside the graph executor's store-all step "
             "(in_step, the default on every device) or each op alone (isolated); refused with a counted --cost")
    set_help(p, "--repeats", f"with --cost measured: timed repetitions per node (median; {PROFILE_REPEATS} when left "
             "out); refused with a counted --cost")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Trace the model and write its training graph to --output; exit 0, 2 on bad input."""
    check_model(args.model)  # before importing torch (seconds)
    check_outputs([("--output", args.output)], model_inputs(args.model))  # not the factory's source file
    _import_models()
    from memsched.models.graph.export import export_training_graph

    sizes = counted_sizes(args, "export-graph")  # --repeats and --timing given with a counted --cost: refused
    sizes.pop("granularity", None)  # the chain commands' --granularity (block|layer); this one is op|module
    with fits_in_memory():
        graph = export_training_graph(args.model, cost=args.cost, granularity=args.granularity, deps=args.deps,
                                      ram=args.ram, out=args.output,
                                      repeats=PROFILE_REPEATS if args.repeats is None else args.repeats,
                                      timing=getattr(args, "timing", None) or "in_step", **sizes)
    print(f"wrote {args.output}: {graph.n} nodes")
    return 0
