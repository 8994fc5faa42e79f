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

In-place changes: autograd checks the version of no tensor that a pack hook handled, so the
handles do (`models.offload.values`, "Versions"): a saved tensor modified in place after its save
-- by the rest of the block's forward (``y.relu_(); y.mul_(2)``), by a loss that modifies a_L, by
whoever keeps it -- raises plain autograd's RuntimeError ("... has been modified by an inplace
operation ...") when its node is unpacked in the backward, whether the change was made before the
value's ``Off`` (the host copy took it) or after it (the host copy is stale); where plain autograd
raises nothing, neither does the executor. Tensors kept as they are (parameters, buffers) are
`Versioned`, as the chain executor's. Not seen: a change through a reference to the saved tensor
that user code kept past the forward and dropped before the value's next ``Off`` and its unpack.

``Off(v)`` copies each storage of v to host memory (unless a host copy of this value exists
already) and drops the device copy; ``Pre(v)`` allocates a device copy and copies the host
bytes back. The host copy of a standalone a_j stays until the step ends (a compute op that
frees a_j drops its device copy only); a tape's is dropped at the end of its backward, which
uses the tape up: as in the simulator (its rule 4, where a later ``Pre`` of the tape is
invalid and ``host_peak`` counts host copies this way). The backward of a tape is run on its
``GradientEdge``, so no Python reference to its output keeps the device memory alive; the
input leaf of a tape holds no storage between its forward and its backward. When a backward
starts, each saved tensor is handed to its handle and the holder lets go, so autograd frees it
as soon as its node has run, as it does without hooks (measured after every op, the pool then
holds exactly the values the simulator has on the device: tests/test_models_offload.py).

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

RNG states: a run keeps the CPU RNG state of each random stage it recomputes (5,056 B, from its
first forward to the end of the step) and copies the generator's state during
each recomputation of it (5,056 B more, put back after it; `models.measure.RngStates`: stages that
draw no random number copy nothing). The allocator probe sees them, the tracker does not, so the
allocator's predictions (``predicted_peak``, ``sequential_peak``) add them over those ops of the
replay (`models.measure.peak_with_rng_states`), and the tracker's (``tracker_*``) do not; on CUDA
they are host tensors and add nothing.

Pins: the ``not_before`` times of a schedule (pofo, cpsat, offload-exact set them; times in the
instance's unit) are kept in both predictions of the two-stream simulator (`with_pins`), which
then replays what the solver reported. The executor itself does not wait for them: it issues
each op as soon as the one before it was issued. On the CPU every op has ended before the next
starts, so a pin could only add idle time, and the run is compared with `sequential_replay`,
whose memory does not depend on pins. On CUDA a pinned ``Pre`` may start copying before its pin
(as soon as the side stream reaches it), and an op pinned to the end of an ``Off`` may start
before that copy has ended; the allocator's count follows the issue order (a prefetch counts
from its issue, an offloaded buffer leaves it at its ``Off``), so ``max_memory_allocated`` is
the same as with pins honoured, while the physical use of the caching allocator and the
overlap (time) may differ from the pinned replay.

Known limits: a block that returns a view of its input, or saves a view of its input under a
different dtype, keeps that storage shared (correct gradients, but the bytes do not leave the
device with the value); tensors a custom ``autograd.Function`` keeps as ``ctx`` attributes
(not through ``save_for_backward``) and tensors a module caches across calls stay where they
are; a standalone a_j freed by a compute operation keeps its host copy (a later ``Pre`` of
it, which the simulator allows, brings back the last offloaded content). The CUDA path
follows the standard side-stream pattern; its runs on a GPU (timings and gradients) are in
``results/gpu_check.json`` (`experiments/gpu_check.py`), and the CUDA tests run where CUDA is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
from memsched.models.chain.executor import (
    ChainExecutor,
    ChainStepResult,
    LossFn,
    block_output,
    checked_step,
    forward_block,
    kept_buffers,
    loss_input,
)
from memsched.models.chain.overheads import tracker_chain
from memsched.models.measure import Comparison, RngStates, RunState, peak_with_rng_states
from memsched.models.memory import storage_key
from memsched.models.offload.values import (
    Holder,
    InputSlot,
    Key,
    Link,
    Saved,
    Store,
    Value,
    Versioned,
    saved_input,
    unpack_saved,
)
from memsched.solvers.chain import Chain
from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op
from memsched.solvers.chain.simulator import op_cost
from memsched.solvers.errors import InputError
from memsched.solvers.offload import OffloadInstance, OffloadSchedule, OffloadSimulation, Transfer
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.schedule import OFF, PRE
from torch import nn

