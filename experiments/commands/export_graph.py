"""`memsched export-graph MODEL -o FILE`: a zoo network's or a factory's training graph for Problem 2.

MODEL is a zoo network or your own: a factory ``FILE.py:FUNCTION`` or ``package.module:FUNCTION``
(`models.network`, as for ``memsched profile``). Traces the network with torch.fx and writes a
networkx node-link JSON (the format Checkmate exports and Moccasin reads): one forward node per
operation (or per block with ``--granularity module``), the loss, and a backward node per forward
node, with compute costs in MFLOP (``--cost flops``), roofline ms (``--cost roofline:a100``) or
measured ms, and output sizes in bytes. The counted cost models trace fake tensors: exact sizes,
nothing allocated. A graph beyond the graph format's limits (a size over 1 PiB, or all of them together) is refused
before anything is written, under the sizing options, as ``memsched profile`` refuses such a chain.
"""

from __future__ import annotations

import argparse
from typing import Any

from memsched.solvers.errors import InputError
from memsched.solvers.units import MAX_BYTES, MAX_TIME

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
    sizing_field,
)

#: how messages word the size limit of a graph file (`Graph.check`, as its loader)
_SIZE_LIMIT = f"the graph format's limit of 1 PiB ({MAX_BYTES} bytes)"


#: the description of ``memsched export-graph --help`` (the rules in full: docs/cli.md; the implementation: this
#: module's docstring). Lines of at most 79 characters, kept as they are; the first names the factory.
DESCRIPTION = """\
Trace a zoo network or your own factory (FILE.py:FUNCTION) with torch.fx into
a training graph for the graph problem: networkx node-link JSON (the format
Checkmate exports and Moccasin reads), one forward node per operation (or per
block: --granularity module), the loss, and a backward node per forward node,
with compute costs (--cost: counted MFLOP or roofline ms on fake tensors,
nothing allocated, or measured ms) and output sizes in bytes.
Exit: 0; 2 bad input (a graph beyond the format's limit of 1 PiB is refused
before anything is written).
Details: docs/cli.md, "memsched export-graph"; the graph format: docs/graph.md.
"""


def register(subparsers: Any) -> None:
    """Add the ``export-graph`` subcommand (zoo network or factory -> node-link training graph JSON)."""
    p = subparsers.add_parser("export-graph", description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              help="trace a zoo network or a factory (FILE.py:FUNCTION) into a training graph "
                              "(node-link JSON)")
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
    from memsched.models.graph.export import export_training_graph, save_graph

    sizes = counted_sizes(args, "export-graph")  # --repeats and --timing given with a counted --cost: refused
    sizes.pop("granularity", None)  # the chain commands' --granularity (block|layer); this one is op|module
    with fits_in_memory():
        graph = export_training_graph(args.model, cost=args.cost, granularity=args.granularity, deps=args.deps,
                                      ram=args.ram,
                                      repeats=PROFILE_REPEATS if args.repeats is None else args.repeats,
                                      timing=getattr(args, "timing", None) or "in_step", **sizes)
    within_graph_format(graph, args)
    save_graph(graph, args.output)  # checked by the loader's rules again, the factory spec beside the file
    print(f"wrote {args.output}: {graph.n} nodes")
    return 0


def within_graph_format(graph: Any, args: argparse.Namespace) -> None:
    """Refuse the exported `graph` (a `solvers.graph.Graph`, sizes in bytes) when its file would be beyond the
    graph format's limits, which its loader (`Graph.from_dict`) refuses: a node's ``cost_ram`` or
    ``workspace`` above `MAX_BYTES` (1 PiB), their sum above it, or a ``cost_cpu`` above `MAX_TIME` (in
    the graph's time unit). The network's sizes caused it, so the `InputError` is one line under the
    sizing options given (`sizing_field`), as ``memsched profile`` words a chain beyond its format."""
    import numpy as np

    field, hint = sizing_field(args)
    for name in ("cost_ram", "workspace"):
        values = np.asarray(getattr(graph, name), dtype=np.int64)
        big = np.flatnonzero(values > MAX_BYTES)
        if big.size:
            v = int(big[0])
            raise InputError(f"node {graph.names[v]}: {name} = {int(values[v])} bytes exceeds {_SIZE_LIMIT}; {hint}",
                             field=field)
    total = sum(int(b) for b in graph.cost_ram) + sum(int(b) for b in graph.workspace)  # exact: Python ints
    if total > MAX_BYTES:
        raise InputError(f"the graph's node sizes add up to {total} bytes, more than {_SIZE_LIMIT}; {hint}",
                         field=field)
    cpu = np.asarray(graph.cost_cpu, dtype=float)
    slow = np.flatnonzero(~(cpu <= MAX_TIME))  # NaN too
    if slow.size:
        v = int(slow[0])
        units = graph.meta.get("units")
        unit = f" {units['time']}" if isinstance(units, dict) and units.get("time") else ""
        raise InputError(f"node {graph.names[v]}: cost_cpu = {cpu[v]:g}{unit} exceeds the graph format's limit of "
                         f"{MAX_TIME:g}{unit}; {hint}", field=field)
