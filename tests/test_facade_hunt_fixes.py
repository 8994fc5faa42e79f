"""Fixes from the facade hunt: `memsched run FILE` runs the network at the sizes FILE was profiled at
(a contradicting size, or an input of other bytes, is bad input); `memsched run` checks its budget
before it builds or writes anything; `memsched.profile(out=)` checks `out` first; `max-batch` prints
nothing before its sizes are checked; `memsched.run(instance=PATH)` reads the file's own problem;
`memsched.simulate` refuses a schedule of another length in every form; `memsched.sweep` of a
misspelt config name says so."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import EXAMPLES, ROOT, RunReached, run_cli

import memsched

torch = pytest.importorskip("torch")

#: a tiny ResNet-18: 6 stages with depth 1, profiled in about a second
TINY = {"batch": 2, "image_size": 32, "width": 4, "depth": 1}
TINY_ARGS = ["--batch", "2", "--image-size", "32", "--width", "4", "--depth", "1"]
FAST = ["--device", "cpu", "--time-repeats", "1", "--no-independent"]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    """A chain file of the tiny ResNet-18 (batch 2, 32 px, width 4, depth 1)."""
    path = tmp_path_factory.mktemp("facade") / "r18.json"
    res = run_cli("profile", "resnet18", *TINY_ARGS, "--device", "cpu", "--repeats", "1", "-o", path)
    assert res.code == 0, res.err
    return path


def _one_line_error(res, field: str) -> None:
    assert res.code == 2, (res.out, res.err)
    assert f"{field}:" in res.err and "\n" not in res.err.strip(), res.err


# ---------------------------------------------------------------------------- 1. sizes of an instance file
def test_run_instance_file_runs_at_its_profiled_sizes(profiled):
    res = run_cli("run", profiled, "--budget", "100%", "--solver", "store-all", "--json", *FAST)
    assert res.code == 0, res.err
    out = res.json()
    assert out["instance"] == json.loads(profiled.read_text())["name"] == "resnet18-b2-32-w4-d1"
    assert out["grad_check"] is True
    assert out["measured"]["peak_memory"] <= 1.01 * out["predicted"]["peak_memory"] + 4096


@pytest.mark.parametrize("args, field", [
    (["--batch", "4"], "--batch"),
    (["--image-size", "64"], "--image-size"),
    (["--width", "8"], "--width"),
])
def test_run_instance_file_refuses_a_size_that_contradicts_it(profiled, args, field):
    res = run_cli("run", profiled, "--budget", "100%", "--solver", "store-all", *args, *FAST)
    _one_line_error(res, field)
    assert "profiled at" in res.err


def test_run_with_chain_refuses_other_sizes(profiled):
    """`run resnet18 --chain FILE` at another image side: same stage count, another network."""
    res = run_cli("run", "resnet18", "--chain", profiled, "--budget", "100%", "--solver", "store-all",
                  "--batch", "2", "--image-size", "64", "--width", "4", "--depth", "1", *FAST)
    _one_line_error(res, "--image-size")


def test_run_refuses_a_chain_profiled_on_another_input(profiled, tmp_path):
    """A chain without its batch in the meta: the input built at the default batch (32) has other
    bytes than the profiled one (x[0]), which is bad input, not a prediction for another network."""
    data = json.loads(profiled.read_text())
    del data["meta"]["batch"]
    path = tmp_path / "nobatch.json"
    path.write_text(json.dumps(data))
    res = run_cli("run", "resnet18", "--chain", path, "--budget", "100%", "--solver", "store-all",
                  "--image-size", "32", "--width", "4", "--depth", "1", *FAST)
    _one_line_error(res, "--chain")
    assert "bytes" in res.err


def test_python_run_takes_and_checks_the_instance_sizes(profiled):
    out = memsched.run("resnet18", "100%", "store-all", instance=str(profiled), device="cpu", time_repeats=1)
    assert out["instance"] == "resnet18-b2-32-w4-d1" and out.grad_check is True
    with pytest.raises(memsched.InputError, match="profiled at batch 2") as err:
        memsched.run("resnet18", "100%", "store-all", chain=memsched.load(profiled), device="cpu", batch=4)
    assert err.value.field == "batch"


def test_instance_sizes_of_a_graph_leave_its_granularity():
    from memsched.models.run import instance_sizes

    graph = SimpleNamespace(meta={"model": "resnet18", "batch": 2, "image_size": 32, "granularity": "op",
                                  "depth": None})
    assert instance_sizes(graph, "resnet18", {"batch": None, "seed": 0}, "graph") == \
        {"batch": 2, "image_size": 32, "seed": 0}
    assert instance_sizes(graph, "gpt2", {"batch": 4}, "graph") == {"batch": 4}  # profiled from another network
    chain = SimpleNamespace(meta={"model": "resnet18", "image_size": "32x32"})
    assert instance_sizes(chain, "resnet18", {"image_size": (32, 32)}, "chain")["granularity"] == "block"
    with pytest.raises(memsched.InputError, match="granularity block"):
        instance_sizes(chain, "resnet18", {"granularity": "layer"}, "chain")
    join = SimpleNamespace(meta={"model": "siamese", "batch": 2, "embed_dim": 8, "dtype": "float32"})
    assert instance_sizes(join, "siamese", {}, "join") == {"batch": 2, "embed_dim": 8, "dtype": "float32"}


# ---------------------------------------------------------------------------- 2. the budget first
def test_run_checks_the_budget_before_importing_torch(monkeypatch, tmp_path):
    import memsched.experiments.commands.run as run_command

    def no_torch() -> None:
        raise AssertionError("torch imported before the budget was checked")

    monkeypatch.setattr(run_command, "_import_models", no_torch)
    for budget in ("abc", "-5", "nan", "1e400", "x%"):
        res = run_cli("run", "resnet18", "--budget", budget, *TINY_ARGS, *FAST)
        _one_line_error(res, "--budget")


def test_run_with_a_bad_budget_writes_no_profile_file(tmp_path):
    keep = tmp_path / "keep.json"
    keep.write_text("keep")
    res = run_cli("run", "resnet18", "--budget", "abc", *TINY_ARGS, *FAST, "--profile-file", keep)
    _one_line_error(res, "--budget")
    assert keep.read_text() == "keep"


# ---------------------------------------------------------------------------- 3. profile(out=)
@pytest.mark.parametrize("out, match", [
    (5, "must be the path of a file"), (True, "must be the path of a file"), (b"x.json", "must be the path"),
    ("DIR", "is a folder"), ("DIR/missing/x.json", "does not exist"),
])
def test_profile_checks_out_before_profiling(monkeypatch, tmp_path, out, match):
    import memsched.models.chain.profiler as profiler

    def never(*args, **kwargs):
        raise AssertionError("profiled before out was checked")

    monkeypatch.setattr(profiler, "profile_model", never)
    monkeypatch.setattr(profiler, "profile_chain", never)
    monkeypatch.chdir(tmp_path)
    if isinstance(out, str):
        out = out.replace("DIR", str(tmp_path))
    with pytest.raises(memsched.InputError, match=match) as err:
        memsched.profile("resnet18", out=out, repeats=1, **TINY)
    assert err.value.field == "out" and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- 4. max-batch
def test_max_batch_names_vary_and_prints_nothing_before_its_sizes_are_checked():
    res = run_cli("max-batch", "lstm", "--memory", "1GB", "--vary", "image-size")
    _one_line_error(res, "--vary image-size")
    assert res.out == ""
    res = run_cli("max-batch", "resnet18", "--memory", "1GB", "--seq-len", "5")
    _one_line_error(res, "--seq-len")
    assert res.out == ""


# ---------------------------------------------------------------------------- 5. run(instance=PATH)
def test_run_reads_an_instance_path_as_its_own_problem(captured_run, tmp_path):
    graph = ROOT / "solvers" / "data" / "graphs" / "linear10.json"
    for given in (str(graph), graph):
        with pytest.raises(RunReached):
            memsched.run("resnet18", "90%", instance=given, **TINY)
        assert captured_run[-1]["problem"] == "graph" and memsched.problem_of(captured_run[-1]["instance"]) == "graph"
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["host_link"] = {"bandwidth": 2e9, "latency": 0.25}
    linked = tmp_path / "linked.json"
    linked.write_text(json.dumps(data))
    with pytest.raises(RunReached):
        memsched.run("resnet18", "90%", instance=str(linked), **TINY)
    call = captured_run[-1]
    assert call["problem"] == "offload" and call["bandwidth"] == 2e9 and call["latency"] == 0.25
    assert memsched.problem_of(call["instance"]) == "chain"
    with pytest.raises(memsched.InputError, match="a graph instance cannot be run as chain") as err:
        memsched.run("resnet18", "90%", problem="chain", instance=str(graph), **TINY)
    assert err.value.field == "instance"


# ---------------------------------------------------------------------------- 6. simulate, length
def test_simulate_refuses_a_schedule_of_another_length_in_every_form():
    big, small = memsched.load(EXAMPLES / "cnn12.json"), memsched.load(EXAMPLES / "tiny.json")
    r12 = memsched.solve(big, "60%")
    for form in (r12, r12.schedule, r12.to_json()):
        with pytest.raises(memsched.InputError, match="the schedule is for length 12 but the instance has 4") as err:
            memsched.simulate(small, form)
        assert err.value.field == ("schedule.length" if isinstance(form, dict) else "length")  # in a result object
    join = memsched.load(ROOT / "solvers" / "data" / "join" / "tiny.json")
    other = memsched.load(ROOT / "solvers" / "data" / "join" / "siamese8.json")
    result = memsched.solve(other, "100%")  # branches of 8 and 8 stages; tiny's are 2 and 3
    for form in (result, result.schedule):
        with pytest.raises(memsched.InputError, match="the schedule is for lengths") as err:
            memsched.simulate(join, form)
        assert err.value.field == "lengths"


# ---------------------------------------------------------------------------- 7. sweep of a misspelt config
def test_sweep_of_an_unknown_config_name_says_so():
    with pytest.raises(memsched.InputError, match="no sweep config named 'fig_a_chainz'") as err:
        memsched.sweep("fig_a_chainz")
    assert err.value.field == "target" and "fig_a_chains" in str(err.value)


# ------------------------------------------------------------------ graph and instance files given as MODEL
def test_run_a_graph_of_another_network_is_bad_input(tmp_path):
    """A graph whose nodes are not the network's: one line naming --chain, exit 2 (was an internal error, 3)."""
    from memsched.solvers.graph.generate import linear_graph

    path = tmp_path / "lin5.json"
    linear_graph(5).save(str(path))
    res = run_cli("run", "resnet18", "--problem", "graph", "--chain", path, "--budget", "100%",
                  "--solver", "checkpoint-all", *TINY_ARGS, *FAST)
    _one_line_error(res, "--chain")
    assert "forward nodes the network does not compute" in res.err


