"""The Python API takes what the command line takes (session 44, the API-parity hunt):

1. `solve` / `sweep` with `devices` and no problem read a chain file as a pipeline, as ``memsched partition``
   reads it (docs/pipeline.md's own example), and a pipeline-only argument refused for a chain says how to
   ask for a pipeline without naming its field twice;
2. ``memsched profile / run --early-release`` and ``--threads`` are `profile` / `run`'s `early_release` and
   `threads` (torch's threads for the call only), and ``memsched simulate --weight-factor --bandwidth
   --latency`` (a partition replayed on another machine) are `simulate`'s `weight_factor`, `bandwidth`,
   `latency`;
3. an unknown keyword of `simulate`, `load`, `budget` or `reference_peak` is an `InputError` naming it and
   listing the arguments taken, not a bare TypeError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

import memsched

MLP7 = str(memsched.data_path("pipeline", "mlp7.chain.json"))
CNN12 = str(memsched.data_path("examples", "cnn12.json"))
#: a tiny zoo network, profiled in well under a second
LSTM = {"batch": 2, "seq_len": 2, "width": 8}


# ------------------------------------------------------------------ 1. devices reads a chain file as a pipeline
def test_devices_reads_a_chain_file_as_a_pipeline_as_partition_does() -> None:
    mine = memsched.solve(MLP7, 11000000, devices=2)
    named = memsched.solve(MLP7, 11000000, devices=2, problem="pipeline")
    assert mine.problem == "pipeline" and mine.status == named.status == "optimal"
    assert mine.objective == named.objective
    cli = run_cli("partition", MLP7, "--memory", "11000000", "--devices", "2", "--json")
    assert cli.code == 0, cli.err
    assert cli.json()["status"] == mine.status


def test_the_docs_pipeline_machine_example_runs_on_a_chain_file() -> None:
    """docs/pipeline.md: ``memsched.solve(instance, memory, devices=P, weight_factor=2, bandwidth="1GB/s",
    latency=0.001)``: `bandwidth` and `latency` are then the pipeline's links, not a host link."""
    result = memsched.solve(MLP7, "60%", devices=2, weight_factor=2, bandwidth="1GB/s", latency=0.001)
    assert result.problem == "pipeline"
    machine = (result.instance.weight_factor, result.instance.bandwidth, result.instance.latency)
    assert machine == (2.0, 1e9, 0.001)
    rows = memsched.sweep(MLP7, budgets=["60%", "100%"], devices=2, bandwidth="1GB/s").to_pandas()
    assert set(rows["problem"]) == {"pipeline"}


def test_devices_for_a_chain_object_says_how_to_ask_for_a_pipeline() -> None:
    chain = memsched.load(MLP7)
    for call in (lambda: memsched.solve(chain, "60%", devices=2),
                 lambda: memsched.solve(MLP7, "60%", devices=2, problem="chain")):
        with pytest.raises(memsched.InputError) as info:
            call()
        assert info.value.field == "devices"
        assert "devices: devices" not in str(info.value) and "problem='pipeline'" in str(info.value)
    with pytest.raises(memsched.InputError) as info:
        memsched.solve(MLP7, "60%", weight_factor=2, bandwidth="1GB/s")  # no devices: an offloading chain
    assert info.value.field == "weight_factor" and "problem='pipeline'" in str(info.value)


# --------------------------------------------------------------------------- 2. early_release, threads
def test_profile_early_release_measures_the_released_backward_and_threads_are_put_back() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    released = memsched.profile("lstm", repeats=1, early_release=True, threads=1, **LSTM)
    assert released.has_release() and released.meta["clock"] == "thread"  # one thread: the thread's clock
    assert torch.get_num_threads() == before
    assert not memsched.profile("lstm", repeats=1, threads=1, **LSTM).has_release()
    with pytest.raises(memsched.InputError) as info:
        memsched.profile("lstm", early_release=True, problem="graph", **LSTM)
    assert info.value.field == "early_release"
    for bad in (0, "1", 1.5):
        with pytest.raises(memsched.InputError) as info:
            memsched.profile("lstm", threads=bad, **LSTM)
        assert info.value.field == "threads" and "unknown" not in str(info.value)


