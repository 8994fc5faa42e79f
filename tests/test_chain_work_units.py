"""Chain files timed in counted work (``meta.units.time = "MFLOP"``, what ``memsched profile
--cost flops`` writes) load and solve as rematerialization instances; offloading and pipelines,
whose transfers over a link in bytes/s need times in seconds, refuse them naming the field
(before, every command refused the file profile had just written: "unknown time unit")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from memsched.solvers.chain.instance import Chain
from memsched.solvers.errors import InputError
from memsched.solvers.offload.instance import OffloadInstance

import memsched


@pytest.fixture
def flops_file(tmp_path: Path) -> Path:
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["meta"] = {**data.get("meta", {}), "units": {"time": "MFLOP"}}
    path = tmp_path / "tiny_flops.json"
    path.write_text(json.dumps(data))
    return path


def test_a_counted_chain_solves_like_a_timed_one(flops_file):
    counted = memsched.solve(flops_file, "80%", solver="rotor")
    timed = memsched.solve(EXAMPLES / "tiny.json", "80%", solver="rotor")
    assert counted.found and counted.makespan == timed.makespan


def test_an_unknown_unit_is_still_refused(tmp_path):
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    data["meta"] = {"units": {"time": "GFLOPS"}}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        Chain.load(path)
    assert err.value.field == "meta.units.time" and "MFLOP" in str(err.value)


def test_offloading_refuses_counted_work(flops_file, cli):
    with pytest.raises(InputError) as err:
        OffloadInstance(Chain.load(flops_file), bandwidth=1e9)
    assert err.value.field == "meta.units.time"
    res = cli("solve", flops_file, "--budget", "80%", "--bandwidth", "12GB/s")
    assert res.code == 2 and "meta.units.time" in res.err and "counts work" in res.err


def test_partitioning_refuses_counted_work(flops_file, cli):
    res = cli("partition", flops_file, "--devices", "2", "--memory", "1GB")
    assert res.code == 2 and "meta.units.time" in res.err and "counts work" in res.err
