"""Where the values of an offloading run live: device storages, host copies, tape handles and
the link that moves bytes between them (see `models.offload.executor` for the rules).

`Holder` owns the storages of one value (a_j or abar_j) as flat uint8 tensors (`Storage`),
`Ref` addresses a tensor inside them, `Saved` is the pack-hook handle of a saved tensor,
`Versioned` the one of a saved tensor kept as it is, `InputSlot` is where a tape finds its input
during its backward (`saved_input`; the chain executor's tapes use them too), `Value` is one value,
`Link` copies bytes (NumPy on CPU, a side stream with pinned buffers on CUDA), `Store` maps each
value key ("a" | "abar", j) to its device or host `Value`. Sizes in bytes.

Versions: autograd checks the version counter of no tensor that a pack hook handled, so the handles
check it themselves, as plain autograd does: a saved tensor modified in place between its save (at
version v) and the unpack of its node raises autograd's RuntimeError ("... modified by an inplace
operation ... is at version v'; expected version v instead"), never a silently wrong gradient. A
`Versioned` holds its tensor and reads its counter at the unpack. A `Saved` of a holder does not hold
its tensor t (the storage must leave the device), so the in-place changes n of its bytes after the
save are counted through both counters that can see them: t's own (t and its views and ``detach``es,
strongly held during the forward, `Holder.settle`, then weakly: read at the end of the forward, at
every ``Off`` of the value and at the unpack, while t lives) and that of the holder's device copy
(what the executor hands out after the forward: a_{j} to the loss, to the next block; counted per
`Storage` since its creation, across ``Off``/``Pre``). A change made before an ``Off`` copies into
the host bytes silently and one made after it leaves them stale; both are counted (v' = v + n) and
raise at the unpack, as plain autograd would. Handles of the tape's input (`saved_input`) are not
versioned: the executors refuse a block that modifies its input in place (`InPlaceInputError`).
"""

from __future__ import annotations

import numbers
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["measure_link", "Key", "Storage", "Ref", "Holder", "InputSlot", "Saved", "Value", "unpack_saved", "Link",
           "Store", "saved_input", "Versioned", "modified_error"]

Key = tuple[str, int]  # ("a", j) | ("abar", j)


@dataclass
class Storage:
    """One storage of a value: a flat uint8 tensor over its device bytes (None when not on the
    device), its host copy (NumPy array on CPU, pinned uint8 tensor on CUDA) and, after a CUDA
    prefetch, the event after which the device bytes are valid.

    Versions (module docstring): `version` is the counter of the current device copy `flat` when its
    bytes were last counted (its creation, its prefetch, an ``Off``), `bumps` the in-place changes
    counted on its earlier device copies; changes so far = `bumps` + (a view of flat)._version - `version`
    (views of `flat`, the cached ones of `Holder.hand_over` included, share its counter)."""

    nbytes: int
    flat: torch.Tensor | None
    host: Any = None
    ready: Any = None  # torch.cuda.Event | None
    version: int = 0
    bumps: int = 0

    def count_changes(self) -> None:
        """Add the in-place changes made through the device copy since `version` to `bumps` (before
        the copy is dropped or copied to the host)."""
        if self.flat is not None:
            now = self.flat._version
            self.bumps += now - self.version
            self.version = now


@dataclass(frozen=True)
class Ref:
    """A tensor as a strided view of storage `index` of its value (offset in elements)."""

    index: int
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


class Holder:
    """The storages of one value; the handles of a tape point here (never to the graph)."""

    def __init__(self) -> None:
        self.storages: list[Storage] = []
        self._index: dict[int, int] = {}
        self.handles: weakref.WeakSet[Saved] = weakref.WeakSet()
        self.pending: list[Saved] = []  # the handles that hold their saved tensor, to `settle`

    def ref(self, t: torch.Tensor) -> Ref:
        """Register tensor `t`'s storage in this holder; return a `Ref` (storage index, dtype, size, stride,
        offset)."""
        st = t.untyped_storage()
        key = int(st._cdata)
        k = self._index.get(key)
        if k is None:
            k = self._index[key] = len(self.storages)
            flat = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st)
            self.storages.append(Storage(int(st.nbytes()), flat, version=flat._version))
        return Ref(k, t.dtype, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))

    def tensor(self, r: Ref) -> torch.Tensor:
        """The tensor `r` points to; RuntimeError when its storage is on the host (missing prefetch)."""
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

    def settle(self) -> None:
        """At the end of the forward that filled the holder: each handle reads its saved tensor's
        version counter (changes made by the forward after the save, ``y.relu_(); y.mul_(2)``) and
        keeps only a weak reference to it (no reference cycle through its node, no storage kept)."""
        for h in self.pending:
            h.settle()
        self.pending.clear()

    def count_changes(self) -> None:
        """Before an ``Off``: every storage counts the changes made through its device copy and every handle
        reads its saved tensor's counter, while both can still be read (`Storage.count_changes`)."""
        for st in self.storages:
            st.count_changes()
        for h in list(self.handles):
            h.observe()


