"""Bad input, as a hostile but fair user types it (issue #14): every case is exit 2 (bad input or
usage) with exactly one line on stderr naming the file and field (or the option), no traceback,
no hang and no output file left behind; an infeasible budget is exit 1 and names the smallest
feasible budget, or says why it is not known.

The table runs in-process (`memsched.experiments.cli.main`); pipes, standard input, non-UTF-8
files and would-be hangs also run as real processes with a timeout.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import re
import signal
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data"
FILES = {"T": DATA / "examples" / "tiny.json", "H": DATA / "examples" / "homogeneous20.json",
         "G": DATA / "graphs" / "linear10.json", "J": DATA / "join" / "tiny.json",
         "P": DATA / "pipeline" / "tiny-resnet.graph.txt"}
CHAIN = json.loads(FILES["T"].read_text())
GRAPH = json.loads(FILES["G"].read_text())
JOIN = json.loads(FILES["J"].read_text())
PIPE = FILES["P"].read_text()
SCHED = {"format": "memsched.schedule/1", "problem": "chain", "length": 4, "ops": []}
HANG_S = 30  # an in-process case that runs longer than this is a hang

CASES: list[tuple[str, list[str], dict[str, Any], int, tuple[str, ...]]] = []


def case(cid: str, argv: list[str], files: dict[str, Any] | None = None, want: int = 2, *mentions: str) -> None:
    """One row: `argv` with {T} {G} {J} {P} {H} (data files) and {d} (the case's folder);
    `files` written into {d}; stderr must name each of `mentions` (default: the first file)."""
    CASES.append((cid, argv, files or {}, want, mentions))


def mut(base: Any, change) -> Any:
    data = copy.deepcopy(base)
    change(data)
    return data


def _linear(data: dict[str, Any], n: int) -> None:
    """Replace the graph by Checkmate's linear training graph of n forward nodes (2n + 1 nodes)."""
    from memsched.solvers.graph.generate import linear_graph

    data.clear()
    data.update(linear_graph(n).to_dict())


def stage0(key: str, value: Any):
    return lambda d: d["stages"][0].__setitem__(key, value)


# ---------------------------------------------------------------- chain files (solve, every field)
SOLVE = ["solve", "{d}/c.json", "--budget", "90%"]
BAD_NUMBERS = {"2**63": 2**63, "1e400": float("inf"), "nan": float("nan"), "neg": -1, "str": "1", "null": None,
               "bool": True, "10**30": 10**30, "2**51": 2**51}
for field in ("fwd_time", "bwd_time", "out_size", "tape_size", "fwd_overhead", "bwd_overhead"):
    for label, value in BAD_NUMBERS.items():
        if field.endswith("time") and label in ("2**51",):
            continue
        case(f"chain-{field}-{label}", SOLVE, {"c.json": mut(CHAIN, stage0(field, value))}, 2, "c.json",
             "stages[0]")
for field in ("fwd_time", "bwd_time"):
    case(f"chain-{field}-1e308", SOLVE, {"c.json": mut(CHAIN, stage0(field, 1e308))}, 2, "c.json", field)
case("chain-all-times-1e308", SOLVE, {"c.json": mut(CHAIN, lambda d: [s.update(fwd_time=1e308, bwd_time=1e308)
                                                                       for s in d["stages"]])}, 2, "c.json")
case("chain-sizes-add-up", SOLVE, {"c.json": mut(CHAIN, lambda d: [s.update(out_size=2**49, tape_size=2**49)
                                                                   for s in d["stages"]])}, 2, "c.json", "stages")
case("chain-size-float", SOLVE, {"c.json": mut(CHAIN, stage0("out_size", 1.5))}, 2, "c.json", "out_size")
case("chain-missing-field", SOLVE, {"c.json": mut(CHAIN, lambda d: d["stages"][0].pop("bwd_time"))}, 2, "bwd_time")
for label, value in (("2**63", 2**63), ("nan", float("nan")), ("str", "4")):
    case(f"chain-input-{label}", SOLVE, {"c.json": mut(CHAIN, lambda d, v=value: d.update(input_size=v))}, 2,
         "c.json", "input_size")
    case(f"chain-loss-{label}", SOLVE, {"c.json": mut(CHAIN, lambda d, v=value: d["loss"].update(bwd_time=v))}, 2,
         "c.json", "loss.bwd_time")
case("chain-tape-lt-out", SOLVE, {"c.json": mut(CHAIN, stage0("tape_size", 1))}, 2, "c.json", "tape_size")
case("chain-format", SOLVE, {"c.json": mut(CHAIN, lambda d: d.update(format="memsched.chain/9"))}, 2, "format")
case("chain-no-stages", SOLVE, {"c.json": mut(CHAIN, lambda d: d.update(stages=[]))}, 2, "stages")
case("chain-stage-list", SOLVE, {"c.json": mut(CHAIN, lambda d: d.update(stages=[[1, 2]]))}, 2, "stages[0]")
case("chain-loss-missing", SOLVE, {"c.json": mut(CHAIN, lambda d: d.pop("loss"))}, 2, "loss")
case("chain-meta-list", SOLVE, {"c.json": mut(CHAIN, lambda d: d.update(meta=[1]))}, 2, "meta")
case("chain-units-int", SOLVE, {"c.json": mut(CHAIN, lambda d: d["meta"].update(units=5))}, 2, "meta.units")
case("chain-time-unit", SOLVE, {"c.json": mut(CHAIN, lambda d: d["meta"]["units"].update(time="fortnight"))}, 2,
     "meta.units.time")
case("chain-time-unit-list", SOLVE, {"c.json": mut(CHAIN, lambda d: d["meta"]["units"].update(time=["ms"]))}, 2,
     "meta.units.time")
case("chain-name-object", SOLVE, {"c.json": mut(CHAIN, lambda d: d.update(name={"a": 1}))}, 2, "name")
case("chain-not-utf8", SOLVE, {"c.json": b'{"format": "memsched.chain/1", "name": "\xff"}'}, 2, "c.json", "UTF-8")
case("chain-binary", SOLVE, {"c.json": b"\xff\xfe\x00\x01"}, 2, "c.json")
case("chain-empty", SOLVE, {"c.json": ""}, 2, "c.json")
case("chain-json-list", SOLVE, {"c.json": "[1, 2]"}, 2, "c.json")
case("chain-truncated", SOLVE, {"c.json": json.dumps(CHAIN)[:200]}, 2, "c.json", "line")
case("chain-deep", SOLVE, {"c.json": '{"a":' + "[" * 100000 + "]" * 100000 + "}"}, 2, "c.json")
case("chain-L5000", SOLVE, {"c.json": mut(CHAIN, lambda d: d.update(stages=d["stages"] * 1250))}, 2, "c.json",
     "stages")
for label, link in (("bw-nan", {"bandwidth": float("nan")}), ("bw-1e400", {"bandwidth": float("inf")}),
                    ("bw-str", {"bandwidth": "12GB/s"}), ("bw-0", {"bandwidth": 0}),
                    ("latency-nan", {"bandwidth": 1e9, "latency": float("nan")}),
                    ("latency-neg", {"bandwidth": 1e9, "latency": -1}), ("not-object", [1e9])):
    case(f"host-link-{label}", ["solve", "{d}/c.json", "--budget", "90%", "--solver", "vdnn"],
         {"c.json": mut(CHAIN, lambda d, v=link: d.update(host_link=v))}, 2, "c.json", "host_link")
# integers beyond a float (json reads them exactly; 400 digits overflowed float(), 5000 are beyond Python's limit)
case("chain-int-400-digits", SOLVE, {"c.json": mut(CHAIN, stage0("fwd_time", 10**400))}, 2, "c.json",
     "stages[0]", "401 digits")
case("chain-input-int-400-digits", SOLVE, {"c.json": mut(CHAIN, lambda d: d.update(input_size=-10**400))}, 2,
     "c.json", "input_size")
LONG = json.dumps(CHAIN).replace('"fwd_time": 1.0', '"fwd_time": 1' + "0" * 5000, 1)
case("chain-int-5000-digits", SOLVE, {"c.json": LONG}, 2, "c.json", "4300 digits")
case("chain-stage-name-object", SOLVE, {"c.json": mut(CHAIN, stage0("name", {}))}, 2, "c.json", "stages[0]")
case("file-missing", ["solve", "{d}/none.json", "--budget", "1"], {}, 2, "none.json")
case("file-folder", ["solve", "{d}", "--budget", "1"], {}, 2, "directory")

# ---------------------------------------------------------------- graph, join and PipeDream files
node0 = (lambda k, v: lambda d: d["nodes"][0].__setitem__(k, v))
for field in ("cost_cpu", "cost_ram"):
    for label, value in (("2**63", 2**63), ("1e300", 1e300), ("nan", float("nan")), ("neg", -3), ("str", "x")):
        case(f"graph-{field}-{label}", ["solve", "{d}/g.json", "--budget", "90%"],
             {"g.json": mut(GRAPH, node0(field, value))}, 2, "g.json", field)
for label, value in (("str", "x"), ("number", 0), ("list", [True])):
    case(f"graph-backward-{label}", ["solve", "{d}/g.json", "--budget", "90%"],
         {"g.json": mut(GRAPH, node0("backward", value))}, 2, "g.json", "nodes[0].backward")
case("graph-order-dicts", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d["graph"].update(order=[{"a": 1}] * 21))}, 2, "graph.order")
case("graph-name-list", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d["graph"].update(name=[1]))}, 2, "graph.name")
for label, meta, field in (("passes-unknown-node", {"passes": {"nope": {"f0": 8}}}, "graph.meta.passes.nope"),
                           ("passes-bytes-text", {"passes": {"f1": {"f0": "8"}}}, "graph.meta.passes.f1.f0"),
                           ("passes-list", {"passes": [1]}, "graph.meta.passes"),
                           ("temporaries-negative", {"temporaries": {"tracker": {"f0": -1}}},
                            "graph.meta.temporaries.tracker.f0"),
                           ("random-nodes-unknown", {"random_nodes": ["nope"]}, "graph.meta.random_nodes[0]"),
                           ("rng-bytes-inf", {"rng_state_bytes": float("inf")}, "graph.meta.rng_state_bytes")):
    case(f"graph-meta-{label}", ["solve", "{d}/g.json", "--budget", "90%"],
         {"g.json": mut(GRAPH, lambda d, m=meta: d["graph"].update(meta={**d["graph"].get("meta", {}), **m}))}, 2,
         "g.json", field)
