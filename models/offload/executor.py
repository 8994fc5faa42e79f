"""Execute an offloading schedule (`solvers.offload.OffloadSchedule`) for real: one training step
whose values move between device memory and host memory as the schedule says.

The compute operations follow `models.chain.executor` (F_all, F_ck, F_n, Loss, B; same RNG handling,
so recomputed dropout masks are identical and gradients match plain autograd); the transfers
follow the rules of `solvers.offload.simulator`:

==========  ================================================================================
value       what lives on the device, and what moves
==========  ================================================================================
a_j         the activation tensor itself (its storage).
abar_j      the tape of stage j-1: every storage autograd saved during F_all(j-1) (captured
            with ``torch.autograd.graph.saved_tensors_hooks``: the pack hook returns a handle
            into a holder this executor controls, the unpack hook rebuilds the tensor from
            wherever its storage lives now) plus the output a_j. Saved tensors that are
            parameters, buffers or parameter gradients stay where they are; saved tensors that
            are (views of) the stage's input a_{j-1} are not part of the tape (the simulator
            counts a_{j-1} apart): they are rebuilt at B(j-1) from the a_{j-1} then resident.
==========  ================================================================================

``Off(v)`` copies each storage of v to host memory (unless a host copy of this value exists
already) and drops the device copy; ``Pre(v)`` allocates a device copy and copies the host
bytes back. The host copy stays until the step ends (tapes: until their backward ran), as in
the simulator. The backward of a tape is run on its ``GradientEdge``, so no Python reference
to its output keeps the device memory alive; the input leaf of a tape holds no storage
between its forward and its backward. When a backward starts, each saved tensor is handed to
its handle and the holder lets go, so autograd frees it as soon as its node has run, as it does
without hooks (measured after every op, the pool then holds exactly the values the simulator
has on the device: tests/test_models_offload.py).

On CUDA: transfers run on a side ``torch.cuda.Stream``; host buffers are pinned
(``torch.empty(..., pin_memory=True)``) and copies are ``non_blocking``. An offload first
waits (event) for the compute work issued before it, so the value is complete; its device
buffer is marked with ``record_stream(side)``, so the caching allocator does not reuse it
before the copy has ended, and is dropped at once. A prefetch allocates on the side stream,
marks its buffer with ``record_stream(compute)`` and records an event; every compute
operation waits on the events of the prefetched values it reads before it is issued.
Memory: ``torch.cuda.max_memory_allocated`` during the step (bytes), where a buffer leaves
the count when its ``Off`` is issued and a prefetch counts from its issue (the allocator's
view; the simulator releases at the copy's end, so on CUDA the two agree when the CPU issues
no further ahead than the copies run). Time: wall time of the step with both streams synced.

On CPU there is no link: "host memory" is memory outside the measured pool. ``Off`` copies
the bytes into NumPy arrays (which `models.memory.LiveTensorTracker` does not see: they are
not torch allocations) and releases the torch storage; ``Pre`` allocates a new torch tensor
inside the pool and copies the bytes back. Transfers are synchronous ``memcpy``: the measured
time includes them on the critical path and is not comparable with the simulator's bandwidth
model (a CPU run checks gradients and memory, not overlap). Memory is comparable: the tracker
is the one the profiler used for the chain's sizes. The run is synchronous, one op after the
other, so its peak is compared with two predictions: the simulator's two-stream peak, which it
does not exceed (the simulator overlaps a prefetch with the compute op before it and keeps an
offloaded copy until its transfer ends), and `sequential_replay`, the same simulator with every
op starting after the previous one ended, which it matches (exactly on the tiny ResNet of the
tests; below by the profile's over-charge of ``fwd_overhead`` on GPT-2), both up to the
allocation noise that `tests/test_models_executor.py` allows (1% + 4 KiB).

Known limits: a block that returns a view of its input, or saves a view of its input under a
different dtype, keeps that storage shared (correct gradients, but the bytes do not leave the
device with the value); tensors a custom ``autograd.Function`` keeps as ``ctx`` attributes
(not through ``save_for_backward``) and tensors a module caches across calls stay where they
are; a value freed by a compute operation keeps its host copy (a later ``Pre`` of it, which
the simulator allows, brings back the last offloaded content). The CUDA path follows the
standard side-stream pattern but has not been run on a GPU yet (see the CUDA test).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from memsched.models.chain.executor import (
    ChainExecutor,
    LossFn,
    StepResult,
    _State,
    as_blocks,
    compare_gradients,
    gradients_match,
    measured_vs_predicted,
    reference_step,
)
from memsched.models.memory import storage_key
from memsched.solvers.chain import Chain
from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op
from memsched.solvers.offload import OffloadInstance, OffloadSchedule, OffloadSimulation, Transfer, simulate_offload
from memsched.solvers.offload.schedule import OFF, PRE
from torch import nn

__all__ = ["OffloadExecutor", "OffloadStepResult", "execute_offload", "run_offload", "describe_offload",
           "sequential_replay", "CPU_MEASUREMENT"]

CPU_MEASUREMENT = ("cpu: transfers are synchronous memcpy to NumPy arrays outside the tracked pool; measured "
                   "memory is comparable with the simulator's, measured time is not (no link, no overlap)")

Key = tuple[str, int]  # ("a", j) | ("abar", j)


# --------------------------------------------------------------------------- predictions
def sequential_replay(inst: OffloadInstance, schedule: OffloadSchedule | Sequence[Op | Transfer]
                      ) -> OffloadSimulation:
    """The two-stream simulator's replay of `schedule` with every operation starting after the
    one issued before it has ended (``not_before`` = the sum of the earlier operations'
    durations, transfers at full size/bandwidth + latency): the memory a synchronous, one-stream
    execution uses, which is what the CPU executor measures. Its peak (bytes) is at most the
    two-stream one in the cases we know (it removes overlap), and equals a CPU run's measured
    peak up to the profile's own error (e.g. ``fwd_overhead`` is the larger of the two forward
    modes')."""
    chain = inst.chain
    L = chain.length
    ops = list(schedule)
    t, not_before = 0.0, []
    for op in ops:
        not_before.append(t)
        if isinstance(op, Transfer):
            t += inst.transfer_time(int(chain.xbar[op.index] if op.value == "abar" else chain.x[op.index]))
        else:
            kind, i = op
            t += float(chain.u_b[L] if kind == LOSS else (chain.u_b[i] if kind == B else chain.u_f[i]))
    return simulate_offload(inst, OffloadSchedule(ops, L, not_before))


