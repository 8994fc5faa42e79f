"""General-graph executor accuracy on CPU: measured vs predicted peak memory and step time.

    python -m memsched.experiments.bench_graph_executor [--size small|tiny] [--models resnet18,gpt2]
        [--solvers checkpoint-all,dtr,checkmate] [--fractions 0.9,0.7,0.5] [--repeats 11]
        [--time-repeats 11] [--out results/graph_executor_accuracy.csv]

A small ResNet-18 and a small GPT-2 (`gpu_check.MODEL_SIZES`) are exported once each to
a training graph with measured costs (`models.graph.export`, ``timing="in_step"``: every node
timed and sized inside the graph executor's own store-all step, `models.graph.profile`; one
torch thread, the thread's CPU clock), stored beside the CSV (``<out>.<model>.json``). Each
solver's schedule at each fraction of the store-all peak (checkpoint-all once, at 100%) is run
by `models.graph.executor.GraphExecutor`: one untimed warm-up, one step watched by the tensor
tracker, one under the allocator probe (`models.alloc_probe`), then ``--time-repeats`` timed
steps (median, min and max, ms), each followed by a store-all step: ``control_ratio``, the
store-all's median time over its makespan in the same minutes, tells a load change (the
profile was taken earlier) from a misprediction. Per row (bytes, ms): the Checkmate model's
peak (the simulator, ``model_peak``), the predicted peaks of each method (the simulator plus the running node's
temporaries as profiled), the measured ones and their ratios, the predicted makespan and the
measured median, the gradient check against plain autograd, and the 1-minute load average.
Issue #16 targets: time ratio within 15%, both memory ratios within 5%, gradients equal.

A bad argument (``--repeats 0``, a negative ``--time-limit``, an ``--out`` that is a folder, or
whose CSV or graph files cannot be written) is one line and exit 2 before any export; Ctrl-C is
one line and exit 130: the CSV and the graph files stay as they were, the networks finished before
it are kept beside them (``<out stem>.partial.csv`` with their graphs, ``<out stem>.partial.<model>.json``)
and the same command run again resumes from them (`benchtable.resumable`). At the end the graph files
are moved into place, then the CSV is written through a temporary file renamed into place: its
predictions always belong to the graphs beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from memsched.experiments.benchtable import (
    check_out,
    guarded,
    partial_path,
    positive,
    resumable,
    settings_of,
    write_csv,
)
from memsched.experiments.script_args import ScriptParser

COLUMNS = ("model", "instance", "nodes", "solver", "budget_fraction", "budget", "status", "recomputations",
           "model_peak", "predicted_tracker_peak", "measured_peak", "memory_ratio", "predicted_alloc_peak",
           "independent_peak", "independent_ratio", "predicted_ms", "measured_ms", "measured_ms_min",
           "measured_ms_max", "time_ratio", "control_ratio", "grad_check", "clock", "profile_repeats",
           "time_repeats", "load_1min", "torch", "threads")
SOLVERS = ("checkpoint-all", "dtr", "checkmate")
FRACTIONS = (0.9, 0.7, 0.5)


def _load() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def evaluate(label: str, name: str, sizes: dict[str, Any], *, solvers: tuple[str, ...], fractions: tuple[float, ...],
             repeats: int, time_repeats: int, time_limit: float, store: Path | None,
             rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One network: export, then every solver at every fraction (checkpoint-all at 100%); each row (the keys
    of `COLUMNS`) appended to `rows` (when given) as soon as it is measured, so that a caller interrupted keeps
    the finished ones. Returns this call's rows."""
    import torch
    from memsched.models.chain.executor import reference_step
    from memsched.models.graph.executor import GraphExecutor
    from memsched.models.graph.export import export_training_graph
    from memsched.models.measure import compare_gradients
    from memsched.models.zoo import build_model
    from memsched.solvers import registry
    from memsched.solvers.graph import reference_peak, simulate

    model = build_model(name, device="cpu", seed=0, **sizes)
    graph = export_training_graph(model, cost="measured", ram="tape", repeats=repeats, warmup=3)
    if store is not None:
        graph.save(store)
    executor = GraphExecutor(model.blocks, model.loss_fn, graph, model.example_input)
    x, target = model.example_input, model.target
    _, ref, _ = reference_step(model.blocks, model.loss_fn, x, target, seed=0)
    reference = reference_peak(graph)
    store_all = list(range(graph.n))
    mine: list[dict[str, Any]] = []
    for solver in solvers:
        for frac in (1.0,) if solver == "checkpoint-all" else fractions:
            budget = int(frac * reference)
            row: dict[str, Any] = {"model": label, "instance": graph.name, "nodes": graph.n, "solver": solver,
                                   "budget_fraction": frac, "budget": budget, "clock": graph.meta.get("clock"),
                                   "profile_repeats": repeats, "time_repeats": time_repeats}
            result = registry.solve("graph", graph, solver, budget, time_limit=time_limit)
            row["status"] = result.status
            if result.found:
                seq = result.schedule.indices(graph)
                sim = simulate(graph, seq)
                executor.step(seq, x, target, measure_memory=False, time_repeats=1)  # warm-up
                step = executor.step(seq, x, target, seed=0, measure_time=False, independent=True)
                ok, _ = compare_gradients(step.grads, ref)
                times, control = [], []
                for _ in range(max(1, time_repeats)):  # interleaved with the store-all control
                    times.append(executor.step(seq, x, target, measure_memory=False, time_repeats=1).time_ms or 0.0)
                    control.append(executor.step(store_all, x, target, measure_memory=False,
                                                 time_repeats=1).time_ms or 0.0)
                tracker_pred = max(executor.predicted_memory(seq, sim, "tracker"))
                alloc_pred = max(executor.predicted_memory(seq, sim, "allocator"))
                median = statistics.median(times)
                row.update(recomputations=len(seq) - len(set(seq)), model_peak=sim.peak_memory,
                           predicted_tracker_peak=tracker_pred, measured_peak=step.peak_memory,
                           memory_ratio=round(step.peak_memory / tracker_pred, 4), predicted_alloc_peak=alloc_pred,
                           independent_peak=step.independent_peak,
                           independent_ratio=round((step.independent_peak or 0) / alloc_pred, 4),
                           predicted_ms=round(float(sim.makespan), 3), measured_ms=round(median, 3),
                           measured_ms_min=round(min(times), 3), measured_ms_max=round(max(times), 3),
                           time_ratio=round(median / float(sim.makespan), 4), grad_check=ok,
                           control_ratio=round(statistics.median(control) / graph.total_cpu(), 4))
            row.update(load_1min=_load(), torch=torch.__version__, threads=torch.get_num_threads())
            mine.append(row)
            if rows is not None:
                rows.append(row)
            print(_line(row), flush=True)
    return mine