class InputSlot:
    """Where the tape of stage i finds its input a_i during B(i) (set just before, cleared after)."""

    __slots__ = ("tensor",)

    def __init__(self) -> None:
        self.tensor: torch.Tensor | None = None


class Saved:
    """Pack-hook handle: a saved tensor of the tape (`holder`, `ref`) or a view of the input
    (`slot`, geometry relative to the input's storage offset). `cache` holds the tensor once
    its backward has started (see `Holder.hand_over`).

    A holder's handle made with its `source` (the saved tensor t) is versioned (module docstring):
    `version` is t's counter at the save, `seen` its last one read (-1 both: not versioned); `held`
    holds t until `settle` (end of the forward), `source` then a weak reference to it."""

    __slots__ = ("holder", "ref", "slot", "dtype", "size", "stride", "rel_offset", "cache", "version", "seen",
                 "held", "source", "__weakref__")

    def __init__(self, holder: Holder | None, ref: Ref | None = None, slot: InputSlot | None = None,
                 dtype: torch.dtype | None = None, size: tuple[int, ...] = (), stride: tuple[int, ...] = (),
                 rel_offset: int = 0, source: torch.Tensor | None = None) -> None:
        self.holder, self.ref, self.slot = holder, ref, slot
        self.dtype, self.size, self.stride, self.rel_offset = dtype, size, stride, rel_offset
        self.cache: torch.Tensor | None = None
        self.version = self.seen = -1
        self.held: torch.Tensor | None = None
        self.source: weakref.ref[torch.Tensor] | None = None
        if holder is not None:
            holder.handles.add(self)
            if source is not None:
                try:
                    self.version = self.seen = source._version
                except RuntimeError:  # no version counter (an inference tensor): nothing to check
                    return
                self.held = source
                holder.pending.append(self)

    def settle(self) -> None:
        """End of the forward: read the saved tensor's counter and keep a weak reference to it."""
        t = self.held
        if t is not None:
            self.seen = t._version
            self.source, self.held = weakref.ref(t), None

    def observe(self) -> None:
        """Read the saved tensor's counter while it lives (its changes after the forward, by whoever keeps it)."""
        w = self.source
        t = self.held if w is None else w()
        if t is not None:
            self.seen = t._version

    def unpack(self) -> torch.Tensor:
        """The saved tensor for autograd's backward: cached, from the holder's storage, or from the input slot.
        A versioned one modified in place since the save raises autograd's RuntimeError with the version
        it would have: v + the changes counted through the saved tensor's counter (`observe`) and through
        the holder's device copies (`Storage`; the rebuilt tensor shares its device copy's counter)."""
        holder = self.holder
        if holder is not None:
            ref = self.ref
            assert ref is not None
            t = self.cache
            if t is None:
                t = holder.tensor(ref)
            if self.version >= 0:  # inlined, the hot path: one check per unpack
                w = self.source
                src = self.held if w is None else w()
                if src is not None:
                    self.seen = src._version
                st = holder.storages[ref.index]
                now = self.seen + st.bumps + t._version - st.version
                if now != self.version:
                    raise modified_error(t, now, self.version)
            return t
        if self.cache is not None:
            return self.cache
        assert self.slot is not None
        base = self.slot.tensor
        if base is None:
            raise RuntimeError("a tape's input was read outside its backward")
        return base.as_strided(self.size, self.stride, base.storage_offset() + self.rel_offset)


