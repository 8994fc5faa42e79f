"""Execute a pipeline partition for real with ``torch.distributed.pipelining`` and compare it with
the model of `solvers.pipeline` (docs/pipeline.md).

- A small ``nn.Sequential`` network (`make_mlp`: blocks ``ReLU -> Linear``, so the only tensor a
  block saves for its backward is its input, which is exactly the stash of the model:
  the inputs of the stage's layers) is profiled layer by layer (`profile_sequential`) into a
  `solvers.pipeline.Pipeline` (times in ms, sizes in bytes, for one micro-batch).
- A partition (from any pipeline solver) is run on P processes (``torch.multiprocessing`` spawn,
  gloo on CPU, nccl on GPU): each rank wraps its stage in a ``PipelineStage`` and steps a
  ``Schedule1F1B`` or ``ScheduleGPipe`` with an MSE loss.
- Checks: the gradients of every rank against a single-process run of the whole batch
  (``grad_check``), the measured step time against the simulator's batch makespan, the measured
  period (the slope (T(2m) - T(m)) / m of the median step times with m and 2m micro-batches of
  the same size, `slope_period`: fill, drain and fixed per-step costs cancel) against the
  simulator's slope, and the measured peak of activations saved for backward on each stage (counted with
  ``torch.autograd.graph.saved_tensors_hooks``, shared storages once, in an extra step that is not
  timed) against the model's stash term ``n_s * A_s`` and against `predicted_saved` (the stash plus,
  on the last stage, the MSE loss's saved output and target), which it equals. On CPU the total
  per-process memory is not measured (it is dominated by the interpreter); on CUDA
  ``torch.cuda.max_memory_allocated`` is reported too.

Command line: ``python -m memsched.models.pipeline.runner --devices 2 --layers 8 --width 256``.
Ctrl-C, SIGTERM and SIGHUP (unless ignored) stop it at any moment after it starts: the ranks are
killed (`distributed.run_ranks`), one line is printed and it exits 130.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import statistics
import sys
import time
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.exact.memory import USABLE_SHARE, available_bytes
from memsched.solvers.pipeline import Partition, Pipeline, simulate_batch
from memsched.solvers.pipeline.limits import MAX_DP_STEPS, dp_steps, layer_limit
from memsched.solvers.processes import terminate_as_interrupt
from torch import nn

from .distributed import RankError, check_grads, free_port, init_rank, run_ranks, timed_steps


# ---------------------------------------------------------------------------- model and profile
def make_mlp(layers: int = 8, width: int = 256, in_dim: int = 64, out_dim: int = 16, seed: int = 0) -> nn.Sequential:
    """A deterministic MLP: ``layers`` blocks (ReLU, Linear); the first maps in_dim -> width,
    the last width -> out_dim."""
    torch.manual_seed(seed)
    dims = [in_dim] + [width] * (layers - 1) + [out_dim]
    return nn.Sequential(*[nn.Sequential(nn.ReLU(), nn.Linear(dims[k], dims[k + 1])) for k in range(layers)])


def mlp_dims(layers: int, width: int, in_dim: int = 64, out_dim: int = 16) -> list[int]:
    """The feature sizes of `make_mlp`'s network: its input, then each block's output."""
    return [in_dim] + [width] * (layers - 1) + [out_dim]


def mlp_parameters(layers: int, width: int, in_dim: int = 64, out_dim: int = 16) -> int:
    """The parameters (weights and biases) of `make_mlp`'s network: sum over blocks of d_k d_(k+1) + d_(k+1)."""
    dims = mlp_dims(layers, width, in_dim, out_dim)
    return sum(dims[k] * dims[k + 1] + dims[k + 1] for k in range(layers))