case("graph-int-400-digits", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, node0("cost_cpu", 10**400))}, 2, "g.json", "cost_cpu")
case("graph-undirected", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d.update(directed=False))}, 2, "g.json", "directed")
case("graph-edges-and-links", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d.update(edges=[{"source": 1, "target": 0}]))}, 2, "g.json", "edges")
case("graph-id-null", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, node0("id", None))}, 2, "g.json", "nodes[0].id")
case("graph-node-name-object", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, node0("name", {}))}, 2, "g.json", "nodes[0].name")
case("graph-meta-list", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d["graph"].update(meta=[1]))}, 2, "g.json", "graph.meta")
case("graph-cycle", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d["links"].append({"source": 20, "target": 0}))}, 2, "g.json", "links")
case("graph-dangling", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d["links"].append({"source": 0, "target": 99}))}, 2, "g.json", "links")
case("graph-link-end-list", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": mut(GRAPH, lambda d: d["links"][0].update(target=[1]))}, 2, "g.json", "links[0].target")
case("graph-2001-nodes-dtr", ["solve", "{d}/g.json", "--budget", "50%", "--solver", "dtr"],
     {"g.json": mut(GRAPH, lambda d: _linear(d, 1000))}, 2, "g.json", "nodes")
case("graph-1001-nodes-checkmate", ["solve", "{d}/g.json", "--budget", "50%", "--solver", "checkmate"],
     {"g.json": mut(GRAPH, lambda d: _linear(d, 500))}, 2, "g.json", "nodes")
case("graph-not-utf8", ["solve", "{d}/g.json", "--budget", "90%"],
     {"g.json": b'{"nodes": [{"id": "\xff"}], "links": []}'}, 2, "g.json", "UTF-8")
jstage = (lambda k, v: lambda d: d["branches"][0]["stages"][0].__setitem__(k, v))
for field, value in (("out_size", 2**63), ("fwd_time", 1e308), ("tape_size", float("nan")), ("bwd_time", -1)):
    case(f"join-{field}", ["solve", "{d}/j.json", "--budget", "90%"], {"j.json": mut(JOIN, jstage(field, value))}, 2,
         "j.json", field)
case("join-input-2**63", ["solve", "{d}/j.json", "--budget", "90%"],
     {"j.json": mut(JOIN, lambda d: d["branches"][0].update(input_size=2**63))}, 2, "j.json", "input_size")
case("join-loss-inf", ["solve", "{d}/j.json", "--budget", "90%"],
     {"j.json": mut(JOIN, lambda d: d["loss"].update(bwd_time=float("inf")))}, 2, "j.json", "loss.bwd_time")
case("join-no-branches", ["solve", "{d}/j.json", "--budget", "90%"],
     {"j.json": mut(JOIN, lambda d: d.update(branches=[]))}, 2, "branches")
PART = ["partition", "{d}/p.txt", "--devices", "2", "--memory", "200%"]
for label, old, new in (("nan", "forward_compute_time=0.410", "forward_compute_time=nan"),
                        ("1e400", "activation_size=4194304.000", "activation_size=1e400"),
                        ("2**63", "activation_size=4194304.000", f"activation_size={2**63}"),
                        ("1e308", "backward_compute_time=0.950", "backward_compute_time=1e308"),
                        ("neg", "parameter_size=1792.000", "parameter_size=-5"),
                        ("word", "forward_compute_time=0.410", "forward_compute_time=fast"),
                        ("unknown-key", "parameter_size=1792.000", "parameter_size=1792.000, color=3"),
                        ("no-fields", "-- forward_compute_time=0.410", "-- ")):
    case(f"pipe-{label}", PART, {"p.txt": PIPE.replace(old, new, 1)}, 2, "p.txt", "line")
case("pipe-not-utf8", PART, {"p.txt": PIPE.encode() + b"\xff\xfe"}, 2, "p.txt", "UTF-8")
case("pipe-cycle", PART, {"p.txt": PIPE + "\tnode3 -- node2\n"}, 2, "p.txt", "cycle")
case("pipe-param-sizes", ["partition", "{d}/c.json", "--devices", "2", "--memory", "200%"],
     {"c.json": mut(CHAIN, lambda d: d["meta"].update(param_sizes=[1, 2]))}, 2, "c.json", "meta.param_sizes")

# ---------------------------------------------------------------- budgets, numbers and options
for text in ("1e400", "nan", "inf", "-5", "0", "nan%", "inf%", "1e400%", "5XB", "", "1e30", "1e19", "0.5",
             "99999999999999999999999", "10 parsecs", "%"):
    case(f"budget-{text or 'empty'}", ["solve", "{T}", "--budget", text, "--solver", "rotor"], {}, 2, "--budget")
case("plot-dpi-below-a-pixel", ["plot", "{T}", "{d}/s.json", "-o", "{d}/x.png", "--dpi", "5"], {"s.json": SCHED}, 2,
     "--dpi")
case("max-batch-step-huge", ["max-batch", "resnet18", "--memory", "1GB", "--vary", "image-size", "--batch", "2",
                             "--step", "99999999999999999999"], {}, 2, "--step")
case("max-batch-limit-huge", ["max-batch", "resnet18", "--memory", "1GB", "--limit", str(2**24 + 1)], {}, 2, "--limit")
case("max-batch-time-limit", ["max-batch", "resnet18", "--memory", "1GB", "--time-limit", "-1"], {}, 2, "--time-limit")
case("max-batch-overhead-inf", ["max-batch", "resnet18", "--memory", "1GB", "--max-overhead", "inf"], {}, 2,
     "--max-overhead")
case("budget-percent-below-a-byte", ["solve", "{T}", "--budget", "0.1%", "--solver", "rotor"], {}, 2, "--budget",
     "reference peak", "less than one byte")
case("memory-percent-below-a-byte", ["partition", "{T}", "--devices", "2", "--memory", "0.001%"], {}, 2, "--memory",
     "less than one byte")
for opt, value in (("--time-limit", "-1"), ("--time-limit", "0"), ("--time-limit", "nan"), ("--time-limit", "inf"),
                   ("--time-limit", "1e400"), ("--time-limit", "x"), ("--slots", "-1"), ("--slots", "x"),
                   ("--slots", "1e3"), ("--latency", "nan"), ("--latency", "-1"), ("--latency", "inf"),
                   ("--bandwidth", "0"), ("--bandwidth", "nan"), ("--bandwidth", "1e400"), ("--bandwidth", "-1GB/s"),
                   ("--bandwidth", "1e-300"), ("--bandwidth", "fast")):
    case(f"solve{opt}={value}", ["solve", "{T}", "--budget", "90%", f"{opt}={value}"], {}, 2, opt)
# a slot count above the budget keeps exact sizes; on a budget of 873 MB their table is refused
case("solve-slots-huge", ["solve", str(DATA / "examples" / "cnn12.json"), "--budget", "50%", "--slots", "1000000000"],
     {}, 2, "--slots")
for solver, item in (("periodic", "foo=1"), ("periodic", "segments=-1"), ("periodic", "segments=0"),
                     ("periodic", "segments=x"), ("periodic", "segments=1e400"), ("periodic", "segments=NaN"),
                     ("periodic", "segments=99"), ("periodic", "segments=true"), ("rotor", "foo=1"),
                     ("rotor", "slots=3"), ("rotor", "time_limit=3"), ("milp", "workers=-1"), ("milp", "backend=7"),
                     ("cpsat", "verbose=maybe"), ("store-all", "x=1"), ("periodic", "=1"), ("periodic", "noeq"),
                     ("cpsat", "memory_gb=abc"), ("milp", "memory_gb=-1"), ("milp", "memory_gb=[1]")):
    case(f"option-{solver}-{item}", ["solve", "{T}", "--budget", "90%", "--solver", solver, "--option", item], {}, 2,
         "--option")
case("option-unknown-lists-valid", ["solve", "{T}", "--budget", "90%", "--solver", "periodic", "--option", "seg=2"],
     {}, 2, "--option", "segments")
case("option-offload", ["solve", "{T}", "--budget", "90%", "--bandwidth", "1GB/s", "--solver", "vdnn", "--option",
                        "lookahead=-2"], {}, 2, "--option lookahead")
case("option-graph", ["solve", "{G}", "--budget", "90%", "--solver", "checkmate-approx", "--option", "samples=1e9"],
     {}, 2, "--option samples")
case("option-graph-memory", ["solve", "{G}", "--budget", "90%", "--solver", "checkmate", "--option", "memory_gb=abc"],
     {}, 2, "--option memory_gb")
case("solver-unknown", ["solve", "{T}", "--budget", "90%", "--solver", "nope"], {}, 2, "--solver", "rotor")
# a latency nothing uses was ignored; a pipeline file failed with "devices ... got None", a flag solve does not have
case("solve-latency-alone", ["solve", "{T}", "--budget", "90%", "--latency", "0.1"], {}, 2, "--latency", "--bandwidth")
case("solve-pipeline", ["solve", "{P}", "--budget", "90%"], {}, 2, "tiny-resnet.graph.txt", "memsched partition")
case("flag-unknown", ["solve", "{T}", "--budget", "90%", "--nope"], {}, 2, "--nope")
case("bandwidth-on-graph", ["solve", "{G}", "--budget", "90%", "--bandwidth", "1GB/s"], {}, 2, "--bandwidth")
for label, argv in (("devices-0", ["--devices", "0"]), ("devices-huge", ["--devices", "100000000"]),
                    ("devices-slow", ["--devices", "900000", "--replication"]), ("mb-0", ["--micro-batches", "0"]),
                    ("mb-huge", ["--micro-batches", "1000000000000"]), ("wf-nan", ["--weight-factor", "nan"]),
                    ("wf-inf", ["--weight-factor", "inf"]), ("wf-neg", ["--weight-factor", "-1"]),
                    ("tl-neg", ["--time-limit", "-1"]), ("schedule", ["--schedule", "zz"]),
                    ("bandwidth", ["--bandwidth", "nan"])):
    case(f"partition-{label}", ["partition", "{P}", "--devices", "2", "--memory", "200%", *argv], {}, 2,
         argv[0] if label != "devices-slow" else "--devices")
for memory in ("1e400", "nan", "0", "-1%", "1e20"):
    case(f"partition-memory-{memory}", ["partition", "{P}", "--devices", "2", "--memory", memory], {}, 2, "--memory")
for item in ("foo=1", "replication=maybe", "devices=3", "micro_batches=x"):
    case(f"partition-option-{item}", ["partition", "{P}", "--devices", "2", "--memory", "200%", "--option", item],
         {}, 2, "--option")

# ---------------------------------------------------------------- outputs
for label, flag, path in (("out-folder", "-o", "{d}"), ("out-missing-folder", "-o", "{d}/no/s.json"),
                          ("out-under-file", "-o", "{d}/f/s.json"), ("plot-folder", "--plot", "{d}/"),
                          ("plot-missing-folder", "--plot", "{d}/no/x.png"), ("plot-ext", "--plot", "{d}/x.xyz")):
    case(f"solve-{label}", ["solve", "{T}", "--budget", "90%", flag, path], {"f": "x"}, 2)
case("plot-out-folder", ["plot", "{T}", "{d}/s.json", "-o", "{d}"], {"s.json": SCHED}, 2)
case("plot-out-missing", ["plot", "{T}", "{d}/s.json", "-o", "{d}/no/x.png"], {"s.json": SCHED}, 2, "--output")
case("plot-dpi-huge", ["plot", "{T}", "{d}/s.json", "-o", "{d}/x.png", "--dpi", "100000"], {"s.json": SCHED}, 2,
     "--dpi")
case("plot-dpi-0", ["plot", "{T}", "{d}/s.json", "-o", "{d}/x.png", "--dpi", "0"], {"s.json": SCHED}, 2, "--dpi")
case("figures-out-file", ["figures", "--results", "{d}", "--out", "{d}/f"], {"f": "x"}, 2, "--out")
case("figures-results-missing", ["figures", "--results", "{d}/none"], {}, 2, "--results")
case("figures-only", ["figures", "--results", "{d}", "--only", "zz"], {}, 2, "--only")

# ---------------------------------------------------------------- schedules against instances
SIM = ["simulate", "{T}", "{d}/s.json"]
case("sim-length-text", SIM, {"s.json": {**SCHED, "length": "4"}}, 2, "s.json", "length", "a str")
case("sim-op-extra-item", SIM, {"s.json": {**SCHED, "ops": [["F_ck", 0, 1]]}}, 2, "s.json", "ops[0]")
for label, t in (("1e17", 1e17), ("nan", float("nan")), ("inf", float("inf")), ("neg", -1)):  # a time in range
    case(f"sim-offload-not-before-{label}", ["simulate", "{d}/c.json", "{d}/s.json", "--budget", "13"],
         {"c.json": mut(CHAIN, lambda d: d.update(host_link={"bandwidth": 2000})),
          "s.json": {**SCHED, "problem": "offload", "ops": [{"op": "F_ck", "stage": 0},
                                                             {"op": "Off", "value": "a", "index": 0,
                                                              "not_before": t}]}}, 2, "s.json",
         "ops[1].not_before")
case("profile-unused-size", ["profile", "resnet18", "--seq-len", "5", "-o", "{d}/p.json"], {}, 2, "--seq-len")
case("sim-length", SIM, {"s.json": {**SCHED, "length": 7}}, 2, "s.json", "length")
for problem in ("graph", "join", "bogus", 5):
    case(f"sim-problem-{problem}", SIM, {"s.json": {**SCHED, "problem": problem}}, 2, "s.json", "problem")
case("sim-chain-on-graph", ["simulate", "{G}", "{d}/s.json"], {"s.json": SCHED}, 2, "s.json", "problem")
case("sim-chain-on-join", ["simulate", "{J}", "{d}/s.json"], {"s.json": SCHED}, 2, "s.json", "problem")
case("sim-chain-on-pipe", ["simulate", "{P}", "{d}/s.json"], {"s.json": SCHED}, 2, "s.json", "problem")
case("sim-join-lengths", ["simulate", "{J}", "{d}/s.json"],
     {"s.json": {**SCHED, "problem": "join", "length": None, "lengths": [9, 9]}}, 2, "s.json", "lengths")
case("sim-offload-length", ["simulate", "{T}", "{d}/s.json", "--bandwidth", "1GB/s"],
     {"s.json": {**SCHED, "problem": "offload", "length": 3}}, 2, "s.json", "length")
case("sim-graph-node", ["simulate", "{G}", "{d}/s.json"],
     {"s.json": {"format": "memsched.schedule/1", "problem": "graph", "sequence": [999]}}, 2, "s.json", "sequence")
case("sim-graph-node-dict", ["simulate", "{G}", "{d}/s.json"],
     {"s.json": {"format": "memsched.schedule/1", "problem": "graph", "sequence": [{"a": 1}]}}, 2, "s.json",
     "sequence")
case("sim-stage-inf", SIM, {"s.json": {**SCHED, "ops": [{"op": "F_all", "stage": 1e400}]}}, 2, "s.json", "ops[0]")
case("sim-op-unknown", SIM, {"s.json": {**SCHED, "ops": [{"op": "Jump", "stage": 0}]}}, 2, "s.json", "ops[0]")
case("sim-incomplete", SIM, {"s.json": SCHED}, 2, "s.json", "invalid schedule")
case("sim-not-utf8", SIM, {"s.json": b'{"ops": ["\xff"]}'}, 2, "s.json", "UTF-8")
case("sim-folder", ["simulate", "{T}", "{d}"], {}, 2, "directory")
case("sim-format", SIM, {"s.json": {**SCHED, "format": "other/1"}}, 2, "s.json", "format")
case("sim-no-schedule", SIM, {"s.json": {"status": "infeasible", "schedule": None}}, 2, "s.json", "schedule")
case("sim-budget-nan", ["simulate", "{T}", "{d}/s.json", "--budget", "nan"], {"s.json": SCHED}, 2, "--budget")
case("plot-length", ["plot", "{T}", "{d}/s.json", "-o", "{d}/x.png"], {"s.json": {**SCHED, "length": 9}}, 2,
     "s.json", "length")

# ---------------------------------------------------------------- hrevolve, sweep
for label, args in (("uf-nan", ["5", "--level", "2,0,0", "--uf", "nan"]), ("uf-neg", ["5", "--level", "2,0,0",
                    "--uf", "-1"]), ("ub-inf", ["5", "--level", "2,0,0", "--ub", "inf"]),
                    ("slots-nan", ["5", "--level", "nan,0,0"]), ("write-nan", ["5", "--level", "2,nan,0"]),
                    ("four-fields", ["5", "--level", "2,0,0,0"]), ("two-fields", ["5", "--level", "2,0"]),
                    ("huge-L", ["100000000", "--level", "3,0,0", "--level", "inf,1,1"]),
                    ("slow-L", ["100000", "--level", "1000,0,0", "--level", "inf,1,1"]),
                    ("write-1e400", ["5", "--level", "2,1e400,0"]), ("slots-huge", ["5", "--level", "1e12,0,0"]),
                    ("L-word", ["five", "--level", "2,0,0"])):
    case(f"hrevolve-{label}", ["hrevolve", *args], {}, 2)
case("sweep-missing", ["sweep", "{d}/none.toml"], {}, 2, "none.toml")
case("sweep-not-utf8", ["sweep", "{d}/x.toml"], {"x.toml": b'name = "\xff"\n'}, 2, "x.toml", "UTF-8")
case("sweep-bad-toml", ["sweep", "{d}/x.toml"], {"x.toml": "name = \n"}, 2, "x.toml")
case("sweep-workers-0", ["sweep", "default", "--workers", "0", "--list"], {}, 2, "--workers")
if importlib.util.find_spec("torch") is not None:  # the PyTorch commands fail before importing torch
    SIZES = ["--batch", "2", "--image-size", "16", "--width", "4", "--repeats", "1"]
    for label, argv, mention in (
            ("profile-out-missing", ["profile", "resnet18", *SIZES, "-o", "{d}/no/x.json"], "--output"),
            ("profile-out-folder", ["profile", "resnet18", *SIZES, "-o", "{d}"], "--output"),
            ("profile-vocab-0", ["profile", "gpt2", "--vocab", "0"], "--vocab"),
            ("profile-threads-huge", ["profile", "resnet18", "--threads", "100000"], "--threads"),
            ("profile-batch-0", ["profile", "resnet18", "--batch", "0"], "--batch"),
            ("profile-repeats-0", ["profile", "resnet18", "--repeats", "0"], "--repeats"),
            ("profile-model", ["profile", "resnet9000"], "MODEL"),
            ("run-time-repeats-0", ["run", "resnet18", "--budget", "90%", "--time-repeats", "0"], "--time-repeats"),
            ("run-time-limit-nan", ["run", "resnet18", "--budget", "90%", "--time-limit", "nan"], "--time-limit"),
            ("run-solver-unknown", ["run", "resnet18", "--budget", "90%", "--problem", "graph", "--solver", "rotor",
                                    *SIZES], "--solver"),
            ("run-profile-file", ["run", "resnet18", "--budget", "90%", "--profile-file", "{d}/no/p.json", *SIZES],
             "--profile-file"),
            ("export-out-missing", ["export-graph", "resnet18", "-o", "{d}/no/x.json", *SIZES], "--output"),
            ("export-out-folder", ["export-graph", "resnet18", "-o", "{d}", *SIZES], "--output")):
        case(label, argv, {}, 2, mention)
case("no-command", [], {}, 2)
case("unknown-command", ["explode"], {}, 2, "explode")


def _expand(argv: list[str], folder: Path) -> list[str]:
    names = {k: str(v) for k, v in FILES.items()}
    return [a.format(d=folder, **names) for a in argv]


def _write(folder: Path, files: dict[str, Any]) -> None:
    for name, content in files.items():
        target = folder / name
        if isinstance(content, bytes):
            target.write_bytes(content)
        elif isinstance(content, str):
            target.write_text(content)
        else:
            target.write_text(json.dumps(content))


class _Hang(Exception):
    pass


def _run(argv: list[str]) -> tuple[int | str, str, str]:
    """(exit code, stdout, stderr) of `memsched ARGV` in-process; "hang" past HANG_S seconds."""
    from memsched.experiments.cli import main

    def alarm(*_: Any) -> None:
        raise _Hang

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HANG_S)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code: int | str = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    except _Hang:
        code = "hang"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


