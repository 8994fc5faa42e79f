"""Execute a DAG partition (stage boundaries at antichains, several tensors per boundary) with
``torch.distributed.pipelining`` and compare it with the model of `solvers.pipeline`.

- `DagNet`: a small residual network given as a layer DAG. Layer k is either a block
  ``ReLU -> Linear`` of its one input (it saves one tensor the size of that input for its
  backward) or an ``add`` of its inputs (saves nothing); `residual_spec` builds the usual
  pattern x -> block -> block -> add(., x). `profile_dag` measures it layer by layer into a
  `solvers.pipeline.Pipeline` with its DAG edges (``succ``), times in ms, sizes in bytes.
- `run_dag_partition` runs a partition (any pipeline solver's, contiguous or DAG) on one process
  per stage (gloo on CPU, nccl on GPU): stage s computes its layers from the tensors crossing the
  boundary before it and sends every tensor crossing the boundary after it (tensors passing
  through the stage included), in producer order, as a tuple; ``Schedule1F1B`` or
  ``ScheduleGPipe`` steps it with an MSE loss. What it cannot run is refused before any process
  is spawned (`InputError`, the chain runner's `runner.check_runnable` and `check_spec`). The
  ranks are started and stopped by `distributed.run_ranks`: they ignore SIGINT and SIGHUP and die
  with the caller; while they run, SIGTERM and SIGHUP raise `KeyboardInterrupt` in the caller as
  Ctrl-C does (unless ignored), after the ranks are killed.
- Only layer 0 may read the network's input (-1): the pipeline model has the input as layer 0's
  input only (no cut carries it and the DAG solver's lattice does not see it), so a spec with a
  later reader of -1 is refused (`check_spec`) by `profile_dag` and `run_dag_partition` rather
  than profiled into a model that undercounts it; route the input through layer 0 instead.
  Likewise every layer but the last must be read by a later one (the last layer is the network's
  output): a dead end is refused rather than run into a rank's failure in its backward. A block
  with other than one input is refused too (`check_spec`): it would read only the first.
- `compare_dag`: gradients against one process, the measured step against the simulator's
  batch makespan, and the measured peak of activations saved for backward on each stage against
  the model's stash n_s A_s (``stash``; with `profile_dag`'s measured saves it counts what each
  layer's backward keeps: a block its ReLU's output, an ``add`` nothing) and against ``saved``,
  the stash plus, on the last stage, what the MSE loss keeps (its input, the network's output,
  and its target, per micro-batch in flight there: `runner.predicted_saved`). The measurement
  equals ``saved`` on every stage, so it equals the stash on every stage but the last, where it
  is larger by the loss's tensors (e.g. 336 bytes predicted stash, 384 measured for a one-stage
  residual network with an output of 24 bytes per micro-batch).
"""

from __future__ import annotations

import reprlib
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition, Pipeline, simulate, simulate_batch
from memsched.solvers.pipeline.simulator import stage_stashes
from torch import nn

from .distributed import check_grads, free_port, init_rank, run_ranks, timed_steps
from .runner import check_batch, check_device, check_runnable, for_run, predicted_saved

#: a layer: ("block", [input]) or ("add", [inputs]); input -1 is the network's input
Spec = list[tuple[str, list[int]]]


def residual_spec(blocks: int = 2) -> Spec:
    """A stem block, then `blocks` residual units x -> block -> block -> add(., x), then a head block."""
    spec: Spec = [("block", [-1])]
    x = 0
    for _ in range(blocks):
        spec += [("block", [x]), ("block", [len(spec)]), ("add", [len(spec) + 1, x])]
        x = len(spec) - 1
    spec.append(("block", [x]))
    return spec


