"""The pipeline runner's command line stopped by a signal, and its memory and work limits (hunt 34).

1. SIGTERM (and SIGHUP) to the runner while its ranks run act as Ctrl-C: exit 130, one line on stderr,
   and no process of the run left (the ranks and multiprocessing's resource tracker used to run on,
   orphaned, after the runner died of the signal). A SIGHUP the caller ignores (``nohup``) stays ignored.
2. Ctrl-C (SIGINT to the whole process group, as a terminal sends it) is one line and exit 130, not a
   traceback from every rank and from the parent.
3. A ``kill -9`` of the runner leaves no rank running (`die_with_parent`).
4. ``--width 1000000`` (within the counts' range) is refused in one line, exit 2, rather than failing in
   torch's allocator; ``--layers`` is held to the pipeline DPs' work limit of ``memsched partition``.

The subprocess tests start the runner in a session of its own with SIGINT (and SIGHUP) at their defaults
(`sigint_as_in_a_terminal`), so that they hold when the test runner itself runs with them ignored (a CI
job in the background, ``nohup``). Linux only (they read /proc).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import runner_args, sigint_as_in_a_terminal, wait_for

pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

PROG = "python -m memsched.models.pipeline.runner"
#: a small run whose 2000 timed steps last far longer than the tests wait before they signal it
LONG_RUN = ["--devices", "2", "--layers", "4", "--width", "32", "--batch", "16", "--micro-batches", "4",
            "--steps", "2000", "--device", "cpu"]


def as_in_a_terminal() -> None:
    """`preexec_fn`: SIGINT (`sigint_as_in_a_terminal`) and SIGHUP at their defaults, as in a terminal."""
    sigint_as_in_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def hup_ignored() -> None:
    """`preexec_fn`: as `as_in_a_terminal`, but SIGHUP ignored, as ``nohup`` starts a command."""
    sigint_as_in_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _stat(pid: str) -> tuple[str, int, int] | None:
    """(state, ppid, process group) of process `pid`, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[2])


def group_pids(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        st = _stat(pid)
        if st is not None and st[0] != "Z" and st[2] == pgid:
            found.append(int(pid))
    return found


def rank_pids(parent: int) -> list[int]:
    """The live spawned processes (``spawn_main``: the ranks) whose parent is `parent`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        st = _stat(pid)
        if st is None or st[0] == "Z" or st[1] != parent:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found




@contextmanager
def runner(tmp_path: Path, args: list[str], preexec: Callable[[], None] = as_in_a_terminal
           ) -> Iterator[tuple[subprocess.Popen, Path, Path]]:
    """The runner on `args` in a session of its own (its pid is its process group), stdout and stderr
    to files; every process of its group is killed on leaving."""
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "memsched.models.pipeline.runner", *args], cwd=tmp_path,
                                stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, preexec_fn=preexec,
                                start_new_session=True)
    try:
        yield proc, out, err
    finally:
        for pid in group_pids(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def wait_for_ranks(proc: subprocess.Popen, err: Path) -> None:
    """Wait until the runner has spawned its two ranks (it imports torch, profiles and solves first)."""
    ok = wait_for(lambda: len(rank_pids(proc.pid)) >= 2 or proc.poll() is not None, 240)
    assert ok and proc.poll() is None, (proc.returncode, err.read_text()[-2000:])


def assert_stopped(proc: subprocess.Popen, err: Path) -> None:
    """Exit 130 with the one line of an interrupt, and no process of the run left shortly after."""
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the runner went on after the signal")
    left = not wait_for(lambda: not group_pids(proc.pid), 20)
    text = err.read_text()
    assert rc == 130, (rc, text[-3000:])
    assert text.strip().splitlines() == [f"{PROG}: interrupted"], text[-3000:]
    assert not left, f"processes of the run still running after it exited: {group_pids(proc.pid)}"


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_terminate_or_hangup_stops_the_run_as_ctrl_c(tmp_path, signame):
    with runner(tmp_path, LONG_RUN) as (proc, _out, err):
        wait_for_ranks(proc, err)
        os.kill(proc.pid, getattr(signal, signame))  # the runner alone, as `kill PID` or `timeout` does
        assert_stopped(proc, err)


@pytest.mark.torch
@pytest.mark.slow
def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    with runner(tmp_path, LONG_RUN) as (proc, _out, err):
        wait_for_ranks(proc, err)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: every process of the foreground group
        assert_stopped(proc, err)
        assert "Traceback" not in err.read_text()


@pytest.mark.torch
@pytest.mark.slow
def test_a_killed_runner_leaves_no_rank_running(tmp_path):
    with runner(tmp_path, LONG_RUN) as (proc, _out, err):
        wait_for_ranks(proc, err)
        ranks = rank_pids(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_for(lambda: not group_pids(proc.pid), 20), \
            f"ranks {ranks}: still running after their parent was killed: {group_pids(proc.pid)}"


@pytest.mark.torch
@pytest.mark.slow
def test_a_hangup_the_caller_ignores_stays_ignored(tmp_path):
    args = ["--devices", "2", "--layers", "4", "--width", "32", "--batch", "16", "--micro-batches", "4",
            "--steps", "2", "--device", "cpu"]
    with runner(tmp_path, args, preexec=hup_ignored) as (proc, out, err):
        wait_for_ranks(proc, err)
        os.kill(proc.pid, signal.SIGHUP)
        rc = proc.wait(timeout=240)
        assert rc == 0, err.read_text()[-3000:]
        assert json.loads(out.read_text())["grad_check"] is True


@pytest.mark.torch
def test_a_network_larger_than_memory_is_one_line_exit_2(tmp_path):
    res = subprocess.run([sys.executable, "-m", "memsched.models.pipeline.runner", "--devices", "2", "--layers", "4",
                          "--width", "1000000", "--batch", "16", "--micro-batches", "4", "--steps", "1"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error: --width: "), res.stderr[-3000:]
    assert res.stdout == ""


@pytest.mark.torch
def test_layers_are_held_to_the_partition_work_limit():
    from memsched.experiments.commands._checks import MAX_DP_STEPS, dp_steps, work_limit
    from memsched.models.pipeline.runner import check_arguments
    from memsched.solvers.errors import InputError

    most = work_limit("pipeline", "madpipe", 2)
    assert most is not None and dp_steps(most, 2) <= MAX_DP_STEPS < dp_steps(most + 1, 2)
    check_arguments(runner_args(layers=most, width=1))  # at the limit: accepted
    with pytest.raises(InputError) as info:
        check_arguments(runner_args(layers=most + 1, width=1))
    assert info.value.field == "--layers" and str(most) in str(info.value)


@pytest.mark.torch
def test_the_memory_estimate_counts_the_networks_weights():
    from memsched.models.pipeline.runner import make_mlp, mlp_parameters, run_memory_bytes

    for layers, width in ((1, 8), (2, 5), (4, 32)):
        assert mlp_parameters(layers, width) == sum(p.numel() for p in make_mlp(layers, width).parameters())
    # the width-10^6 network of the hunt: 4 bytes a weight, at least three copies (this process, the ranks)
    assert run_memory_bytes(4, 10**6, 16, 2) >= 3 * 4 * 2 * 10**12


@pytest.mark.torch
def test_a_rank_that_exits_without_answering_is_an_error_not_a_wait():
    from memsched.models.pipeline import distributed

    class Dead:
        exitcode = -9

    # waiting for the answers of dead ranks would end in TimeoutError after the whole timeout
    with pytest.raises(RuntimeError, match="rank 0 exited with code -9"):
        distributed._collect([Dead(), Dead()], queue.Queue(), 2, timeout_s=30.0)
