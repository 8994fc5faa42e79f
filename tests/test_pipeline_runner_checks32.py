"""Pipeline runner checks (piperun32): the chain runner refuses, before spawning, a partition whose
``order`` is not the chain's identity (it used to run the stages as index ranges, report a passing
gradient check, and leave `compare` to fail with a bare ValueError); `runner.compare` and
`dag_runner.compare_dag` report every predicted figure (in-flight counts, stage memory, stash) for
the run's micro-batch count, not the one the partition was solved for (GPipe's n_s = m)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")

from memsched.models.pipeline import dag_runner, runner  # noqa: E402
from memsched.solvers import registry  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.pipeline import Partition  # noqa: E402


class Spawned(Exception):
    """Raised by the stand-in for `run_ranks`: the checks let the run reach the spawn."""


@pytest.fixture
def spawn_log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Replace `run_ranks` in both runners by a stub that records the call and raises `Spawned`."""
    calls: list[Any] = []

    def spawn(worker: Any, cfg: dict[str, Any], timeout_s: float) -> None:
        calls.append(cfg)
        raise Spawned

    monkeypatch.setattr(runner, "run_ranks", spawn)
    monkeypatch.setattr(dag_runner, "run_ranks", spawn)
    return calls


def _reordered(order: list[int] | None) -> Partition:
    part = Partition.from_bounds([(0, 1), (2, 3)], micro_batches=2)
    part.order = order
    return part


# ---------------------------------------------------------------------------- 1. a chain has one order
@pytest.mark.parametrize("order", [[0, 2, 1, 3], [1, 0, 2, 3], [0, 1, 2], [0, 1, 2, 3, 4]])
def test_chain_runner_refuses_a_non_identity_order_before_spawning(order: list[int], spawn_log: list[Any]):
    """The hunter's partition (stages {0,2},{1,3} of a 4-layer chain) and other non-identity
    orders are refused on ``partition.order``; no process is spawned."""
    with pytest.raises(InputError) as err:
        runner.run_partition(_reordered(order), layers=4, width=4, batch=4, micro_batches=2, steps=1, device="cpu",
                             timeout_s=5)
    assert err.value.field == "partition.order", err.value
    assert spawn_log == []


@pytest.mark.parametrize("order", [None, [0, 1, 2, 3]])
def test_chain_runner_accepts_no_order_or_the_identity(order: list[int] | None, spawn_log: list[Any]):
    """No order, or the chain's own order, passes the checks and reaches the spawn with stages 0-1, 2-3."""
    with pytest.raises(Spawned):
        runner.run_partition(_reordered(order), layers=4, width=4, batch=4, micro_batches=2, steps=1, device="cpu",
                             timeout_s=5)
    assert [list(b) for b in spawn_log[0]["bounds"]] == [[0, 1], [2, 3]]


def test_chain_cli_refuses_a_solver_partition_with_an_order(monkeypatch: pytest.MonkeyPatch, spawn_log: list[Any],
                                                            capsys: pytest.CaptureFixture[str]):
    """A partition with a DAG order from the solver is refused with exit 2 and one line on stderr
    naming ``partition.order``, before any process starts."""
    real = registry.solve

    def solve(*args: Any, **kwargs: Any) -> Any:
        res = real(*args, **kwargs)
        res.schedule = _reordered([0, 2, 1, 3])
        return res

    monkeypatch.setattr(registry, "solve", solve)
    code = runner.main(["--devices", "2", "--layers", "4", "--width", "4", "--batch", "4", "--micro-batches", "2",
                        "--steps", "1", "--device", "cpu"])
    assert code == 2
    assert "partition.order" in capsys.readouterr().err
    assert spawn_log == []


# ---------------------------------------------------------------------------- 2. predictions for the run's m
def _chain_run(m: int) -> dict[str, Any]:
    return {"config": {"micro_batches": m}, "step_time_s": 1.0, "step_time_2m_s": 2.0, "saved_peak": [0, 0],
            "cuda_peak": [None, None], "grad_check": True, "grad_max_abs_err": 0.0, "device": "cpu"}


def test_compare_predicts_gpipe_memory_for_the_runs_micro_batches():
    """A GPipe partition solved for 8 micro-batches, compared with a run of 2: in_flight, stash and
    stage_memory are those of the same partition evaluated with 2 (they read [8, 8] and the
    memory of 8 before); the caller's partition is left as it was."""
    inst = runner.profile_sequential(runner.make_mlp(4, 32), torch.randn(4, 64), reps=1)
    part = registry.solve("pipeline", inst, "madpipe", None, devices=2, schedule="gpipe", micro_batches=8).schedule
    assert part is not None and part.micro_batches == 8 and len(part.stages) == 2
    bounds = [(s.first, s.last) for s in part.stages]
    out = runner.compare(inst, part, _chain_run(2))["predicted"]
    same = Partition.from_bounds(bounds, schedule="gpipe", micro_batches=2).evaluated(inst)
    assert out["in_flight"] == [2, 2]
    assert out["stage_memory"] == [s.memory for s in same.stages]
    assert out["stash"] == [2 * (inst.input_of(s.first) + sum(int(inst.act[l]) for l in range(s.first, s.last)))
                            for s in same.stages]
    eight = Partition.from_bounds(bounds, schedule="gpipe", micro_batches=8).evaluated(inst)
    assert out["stage_memory"] != [s.memory for s in eight.stages]  # the figure differs with m
    assert part.micro_batches == 8


def test_compare_dag_predicts_gpipe_memory_for_the_runs_micro_batches():
    """The DAG runner's comparison: the same for a residual network (in_flight, stash, stage_memory of m = 2)."""
    spec = dag_runner.residual_spec(1)
    inst = dag_runner.profile_dag(dag_runner.DagNet(spec, width=16, in_dim=32, out_dim=8), torch.randn(4, 32), reps=1)
    part = Partition.from_bounds([(0, 1), (2, 4)], schedule="gpipe", micro_batches=8)
    run = {"config": {"micro_batches": 2, "boundaries": [[-1], [0, 1]]}, "step_time_s": 1.0, "saved_peak": [0, 0],
           "cpu_per_micro_batch_s": [0.0, 0.0], "grad_check": True, "grad_max_abs_err": 0.0}
    out = dag_runner.compare_dag(inst, part, run)["predicted"]
    same = Partition.from_bounds([(0, 1), (2, 4)], schedule="gpipe", micro_batches=2).evaluated(inst)
    assert out["in_flight"] == [2, 2]
    assert out["stage_memory"] == [s.memory for s in same.stages]
    assert out["stash"] == [2 * int(inst.stash(s.first)[s.last - s.first]) for s in same.stages]
    assert part.micro_batches == 8