class DagNet(nn.Module):
    """The network of `spec` (module docstring): every block maps width -> width except the
    first (in_dim -> width) and the last (width -> out_dim). `InputError` naming ``spec[k]`` for a
    spec not shaped as a list of (kind, inputs) pairs (`check_spec_shape`); its other rules are
    `check_spec`'s, which `profile_dag` and `run_dag_partition` apply."""

    def __init__(self, spec: Spec, width: int = 64, in_dim: int = 32, out_dim: int = 8, seed: int = 0):
        check_spec_shape(spec)
        super().__init__()
        torch.manual_seed(seed)
        self.spec = spec
        last = len(spec) - 1
        self.layers = nn.ModuleDict()
        for k, (kind, _) in enumerate(spec):
            if kind == "block":
                d_in = in_dim if k == 0 else width
                d_out = out_dim if k == last else width
                self.layers[str(k)] = nn.Sequential(nn.ReLU(), nn.Linear(d_in, d_out))

    def node(self, k: int, inputs: list[torch.Tensor]) -> torch.Tensor:
        """Layer k applied to its inputs."""
        kind, _ = self.spec[k]
        if kind == "add":
            out = inputs[0]
            for t in inputs[1:]:
                out = out + t
            return out
        return self.layers[str(k)](inputs[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run the whole DAG network on one device: input x -> output of the last node."""
        env = {-1: x}
        for k, (_, ins) in enumerate(self.spec):
            env[k] = self.node(k, [env[i] for i in ins])
        return env[len(self.spec) - 1]


#: the layer kinds `DagNet` builds modules for
DAGNET_KINDS = ("block", "add")
#: the kinds among `DAGNET_KINDS` that read exactly one tensor (`DagNet.node` applies a block to
#: ``inputs[0]`` alone); an "add" sums one or more
SINGLE_INPUT_KINDS = ("block",)


def check_spec_shape(spec: Any) -> None:
    """`InputError` naming ``spec`` or ``spec[k]`` (``spec[k].inputs``) unless `spec` is a list (or
    tuple) of (kind, inputs) pairs, each kind a str and each inputs a list (or tuple): the shape every
    other check and `DagNet` unpack, so a malformed entry is one line rather than an unpacking
    ValueError or a TypeError. What the kinds and inputs may be is `check_spec`'s."""
    if not isinstance(spec, (list, tuple)):
        raise InputError(f"a network spec is a list of (kind, inputs) pairs, got {reprlib.repr(spec)}", field="spec")
    for k, entry in enumerate(spec):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise InputError(f"a layer is a (kind, inputs) pair such as (\"block\", [{k - 1}]), got "
                             f"{reprlib.repr(entry)}", field=f"spec[{k}]")
        kind, ins = entry
        if not isinstance(kind, str):
            raise InputError(f"a layer's kind is a str such as \"block\", got {reprlib.repr(kind)}", field=f"spec[{k}]")
        if not isinstance(ins, (list, tuple)):
            raise InputError(f"a layer's inputs are a list of earlier layers (-1: the network's input), got "
                             f"{reprlib.repr(ins)}", field=f"spec[{k}].inputs")


def check_spec(spec: Spec, kinds: tuple[str, ...] | None = None) -> None:
    """`InputError` on ``spec[k]`` unless every layer k reads at least one tensor, each an earlier
    layer 0..k-1 or, for layer 0 only, the network's input -1. A later layer reading -1 is refused:
    the pipeline model (`solvers.pipeline.Pipeline`) has the input only as layer 0's input, so no
    boundary would carry it, its bytes would be charged to no stage, and the runner would not send
    it (route it through layer 0, which every reader of the input then reads). Every layer but the
    last must be read by a later one: the network's output is its last layer alone (`DagNet.forward`,
    the last stage), so a dead end's output would be computed and sent but reach no loss, and the
    ranks would fail in its backward. A "block" (``ReLU -> Linear``, `SINGLE_INPUT_KINDS`) reads
    exactly one tensor: `DagNet.node` applies it to its first input alone, so the others would be
    listed as read (hiding a dead end, or charging the profile a boundary tensor the block never
    uses) but ignored; an "add" reads one or more.

    Layer kinds: with `kinds` given (`DAGNET_KINDS` for a `DagNet`: `profile_dag`,
    `run_dag_partition`), every layer's kind must be one of them. Without (None), a
    spec in `DagNet`'s vocabulary (some layer is a "block" or an "add") must use only "block" and
    "add": `DagNet` builds no module for any other kind, so profiling or running it failed later
    with a bare KeyError. Other specs (`dag_zoo.ModuleDag`'s, whose entries are node names such as
    "stem.conv" or "add_relu") name their nodes freely. First the spec's shape (`check_spec_shape`)."""
    check_spec_shape(spec)
    if not spec:
        raise InputError("the network has no layers", field="spec")
    allowed = kinds if kinds is not None else (
        DAGNET_KINDS if any(isinstance(kind, str) and kind in DAGNET_KINDS for kind, _ in spec) else None)
    for k, (kind, ins) in enumerate(spec):
        if allowed is not None and not (isinstance(kind, str) and kind in allowed):
            raise InputError(f"layer kind {kind!r} is not one of {', '.join(map(repr, allowed))}",
                             field=f"spec[{k}]")
        if not ins:
            raise InputError("a layer reads at least one tensor", field=f"spec[{k}]")
        for i in ins:
            if not isinstance(i, int) or isinstance(i, bool) or not -1 <= i < k:
                raise InputError(f"input {i!r} is not -1 (the network's input) or an earlier layer 0..{k - 1}",
                                 field=f"spec[{k}]")
            if i == -1 and k > 0:
                raise InputError(f"layer {k} reads the network's input (-1): only layer 0 may (the pipeline model "
                                 f"carries the input into layer 0 only); route it through layer 0",
                                 field=f"spec[{k}]")
        if allowed is not None and kind in SINGLE_INPUT_KINDS and len(ins) != 1:
            raise InputError(f"a {kind!r} layer reads exactly one tensor (ReLU -> Linear of its one input), got "
                             f"{len(ins)} inputs {list(ins)}; join them with an 'add' layer first",
                             field=f"spec[{k}]")
    last = len(spec) - 1
    for k, readers in enumerate(successors(spec)[:last]):
        if not readers:
            raise InputError(f"layer {k}'s output is read by no later layer: the network's output is its last "
                             f"layer {last} alone, so a dead end would get no gradient; read it or remove it",
                             field=f"spec[{k}]")


def check_order(part: Partition, spec: Spec) -> None:
    """`InputError` on ``partition.order`` unless a DAG partition's order is a permutation of the
    layers 0..L-1 in which every layer comes after the layers it reads (a topological order)."""
    if part.order is None:
        return
    order = list(part.order)
    if sorted(order) != list(range(len(spec))):
        raise InputError(f"must be a permutation of the network's layers 0..{len(spec) - 1}", field="partition.order")
    pos = {v: p for p, v in enumerate(order)}
    for v in order:
        late = [i for i in spec[v][1] if i >= 0 and pos[i] > pos[v]]
        if late:
            raise InputError(f"layer {v} comes before layer {late[0]}, which it reads (not a topological order)",
                             field="partition.order")


def successors(spec: Spec) -> list[list[int]]:
    """succ[k]: the layers consuming layer k's output."""
    succ: list[list[int]] = [[] for _ in spec]
    for k, (_, ins) in enumerate(spec):
        for i in ins:
            if i >= 0:
                succ[i].append(k)
    return succ


def saved_by_op(net: Any, k: int, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, list[int], bool, int]:
    """Run node k of `net` on `inputs` (leaves requiring grad) and classify what autograd saves for
    its backward (``saved_tensors_hooks``, each storage once; parameters and buffers excluded: they
    are the module's state, not per-micro-batch activations): returns (output, indices of the inputs
    it keeps, whether it keeps its output, bytes of the other tensors it keeps)."""
    state = {t.untyped_storage().data_ptr() for t in (*net.parameters(), *net.buffers())}
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = net.node(k, inputs)
    ins = [x.untyped_storage().data_ptr() for x in inputs]
    kept_inputs: set[int] = set()
    keeps_output = False
    extra: dict[int, int] = {}
    for t in saved:
        ptr = t.untyped_storage().data_ptr()
        if ptr in state or t.untyped_storage().nbytes() == 0:
            continue
        if ptr in ins:
            kept_inputs.update(n for n, p in enumerate(ins) if p == ptr)
        elif ptr == out.untyped_storage().data_ptr():
            keeps_output = True
        else:
            extra[ptr] = t.untyped_storage().nbytes()
    return out, sorted(kept_inputs), keeps_output, sum(extra.values())


def profile_dag(net: DagNet, sample: torch.Tensor, *, reps: int = 5, threads: int | None = 1,
                clock: str = "wall") -> Pipeline:
    """Per-layer forward/backward time (median of `reps`, ms; ``clock="wall"``: elapsed time,
    ``"cpu"``: the thread's CPU time, which other processes competing for the cores do not
    inflate), output and weight bytes of `net` for a micro-batch `sample`, with the DAG edges;
    weights x 2 (weights and gradients, SGD).
    What each layer's backward keeps is measured (`saved_by_op`): ``saved_by`` (which layers keep
    each output), ``saved_extra`` (other saved bytes) and ``input_saved``, so that the stash
    follows the tensors autograd really saves (`Pipeline.stash`). `InputError` for a spec the
    model cannot represent (`check_spec`: an entry that is not a (kind, inputs) pair, a layer other
    than 0 reading the network's input, a layer other than the last read by none, a block without
    exactly one input)."""
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', got {clock!r}")
    check_spec(net.spec, DAGNET_KINDS if isinstance(net, DagNet) else None)
    now = time.perf_counter if clock == "wall" else time.thread_time
    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        env = {-1: sample.detach()}
        fwd, bwd, act, params, extra = [], [], [], [], []
        keepers: dict[int, list[int]] = {k: [] for k in range(-1, len(net.spec))}
        for k, (_, ins) in enumerate(net.spec):
            tf, tb = [], []
            for _ in range(reps + 1):
                xs = [env[i].detach().requires_grad_(True) for i in ins]
                t0 = now()
                out = net.node(k, xs)
                t1 = now()
                out.backward(torch.ones_like(out))
                tf.append(t1 - t0)
                tb.append(now() - t1)
            fwd.append(statistics.median(tf[1:]) * 1e3)
            bwd.append(statistics.median(tb[1:]) * 1e3)
            out, kept, own, more = saved_by_op(net, k, [env[i].detach().requires_grad_(True) for i in ins])
            for n in kept:
                keepers[ins[n]].append(k)
            if own:
                keepers[k].append(k)
            extra.append(more)
            act.append(out.numel() * out.element_size())
            mod = net.layers[str(k)] if str(k) in net.layers else None
            params.append(sum(p.numel() * p.element_size() for p in mod.parameters()) if mod is not None else 0)
            env[k] = out.detach()
        net.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(saved)
    return Pipeline(fwd=fwd, bwd=bwd, act=act, params=params, input_size=sample.numel() * sample.element_size(),
                    name="dagnet", layer_names=[f"{k}: {kind}" for k, (kind, _) in enumerate(net.spec)],
                    time_unit=1e-3, weight_factor=2.0, succ=successors(net.spec),
                    saved_by=[keepers[k] for k in range(len(net.spec))], saved_extra=extra,
                    input_saved=bool(keepers[-1]),
                    meta={"source": "memsched.models.pipeline.dag_runner.profile_dag", "clock": clock})


def boundaries(spec: Spec, stage_layers: list[list[int]]) -> list[list[int]]:
    """Per boundary b (before stage b; b = 0: the network input): the producers whose outputs
    cross it, in increasing order (-1 is the network input)."""
    succ = successors(spec)
    done: set[int] = set()
    out = [[-1]]
    for layers in stage_layers[:-1]:
        done |= set(layers)
        out.append(sorted(v for v in done if any(w not in done for w in succ[v])))
    return out


class DagStage(nn.Module):
    """One stage: computes its layers from the tensors of boundary ``ins`` and returns those of
    boundary ``outs`` (a tuple; the last stage returns the network's output)."""

    def __init__(self, net: Any, layers: list[int], ins: list[int], outs: list[int] | None):
        super().__init__()
        self.spec, self.order, self.ins, self.outs = net.spec, list(layers), ins, outs
        self.layers = nn.ModuleDict({str(k): net.layers[str(k)] for k in layers if str(k) in net.layers})
        self._net = [net]  # not a submodule: only this stage's layers are registered
        self.cpu_forward: list[float] = []  # thread CPU seconds of each forward call

    def forward(self, *xs: torch.Tensor) -> Any:
        """Run this stage's nodes in order on the stage's inputs; return the values later stages read.
        The thread CPU time of the call is appended to ``cpu_forward``."""
        t0 = time.thread_time()
        env = dict(zip(self.ins, xs))
        for k in self.order:
            env[k] = self._net[0].node(k, [env[i] for i in self.spec[k][1]])
        if self.outs is None:  # the network's output: the last node, whichever comes last in the order
            out = env[len(self.spec) - 1]
        else:  # a tensor passing through is sent as a view, so that its gradient flows back through the stage
            out = tuple(env[v] if v in self.order else env[v].view_as(env[v]) for v in self.outs)
        self.cpu_forward.append(time.thread_time() - t0)
        return out


def _thread_timed(fn: Any, log: list[float]) -> Any:
    """`fn` with the thread CPU seconds of each call appended to `log` (autograd's CPU backward runs
    on the calling thread, so a stage's backward is counted where it is called)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            log.append(time.thread_time() - t0)

    return call


def _worker(rank: int, cfg: dict[str, Any], queue: Any) -> None:
    """Rank `rank` of `run_dag_partition`: run its stage (`distributed.timed_steps`) and put its
    gradients, step times (s), saved-activation peak (bytes) and thread CPU seconds per micro-batch
    of the timed steps (the metered step excluded) on `queue`; an exception is reported by
    `distributed._rank_main`."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    device = init_rank(rank, cfg)
    net = build_net(cfg["net"])
    S = cfg["world"]
    bnd = cfg["boundaries"]
    submod = DagStage(net, cfg["stage_layers"][rank], bnd[rank], bnd[rank + 1] if rank + 1 < S else None).to(device)
    example = tuple(torch.zeros(cfg["shapes"][v], device=device) for v in bnd[rank])
    stage = PipelineStage(submod, rank, S, device, input_args=example if rank > 0 else None)
    cpu_backward: list[float] = []
    stage.backward_one_chunk = _thread_timed(stage.backward_one_chunk, cpu_backward)  # type: ignore[method-assign]
    sched = (Schedule1F1B if cfg["schedule"] == "1f1b" else ScheduleGPipe)(
        stage, n_microbatches=cfg["micro_batches"], loss_fn=nn.MSELoss())
    x, y = _data(cfg, device)

    times, meter = timed_steps(sched, submod, rank, S, x, y, cfg["steps"], device)
    grads = {f"layers.{n.removeprefix('layers.')}": p.grad.detach().cpu().numpy()
             for n, p in submod.named_parameters()}
    m, steps = cfg["micro_batches"], cfg["steps"]
    timed = slice(-m * (steps + 1), -m)  # the calls of the timed steps: m a step, then the metered step's m
    fwd, bwd = submod.cpu_forward[timed], cpu_backward[timed]
    queue.put((rank, {"grads": grads, "step_times": times, "saved_peak": meter.peak,
                      "cpu_per_micro_batch": (sum(fwd) + sum(bwd)) / (m * steps),
                      "cpu_calls": (len(submod.cpu_forward), len(cpu_backward))}))
    dist.destroy_process_group()


def build_net(net_cfg: dict[str, Any]) -> nn.Module:
    """The network of a runner config: ``{"factory": "module:callable", "kwargs": {...}}``
    (picklable, so that every spawned rank builds the same network from the same seed)."""
    import importlib

    mod, _, name = net_cfg["factory"].partition(":")
    return getattr(importlib.import_module(mod), name)(**net_cfg["kwargs"])


def _data(cfg: dict[str, Any], device: Any = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(cfg["data_seed"])
    x = torch.randn(cfg["batch"], *cfg["shapes"][-1][1:], device=device)
    y = torch.randn(cfg["batch"], *cfg["shapes"][len(cfg["spec"]) - 1][1:], device=device)
    return x, y


def node_shapes(net: Any, sample: torch.Tensor) -> dict[int, list[int]]:
    """Shape of every node's output (and of the input, key -1) for the micro-batch `sample`."""
    env = {-1: sample}
    with torch.no_grad():
        for k, (_, ins) in enumerate(net.spec):
            env[k] = net.node(k, [env[i] for i in ins])
    return {k: list(v.shape) for k, v in env.items()}


def run_dag_partition(part: Partition, spec: Spec | None = None, *, width: int = 64, in_dim: int = 32,
                      out_dim: int = 8, batch: int = 32, micro_batches: int = 4, steps: int = 2, device: str = "cpu",
                      threads: int = 1, seed: int = 0, timeout_s: float = 300.0,
                      net: dict[str, Any] | None = None, in_shape: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Run `part` (straight pipeline, one process per stage) of `DagNet(spec)`, or of the network
    ``net`` = ``{"factory": "module:callable", "kwargs": {...}}`` (any module with ``spec``,
    ``layers`` and ``node``, e.g. `dag_zoo.resnet_dag`) on inputs of shape (batch, *in_shape);
    measurements (step time in s: the median over the timed steps of the slowest rank; bytes) and
    checks. `InputError` (a ValueError) naming the field before any process is spawned for what it
    cannot run: a spec that is not a list of (kind, inputs) pairs (``spec[k]``, checked before the
    `DagNet` is built), with a later reader of the input, a dead end or a block without exactly one input
    (`check_spec`), what the chain runner refuses (`runner.check_runnable` with the network's layer
    count: fewer than one micro-batch, a
    partition that does not cover exactly the network's layers, replicated stages, an interleaved
    allocation, fewer 1F1B micro-batches than stages), an order that is not a topological
    permutation (`check_order`), a batch that is not a positive multiple of `micro_batches`, steps < 1,
    a `device` other than "cpu" or "cuda", or "cuda" without a GPU per stage (`runner.check_device`)."""
    if net is None:
        if spec is None:
            raise InputError("give a spec or a net", field="spec")
        check_spec(spec, DAGNET_KINDS)  # before `DagNet` unpacks it
        net = {"factory": "memsched.models.pipeline.dag_runner:DagNet",
               "kwargs": {"spec": spec, "width": width, "in_dim": in_dim, "out_dim": out_dim, "seed": seed}}
        in_shape = (in_dim,)
    if in_shape is None:
        raise InputError("give the input shape of the net", field="in_shape")
    model = build_net(net)
    spec = list(model.spec)
    check_spec(spec, DAGNET_KINDS if isinstance(model, DagNet) else None)
    check_runnable(part, micro_batches, len(spec))
    check_order(part, spec)
    check_batch(batch, micro_batches, steps)
    stage_layers = part.stage_layers()
    check_device(device, len(stage_layers))
    cfg = {"spec": spec, "net": net, "stage_layers": stage_layers, "boundaries": boundaries(spec, stage_layers),
           "world": len(stage_layers), "micro_batches": micro_batches, "batch": batch, "steps": steps,
           "schedule": part.schedule, "device": device, "threads": threads, "port": free_port(),
           "data_seed": seed + 1,
           "shapes": node_shapes(model, torch.zeros(batch // micro_batches, *in_shape))}
    results = run_ranks(_worker, cfg, timeout_s)
    x, y = _data(cfg)
    nn.MSELoss()(model(x), y).backward()
    ref = {n: p.grad.detach() for n, p in model.named_parameters()}
    ok, err = check_grads(results, ref)
    return {"grad_check": ok, "grad_max_abs_err": err,
            "step_time_s": max(statistics.median(r["step_times"]) for r in results.values()),
            "saved_peak": [results[r]["saved_peak"] for r in range(cfg["world"])],
            "cpu_per_micro_batch_s": [results[r]["cpu_per_micro_batch"] for r in range(cfg["world"])],
            "cpu_calls": [results[r]["cpu_calls"] for r in range(cfg["world"])], "config": cfg}


def compare_dag(inst: Pipeline, part: Partition, run: dict[str, Any]) -> dict[str, Any]:
    """Predicted (simulator) against measured: batch makespan, per-stage stash n_s A_s (``stash``)
    and saved activations (``saved``: the stash plus the loss's saved tensors on the last stage,
    `runner.predicted_saved`; what ``measured.saved_activations_peak`` should equal). Every
    predicted figure is for the run's m (``run["config"]["micro_batches"]``), whatever
    ``part.micro_batches`` was solved for (`runner.for_run`: GPipe's in-flight counts and stage
    memory depend on it); `part` itself is not modified."""
    m = run["config"]["micro_batches"]
    part = for_run(part, m).evaluated(inst)
    stash = [(s.in_flight if part.schedule == "1f1b" else m) * A
             for s, A in zip(part.stages, stage_stashes(inst, part))]
    last = part.stages[-1].in_flight if part.schedule == "1f1b" else m
    ev = simulate(inst, part)
    return {"predicted": {"period_s": ev.period * inst.time_unit,
                          "makespan_s": simulate_batch(inst, part, m).makespan * inst.time_unit,
                          "stage_memory": ev.stage_memory, "stash": stash,
                          "saved": predicted_saved(inst, stash, last), "in_flight": ev.in_flight,
                          "stage_times_s": [t * inst.time_unit for t in ev.stage_times]},
            "measured": {"step_time_s": run["step_time_s"], "saved_activations_peak": run["saved_peak"],
                         "cpu_per_micro_batch_s": run["cpu_per_micro_batch_s"],
                         "cpu_bottleneck_s": max(run["cpu_per_micro_batch_s"])},
            "boundary_tensors": [len(b) for b in run["config"]["boundaries"]],
            "grad_check": run["grad_check"], "grad_max_abs_err": run["grad_max_abs_err"], "partition": str(part)}


__all__ = ["DagNet", "DagStage", "boundaries", "build_net", "check_order", "check_spec", "check_spec_shape",
           "compare_dag", "node_shapes", "profile_dag", "residual_spec", "run_dag_partition", "successors"]
