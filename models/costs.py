"""Cost models: where the times of a profile come from when the network is not run for real.

A profile (chain or graph) states its cost model in its meta (``meta["cost"]``):

- ``measured``: times measured by running the network (ms; the profilers' own clocks);
- ``flops``: floating-point operations counted per aten operation, in MFLOP (10^6 FLOP), with
  `torch.utils.flop_counter`'s formulas (matrix products, convolutions, attention); every other
  operation counts one FLOP per output element (element-wise ops, norms, pools, copies);
- ``roofline:<device>``: milliseconds of a roofline model of one device of `DEVICES`: each aten
  operation takes ``max(FLOP / peak, bytes / bandwidth)``, where bytes are those it reads and
  writes (its tensor inputs and outputs, each once) and the peak is the device's for the dtype
  (float32 on CUDA cores, float16 / bfloat16 on tensor cores, dense); a profile's time is the
  sum over its operations. Views (``view``, ``transpose``, ``detach`` ...) cost nothing.

Both ``flops`` and ``roofline`` need only the shapes, so they run on fake tensors
(``torch._subclasses.FakeTensorMode``): nothing is computed or allocated, and a paper-size
network (VGG-16 at batch 256) is costed in seconds. They ignore kernel launch latency, caches
and the efficiency of real kernels: they are models, not measurements.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from memsched.solvers.errors import InputError, flag
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

__all__ = ["DeviceSpec", "DEVICES", "CostModel", "OpCounter", "parse_cost", "COST_CHOICES", "shape_exact_model",
           "fake_module_conversions", "is_fake"]


@contextlib.contextmanager
def shape_exact_model() -> Iterator[None]:
    """A context in which tensors are fake (``torch._subclasses.fake_tensor.FakeTensorMode``): zoo
    models built and profiled inside it allocate nothing, and their sizes are those of a CPU run.

    Inside it a module of fake tensors converts as a real one does (`fake_module_conversions`):
    a factory may call ``model.to(device)``, ``.float()``, ``.cpu()``. Torch's own log of an op
    that fails on fake tensors is silenced (`_fake_failures_unlogged`): the error is still raised,
    and a block or loss that fails is bad input with one line (`models.network`), not a traceback."""
    with FakeTensorMode(allow_non_fake_inputs=False), fake_module_conversions(), _fake_failures_unlogged():
        yield


@contextlib.contextmanager
def _fake_failures_unlogged() -> Iterator[None]:
    """``torch._subclasses.fake_tensor``'s logger above CRITICAL while open (put back as it was on
    exit): it logs the traceback of an op that fails on fake tensors before raising it, which
    would print 19 lines of torch internals before memsched's one-line error."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


@dataclass
class _ApplyPatch:
    """The process-wide patch of ``nn.Module._apply`` (`fake_module_conversions`): installed by the
    first context to enter, removed by the last to leave. Invariant: ``depth`` is the number of
    contexts open in any thread, and ``original`` is set (to what was there at install) iff depth > 0."""

    depth: int = 0
    original: Any = None


_APPLY_LOCK = threading.Lock()
_APPLY_PATCH = _ApplyPatch()


def _patched_apply(self: torch.nn.Module, fn: Any, recurse: bool = True) -> torch.nn.Module:
    """``nn.Module._apply`` while `fake_module_conversions` is open: the set-data path for a module
    holding fake parameters, the saved original otherwise."""
    if not any(isinstance(p, FakeTensor) for p in self._parameters.values()):
        return _APPLY_PATCH.original(self, fn, recurse)  # type: ignore[no-any-return]
    return _fake_apply(self, fn, recurse)


def _enter_apply_patch() -> None:
    """Counts one more open context; the first one saves ``nn.Module._apply`` and installs the patch."""
    with _APPLY_LOCK:
        if _APPLY_PATCH.depth == 0:
            _APPLY_PATCH.original = torch.nn.Module.__dict__["_apply"]
            torch.nn.Module._apply = _patched_apply  # type: ignore[method-assign]
        _APPLY_PATCH.depth += 1


def _exit_apply_patch() -> None:
    """Counts one context less; the last one restores the saved ``nn.Module._apply``."""
    with _APPLY_LOCK:
        _APPLY_PATCH.depth -= 1
        if _APPLY_PATCH.depth == 0:
            torch.nn.Module._apply = _APPLY_PATCH.original  # type: ignore[method-assign]
            _APPLY_PATCH.original = None


@contextlib.contextmanager
def fake_module_conversions() -> Iterator[None]:
    """A context in which ``nn.Module._apply`` (behind ``Module.to``, ``.cpu``, ``.float``, ``.half``
    ...) converts a module holding fake parameters in place (``param.data = ...``), as torch does
    for real tensors, instead of swapping them, which torch refuses for fake tensors (they are
    weakly referenced by their mode). Modules of real tensors convert as before. Global state,
    thread-safe: the patch is installed by the first context to enter (in any thread, nested or
    not) and ``nn.Module._apply`` restored when the last one leaves, also on error."""
    _enter_apply_patch()
    try:
        yield
    finally:
        _exit_apply_patch()


def _fake_apply(module: torch.nn.Module, fn: Any, recurse: bool) -> torch.nn.Module:
    """``nn.Module._apply`` on the set-data path (`fake_module_conversions`): children first, then
    each parameter (and its gradient) converted in place, so it keeps its identity (weights tied
    across modules stay tied), and each buffer replaced by its conversion (as torch does)."""
    if recurse:
        for child in module.children():
            child._apply(fn)
    with torch.no_grad():
        for param in module._parameters.values():
            if param is None:
                continue
            param.data = fn(param)
            if param.grad is not None:
                param.grad.data = fn(param.grad)
    for key, buf in module._buffers.items():
        if buf is not None:
            module._buffers[key] = fn(buf)
    return module