def _line(r: dict[str, Any]) -> str:
    """The printed line of a run's row (bytes, ms), from the row alone (a row read back from a partial file prints
    as when it ran)."""
    head = f"{r['model']:>9} {r['solver']:>14} {r['budget_fraction']:>4.0%}"
    if r.get("measured_peak") is None:
        return f"{head}  {r['status']}"
    return (f"{head}  tracker {r['measured_peak']:>9}/{r['predicted_tracker_peak']:>9} = {r['memory_ratio']:.3f}  "
            f"probe {r['independent_peak']:>9}/{r['predicted_alloc_peak']:>9} = {r['independent_ratio']:.3f}  "
            f"time {r['measured_ms']:>7.2f} [{r['measured_ms_min']:.1f}-{r['measured_ms_max']:.1f}] / "
            f"{r['predicted_ms']:>7.2f} ms = {r['time_ratio']:.3f} (store-all now {r['control_ratio']:.3f})  "
            f"grads {'ok' if r['grad_check'] else 'BAD'}  "
            f"load {r['load_1min']}")


def main(argv: list[str] | None = None) -> int:
    """Run the graph executor's accuracy check; print the rows and a summary, write the CSV (and each
    network's graph); exit 0 (2 on a bad argument, 130 on Ctrl-C: the files as they were, the finished
    networks kept beside them for a rerun to resume from)."""
    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("small", "tiny"), default="small")
    parser.add_argument("--models", default="resnet18,gpt2", help="comma-separated labels of MODEL_SIZES[size]")
    parser.add_argument("--solvers", default=",".join(SOLVERS), help="comma-separated graph solvers")
    parser.add_argument("--fractions", default=",".join(map(str, FRACTIONS)), help="budgets, fractions of store-all")
    parser.add_argument("--repeats", type=positive(int), default=11, help="profiled store-all steps (median per node)")
    parser.add_argument("--time-repeats", type=positive(int), default=11, help="timed steps per schedule")
    parser.add_argument("--time-limit", type=positive(float), default=20.0, help="exact solvers' limit (s)")
    parser.add_argument("--out", default="results/graph_executor_accuracy.csv",
                        help="the CSV; each network's graph is written beside it (<out without .csv>.<model>.json)")
    args = parser.parse_args(argv)
    from memsched.experiments.gpu_check import MODEL_SIZES
    from memsched.solvers import registry

    labels = [m.strip() for m in args.models.split(",") if m.strip()]
    solvers = tuple(s.strip() for s in args.solvers.split(",") if s.strip())
    try:
        fractions = tuple(float(f) for f in args.fractions.split(",") if f.strip())
    except ValueError:
        fractions = ()
    known = {row[1] for row in registry.solver_table("graph")}
    bad = ([f"--models: {m!r} not one of {', '.join(MODEL_SIZES[args.size])}" for m in labels
            if m not in MODEL_SIZES[args.size]]
           + [f"--solvers: unknown {s!r}" for s in solvers if s not in known]
           + (["--fractions: comma-separated numbers in (0, 1]"] if not fractions or any(
               not 0 < f <= 1 for f in fractions) else []))
    if bad or not labels or not solvers:
        print(f"bench_graph_executor: {bad[0] if bad else 'nothing to run'}", file=sys.stderr)
        return 2
    return guarded("bench_graph_executor", lambda: _main(args, labels, solvers, fractions))


