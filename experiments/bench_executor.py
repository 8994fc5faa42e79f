"""Executor accuracy on CPU: measured vs predicted peak memory and step time, every executed problem.

    python -m memsched.experiments.bench_executor [--size small|tiny] [--problems chain,join,offload,graph]
                                                  [--threads 1] [--out results/executor_accuracy.csv]

Networks (`gpu_check.MODEL_SIZES`, `CHECKS`): a small ResNet-18 and a small GPT-2 for
chain, offload and graph; for join a Siamese network with the same ResNet encoder and a CLIP-like
network (ResNet image branch, GPT-2 text branch). Each goes through the one end-to-end run of
`models.run` (`prepare`: profile -> chain / join, or torch.fx export -> graph with measured costs;
`execute_schedule`), one profile per network and problem, then every solver of `SOLVERS` at each
budget fraction of the store-all peak (the store-all schedule of the problem once, at 100%).
Every schedule is run once as a warm-up, watched once by the tensor tracker, once by the
independent allocator probe (`models.alloc_probe`) and the gradient check, then timed
``--time-repeats`` times (median, ms).

What is compared (bytes, ms):
- memory, tracker: the `LiveTensorTracker` peak against the simulator's peak under the tracker's
  own overheads (``tracker_predicted_peak``); probe: the allocator's peak against the simulator's
  peak under the allocator's overheads (the instance as profiled: kernel scratch buffers
  included, `models.chain.overheads`);
- time: the median step time against the simulator's makespan (the profiled op times);
- offload on CPU: the run is synchronous (one op at a time, transfers are NumPy copies), so
  predictions are the sequential replay's (`models.offload.executor.sequential_replay`) over the
  CPU link measured by `models.offload.values.measure_link` (bytes/s, latency), not a nominal
  PCIe link.

With one thread the CPU clock is the thread's CPU time (other processes sharing the cores do not
inflate it; graphs too); `--clock wall` uses wall time. The 1-minute load average is recorded per
row. Issue #16 targets: median time ratio within 15%, memory within 5% by both methods, gradients
equal in every run. Prints the rows, then min / median / max of each ratio per problem and model.

A bad argument (``--threads 0``, a negative ``--time-limit``, an ``--out`` that is a folder or
cannot be written) is one line and exit 2 before any profiling; Ctrl-C is one line and exit 130:
``--out`` stays as it was, the (network, problem) cells finished before it are kept in ``<out
stem>.partial.csv`` and the same command run again resumes from them (`benchtable.resumable`), printing
their rows too. The CSV is written through a temporary file renamed into place. A Ctrl-C while torch is
imported (a second or so) is one line and 130 as well: this module imports torch and the models only
once the arguments are checked, inside `main`'s handling of interrupts (`interrupts.script_main`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import check_out, guarded, positive, resumable, settings_of, write_csv
from memsched.experiments.interrupts import script_main
from memsched.experiments.script_args import ScriptParser

COLUMNS = ("model", "problem", "instance", "nodes", "solver", "budget_fraction", "budget", "status", "predicted_peak",
           "tracker_predicted_peak", "measured_peak", "independent_peak", "memory_ratio", "independent_ratio",
           "predicted_ms", "measured_ms", "time_ratio", "recomputations", "grad_check", "device", "memory_method",
           "clock", "bandwidth", "latency_s", "load_1min", "torch", "threads")
#: problem -> (the store-all schedule, run at 100%; the solvers run at every budget fraction)
SOLVERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "chain": ("store-all", ("periodic", "rotor")),
    "join": ("store-all", ("sequential", "dp")),
    "offload": ("none", ("pofo",)),
    "graph": ("checkpoint-all", ("dtr", "checkmate")),
}
FRACTIONS = (0.9, 0.75, 0.6)


def _row(r: dict[str, Any]) -> str:
    """The printed line of a run's row (bytes, ms), from the row alone (a row read back from a partial file prints
    as when it ran)."""
    head = f"{r['model']:>9} {r['problem']:>7} {r['solver']:>14} {r['budget_fraction']:>4.0%}"
    if r.get("measured_peak") is None:
        return f"{head}  {r['status']}"
    ind = "" if r["independent_ratio"] is None else f" / probe {r['independent_ratio']:.3f}"
    return (f"{head}  peak {r['measured_peak']:>10} = {r['memory_ratio']:.3f}{ind}   "
            f"time {r['measured_ms']:>8.2f} / {r['predicted_ms']:>8.2f} ms = {r['time_ratio']:.3f}   "
            f"grads {'ok' if r['grad_check'] else 'BAD'}")


def _predictions(step: Any) -> tuple[Any, Any, Any]:
    """(predicted peak for the probe, for the tracker, predicted ms) that the step's ratios use."""
    if getattr(step, "synchronous", False):  # offload on CPU: the sequential replay
        return step.sequential_peak, step.tracker_sequential_peak, step.sequential_makespan
    return step.predicted_peak, step.tracker_predicted_peak, step.predicted_makespan