def is_fake(t: torch.Tensor) -> bool:
    """True for a fake tensor (built inside `shape_exact_model`)."""
    return isinstance(t, FakeTensor)


@dataclass(frozen=True)
class DeviceSpec:
    """A device of the roofline model: peak FLOP/s per dtype family and memory bandwidth (bytes/s).

    Vendor data sheets, dense (no sparsity), SXM boards: V100 (32 GB), A100 (80 GB), H100 (80 GB).
    """

    name: str
    fp32_flops: float  # FLOP/s, FP32 on CUDA cores
    fp16_flops: float  # FLOP/s, FP16 / BF16 on tensor cores, dense
    bandwidth: float  # bytes/s, HBM
    memory: int  # bytes of device memory

    def peak(self, dtype: torch.dtype) -> float:
        """Peak FLOP/s for an operation whose floating-point dtype is `dtype`."""
        return self.fp16_flops if dtype in (torch.float16, torch.bfloat16) else self.fp32_flops

    def as_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict: FLOP/s (fp32, fp16), bandwidth in bytes/s, memory in bytes."""
        return {"device": self.name, "fp32_flops_per_s": self.fp32_flops, "fp16_flops_per_s": self.fp16_flops,
                "bandwidth_bytes_per_s": self.bandwidth, "memory_bytes": self.memory}


DEVICES: dict[str, DeviceSpec] = {
    "v100": DeviceSpec("NVIDIA V100 SXM2 32GB", 15.7e12, 125e12, 900e9, 32 * 2**30),
    "a100": DeviceSpec("NVIDIA A100 SXM4 80GB", 19.5e12, 312e12, 2039e9, 80 * 2**30),
    "h100": DeviceSpec("NVIDIA H100 SXM5 80GB", 67e12, 989e12, 3352e9, 80 * 2**30),
}

COST_CHOICES = ("measured", "flops", *(f"roofline:{d}" for d in DEVICES))


@dataclass(frozen=True)
class CostModel:
    """One of ``measured``, ``flops``, ``roofline:<device>`` (see the module docstring)."""

    kind: str
    device: DeviceSpec | None = None

    @property
    def text(self) -> str:
        """The cost model as the command line spells it (``measured``, ``roofline:<device>``, ...)."""
        if self.kind == "roofline":
            return "roofline:" + next(k for k, v in DEVICES.items() if v == self.device)
        return self.kind

    @property
    def measured(self) -> bool:
        """True when u_f, u_b are wall-clock seconds measured on the device, not estimates."""
        return self.kind == "measured"

    @property
    def unit(self) -> str:
        """Unit of the times of a profile: "MFLOP" for flops, else "ms"."""
        return "MFLOP" if self.kind == "flops" else "ms"

    def value(self, counter: OpCounter) -> float:
        """The cost of what `counter` saw, in `unit`."""
        if self.kind == "flops":
            return counter.flops / 1e6
        if self.kind == "roofline":
            return counter.roofline_s * 1e3
        raise ValueError("a measured cost model has no counted value")

    def counter(self) -> OpCounter:
        """A fresh `OpCounter` that adds up FLOPs, bytes and roofline seconds for this device."""
        return OpCounter(self.device)

    def meta(self) -> dict[str, Any]:
        """What a profile's meta says about its times."""
        info: dict[str, Any] = {"cost": self.text}
        if self.kind == "flops":
            info["cost_model"] = ("FLOP per aten op (torch.utils.flop_counter formulas; one per output element "
                                  "otherwise), in MFLOP")
        elif self.kind == "roofline":
            assert self.device is not None
            info["cost_model"] = {"formula": "sum over aten ops of max(FLOP / peak, bytes read and written / "
                                             "bandwidth), in ms", **self.device.as_dict()}
        return info


def parse_cost(text: str) -> CostModel:
    """``measured`` | ``flops`` | ``roofline:v100|a100|h100``; anything else is an `InputError`."""
    t = str(text).strip().lower()
    if t in ("measured", "flops"):
        return CostModel(t)
    if t.startswith("roofline:") and t.split(":", 1)[1] in DEVICES:
        return CostModel("roofline", DEVICES[t.split(":", 1)[1]])
    raise InputError(f"unknown cost model {text!r} (one of {', '.join(COST_CHOICES)})", field=flag("cost"))


def _tensors(obj: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class OpCounter(TorchDispatchMode):
    """Counts FLOP, bytes moved and roofline seconds of the aten operations run while active.

    ``flops`` (FLOP), ``bytes`` (bytes read + written) and ``roofline_s`` (seconds on `device`,
    0 without one) accumulate; `reset` sets them to zero. Works on real and fake tensors.
    """

    def __init__(self, device: DeviceSpec | None = None) -> None:
        super().__init__()
        self.device = device
        self.reset()

    def reset(self) -> None:
        """Zero the counted FLOPs, bytes, roofline seconds and operations."""
        self.flops = 0.0
        self.bytes = 0.0
        self.roofline_s = 0.0
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if getattr(func, "is_view", False):
            return out
        outs = _tensors(out)
        if not outs:
            return out
        ins = _tensors((args, kwargs))
        formula = flop_registry.get(func._overloadpacket)
        flops = float(formula(*args, **kwargs, out_val=out)) if formula is not None else float(
            sum(t.numel() for t in outs))
        moved = float(sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs))
        self.flops += flops
        self.bytes += moved
        self.ops += 1
        if self.device is not None:
            dtype = next((t.dtype for t in ins + outs if t.is_floating_point()), torch.float32)
            self.roofline_s += max(flops / self.device.peak(dtype), moved / self.device.bandwidth)
        return out
