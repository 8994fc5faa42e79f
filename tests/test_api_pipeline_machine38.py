"""Facade fixes of round 38.

1. `memsched.solve` and `memsched.sweep` take a pipeline's machine, ``memsched partition``'s
   ``--bandwidth``, ``--latency`` and ``--weight-factor``, as `bandwidth`, `latency` and `weight_factor`
   (read by the command's own parsers, errors naming the Python argument). Before, `latency` said it
   needed a bandwidth, `bandwidth` said it applied to chain files only, and `weight_factor` was "no
   option" of madpipe: only the undocumented `Pipeline.with_machine` reached the command's answer. A
   chain's `bandwidth` (its host link: an offloading instance) is unchanged.
2. An unknown solver in a list is named by its entry, ``solvers[1]`` (``solver[1]`` in `solve`), as a
   repeated one is, not ``solver``: errors name arguments by their Python names.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import run_cli

import memsched

PIPE = str(memsched.data_path("pipeline", "vgg16-b32.graph.txt"))
CNN12 = str(memsched.data_path("examples", "cnn12.json"))
#: ``memsched partition PIPE --devices 4 --memory 100%`` with this machine: period 206.59 ms
MACHINE_FLAGS = ("--weight-factor", "2", "--bandwidth", "1GB/s", "--latency", "0.001")
MACHINE = {"weight_factor": 2, "bandwidth": "1GB/s", "latency": 0.001}


def _partition_cli(*flags: str) -> dict[str, Any]:
    """The ``memsched partition PIPE --devices 4 --memory 100% FLAGS --json`` object."""
    res = run_cli("partition", PIPE, "--devices", "4", "--memory", "100%", *flags, "--json")
    assert res.code == 0, res.err
    return res.json()


def _stages(partition: dict[str, Any]) -> list[tuple[int, int]]:
    return [(s["first_layer"], s["last_layer"]) for s in partition["stages"]]


def test_solve_pipeline_machine_is_the_partition_command() -> None:
    cli = _partition_cli(*MACHINE_FLAGS)
    result = memsched.solve(PIPE, "100%", devices=4, **MACHINE)
    assert result.status == cli["status"] == "optimal"
    assert result.objective == pytest.approx(cli["period_file_units"], rel=1e-12)
    assert round(result.objective, 2) == 206.59
    assert result.peak_memory == cli["peak_memory"]
    assert _stages(result.to_json()["schedule"]) == _stages(cli["schedule"])
    inst = result.instance
    assert (inst.weight_factor, inst.bandwidth, inst.latency) == (2.0, 1e9, 0.001)
    default = memsched.solve(PIPE, "100%", devices=4)
    assert default.objective < result.objective  # the machine is charged: not the default one


def test_each_machine_argument_alone_matches_its_flag() -> None:
    for kwargs, flags in [({"weight_factor": 2.5}, ("--weight-factor", "2.5")),
                          ({"bandwidth": 2e9}, ("--bandwidth", "2e9")),
                          ({"latency": 0}, ("--latency", "0"))]:  # a zero latency needs no bandwidth, as on the CLI
        cli = _partition_cli(*flags)
        result = memsched.solve(PIPE, "100%", devices=4, **kwargs)
        assert result.objective == pytest.approx(cli["period_file_units"], rel=1e-12), kwargs
        assert result.peak_memory == cli["peak_memory"], kwargs


def test_pipeline_object_and_problem_pipeline_take_the_machine() -> None:
    pipe = memsched.load(PIPE)
    expected = memsched.solve(pipe.with_machine(bandwidth=1e9, weight_factor=2, latency=0.001), "100%", devices=4)
    given = memsched.solve(pipe, "100%", devices=4, **MACHINE)
    assert given.objective == expected.objective
    # a machine argument not given keeps the instance's own (its link, here)
    linked = pipe.with_machine(bandwidth=1e9, latency=0.001)
    kept = memsched.solve(linked, "100%", devices=4, weight_factor=2)
    assert kept.instance.bandwidth == 1e9 and kept.objective == expected.objective
    # a chain file read as a pipeline
    mlp7 = str(memsched.data_path("pipeline", "mlp7.chain.json"))
    cli = run_cli("partition", mlp7, "--devices", "2", "--memory", "100%", *MACHINE_FLAGS, "--json")
    assert cli.code == 0, cli.err
    result = memsched.solve(mlp7, "100%", problem="pipeline", devices=2, **MACHINE)
    assert result.objective == pytest.approx(cli.json()["period_file_units"], rel=1e-12)


def test_sweep_pipeline_machine() -> None:
    cli = _partition_cli(*MACHINE_FLAGS)
    table = memsched.sweep(PIPE, budgets=["100%"], devices=4, **MACHINE)
    assert [row["objective"] for row in table.rows] == [pytest.approx(cli["period_file_units"], rel=1e-12)]


@pytest.mark.parametrize(("kwargs", "field", "words"), [
    ({"latency": 0.001}, "latency", "needs a bandwidth"),
    ({"latency": -1, "bandwidth": 1e9}, "latency", ">= 0"),
    ({"latency": 1e6, "bandwidth": 1e9}, "latency", "<= 86400"),
    ({"latency": "1ms", "bandwidth": 1e9}, "latency", "must be a number"),
    ({"bandwidth": "fast"}, "bandwidth", "cannot read 'fast'"),
    ({"bandwidth": 0}, "bandwidth", "bytes/s"),
    ({"bandwidth": True}, "bandwidth", "not a bandwidth"),
    ({"weight_factor": -2}, "weight_factor", "got -2"),
    ({"weight_factor": math.nan}, "weight_factor", "finite"),
    ({"weight_factor": 10**400}, "weight_factor", r"<= 1e\+15"),
    ({"weight_factor": "2"}, "weight_factor", "must be a number"),
    ({"weight_factor": True}, "weight_factor", "must be a number"),
])
def test_bad_pipeline_machine_names_the_python_argument(kwargs: dict[str, Any], field: str, words: str) -> None:
    for call in (lambda: memsched.solve(PIPE, "100%", devices=4, **kwargs),
                 lambda: memsched.sweep(PIPE, budgets=["100%"], devices=4, **kwargs)):
        with pytest.raises(memsched.InputError, match=words) as info:
            call()
        assert info.value.field == field and "--" not in str(info.value)


def test_weight_factor_is_for_pipelines_only() -> None:
    with pytest.raises(memsched.InputError, match="applies to pipelines, not to a chain") as info:
        memsched.solve(CNN12, "60%", weight_factor=2)
    assert info.value.field == "weight_factor"
    with pytest.raises(memsched.InputError) as info:
        memsched.sweep(CNN12, budgets=["60%"], weight_factor=2)
    assert info.value.field == "weight_factor"


def test_chain_bandwidth_is_still_the_host_link() -> None:
    result = memsched.solve(CNN12, "60%", solver="pofo", bandwidth="12GB/s", latency=0.001)
    assert result.problem == "offload"
    assert (result.instance.bandwidth, result.instance.latency) == (12e9, 0.001)
    cli = run_cli("solve", CNN12, "--budget", "60%", "--solver", "pofo", "--bandwidth", "12GB/s", "--latency", "0.001",
                  "--json")
    assert cli.code == 0, cli.err
    assert result.objective == cli.json()["makespan"]
    with pytest.raises(memsched.InputError, match="needs a bandwidth") as info:
        memsched.solve(CNN12, "60%", latency=0.001)
    assert info.value.field == "latency"


@pytest.mark.parametrize(("call", "field"), [
    (lambda: memsched.sweep(CNN12, budgets=["60%"], solvers=["rotor", "nope"]), "solvers[1]"),
    (lambda: memsched.sweep(CNN12, budgets=["60%"], solvers="nope"), "solvers"),
    (lambda: memsched.solve(CNN12, "60%", solver=["rotor", "nope"]), "solver[1]"),
    (lambda: memsched.solve(CNN12, "60%", solver="nope"), "solver"),
])
def test_unknown_solver_names_the_argument_entry(call: Any, field: str) -> None:
    with pytest.raises(memsched.InputError, match="unknown solver 'nope' for chain") as info:
        call()
    assert info.value.field == field