@dataclass
class OffloadStepResult(StepResult):
    """`models.chain.executor.StepResult` plus the offloading prediction's extras: `predicted_host_peak`
    (bytes on the host at most, two-stream replay), `sequential_peak` (bytes, `sequential_replay`:
    the prediction a synchronous CPU run is compared with) and the number of `transfers`."""

    predicted_host_peak: int | None = None
    sequential_peak: int | None = None
    transfers: int = 0


# --------------------------------------------------------------------------- values
@dataclass
class _Storage:
    """One storage of a value: a flat uint8 tensor over its device bytes (None when not on the
    device), its host copy (NumPy array on CPU, pinned uint8 tensor on CUDA) and, after a CUDA
    prefetch, the event after which the device bytes are valid."""

    nbytes: int
    flat: torch.Tensor | None
    host: Any = None
    ready: Any = None  # torch.cuda.Event | None


@dataclass(frozen=True)
class _Ref:
    """A tensor as a strided view of storage `index` of its value (offset in elements)."""

    index: int
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


class _Holder:
    """The storages of one value; the handles of a tape point here (never to the graph)."""

    def __init__(self) -> None:
        self.storages: list[_Storage] = []
        self._index: dict[int, int] = {}
        self.handles: weakref.WeakSet[_Saved] = weakref.WeakSet()

    def ref(self, t: torch.Tensor) -> _Ref:
        st = t.untyped_storage()
        key = int(st._cdata)
        k = self._index.get(key)
        if k is None:
            k = self._index[key] = len(self.storages)
            flat = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st)
            self.storages.append(_Storage(int(st.nbytes()), flat))
        return _Ref(k, t.dtype, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))

    def tensor(self, r: _Ref) -> torch.Tensor:
        flat = self.storages[r.index].flat
        if flat is None:
            raise RuntimeError("a value was read while it is not on the device (missing prefetch)")
        return flat.view(r.dtype).as_strided(r.size, r.stride, r.offset)

    def hand_over(self, keep: int) -> None:
        """At the start of a backward: every live handle takes its tensor, and the holder drops
        its device storages except `keep` (the output's), so that autograd frees each saved
        tensor as soon as the node that used it has run, as it does without hooks."""
        for h in list(self.handles):
            if h.ref is not None:
                h.cache = self.tensor(h.ref)
        for k, st in enumerate(self.storages):
            if k != keep:
                st.flat = None


