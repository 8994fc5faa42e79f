"""The multi-process machinery both pipeline runners share (`runner` for straight chains,
`dag_runner` for DAG partitions): one process per stage spawned and collected, each rank's process
group and timed ``torch.distributed.pipelining`` steps, the saved-activation meter, and the gradient
check against a one-process reference.

Stopping a run (`run_ranks`): the parent alone handles a stop. While the ranks run, SIGTERM and
SIGHUP act as Ctrl-C in it (`solvers.processes.terminate_as_interrupt`; a signal the caller ignores,
``nohup``'s SIGHUP, stays ignored), so that ``kill`` or ``timeout`` stops a run as Ctrl-C does:
the ranks are killed and `KeyboardInterrupt` is raised to the caller (the command line prints one
line and exits 130). A rank ignores SIGINT and SIGHUP (a Ctrl-C in a terminal reaches the whole
process group; the parent stops the ranks) and dies with its parent (`die_with_parent`), so that
even a ``kill -9`` of the parent leaves no rank running, orphaned. A rank starts with those
signals blocked (`signals_held_during_fork` around the start) until `_rank_main` has set them, so
that one arriving while it imports torch is not a traceback. A stop (`_stop`) first marks the run
as stopping (a flag shared with the ranks), then kills every rank, then joins them: a rank that
fails while the run is stopping (its peer killed first: gloo's "Connection reset by peer") exits
quietly instead of printing a traceback, whereas a rank's own error, raised before any stop, is
reported (`RankError` in the caller) and printed as before.

Units: times in seconds, sizes in bytes.
"""

from __future__ import annotations

import importlib
import os
import queue as queue_module
import signal
import socket
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from memsched.solvers.exact.interrupt import die_with_parent
from memsched.solvers.processes import (
    callers_main_hidden,
    signals_held_during_fork,
    stop_signals,
    terminate_as_interrupt,
)


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
    """Run ``steps + 2`` pipeline steps of `sched` on the batch (`x`, `y`) (rank 0 feeds `x`, the
    last rank the target `y`), each between two barriers: a warm-up step, `steps` timed steps, and a
    last, untimed step that counts the activations saved for backward (parameters and buffers
    excluded) and keeps its gradients. Returns the times (s) of the `steps` timed steps and the
    meter: no timed step runs under the meter's hooks (a Python pack and a finalizer per saved
    tensor, which slowed a step by 4% to 14%). On CUDA the peak-memory statistics are reset before
    each step (so ``torch.cuda.max_memory_allocated`` afterwards is the metered step's)."""
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
    for it in range(steps + 2):
        submod.zero_grad(set_to_none=True)
        dist.barrier()
        if use_cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        if it == steps + 1:  # the last step, not timed: count saved activations and keep gradients
            with meter.hooks():
                step()
        else:
            step()
        if use_cuda:
            torch.cuda.synchronize()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return times[1:steps + 1], meter


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


class RankError(RuntimeError):
    """A rank reported an error or exited without answering (`run_ranks`)."""


#: seconds between the parent's checks, while it waits for the ranks' answers, that every rank still runs
POLL_S = 0.5
#: seconds a finished run waits for a rank to exit before killing it
JOIN_S = 10.0


#: the exit code of a rank that failed while the run was being stopped (`_rank_main`)
STOPPED_EXIT = 1


def _rank_main(worker: Worker, rank: int, cfg: dict[str, Any], queue: Any, stopping: Any) -> None:
    """A rank's process body: die with the parent, ignore SIGINT and SIGHUP (the parent handles
    a stop and kills the ranks), take SIGTERM at its default, unblock the signals held since the
    start (a Ctrl-C that came meanwhile is dropped), then run ``worker(rank, cfg, queue)``.
    An exception of the worker is put on `queue` as ``(rank, {"error": "Type: message"})`` and
    raised again (multiprocessing prints its traceback), unless the parent has set `stopping`
    (a shared byte, `_stop`) by then: the run is being stopped and its ranks killed one after
    another, so the error is a consequence of the stop (a peer killed first), and the rank exits
    at once with `STOPPED_EXIT`, printing nothing. `stopping` is read before anything is put on
    the queue, so that a rank's own error, which the parent learns of from the queue alone, is
    always reported."""
    parent = mp.parent_process()
    die_with_parent(None if parent is None else parent.pid)
    for name, handler in (("SIGINT", signal.SIG_IGN), ("SIGHUP", signal.SIG_IGN), ("SIGTERM", signal.SIG_DFL)):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, handler)
    if hasattr(signal, "pthread_sigmask"):
        held = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
    try:
        worker(rank, cfg, queue)
    except Exception as err:
        if stopping.value:
            os._exit(STOPPED_EXIT)  # no traceback, no queue flush: the parent is killing this rank anyway
        queue.put((rank, {"error": f"{type(err).__name__}: {err}"}))  # report instead of hanging the parent
        raise