def test_run_names_the_instance_file_given_as_model():
    """A chain file given as MODEL that does not fit the network is named by its path, not as --chain."""
    res = run_cli("run", EXAMPLES / "tiny.json", "--model", "resnet18", "--budget", "85%", *TINY_ARGS, *FAST)
    _one_line_error(res, str(EXAMPLES / "tiny.json"))
    assert "--chain" not in res.err and "stages" in res.err


def test_run_reads_a_graph_file_given_as_model_as_a_graph(tmp_path):
    """`memsched run GRAPH.json` runs the graph problem without --problem, at the graph's sizes; a graph
    exported with ram 'output' (node sizes without autograd's saved tensors) gets a note saying why its
    prediction under-counts the step's memory."""
    path = tmp_path / "g.json"
    res = run_cli("export-graph", "resnet18", *TINY_ARGS, "--device", "cpu", "-o", path)
    assert res.code == 0, res.err
    res = run_cli("run", path, "--budget", "100%", "--solver", "checkpoint-all", "--json", *FAST)
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["problem"] == "graph" and out["grad_check"] is True
    assert "ram 'tape'" in out["note"]


def test_run_refuses_a_pipeline_file_in_one_line():
    path = ROOT / "solvers" / "data" / "pipeline" / "tiny-resnet.graph.txt"
    res = run_cli("run", path, "--model", "resnet18", "--budget", "100%", *TINY_ARGS, *FAST)
    _one_line_error(res, str(path))
    assert "pipeline" in res.err