def _main(args: argparse.Namespace, labels: list[str], solvers: tuple[str, ...], fractions: tuple[float, ...]) -> int:
    """The body of `main`: --out and the graph files beside it checked before any work, every network exported
    and measured (one cell of `benchtable.resumable` per network: its rows belong to its profiled graph, kept
    with them), then the graphs moved into place, the summary printed and the CSV written."""
    import torch
    from memsched.experiments.cli import interrupts_deferred
    from memsched.experiments.gpu_check import MODEL_SIZES

    out = Path(args.out)
    check_out(out)
    stores = {label: out.with_suffix(f".{label}.json") for label in labels}
    pending = {label: partial_path(out).with_suffix(f".{label}.json") for label in labels}  # with the partial rows
    for store in [*stores.values(), *pending.values()]:
        check_out(store, "--out (its graph file)")
    torch.set_num_threads(1)
    print(f"CPU, 1 thread, load average {_load()}")
    settings = {**settings_of(args), "models": labels, "solvers": list(solvers), "fractions": list(fractions)}
    with resumable(out, COLUMNS, settings, ("model",), line=_line) as table:
        for label in labels:
            if pending[label].is_file() and table.kept(label) is not None:  # its lines printed (`line`)
                continue
            name, sizes = MODEL_SIZES[args.size][label]
            pending[label].parent.mkdir(parents=True, exist_ok=True)
            table.add(*evaluate(label, name, sizes, solvers=solvers, fractions=fractions, repeats=args.repeats,
                                time_repeats=args.time_repeats, time_limit=args.time_limit, store=pending[label]))
        with interrupts_deferred():  # the graphs and the CSV of their rows replaced together
            for label in labels:
                os.replace(pending[label], stores[label])
            write_csv(table.rows, out, COLUMNS)
    rows = table.rows
    ran = [r for r in rows if r.get("measured_peak") is not None]
    for label in labels:
        got = [r for r in ran if r["model"] == label]
        if not got:
            continue
        print(f"{label}: runs {len(got)}; time ratio min/median/max "
              + " / ".join(f"{f([r['time_ratio'] for r in got]):.3f}" for f in (min, statistics.median, max))
              + f"; within 15%: {sum(abs(r['time_ratio'] - 1) <= 0.15 for r in got)}"
              + f"; tracker within 5%: {sum(abs(r['memory_ratio'] - 1) <= 0.05 for r in got)}"
              + f"; probe within 5%: {sum(abs(r['independent_ratio'] - 1) <= 0.05 for r in got)}"
              + f"; gradients equal: {sum(bool(r['grad_check']) for r in got)}"
              + "; time ratio / store-all's at the same minutes, median "
              + f"{statistics.median(r['time_ratio'] / r['control_ratio'] for r in got):.3f}")
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