class _InputSlot:
    """Where the tape of stage i finds its input a_i during B(i) (set just before, cleared after)."""

    __slots__ = ("tensor",)

    def __init__(self) -> None:
        self.tensor: torch.Tensor | None = None


class _Saved:
    """Pack-hook handle: a saved tensor of the tape (`holder`, `ref`) or a view of the input
    (`slot`, geometry relative to the input's storage offset). `cache` holds the tensor once
    its backward has started (see `_Holder.hand_over`)."""

    __slots__ = ("holder", "ref", "slot", "dtype", "size", "stride", "rel_offset", "cache", "__weakref__")

    def __init__(self, holder: _Holder | None, ref: _Ref | None = None, slot: _InputSlot | None = None,
                 dtype: torch.dtype | None = None, size: tuple[int, ...] = (), stride: tuple[int, ...] = (),
                 rel_offset: int = 0) -> None:
        self.holder, self.ref, self.slot = holder, ref, slot
        self.dtype, self.size, self.stride, self.rel_offset = dtype, size, stride, rel_offset
        self.cache: torch.Tensor | None = None
        if holder is not None:
            holder.handles.add(self)

    def unpack(self) -> torch.Tensor:
        if self.cache is not None:
            return self.cache
        if self.holder is not None:
            assert self.ref is not None
            return self.holder.tensor(self.ref)
        assert self.slot is not None
        base = self.slot.tensor
        if base is None:
            raise RuntimeError("a tape's input was read outside its backward")
        return base.as_strided(self.size, self.stride, base.storage_offset() + self.rel_offset)


@dataclass
class _Value:
    """a_j (`out` is the activation) or abar_j (also `leaf`, `edge`, `slot` of its graph)."""

    key: Key
    holder: _Holder
    out: _Ref
    leaf: torch.Tensor | None = None
    edge: Any = None  # torch.autograd.graph.GradientEdge | None
    slot: _InputSlot | None = None

    def activation(self) -> torch.Tensor:
        return self.holder.tensor(self.out)


def _unpack(h: Any) -> torch.Tensor:
    return h.unpack() if isinstance(h, _Saved) else h


