"""The pipeline runners' execution path (hunt pipeexec, fixes 42).

1. Stopping a run printed a rank's multiprocessing traceback (``Process SpawnProcess-2: Traceback ...
   Connection reset by peer``) before the one line ``interrupted``: `distributed._stop` killed and joined
   the ranks one at a time, so the surviving rank saw its peer's connection reset and raised before its
   own kill. Now the stop marks the run as stopping, kills every rank, then joins them, and a rank that
   fails while the run is stopping exits quietly. The command-line test forces the race: the runner runs
   under a wrapper that, after each rank kill, lets the other ranks run on until they exit (as a runner
   descheduled between two kills on a loaded machine does).
2. The saved-activation prediction: ``predicted.saved`` is the stash plus the MSE loss's saved output
   and target on the last stage, and equals what a run measures on every stage.
3. `distributed.timed_steps` timed the step that ran under the saved-tensor meter's hooks; now the
   metered step is an extra, untimed one.
4. ``device="tpu"`` ran on CPU and was reported as "tpu"; ``device="cuda"`` without CUDA failed inside a
   rank. Both are an `InputError` naming ``device`` before any rank starts.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from conftest import sigint_as_in_a_terminal, wait_for

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")

PROG = "python -m memsched.models.pipeline.runner"

#: the runner's command line with every rank kill followed by a wait for the other ranks to exit
#: (at most 30 s); the exit codes of those ranks are written, as JSON, to the file $PIPERUN42_CODES
WRAPPER = '''
import json, multiprocessing, os, runpy, sys, time
from multiprocessing.context import SpawnProcess

_kill = SpawnProcess.kill


def kill_then_wait(self):
    _kill(self)
    others = [p for p in multiprocessing.active_children() if p is not self and isinstance(p, SpawnProcess)]
    end = time.monotonic() + 30
    while time.monotonic() < end and any(p.is_alive() for p in others):
        time.sleep(0.05)
    with open(os.environ["PIPERUN42_CODES"], "a") as f:
        f.write(json.dumps([p.exitcode for p in others]) + "\\n")


SpawnProcess.kill = kill_then_wait
runpy.run_module("memsched.models.pipeline.runner", run_name="__main__", alter_sys=True)
'''

#: a tiny run whose timed steps last far longer than the test waits before it signals it
LONG_RUN = ["--devices", "2", "--layers", "2", "--width", "4", "--batch", "4", "--micro-batches", "2",
            "--steps", "1000000", "--timeout", "300", "--device", "cpu"]


def as_in_a_terminal() -> None:
    """`preexec_fn`: SIGINT (`sigint_as_in_a_terminal`) and SIGHUP at their defaults, as in a terminal."""
    sigint_as_in_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _children(parent: int) -> list[int]:
    """The live spawned ranks (``spawn_main`` in their command line) whose parent is `parent`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == parent and b"spawn_main" in cmd:
            found.append(int(pid))
    return found


def _sockets(pid: int) -> int:
    """The sockets process `pid` holds open (0 when it is gone)."""
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            except OSError:
                continue
    except OSError:
        return 0
    return n




@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_stop_is_one_line_even_when_a_rank_sees_its_peer_killed(tmp_path):
    wrapper, codes = tmp_path / "wrapper.py", tmp_path / "codes.jsonl"
    wrapper.write_text(WRAPPER)
    err = tmp_path / "err.txt"
    env = {**os.environ, "PIPERUN42_CODES": str(codes)}
    with open(err, "wb") as fe:
        proc = subprocess.Popen([sys.executable, str(wrapper), *LONG_RUN], cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fe,
                                preexec_fn=as_in_a_terminal, start_new_session=True)
    try:
        # both ranks have joined the process group (its sockets are open): each is in its steps, and the
        # one left alive by the first kill sees its peer's connection reset
        up = wait_for(lambda: (lambda rs: len(rs) == 2 and all(_sockets(r) >= 2 for r in rs))(
            _children(proc.pid)) or proc.poll() is not None, 240)
        assert up and proc.poll() is None, (proc.returncode, err.read_text()[-3000:])
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGTERM)  # the runner alone, as `kill PID` or `timeout` does
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    text = err.read_text()
    assert rc == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert text.strip().splitlines() == [f"{PROG}: interrupted"], text[-3000:]
    # the race was run: after the first kill, the other rank failed on its own (it was not killed)
    first = json.loads(codes.read_text().splitlines()[0])
    assert first and all(c is not None and c != -signal.SIGKILL for c in first), first