__all__ = ["OffloadExecutor", "OffloadStepResult", "execute_offload", "sequential_replay", "CPU_MEASUREMENT",
           "retime_offload", "with_pins"]

CPU_MEASUREMENT = ("cpu: transfers are synchronous memcpy to NumPy arrays outside the tracked pool; measured "
                   "memory is comparable with the simulator's, measured time is not (no link, no overlap)")

# --------------------------------------------------------------------------- predictions
def with_pins(schedule: OffloadSchedule | Sequence[Op | Transfer], length: int) -> OffloadSchedule:
    """`schedule` as an `OffloadSchedule` of `length` stages that keeps its ``not_before`` pins
    (times, the instance's unit; a plain list of ops has none): the two-stream replay of a
    pinned schedule (pofo, cpsat, offload-exact) is the one its solver reported."""
    pins = schedule.not_before if isinstance(schedule, OffloadSchedule) else None
    return OffloadSchedule(list(schedule), length, None if pins is None else list(pins))


def sequential_replay(inst: OffloadInstance, schedule: OffloadSchedule | Sequence[Op | Transfer]
                      ) -> OffloadSimulation:
    """The two-stream simulator's replay of `schedule` with every operation starting after the
    one issued before it has ended (``not_before`` = the sum of the earlier operations'
    durations: each compute op's own per-mode duration, `solvers.chain.simulator.op_cost`, as
    the simulator times it -- u_fa for F_all, u_fn for F_ck/F_n, u_b for B and the loss --, so
    a schedule without transfers has the simulator's makespan; transfers at full size/bandwidth
    + latency, except an ``Off`` of a value whose host copy exists already, which takes no time
    as in the simulator, docs/offload.md rules 3-4, `_free_offloads`): the memory a synchronous, one-stream
    execution uses, which is what the CPU executor measures. Its peak (bytes) is at most the
    two-stream one in the cases we know (it removes overlap), and equals a CPU run's measured
    peak up to the profile's own error (e.g. ``fwd_overhead`` is the larger of the two forward
    modes'). The schedule's own ``not_before`` pins play no part: with every op after the previous
    one they could only insert idle time (the same memory, a longer makespan), and a synchronous
    run does not wait for them (module docstring)."""
    chain = inst.chain
    L = chain.length
    ops = list(schedule)
    free = _free_offloads(inst, ops)
    t, not_before = 0.0, []
    for pos, op in enumerate(ops):
        not_before.append(t)
        if isinstance(op, Transfer):
            if pos not in free:
                t += inst.transfer_time(int(chain.xbar[op.index] if op.value == "abar" else chain.x[op.index]))
        else:
            kind, i = op
            t += op_cost(chain, kind, L if kind == LOSS else i)[2]  # per mode: u_fa, u_fn or u_b, as simulate
    return simulate_offload(inst, OffloadSchedule(ops, L, not_before))


def _free_offloads(inst: OffloadInstance, ops: list[Op | Transfer]) -> set[int]:
    """Positions in `ops` of the ``Off(v)`` that take no time because the host holds a copy of v
    already (docs/offload.md rule 3; the copy lasts as rule 4 says: a tape's until its B, a
    standalone activation's until the end of the step), as the simulator decides it, read from its
    unpinned replay (an Off it times as zero-length). Which copies exist depends on the issue order
    only, so the decision holds under any timing. Past a violation nothing is listed: the replay
    stops there too."""
    first = simulate_offload(inst, OffloadSchedule(ops, inst.chain.length))
    return {pos for pos, timed in enumerate(first.ops)
            if isinstance(timed.op, Transfer) and timed.op.kind == OFF and timed.end == timed.start}