def _bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def profile_sequential(model: nn.Sequential, sample: torch.Tensor, *, reps: int = 5, name: str = "mlp",
                       threads: int | None = 1) -> Pipeline:
    """Per-layer forward/backward time (median of `reps`, ms, with `threads` intra-op threads,
    as each pipeline rank uses), output size and parameter bytes for a micro-batch `sample`."""
    saved_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _profile(model, sample, reps, name)
    finally:
        torch.set_num_threads(saved_threads)


def _profile(model: nn.Sequential, sample: torch.Tensor, reps: int, name: str) -> Pipeline:
    fwd, bwd, act, params = [], [], [], []
    x = sample
    for layer in model:
        tf, tb = [], []
        for _ in range(reps + 1):
            inp = x.detach().requires_grad_(True)
            t0 = time.perf_counter()
            out = layer(inp)
            t1 = time.perf_counter()
            out.backward(torch.ones_like(out))
            t2 = time.perf_counter()
            tf.append(t1 - t0)
            tb.append(t2 - t1)
        layer.zero_grad(set_to_none=True)
        fwd.append(statistics.median(tf[1:]) * 1e3)
        bwd.append(statistics.median(tb[1:]) * 1e3)
        act.append(_bytes(out))
        params.append(sum(_bytes(p) for p in layer.parameters()))
        x = out.detach()
    return Pipeline(fwd=fwd, bwd=bwd, act=act, params=params, input_size=_bytes(sample), name=name,
                    layer_names=[f"{k}: {type(m[-1]).__name__}" for k, m in enumerate(model)], time_unit=1e-3,
                    weight_factor=2.0, meta={"source": "memsched.models.pipeline.runner.profile_sequential"})


