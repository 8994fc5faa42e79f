"""`memsched.load` reads a pipeline on the machine `solve` and ``memsched partition`` take
(`bandwidth`, `latency`, `weight_factor`), and refuses a weight factor for other problems."""
from __future__ import annotations

from pathlib import Path

import pytest

import memsched
from memsched import InputError

PIPE = str(memsched.data_path("pipeline", "vgg16-b32.graph.txt"))


def test_a_chain_read_as_a_pipeline_takes_its_machine(examples: Path) -> None:
    pipe = memsched.load(examples / "random10.json", problem="pipeline", bandwidth="12GB/s", latency=1e-5,
                         weight_factor=2)
    assert (pipe.bandwidth, pipe.latency, pipe.weight_factor) == (12e9, 1e-5, 2.0)
    plain = memsched.load(examples / "random10.json", problem="pipeline")
    assert plain.bandwidth is None and plain.weight_factor == 4.0


def test_a_pipedream_file_takes_its_machine_and_solves_as_solve_does() -> None:
    pipe = memsched.load(PIPE, bandwidth="1GB/s", weight_factor=2)
    assert (pipe.bandwidth, pipe.weight_factor) == (1e9, 2.0)
    memory = "80%"
    by_load = memsched.solve(pipe, memory, devices=2)
    by_solve = memsched.solve(PIPE, memory, devices=2, bandwidth="1GB/s", weight_factor=2)
    assert by_load.status == by_solve.status and by_load.makespan == pytest.approx(by_solve.makespan)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"weight_factor": 2}, "weight_factor"),                      # a chain is no pipeline
    ({"problem": "offload", "bandwidth": 1e9, "weight_factor": 2}, "weight_factor"),
    ({"problem": "pipeline", "latency": 1.0}, "latency"),          # a latency needs a bandwidth
    ({"problem": "pipeline", "weight_factor": -1}, "weight_factor"),
    ({"problem": "pipeline", "bandwidth": "fast"}, "bandwidth"),
    ({"problem": "join", "bandwidth": 1e9}, "bandwidth"),
])
def test_bad_machine_arguments_name_the_argument(examples: Path, kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        memsched.load(examples / "random10.json", **kwargs)
    assert err.value.field == field
