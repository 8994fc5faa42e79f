"""Executor accuracy on CPU: measured vs predicted peak memory and step time, chains and graphs.

    python -m memsched.experiments.bench_executor [--size small|tiny] [--problems chain,graph]
                                                  [--threads 1] [--out results/executor_accuracy.csv]

A small ResNet-18 and a small GPT-2 (`models.gpu_check.MODEL_SIZES`) go through the one
end-to-end run of `models.run` (`prepare`: profile -> chain, or torch.fx export -> graph with
measured costs; `execute_schedule`): chains solved with store-all, periodic and rotor, graphs
with checkpoint-all, dtr and checkmate, at 90/70/50% of the store-all peak. Memory: the
live-tensor tracker's peak and the independent allocator probe's (`models.alloc_probe`),
bytes, both against the simulator's; time: the median step time (ms) against the makespan
(chains: the profiled op times; graphs: per-node times measured in isolation, ms). With one
thread the chain clock is the thread's CPU time (other processes sharing the cores do not
inflate it); `--clock wall` uses wall time. Issue targets (chains): measured peak within 10%
of predicted, step time within 15%.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

import torch
from memsched.models.gpu_check import MODEL_SIZES
from memsched.models.run import execute_schedule, prepare
from memsched.solvers import registry

COLUMNS = ("model", "problem", "instance", "nodes", "solver", "budget_fraction", "budget", "status", "predicted_peak",
           "measured_peak", "independent_peak", "memory_ratio", "independent_ratio", "predicted_ms", "measured_ms",
           "time_ratio", "recomputations", "grad_check", "device", "memory_method", "clock", "torch", "threads")
SOLVERS = {"chain": ("store-all", "periodic", "rotor"), "graph": ("checkpoint-all", "dtr", "checkmate")}
FRACTIONS = (0.9, 0.7, 0.5)


def _row(r: dict[str, Any]) -> str:
    if r.get("measured_peak") is None:
        return f"{r['model']:>9} {r['problem']:>5} {r['solver']:>14} {r['budget_fraction']:>4.0%}  {r['status']}"
    ind = "" if r["independent_ratio"] is None else f" / probe {r['independent_ratio']:.3f}"
    return (f"{r['model']:>9} {r['problem']:>5} {r['solver']:>14} {r['budget_fraction']:>4.0%}  "
            f"peak {r['measured_peak']:>10} / {r['predicted_peak']:>10} = {r['memory_ratio']:.3f}{ind}   "
            f"time {r['measured_ms']:>8.2f} / {r['predicted_ms']:>8.2f} ms = {r['time_ratio']:.3f}   "
            f"grads {'ok' if r['grad_check'] else 'BAD'}")


def evaluate(label: str, name: str, sizes: dict[str, Any], problem: str, *, repeats: int, time_repeats: int,
             clock: str, time_limit: float) -> list[dict[str, Any]]:
    """One model, one problem: every solver at every budget fraction (store-all / checkpoint-all at 100%)."""
    target = prepare(problem, name, sizes={**sizes, "device": "cpu"}, profile_repeats=repeats, clock=clock)
    reference = int(registry.problem_module(problem).reference_peak(target.instance))
    nodes = getattr(target.instance, "n", None) or getattr(target.instance, "length", None)
    rows = []
    for solver in SOLVERS[problem]:
        for frac in ((1.0,) if solver in ("store-all", "checkpoint-all") else FRACTIONS):
            budget = int(frac * reference)
            row: dict[str, Any] = {"model": label, "problem": problem, "instance": target.name, "nodes": nodes,
                                   "solver": solver, "budget_fraction": frac, "budget": budget,
                                   "clock": clock if problem == "chain" else "wall"}
            result = registry.solve(problem, target.instance, solver, budget, time_limit=time_limit)
            row["status"] = result.status
            if result.found:
                step, measured = execute_schedule(target, result.schedule, time_repeats=time_repeats)
                seq = getattr(result.schedule, "sequence", None)
                rec = (result.schedule.recomputations() if hasattr(result.schedule, "recomputations")
                       else len(seq) - len(set(seq)))
                row.update(predicted_peak=step.predicted_peak, measured_peak=step.peak_memory,
                           independent_peak=step.independent_peak, memory_ratio=_round(step.memory_ratio),
                           independent_ratio=_round(measured["independent_ratio"]),
                           predicted_ms=_round(step.predicted_makespan), measured_ms=_round(step.time_ms),
                           time_ratio=_round(step.time_ratio), recomputations=rec, grad_check=measured["grad_check"],
                           device=step.device, memory_method=step.memory_method)
            rows.append(row)
            print(_row(row), flush=True)
    return rows


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(float(v), digits)


def main(argv: list[str] | None = None) -> int:
    """Run the chain and graph executors on a small ResNet-18 and GPT-2; print measured vs predicted peak (bytes) and
    step time (ms), write the CSV; exit 0, 2 on a bad --problems."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("small", "tiny"), default="small")
    parser.add_argument("--problems", default="chain,graph", help="comma-separated: chain, graph")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=7, help="profiling repetitions per block / node")
    parser.add_argument("--time-repeats", type=int, default=5, help="timed executions per schedule")
    parser.add_argument("--time-limit", type=float, default=20.0, help="exact solvers' limit (s)")
    parser.add_argument("--clock", choices=("wall", "thread"), default=None,
                        help="CPU clock of chains: thread CPU time (default with one thread) or wall")
    parser.add_argument("--out", default="results/executor_accuracy.csv")
    args = parser.parse_args(argv)
    problems = [p.strip() for p in args.problems.split(",") if p.strip()]
    if any(p not in SOLVERS for p in problems):
        print(f"bench_executor: --problems: one of {', '.join(SOLVERS)}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    clock = args.clock or ("thread" if args.threads == 1 else "wall")
    print(f"CPU, {args.threads} thread(s), chain clock: {clock}")
    rows: list[dict[str, Any]] = []
    for label, (name, sizes) in MODEL_SIZES[args.size].items():
        for problem in problems:
            rows += evaluate(label, name, sizes, problem, repeats=args.repeats, time_repeats=args.time_repeats,
                             clock=clock, time_limit=args.time_limit)
    for problem in problems:
        measured = [r for r in rows if r["problem"] == problem and r.get("measured_peak") is not None]
        mem_ok = sum(abs(r["memory_ratio"] - 1) <= 0.10 for r in measured)
        ind_ok = sum(r["independent_ratio"] is not None and abs(r["independent_ratio"] - 1) <= 0.10 for r in measured)
        time_ok = sum(abs(r["time_ratio"] - 1) <= 0.15 for r in measured)
        print(f"{problem}: tracker peak within 10%: {mem_ok}/{len(measured)};  probe peak within 10%: "
              f"{ind_ok}/{len(measured)};  time within 15%: {time_ok}/{len(measured)};  "
              f"gradients match: {sum(bool(r['grad_check']) for r in measured)}/{len(measured)}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "torch": torch.__version__, "threads": args.threads})
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