@dataclass
class OffloadStepResult(ChainStepResult):
    """`models.chain.executor.ChainStepResult` plus the offloading prediction's extras: `predicted_host_peak`
    (bytes on the host at most, two-stream replay), `sequential_peak` (bytes) and
    `sequential_makespan` (the instance's time unit) of `sequential_replay`, the prediction a
    synchronous CPU run is compared with (`tracker_sequential_peak`: the same under the tracker's
    overheads, `models.chain.overheads.tracker_chain`), and the number of `transfers`.

    On the CPU (synchronous: one op at a time) the ratios compare with the sequential replay:
    ``memory_ratio`` = tracker peak / `tracker_sequential_peak`, ``independent_ratio`` = probe
    peak / `sequential_peak`, ``time_ratio`` = time / `sequential_makespan`; on CUDA with the
    two-stream simulator's ``predicted_peak`` / ``predicted_makespan``. The allocator's peaks
    (``predicted_peak``, `sequential_peak`) include the RNG states the run kept (module
    docstring); the tracker's are set whenever they differ from them."""

    predicted_host_peak: int | None = None
    sequential_peak: int | None = None
    sequential_makespan: float | None = None
    tracker_sequential_peak: int | None = None
    transfers: int = 0

    @property
    def synchronous(self) -> bool:
        """True for a CPU run with a sequential prediction (its ratios use `sequential_replay`)."""
        return self.device.startswith("cpu") and self.sequential_peak is not None

    def comparisons(self) -> dict[str, Comparison]:
        """`StepResult.comparisons`; a synchronous (CPU) step compares with the sequential replay."""
        if not self.synchronous:
            return super().comparisons()
        return {"time": Comparison("one op at a time", self.sequential_makespan, self.time_ms),
                "memory": Comparison("tracker", self.tracker_sequential_peak or self.sequential_peak,
                                     self.peak_memory),
                "independent": Comparison("allocator", self.sequential_peak, self.independent_peak)}


