"""Executor accuracy on CPU: measured vs predicted peak memory and step time.

    python experiments/bench_executor.py [--size small|tiny] [--threads 1] [--out results/executor_accuracy.csv]

A small ResNet-18 and a small GPT-2 are profiled (`models.chain.profiler`), solved with store-all,
periodic and rotor at 90/70/50% of the store-all peak, and executed (`models.chain.executor`).
Memory is the live-tensor tracker's peak (bytes), time the median time of the step (ms)
against the simulator's makespan (the sum of the profiled op times). With one thread the
clock is the thread's CPU time (other processes sharing the cores do not inflate it); `--clock
wall` uses wall time for both profile and step. Issue targets: measured
peak within 10% of predicted, step time within 15%.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch
from memsched.models.gpu_check import MODEL_SIZES, evaluate_model

COLUMNS = ("model", "chain", "stages", "solver", "budget_fraction", "budget", "status", "predicted_peak",
           "measured_peak", "memory_ratio", "predicted_ms", "measured_ms", "time_ratio", "recomputations",
           "grad_check", "device", "memory_method", "clock", "torch", "threads")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("small", "tiny"), default="small")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=7, help="profiling repetitions per block")
    parser.add_argument("--time-repeats", type=int, default=5, help="timed executions per schedule")
    parser.add_argument("--clock", choices=("wall", "thread"), default=None,
                        help="CPU clock: thread CPU time (default with one thread: robust to other load) or wall")
    parser.add_argument("--out", default="results/executor_accuracy.csv")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    clock = args.clock or ("thread" if args.threads == 1 else "wall")
    print(f"CPU, {args.threads} thread(s), clock: {clock}")
    rows = []
    print(f"{'model':>9} {'solver':>10} {'budget':>6}  measured / predicted peak (bytes)   measured / predicted time")
    for label, (name, sizes) in MODEL_SIZES[args.size].items():
        rows += evaluate_model(label, name, sizes, device, repeats=args.repeats, time_repeats=args.time_repeats,
                               clock=clock, log=sys.stdout)
    measured = [r for r in rows if "measured_peak" in r]
    mem_ok = sum(abs(r["memory_ratio"] - 1) <= 0.10 for r in measured)
    time_ok = sum(abs(r["time_ratio"] - 1) <= 0.15 for r in measured)
    print(f"peak within 10%: {mem_ok}/{len(measured)};  time within 15%: {time_ok}/{len(measured)};  "
          f"gradients match: {sum(r['grad_check'] for r in measured)}/{len(measured)}")
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
