"""A second, independent CPU memory measurement: the allocator's own reports, via torch.profiler.

`models.memory.LiveTensorTracker` watches aten operations at the dispatcher and counts new
storages until Python frees them. `AllocatorProbe` shares no code or mechanism with it: it
runs ``torch.profiler.profile(activities=[CPU], profile_memory=True)``, under which c10's CPU
allocator reports every allocation and every free (``reportMemoryUsage``) with its size and a
timestamp; after the region, the allocation events of the profiler's event tree are sorted
by time and summed. ``peak`` is the maximum of that running sum (bytes above the level at
entry): the most bytes the CPU allocator had handed out at once during the region beyond what
was allocated before it.

Differences with the tracker, both ways (bytes):
  - the probe sees allocations that are not tensor outputs (kernel scratch buffers, small
    scalar temporaries, oneDNN workspaces allocated through c10) and frees of storages that
    existed before the region (which lower the sum);
  - it sees only the CPU allocator (``device.type == "cpu"``): on CUDA use
    ``torch.cuda.max_memory_allocated``, which the executors report already.

Cost: the profiler adds about a microsecond per event and its first start in a process takes
seconds; measure time in separate runs. The event tree is read through
``prof.profiler.kineto_results.experimental_event_tree()`` (the API torch.profiler's memory
timeline is built on).
"""

from __future__ import annotations

import os
from typing import Any

from torch.profiler import ProfilerActivity, profile

# Kineto (torch 2.13) logs two "USDT:... profiler_start/stop" lines on stderr for every profiled
# region, i.e. for every probe; level 6 silences them unless the user chose a level. Kineto reads
# the variable when a profiler starts, so setting it here (before any probe) is enough.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

__all__ = ["AllocatorProbe", "METHOD", "allocator_events"]

METHOD = "torch.profiler CPU allocator events"


def allocator_events() -> profile:
    """A ``torch.profiler.profile`` that records the CPU allocator's events: memsched's one way
    of starting one, so that Kineto's start/stop lines stay silenced (above)."""
    return profile(activities=[ProfilerActivity.CPU], profile_memory=True)


class AllocatorProbe:
    """``with AllocatorProbe() as probe: ...`` then ``probe.peak`` (bytes above the level at
    entry) and ``probe.net`` (bytes allocated minus freed in the region).

    The probe does not see the free of a block allocated before it started (its size is
    unknown to the profiler). To measure an operation that frees earlier storages, start the
    probe before they are allocated, call `mark` just before the operation, and read
    `after_mark`."""

    #: the size of `mark`'s allocation (a prime number of bytes no tensor of a model allocates)
    MARK_BYTES = 999_983

    def __init__(self) -> None:
        self.peak = 0
        self.net = 0
        self.events = 0
        self._prof: Any = None

    def __enter__(self) -> AllocatorProbe:
        self._prof = allocator_events()
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._prof.__exit__(*exc)
        self._sizes = _sizes_of(self._prof)
        self.peak, self.net, self.events = _running_peak(self._sizes)
        self._prof = None

    def mark(self) -> None:
        """Record the present moment in the event stream (one allocation of `MARK_BYTES`, freed)."""
        import torch

        marker = torch.empty(self.MARK_BYTES, dtype=torch.uint8)
        del marker

    def after_mark(self) -> tuple[int, int]:
        """(the level at the last `mark`, the most bytes after it), bytes relative to entry: the
        most bytes at any moment after the operation that followed the mark began, which lies
        below the level at the mark when that operation frees before it allocates (the level
        itself when nothing happened)."""
        sizes = self._sizes
        at = max((k for k, s in enumerate(sizes) if s == self.MARK_BYTES), default=None)
        if at is None or at + 1 >= len(sizes) or sizes[at + 1] != -self.MARK_BYTES:
            raise RuntimeError("AllocatorProbe.after_mark: no mark (or its free) among the events")
        level = sum(sizes[:at])
        current, most = level, None
        for size in sizes[at + 2:]:
            current += size
            most = current if most is None else max(most, current)
        return level, level if most is None else most


def _sizes_of(prof: Any) -> list[int]:
    """The sizes of the CPU allocation events in time order (frees negative)."""
    from torch._C._profiler import _EventType

    sizes: list[tuple[int, int]] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            fields = node.extra_fields
            if fields.device.type == "cpu":
                sizes.append((int(node.start_time_ns), int(fields.alloc_size)))
        stack.extend(node.children)
    sizes.sort()
    return [size for _, size in sizes]


def _running_peak(sizes: list[int]) -> tuple[int, int, int]:
    """(peak of the running sum, final sum, number of events)."""
    current = peak = 0
    for size in sizes:
        current += size
        peak = max(peak, current)
    return peak, current, len(sizes)