# --------------------------------------------------------------------------- executor
class OffloadExecutor(ChainExecutor):
    """Runs `OffloadSchedule`s on `blocks` (block i: a_i -> a_{i+1}) followed by `loss_fn`.

    `step(schedule, x, target, inst=...)` returns an `OffloadStepResult` (a
    `models.chain.executor.StepResult`) whose predicted peak (bytes) and makespan (the chain's time
    unit, ms for profiled chains) are the two-stream simulator's
    (`solvers.offload.simulate`), and whose measured peak (bytes) and time (ms) are
    this executor's; see the module docstring for what they mean on
    CPU and on CUDA. Chain schedules without transfers run too.
    """

    def __init__(self, blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, *, input_grad: bool = True) -> None:
        """`input_grad`: compute delta_0 (as the chain model does); False skips it, as a plain
        training step does."""
        super().__init__(blocks, loss_fn, input_grad=input_grad, release=False)  # B holds its inputs (the model's rule)
        self._side: Any = None  # the CUDA side stream of the transfers, made at the first run on CUDA

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
        invalid schedule (one for another chain length included) raises `InputError` (a ValueError)
        before anything runs.
        """
        _check_length(schedule, self.length)  # before `with_pins`, which would give it this length
        ops = list(schedule)
        if inst is None and chain is not None:
            if bandwidth is None:
                raise InputError("a chain needs a bandwidth (bytes/s) to predict an offloading schedule",
                                 field="bandwidth")
            inst = OffloadInstance(chain, float(bandwidth))
        sim = None
        if inst is not None:
            if inst.length != self.length:
                raise InputError(f"chain has {inst.length} stages, the model {self.length} blocks", field="inst")
            pinned = with_pins(schedule, inst.length)
            sim = simulate_offload(inst, pinned)
            if not sim.valid:
                raise InputError(f"invalid offloading schedule: {sim.violation}", field="schedule")
        base = super().step(ops, inputs, target, chain=None, **options)  # type: ignore[arg-type]
        result = OffloadStepResult(**{f.name: getattr(base, f.name) for f in fields(ChainStepResult)},
                                   transfers=sum(isinstance(op, Transfer) for op in ops))
        if inst is not None and sim is not None:
            seq = sequential_replay(inst, ops)
            result.predicted_host_peak = sim.host_peak
            result.predicted_makespan, result.sequential_makespan = sim.makespan, seq.makespan
            # the tracker's predictions: its own overheads, and no RNG state (it does not see them)
            by_tracker = tracker_chain(inst.chain)
            tracker = (sim.peak_memory, seq.peak_memory)
            if by_tracker is not inst.chain:
                tracked = OffloadInstance(by_tracker, inst.bandwidth, inst.latency)
                tracker = (simulate_offload(tracked, pinned).peak_memory, sequential_replay(tracked, ops).peak_memory)
            # the allocator's: plus the RNG states the runs kept (CPU; none on a CUDA device)
            result.predicted_peak = _with_rng_states(sim, ops, self.last_rng)
            result.sequential_peak = _with_rng_states(seq, ops, self.last_rng)
            if by_tracker is not inst.chain or tracker != (result.predicted_peak, result.sequential_peak):
                result.tracker_predicted_peak, result.tracker_sequential_peak = tracker
        return result

    def check_schedule(self, ops: Sequence[Op | Transfer]) -> None:  # type: ignore[override]
        """`ops` replay on the offloading simulator, on a chain of this executor's length with unit
        sizes and any link (a schedule's validity does not depend on them), else `InputError`."""
        from memsched.models.chain.training import _unit_chain

        unit = OffloadInstance(_unit_chain(self.length), 1.0)
        replay = simulate_offload(unit, OffloadSchedule(list(ops), self.length))
        if not replay.valid:
            raise InputError(f"invalid offloading schedule: {replay.violation}", field="schedule")

    # ----------------------------------------------------------------- state
    def _store(self, s: RunState) -> Store:
        """This run's value store, created at its first operation (it takes over a_0)."""
        store = getattr(s, "offload_store", None)
        if store is None:
            device = s.acts[0].device
            if device.type == "cuda" and self._side is None:
                self._side = torch.cuda.Stream(device)
            static = {storage_key(t) for b in self.blocks for t in (*b.parameters(), *b.buffers())}
            static |= {storage_key(p.grad) for p in self.params.values() if p.grad is not None}
            store = Store(Link(device, self._side), static)
            a0 = s.acts.pop(0)
            holder = Holder()
            store.device[("a", 0)] = Value(("a", 0), holder, holder.ref(a0))
            s.offload_store = store  # type: ignore[attr-defined]
        return store

    # ----------------------------------------------------------------- operations
    def apply(self, op: Op | Transfer, s: RunState, target: Any) -> None:  # type: ignore[override]
        """Execute one op of the schedule: a compute op (F/B) or a transfer (offload to / prefetch from the host)."""
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
            # a_i may be needed again: refuse in-place changes to it; a recomputation runs on the buffers the
            # first forward saw and puts back those it left (`kept_buffers`)
            with kept_buffers(self.blocks[i], i, s), s.rng.forward(i), torch.no_grad():
                y = block_output(self.blocks[i], i, forward_block(self.blocks[i], i, x))
            holder = Holder()
            store.device[("a", i + 1)] = Value(("a", i + 1), holder, holder.ref(y.detach()))
            if kind == F_N:
                store.free(("a", i))
        elif kind == LOSS:
            grads: list[torch.Tensor] = []
            with torch.enable_grad():
                y = loss_input(self.take_output(s), grads)
                loss = self.loss_fn(y, target)
                loss.backward()
            s.loss = float(loss.detach())
            if s.keep_loss:  # a training step returns it
                s.loss_tensor = loss.detach()
            s.grads[L] = grads[0] if grads else None
        elif kind == B:
            self._backward(i, store, s)
        else:
            raise ValueError(f"unknown operation {op}")

    def take_output(self, s: RunState) -> torch.Tensor:
        """a_L as the ``Loss`` op reads it (the standalone a_L, else the tape abar_L's output),
        with the standalone copy freed, as the ``Loss`` op frees it."""
        store = self._store(s)
        a = store.read(store.activation(self.length))
        store.free(("a", self.length))
        return a

    def _transfer(self, op: Transfer, store: Store) -> None:
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

    def _forward_all(self, i: int, store: Store, s: RunState) -> None:
        """F_all(i): run block i with autograd, capturing what it saves in the tape abar_{i+1}."""
        src = store.activation(i)
        a = store.read(src)
        x = a.detach()
        if (x.is_floating_point() or x.is_complex()) and (i > 0 or self.input_grad):
            x.requires_grad_(True)
        holder, slot = Holder(), InputSlot()
        input_key = storage_key(x)
        static = store.static
        device = x.device

        def pack(t: torch.Tensor) -> Any:
            try:
                key = storage_key(t)
            except (RuntimeError, NotImplementedError):  # no storage (sparse, nested...): keep it
                return Versioned.of(t)
            if key in static or t.device != device:
                return Versioned.of(t)
            if key == input_key:
                return saved_input(t, x, slot)  # another dtype: kept, a known limit (shares a_i's storage)
            return Saved(holder, holder.ref(t), source=t)  # versioned: t's counter now, t held to `settle`

        try:
            with kept_buffers(self.blocks[i], i, s), s.rng.forward(i), torch.enable_grad(), \
                    torch.autograd.graph.saved_tensors_hooks(pack, unpack_saved):
                y = block_output(self.blocks[i], i, forward_block(self.blocks[i], i, x))
        finally:
            holder.settle()  # the saved tensors' versions after the forward; no strong reference kept
        edge = torch.autograd.graph.get_gradient_edge(y) if y.requires_grad else None
        value = Value(("abar", i + 1), holder, holder.ref(y.detach()), leaf=x, edge=edge, slot=slot)
        del y, a
        x.data = torch.empty(0, dtype=x.dtype, device=device)  # the leaf holds no storage until B(i)
        store.device[("abar", i + 1)] = value

    def _backward(self, i: int, store: Store, s: RunState) -> None:
        """B(i): back-propagate delta_{i+1} through the tape abar_{i+1}; yields delta_i. When
        delta_{i+1} is None (no gradient reaches a_{i+1}: a later block ran under ``no_grad``,
        detached, or made integers) nothing is back-propagated and delta_i is None, as in plain
        autograd, where the earlier blocks get no gradient; the tape is freed all the same."""
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
            if tape.edge is not None and delta is not None:  # no gradient reaches a_{i+1}: none flows further
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
def _check_length(schedule: OffloadSchedule | Sequence[Op | Transfer], blocks: int) -> None:
    """A schedule object with a ``length`` (`OffloadSchedule`, a chain `Schedule`) is for a chain of
    `blocks` stages, else `InputError` naming ``schedule`` (worded as `memsched.simulate`'s); a plain
    list of ops has no length, and its stages are the simulator's to judge."""
    length = getattr(schedule, "length", None)
    if length is not None and int(length) != blocks:
        raise InputError(f"the schedule is for length {int(length)} but the model has {blocks} blocks",
                         field="schedule")


def _with_rng_states(sim: OffloadSimulation, ops: Sequence[Op | Transfer], rng: RngStates | None) -> int:
    """The peak (bytes) of the replay `sim` of `ops` plus the RNG states the run allocated (`rng`,
    `models.measure.RngStates.held`): each kept state from the start of its stage's first forward
    in the replay on, and a copy during each recomputation of it."""
    if rng is None:
        return sim.peak_memory
    return peak_with_rng_states(sim.timeline, rng.held(ops, [t.start for t in sim.ops], [t.end for t in sim.ops]))


def execute_offload(blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, schedule: OffloadSchedule,
                    inputs: torch.Tensor, target: Any, *, inst: OffloadInstance | None = None, seed: int = 0,
                    check: bool = True, rtol: float = 1e-4, atol: float = 1e-6, **options: Any
                    ) -> tuple[OffloadStepResult, bool | None]:
    """Run one step under `schedule`; when `check`, compare every gradient (parameters and
    input) with plain autograd at the same seed. Returns (result, grad_check or None)."""
    return checked_step(OffloadExecutor(blocks, loss_fn), schedule, inputs, target, seed=seed, check=check,
                        rtol=rtol, atol=atol, inst=inst, **options)


def retime_offload(chain: Chain, blocks: nn.Module | Sequence[nn.Module], loss_fn: LossFn, inputs: torch.Tensor,
                   target: Any, *, repeats: int = 5, warmup: int = 2, clock: str = "wall") -> Chain:
    """`chain` with its op times (u_f, u_b, the loss; ms) measured inside store-all steps of this
    executor (`models.chain.timing`): its saved-tensor hooks and value handles cost time at every
    F_all and B, which the chain executor's steps do not have."""
    from memsched.models.chain.timing import op_times, retime_chain
    from memsched.solvers.chain.baselines import store_all_schedule

    executor = OffloadExecutor(blocks, loss_fn)
    ops = list(store_all_schedule(executor.length).ops)
    times = op_times(lambda: executor._run(ops, inputs, target, None, False, False, clock), repeats=repeats,
                     warmup=warmup)
    for p in executor.params.values():
        p.grad = None
    return retime_chain(chain, times, "OffloadExecutor")
