"""Per-node costs of a training graph measured inside the graph executor (``timing="in_step"``).

`models.graph.export` builds the graph's structure by running every fx op once on its own.
Timing those ops in isolation misses what the executor adds around each node (resolving the
arguments, building and keeping the tape, summing incoming gradients, dropping copies) and
the caches of a real step: on small CPU nodes the isolated times are 1.5-5x below a step's.
`profile_nodes` therefore runs the graph's own order (the store-all schedule: every node once,
a tape for every B_v) through `models.graph.executor.GraphExecutor`, with the same code path a
measured step takes, and reads per node:

- ``ms``: the median over `repeats` steps (after `warmup` untimed ones) of the node's time in
  the step (clock `clock`: "wall" or "thread", `models.memory.cpu_clock`), from the start of
  its computation to the end of the drops that follow it; ``spread``: (max - min) / median;
- ``kept`` (bytes, one extra step under `models.memory.LiveTensorTracker`): what the executor
  keeps for the node until its copy is dropped. F_v: the bytes the step holds more after F_v
  than before it (its output and its tape's internal saved tensors: masks, statistics, pooling
  indices; views of the producers' storages are not kept); the loss and B_v: the storages of
  its copy (the gradients for its producers), each counted once: those that did not exist before
  it and those it *passes through*: a gradient handed on unchanged (``add``'s, ``cat``'s views,
  a ``dropout``'s at p = 0) is the storage of the incoming gradient, which stays alive as long as
  either copy does. The graph model frees a copy at its last use without knowing that another
  copy shares its storage, so a pass-through is charged its storage again (an upper bound of the
  real bytes: twice while both copies live); ``passed`` records, per such node, the predecessor
  whose copy it shares and the bytes, from which the executor's prediction removes the double
  count (`models.graph.executor.shared_storage_excess`);
- ``rise`` (bytes): the peak of the step's live bytes during the node above the level before
  it, by the tracker; ``alloc_rise``: the same by the CPU allocator's own reports (one more step
  under ``torch.profiler`` with memory events, each node a ``record_function`` range; on CUDA
  ``torch.cuda.max_memory_allocated`` above ``memory_allocated`` before the node, in the
  tracker's step). A rise exceeds the kept bytes by the node's *temporaries*: a parameter's
  gradient before it is added into ``.grad``, the intermediate gradients of a loss, and, seen
  by the allocator only, kernel scratch buffers (oneDNN convolutions: about their output's
  size). `temporaries` gives them per node: rise - new bytes kept (kept less passed), at least 0;
- ``output`` and ``plain_rise``: per forward node, its output's new bytes (where below ``kept``:
  the rest is its tape's saved tensors, which a computation without a tape does not keep) and its
  rise when computed under ``torch.no_grad()`` (one more forward of the graph order, per method);
  ``released``: per backward node, how far its rise stays below the new bytes it keeps (autograd
  frees the tape's saved tensors while it runs). The executor's prediction uses them for the
  computations that keep no tape and the tapes dropped before their copies
  (`models.graph.executor.GraphExecutor.untaped_excess`);
- ``random``: the forward nodes that draw random numbers (dropout): a schedule that computes one
  again keeps the CPU RNG state of its first computation until the step ends
  (`models.measure.RngStates`), bytes the allocator sees and the tracker does not;
- ``unseen`` (bytes, CPU only): per forward node, the allocator's level at the end of its computation
  less at its start (the allocator-events step) above its kept bytes by the tracker, where positive: a
  Python scalar in an op with a tape (``h * 1.1``) is saved by autograd as a 0-dim double tensor (8 B)
  that no op makes, so the tracker never sees it. The export records it in the profiled graph's
  ``meta["allocator_tape"]`` (`NodeProfile.allocator_tape`), which the executor's allocator
  prediction charges while the tape lives (`models.graph.executor.GraphExecutor.allocator_tape_bytes`);
  ``cost_ram`` (the tracker's) leaves it out.

These are the graph's ``cost_cpu`` (ms) and ``cost_ram`` (bytes) with ``timing="in_step"``:
the store-all schedule's predicted makespan is then the sum of its nodes' in-step times. The
temporaries are stored in the graph's ``meta["temporaries"]`` (node name -> bytes, per method)
and, their maximum over the methods, in the graph's per-node ``workspace`` W_v
(`with_workspace`), which the graph model charges while v computes (docs/graph.md): the
solvers then plan with them. The executor predicts each method's measured peak with that
method's own temporaries (`models.graph.executor`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.models.memory import LiveTensorTracker, cpu_clock, storage_key
from torch.utils._pytree import tree_flatten

__all__ = ["NodeProfile", "profile_nodes"]


@dataclass
class NodeProfile:
    """Per graph node (index): median in-step time (ms), its spread, kept bytes and peak rise
    (bytes); how it was measured (`repeats` timed steps after `warmup`, `clock`)."""

    ms: list[float]
    spread: list[float]
    kept: list[int]
    rise: list[int]
    repeats: int
    warmup: int
    clock: str
    alloc_rise: list[int] | None = None
    random: list[int] = field(default_factory=list)
    samples: list[list[float]] = field(default_factory=list, repr=False)
    #: node -> {predecessor node: bytes of that predecessor's copy this node's copy shares} (pass-throughs)
    passed: dict[int, dict[int, int]] = field(default_factory=dict)
    #: forward node -> bytes of the new storages of its output alone (what a computation without a tape
    #: keeps), recorded where less than its kept bytes (its tape's internal saved tensors are the rest)
    output: dict[int, int] = field(default_factory=dict)
    #: method ("tracker", "allocator") -> per node: the peak rise of its computation without a tape
    #: (bytes; forward nodes only, 0 elsewhere), from one forward of the graph order under torch.no_grad
    plain_rise: dict[str, list[int]] = field(default_factory=dict)
    #: the backward nodes (indices) that dropped their tape (`released`)
    backward: set[int] = field(default_factory=set)
    #: forward node -> bytes its computation keeps that the CPU allocator sees and the tracker does not (a
    #: Python scalar autograd saves on the tape as a 0-dim tensor, `allocator_tape`); CPU only, others left out
    unseen: dict[int, int] = field(default_factory=dict)

    def temporaries(self, names: list[str]) -> dict[str, dict[str, int]]:
        """method ("tracker", "allocator") -> node name -> bytes of its temporaries (rise - the new
        bytes kept: a passed-through storage existed before the node and is not in its rise; nodes
        without any left out)."""
        new = [k - sum(self.passed.get(v, {}).values()) for v, k in enumerate(self.kept)]
        out: dict[str, dict[str, int]] = {}
        for method, rise in (("tracker", self.rise), ("allocator", self.alloc_rise)):
            if rise is not None:
                out[method] = {names[v]: int(r - k) for v, (r, k) in enumerate(zip(rise, new)) if r > k}
        return out

    def released(self, names: list[str]) -> dict[str, dict[str, int]]:
        """method -> backward node name -> bytes its peak stays below the new bytes it keeps (the
        graph's ``meta["released"]``): autograd frees the tape's saved tensors (attention's weights)
        as it goes, before the last of the gradients it returns is made, so the node's rise is less
        than its copy; nodes without any left out."""
        new = [k - sum(self.passed.get(v, {}).values()) for v, k in enumerate(self.kept)]
        out: dict[str, dict[str, int]] = {}
        for method, rise in (("tracker", self.rise), ("allocator", self.alloc_rise)):
            if rise is not None:
                out[method] = {names[v]: int(k - r) for v, (r, k) in enumerate(zip(rise, new))
                               if v in self.backward and r < k}
        return out

    def untaped(self, names: list[str]) -> dict[str, int]:
        """`output` by node names (the graph's ``meta["untaped"]``): forward node -> bytes a computation
        that keeps no tape (`models.graph.executor`: one no B_v uses) keeps until its copy is dropped."""
        return {names[v]: int(b) for v, b in sorted(self.output.items())}

    def untaped_temporaries(self, names: list[str]) -> dict[str, dict[str, int]]:
        """method -> node name -> bytes of the temporaries of a computation without a tape (its rise
        above its output's bytes, `plain_rise`), for the nodes of `untaped` that have any (the graph's
        ``meta["untaped_temporaries"]``: without grad, attention keeps fewer of its weights at once,
        dropout still draws its mask)."""
        out: dict[str, dict[str, int]] = {}
        for method, rise in self.plain_rise.items():
            out[method] = {names[v]: int(rise[v] - b) for v, b in sorted(self.output.items()) if rise[v] > b}
        return out

    def allocator_tape(self, names: list[str]) -> dict[str, int]:
        """`unseen` by node names (the graph's ``meta["allocator_tape"]``): forward node -> bytes its tape
        keeps that the CPU allocator sees and the tracker does not."""
        return {names[v]: int(b) for v, b in sorted(self.unseen.items())}

    def passes(self, names: list[str]) -> dict[str, dict[str, int]]:
        """`passed` by node names (the graph's ``meta["passes"]``)."""
        return {names[v]: {names[p]: int(b) for p, b in src.items()} for v, src in sorted(self.passed.items())}


def with_workspace(graph: Any) -> Any:
    """`graph` (a `solvers.graph.Graph`) with ``workspace[v]`` = the largest of node v's profiled
    temporaries over the methods in ``meta["temporaries"]`` (bytes; tau_v of docs/graph.md),
    so that the solvers charge them; a graph without such a record, or that already has
    workspaces, is returned unchanged."""
    import dataclasses

    records = graph.meta.get("temporaries") or {}
    if graph.has_workspace or not records:
        return graph
    work = [max((int(rec.get(name, 0)) for rec in records.values()), default=0) for name in graph.names]
    return dataclasses.replace(graph, workspace=work)


class _Probe:
    """Receives the executor's per-step calls (`GraphExecutor._run`'s `probe`)."""

    def __init__(self, seq: list[int], n: int, clock: str, tracker: LiveTensorTracker | None,
                 device: torch.device | None = None) -> None:
        self.seq = seq
        clock_now = cpu_clock(clock)
        if device is not None and device.type == "cuda":  # a node's time ends when its kernels do

            def now() -> float:
                torch.cuda.synchronize(device)
                return clock_now()

            self.now = now
        else:
            self.now = clock_now
        self.tracker = tracker
        self.t0 = 0.0
        self.times: list[list[float]] = [[] for _ in range(n)]
        self.kept = [0] * n
        self.passed: dict[int, dict[int, int]] = {}
        self.output: dict[int, int] = {}  # forward node -> its output's new bytes, where below its kept bytes
        self.preds: list[list[int]] = [[] for _ in range(n)]  # the graph's, to name a passed storage's source
        self.rise = [0] * n
        self.tracked: dict[int, int] = {}  # forward node -> what it keeps by the tracker (bytes, unclamped)
        self.level = 0
        self.live: dict[int, int] = {}  # the storages alive when the step started (`LiveTensorTracker.live_storages`)
        self.forward: set[int] = set()
        self.random: set[int] = set()  # forward nodes that draw random numbers
        self.rng: torch.Tensor | None = None
        self.cuda = device if device is not None and device.type == "cuda" else None
        self.cuda_level = 0
        self.cuda_rise = [0] * n  # torch.cuda.max_memory_allocated above the level before the node

    def start(self, s: int) -> None:
        """A step begins: note the clock (and the live storages and bytes when sizing)."""
        if self.tracker is not None:
            self.level = self.tracker.current
            self.live = self.tracker.live_storages()
            self.tracker.reset_peak()
            self.rng = torch.get_rng_state() if self.seq[s] in self.forward else None
            if self.cuda is not None:
                torch.cuda.synchronize(self.cuda)
                torch.cuda.reset_peak_memory_stats(self.cuda)
                self.cuda_level = torch.cuda.memory_allocated(self.cuda)
        self.t0 = self.now()

    def computed(self, s: int, node: int, run: Any, meter: Any) -> None:
        """The node is computed, its ended copies not yet dropped: read its kept bytes and rise."""
        if self.tracker is None:
            return
        v = self.seq[s]
        if v in self.forward:
            kept = self.tracker.current - self.level
            self.tracked[v] = kept
            output = self._new_bytes(run.copies[v][1])
            if output < kept:
                self.output[v] = output
        else:
            seen: dict[int, int] = {}
            for t in tree_flatten(run.copies[v][1])[0]:
                if isinstance(t, torch.Tensor) and t.numel():
                    key, nbytes = storage_key(t), int(t.untyped_storage().nbytes())
                    if key in seen:
                        continue
                    existed = self.tracker.same_storage(key, self.live)
                    if not existed or self._passed_from(v, key, nbytes, run):
                        seen[key] = nbytes
            kept = sum(seen.values())
        if self.rng is not None and not torch.equal(self.rng, torch.get_rng_state()):
            self.random.add(v)
        self.kept[v] = max(0, int(kept))
        self.rise[v] = max(0, int(self.tracker.peak - self.level))
        if self.cuda is not None:
            torch.cuda.synchronize(self.cuda)
            self.cuda_rise[v] = max(0, int(torch.cuda.max_memory_allocated(self.cuda) - self.cuda_level))

    def _new_bytes(self, value: Any) -> int:
        """Bytes of the storages of `value`'s tensors made since the step began, each counted once."""
        assert self.tracker is not None
        seen: dict[int, int] = {}
        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor) and t.numel():
                key = storage_key(t)
                if key not in seen and not self.tracker.same_storage(key, self.live):
                    seen[key] = int(t.untyped_storage().nbytes())
        return sum(seen.values())

    def _passed_from(self, v: int, key: int, nbytes: int, run: Any) -> bool:
        """Record that node v's copy passes on the storage `key` (`nbytes`) of a predecessor's
        copy; False when no predecessor's copy holds it (then it is not v's to charge)."""
        for p in self.preds[v]:
            copy = run.copies.get(p)
            if copy is not None and any(isinstance(t, torch.Tensor) and t.numel() and storage_key(t) == key
                                        for t in tree_flatten(copy[1])[0]):
                src = self.passed.setdefault(v, {})
                src[p] = src.get(p, 0) + nbytes
                return True
        return False

    def stop(self, s: int) -> None:
        """The step ends (its drops included): record its time."""
        self.times[self.seq[s]].append((self.now() - self.t0) * 1e3)


class _RangeProbe(_Probe):
    """Marks each step's computation, up to the node computed (its drops are not in it: they only
    free), as a ``torch.profiler.record_function`` range (``memsched.step.<s>``)."""

    def __init__(self, seq: list[int], n: int, clock: str) -> None:
        super().__init__(seq, n, clock, None)
        self.range: Any = None

    def start(self, s: int) -> None:
        """Open step s's range."""
        self.range = torch.profiler.record_function(f"memsched.step.{s}")
        self.range.__enter__()

    def computed(self, s: int, node: int, run: Any, meter: Any) -> None:
        """Close step s's range: the allocator's level at its end, less at its start, is what the node keeps."""
        self.stop(s)

    def stop(self, s: int) -> None:
        """Close step s's range (once)."""
        if self.range is not None:
            self.range.__exit__(None, None, None)
            self.range = None


def _allocator_rises(prof: Any, seq: list[int], n: int) -> tuple[list[int], list[int]]:
    """Per node: the peak of the CPU allocator's running sum during its step's range above the sum at the range's
    start, and the sum at the range's end less at its start (bytes; what the node keeps, >= 0 or not), from
    the profiler's allocation events."""
    from torch._C._profiler import _EventType

    events: list[tuple[int, int]] = []
    ranges: dict[int, tuple[int, int]] = {}
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            if node.extra_fields.device.type == "cpu":
                events.append((int(node.start_time_ns), int(node.extra_fields.alloc_size)))
        elif node.name.startswith("memsched.step."):
            ranges[int(node.name.rsplit(".", 1)[1])] = (int(node.start_time_ns), int(node.end_time_ns))
        stack.extend(node.children)
    events.sort()
    rises, nets = [0] * n, [0] * n
    i, level = 0, 0
    for s in sorted(ranges):
        begin, end = ranges[s]
        while i < len(events) and events[i][0] < begin:
            level += events[i][1]
            i += 1
        base = peak = level
        while i < len(events) and events[i][0] <= end:
            level += events[i][1]
            peak = max(peak, level)
            i += 1
        rises[seq[s]] = peak - base
        nets[seq[s]] = level - base
    return rises, nets


def profile_nodes(executor: Any, inputs: torch.Tensor, target: Any, *, repeats: int = 5, warmup: int = 2,
                  clock: str = "wall", seed: int = 0) -> NodeProfile:
    """Run the graph order of `executor.graph` (a `GraphExecutor`) `warmup` + `repeats` times
    on (`inputs`, `target`) and once under the tracker; per node the median time (ms, `clock`)
    and the bytes kept (see the module docstring). Parameter gradients are accumulated as in any
    step (and zeroed by each)."""
    graph = executor.graph
    seq = list(range(graph.n))
    _, frees, tape_at, retain_at = executor.prepare(seq, inputs)
    timer = _Probe(seq, graph.n, clock, None, inputs.device)
    for _ in range(max(0, warmup)):  # lazily allocated caches, first-call costs
        executor._run(seq, frees, tape_at, retain_at, inputs, target, seed, False, False, clock, probe=timer)
    sizer = _Probe(seq, graph.n, clock, LiveTensorTracker(), inputs.device)
    sizer.forward = set(executor.plan.ops)
    sizer.preds = [list(ps) for ps in graph.preds]
    with sizer.tracker:  # type: ignore[union-attr]
        executor._run(seq, frees, tape_at, retain_at, inputs, target, seed, False, False, clock, probe=sizer)
    alloc_rise = sizer.cuda_rise if inputs.device.type == "cuda" else None
    unseen: dict[int, int] = {}
    if inputs.device.type == "cpu":
        from memsched.models.alloc_probe import allocator_events

        ranges = _RangeProbe(seq, graph.n, clock)
        with allocator_events() as prof:
            executor._run(seq, frees, tape_at, retain_at, inputs, target, seed, False, False, clock, probe=ranges)
        alloc_rise, alloc_kept = _allocator_rises(prof, seq, graph.n)
        unseen = {v: alloc_kept[v] - b for v, b in sorted(sizer.tracked.items()) if alloc_kept[v] > b}
    plain_rise = _plain_rises(executor, inputs, target, clock, seed)
    timer.times = [[] for _ in range(graph.n)]
    for _ in range(max(1, repeats)):
        executor._run(seq, frees, tape_at, retain_at, inputs, target, seed, False, False, clock, probe=timer)
    ms = [float(statistics.median(ts)) for ts in timer.times]
    spread = [(max(ts) - min(ts)) / m if m > 0 else 0.0 for ts, m in zip(timer.times, ms)]
    return NodeProfile(ms, spread, sizer.kept, sizer.rise, max(1, repeats), max(0, warmup), clock, alloc_rise,
                       sorted(sizer.random), timer.times, sizer.passed, sizer.output, plain_rise,
                       set(executor.fwd_of), unseen)


def _plain_rises(executor: Any, inputs: torch.Tensor, target: Any, clock: str, seed: int) -> dict[str, list[int]]:
    """Per method: each forward node's peak rise (bytes) when computed without a tape, as a
    schedule's computation that no B_v uses runs (`GraphExecutor._compute` under ``torch.no_grad``),
    from the graph order's forward nodes alone (every copy kept: drops only lower a rise); by the
    tracker, and by the CPU allocator's events on CPU (``torch.cuda.max_memory_allocated`` on CUDA)."""
    from memsched.models.buffers import restore_buffers, snapshot_buffers, step_modules

    graph = executor.graph
    fwd = [v for v in range(graph.n) if v in executor.plan.ops]
    saved = snapshot_buffers(step_modules(executor.blocks, executor.loss_fn))  # no step: put them back
    try:
        executor._run(fwd, {}, set(), set(), inputs, target, seed, False, False, clock)  # first-call caches
        plain = _Probe(fwd, graph.n, clock, LiveTensorTracker(), inputs.device)
        plain.forward = set(fwd)
        with plain.tracker:  # type: ignore[union-attr]
            executor._run(fwd, {}, set(), set(), inputs, target, seed, False, False, clock, probe=plain)
        out = {"tracker": plain.rise}
        if inputs.device.type == "cuda":
            out["allocator"] = plain.cuda_rise
        elif inputs.device.type == "cpu":
            from memsched.models.alloc_probe import allocator_events

            ranges = _RangeProbe(fwd, graph.n, clock)
            with allocator_events() as prof:
                executor._run(fwd, {}, set(), set(), inputs, target, seed, False, False, clock, probe=ranges)
            out["allocator"] = _allocator_rises(prof, fwd, graph.n)[0]
    finally:
        restore_buffers(saved)
    return out
