"""Pipeline fixes from a bug hunt: `memsched simulate` replays a partition on the machine it was
solved with; the period-only baselines say what their own partition needs (not "the smallest
feasible memory"); the runner refuses bad arguments and interleaved allocations up front;
`simulate_batch` refuses interleaved allocations that share a device; a graph.txt field given
twice is bad input; the straight-only exact solvers' seeds run without replication; the count
options are >= 1; the chain example of docs/pipeline.md is labelled truthfully."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_cli
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition, load, reference_peak, simulate, simulate_batch
from memsched.solvers.pipeline.instance import Pipeline, from_chain_json, from_graph_txt

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data" / "pipeline"
TINY = DATA / "tiny-resnet.graph.txt"
MLP7 = DATA / "mlp7.chain.json"


# ---------------------------------------------------------------------------- 1. replay on the partition's machine
def _partition_json(tmp_path: Path, name: str, *args: str) -> tuple[Path, dict]:
    res = run_cli("partition", *args, "--json")
    assert res.code == 0, res.err
    path = tmp_path / name
    path.write_text(res.out)
    return path, json.loads(res.out)


def test_simulate_replays_the_weight_factor_of_the_partition(tmp_path):
    path, out = _partition_json(tmp_path, "wf.json", TINY, "--devices", "2", "--memory", "33000000",
                                "--weight-factor", "1")
    assert out["schedule"]["weight_factor"] == 1.0
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(out["schedule"]))
    for file in (path, bare):  # the whole output and the bare partition object
        sim = run_cli("simulate", TINY, file, "--budget", "33000000", "--json")
        assert sim.code == 0, sim.err
        got = sim.json()
        assert got["valid"] and got["weight_factor"] == 1.0
        assert got["peak_memory"] == out["peak_memory"] <= 33000000
        assert got["period_file_units"] == pytest.approx(out["period_file_units"], rel=1e-12)


def test_python_simulate_replays_the_recorded_machine_too(tmp_path):
    """`memsched.simulate` of a partition file or its JSON dict uses the machine it records, as the
    command does (before: the default weights x 4, a peak above the budget it was solved for)."""
    import memsched

    path, out = _partition_json(tmp_path, "wf.json", TINY, "--devices", "2", "--memory", "33000000",
                                "--weight-factor", "1")
    for given in (path, out, out["schedule"]):
        res = memsched.simulate(TINY, given, problem="pipeline")
        assert res.status == "valid" and res.peak_memory == out["peak_memory"] <= 33000000


def test_plot_draws_the_partition_on_its_recorded_machine(tmp_path):
    """`memsched plot` charges the partition as it was solved (before: weights x 4, so a
    partition solved with weights x 1 was drawn as invalid, "stage 0 needs ... > budget")."""
    path, out = _partition_json(tmp_path, "wf.json", TINY, "--devices", "2", "--memory", "33000000",
                                "--weight-factor", "1")
    res = run_cli("plot", TINY, path, "-o", tmp_path / "p.png", "--budget", "33000000")
    assert res.code == 0, res.err
    assert "invalid schedule" not in res.err and (tmp_path / "p.png").exists()


def test_simulate_replays_bandwidth_and_latency_of_the_partition(tmp_path):
    path, out = _partition_json(tmp_path, "bw.json", TINY, "--devices", "2", "--memory", "200MB",
                                "--bandwidth", "100GB/s", "--latency", "0.0025")
    sim = run_cli("simulate", TINY, path, "--json")
    assert sim.code == 0, sim.err
    got = sim.json()
    assert got["period_file_units"] == pytest.approx(out["period_file_units"], rel=1e-12)
    assert got["bandwidth"] == pytest.approx(1e11) and got["latency"] == 0.0025


def test_simulate_options_replace_the_recorded_machine_and_old_files_keep_defaults(tmp_path):
    path, out = _partition_json(tmp_path, "wf.json", TINY, "--devices", "2", "--memory", "33000000",
                                "--weight-factor", "1")
    default = simulate(load(str(TINY)), Partition.from_json(out["schedule"]))  # weights x 4
    assert default.peak_memory > 33000000
    sim = run_cli("simulate", TINY, path, "--weight-factor", "4", "--json")
    assert sim.code == 0 and sim.json()["peak_memory"] == default.peak_memory
    sim = run_cli("simulate", TINY, path, "--bandwidth", "1GB/s", "--json")
    assert sim.code == 0 and sim.json()["period"] > out["period"] and sim.json()["weight_factor"] == 1.0
    old = {k: v for k, v in out["schedule"].items() if k not in ("weight_factor", "bandwidth", "latency")}
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(old))
    sim = run_cli("simulate", TINY, old_path, "--json")
    assert sim.code == 0 and sim.json()["peak_memory"] == default.peak_memory


def test_simulate_bad_machine_values(tmp_path, examples):
    _, out = _partition_json(tmp_path, "wf.json", TINY, "--devices", "2", "--memory", "1GB")
    out["schedule"]["weight_factor"] = -1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(out))
    sim = run_cli("simulate", TINY, bad)
    assert sim.code == 2 and "schedule.weight_factor" in sim.err and "Traceback" not in sim.err
    assert len(sim.err.strip().splitlines()) == 1
    sim = run_cli("simulate", TINY, tmp_path / "wf.json", "--latency", "0.001")
    assert sim.code == 2 and "--latency" in sim.err


# ---------------------------------------------------------------------------- 2. baselines' need is not min memory
@pytest.mark.parametrize("solver", ["pipedream", "balance-time", "dag-pipedream"])
def test_baseline_message_says_what_its_partition_needs(solver):
    res = run_cli("partition", MLP7, "--devices", "4", "--memory", "9000000", "--solver", solver, "--json")
    assert res.code == 1
    out = res.json()
    assert out["status"] == "infeasible" and out["needs"] == out["min_budget"] > 9000000
    # named as this baseline's own smallest memory, never as the problem's
    assert f"{solver}'s smallest feasible memory: {out['needs']} bytes" in res.err
    assert "what its own partition needs" in res.err and "; smallest feasible memory" not in res.err
    madpipe = run_cli("partition", MLP7, "--devices", "4", "--memory", "9000000", "--json")
    assert madpipe.code == 0 and madpipe.json()["peak_memory"] <= 9000000 < out["needs"]


def test_madpipe_still_gives_the_smallest_feasible_memory():
    res = run_cli("partition", MLP7, "--devices", "4", "--memory", "1000")
    assert res.code == 1 and "smallest feasible memory" in res.err


# ---------------------------------------------------------------------------- 3, 4. the runner
BAD_RUNNER_ARGS = [
    (["--micro-batches", "0"], "--micro-batches"),
    (["--devices", "0"], "--devices"),
    (["--steps", "0"], "--steps"),
    (["--batch", "7", "--micro-batches", "2"], "--batch"),
    (["--devices", "3", "--micro-batches", "2"], "--micro-batches"),
    (["--memory", "-5"], "--memory"),
    (["--solver", "nope"], "--solver"),
]


@pytest.mark.parametrize(("extra", "field"), BAD_RUNNER_ARGS)
def test_runner_refuses_bad_arguments_up_front(capsys, extra, field):
    pytest.importorskip("torch")
    from memsched.models.pipeline import runner

    base = ["--layers", "3", "--width", "8", "--batch", "4", "--micro-batches", "2", "--devices", "2", "--steps", "1",
            "--device", "cpu"]
    assert runner.main(base + extra) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err


def _interleaved() -> tuple[Pipeline, Partition]:
    inst = Pipeline(fwd=[1, 1, 1, 1], bwd=[2, 2, 2, 2], act=[10] * 4, params=[0] * 4, input_size=10)
    part = Partition.from_bounds([(0, 0), (1, 1), (2, 2), (3, 3)], devices=2)
    part.device_of = [0, 1, 1, 0]
    return inst, part


def test_simulate_batch_refuses_an_interleaved_allocation():
    inst, part = _interleaved()
    assert simulate(inst, part).period == 6.0
    with pytest.raises(InputError, match="device_of"):
        simulate_batch(inst, part, 4)
    part.device_of, part.devices = [0, 1, 2, 3], 4  # one device per stage: a straight pipeline
    straight = Partition.from_bounds([(0, 0), (1, 1), (2, 2), (3, 3)])
    assert simulate_batch(inst, part, 4).makespan == simulate_batch(inst, straight, 4).makespan


def test_runner_refuses_an_interleaved_allocation():
    pytest.importorskip("torch")
    from memsched.models.pipeline.runner import check_runnable, run_partition

    _, part = _interleaved()
    with pytest.raises(InputError, match="interleaved"):
        check_runnable(part, 4)
    with pytest.raises(InputError, match="interleaved"):  # before any process is spawned
        run_partition(part, layers=4, width=8, batch=4, micro_batches=4, steps=1, device="cpu", timeout_s=5)


# ---------------------------------------------------------------------------- 5. a field given twice
def test_graph_field_given_twice_is_bad_input(tmp_path):
    text = ("node1 -- A -- forward_compute_time=1, forward_compute_time=2, backward_compute_time=1, "
            "activation_size=1, parameter_size=1\n")
    with pytest.raises(InputError, match="forward_compute_time: field given twice"):
        from_graph_txt(text, path="dup.txt")
    path = tmp_path / "dup.txt"
    path.write_text(text)
    res = run_cli("partition", path, "--devices", "1", "--memory", "1GB")
    assert res.code == 2 and "dup.txt" in res.err and "forward_compute_time" in res.err


# ---------------------------------------------------------------------------- 6. replication and straight solvers
@pytest.mark.parametrize("solver", ["cpsat", "dag-cpsat", "interleave-cpsat"])
def test_straight_exact_solvers_seed_without_replication(solver):
    pytest.importorskip("ortools")
    inst = load(str(MLP7))
    res = registry.solve("pipeline", inst, solver, reference_peak(inst), devices=4, replication=True,
                         time_limit=10)
    assert res.schedule is not None and all(s.replicas == 1 for s in res.schedule.stages), str(res.schedule)
    assert "replication" not in res.scope


@pytest.mark.parametrize("solver", ["cpsat", "interleave-cpsat", "balance-time", "interleave"])
def test_replication_flag_refused_for_solvers_without_it(solver):
    res = run_cli("partition", MLP7, "--devices", "4", "--memory", "100%", "--replication", "--solver", solver)
    assert res.code == 2 and "--replication" in res.err and "madpipe" in res.err


def test_replication_flag_kept_for_madpipe():
    res = run_cli("partition", MLP7, "--devices", "4", "--memory", "100%", "--replication", "--json")
    assert res.code == 0 and any(s["replicas"] > 1 for s in res.json()["stages"])


# ---------------------------------------------------------------------------- 7. count options
@pytest.mark.parametrize(("solver", "option"), [("dag", "max_states"), ("dag-pipedream", "max_states"),
                                                ("interleave", "max_stages"), ("interleave-dp", "max_states"),
                                                ("interleave-dp", "max_stages")])
def test_count_options_must_be_positive(solver, option):
    res = run_cli("partition", MLP7, "--devices", "2", "--memory", "100%", "--solver", solver,
                  "--option", f"{option}=0")
    assert res.code == 2 and f"--option {option}" in res.err


def test_dag_solver_refuses_zero_max_states():
    from memsched.solvers.pipeline.dag_dp import solve_dag

    with pytest.raises(InputError, match="max_states"):
        solve_dag(load(str(MLP7)), None, devices=2, max_states=0)


# ---------------------------------------------------------------------------- 8. the docs' chain example
def test_docs_chain_example_is_labelled_truthfully():
    text = (ROOT / "docs" / "pipeline.md").read_text()
    blocks = list(re.finditer(r"```json\n(.*?)```", text, re.S))
    chain_blocks = [b for b in blocks if '"memsched.chain/1"' in b.group(1)]
    assert chain_blocks
    for block in chain_blocks:
        data = json.loads(block.group(1))
        inst = from_chain_json(block.group(1))  # a valid chain file
        label = text[max(0, block.start() - 300):block.start()]
        named = re.search(r"Example `(solvers/data/pipeline/[^`]+)`:\s*$", label)
        if named:  # "Example FILE:" claims the block is that file
            assert json.loads((ROOT / named.group(1)).read_text())["name"] == data["name"]
        layers = re.search(r"(\d+)-layer chain", label)
        assert named or layers, "the example's label names neither its file nor its size"
        if layers:
            assert int(layers.group(1)) == inst.length


@pytest.mark.parametrize("solver, key, value", [
    ("interleave", "max_stages", 0), ("interleave-dp", "max_states", 0), ("interleave-dp", "max_stages", -2),
    ("interleave-cpsat", "max_stages", 0)])
def test_interleave_counts_below_one_are_refused_in_python(solver, key, value):
    """0 is not "the default" in Python either (it was read as one through ``value or default``)."""
    import numpy as np
    from memsched.solvers.pipeline.generate import random_pipeline

    inst = random_pipeline(np.random.default_rng(0), 6)
    with pytest.raises(InputError, match="must be an integer >= 1"):
        registry.solve("pipeline", inst, solver, 10**12, devices=2, time_limit=3, **{key: value})
