"""Failures of a pipeline run and DAG specs the runners cannot run.

1. ``python -m memsched.models.pipeline.runner`` waited 300 s for its ranks (no --timeout), then
   died with a ``TimeoutError`` traceback and exit 1, the code of "no partition"; a rank's error was a
   ``RuntimeError`` traceback too. Now --timeout SECONDS (> 0) bounds the run, and a run that fails
   after its ranks start (the timeout, a rank's error) is one line on stderr and exit 4, its ranks killed.
2. `dag_runner.check_spec` accepted a layer whose output no later layer reads (a dead end), so
   `run_dag_partition` spawned the ranks, which failed in the backward (``'NoneType' object has no
   attribute 'detach'``). And the last stage returned the output of the last layer of its order, not
   the network's output (the spec's last layer) when the order ends elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")

PROG = "python -m memsched.models.pipeline.runner"
#: a two-stage run whose 10^6 timed steps outlast any --timeout the tests give
LONG_RUN = ["--devices", "2", "--layers", "4", "--width", "32", "--batch", "16", "--micro-batches", "4",
            "--steps", "1000000", "--device", "cpu"]
#: a layer (0) that no later layer reads: the network's output is layer 2 alone
DEAD_END = [("block", [-1]), ("block", [0]), ("block", [0])]


def _group_alive(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(pid))
    return found


def _runner(tmp_path, args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """The runner's command line on `args` in a session of its own; asserts that no process of its
    group (a rank, a resource tracker) is left once it has exited."""
    proc = subprocess.Popen([sys.executable, "-m", "memsched.models.pipeline.runner", *args], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    end = time.monotonic() + 20
    while _group_alive(proc.pid) and time.monotonic() < end:
        time.sleep(0.1)
    left = _group_alive(proc.pid)
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"processes of the run left after it exited: {left}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.torch
@pytest.mark.slow
def test_a_run_past_its_timeout_is_one_line_and_exit_4(tmp_path):
    res = _runner(tmp_path, [*LONG_RUN, "--timeout", "0.5"])
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 4, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    assert lines == [f"{PROG}: error: the run did not finish within --timeout 0.5 s; its ranks were stopped"], \
        res.stderr[-3000:]
    assert res.stdout == ""


@pytest.mark.torch
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_timeout_must_be_a_positive_number_of_seconds(capsys, value):
    from memsched.models.pipeline import runner

    assert runner.main([*LONG_RUN, "--timeout", value]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error: --timeout: "), lines


@pytest.mark.torch
def test_timeout_is_in_the_help(capsys):
    from memsched.models.pipeline import runner

    with pytest.raises(SystemExit) as info:
        runner.main(["--help"])
    assert info.value.code == 0
    assert "--timeout SECONDS" in capsys.readouterr().out


@pytest.mark.torch
def test_a_rank_error_is_one_line_and_exit_4(monkeypatch, capsys):
    """A rank's error (`distributed.RankError`, raised by `run_ranks`) ends the command line the same way."""
    from memsched.models.pipeline import distributed, runner

    def failing(*_args, **_kwargs):
        raise getattr(distributed, "RankError", RuntimeError)("rank 1: ValueError: boom\nsecond line")

    monkeypatch.setattr(runner, "run_ranks", failing)
    rc = runner.main(["--devices", "2", "--layers", "4", "--width", "8", "--batch", "4", "--micro-batches", "2",
                      "--steps", "1", "--device", "cpu"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("note: ")]
    assert rc == 4, err
    assert lines == [f"{PROG}: error: the run failed: rank 1: ValueError: boom second line"], err


@pytest.mark.torch
def test_a_dead_end_layer_is_refused_before_any_rank_starts(monkeypatch):
    from memsched.models.pipeline import dag_runner
    from memsched.solvers.errors import InputError
    from memsched.solvers.pipeline import Partition

    def no_ranks(*_args, **_kwargs):
        raise AssertionError("ranks were started for a spec the runner cannot run")

    monkeypatch.setattr(dag_runner, "run_ranks", no_ranks)
    for order in (None, [0, 2, 1]):
        part = Partition.from_bounds([(0, 2)], schedule="gpipe", micro_batches=1)
        part.order = order
        with pytest.raises(InputError) as info:
            dag_runner.run_dag_partition(part, DEAD_END, width=8, out_dim=8, batch=2, micro_batches=1, steps=1)
        assert info.value.field == "spec[1]"
    with pytest.raises(InputError) as info:
        dag_runner.check_spec([("block", [-1]), ("block", [0]), ("block", [0]), ("block", [1])])
    assert info.value.field == "spec[2]"  # a branch left unread
    net = dag_runner.DagNet(DEAD_END, width=8, in_dim=8, out_dim=8)
    with pytest.raises(InputError) as info:
        dag_runner.profile_dag(net, torch.zeros(2, 8), reps=1)
    assert info.value.field == "spec[1]"
    dag_runner.check_spec(dag_runner.residual_spec(2))  # every layer but the last is read: accepted


@pytest.mark.torch
def test_the_last_stage_returns_the_network_output_whatever_its_order():
    """A stage whose order ends with another layer than the spec's last still returns the network's
    output, with the gradients of the one-process network (built directly: `check_spec` now refuses
    the dead end that lets a topological order end elsewhere, so no run can reach it)."""
    from memsched.models.pipeline import dag_runner

    net = dag_runner.DagNet(DEAD_END, width=8, in_dim=8, out_dim=8)
    ref_net = dag_runner.DagNet(DEAD_END, width=8, in_dim=8, out_dim=8)
    stage = dag_runner.DagStage(net, [0, 2, 1], [-1], None)
    torch.manual_seed(3)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    out = stage(x)
    assert torch.equal(out, ref_net(x))
    torch.nn.MSELoss()(out, y).backward()
    torch.nn.MSELoss()(ref_net(x), y).backward()
    for (name, p), (_, q) in zip(net.named_parameters(), ref_net.named_parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            assert torch.allclose(p.grad, q.grad), name
