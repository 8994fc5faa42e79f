"""Save and put back the buffers of modules (BatchNorm's running statistics and batch count).

A forward in training mode updates a BatchNorm's ``running_mean``, ``running_var`` and
``num_batches_tracked``. Code that runs a caller's modules only to measure or plan them (the
graph plan's static forward, `models.run.run`'s profiling and timed steps) saves the buffers with
`snapshot_buffers` first and puts them back with `restore_buffers` afterwards, also when it
raises: the caller's modules come back bit for bit as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

__all__ = ["BufferSnapshot", "step_modules", "buffer_entries", "snapshot_buffers", "restore_buffers",
           "snapshot_tensors", "from_buffers"]

#: (module, buffer name, the buffer tensor, a copy of its values) per buffer; (None, "", ...) for a
#: loose tensor (`snapshot_tensors`)
BufferSnapshot = list[tuple[nn.Module | None, str, torch.Tensor, torch.Tensor]]


def step_modules(blocks: Sequence[nn.Module], loss_fn: object) -> list[nn.Module]:
    """The modules whose buffers one training step may update: the network's `blocks` and the loss
    when it is a module (a head with BatchNorm); a plain loss function has none."""
    return [*blocks, *([loss_fn] if isinstance(loss_fn, nn.Module) else [])]


def buffer_entries(modules: Sequence[nn.Module]) -> list[tuple[nn.Module, str, torch.Tensor]]:
    """(module, buffer name, buffer tensor) for every buffer of `modules` and their submodules
    (BatchNorm's ``running_mean``, ``num_batches_tracked``...), each tensor once, in module order."""
    out: list[tuple[nn.Module, str, torch.Tensor]] = []
    seen: set[int] = set()
    for root in modules:
        for mod in root.modules():
            for name, buf in mod._buffers.items():
                if buf is not None and id(buf) not in seen:
                    seen.add(id(buf))
                    out.append((mod, name, buf))
    return out


def snapshot_buffers(modules: Sequence[nn.Module]) -> BufferSnapshot:
    """(module, buffer name, buffer tensor, copy of its values) for every buffer of `modules` and
    their submodules (`buffer_entries`)."""
    return [(mod, name, buf, buf.detach().clone()) for mod, name, buf in buffer_entries(modules)]


def snapshot_tensors(tensors: Sequence[torch.Tensor]) -> BufferSnapshot:
    """The same as `snapshot_buffers` for loose buffer tensors (those an op is handed as arguments,
    `models.graph.plan.Step.buffers`): no module is named, so `restore_buffers` only copies their
    values back."""
    return [(None, "", t, t.detach().clone()) for t in tensors]


def restore_buffers(saved: BufferSnapshot) -> None:
    """Put back the buffers `snapshot_buffers` saw: the same tensor objects (a forward that
    rebound a buffer attribute is undone) holding the saved values, bit for bit (in place, through
    ``.data``: the buffers' version counters do not move. A forward with autograd saves BatchNorm's
    running statistics for its backward (unused in training mode, but version-checked) and its kernel
    updates them without moving the counter: a plain ``copy_`` after a recomputation that keeps its
    tape would make that backward raise)."""
    with torch.no_grad():
        for mod, name, buf, values in saved:
            if mod is not None:
                mod._buffers[name] = buf
            buf.data.copy_(values)


@contextlib.contextmanager
def from_buffers(saved: BufferSnapshot) -> Iterator[None]:
    """Run the body on the buffers `saved` holds (a check that must start from the buffers a step
    started from: the plain-autograd reference of a measured step), then put back the buffers the
    body found (those the step left), bit for bit, also when it raises."""
    found: BufferSnapshot = []
    for mod, name, buf, _ in saved:
        now = mod._buffers.get(name) if mod is not None else buf  # a forward may have rebound the attribute
        if now is not None:
            found.append((mod, name, now, now.detach().clone()))
    restore_buffers(saved)
    try:
        yield
    finally:
        restore_buffers(found)