class _Procs:
    """Stand-ins for started ranks that record, in one shared log, each call `_stop` makes."""

    def __init__(self, n: int, log: list[tuple[str, int]]):
        self.items = [self._proc(r, log) for r in range(n)]

    @staticmethod
    def _proc(rank: int, log: list[tuple[str, int]]) -> SimpleNamespace:
        state = {"alive": True}

        def kill() -> None:
            log.append(("kill", rank))
            state["alive"] = False

        def join(timeout: float | None = None) -> None:
            log.append(("join", rank))

        return SimpleNamespace(pid=1000 + rank, kill=kill, join=join, is_alive=lambda: state["alive"])


@pytest.mark.torch
def test_a_stop_marks_the_run_then_kills_every_rank_before_it_joins_one():
    from memsched.models.pipeline import distributed

    log: list[tuple[str, int]] = []
    stopping = SimpleNamespace(value=0)

    class Flag:
        @property
        def value(self) -> int:
            return stopping.value

        @value.setter
        def value(self, v: int) -> None:
            log.append(("stopping", v))
            stopping.value = v

    procs = _Procs(3, log).items
    distributed._stop(procs, False, Flag())
    assert log[0] == ("stopping", 1)
    assert [e for e in log[1:4]] == [("kill", 0), ("kill", 1), ("kill", 2)]
    assert sorted(log[4:]) == [("join", 0), ("join", 1), ("join", 2)]


def _worker_failing_after_stop(rank: int, cfg: dict, queue) -> None:
    raise RuntimeError("Connection reset by peer")


@pytest.mark.torch
def test_a_rank_failing_while_the_run_stops_exits_quietly_and_its_own_error_is_reported(monkeypatch):
    from memsched.models.pipeline import distributed

    monkeypatch.setattr(distributed, "die_with_parent", lambda pid: None)
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(distributed.os, "_exit", fake_exit)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)}
    put: list = []
    queue = SimpleNamespace(put=put.append)
    try:
        with pytest.raises(SystemExit):  # stopping: no report, a quiet exit
            distributed._rank_main(_worker_failing_after_stop, 1, {}, queue, SimpleNamespace(value=1))
        assert exits == [distributed.STOPPED_EXIT] and put == []
        with pytest.raises(RuntimeError, match="reset"):  # not stopping: reported, raised again
            distributed._rank_main(_worker_failing_after_stop, 1, {}, queue, SimpleNamespace(value=0))
        assert put == [(1, {"error": "RuntimeError: Connection reset by peer"})]
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


