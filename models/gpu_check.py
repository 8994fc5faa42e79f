"""A few-minute accuracy check of the executor: predicted vs measured peak memory and time.

    python -m memsched.models.gpu_check --out results/gpu_check.json             # on a GPU machine
    python -m memsched.models.gpu_check --device cpu --tiny --out /tmp/check.json

Profiles a ResNet and a GPT-2 (modest sizes on GPU, tiny ones with ``--tiny``), solves with
store-all, periodic and rotor (when importable) at three budgets (fractions of the store-all
peak), executes each schedule as a training step and writes one row per (model, solver,
budget): predicted peak (bytes) and makespan (ms) from the simulator, measured peak and
median step time, their ratios, and whether the gradients match plain autograd.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
from memsched.models.measure import tolerances
from memsched.models.zoo import resolve_device
from memsched.solvers import registry
from memsched.solvers.chain import reference_peak

__all__ = ["MODEL_SIZES", "evaluate_model", "main", "tolerances"]

# name -> (zoo model, sizes) for the full (GPU) and tiny (CPU test) checks
MODEL_SIZES: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "gpu": {
        "resnet50": ("resnet50", {"batch": 32, "image_size": 224}),
        "gpt2": ("gpt2", {"batch": 8, "seq_len": 512, "width": 768, "depth": 12}),
    },
    "small": {
        "resnet18": ("resnet18", {"batch": 8, "image_size": 64, "width": 16}),
        "gpt2": ("gpt2", {"batch": 4, "seq_len": 64, "width": 64, "depth": 6, "vocab": 512}),
    },
    "tiny": {
        "resnet18": ("resnet18", {"batch": 2, "image_size": 32, "width": 4, "depth": 1}),
        "gpt2": ("gpt2", {"batch": 2, "seq_len": 8, "width": 16, "depth": 3, "vocab": 32}),
    },
}
SOLVERS = ("store-all", "periodic", "rotor")
FRACTIONS = (0.9, 0.7, 0.5)


def available_solvers(names: tuple[str, ...] = SOLVERS) -> list[str]:
    """The names among `names` whose solver can be imported here."""
    table = {name for _, name, _ in registry.solver_table("chain")}
    return [n for n in names if n in table]


def evaluate_model(label: str, model_name: str, sizes: dict[str, Any], device: torch.device, *,
                   solvers: list[str] | None = None, fractions: tuple[float, ...] = FRACTIONS, repeats: int = 5,
                   time_repeats: int = 3, slots: int = 500, clock: str = "wall", log: Any = None
                   ) -> list[dict[str, Any]]:
    """Profile `model_name`, then solve and execute each solver at each budget fraction
    (`models.run.prepare` / `execute_schedule`: tracker and, on CPU, independent peaks).

    Returns rows of plain values (bytes, ms). Store-all runs once, at 100% of its peak.
    `clock` (CPU): "wall" or "thread" for both profiling and execution.
    """
    from memsched.models.run import execute_schedule, prepare

    solvers = solvers if solvers is not None else available_solvers()
    t0 = time.perf_counter()
    target = prepare("chain", model_name, sizes={**sizes, "device": device}, profile_repeats=repeats, clock=clock)
    profile_s = time.perf_counter() - t0
    chain = target.instance
    ref_peak = reference_peak(chain)
    rows: list[dict[str, Any]] = []
    for solver in solvers:
        for frac in ((1.0,) if solver == "store-all" else fractions):
            budget = int(frac * ref_peak)
            row: dict[str, Any] = {"model": label, "chain": chain.name, "stages": chain.length, "solver": solver,
                                   "budget_fraction": frac, "budget": budget, "device": str(device),
                                   "profile_s": round(profile_s, 3)}
            result = registry.solve("chain", chain, solver, budget, slots=slots)
            row["status"] = result.status
            if not result.found:
                row["min_budget"] = result.min_budget
                rows.append(row)
                continue
            step, measured = execute_schedule(target, result.schedule, time_repeats=time_repeats)
            ok, msg = measured["grad_check"], measured["grad_message"]
            row.update(predicted_peak=step.predicted_peak, measured_peak=step.peak_memory,
                       independent_peak=step.independent_peak, memory_ratio=_round(step.memory_ratio),
                       predicted_ms=_round(step.predicted_makespan),
                       measured_ms=_round(step.time_ms), time_ratio=_round(step.time_ratio),
                       recomputations=result.schedule.recomputations(), grad_check=ok,
                       memory_method=step.memory_method, clock="cuda" if device.type == "cuda" else clock)
            if msg:
                row["grad_message"] = msg
            rows.append(row)
            if log is not None:
                print(_line(row), file=log, flush=True)
    return rows


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(float(v), digits)


def _line(row: dict[str, Any]) -> str:
    if "measured_peak" not in row:
        return f"{row['model']:>9} {row['solver']:>10} {row['budget_fraction']:>5.0%}  {row['status']}"
    return (f"{row['model']:>9} {row['solver']:>10} {row['budget_fraction']:>5.0%}  peak {row['measured_peak']:>12}"
            f" / {row['predicted_peak']:>12} = {row['memory_ratio']:.3f}   time {row['measured_ms']:>9.2f}"
            f" / {row['predicted_ms']:>9.2f} ms = {row['time_ratio']:.3f}"
            f"   grads {'ok' if row['grad_check'] else 'BAD'}")


def run_check(device: torch.device, size: str, *, repeats: int, time_repeats: int, log: Any = sys.stdout
              ) -> dict[str, Any]:
    """All models of `MODEL_SIZES[size]`: the JSON document of the check."""
    rows: list[dict[str, Any]] = []
    for label, (name, sizes) in MODEL_SIZES[size].items():
        rows += evaluate_model(label, name, sizes, device, repeats=repeats, time_repeats=time_repeats, log=log)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    measured = [r for r in rows if "measured_peak" in r]
    return {
        "format": "memsched.gpu_check/1",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})",
        "torch": torch.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "size": size,
        "units": {"time": "ms", "memory": "bytes"},
        "summary": {
            "runs": len(measured),
            "grad_check": all(r["grad_check"] for r in measured),
            "max_memory_ratio": max((r["memory_ratio"] for r in measured), default=None),
            "min_memory_ratio": min((r["memory_ratio"] for r in measured), default=None),
            "max_time_error": max((abs(r["time_ratio"] - 1) for r in measured), default=None),
        },
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsched.models.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="results/gpu_check.json", help="JSON file to write")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    parser.add_argument("--size", choices=sorted(MODEL_SIZES), default=None,
                        help="model sizes (default: gpu on cuda, small on cpu)")
    parser.add_argument("--tiny", action="store_true", help="same as --size tiny (tests)")
    parser.add_argument("--repeats", type=int, default=5, help="profiling repetitions per block")
    parser.add_argument("--time-repeats", type=int, default=3, help="timed executions per schedule")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    size = "tiny" if args.tiny else (args.size or ("gpu" if device.type == "cuda" else "small"))
    if device.type == "cuda":  # full-precision matmuls, deterministic convolutions: comparable gradients
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
    doc = run_check(device, size, repeats=args.repeats, time_repeats=args.time_repeats)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"summary: {json.dumps(doc['summary'])} -> {out}")
    return 0 if doc["summary"]["grad_check"] else 1


if __name__ == "__main__":
    sys.exit(main())