def test_the_table_is_large_enough():
    assert len(CASES) >= 150
    assert len({c[0] for c in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize("cid, argv, files, want, mentions", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, cid, argv, files, want, mentions):
    _write(tmp_path, files)
    before = set(tmp_path.rglob("*"))
    code, _, err = _run(_expand(argv, tmp_path))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == want, f"exit {code}, stderr: {err}"
    assert "Traceback" not in err and "internal error" not in err
    assert len(lines) == 1, f"expected one line on stderr, got {lines}"
    for text in mentions:
        assert text in lines[0], f"{text!r} not named in {lines[0]!r}"
    assert set(tmp_path.rglob("*")) == before, "an output file was written"


# ---------------------------------------------------------------- real processes
def _memsched(*argv: str, stdin: Any = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsched.experiments.cli", *argv], stdin=stdin,
                          capture_output=True, text=True, timeout=timeout)


def test_reads_an_instance_and_a_schedule_from_standard_input(tmp_path):
    with open(FILES["T"], "rb") as f:
        piped = _memsched("solve", "-", "--budget", "90%", "--json", stdin=f)
    assert piped.returncode == 0, piped.stderr
    direct = json.loads(_run(["solve", str(FILES["T"]), "--budget", "90%", "--json"])[1])
    assert json.loads(piped.stdout)["makespan"] == direct["makespan"]
    (tmp_path / "s.json").write_text(piped.stdout)
    sim = subprocess.run([sys.executable, "-m", "memsched.experiments.cli", "simulate", str(FILES["T"]), "/dev/stdin"],
                         input=piped.stdout, capture_output=True, text=True, timeout=60)  # a real pipe
    assert sim.returncode == 0, sim.stderr


def test_run_checks_the_solver_name_before_profiling(monkeypatch):
    """An unknown --solver is refused before the network is profiled (seconds of work, and torch's
    profiler writing to stderr)."""
    pytest.importorskip("torch")
    import memsched.models.run as model_run

    def profiled(*args: Any, **kwargs: Any) -> None:
        pytest.fail("the network was profiled before the solver name was checked")

    monkeypatch.setattr(model_run, "run", profiled)
    code, _, err = _run(["run", "resnet18", "--budget", "90%", "--problem", "graph", "--solver", "rotor"])
    assert code == 2 and "--solver" in err and "rotor" in err


def test_bad_input_from_a_pipe_is_one_line():
    res = subprocess.run([sys.executable, "-m", "memsched.experiments.cli", "solve", "-", "--budget", "90%"],
                         input=b"\xff\xfe not json", capture_output=True, timeout=60)
    err = res.stderr.decode()
    assert res.returncode == 2 and len(err.strip().splitlines()) == 1 and "UTF-8" in err


@pytest.mark.parametrize("argv", [
    ["hrevolve", "100000", "--level", "1000,0,0", "--level", "inf,1,1"],
    ["partition", str(FILES["P"]), "--devices", "900000", "--memory", "200%", "--replication"],  # L^2 P^2 steps
])
def test_would_be_hangs_stop_at_once(argv):
    res = _memsched(*argv, timeout=30)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- infeasible: every solver (#14.2)
def _solver_rows() -> list[tuple[str, str]]:
    from memsched.solvers import registry

    return [(p, n) for p, n, _ in registry.solver_table()]


def _instance_argv(problem: str, solver: str) -> list[str]:
    path = FILES["H"] if solver == "revolve" else {"chain": FILES["T"], "offload": FILES["T"], "graph": FILES["G"],
                                                   "join": FILES["J"], "pipeline": FILES["P"]}[problem]
    return [str(path)] + (["--bandwidth", "1GB/s"] if problem == "offload" else [])


@pytest.mark.parametrize("problem, solver", _solver_rows())
def test_infeasible_names_the_smallest_budget(problem, solver):
    budget = 1
    argv = _instance_argv(problem, solver)
    if problem == "pipeline":
        cmd = ["partition", argv[0], "--devices", "2", "--memory", str(budget), "--solver", solver]
    else:
        cmd = ["solve", *argv, "--budget", str(budget), "--solver", solver]
    code, _, err = _run([*cmd, "--time-limit", "2"])
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    match = re.search(r"smallest feasible (?:budget|memory): (\d+) (?:bytes|[A-Za-z]+)", lines[0])
    if match is None:  # then it must say why the budget is not known
        assert re.search(r"smallest feasible budget unknown: \S", lines[0]), lines[0]
        return
    need = int(match.group(1))
    assert need > budget
    from memsched.solvers import registry

    if getattr(registry.get_solver(problem, solver), "exact_layer", False):
        return  # the search found its schedule at `need` itself (seconds per run): not repeated here
    flag = "--memory" if problem == "pipeline" else "--budget"
    at = [*cmd[: cmd.index(flag) + 1], str(need), *cmd[cmd.index(flag) + 2:], "--time-limit", "2"]
    assert _run(at)[0] == 0, f"{solver} names {need} bytes but finds no schedule there"


# ---------------------------------------------------------------- the shared readers directly
def test_check_number_limits():
    from memsched.solvers.errors import InputError
    from memsched.solvers.units import MAX_BYTES, MAX_TIME, check_number

    assert check_number(MAX_BYTES, path="f", field="x", integer=True) == MAX_BYTES
    assert check_number(MAX_TIME, path="f", field="t", time=True) == MAX_TIME
    for value, kw in ((MAX_BYTES + 1, {"integer": True}), (MAX_TIME * 2, {"time": True}), (True, {}),
                      (float("nan"), {}), (-1e-9, {}), ("3", {}), (2.5, {"integer": True})):
        with pytest.raises(InputError, match=r"^f: x: "):
            check_number(value, path="f", field="x", **kw)


def test_a_fifo_is_read_once(tmp_path):
    import os
    import threading

    from memsched.solvers.jsonio import is_stream, read_json, read_text

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(FILES["T"].read_text()))
    writer.start()
    assert is_stream(fifo)
    first = read_text(fifo)  # a second read of the pipe would block: it must come from the cache
    writer.join(timeout=10)
    assert read_json(fifo)["name"] == "tiny" and read_text(fifo) == first
