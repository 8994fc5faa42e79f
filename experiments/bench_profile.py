"""Benchmark of shape-exact profiling (docs: `models.costs`, `models.chain.profiler`).

    python -m memsched.experiments.bench_profile [--quick] [--out results/bench_profile.csv]

Each case builds a zoo network at a paper's size on fake tensors and profiles it (a chain, as
`memsched profile --cost ...`) or traces its training graph (`memsched export-graph --cost
...`), in a fresh Python process so that its wall time and peak resident memory (``ru_maxrss``,
MiB: what building and profiling needed, imports included) are its own; the seconds exclude the
imports and the one-time import of ``torch._dynamo`` that the first ``FakeTensorMode`` triggers. Prints a table and
writes one CSV row per case: kind, model, sizes, cost model, wall seconds, CPU seconds of the
process (insensitive to other processes sharing the cores), the 1-minute load average when the
case ended, peak RSS, the target (if any) and whether the wall time met it, stages or nodes, and
the store-all peak (bytes) of the instance.

Targets (issue 15): ResNet-152 at batch 32 / 224 px as a chain in < 30 s, VGG-16 at batch 256
/ 224 px as a graph in < 60 s, each with a peak RSS < 2 GiB. ``--quick`` runs only those two.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from memsched.experiments.benchtable import check_out, guarded, resumable, settings_of, write_csv
from memsched.experiments.script_args import ScriptParser

RSS_TARGET_MIB = 2048
# (kind, model, sizes, cost, target seconds or None)
CASES: list[tuple[str, str, dict[str, Any], str, float | None]] = [
    ("chain", "resnet152", {"batch": 32, "image_size": 224}, "roofline:a100", 30.0),
    ("graph", "vgg16", {"batch": 256, "image_size": 224}, "flops", 60.0),
    ("chain", "vgg16", {"batch": 256, "image_size": 224}, "roofline:v100", None),
    ("chain", "gpt2_medium", {"batch": 8, "seq_len": 1024}, "roofline:a100", None),
    ("chain", "unet", {"batch": 32, "image_size": (416, 608)}, "flops", None),
    ("chain", "lstm", {"batch": 64, "seq_len": 100, "width": 1024}, "flops", None),
]
FIELDS = ["kind", "model", "sizes", "cost", "seconds", "cpu_seconds", "load_avg", "peak_rss_mib", "target_s", "met",
          "n", "store_all_peak"]

_CHILD = r"""
import json, resource, sys, time
kind, model, sizes, cost = json.loads(sys.argv[1])
if "image_size" in sizes and isinstance(sizes["image_size"], list):
    sizes["image_size"] = tuple(sizes["image_size"])
from memsched.models.chain.profiler import profile_model
from memsched.models.graph.export import export_training_graph
from memsched.solvers import chain, graph
from torch._subclasses.fake_tensor import FakeTensorMode
FakeTensorMode()  # its first use imports torch._dynamo (seconds): one-time, excluded like the imports
t0, c0 = time.perf_counter(), time.process_time()
if kind == "chain":
    inst, _ = profile_model(model, cost=cost, **sizes)
    n, reference_peak = inst.length, chain.reference_peak
else:
    inst = export_training_graph(model, cost=cost, **sizes)
    n, reference_peak = inst.n, graph.reference_peak
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"seconds": seconds, "cpu": cpu, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "n": n, "peak": int(reference_peak(inst))}))
"""


def run_case(kind: str, model: str, sizes: dict[str, Any], cost: str) -> dict[str, Any]:
    """Seconds (building and profiling, imports excluded), peak RSS (MiB), size and store-all peak of one case."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([kind, model, sizes, cost])],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} {model} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Profile each case in a fresh process; print a table, write the CSV (``--out``: seconds, peak RSS,
    target met); exit 0 (2 on a bad argument, 130 on Ctrl-C: the CSV as it was, the finished rows
    kept beside it for a rerun to resume from)."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only the two targets")
    parser.add_argument("--out", default="results/bench_profile.csv", help="CSV to write")
    args = parser.parse_args(argv)
    return guarded("bench_profile", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked, each case profiled, the table printed and written; on Ctrl-C the
    rows finished so far are kept beside --out and a rerun resumes from them (`benchtable.resumable`)."""
    check_out(args.out)
    cases = [c for c in CASES if c[4] is not None] if args.quick else CASES
    print(f"{'kind':<6} {'model':<12} {'sizes':<34} {'cost':<14} {'seconds':>8} {'CPU s':>7} {'RSS MiB':>8} "
          f"{'target':>7} {'met':>4} {'n':>5} {'store-all peak':>15}")
    with resumable(args.out, FIELDS, settings_of(args), ("kind", "model", "sizes", "cost"), line=_line) as table:
        for kind, model, sizes, cost, target in cases:
            if table.kept(kind, model, json.dumps(sizes), cost) is None:  # else printed by `table` (`line`)
                table.add(_case_row(kind, model, sizes, cost, target))
        out = write_csv(table.rows, args.out, FIELDS)
    print(f"wrote {out}")
    return 0


def _case_row(kind: str, model: str, sizes: dict[str, Any], cost: str, target: float | None) -> dict[str, Any]:
    """Run one case (`run_case`), print its line and return its CSV row (seconds, MiB, bytes)."""
    r = run_case(kind, model, sizes, cost)
    met = "" if target is None else str(r["seconds"] < target and r["rss"] < RSS_TARGET_MIB).lower()
    row = {"kind": kind, "model": model, "sizes": json.dumps(sizes), "cost": cost,
           "seconds": round(r["seconds"], 2), "cpu_seconds": round(r["cpu"], 2),
           "load_avg": round(os.getloadavg()[0], 1), "peak_rss_mib": round(r["rss"], 1), "target_s": target or "",
           "met": met, "n": r["n"], "store_all_peak": r["peak"]}
    print(_line(row), flush=True)
    return row


def _line(row: dict[str, Any]) -> str:
    """The printed line of a case's row (s, MiB, GiB), from the row alone (a row read back from a partial file
    prints as when it ran)."""
    return (f"{row['kind']:<6} {row['model']:<12} {row['sizes']:<34} {row['cost']:<14} {row['seconds']:>8.2f} "
            f"{row['cpu_seconds']:>7.2f} {row['peak_rss_mib']:>8.1f} {row['target_s']:>7} {row['met']:>4} "
            f"{row['n']:>5} {row['store_all_peak'] / 2**30:>11.2f} GiB")


if __name__ == "__main__":
    raise SystemExit(main())