# --------------------------------------------------------------------------- transfers
class _Link:
    """Moves value bytes between the device and the host: synchronous NumPy copies on CPU,
    a side stream with pinned buffers and events on CUDA (see the module docstring)."""

    def __init__(self, device: torch.device, side: Any = None) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.side = side
        self.compute = torch.cuda.current_stream(device) if self.cuda else None

    def offload(self, holder: _Holder) -> None:
        if self.cuda:
            complete = torch.cuda.Event()
            complete.record(self.compute)
            self.side.wait_event(complete)
            with torch.cuda.stream(self.side):
                for st in holder.storages:
                    assert st.flat is not None
                    if st.host is None:
                        st.host = torch.empty(st.nbytes, dtype=torch.uint8, pin_memory=True)
                        st.host.copy_(st.flat, non_blocking=True)
                    st.flat.record_stream(self.side)
                    st.flat, st.ready = None, None
            return
        for st in holder.storages:
            assert st.flat is not None
            if st.host is None:
                st.host = st.flat.numpy().copy()  # NumPy memory: outside the tracked pool
            st.flat = None

    def prefetch(self, holder: _Holder) -> None:
        if self.cuda:
            with torch.cuda.stream(self.side):
                for st in holder.storages:
                    flat = torch.empty(st.nbytes, dtype=torch.uint8, device=self.device)
                    flat.copy_(st.host, non_blocking=True)
                    flat.record_stream(self.compute)
                    st.flat = flat
                done = torch.cuda.Event()
                done.record(self.side)
            for st in holder.storages:
                st.ready = done
            return
        for st in holder.storages:
            flat = torch.empty(st.nbytes, dtype=torch.uint8, device=self.device)  # inside the pool
            flat.copy_(torch.from_numpy(st.host))
            st.flat = flat

    def wait(self, holder: _Holder) -> None:
        """Make the compute stream wait for a prefetch of `holder` (CUDA; no-op on CPU)."""
        for st in holder.storages:
            if st.ready is not None:
                self.compute.wait_event(st.ready)
                st.ready = None


@dataclass
class _Store:
    """Where every value is: `device` and `host` as in the simulator's on_device / on_host."""

    link: _Link
    static: set[int]
    device: dict[Key, _Value] = field(default_factory=dict)
    host: dict[Key, _Value] = field(default_factory=dict)

    def activation(self, j: int) -> _Value:
        """The value a_j is read from: the standalone copy when resident, else the tape abar_j."""
        v = self.device.get(("a", j)) or self.device.get(("abar", j))
        if v is None:
            raise RuntimeError(f"a_{j} is not on the device")
        return v

    def free(self, key: Key) -> None:
        """A compute operation frees `key` when it is on the device (the simulator's rule): its
        device copy is dropped at once, even while a host copy keeps the value object."""
        v = self.device.pop(key, None)
        if v is not None:
            for st in v.holder.storages:
                st.flat = st.ready = None

    def read(self, v: _Value) -> torch.Tensor:
        self.link.wait(v.holder)
        return v.activation()