@dataclass
class Value:
    """a_j (`out` is the activation) or abar_j (also `leaf`, `edge`, `slot` of its graph)."""

    key: Key
    holder: Holder
    out: Ref
    leaf: torch.Tensor | None = None
    edge: Any = None  # torch.autograd.graph.GradientEdge | None
    slot: InputSlot | None = None

    def activation(self) -> torch.Tensor:
        """The activation a_i this value holds, read from its (device-resident) storage."""
        return self.holder.tensor(self.out)


def modified_error(t: torch.Tensor, now: int, expected: int) -> RuntimeError:
    """Plain autograd's error for a saved tensor `t` modified in place: at version `now`, saved at `expected`."""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{t.type()} {list(t.shape)}] is at version {now}; expected version {expected} instead")


class Versioned:
    """A saved tensor kept as it is (a pack hook's handle), with its version counter at the save:
    autograd checks no version of a tensor that a pack hook handled, so `unpack` does (a loss or a
    later block that modifies in place a value the backward needs is the RuntimeError plain autograd
    raises, not a silent wrong gradient). Used by `models.chain.executor` and `models.offload.executor`."""

    __slots__ = ("tensor", "version")

    def __init__(self, tensor: torch.Tensor, version: int) -> None:
        self.tensor, self.version = tensor, version

    @staticmethod
    def of(t: torch.Tensor) -> Any:
        """`t` with its version, or `t` itself when it has no version counter (an inference tensor)."""
        try:
            return Versioned(t, t._version)
        except RuntimeError:
            return t

    def unpack(self) -> torch.Tensor:
        """The tensor, unchanged since the save, else autograd's in-place RuntimeError."""
        now = self.tensor._version
        if now != self.version:
            raise modified_error(self.tensor, now, self.version)
        return self.tensor


def unpack_saved(h: Any) -> torch.Tensor:
    """autograd saved-tensor unpack hook: resolve a `Saved` or a `Versioned` to its tensor (versions
    checked), pass anything else through."""
    return h.unpack() if isinstance(h, (Saved, Versioned)) else h


def saved_input(t: torch.Tensor, x: torch.Tensor, slot: InputSlot) -> Any:
    """What a pack hook keeps of a saved tensor `t` that shares the storage of the tape's input leaf
    `x`: a `Saved` read from `slot` at the backward (t's geometry relative to x's storage offset, in
    elements), so the tape holds no byte of x's storage. A `t` of another dtype than x (a view
    reinterpreting the input's bytes) is kept as it is (`Versioned`): a known limit, it holds the
    input's storage (used by `models.offload.executor` and `models.chain.executor`)."""
    if t.dtype != x.dtype:
        return Versioned.of(t)
    return Saved(None, slot=slot, dtype=t.dtype, size=tuple(t.shape), stride=tuple(t.stride()),
                 rel_offset=int(t.storage_offset()) - int(x.storage_offset()))


# --------------------------------------------------------------------------- transfers
class Link:
    """Moves value bytes between the device and the host: synchronous NumPy copies on CPU,
    a side stream with pinned buffers and events on CUDA (see the module docstring)."""

    def __init__(self, device: torch.device, side: Any = None) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.side = side
        self.compute = torch.cuda.current_stream(device) if self.cuda else None

    def offload(self, holder: Holder) -> None:
        """Copy the holder's storages to host memory once (pinned, on the side stream after the compute stream on CUDA;
        NumPy on CPU) and drop the device copies."""
        holder.count_changes()  # the versions, before the device copy is copied and dropped
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

    def prefetch(self, holder: Holder) -> None:
        """Copy the holder's storages from host memory back to new device buffers (on the side stream on CUDA, ready
        after its event)."""
        if self.cuda:
            with torch.cuda.stream(self.side):
                for st in holder.storages:
                    flat = torch.empty(st.nbytes, dtype=torch.uint8, device=self.device)
                    flat.copy_(st.host, non_blocking=True)
                    flat.record_stream(self.compute)
                    st.flat, st.version = flat, flat._version
                done = torch.cuda.Event()
                done.record(self.side)
            for st in holder.storages:
                st.ready = done
            return
        for st in holder.storages:
            flat = torch.empty(st.nbytes, dtype=torch.uint8, device=self.device)  # inside the pool
            flat.copy_(torch.from_numpy(st.host))
            st.flat, st.version = flat, flat._version

    def wait(self, holder: Holder) -> None:
        """Make the compute stream wait for a prefetch of `holder` (CUDA; no-op on CPU)."""
        for st in holder.storages:
            if st.ready is not None:
                self.compute.wait_event(st.ready)
                st.ready = None