def evaluate(label: str, name: str, sizes: dict[str, Any], problem: str, *, repeats: int, time_repeats: int,
             clock: str, time_limit: float, fractions: tuple[float, ...] = FRACTIONS,
             rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One network, one problem: the store-all schedule at 100%, every solver at every budget fraction; each
    row (the keys of `COLUMNS`) appended to `rows` (when given) as soon as it is measured, so that a caller
    interrupted keeps the finished ones. Returns this call's rows."""
    import torch
    from memsched.models.run import execute_schedule, prepare
    from memsched.solvers import registry

    link: dict[str, Any] = {}
    if problem == "offload":
        from memsched.models.offload.values import measure_link

        bandwidth, latency = measure_link(torch.device("cpu"), clock=clock)
        link = {"bandwidth": bandwidth, "latency": latency}
    target = prepare(problem, name, sizes={**sizes, "device": "cpu"}, profile_repeats=repeats, clock=clock, **link)
    reference = int(registry.problem_module(problem).reference_peak(target.instance))
    inst = target.instance
    nodes = getattr(inst, "n", None) or getattr(inst, "length", None) or getattr(inst, "lengths", None)
    store_all, solvers = SOLVERS[problem]
    mine: list[dict[str, Any]] = []
    for solver, frac in [(store_all, 1.0)] + [(s, f) for s in solvers for f in fractions]:
        budget = int(frac * reference)
        row: dict[str, Any] = {"model": label, "problem": problem, "instance": target.name, "nodes": str(nodes),
                               "solver": solver, "budget_fraction": frac, "budget": budget, "clock": clock,
                               "bandwidth": link.get("bandwidth"), "latency_s": link.get("latency"),
                               "torch": torch.__version__, "threads": torch.get_num_threads()}
        result = registry.solve(problem, inst, solver, budget, time_limit=time_limit)
        row["status"] = result.status
        if result.found:
            target.step(result.schedule, measure_memory=False, time_repeats=1, independent=False)  # warm-up
            step, measured = execute_schedule(target, result.schedule, time_repeats=time_repeats)
            rec = getattr(result.schedule, "recomputations", None)
            seq = getattr(result.schedule, "sequence", None)
            pred_peak, tracker_peak, pred_ms = _predictions(step)
            row.update(predicted_peak=pred_peak, tracker_predicted_peak=tracker_peak, measured_peak=step.peak_memory,
                       independent_peak=step.independent_peak, memory_ratio=_round(step.memory_ratio),
                       independent_ratio=_round(step.independent_ratio), predicted_ms=_round(pred_ms),
                       measured_ms=_round(step.time_ms), time_ratio=_round(step.time_ratio),
                       recomputations=rec() if callable(rec) else (None if seq is None else len(seq) - len(set(seq))),
                       grad_check=measured["grad_check"], device=step.device, memory_method=step.memory_method,
                       load_1min=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None)
        mine.append(row)
        if rows is not None:
            rows.append(row)
        print(_row(row), flush=True)
    return mine


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(float(v), digits)


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (problem, model): runs, min / median / max of the time, tracker and probe ratios, and
    the gradient checks that passed."""
    out = []
    keys = sorted({(r["problem"], r["model"]) for r in rows if r.get("measured_peak") is not None})
    for problem, model in keys:
        got = [r for r in rows
               if r["problem"] == problem and r["model"] == model and r.get("measured_peak") is not None]
        entry: dict[str, Any] = {"problem": problem, "model": model, "runs": len(got),
                                 "grads_ok": sum(bool(r["grad_check"]) for r in got)}
        for key in ("time_ratio", "memory_ratio", "independent_ratio"):
            vals = [r[key] for r in got if r.get(key) is not None]
            entry[key] = (min(vals), statistics.median(vals), max(vals)) if vals else None
        out.append(entry)
    return out


def _fmt(t: tuple[float, float, float] | None) -> str:
    return "n/a" if t is None else f"{t[0]:.3f} / {t[1]:.3f} / {t[2]:.3f}"


def main(argv: list[str] | None = None) -> int:
    """Run the chain, join, offload and graph executors on small networks; print measured vs predicted peak
    (bytes) and step time (ms) and a min / median / max summary; write the CSV; exit 0 (2 on a bad argument,
    130 on Ctrl-C: the CSV as it was, the finished rows kept beside it for a rerun to resume from), also while
    torch is imported (one line, `interrupts.script_main`: torch is imported once the arguments are checked)."""
    return script_main("bench_executor", lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    """`main`: the arguments checked (no torch needed), then `_main` under `benchtable.guarded`."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("small", "tiny"), default="small")
    parser.add_argument("--problems", default="chain,join,offload,graph",
                        help="comma-separated: chain, join, offload, graph")
    parser.add_argument("--threads", type=positive(int), default=1, help="torch intra-op threads")
    parser.add_argument("--repeats", type=positive(int), default=21, help="profiling repetitions per op / node")
    parser.add_argument("--time-repeats", type=positive(int), default=21, help="timed executions per schedule")
    parser.add_argument("--time-limit", type=positive(float), default=20.0, help="exact solvers' limit (s)")
    parser.add_argument("--clock", choices=("wall", "thread"), default=None,
                        help="CPU clock: thread CPU time (default with one thread) or wall")
    parser.add_argument("--out", default="results/executor_accuracy.csv")
    args = parser.parse_args(argv)
    problems = [p.strip() for p in args.problems.split(",") if p.strip()]
    if not problems or any(p not in SOLVERS for p in problems):
        print(f"bench_executor: --problems: comma-separated, each one of {', '.join(SOLVERS)}", file=sys.stderr)
        return 2
    return guarded("bench_executor", lambda: _main(args, problems))


def _main(args: argparse.Namespace, problems: list[str]) -> int:
    """The body of `main`: --out checked before any work, every network and problem evaluated, the summary
    printed and the CSV written; on Ctrl-C the finished (network, problem) cells are kept beside --out and a
    rerun of the same command resumes from them (`benchtable.resumable`, which prints their lines too)."""
    import torch  # once the arguments are checked: a usage error needs no torch (a second or so)
    from memsched.experiments.gpu_check import CHECKS, MODEL_SIZES

    out = Path(args.out)
    check_out(out)
    torch.set_num_threads(args.threads)
    clock = args.clock or ("thread" if args.threads == 1 else "wall")
    print(f"CPU, {args.threads} thread(s), clock: {clock}, load average {os.getloadavg()[0]:.2f}")
    with resumable(out, COLUMNS, {**settings_of(args), "problems": problems}, ("model", "problem"),
                   line=_row) as table:
        for label, (name, sizes) in MODEL_SIZES[args.size].items():
            for problem in problems:
                if problem in CHECKS.get(label, ()) and table.kept(label, problem) is None:
                    table.add(*evaluate(label, name, sizes, problem, repeats=args.repeats,
                                        time_repeats=args.time_repeats, clock=clock, time_limit=args.time_limit))
        rows = table.rows
        _summarise(rows)
        write_csv(rows, out, COLUMNS)
    print(f"-> {out}")
    return 0


def _summarise(rows: list[dict[str, Any]]) -> None:
    """Print the min / median / max ratios of `rows` per problem and network."""
    print("\nratios min / median / max (tracker and probe each against the prediction under its own overheads)")
    for s in summary(rows):
        print(f"{s['problem']:>7} {s['model']:>9}  runs {s['runs']:>2}  time {_fmt(s['time_ratio'])}   "
              f"tracker {_fmt(s['memory_ratio'])}   probe {_fmt(s['independent_ratio'])}   "
              f"grads {s['grads_ok']}/{s['runs']}")


if __name__ == "__main__":
    sys.exit(main())
