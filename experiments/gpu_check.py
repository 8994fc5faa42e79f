"""A few-minute accuracy check of every executor: predicted vs measured peak memory and time.

    python -m memsched.experiments.gpu_check --out results/gpu_check.json             # on a GPU machine
    python -m memsched.experiments.gpu_check --device cpu --tiny --out /tmp/check.json

Covers the four executed problems on a ResNet (ResNet-50, batch 32, 224x224 on GPU) and a GPT-2
(GPT-2 small: width 768, 12 layers, sequence 1024 on GPU); tiny versions with ``--tiny``:

- chain: rotor, periodic and store-all schedules (`models.chain.executor`);
- offload: pofo schedules over a host link of ``--bandwidth`` (`models.offload.executor`:
  pinned host buffers and a side stream on CUDA);
- graph: Checkmate-style schedules of the torch.fx training graph (`models.graph.executor`:
  greedy segmenting and checkpoint-all, fast enough for ResNet-50's graph);
- join: the join DP on a Siamese network with the same ResNet encoder and a CLIP-like
  network with the GPT-2 text encoder (`models.join.executor`).

Each problem's network is profiled once (`models.run.prepare`); each schedule is solved at three
budgets (fractions of the store-all peak), run after a warm-up, measured once for memory (on
CUDA ``torch.cuda.max_memory_allocated`` above the bytes allocated before the step; on CPU the
tensor tracker and the independent allocator probe) and timed ``--time-repeats`` times. One row
per (model, problem, solver, budget): predicted peak (bytes) and makespan (ms), measured ones,
their ratios, the gradient check. Writes the JSON and a figure next to it (same stem, ``.png``; an
``--out`` ending in .png, whose figure would replace it, is refused before any work).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from memsched.models.measure import tolerances
from memsched.models.zoo import resolve_device
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.jsonio import read_json, write_json_atomic

__all__ = ["MODEL_SIZES", "CHECKS", "evaluate_model", "main", "tolerances"]

# size -> label -> (zoo model, sizes) for the full (GPU), small (CPU) and tiny (CPU test) checks
MODEL_SIZES: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "gpu": {
        "resnet50": ("resnet50", {"batch": 32, "image_size": 224}),
        "gpt2": ("gpt2", {"batch": 4, "seq_len": 1024, "width": 768, "depth": 12}),
        "siamese": ("siamese", {"batch": 16, "image_size": 224, "encoder": 50}),
        "clip": ("clip", {"batch": 8, "image_size": 224, "encoder": 50, "seq_len": 1024, "text_width": 768,
                          "text_depth": 12}),
    },
    "small": {
        "resnet18": ("resnet18", {"batch": 8, "image_size": 64, "width": 16}),
        "gpt2": ("gpt2", {"batch": 4, "seq_len": 64, "width": 64, "depth": 6, "vocab": 512}),
        "siamese": ("siamese", {"batch": 4, "image_size": 64, "width": 16}),
        "clip": ("clip", {"batch": 4, "image_size": 64, "width": 16, "seq_len": 64, "text_width": 64,
                          "text_depth": 4, "vocab": 512}),
    },
    "tiny": {
        "resnet18": ("resnet18", {"batch": 2, "image_size": 32, "width": 4, "depth": 1}),
        "gpt2": ("gpt2", {"batch": 2, "seq_len": 8, "width": 16, "depth": 3, "vocab": 32}),
        "siamese": ("siamese", {"batch": 2, "image_size": 32, "width": 4, "depth": 1}),
        "clip": ("clip", {"batch": 2, "image_size": 32, "width": 4, "depth": 1, "seq_len": 8, "text_width": 16,
                          "text_depth": 2, "vocab": 32}),
    },
}
#: label -> problems run on it (the join models only as joins).
_ZOO_PROBLEMS = ("chain", "offload", "graph")
CHECKS: dict[str, tuple[str, ...]] = {"resnet50": _ZOO_PROBLEMS, "resnet18": _ZOO_PROBLEMS, "gpt2": _ZOO_PROBLEMS,
                                      "siamese": ("join",), "clip": ("join",)}
#: problem -> (solvers at every budget fraction, the store-all schedule run once at 100%).
SOLVERS: dict[str, tuple[tuple[str, ...], str]] = {
    "chain": (("rotor", "periodic"), "store-all"), "offload": (("pofo",), "none"),
    "graph": (("greedy",), "checkpoint-all"), "join": (("dp",), "sequential"),
}
FRACTIONS = (0.9, 0.7, 0.5)
#: the ``format`` of the check's JSON document (`--replot` reads only this one)
FORMAT = "memsched.gpu_check/2"


def evaluate_model(label: str, model_name: str, sizes: dict[str, Any], device: torch.device, *,
                   problem: str = "chain", fractions: tuple[float, ...] = FRACTIONS, repeats: int = 5,
                   time_repeats: int = 5, slots: int = 500, bandwidth: float = 12e9, clock: str = "wall",
                   log: Any = None) -> list[dict[str, Any]]:
    """Profile `model_name` for `problem` (`models.run.prepare`), then solve and execute each of
    `SOLVERS[problem]` at each budget fraction of the store-all peak (and the store-all schedule
    at 100%) with `models.run.execute_schedule`, after one warm-up run.

    Returns rows of plain values (bytes, ms; graph: the graph's time unit, ms when measured).
    ``memory_ratio`` is ``measured_peak / compared_peak``, the prediction in the measuring method's
    terms: ``tracker_predicted_peak`` of `models.run.execute_schedule` where the tracker measured
    (on CPU it leaves out the saved RNG states the tracker does not see), else ``predicted_peak``,
    the executor's prediction with everything it keeps. `bandwidth` (bytes/s): the host link of
    offloading. `clock` (CPU): "wall" or "thread".
    """
    from memsched.models.run import execute_schedule, prepare

    t0 = time.perf_counter()
    target = prepare(problem, model_name, sizes={**sizes, "device": device}, profile_repeats=repeats, clock=clock,
                     bandwidth=bandwidth if problem == "offload" else None)
    profile_s = time.perf_counter() - t0
    ref_peak = int(registry.problem_module(problem).reference_peak(target.instance))
    solvers, store_all = SOLVERS[problem]
    rows: list[dict[str, Any]] = []
    for solver, frac in [(store_all, 1.0)] + [(s, f) for s in solvers for f in fractions]:
        if solver not in registry.get_problem(problem).solvers:
            continue
        budget = int(frac * ref_peak)
        row: dict[str, Any] = {"model": label, "problem": problem, "instance": target.name, "solver": solver,
                               "budget_fraction": frac, "budget": budget, "device": str(device),
                               "profile_s": round(profile_s, 3)}
        result = registry.solve(problem, target.instance, solver, budget, slots=slots)
        row["status"] = result.status
        if not result.found:
            row["min_budget"] = result.min_budget
            rows.append(row)
            continue
        target.step(result.schedule, measure_memory=False, time_repeats=1, independent=False)  # warm-up
        step, measured = execute_schedule(target, result.schedule, time_repeats=time_repeats)
        ok, msg = measured["grad_check"], measured["grad_message"]
        compared = measured["tracker_predicted_peak"] or step.predicted_peak
        row.update(predicted_peak=step.predicted_peak, compared_peak=compared, measured_peak=step.peak_memory,
                   independent_peak=step.independent_peak, memory_ratio=_round(step.memory_ratio),
                   independent_ratio=_round(measured["independent_ratio"]),
                   predicted_ms=_round(step.predicted_makespan),
                   measured_ms=_round(step.time_ms), time_ratio=_round(step.time_ratio), grad_check=ok,
                   memory_method=step.memory_method, clock="cuda" if device.type == "cuda" else clock)
        if msg:
            row["grad_message"] = msg
        rows.append(row)
        if log is not None:
            print(_line(row), file=log, flush=True)
    if device.type == "cuda":
        del target
        torch.cuda.empty_cache()
    return rows


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(float(v), digits)


def _line(row: dict[str, Any]) -> str:
    head = f"{row['model']:>9} {row['problem']:>7} {row['solver']:>14} {row['budget_fraction']:>5.0%}"
    if "measured_peak" not in row:
        return f"{head}  {row['status']}"
    return (f"{head}  peak {row['measured_peak']:>12}"
            f" / {row['compared_peak']:>12} = {row['memory_ratio']:.3f}   time {row['measured_ms']:>9.2f}"
            f" / {row['predicted_ms']:>9.2f} ms = {row['time_ratio']:.3f}"
            f"   grads {'ok' if row['grad_check'] else 'BAD'}")


def run_check(device: torch.device, size: str, *, repeats: int, time_repeats: int, bandwidth: float = 12e9,
              problems: tuple[str, ...] | None = None, models: tuple[str, ...] | None = None,
              log: Any = sys.stdout, on_progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every (model, problem) of `MODEL_SIZES[size]` and `CHECKS` (only `problems` and `models`
    when given): the JSON document of the check.

    `on_progress` is called with the document so far (``"complete": False``) after each
    (model, problem), so that a run cut short keeps the rows it finished."""
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    pairs = [(label, name, sizes, problem) for label, (name, sizes) in MODEL_SIZES[size].items()
             if models is None or label in models
             for problem in CHECKS[label] if problems is None or problem in problems]
    for label, name, sizes, problem in pairs:
        rows += evaluate_model(label, name, sizes, device, problem=problem, repeats=repeats,
                               time_repeats=time_repeats, bandwidth=bandwidth, log=log)
        if on_progress is not None:
            on_progress(_document(rows, device, size, bandwidth, time.perf_counter() - t0, complete=False))
    return _document(rows, device, size, bandwidth, time.perf_counter() - t0, complete=True)


def _document(rows: list[dict[str, Any]], device: torch.device, size: str, bandwidth: float, wall_s: float, *,
              complete: bool) -> dict[str, Any]:
    """The check's JSON document for `rows`; `complete` is False while (model, problem) pairs remain."""
    measured = [r for r in rows if "measured_peak" in r]
    indep = [r["independent_ratio"] for r in measured if r.get("independent_ratio") is not None]
    return {
        "format": FORMAT,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})",
        "torch": torch.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "size": size,
        "complete": complete,
        "threads": torch.get_num_threads(),
        "wall_s": round(wall_s, 1),
        "units": {"time": "ms", "memory": "bytes", "bandwidth": "bytes/s"},
        "bandwidth": bandwidth,
        "summary": {
            "runs": len(measured),
            "problems": sorted({r["problem"] for r in measured}),
            "grad_check": all(r["grad_check"] for r in measured),
            "max_memory_ratio": max((r["memory_ratio"] for r in measured), default=None),
            "min_memory_ratio": min((r["memory_ratio"] for r in measured), default=None),
            "max_independent_error": max((abs(v - 1) for v in indep), default=None),
            "max_time_error": max((abs(r["time_ratio"] - 1) for r in measured), default=None),
        },
        "rows": rows,
    }