@dataclass
class Store:
    """Where every value is: `device` and `host` as in the simulator's on_device / on_host."""

    link: Link
    static: set[int]
    device: dict[Key, Value] = field(default_factory=dict)
    host: dict[Key, Value] = field(default_factory=dict)

    def activation(self, j: int) -> Value:
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

    def read(self, v: Value) -> torch.Tensor:
        """The activation of `v`, after waiting for any transfer of its holder to finish."""
        self.link.wait(v.holder)
        return v.activation()


def measure_link(device: torch.device, *, sizes: tuple[int, int] = (1 << 16, 1 << 22), repeats: int = 9,
                 clock: str = "wall") -> tuple[float, float]:
    """(bandwidth in bytes/s, latency in s per transfer) of this executor's `Link` on `device`:
    the median time of an ``offload`` then a ``prefetch`` of a fresh value of each of two `sizes`
    (bytes, 0 < small < large), halved (two transfers), fitted with ``latency + size / bandwidth``
    (`repeats` >= 1 timed runs per size). On CPU the link
    is the NumPy copy of the module docstring (memcpy and first-touch page faults), timed with
    `clock` ("wall" / "thread", `models.memory.cpu_clock`); on CUDA host <-> device copies on the
    side stream (wall time, synchronised). The offloading prediction a CPU run is compared with
    uses this link, not a nominal PCIe bandwidth.

    `sizes` that are not two increasing positive byte counts, or `repeats` < 1, are an `InputError`
    naming the argument; a fit whose slope is not positive (the large size timed no slower than the
    small one: sizes too close for the clock) is a `RuntimeError`, never a clamped bandwidth."""
    n0, n1 = _link_sizes(sizes)
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or repeats < 1:
        from memsched.solvers.errors import InputError

        raise InputError(f"must be an integer >= 1, got {repeats!r}", field="repeats")
    t0_, t1_ = (_median_transfer(device, n, int(repeats), clock) for n in (n0, n1))
    if not t1_ > t0_:
        raise RuntimeError(f"the link fit has no positive slope: {n1} bytes took {t1_:.3g} s and {n0} bytes "
                           f"{t0_:.3g} s per transfer, so no bandwidth is measured (give sizes further apart or "
                           "more repeats)")
    bandwidth = (n1 - n0) / (t1_ - t0_)
    latency = max(0.0, t0_ - n0 / bandwidth)
    return float(bandwidth), float(latency)


def _link_sizes(sizes: Any) -> tuple[int, int]:
    """`measure_link`'s `sizes` as (small, large) bytes, 0 < small < large; else an `InputError`
    naming ``sizes`` (two equal sizes fit no slope, large-first ones a negative one)."""
    from memsched.solvers.errors import InputError

    pair = tuple(sizes) if isinstance(sizes, (tuple, list)) else ()
    if len(pair) != 2 or any(isinstance(n, bool) or not isinstance(n, numbers.Integral) for n in pair):
        raise InputError(f"must be two byte counts (small, large), got {sizes!r}", field="sizes")
    n0, n1 = (int(n) for n in pair)
    if not 0 < n0 < n1:
        raise InputError(f"must be two byte counts with 0 < small < large, got {sizes!r}", field="sizes")
    return n0, n1


def _median_transfer(device: torch.device, nbytes: int, repeats: int, clock: str) -> float:
    """The median time (s) of one transfer of a fresh `nbytes` value over the `Link` on `device`:
    an offload then a prefetch, halved, over `repeats` timed runs after one warm-up (`measure_link`)."""
    import time

    from memsched.models.memory import cpu_clock

    cuda = device.type == "cuda"
    now = time.perf_counter if cuda else cpu_clock(clock)
    link = Link(device, torch.cuda.Stream(device) if cuda else None)
    times = []
    for k in range(repeats + 1):
        holder = Holder()
        holder.ref(torch.ones(nbytes, dtype=torch.uint8, device=device))
        if cuda:
            torch.cuda.synchronize(device)
        t0 = now()
        link.offload(holder)
        link.prefetch(holder)
        link.wait(holder)
        if cuda:
            torch.cuda.synchronize(device)
        if k:  # the first is a warm-up
            times.append((now() - t0) / 2)
    times.sort()
    return times[len(times) // 2]