@pytest.fixture
def run_calls(monkeypatch) -> list[dict[str, Any]]:
    """What `memsched.run` passes to `memsched.models.run.run` (and torch's threads meanwhile), whose
    stand-in answers "infeasible: stub" without running anything."""
    torch = pytest.importorskip("torch")
    import memsched.models.run

    calls: list[dict[str, Any]] = []

    def fake_run(model: Any, budget: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(dict(kwargs, threads=torch.get_num_threads()))
        return {"predicted": None, "status": "infeasible", "message": "stub"}

    monkeypatch.setattr(memsched.models.run, "run", fake_run)
    return calls


def test_run_passes_early_release_and_threads_as_the_command_does(run_calls: list[dict[str, Any]]) -> None:
    import torch

    before = torch.get_num_threads()
    memsched.run("lstm", "90%", early_release=True, threads=1, **LSTM)
    memsched.run("lstm", "90%", **LSTM)
    assert [(c["early_release"], c["threads"]) for c in run_calls] == [(True, 1), (False, before)]
    assert torch.get_num_threads() == before
    cli = run_cli("run", "lstm", "--budget", "90%", "--early-release", "--threads", "1", "--batch", "2",
                  "--seq-len", "2", "--width", "8")
    torch.set_num_threads(before)  # the command sets them for the process
    assert cli.code == 1 and run_calls[-1]["early_release"] is True and run_calls[-1]["threads"] == 1


def test_run_refuses_early_release_where_the_command_does(tmp_path: Path, run_calls: list[dict[str, Any]]) -> None:
    chain = tmp_path / "lstm.json"
    memsched.profile("lstm", repeats=1, out=chain, **LSTM)
    for kwargs in ({"chain": chain}, {"bandwidth": "1GB/s"}, {"problem": "graph"}, {"early_release": 1}):
        with pytest.raises(memsched.InputError) as info:
            memsched.run("lstm", "90%", **{"early_release": True, **kwargs})
        assert info.value.field == "early_release" and "unknown" not in str(info.value), kwargs
    with pytest.raises(memsched.InputError, match="applies to the chain problem") as info:
        memsched.run("siamese", "90%", early_release=True)
    assert info.value.field == "early_release"
    with pytest.raises(memsched.InputError) as info:
        memsched.run("lstm", "90%", threads=0, **LSTM)
    assert info.value.field == "threads" and "unknown" not in str(info.value)
    assert not run_calls


def test_a_tiny_run_releasing_early_on_one_thread() -> None:
    pytest.importorskip("torch")
    result = memsched.run("lstm", "90%", time_repeats=1, repeats=1, early_release=True, threads=1, **LSTM)
    assert result.status == "optimal" and result.data["grad_check"] and result.data["clock"] == "thread"


def test_simulate_replays_a_partition_on_another_machine_as_the_command_does(tmp_path: Path) -> None:
    partition = tmp_path / "p.json"
    solved = run_cli("partition", MLP7, "--devices", "2", "--memory", "11000000", "--bandwidth", "1GB/s", "--json")
    assert solved.code == 0, solved.err
    partition.write_text(solved.out)
    machine = {"weight_factor": 2, "bandwidth": "2GB/s", "latency": 0.001}
    cli = run_cli("simulate", MLP7, partition, "--json", "--weight-factor", "2", "--bandwidth", "2GB/s",
                  "--latency", "0.001")
    assert cli.code == 0, cli.err
    want = cli.json()
    result = memsched.solve(MLP7, 11000000, devices=2, bandwidth="1GB/s")
    for schedule in (str(partition), json.loads(solved.out), result):
        replay = memsched.simulate(MLP7, schedule, **machine)
        assert replay.problem == "pipeline" and replay.status == "valid"
        assert (replay.objective, replay.peak_memory) == (want["period_file_units"], want["peak_memory"])
        assert (replay.instance.weight_factor, replay.instance.bandwidth, replay.instance.latency) == \
            (want["weight_factor"], want["bandwidth"], want["latency"]) == (2.0, 2e9, 0.001)
    assert memsched.simulate(MLP7, str(partition)).instance.weight_factor != 2.0  # the recorded machine otherwise


def test_simulate_machine_arguments_elsewhere() -> None:
    chain = memsched.solve(CNN12, "60%", solver="rotor")
    with pytest.raises(memsched.InputError) as info:
        memsched.simulate(CNN12, chain.to_json(), weight_factor=2)
    assert info.value.field == "weight_factor"
    with pytest.raises(memsched.InputError) as info:
        memsched.simulate(CNN12, chain.to_json(), latency=0.001)  # a host link's latency needs its bandwidth
    assert info.value.field == "latency"
    offloaded = memsched.simulate(CNN12, chain.to_json(), bandwidth="12GB/s", latency=0.001)
    assert offloaded.problem == "offload" and (offloaded.instance.bandwidth, offloaded.instance.latency) == \
        (12e9, 0.001)
    with pytest.raises(memsched.InputError) as info:
        memsched.simulate(MLP7, memsched.solve(MLP7, "100%", devices=2), weight_factor=-1)
    assert info.value.field == "weight_factor"


# --------------------------------------------------------------------------- 3. unknown keywords
@pytest.mark.parametrize("call, name, takes", [
    (lambda: memsched.simulate(CNN12, [], bandwith="1GB/s"), "bandwith", "simulate"),
    (lambda: memsched.load(CNN12, problme="chain"), "problme", "load"),
    (lambda: memsched.budget(CNN12, "50%", problme="chain"), "problme", "budget"),
    (lambda: memsched.reference_peak(CNN12, problme="chain"), "problme", "reference_peak"),
])
def test_an_unknown_keyword_is_an_input_error_naming_it(call: Any, name: str, takes: str) -> None:
    with pytest.raises(memsched.InputError) as info:
        call()
    assert info.value.field == name
    assert f"{takes} takes no argument {name!r}" in str(info.value) and "problem" in str(info.value)