#: the keys `plot` reads from a measured row (one with ``measured_peak``)
PLOTTED = ("model", "problem", "solver", "budget_fraction", "memory_method")


def plot(doc: dict[str, Any], path: Path) -> Path:
    """The check's figure: measured / predicted memory and time per row, one colour per problem."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if "measured_peak" in r]
    colours = {"chain": "#1f77b4", "join": "#ff7f0e", "offload": "#2ca02c", "graph": "#d62728"}
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.22 * len(rows) + 1.8), sharey=True)
    labels = [f"{r['model']} {r['problem']} {r['solver']} {r['budget_fraction']:.0%}" for r in rows]
    method = rows[0]["memory_method"] if rows else ""
    time_band = 0.15 if doc["device"].startswith("cpu") else 0.10
    for ax, key, band, name in ((axes[0], "memory_ratio", 0.05, f"peak memory ({method})"),
                                (axes[1], "time_ratio", time_band, "step time (median)")):
        ax.axvspan(1 - band, 1 + band, color="#dddddd", lw=0)
        ax.axvline(1, color="#777777", ls="--", lw=0.8)
        for i, r in enumerate(rows):
            if r.get(key) is not None:
                ax.scatter([r[key]], [i], color=colours.get(r["problem"], "#333"), s=16)
            if key == "memory_ratio" and r.get("independent_ratio") is not None:
                ax.scatter([r["independent_ratio"]], [i], facecolors="none", edgecolors="#555", s=16)
        ax.set_title(f"{name}, band +-{band:.0%}", fontsize=8.5)
        ax.set_xlabel("measured / predicted", fontsize=8)
        ax.grid(alpha=0.3, axis="x")
    axes[0].set_yticks(range(len(rows)))
    axes[0].set_yticklabels(labels, fontsize=6.5)
    axes[0].invert_yaxis()
    circles = "; open circles: independent memory method (CPU)" if any(
        r.get("independent_ratio") is not None for r in rows) else ""
    fig.suptitle(f"gpu_check on {doc['device']} (torch {doc['torch']}, {doc['date'][:10]}){circles}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def read_check(path: Path) -> dict[str, Any]:
    """The check's JSON document at `path` (``--replot``). A missing or unreadable file, invalid JSON, a
    document that is not the check's (another ``format``) or lacks what `plot` reads (``rows``, a list of
    objects, a measured one with the `PLOTTED` keys; ``device``, ``torch``, ``date``) is an `InputError`
    naming the file and ``--out``."""
    try:
        doc = read_json(path)
    except InputError as err:
        raise InputError(err.message, path=str(path), field="--out") from None
    found = doc.get("format") if isinstance(doc, dict) else None
    if found != FORMAT:
        raise InputError(f"not a gpu_check JSON (format {found!r}, expected {FORMAT!r})", path=str(path),
                         field="--out")
    for key, kind, what in (("rows", list, "a list of rows"), ("device", str, "a string"), ("torch", str, "a string"),
                            ("date", str, "a string")):
        if not isinstance(doc.get(key), kind):
            raise InputError(f"its {key!r} must be {what}, got {doc.get(key)!r}"[:200], path=str(path), field="--out")
    for k, row in enumerate(doc["rows"]):
        if not isinstance(row, dict):
            raise InputError(f"rows[{k}] must be an object, got {row!r}"[:200], path=str(path), field="--out")
        if "measured_peak" in row and not all(key in row for key in PLOTTED):
            missing = [key for key in PLOTTED if key not in row]
            raise InputError(f"rows[{k}] lacks {', '.join(missing)}", path=str(path), field="--out")
        if "measured_peak" in row and (isinstance(row["budget_fraction"], bool)
                                       or not isinstance(row["budget_fraction"], (int, float))):
            raise InputError(f"rows[{k}].budget_fraction must be a number, got {row['budget_fraction']!r}"[:200],
                             path=str(path), field="--out")
    return doc


def main(argv: list[str] | None = None) -> int:
    """Run every executor at three budgets, write the JSON (``--out``) and its figure (.png); exit 0, 1 when a gradient
    check fails, 2 on bad input before any work (one line: an --out whose figure would replace it, or with
    --replot an --out that is not a readable gpu_check JSON)."""
    # the scripts' parser: one line and exit 2 on a usage error
    from memsched.experiments.benchtable import figure_beside
    from memsched.experiments.script_args import ScriptParser

    parser = ScriptParser(prog="python -m memsched.experiments.gpu_check", description=__doc__,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="results/gpu_check.json", help="JSON file to write (figure: same stem, .png)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    parser.add_argument("--size", choices=sorted(MODEL_SIZES), default=None,
                        help="model sizes (default: gpu on cuda, small on cpu)")
    parser.add_argument("--tiny", action="store_true", help="same as --size tiny (tests)")
    parser.add_argument("--problems", default=None, help="comma-separated subset of chain,offload,graph,join")
    parser.add_argument("--models", default=None, help="comma-separated subset of the size's models")
    parser.add_argument("--bandwidth", default="12GB/s", help="host link of the offload checks")
    parser.add_argument("--repeats", type=int, default=5, help="profiling repetitions per block")
    parser.add_argument("--time-repeats", type=int, default=5, help="timed executions per schedule (median)")
    parser.add_argument("--replot", action="store_true", help="run nothing: redraw the figure of --out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        figure = figure_beside(out, ".png", "--out", table=".json")  # before any work: not over the JSON
        replotted = read_check(out) if args.replot else None
    except InputError as err:
        print(f"gpu_check: error: {err}", file=sys.stderr)
        return 2
    if replotted is not None:
        print(f"figure: {plot(replotted, figure)}")
        return 0
    from memsched.solvers.units import parse_bandwidth

    device = resolve_device(args.device)
    size = "tiny" if args.tiny else (args.size or ("gpu" if device.type == "cuda" else "small"))
    problems = tuple(args.problems.split(",")) if args.problems else None
    if device.type == "cuda":  # full-precision matmuls, deterministic convolutions: comparable gradients
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = run_check(device, size, repeats=args.repeats, time_repeats=args.time_repeats,
                    bandwidth=parse_bandwidth(args.bandwidth), problems=problems,
                    models=tuple(args.models.split(",")) if args.models else None,
                    on_progress=lambda partial: write_json_atomic(out, partial))
    write_json_atomic(out, doc)
    plot(doc, figure)
    print(f"summary: {json.dumps(doc['summary'])} -> {out}, {figure}")
    return 0 if doc["summary"]["grad_check"] else 1


if __name__ == "__main__":
    sys.exit(main())