@pytest.mark.torch
def test_the_metered_step_is_not_timed(monkeypatch):
    """Call k of the stand-in schedule takes 10**k fake seconds and saves 4 (k + 1) bytes for backward:
    the returned times name the timed calls, the meter's peak the metered one."""
    from memsched.models.pipeline import distributed

    clock = [0.0]
    calls: list[int] = []

    def step(*args, **kwargs) -> None:
        k = len(calls)
        calls.append(k)
        x = torch.ones(k + 1, requires_grad=True)
        (x * x).sum().backward()
        clock[0] += 10.0 ** k

    monkeypatch.setattr(distributed, "dist", SimpleNamespace(barrier=lambda: None))
    monkeypatch.setattr(distributed, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    for steps in (1, 2, 3):
        calls.clear()
        times, meter = distributed.timed_steps(SimpleNamespace(step=step), torch.nn.Linear(1, 1), 0, 1,
                                               torch.zeros(1), torch.zeros(1), steps, torch.device("cpu"))
        timed = [round(math.log10(t)) for t in times]
        metered = meter.peak // 4 - 1
        assert len(timed) == steps and 0 not in timed, (steps, timed)  # the warm-up is not timed
        assert metered == calls[-1] and metered not in timed, (steps, timed, metered)


@pytest.mark.torch
def test_a_device_the_runners_cannot_use_is_refused_before_any_rank_starts(monkeypatch):
    from memsched.models.pipeline import dag_runner, runner
    from memsched.solvers.errors import InputError
    from memsched.solvers.pipeline import Partition

    def no_ranks(*args, **kwargs):
        raise AssertionError("ranks were started for a device the run cannot use")

    monkeypatch.setattr(runner, "run_ranks", no_ranks)
    monkeypatch.setattr(dag_runner, "run_ranks", no_ranks)
    part = Partition.from_bounds([(0, 0), (1, 1)], micro_batches=2)
    with pytest.raises(InputError) as info:
        runner.run_partition(part, layers=2, width=4, batch=4, micro_batches=2, steps=1, device="tpu")
    assert info.value.field == "device" and "tpu" in str(info.value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    spec = dag_runner.residual_spec(1)
    part = Partition.from_bounds([(0, 1), (2, 4)], micro_batches=2)
    for call in (lambda: runner.run_partition(Partition.from_bounds([(0, 0), (1, 1)], micro_batches=2), layers=2,
                                              width=4, batch=4, micro_batches=2, steps=1, device="cuda"),
                 lambda: dag_runner.run_dag_partition(part, spec, width=4, batch=4, micro_batches=2, steps=1,
                                                      device="cuda")):
        with pytest.raises(InputError) as info:
            call()
        assert info.value.field == "device" and "cuda is not available" in str(info.value)


def _in_process(monkeypatch, *modules):
    """Replace `run_ranks` in `modules` by a one-rank run of the worker in this process (world 1: the
    whole network on one stage), so that a run's measurements come without spawning."""
    from memsched.models.pipeline import distributed

    def run_ranks(worker, cfg, timeout_s):
        assert cfg["world"] == 1
        answers: list = []
        threads = torch.get_num_threads()
        try:
            worker(0, cfg, SimpleNamespace(put=answers.append))
        finally:
            torch.set_num_threads(threads)
            if distributed.dist.is_initialized():
                distributed.dist.destroy_process_group()
        return dict(answers)

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")  # init_rank sets them: restored after the test
    monkeypatch.setenv("MASTER_PORT", "0")
    for mod in modules:
        monkeypatch.setattr(mod, "run_ranks", run_ranks)


@pytest.mark.torch
def test_the_predicted_saved_activations_are_what_a_run_measures(monkeypatch):
    """The hunt's residual network on one stage (it measured 48 bytes more than the stash: the loss's output
    and target, 2 x 3 x 2 floats), under 1F1B and GPipe, and the chain runner's MLP."""
    from memsched.models.pipeline import dag_runner, runner
    from memsched.solvers.pipeline import Partition

    _in_process(monkeypatch, dag_runner, runner)
    spec = [("block", [-1]), ("block", [0]), ("block", [0]), ("add", [1, 2]), ("block", [3])]
    inst = dag_runner.profile_dag(dag_runner.DagNet(spec, width=4, in_dim=4, out_dim=2), torch.randn(3, 4), reps=1)
    for m, schedule in ((1, "1f1b"), (2, "gpipe")):
        part = Partition.from_bounds([(0, 4)], micro_batches=m, schedule=schedule)
        run = dag_runner.run_dag_partition(part, spec, width=4, in_dim=4, out_dim=2, batch=3 * m, micro_batches=m,
                                           steps=1, timeout_s=60)
        out = dag_runner.compare_dag(inst, part, run)
        assert out["grad_check"], out["grad_max_abs_err"]
        measured, pred = out["measured"]["saved_activations_peak"], out["predicted"]
        # four blocks keep their ReLU's output (3 x 4 floats each); the loss, per micro-batch in flight on the
        # last stage (1 under 1F1B, m under GPipe), its input and target (3 x 2 floats each)
        assert pred["stash"] == [4 * 48 * m]
        assert measured == pred["saved"] == [(4 * 48 + 2 * 24) * m], (schedule, measured, pred)
        # every call is counted: warm-up, timed and metered steps (and rank 0's forward for the stage's shapes)
        [(fwd, bwd)] = run["cpu_calls"]
        assert fwd >= 3 * m and bwd == 3 * m, run["cpu_calls"]
    mlp = runner.profile_sequential(runner.make_mlp(2, 4), torch.randn(2, 64), reps=1)
    part = Partition.from_bounds([(0, 1)], micro_batches=2)
    run = runner.run_partition(part, layers=2, width=4, batch=4, micro_batches=2, steps=1, device="cpu")
    out = runner.compare(mlp, part, run)
    assert out["grad_check"]
    # the stash (the inputs of both blocks) plus the loss's output and target, 2 x 2 x 16 floats
    assert out["measured"]["saved_activations_peak"] == out["predicted"]["saved"] == [(2 * 64 + 2 * 4) * 4 + 256]