# --------------------------------------------------------------------------- executor
class OffloadExecutor(ChainExecutor):
    """Runs `OffloadSchedule`s on `blocks` (block i: a_i -> a_{i+1}) followed by `loss_fn`.

    `step(schedule, x, target, inst=...)` returns an `OffloadStepResult` (a
    `models.chain.executor.StepResult`) whose predicted peak (bytes) and makespan (the chain's time
    unit, ms for profiled chains) are the two-stream simulator's
    (`solvers.offload.simulate_offload`), and whose measured peak (bytes) and time (ms) are
    this executor's; see the module docstring for what they mean on
    CPU and on CUDA. Chain schedules without transfers run too.
    """

    def __init__(self, blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn) -> None:
        super().__init__(blocks, loss_fn)
        self._side: Any = None

    def step(  # type: ignore[override]
        self,
        schedule: OffloadSchedule | Sequence[Op | Transfer],
        inputs: torch.Tensor,
        target: Any,
        *,
        inst: OffloadInstance | None = None,
        chain: Chain | None = None,
        bandwidth: float | None = None,
        **options: Any,
    ) -> OffloadStepResult:
        """Execute `schedule` as one training step (options as `ChainExecutor.step`).

        `inst` (or `chain` with `bandwidth` in bytes/s) gives the simulator's prediction; an
        invalid schedule raises `ValueError` before anything runs.
        """
        ops = list(schedule)
        if inst is None and chain is not None:
            if bandwidth is None:
                raise ValueError("a chain needs a bandwidth (bytes/s) to predict an offloading schedule")
            inst = OffloadInstance(chain, float(bandwidth))
        sim = None
        if inst is not None:
            if inst.length != self.length:
                raise ValueError(f"chain has {inst.length} stages, the model {self.length} blocks")
            sim = simulate_offload(inst, OffloadSchedule(ops, inst.length))
            if not sim.valid:
                raise ValueError(f"invalid offloading schedule: {sim.violation}")
        if inputs.device.type == "cuda" and self._side is None:
            self._side = torch.cuda.Stream(inputs.device)
        base = super().step(ops, inputs, target, chain=None, **options)  # type: ignore[arg-type]
        result = OffloadStepResult(**{f.name: getattr(base, f.name) for f in fields(StepResult)},
                                   transfers=sum(isinstance(op, Transfer) for op in ops))
        if inst is not None and sim is not None:
            result.predicted_peak, result.predicted_makespan = sim.peak_memory, sim.makespan
            result.predicted_host_peak = sim.host_peak
            result.sequential_peak = sequential_replay(inst, ops).peak_memory
        return result

    # ----------------------------------------------------------------- state
    def _store(self, s: _State) -> _Store:
        """This run's value store, created at its first operation (it takes over a_0)."""
        store = getattr(s, "offload_store", None)
        if store is None:
            device = s.acts[0].device
            static = {storage_key(t) for b in self.blocks for t in (*b.parameters(), *b.buffers())}
            static |= {storage_key(p.grad) for p in self.params.values() if p.grad is not None}
            store = _Store(_Link(device, self._side), static)
            a0 = s.acts.pop(0)
            holder = _Holder()
            store.device[("a", 0)] = _Value(("a", 0), holder, holder.ref(a0))
            s.offload_store = store  # type: ignore[attr-defined]
        return store

    # ----------------------------------------------------------------- operations
    def _apply(self, op: Op | Transfer, s: _State, target: Any) -> None:  # type: ignore[override]
        store = self._store(s)
        if isinstance(op, Transfer):
            self._transfer(op, store)
            return
        kind, i = op
        L = self.length
        if kind == F_ALL:
            self._forward_all(i, store, s)
        elif kind in (F_CK, F_N):
            src = store.activation(i)
            x = store.read(src)
            version = x._version
            with s.rng.forward(i), torch.no_grad():
                y = self.blocks[i](x)
            if x._version != version:
                raise RuntimeError(f"block {i} ({type(self.blocks[i]).__name__}) modifies its input in place; "
                                   "the executor needs blocks that leave a_i unchanged")
            holder = _Holder()
            store.device[("a", i + 1)] = _Value(("a", i + 1), holder, holder.ref(y.detach()))
            if kind == F_N:
                store.free(("a", i))
        elif kind == LOSS:
            y = store.read(store.activation(L)).detach().requires_grad_(True)
            with torch.enable_grad():
                loss = self.loss_fn(y, target)
                loss.backward()
            s.loss = float(loss.detach())
            s.grads[L] = y.grad
            store.free(("a", L))
        elif kind == B:
            self._backward(i, store, s)
        else:
            raise ValueError(f"unknown operation {op}")

    def _transfer(self, op: Transfer, store: _Store) -> None:
        key: Key = (op.value, op.index)
        if op.kind == OFF:
            v = store.device.pop(key, None)
            if v is None:
                raise RuntimeError(f"{op}: {op.value}_{op.index} is not on the device")
            store.link.offload(v.holder)
            store.host[key] = v
        elif op.kind == PRE:
            v = store.host.get(key)
            if v is None or key in store.device:
                raise RuntimeError(f"{op}: {op.value}_{op.index} is not on the host only")
            store.link.prefetch(v.holder)
            store.device[key] = v
        else:
            raise ValueError(f"unknown transfer {op}")

    def _forward_all(self, i: int, store: _Store, s: _State) -> None:
        """F_all(i): run block i with autograd, capturing what it saves in the tape abar_{i+1}."""
        src = store.activation(i)
        a = store.read(src)
        x = a.detach()
        if x.is_floating_point() or x.is_complex():
            x.requires_grad_(True)
        holder, slot = _Holder(), _InputSlot()
        input_key = storage_key(x)
        static = store.static
        device = x.device

        def pack(t: torch.Tensor) -> Any:
            try:
                key = storage_key(t)
            except (RuntimeError, NotImplementedError):  # no storage (sparse, nested...): keep it
                return t
            if key in static or t.device != device:
                return t
            if key == input_key:
                if t.dtype != x.dtype:
                    return t  # known limit: kept (shares a_i's storage)
                return _Saved(None, slot=slot, dtype=t.dtype, size=tuple(t.shape), stride=tuple(t.stride()),
                              rel_offset=int(t.storage_offset()) - int(x.storage_offset()))
            return _Saved(holder, holder.ref(t))

        with s.rng.forward(i), torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, _unpack):
            y = self.blocks[i](x)
        edge = torch.autograd.graph.get_gradient_edge(y) if y.requires_grad else None
        value = _Value(("abar", i + 1), holder, holder.ref(y.detach()), leaf=x, edge=edge, slot=slot)
        del y, a
        x.data = torch.empty(0, dtype=x.dtype, device=device)  # the leaf holds no storage until B(i)
        store.device[("abar", i + 1)] = value

    def _backward(self, i: int, store: _Store, s: _State) -> None:
        """B(i): back-propagate delta_{i+1} through the tape abar_{i+1}; yields delta_i."""
        tape = store.device.get(("abar", i + 1))
        if tape is None:
            raise RuntimeError(f"B({i}): abar_{i + 1} is not on the device")
        a = store.read(store.activation(i))
        store.link.wait(tape.holder)
        delta = s.grads[i + 1]
        x = tape.leaf
        assert x is not None and tape.slot is not None
        x.data = a.detach()
        tape.slot.tensor = a.detach()
        tape.holder.hand_over(tape.out.index)
        try:
            if tape.edge is not None:
                torch.autograd.backward(tape.edge, delta)
        finally:
            tape.slot.tensor = None
        s.grads[i] = x.grad if x.requires_grad else None
        del s.grads[i + 1]
        store.free(("abar", i + 1))
        store.host.pop(("abar", i + 1), None)  # its graph is consumed: the host copy is useless now
        store.free(("a", i))
        tape.leaf = tape.edge = None


