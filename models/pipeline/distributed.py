"""The multi-process machinery both pipeline runners share (`runner` for straight chains,
`dag_runner` for DAG partitions): one process per stage spawned and collected, each rank's process
group and timed ``torch.distributed.pipelining`` steps, the saved-activation meter, and the gradient
check against a one-process reference.

Units: times in seconds, sizes in bytes.
"""

from __future__ import annotations

import importlib
import os
import queue as queue_module
import socket
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from memsched.solvers.processes import callers_main_hidden


class SavedTensorMeter:
    """Live and peak bytes of tensors saved for backward (a storage counted once; a view of part
    of a larger storage, such as a micro-batch split from the batch, counted as its own bytes)."""

    def __init__(self, params: Any = ()) -> None:
        self.exclude = {p.untyped_storage().data_ptr() for p in params}  # weights are not activations
        self.live: dict[Any, list[int]] = {}
        self.current = 0
        self.peak = 0

    def _pack(self, t: torch.Tensor) -> Any:
        storage = t.untyped_storage()
        key: Any = storage.data_ptr()
        if key in self.exclude:
            return t
        nbytes = storage.nbytes()
        if t.numel() * t.element_size() < nbytes:  # a view of part of a storage
            key, nbytes = (key, t.storage_offset(), tuple(t.shape), tuple(t.stride())), t.numel() * t.element_size()
        entry = self.live.setdefault(key, [nbytes, 0])
        if entry[1] == 0:
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        holder = _Holder(t)
        weakref.finalize(holder, self._release, key)
        return holder

    def _release(self, key: Any) -> None:
        entry = self.live[key]
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[key]

    @staticmethod
    def _unpack(obj: Any) -> torch.Tensor:
        return obj.tensor if isinstance(obj, _Holder) else obj

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        """The context in which saved tensors are counted."""
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)


class _Holder:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for the process group's rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_rank(rank: int, cfg: dict[str, Any]) -> torch.device:
    """Join the process group of `cfg` (``world``, ``port``, ``device``, ``threads``) as `rank`:
    nccl and GPU `rank` when ``device`` is ``"cuda"``, gloo on CPU otherwise."""
    torch.set_num_threads(cfg["threads"])
    use_cuda = cfg["device"] == "cuda"
    device = torch.device("cuda", rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(cfg["port"])
    dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=cfg["world"])
    return device


def timed_steps(sched: Any, submod: torch.nn.Module, rank: int, world: int, x: torch.Tensor, y: torch.Tensor,
                steps: int, device: torch.device) -> tuple[list[float], SavedTensorMeter]:
    """Run ``steps + 1`` pipeline steps of `sched` on the batch (`x`, `y`) (rank 0 feeds `x`, the
    last rank the target `y`), each between two barriers; the last one counts the activations saved
    for backward (parameters and buffers excluded) and keeps its gradients. Returns the step times
    (s) after the first (warm-up) step and the meter. On CUDA the peak-memory statistics are reset before each step."""
    use_cuda = device.type == "cuda"

    def step() -> None:
        if rank == 0:
            sched.step(x, target=y if world == 1 else None)
        elif rank == world - 1:
            sched.step(target=y)
        else:
            sched.step()

    meter = SavedTensorMeter([*submod.parameters(), *submod.buffers()])  # module state, not activations
    times = []
    for it in range(steps + 1):
        submod.zero_grad(set_to_none=True)
        dist.barrier()
        if use_cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        if it == steps:  # the last step: count saved activations and keep gradients
            with meter.hooks():
                step()
        else:
            step()
        if use_cuda:
            torch.cuda.synchronize()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return times[1:], meter


Worker = Callable[[int, dict[str, Any], Any], None]


def importable(worker: Worker) -> Worker:
    """`worker` as the ranks can import it: unchanged, unless it was defined in a module run as
    ``python -m pkg.mod`` (it then lives on ``__main__``, which the ranks do not see: see
    `callers_main_hidden`), where it is the same function imported from ``pkg.mod``."""
    if worker.__module__ != "__main__":
        return worker
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is None:  # a script run by path: nothing to import it from
        raise ValueError(f"the pipeline worker {worker.__qualname__} must be defined in an importable module")
    return getattr(importlib.import_module(spec.name), worker.__qualname__)


def run_ranks(worker: Worker, cfg: dict[str, Any], timeout_s: float) -> dict[int, dict[str, Any]]:
    """Spawn ``worker(rank, cfg, queue)`` for every rank of ``cfg["world"]`` and collect the
    ``(rank, payload)`` each puts on the queue; a payload with ``"error"`` raises RuntimeError,
    no answer within `timeout_s` seconds TimeoutError. The processes are joined (or terminated)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    target = importable(worker)
    procs = [ctx.Process(target=target, args=(r, cfg, queue), daemon=True) for r in range(cfg["world"])]
    with callers_main_hidden():  # the caller's script is not run again in each rank
        for p in procs:
            p.start()
    results: dict[int, dict[str, Any]] = {}
    deadline = time.time() + timeout_s
    try:
        while len(results) < cfg["world"]:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"pipeline run did not finish within {timeout_s} s")
            try:
                rank, payload = queue.get(timeout=left)
            except queue_module.Empty:
                raise TimeoutError(f"pipeline run did not finish within {timeout_s} s") from None
            if "error" in payload:
                raise RuntimeError(f"rank {rank}: {payload['error']}")
            results[rank] = payload
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
    return results


def check_grads(results: dict[int, dict[str, Any]], ref: dict[str, torch.Tensor]) -> tuple[bool, float]:
    """The ranks' gradients (``payload["grads"]``: name -> numpy array) against the one-process `ref`:
    (same names and all close at rtol 1e-4, atol 1e-5; the largest absolute difference)."""
    grads = {k: torch.from_numpy(v) for r in results.values() for k, v in r["grads"].items()}
    err = max((float((grads[k] - ref[k]).abs().max()) for k in ref if k in grads), default=0.0)
    ok = set(grads) == set(ref) and all(torch.allclose(grads[k], ref[k], rtol=1e-4, atol=1e-5) for k in ref)
    return ok, err
