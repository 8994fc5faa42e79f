"""DAG partitions of a small zoo ResNet executed with torch.distributed.pipelining on gloo (CPU),
measured against the pipeline model.

    python -m memsched.experiments.bench_pipeline_dag_exec [--width 16] [--size 32] [--micro-batch 8]
                                                             [--out results/bench_pipeline_dag_exec.csv]

The network is the zoo's ResNet-18 with one residual block per stage, cut into its operations
(`models.pipeline.dag_zoo.resnet_dag`: 32 nodes, stage boundaries may fall inside a residual
block and then carry the block's input and its main path). It is profiled node by node
(`dag_runner.profile_dag`, one thread; times in thread CPU time, ``clock="cpu"``, so that other
jobs on the machine do not inflate the profile; what each node's backward keeps is measured with
``saved_tensors_hooks``), partitioned by the `dag` solver on 2 and 3 devices
(1F1B, straight, communication not charged) and, on 2 devices, cut by hand after the first
conv-bn-relu of the first residual block (a boundary inside a block, two tensors). Each
partition runs on one process per stage (gloo, one thread each) with m = 4 and m = 8
micro-batches of the same size; per row:

- ``measured_period_s`` = (T_8 - T_4) / 4 from the median wall-clock step times T_m, beside the
  simulator's period (largest stage time) and the steady-state slope of `simulate_batch`; with
  more stage processes than free cores this wall-clock figure measures CPU starvation, not the
  pipeline;
- ``measured_cpu_per_mb_s``: per stage, the thread CPU time (``time.thread_time``) its process
  spends in the stage's forward and backward calls per micro-batch (m = 8 run), and
  ``cpu_bottleneck_s``, their maximum, beside the predicted period (``cpu_ratio``; per stage
  beside ``predicted_stage_s``, the profile's F_s + B_s): the period
  the pipeline would have with a core per stage, which waiting for a core does not inflate;
- ``measured_step_s`` (m = 8) beside the simulated makespan of one batch;
- per stage, the measured peak of activations saved for backward (m = 8 run, parameters and
  buffers excluded) beside the model's stash n_s A_s, A_s from the profile's measured saves
  (max-pool's int64 indices counted, an add charged nothing; `Pipeline.stash`);
  ``saved_ratio_min`` / ``saved_ratio_max`` over the stages;
- the gradient check against one process, and the machine load (`os.getloadavg`).

Times on a shared, loaded machine are noisy: the load is in the CSV.

A bad argument (``--steps 0``, ``--width 0``, an ``--out`` that is a folder or cannot be written)
is one line and exit 2 before any profiling; Ctrl-C is one line and exit 130: ``--out`` stays
as it was, the partitions finished before it are kept in ``<out stem>.partial.csv`` and the same
command run again resumes from them (`benchtable.resumable`).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from memsched.experiments.benchtable import Resumable, check_out, guarded, positive, resumable, settings_of, write_csv
from memsched.experiments.script_args import ScriptParser
from memsched.solvers import __version__, registry
from memsched.solvers.pipeline import Partition, simulate_batch

FIELDS = ["network", "partition", "devices", "stages", "boundary_tensors", "micro_batch", "predicted_period_s",
          "predicted_slope_s", "measured_period_s", "period_ratio", "predicted_makespan_s", "measured_step_s",
          "makespan_ratio", "predicted_stage_s", "measured_cpu_per_mb_s", "cpu_bottleneck_s", "cpu_ratio",
          "predicted_stash", "measured_saved", "saved_ratio_min", "saved_ratio_max", "grad_check", "load_1min",
          "version"]


def _partitions(inst: Any, names: list[str]) -> list[tuple[str, Partition]]:
    out = []
    for P in (2, 3):
        res = registry.solve("pipeline", inst, "dag", None, devices=P)
        out.append((f"dag P={P}", res.schedule))
    cut = names.index("relu1")
    out.append(("inside block 1", Partition.from_bounds([(0, cut), (cut + 1, inst.length - 1)])))
    return out


def run(width: int, size: int, mb: int, steps: int, rows: list[dict[str, Any]] | None = None,
        table: Resumable | None = None) -> list[dict[str, Any]]:
    """Profile, partition and execute (module docstring); one row per partition (the keys of `FIELDS`),
    appended to `rows` (when given) as soon as it is measured, so that a caller interrupted keeps the
    finished ones; with `table` (`benchtable.resumable`; then `rows` is its rows), a partition it holds
    already (the same text) is not run again (its line printed by `table`, given `_line`). Returns `rows`."""
    import torch
    from memsched.models.pipeline.dag_runner import compare_dag, profile_dag, run_dag_partition
    from memsched.models.pipeline.dag_zoo import resnet_dag, sample_shape

    kwargs = {"variant": 18, "width": width, "depth": 1}
    net = resnet_dag(**kwargs)  # type: ignore[arg-type]
    shape = sample_shape(size=size)
    inst = profile_dag(net, torch.randn(mb, *shape), reps=5, clock="cpu")
    names = [name for name, _ in net.spec]
    rows = table.rows if table is not None else [] if rows is None else rows
    for label, part in _partitions(inst, names):
        if table is not None and table.kept(f"{label}: {part}") is not None:
            continue
        runs = {}
        for m in (4, 8):
            part.micro_batches = m
            r = run_dag_partition(part, net={"factory": "memsched.models.pipeline.dag_zoo:resnet_dag",
                                             "kwargs": kwargs},
                                  in_shape=shape, batch=mb * m, micro_batches=m, steps=steps, timeout_s=400)
            runs[m] = (r, compare_dag(inst, part, r))
        out4, out8 = runs[4][1], runs[8][1]
        u = inst.time_unit
        slope = (simulate_batch(inst, part, 8).makespan - simulate_batch(inst, part, 4).makespan) / 4 * u
        measured_period = (out8["measured"]["step_time_s"] - out4["measured"]["step_time_s"]) / 4
        stash, saved = out8["predicted"]["stash"], out8["measured"]["saved_activations_peak"]
        cpu = out8["measured"]["cpu_per_micro_batch_s"]
        ratios = [s / p for s, p in zip(saved, stash)]
        r = {
            "network": f"zoo resnet18 depth 1 width {width} {size}x{size}", "partition": f"{label}: {part}",
            "devices": len(part.stages), "stages": len(part.stages),
            "boundary_tensors": ";".join(map(str, out8["boundary_tensors"][1:])), "micro_batch": mb,
            "predicted_period_s": out8["predicted"]["period_s"], "predicted_slope_s": slope,
            "measured_period_s": measured_period,
            "period_ratio": round(measured_period / out8["predicted"]["period_s"], 3),
            "predicted_makespan_s": out8["predicted"]["makespan_s"],
            "measured_step_s": out8["measured"]["step_time_s"],
            "makespan_ratio": round(out8["measured"]["step_time_s"] / out8["predicted"]["makespan_s"], 3),
            "predicted_stage_s": ";".join(f"{t:.6f}" for t in out8["predicted"]["stage_times_s"]),
            "measured_cpu_per_mb_s": ";".join(f"{t:.6f}" for t in cpu), "cpu_bottleneck_s": max(cpu),
            "cpu_ratio": round(max(cpu) / out8["predicted"]["period_s"], 3),
            "predicted_stash": ";".join(map(str, stash)), "measured_saved": ";".join(map(str, saved)),
            "saved_ratio_min": round(min(ratios), 3), "saved_ratio_max": round(max(ratios), 3),
            "grad_check": bool(out4["grad_check"] and out8["grad_check"]),
            "load_1min": round(os.getloadavg()[0], 2), "version": __version__,
        }
        if table is not None:
            table.add(r)
        else:
            rows.append(r)
        print(_line(r), flush=True)
    return rows


def _line(r: dict[str, Any]) -> str:
    """The printed line of a partition's row (s), from the row alone: a row read back from a partial file prints
    as when it ran (its label: the partition's text before ``": "``)."""
    label = r["partition"].partition(": ")[0]
    return (f"{label:16s} tensors {r['boundary_tensors']:6s} period {r['predicted_period_s']:.4f} s predicted, "
            f"{r['measured_period_s']:.4f} s measured ({r['period_ratio']}x); step {r['measured_step_s']:.3f} s "
            f"vs {r['predicted_makespan_s']:.3f} s; CPU bottleneck {r['cpu_bottleneck_s']:.4f} s "
            f"({r['cpu_ratio']}x); saved/stash {r['saved_ratio_min']}..{r['saved_ratio_max']}; grads "
            f"{'ok' if r['grad_check'] else 'WRONG'}; load {r['load_1min']}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a line per partition and write the CSV (``--out``); exit 0 (2 on a bad argument,
    130 on Ctrl-C: the CSV as it was, the finished rows kept beside it for a rerun to resume from)."""
    ap = ScriptParser(description=__doc__.split("\n")[0])
    ap.add_argument("--width", type=positive(int), default=16, help="channels of the first ResNet stage")
    ap.add_argument("--size", type=positive(int), default=32, help="image height and width (pixels)")
    ap.add_argument("--micro-batch", type=positive(int), default=8, help="images per micro-batch")
    ap.add_argument("--steps", type=positive(int), default=3, help="timed steps per run (after one warm-up)")
    ap.add_argument("--out", default="results/bench_pipeline_dag_exec.csv")
    args = ap.parse_args(argv)
    return guarded("bench_pipeline_dag_exec", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: --out checked before any work, the partitions profiled and run, the CSV written
    (atomically); on Ctrl-C the rows finished so far are kept beside --out and a rerun resumes from them
    (`benchtable.resumable`)."""
    check_out(args.out)
    with resumable(args.out, FIELDS, settings_of(args), ("partition",), line=_line) as table:
        run(args.width, args.size, args.micro_batch, args.steps, table=table)
        written = write_csv(table.rows, args.out, FIELDS)
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