# --------------------------------------------------------------------------- helpers
def execute_offload(blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, schedule: OffloadSchedule,
                    inputs: torch.Tensor, target: Any, *, inst: OffloadInstance | None = None, seed: int = 0,
                    check: bool = True, rtol: float = 1e-4, atol: float = 1e-6, **options: Any
                    ) -> tuple[OffloadStepResult, bool | None]:
    """Run one step under `schedule`; when `check`, compare every gradient (parameters and
    input) with plain autograd at the same seed. Returns (result, grad_check or None)."""
    executor = OffloadExecutor(blocks, loss_fn)
    result = executor.step(schedule, inputs, target, inst=inst, seed=seed, **options)
    if not check:
        return result, None
    return result, gradients_match(result, executor.blocks, loss_fn, inputs, target, seed=seed, rtol=rtol, atol=atol)



def run_offload(
    model: Any,
    budget: int | str,
    *,
    bandwidth: float | str,
    solver: str = "offload-prefix",
    latency: float = 0.0,
    chain: Chain | None = None,
    sizes: dict[str, Any] | None = None,
    device: str | torch.device | None = None,
    seed: int = 0,
    time_repeats: int = 3,
    profile_repeats: int = 3,
    timing: str | None = None,
    slots: int = 500,
    time_limit: float | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Solve the offloading problem for a network and execute the schedule: `memsched run`'s
    JSON object for ``--bandwidth``.

    `model`: a zoo name (built with `sizes`, e.g. ``{"batch": 2, "image_size": 32}``, on
    `device`, default cuda when present; `sizes` may carry ``device`` and ``seed`` as
    `memsched run`'s ``model_sizes(args)`` does), a built `models.zoo.ZooModel`, or a tuple
    ``(blocks, example_input, loss_fn, target)``. `chain`: costs to
    use instead of profiling (same number of stages). `budget`: bytes, or a string ("1.5MB",
    "60%" of the store-all peak). `bandwidth`: bytes/s or a string ("12GB/s"); `latency`:
    seconds per transfer. Returns the keys of ``memsched run --json`` (model, chain, budget,
    solver, status, device, units, store_all_peak, predicted {makespan (ms), peak_memory,
    host_peak (bytes)}, measured {time (ms), peak_memory (bytes)}, ratio, store_all,
    grad_check, memory_method, transfers, loss) plus bandwidth, latency and measurement (what
    the CPU numbers mean), solve_time_s and the schedule (memsched.schedule/1); when no
    schedule fits: status, message, min_budget, and None for predicted / measured /
    grad_check (the command's exit code 1). Bad input raises `solvers.errors.InputError`.
    """
    from memsched.models.chain.profiler import profile_chain
    from memsched.models.gpu_check import tolerances
    from memsched.models.zoo import ZooModel, build_model, resolve_device
    from memsched.solvers import registry
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.chain.baselines import store_all_schedule
    from memsched.solvers.errors import InputError
    from memsched.solvers.units import parse_bandwidth, parse_budget

    if isinstance(model, ZooModel):
        built = model
    elif isinstance(model, (tuple, list)):
        blocks, example, loss_fn, tgt = model
        built = ZooModel(as_blocks(blocks), example, loss_fn, tgt, "custom", {})
    else:
        kwargs = dict(sizes or {})  # `memsched run`'s model_sizes(args) carries device and seed too
        if "device" not in kwargs or device is not None:
            kwargs["device"] = resolve_device(None if device is None else str(device))
        built = build_model(str(model), **kwargs)
    if chain is None:
        chain = profile_chain(built.blocks, built.loss_fn, built.example_input, built.target,
                              repeats=profile_repeats, name=built.label, meta={"model": built.name, **built.config},
                              timing=timing)
    elif chain.length != len(built.blocks):
        raise InputError(f"the chain has {chain.length} stages but the model has {len(built.blocks)} blocks",
                         field="--chain")
    bw = parse_bandwidth(bandwidth) if isinstance(bandwidth, str) else float(bandwidth)
    inst = OffloadInstance(chain, bw, float(latency))
    reference = int(reference_peak(chain))
    limit = int(parse_budget(budget, reference))
    if limit <= 0:
        raise InputError(f"budget must be positive, got {budget!r}", field="--budget")
    opts: dict[str, Any] = {**(options or {}), "slots": slots}
    if time_limit is not None:
        opts["time_limit"] = time_limit
    result = registry.solve("offload", inst, solver, limit, **opts)
    x, target = built.example_input, built.target
    out: dict[str, Any] = {"model": built.name, "chain": chain.name, "problem": "offload", "budget": limit,
                           "solver": solver, "status": result.status, "device": str(x.device),
                           "bandwidth": bw, "latency": float(latency),
                           "units": {"time": "ms", "memory": "bytes", "bandwidth": "bytes/s"},
                           "store_all_peak": reference, "solve_time_s": result.solve_time_s}
    if x.device.type == "cpu":
        out["measurement"] = CPU_MEASUREMENT
    if not result.found:
        msg = result.message or f"no schedule of {solver} fits {limit} bytes"
        min_budget = None if result.min_budget is None else int(result.min_budget)
        out.update(message=msg, min_budget=min_budget, predicted=None, measured=None, grad_check=None)
        return out
    schedule = result.schedule
    executor = OffloadExecutor(built.blocks, built.loss_fn)
    base = executor.step(store_all_schedule(chain.length).ops, x, target, inst=inst, seed=seed,
                         time_repeats=time_repeats)
    step = executor.step(schedule, x, target, inst=inst, seed=seed, time_repeats=time_repeats)
    _, ref, ref_input = reference_step(built.blocks, built.loss_fn, x, target, seed=seed)
    rtol, atol = tolerances(x.device)  # tight on CPU, looser on CUDA (kernels' summation order)
    grad_ok, grad_msg = compare_gradients(step.grads, ref, rtol=rtol, atol=atol)
    if grad_ok and ref_input is not None and step.input_grad is not None:
        grad_ok = bool(torch.allclose(step.input_grad, ref_input, rtol=rtol, atol=atol))
        grad_msg = "" if grad_ok else "input gradient differs"
    out.update(measured_vs_predicted(result.objective, result.peak_memory, step, base))
    out["predicted"].update(host_peak=step.predicted_host_peak, sequential_peak=step.sequential_peak)
    out.update(
        grad_check=grad_ok, memory_method=step.memory_method, transfers=len(schedule.transfers()),
        loss=step.loss if math.isfinite(step.loss) else None, schedule=schedule.to_json(),
    )
    if grad_msg:
        out["grad_message"] = grad_msg
    return out


def describe_offload(out: dict[str, Any]) -> str:
    """The human-readable lines of `memsched run --bandwidth` for a `run_offload` result."""
    from memsched.solvers.units import format_bytes

    head = (f"{out['chain']} on {out['device']}, solver {out['solver']} ({out['status']}), "
            f"budget {format_bytes(out['budget'])}, link {out['bandwidth'] / 1e9:g} GB/s")
    if out.get("predicted") is None:
        return f"{head}\n  infeasible: {out.get('message', '')}"
    p, m, vs = out["predicted"], out["measured"], out["vs_store_all"]
    lines = [
        head,
        f"  predicted: makespan {p['makespan']:.2f} ms, peak {format_bytes(p['peak_memory'])} (two streams), "
        f"{format_bytes(p['sequential_peak'])} (one op at a time), host {format_bytes(p['host_peak'])}",
        f"  measured:  time     {m['time']:.2f} ms, peak {format_bytes(m['peak_memory'])} ({out['memory_method']}), "
        f"{out['transfers']} transfers",
        f"  vs store-all: predicted time x{vs['predicted']['time']:.3f}, memory x{vs['predicted']['memory']:.3f};"
        f" measured time x{vs['measured']['time']:.3f}, memory x{vs['measured']['memory']:.3f}",
        f"  grad check: {'ok' if out['grad_check'] else 'FAILED ' + out.get('grad_message', '')}",
    ]
    if "measurement" in out:
        lines.append(f"  note: {out['measurement']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m memsched.models.offload.executor MODEL --budget B --bandwidth BW [--solver S]``: one
    `run_offload` (a stand-in for ``memsched run --bandwidth`` until it is wired; also the
    quick device check: ``--device cuda``)."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m memsched.models.offload.executor", description=main.__doc__)
    p.add_argument("model")
    p.add_argument("--budget", default="100%")
    p.add_argument("--bandwidth", default="12GB/s")
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--solver", default="offload-prefix")
    p.add_argument("--device", default=None)
    p.add_argument("--time-limit", type=float, default=None)
    p.add_argument("--time-repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    for size in ("batch", "image-size", "seq-len", "width", "depth", "vocab"):
        p.add_argument(f"--{size}", type=int, default=None)
    args = p.parse_args(argv)
    sizes = {k: getattr(args, k) for k in ("batch", "image_size", "seq_len", "width", "depth", "vocab")
             if getattr(args, k) is not None}
    out = run_offload(args.model, args.budget, bandwidth=args.bandwidth, latency=args.latency, solver=args.solver,
                      sizes=sizes, device=args.device, time_limit=args.time_limit, time_repeats=args.time_repeats)
    print(json.dumps(out) if args.json else describe_offload(out))
    return 0 if out.get("predicted") is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