def _start(procs: list[Any]) -> None:
    """Start `procs` with the stop signals held (`signals_held_during_fork`): each starts with them
    blocked (a mask survives fork and exec) until `_rank_main` sets them; one that arrives here is
    raised once every process is started (and so known to `_stop`)."""
    if hasattr(signal, "pthread_sigmask"):
        from multiprocessing import resource_tracker

        # the tracker unblocks SIGINT and SIGTERM after it starts (ResourceTracker.ensure_running):
        # start it before they are held
        resource_tracker.ensure_running()
    with callers_main_hidden(), signals_held_during_fork(stop_signals()):  # the caller's script is not run again
        for p in procs:
            p.start()


def _collect(procs: list[Any], queue: Any, world: int, timeout_s: float) -> dict[int, dict[str, Any]]:
    """The ``(rank, payload)`` answers of the `world` ranks; `RankError` for a payload with
    ``"error"`` or a rank that exited without answering (killed, a crash in native code),
    TimeoutError when `timeout_s` seconds pass first."""
    results: dict[int, dict[str, Any]] = {}
    deadline = time.time() + timeout_s
    while len(results) < world:
        left = deadline - time.time()
        if left <= 0:
            raise TimeoutError(f"pipeline run did not finish within {timeout_s} s")
        try:
            rank, payload = queue.get(timeout=min(left, POLL_S))
        except queue_module.Empty:
            gone = [r for r, p in enumerate(procs) if r not in results and p.exitcode is not None]
            if not gone:
                continue
            try:  # an answer sent just before its rank exited is in the pipe by now
                rank, payload = queue.get(timeout=POLL_S)
            except queue_module.Empty:
                raise RankError(f"rank {gone[0]} exited with code {procs[gone[0]].exitcode} without "
                                f"answering") from None
        if "error" in payload:
            raise RankError(f"rank {rank}: {payload['error']}")
        results[rank] = payload
    return results


def _stop(procs: list[Any], finished: bool, stopping: Any = None) -> None:
    """Join `procs` (those started): after a `finished` run each gets `JOIN_S` seconds to exit.
    Otherwise (an error, a timeout, an interrupt), and for any still running after that, the run
    is stopped: `stopping` (the ranks' shared byte, `_rank_main`) is set first, then every rank is
    killed, then all are joined. Killing and joining one rank at a time let a surviving rank see
    its peer's connection reset and print a traceback before its own kill."""
    started = [p for p in procs if p.pid is not None]  # pid None: never started
    if finished:
        for p in started:
            p.join(timeout=JOIN_S)
    alive = [p for p in started if p.is_alive()]
    if alive and stopping is not None:
        stopping.value = 1
    for p in alive:
        p.kill()
    for p in started:
        p.join()


def run_ranks(worker: Worker, cfg: dict[str, Any], timeout_s: float) -> dict[int, dict[str, Any]]:
    """Spawn ``worker(rank, cfg, queue)`` for every rank of ``cfg["world"]`` and collect the
    ``(rank, payload)`` each puts on the queue; a payload with ``"error"`` (an exception of the
    worker, put by `_rank_main`) or a rank that exits without one raises `RankError` (a
    RuntimeError), no answer within `timeout_s` seconds TimeoutError. While the ranks run,
    SIGTERM and SIGHUP raise `KeyboardInterrupt` as Ctrl-C does (module docstring).
    Every process is joined before this returns or raises: after an error, a timeout or an
    interrupt every rank is killed first, then all are joined (`_stop`), and no rank prints a
    traceback for the stop."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    stopping = ctx.RawValue("b", 0)  # set by `_stop` before it kills the ranks; no lock: a killed rank holds none
    target = importable(worker)
    procs = [ctx.Process(target=_rank_main, args=(target, r, cfg, queue, stopping), daemon=True)
             for r in range(cfg["world"])]
    finished = False
    with terminate_as_interrupt():
        try:
            _start(procs)
            results = _collect(procs, queue, cfg["world"], timeout_s)
            finished = True
        finally:
            _stop(procs, finished, stopping)
    return results


def check_grads(results: dict[int, dict[str, Any]], ref: dict[str, torch.Tensor]) -> tuple[bool, float]:
    """The ranks' gradients (``payload["grads"]``: name -> numpy array) against the one-process `ref`:
    (same names and all close at rtol 1e-4, atol 1e-5; the largest absolute difference)."""
    grads = {k: torch.from_numpy(v) for r in results.values() for k, v in r["grads"].items()}
    err = max((float((grads[k] - ref[k]).abs().max()) for k in ref if k in grads), default=0.0)
    ok = set(grads) == set(ref) and all(torch.allclose(grads[k], ref[k], rtol=1e-4, atol=1e-5) for k in ref)
    return ok, err