# ---------------------------------------------------------------------------- the distributed run
def _worker(rank: int, cfg: dict[str, Any], queue: Any) -> None:
    """Rank `rank` of `run_partition`: run its stage with 2m then m micro-batches
    (`distributed.timed_steps`) and put its gradients, step times (s) and saved-activation peak
    (bytes) on `queue`; an exception is reported by `distributed._rank_main`."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    device = init_rank(rank, cfg)
    use_cuda = device.type == "cuda"
    model = make_mlp(**cfg["model"])
    first, last = cfg["bounds"][rank]
    submod = nn.Sequential(*[model[k] for k in range(first, last + 1)]).to(device)
    m = cfg["micro_batches"]

    def schedule(n: int) -> Any:  # a stage and schedule of n micro-batches over the same submodule
        stage = PipelineStage(submod, rank, cfg["world"], device)
        cls = Schedule1F1B if cfg["schedule"] == "1f1b" else ScheduleGPipe
        return cls(stage, n_microbatches=n, loss_fn=nn.MSELoss())

    torch.manual_seed(cfg["data_seed"])
    x = torch.randn(cfg["batch"], cfg["model"]["in_dim"], device=device)
    y = torch.randn(cfg["batch"], cfg["model"]["out_dim"], device=device)
    # 2m micro-batches of the same size first (for the period's slope), then the m run that is
    # measured and gradient-checked (its last step keeps the gradients and counts saved tensors)
    times_2m, _ = timed_steps(schedule(2 * m), submod, rank, cfg["world"], torch.cat([x, x]),
                              torch.cat([y, y]), cfg["steps"], device)
    times, meter = timed_steps(schedule(m), submod, rank, cfg["world"], x, y, cfg["steps"], device)
    grads = {}  # global parameter name -> numpy array (pickled by value, unlike shared tensors)
    for n, p in submod.named_parameters():
        local, rest = n.split(".", 1)
        grads[f"{first + int(local)}.{rest}"] = p.grad.detach().cpu().numpy()
    queue.put((rank, {"grads": grads, "step_times": times, "step_times_2m": times_2m, "saved_peak": meter.peak,
                      "cuda_peak": torch.cuda.max_memory_allocated(device) if use_cuda else None}))
    dist.destroy_process_group()


def reference_grads(cfg: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Gradients of the MSE loss of the whole batch in one process."""
    model = make_mlp(**cfg["model"])
    torch.manual_seed(cfg["data_seed"])
    x = torch.randn(cfg["batch"], cfg["model"]["in_dim"])
    y = torch.randn(cfg["batch"], cfg["model"]["out_dim"])
    nn.MSELoss()(model(x), y).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _count(value: Any) -> bool:
    """True for an integer (not a bool) >= 1."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_covers(part: Partition, layers: int) -> None:
    """`InputError` on ``partition`` unless its stages are contiguous, non-empty and cover exactly
    the network's `layers` layers: the first starts at 0, each starts right after the previous one
    ends, the last ends at ``layers - 1`` (positions in ``part.order`` for a DAG partition)."""
    if not part.stages:
        raise InputError("the partition has no stages", field="partition")
    prev = -1
    for k, s in enumerate(part.stages):
        if s.first != prev + 1 or s.last < s.first:
            what = "start at layer 0" if k == 0 else f"start right after stage {k - 1} (layer {prev + 1})"
            raise InputError(f"stage {k} is layers {s.first}..{s.last}: stages must be non-empty and {what}",
                             field="partition")
        prev = s.last
    if prev != layers - 1:
        raise InputError(f"the partition covers layers 0..{prev}, but the network has {layers} layers "
                         f"(0..{layers - 1}): a partition of another network?", field="partition")


def check_runnable(part: Partition, micro_batches: int, layers: int | None = None) -> None:
    """`InputError` when this runner cannot execute `part` with `micro_batches` micro-batches
    (checked before any process is spawned): at least one micro-batch; with `layers`, stages that
    cover exactly the network's layers (`check_covers`); it runs one process per stage of a
    straight pipeline, so no replicated stage and no interleaved allocation that puts two stages
    on one device (``device_of``; it would run them on devices of their own, and compare with a
    makespan their sharing does not allow); torch's ``Schedule1F1B`` needs at least as many
    micro-batches as stages."""
    if not _count(micro_batches):
        raise InputError(f"must be an integer >= 1, got {micro_batches!r}", field="micro_batches")
    if layers is not None:
        check_covers(part, layers)
    if any(s.replicas != 1 for s in part.stages):
        raise InputError("the runner executes straight pipelines (no replicated stages)", field="partition")
    if part.device_of is not None and len(set(part.device_of)) < len(part.stages):
        raise InputError(f"the runner executes straight pipelines (one device per stage); this interleaved "
                         f"allocation puts {len(part.stages)} stages on {len(set(part.device_of))} devices",
                         field="partition")
    if part.schedule == "1f1b" and micro_batches < len(part.stages):
        raise InputError(f"1F1B needs at least as many micro-batches as stages ({len(part.stages)}), "
                         f"got {micro_batches}", field="micro_batches")


def check_chain_order(part: Partition, layers: int) -> None:
    """`InputError` on ``partition.order`` when `part` carries an order other than the identity
    0..layers-1: this runner executes a chain (layer k reads layer k - 1), whose only topological
    order is the identity, and it runs ``stages`` as index ranges, so any other order would be run
    as if it were absent (checked before any process is spawned)."""
    if part.order is not None and list(part.order) != list(range(layers)):
        raise InputError(f"a chain of {layers} layers has one topological order, 0..{layers - 1}; got "
                         f"{list(part.order)} (a DAG partition: run it with dag_runner.run_dag_partition)",
                         field="partition.order")


def for_run(part: Partition, micro_batches: int) -> Partition:
    """A copy of `part` with ``micro_batches`` set to the run's count (`part` is left unchanged):
    under GPipe the in-flight counts n_s, and so the stage memory, depend on it, so the prediction
    compared with a run must be made for the micro-batches the run used, not those it was solved for."""
    out = copy.deepcopy(part)
    out.micro_batches = micro_batches
    return out


def check_batch(batch: int, micro_batches: int, steps: int) -> None:
    """`InputError` naming the field unless `batch` is a positive multiple of `micro_batches`
    (>= 1, checked first by `check_runnable`) and `steps` >= 1 (timed steps after the warm-up)."""
    if not _count(batch) or batch % micro_batches:
        raise InputError(f"must be a positive multiple of micro_batches {micro_batches}, got {batch!r}",
                         field="batch")
    if not _count(steps):
        raise InputError(f"must be an integer >= 1 (timed steps after one warm-up), got {steps!r}", field="steps")


def run_partition(part: Partition, *, layers: int = 8, width: int = 256, in_dim: int = 64, out_dim: int = 16,
                  batch: int = 64, micro_batches: int = 4, steps: int = 3, device: str | None = None,
                  threads: int = 1, seed: int = 0, timeout_s: float = 300.0) -> dict[str, Any]:
    """Run `part` (straight pipeline, one process per stage) and return measurements and checks:
    ``step_time_s`` (s, the median over the timed steps of the slowest rank, m = `micro_batches`)
    and ``step_time_2m_s`` (the same with 2m micro-batches of the same size, for the period's slope,
    `slope_period`), the gradient check of the m run, saved-activation peaks (bytes).
    `InputError` (a ValueError) before any process is spawned for what it cannot run
    (`check_runnable` with the network's `layers`: fewer than one micro-batch, a partition that does
    not cover exactly layers 0..layers-1, replicated stages, an interleaved allocation, fewer 1F1B
    micro-batches than stages; `check_chain_order`: an ``order`` other than the chain's identity;
    `check_batch`: a batch that is not a positive multiple of `micro_batches`, steps < 1;
    `check_device`: a `device` other than "cpu" or "cuda", "cuda" without a GPU per stage; None
    picks cuda when it has a GPU per stage, else cpu)."""
    check_runnable(part, micro_batches, layers)
    check_chain_order(part, layers)
    check_batch(batch, micro_batches, steps)
    device = device or ("cuda" if torch.cuda.is_available() and torch.cuda.device_count() >= len(part.stages)
                        else "cpu")
    check_device(device, len(part.stages))
    cfg = {"model": {"layers": layers, "width": width, "in_dim": in_dim, "out_dim": out_dim, "seed": seed},
           "bounds": [(s.first, s.last) for s in part.stages], "world": len(part.stages),
           "micro_batches": micro_batches, "batch": batch, "steps": steps, "schedule": part.schedule,
           "device": device, "threads": threads, "port": free_port(), "data_seed": seed + 1}
    results = run_ranks(_worker, cfg, timeout_s)
    ref = reference_grads(cfg)
    grad_check, max_err = check_grads(results, ref)
    step_time = max(statistics.median(r["step_times"]) for r in results.values())
    step_time_2m = max(statistics.median(r["step_times_2m"]) for r in results.values())
    return {"device": device, "grad_check": grad_check, "grad_max_abs_err": max_err, "step_time_s": step_time,
            "step_time_2m_s": step_time_2m,
            "saved_peak": [results[r]["saved_peak"] for r in range(cfg["world"])],
            "cuda_peak": [results[r]["cuda_peak"] for r in range(cfg["world"])], "config": cfg}


def slope_period(step_m: float, step_2m: float, m: int) -> float:
    """The steady-state period (s per micro-batch) from the step times `step_m` and `step_2m` (s) of
    m and 2m micro-batches of the same size: (T(2m) - T(m)) / m. The fill and drain of the
    pipeline and a step's fixed costs (barriers, the schedule's bookkeeping) are in both and
    cancel; in steady state the simulator's slope is at least its period (equal under 1F1B without
    communication charged; `simulator.replay_period`)."""
    return (step_2m - step_m) / m


def loss_saved_bytes(inst: Pipeline) -> int:
    """Bytes the runners' MSE loss keeps for its backward per micro-batch, on the last stage, beyond
    the stash A_s (which counts what the layers keep): its target, the size of the network's output
    (``act`` of the last layer), and that output unless the last layer's own backward already keeps
    it (measured saves: the last layer in its ``saved_by``; a storage is counted once)."""
    last = inst.length - 1
    out = int(inst.act[last])
    kept = inst.saved_by is not None and last in inst.saved_by[last]
    return out if kept else 2 * out


def predicted_saved(inst: Pipeline, stash: list[int], last_in_flight: int) -> list[int]:
    """Per stage, the bytes saved for backward that a run should measure (its
    ``saved_activations_peak``): the stash n_s A_s, plus on the last stage the loss's saved tensors
    (`loss_saved_bytes`) of its `last_in_flight` micro-batches (1 under 1F1B, m under GPipe, whose
    last stage runs every forward, and so every loss, before the first backward)."""
    return [*stash[:-1], stash[-1] + last_in_flight * loss_saved_bytes(inst)]


def compare(inst: Pipeline, part: Partition, run: dict[str, Any]) -> dict[str, Any]:
    """Predicted (simulator) against measured, times in seconds, sizes in bytes:

    - ``predicted.period_s``: the model's period (largest stage time); ``predicted.slope_s``: the
      simulator's (makespan(2m) - makespan(m)) / m, the quantity the measured period estimates
      (in steady state at least the period, equal to it under 1F1B without communication charged;
      GPipe's all-forward-then-all-backward order and, with a bandwidth, link round trips that 1F1B
      cannot hide can add to it: `simulator.simulate_batch`);
      ``makespan_s``, ``makespan_2m_s``: the simulated batch of m and 2m micro-batches;
    - ``measured.period_s``: `slope_period` of the run's ``step_time_s`` and ``step_time_2m_s``
      (None for a run without ``step_time_2m_s``), not a step time divided by m;
    - per-stage predicted ``stash`` (the model's n_s A_s) and ``saved`` (`predicted_saved`: the
      stash plus, on the last stage, the MSE loss's saved output and target) against the measured
      saved-activation peak, which equals ``saved`` (so ``stash`` on every stage but the last).

    Every predicted figure is for the run's m (``run["config"]["micro_batches"]``), whatever
    ``part.micro_batches`` was solved for (`for_run`: GPipe's in-flight counts and stage memory
    depend on it); `part` itself is not modified."""
    m = run["config"]["micro_batches"]
    part = for_run(part, m).evaluated(inst)
    u = inst.time_unit
    makespan, makespan_2m = (simulate_batch(inst, part, n).makespan * u for n in (m, 2 * m))
    stash_pred = []
    for s in part.stages:
        A = inst.input_of(s.first) + sum(int(inst.act[l]) for l in range(s.first, s.last))
        stash_pred.append(s.in_flight * A if part.schedule == "1f1b" else m * A)
    step_2m = run.get("step_time_2m_s")
    last = part.stages[-1].in_flight if part.schedule == "1f1b" else m
    return {
        "predicted": {"period_s": part.period * u, "slope_s": slope_period(makespan, makespan_2m, m),
                      "makespan_s": makespan, "makespan_2m_s": makespan_2m,
                      "stage_memory": [s.memory for s in part.stages], "stash": stash_pred,
                      "saved": predicted_saved(inst, stash_pred, last),
                      "in_flight": [s.in_flight for s in part.stages]},
        "measured": {"step_time_s": run["step_time_s"], "step_time_2m_s": step_2m,
                     "period_s": None if step_2m is None else slope_period(run["step_time_s"], step_2m, m),
                     "saved_activations_peak": run["saved_peak"], "cuda_peak": run["cuda_peak"]},
        "grad_check": run["grad_check"], "grad_max_abs_err": run["grad_max_abs_err"], "device": run["device"],
        "partition": str(part),
    }


#: the largest --devices, --layers, --width, --batch, --micro-batches and --steps the runner takes
#: (it spawns one process per stage and builds the network in memory)
MAX_ARGUMENT = 10**6


def check_arguments(args: argparse.Namespace) -> None:
    """`InputError` naming the option for arguments the run cannot use (checked before profiling,
    solving or spawning): every count in 1..`MAX_ARGUMENT`, --batch a multiple of
    --micro-batches, --memory >= 1 byte, a --solver of the pipeline registry, --layers within the
    pipeline DPs' work limit on --devices (`_check_work`), a run whose network and activations fit in the
    memory available (`_check_memory`), under 1F1B at
    least as many micro-batches as devices (torch's ``Schedule1F1B`` needs one per stage, and
    the partition may use every device), and --device cuda only with CUDA and at least
    --devices GPUs (rank k runs on GPU k; the partition may use every device)."""
    for name in ("devices", "layers", "width", "batch", "micro_batches", "steps"):
        value = getattr(args, name)
        if not 1 <= value <= MAX_ARGUMENT:
            raise InputError(f"must be an integer in 1..{MAX_ARGUMENT}, got {value}",
                             field="--" + name.replace("_", "-"))
    if args.batch % args.micro_batches:
        raise InputError(f"{args.batch} is not a multiple of --micro-batches {args.micro_batches}",
                         field="--batch")
    if args.memory is not None and not (math.isfinite(args.memory) and args.memory >= 1):
        raise InputError(f"must be a number of bytes >= 1 (whole bytes: a fraction is floored), got {args.memory:g}",
                         field="--memory")
    if args.schedule == "1f1b" and args.micro_batches < args.devices:
        raise InputError(f"1F1B needs at least as many micro-batches as stages, and the partition may use all "
                         f"{args.devices} devices: give --micro-batches >= {args.devices} (or --schedule gpipe)",
                         field="--micro-batches")
    registry.get_solver("pipeline", args.solver)  # InputError on --solver when unknown or not importable
    _check_work(args.layers, args.devices, args.solver)
    _check_memory(args.layers, args.width, args.batch, args.devices)
    if args.device == "cuda":
        _check_cuda(args.devices)


def _check_work(layers: int, devices: int, solver: str) -> None:
    """`InputError` on --layers when the pipeline DPs would take more than ``MAX_DP_STEPS`` steps
    (layers^2 x min(devices, layers)): the limit `memsched partition` applies (`solvers.pipeline.limits`;
    the same for every pipeline `solver`)."""
    most = layer_limit(devices)
    if layers > most:
        raise InputError(f"{layers} layers on {devices} devices is {dp_steps(layers, devices):,} DP steps "
                         f"(layers^2 x min(devices, layers)), more than {MAX_DP_STEPS:,}, the limit of memsched "
                         f"partition (minutes of solving); use at most {most} layers on {devices} devices",
                         field="--layers")


def run_memory_bytes(layers: int, width: int, batch: int, devices: int) -> int:
    """An estimate of the memory a run takes on this machine, bytes (float32, 4 bytes a number): the
    network's parameters (`mlp_parameters`) once in this process (profiling) and once in each rank
    (every rank builds the whole network before keeping its stage; min(devices, layers) ranks at
    most), or three times here for the reference gradients (network, gradients and a copy); plus
    the activations of twice the batch (the ranks' run of 2m micro-batches) at every layer."""
    params = mlp_parameters(layers, width)
    ranks = min(devices, layers)
    return 4 * (params * (1 + max(ranks, 2)) + 2 * batch * sum(mlp_dims(layers, width)))


def _check_memory(layers: int, width: int, batch: int, devices: int) -> None:
    """`InputError` naming --width (--batch when the activations weigh more than the weights) when
    `run_memory_bytes` exceeds `USABLE_SHARE` of the memory available now (``MemAvailable``; no
    check where it is unknown): such a network fails in the allocator or is killed for memory."""
    have = available_bytes()
    need = run_memory_bytes(layers, width, batch, devices)
    if have is None or need <= USABLE_SHARE * have:
        return
    weights = 4 * mlp_parameters(layers, width) * (1 + max(min(devices, layers), 2))
    field = "--width" if weights >= need - weights else "--batch"
    raise InputError(f"--layers {layers} x --width {width} with --batch {batch} on {devices} devices needs about "
                     f"{need / 1e9:.3g} GB (weights about {weights / 1e9:.3g} GB), more than the "
                     f"{have / 1e9:.3g} GB of memory available here; use a smaller {field}", field=field)


def _check_cuda(devices: int, field: str = "--device") -> None:
    """`InputError` on `field` (--device, or ``device`` for the Python functions) when CUDA is
    unavailable or has fewer than `devices` GPUs (one per stage)."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cli = field.startswith("--")
    cpu, count = ("--device cpu", "--devices") if cli else ("device='cpu'", "stages")
    if gpus == 0:
        raise InputError(f"cuda is not available on this machine (use {cpu})", field=field)
    if gpus < devices:
        fewer = f"--devices {devices}" if cli else f"{devices} stages"
        raise InputError(f"cuda has {gpus} GPU(s) here, fewer than {fewer} (one GPU per stage; "
                         f"use {cpu} or fewer {count})", field=field)


#: the devices a run takes (`check_device`): rank k on CPU (gloo) or on GPU k (nccl)
DEVICES = ("cpu", "cuda")


def check_device(device: Any, stages: int) -> None:
    """`InputError` on ``device`` (checked before any process is spawned, as the command line checks
    --device) unless it is one of `DEVICES`, and for ``"cuda"`` unless CUDA has at least `stages`
    GPUs (`_check_cuda`): any other name used to run on CPU and be reported as that device, and
    cuda without GPUs failed inside a rank."""
    if not (isinstance(device, str) and device in DEVICES):
        raise InputError(f"must be one of {', '.join(map(repr, DEVICES))}, got {device!r}", field="device")
    if device == "cuda":
        _check_cuda(stages, field="device")


#: the default of --timeout: wall-clock seconds the ranks' run may take (`run_partition`'s ``timeout_s``)
TIMEOUT_S = 300.0
#: the exit code of a run that failed after its ranks started: --timeout passed, or a rank
#: reported an error or exited without answering
RUN_FAILED = 4


def check_timeout(seconds: float) -> None:
    """`InputError` on --timeout unless `seconds` is a finite number > 0."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"must be a positive number of seconds, got {seconds:g}", field="--timeout")


def _run_failed(ap: argparse.ArgumentParser, err: Exception, timeout_s: float) -> int:
    """One line on stderr for a run stopped by --timeout (`TimeoutError`) or a rank's failure
    (`RankError`), its ranks already killed; the exit code `RUN_FAILED`."""
    if isinstance(err, TimeoutError):
        why = f"the run did not finish within --timeout {timeout_s:g} s; its ranks were stopped"
    else:
        why = f"the run failed: {err}"
    print(f"{ap.prog}: error: {' '.join(why.split())}", file=sys.stderr)  # one line, whatever the rank wrote
    return RUN_FAILED


def _bad_input(ap: argparse.ArgumentParser, err: InputError) -> int:
    """One line on stderr, as argparse reports a usage error; the exit code of bad input (2)."""
    print(f"{ap.prog}: error: {err}", file=sys.stderr)
    return 2


class _OneLineParser(argparse.ArgumentParser):
    """The runner's parser: a usage error (an unknown option, a value of the wrong type, a bad choice) is an
    `InputError`, printed as one line on stderr with exit 2 (`_bad_input`, as the checks of `check_arguments`
    are, and as docs/pipeline.md states), not argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise InputError(" ".join(message.split()))


def _memory_argument(text: str) -> float:
    """--memory: a plain number of bytes (the range, >= 1, is `check_arguments`'); units are not read here."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of bytes (no units: 16e9, not 16GB), got {text!r}") \
            from None


def main(argv: list[str] | None = None) -> int:
    """Partition an MLP over --devices with --solver, run it and print predicted vs measured period and memory as JSON;
    exit 0, 1 without a partition, 2 on bad arguments (one line on stderr, before anything runs; also a partition
    the runner cannot execute: replicated stages, an interleaved allocation, a DAG order), 3 when the gradient check
    fails, 4 when the run fails after its ranks start (--timeout passed, or a rank's error: one line, the ranks killed),
    130 interrupted (Ctrl-C, SIGTERM or SIGHUP unless ignored: one line, the ranks killed, no traceback)."""
    about = " ".join(__doc__.split("\n\n")[0].split())  # the first paragraph, on one line
    ap = _OneLineParser(prog="python -m memsched.models.pipeline.runner", description=about)
    try:
        with terminate_as_interrupt():
            return _main(ap, argv)
    except KeyboardInterrupt:
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C while the line is written
            print(f"{ap.prog}: interrupted", file=sys.stderr)
        return 130


def _main(ap: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """`main` inside `terminate_as_interrupt`: parse, check, profile, solve, run, print."""
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--schedule", choices=("1f1b", "gpipe"), default="1f1b")
    ap.add_argument("--solver", default="madpipe")
    ap.add_argument("--memory", type=_memory_argument, default=None, help="bytes per device (default: no limit)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, metavar="SECONDS",
                    help=f"wall-clock seconds the ranks' run may take (> 0; default {TIMEOUT_S:g}); past it the "
                         f"ranks are killed and the runner exits {RUN_FAILED}")
    try:
        args = ap.parse_args(argv)  # a usage error: one line, exit 2 (`_OneLineParser`); --help exits 0
        check_arguments(args)
        check_timeout(args.timeout)
    except InputError as err:
        return _bad_input(ap, err)
    mb = args.batch // args.micro_batches
    try:
        model = make_mlp(args.layers, args.width)
        inst = profile_sequential(model, torch.randn(mb, 64))
    except (MemoryError, RuntimeError) as err:  # torch's allocator: a network larger than the memory
        if not isinstance(err, MemoryError) and "alloc" not in str(err):
            raise
        return _bad_input(ap, InputError(f"the network of --layers {args.layers} x --width {args.width} does not "
                                         f"fit in memory ({type(err).__name__}); use a smaller --width or --layers",
                                         field="--width"))
    budget = int(args.memory) if args.memory else 10**15
    try:
        res = registry.solve("pipeline", inst, args.solver, budget, devices=args.devices, schedule=args.schedule,
                             micro_batches=args.micro_batches)
    except InputError as err:
        return _bad_input(ap, err)
    if res.schedule is None:
        print(f"{args.solver}: {res.status} ({res.message})", file=sys.stderr)
        return 1
    part = res.schedule
    try:
        check_runnable(part, args.micro_batches, args.layers)  # before any worker is spawned
        check_chain_order(part, args.layers)
    except InputError as err:
        return _bad_input(ap, InputError(f"{args.solver}'s partition ({part}): {err}"))
    if len(part.stages) < 2:
        print(f"note: the solver uses {len(part.stages)} stage(s)", file=sys.stderr)
    try:
        run = run_partition(part, layers=args.layers, width=args.width, batch=args.batch,
                            micro_batches=args.micro_batches, steps=args.steps, device=args.device,
                            timeout_s=args.timeout)
    except (TimeoutError, RankError) as err:  # the ranks are killed and joined by then (run_ranks)
        return _run_failed(ap, err, args.timeout)
    out = compare(inst, part, run)
    print(json.dumps(out, indent=1, default=lambda o: None if isinstance(o, float) and math.isnan(o) else str(o)))
    return 0 if out["grad_check"] else 3


if __name__ == "__main__":
    sys.exit(main())
