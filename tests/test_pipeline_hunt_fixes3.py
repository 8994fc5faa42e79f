"""Pipeline fixes from a bug hunt (third batch): memory past int64 (a huge weight factor, GPipe's
n A with huge activations) is infeasible rather than an internal error; the DPs' lower bound
is never above their objective; the runner refuses ``--device cuda`` without enough GPUs and an
unknown ``--solver`` before profiling; `Result.to_json()` of a pipeline records its machine;
`memsched plot` refuses replicated and interleaved partitions with a clear message."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from conftest import run_cli
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition, load
from memsched.solvers.pipeline.dp import partition_dp

import memsched

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data" / "pipeline"
MLP7 = DATA / "mlp7.chain.json"
GPT = DATA / "gpt24-b4.graph.txt"
BIG_ACT = """\
n1 -- Input -- forward_compute_time=0, backward_compute_time=0, activation_size=100000000000000, parameter_size=0
n2 -- L -- forward_compute_time=1, backward_compute_time=1, activation_size=100000000000000, parameter_size=5
n3 -- L -- forward_compute_time=1, backward_compute_time=1, activation_size=10, parameter_size=5
\tn1 -- n2
\tn2 -- n3
"""


# ---------------------------------------------------------------------------- 4. int64 overflow in the DPs
@pytest.mark.parametrize("solver", ["madpipe", "dag", "interleave", "interleave-dp"])
def test_huge_weight_factor_is_infeasible_not_an_internal_error(solver):
    inst = load(MLP7).with_machine(weight_factor=1e13)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the old int64 cast warned "invalid value"
        res = registry.solve("pipeline", inst, solver, 10**15, devices=2)
    assert res.status == "infeasible" and res.schedule is None
    if res.min_budget is not None:
        assert res.min_budget > 10**15


@pytest.mark.parametrize("solver", ["madpipe", "dag", "interleave"])
def test_gpipe_huge_stash_times_micro_batches_is_infeasible(tmp_path, solver):
    path = tmp_path / "big_act.graph.txt"
    path.write_text(BIG_ACT)
    inst = load(path)
    res = registry.solve("pipeline", inst, solver, 10**15, devices=2, schedule="gpipe", micro_batches=10**6)
    assert res.status == "infeasible" and res.schedule is None


def test_partition_dp_memory_objective_does_not_wrap():
    inst = load(MLP7).with_machine(weight_factor=1e13)
    value, _ = partition_dp(inst, 2, None, objective="memory")
    assert value > 2**63  # int64 would have wrapped (or cast to a negative number)


def test_cli_huge_weight_factor_exits_1():
    res = run_cli("partition", MLP7, "--devices", "2", "--memory", "1000TB", "--weight-factor", "1e13")
    assert res.code == 1, res.err
    assert "internal error" not in res.err


# ---------------------------------------------------------------------------- 9. lower bound <= objective
@pytest.mark.parametrize("solver", ["madpipe", "pipedream"])
def test_dp_lower_bound_is_not_above_the_objective(solver):
    inst = load(GPT)
    need = registry.solve("pipeline", inst, "madpipe", 1, devices=3).min_budget
    res = registry.solve("pipeline", inst, solver, int(need * 1.2), devices=3)
    assert res.status == "optimal"
    assert res.lower_bound <= res.objective
    assert res.gap == 0.0


# ---------------------------------------------------------------------------- 5, 6. runner refuses before profiling
@pytest.fixture
def no_profiling(monkeypatch):
    runner = pytest.importorskip("memsched.models.pipeline.runner")

    def fail(*_a, **_k):
        raise AssertionError("profiled before refusing the arguments")

    monkeypatch.setattr(runner, "profile_sequential", fail)
    monkeypatch.setattr(runner, "run_partition", fail)
    return runner


@pytest.mark.parametrize("gpus", [0, 1])
def test_runner_refuses_cuda_without_enough_gpus(no_profiling, monkeypatch, capsys, gpus):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    code = no_profiling.main(["--device", "cuda", "--devices", "2", "--layers", "4", "--width", "8", "--batch", "8",
                              "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--device" in err


def test_runner_refuses_unknown_solver_before_profiling(no_profiling, capsys):
    code = no_profiling.main(["--solver", "foo", "--layers", "4", "--width", "8", "--batch", "8"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--solver" in err and "foo" in err


# ---------------------------------------------------------------------------- 8. Result.to_json records the machine
def test_result_to_json_of_a_pipeline_records_its_machine():
    inst = memsched.load(MLP7, problem="pipeline").with_machine(bandwidth=1e8, weight_factor=2.0, latency=1e-4)
    res = memsched.solve(inst, "100%", "madpipe", devices=2)
    js = res.to_json()
    sched = js["schedule"]
    assert sched["weight_factor"] == 2.0 and sched["bandwidth"] == 1e8 and sched["latency"] == 1e-4
    assert sched["time_unit_s"] == inst.time_unit
    # `memsched partition --json`'s keys: the period in seconds, and in the file's unit (the attribute's)
    assert js["period"] == pytest.approx(res.objective * inst.time_unit) and js["period_file_units"] == res.objective
    replay = memsched.simulate(MLP7, json.loads(json.dumps(js)), budget=res.budget, problem="pipeline")
    assert replay.status != "invalid", replay.raw.message
    assert replay.raw.objective == pytest.approx(res.objective)
    assert replay.raw.peak_memory == res.peak_memory


# ---------------------------------------------------------------------------- 7. plot refuses what it cannot draw
def _partition_file(tmp_path: Path, name: str, *args: str) -> Path:
    res = run_cli("partition", MLP7, *args, "--json")
    assert res.code == 0, res.err
    path = tmp_path / name
    path.write_text(res.out)
    return path


@pytest.mark.parametrize("name,args,why", [
    ("rep.json", ("--devices", "4", "--memory", "100%", "--solver", "madpipe", "--replication"), "replicated"),
    ("ilv.json", ("--devices", "2", "--memory", "12000000", "--solver", "interleave-dp"), "interleaved"),
])
def test_plot_refuses_replicated_and_interleaved_partitions_clearly(tmp_path, name, args, why):
    path = _partition_file(tmp_path, name, *args)
    res = run_cli("plot", MLP7, path, "-o", tmp_path / "fig.png")
    assert res.code == 2
    assert "cannot draw this partition" in res.err and why in res.err
    assert "straight pipelines only" in res.err and "memsched simulate" in res.err
    assert not (tmp_path / "fig.png").exists()


def test_timeline_refuses_replicated_partition_with_input_error():
    from memsched.experiments.plotting.adapters import pipeline_timeline

    part = Partition.from_bounds([(0, 6, 2)], devices=2)
    with pytest.raises(InputError, match="cannot draw this partition: stage 0 is replicated on 2 devices"):
        pipeline_timeline(load(MLP7), part)
