"""Live tensor bytes on any device, measured by watching every aten operation.

`LiveTensorTracker` is a ``TorchDispatchMode``: each operation dispatched while it is active
reports its outputs, and every *new* storage among them (one that is not one of the
operation's inputs: views, ``detach`` and in-place results share their input's storage and are
not new) is counted once, with its ``nbytes``, until Python frees it (a ``weakref.finalize`` on
the untyped storage, whose Python object PyTorch keeps alive as long as the storage lives).
``current`` is the live byte count and ``peak`` its maximum since the last `reset_peak`.

What it counts (bytes):
  - every tensor allocated by an operation run inside the context, on every thread that
    inherits the dispatch mode (autograd's backward on CPU runs in the calling thread):
    activations, autograd-saved tensors (the tape), gradients, temporaries;
  - parameter gradients created inside the context (`.grad` allocated by AccumulateGrad) and
    the temporaries of accumulating into an existing `.grad`.

What it does not count (its limits):
  - storages that existed before the context (parameters, buffers, tensors the caller holds);
    views of them are not new and are not counted either;
  - memory a kernel allocates internally without returning it as a tensor (oneDNN/MKL scratch
    buffers, the im2col workspace of some convolutions), the allocator's caching and
    fragmentation, and Python objects: it is a lower bound of what an allocator would report;
  - tensors created by factory functions that bypass the dispatcher (``torch.from_numpy``).

The time overhead is a Python call per operation (tens of microseconds): measure time in a
separate run without the tracker.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["LiveTensorTracker", "storage_key", "tensor_bytes", "unique_bytes", "cpu_clock", "CLOCKS"]

CLOCKS = ("wall", "thread")


def cpu_clock(clock: str) -> Callable[[], float]:
    """Seconds of a CPU clock: "wall" (``time.perf_counter``) or "thread" (``time.thread_time``,
    the CPU time of the calling thread: insensitive to other processes sharing the cores, but
    it only sees the work of this thread, so it is meaningful with ``torch.set_num_threads(1)``,
    where autograd's CPU backward also runs in the calling thread)."""
    if clock == "wall":
        return time.perf_counter
    if clock == "thread":
        return time.thread_time
    raise ValueError(f"unknown clock {clock!r} (one of {', '.join(CLOCKS)})")


def storage_key(t: torch.Tensor) -> int:
    """Identity of the storage behind `t` (stable while the storage lives)."""
    return int(t.untyped_storage()._cdata)


def tensor_bytes(obj: Any) -> int:
    """Bytes of the distinct storages behind the tensors in `obj` (a tensor or a nested container)."""
    return unique_bytes(obj)


def unique_bytes(obj: Any, exclude: set[int] | None = None) -> int:
    """Bytes of the distinct storages in `obj`, each counted once, skipping keys in `exclude`."""
    seen: dict[int, int] = {}
    for t in tree_flatten(obj)[0]:
        if isinstance(t, torch.Tensor):
            st = t.untyped_storage()
            key = int(st._cdata)
            if exclude is not None and key in exclude:
                continue
            seen[key] = int(st.nbytes())
    return sum(seen.values())


#: the peak of a window opened `after_start` before its first event (below any level)
_BELOW = -(1 << 62)


class LiveTensorTracker(TorchDispatchMode):
    """Count live bytes of storages allocated while active; see the module docstring.

    Usage::

        with LiveTensorTracker() as mem:
            ...
        mem.peak      # bytes, maximum of live bytes allocated inside the context
        mem.current   # bytes still alive (allocated inside, not yet freed)

    `mark()` returns the current bytes and resets the peak to it, so that ``peak - mark``
    is the transient rise of one operation.
    """

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._live: dict[int, int] = {}
        # key -> serial number of the storage's registration: a key (the StorageImpl's address) is
        # reused by a later storage once the first is freed, the serial tells the two apart
        self._born: dict[int, int] = {}
        self._births = 0
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- accounting
    def _free(self, key: int) -> None:
        with self._lock:
            size = self._live.pop(key, 0)
            self._born.pop(key, None)
            self.current -= size
            if self.current > self.peak:  # only in a window opened `after_start`, before its first event
                self.peak = self.current

    def _add(self, st: torch.UntypedStorage, key: int) -> None:
        size = int(st.nbytes())
        with self._lock:
            old = self._live.get(key)
            if old is None:
                self._live[key] = size
                self._births += 1
                self._born[key] = self._births
                self.current += size
                weakref.finalize(st, self._free, key)
            elif old != size:  # resized in place
                self._live[key] = size
                self.current += size - old
            if self.current > self.peak:
                self.peak = self.current

    def reset_peak(self, *, after_start: bool = False) -> None:
        """Start a new peak window at the current live bytes. `after_start`: the window's peak is
        the most live bytes after its first allocation or free, which lies below the level at its
        start when the region frees before it allocates (read it as ``max(peak, current)``)."""
        self.peak = _BELOW if after_start else self.current

    def mark(self, *, after_start: bool = False) -> int:
        """Reset the peak to the current live bytes (`reset_peak`) and return them."""
        self.reset_peak(after_start=after_start)
        return self.current

    def live_storages(self) -> dict[int, int]:
        """The storages alive now: key -> registration serial (compare with `same_storage` later)."""
        with self._lock:
            return dict(self._born)

    def same_storage(self, key: int, snapshot: dict[int, int]) -> bool:
        """True when the storage `key` names now is the one it named in `snapshot` (`live_storages`),
        not a later storage that reuses a freed one's key."""
        born = snapshot.get(key)
        return born is not None and self._born.get(key) == born

    def tracked(self, t: torch.Tensor) -> bool:
        """True when the storage of `t` was allocated inside the context and is alive."""
        return storage_key(t) in self._live

    # ---------------------------------------------------------------- dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = set()
        for a in tree_flatten((args, kwargs))[0]:
            if isinstance(a, torch.Tensor):
                try:
                    inputs.add(storage_key(a))
                except (RuntimeError, NotImplementedError):  # tensors without storage
                    pass
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                try:
                    st = t.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    continue
                key = int(st._cdata)
                if key in inputs and key not in self._live:
                    continue  # a view / in-place result of a storage from outside
                if st.nbytes() == 0 and key not in self._live:
                    continue
                self._add(st, key)
        return out
