"""Facade fixes of round 37.

1. `memsched.simulate(instance, schedule)` and `memsched.plot(instance, schedule)` with ``problem=None``
   read a pipeline partition given as a JSON file or dict (a `Result.to_json()`, its ``schedule``, the
   output of ``memsched partition --json``) as ``memsched simulate INSTANCE FILE`` does: the partition
   makes the chain file a pipeline, replayed on the machine the partition records. They raised
   "format: expected 'memsched.schedule/1'" (the chain file was read as a chain).
2. `Result.to_json()` is JSON-native, the object ``memsched solve --json`` prints: join ``dp``'s
   ``ending`` had int keys (``{1: 'tape'}`` where the command prints ``{"1": "tape"}``).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")

from memsched.solvers.errors import InputError  # noqa: E402

import memsched  # noqa: E402

MLP7 = str(memsched.data_path("pipeline", "mlp7.chain.json"))
CNN12 = str(memsched.data_path("examples", "cnn12.json"))
SIAMESE8 = str(memsched.data_path("join", "siamese8.json"))
#: the machine the partitions are solved on: not the defaults (weights x 4, no link), so that
#: a replay on the default machine has another peak
MACHINE = {"weight_factor": 2.0, "bandwidth": 1e9, "latency": 1e-4}


def _cli(*argv: str) -> tuple[int, str, str]:
    """``memsched ARGV`` in-process: (exit code, stdout, stderr)."""
    from memsched.experiments.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def partition_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Partitions of mlp7 on 2 devices at 90% on `MACHINE`, as files: the API's ``Result.to_json()``
    ("result"), its ``schedule`` ("bare"), and ``memsched partition --json``'s output ("partition")."""
    tmp = tmp_path_factory.mktemp("part37")
    inst = memsched.load(MLP7, problem="pipeline").with_machine(**MACHINE)
    result = memsched.solve(inst, "90%", "madpipe", devices=2)
    assert result.found
    files = {"result": tmp / "result.json", "bare": tmp / "bare.json", "partition": tmp / "partition.json"}
    files["result"].write_text(json.dumps(result.to_json()))
    files["bare"].write_text(json.dumps(result.to_json()["schedule"]))
    code, out, err = _cli("partition", MLP7, "--devices", "2", "--memory", "90%", "--bandwidth", "1GB/s",
                          "--latency", "0.0001", "--weight-factor", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["schedule"]["format"] == "memsched.partition/1"
    files["partition"].write_text(out)
    return files


def _cli_replay(path: Path) -> dict[str, Any]:
    code, out, err = _cli("simulate", MLP7, str(path), "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("kind", ["result", "bare", "partition"])
@pytest.mark.parametrize("form", ["path", "str", "dict"])
def test_simulate_reads_a_partition_json_on_a_chain_file_as_the_cli(partition_files, kind, form):
    """problem=None: the partition decides (pipeline), and the machine it records is the replay's;
    period and peak are the command line's for the same file."""
    path = partition_files[kind]
    schedule: Any = {"path": path, "str": str(path), "dict": json.loads(path.read_text())}[form]
    want = _cli_replay(path)
    assert want["problem"] == "pipeline" and want["weight_factor"] == MACHINE["weight_factor"]
    got = memsched.simulate(MLP7, schedule)
    assert got.problem == "pipeline" and got.status == "valid"
    assert got.objective == pytest.approx(want["period_file_units"]) and got.peak_memory == want["peak_memory"]
    inst = got.instance
    assert (inst.weight_factor, inst.bandwidth, inst.latency) == (2.0, 1e9, 1e-4)
    explicit = memsched.simulate(MLP7, schedule, problem="pipeline")
    assert explicit.peak_memory == got.peak_memory  # naming the problem replays it on the same machine


def test_simulate_bare_partition_in_a_result_dict(partition_files):
    """The ``schedule`` of a ``memsched partition --json`` output, itself a bare ``memsched.partition/1``."""
    data = json.loads(partition_files["partition"].read_text())["schedule"]
    got = memsched.simulate(MLP7, data)
    assert got.problem == "pipeline"
    assert got.peak_memory == _cli_replay(partition_files["partition"])["peak_memory"]


@pytest.mark.parametrize("kind", ["result", "bare", "partition"])
def test_plot_reads_a_partition_json_on_a_chain_file(partition_files, kind):
    """plot(instance, schedule) and plot(instance, {name: schedule}) read it as simulate does."""
    import matplotlib.pyplot as plt

    path = partition_files[kind]
    for schedule in (path, json.loads(path.read_text()), {"a": str(path), "b": json.loads(path.read_text())}):
        fig = memsched.plot(MLP7, schedule)
        assert fig is not None
        plt.close("all")


def test_chain_schedule_json_with_a_bandwidth_stays_offloading(tmp_path):
    """The schedule's declared problem decides only where the command line lets it: a chain schedule's
    JSON with a bandwidth is still replayed as the offloading schedule that transfers nothing."""
    result = memsched.solve(CNN12, "60%", "rotor")
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(result.to_json()))
    got = memsched.simulate(CNN12, path, bandwidth="12GB/s")
    assert got.problem == "offload" and got.status == "valid"
    assert memsched.simulate(CNN12, path).problem == "chain"


def test_offload_schedule_json_on_a_chain_file_asks_for_a_bandwidth(tmp_path):
    """An offloading schedule's JSON on a chain file without a host link, no bandwidth given: the file is
    read as offloading (as ``memsched simulate`` reads it), whose error asks for a bandwidth."""
    result = memsched.solve(CNN12, "90%", "offload-prefix", bandwidth="12GB/s")
    assert result.found
    path = tmp_path / "offload.json"
    path.write_text(json.dumps(result.to_json()))
    with pytest.raises(InputError, match="bandwidth") as err:
        memsched.simulate(CNN12, path)
    assert err.value.field == "schedule"
    assert memsched.simulate(CNN12, path, bandwidth="12GB/s").status == "valid"


# ---------------------------------------------------------------------------- 2. to_json is JSON-native
def test_join_dp_to_json_is_the_cli_object():
    """``ending`` has the str keys ``memsched solve --json`` prints."""
    result = memsched.solve(SIAMESE8, "60%", "dp")
    out = result.to_json()
    assert out == json.loads(json.dumps(out))
    assert out["ending"] and all(isinstance(k, str) for k in out["ending"])
    code, printed, err = _cli("solve", SIAMESE8, "--budget", "60%", "--solver", "dp", "--json")
    assert code == 0, err
    assert out["ending"] == json.loads(printed)["ending"]


@pytest.mark.parametrize("problem, path, solver, budget, kwargs", [
    ("chain", CNN12, "rotor", "60%", {}),
    ("offload", CNN12, "offload-prefix", "90%", {"bandwidth": "12GB/s"}),
    ("graph", str(memsched.data_path("graphs", "linear10.json")), "checkmate", "60%", {}),
    ("join", str(memsched.data_path("join", "tiny.json")), "cpsat", "100%", {}),
    ("pipeline", MLP7, "madpipe", "60%", {"problem": "pipeline", "devices": 2}),
])
def test_to_json_is_json_native(problem, path, solver, budget, kwargs):
    """``r.to_json()`` equals its own JSON round trip, for a solve and for a replay of it."""
    result = memsched.solve(path, budget, solver, **kwargs)
    assert result.problem == problem and result.found
    out = result.to_json()
    assert out == json.loads(json.dumps(out))
    replay = memsched.simulate(path if problem != "offload" else CNN12, result,
                               **({"bandwidth": "12GB/s"} if problem == "offload" else {}))
    assert replay.to_json() == json.loads(json.dumps(replay.to_json()))


def test_solve_result_to_json_normalises_keys_tuples_and_numpy():
    """`SolveResult.to_json` itself: int keys become str, tuples lists, numpy scalars numbers."""
    import numpy as np
    from memsched.solvers.result import SolveResult

    raw = SolveResult(problem="join", solver="x", status="optimal", objective=1.0,
                      details={"ending": {1: "ck", 0: "tape"}, "pair": (1, 2), "n": np.int64(3)})
    out = raw.to_json()
    assert out["ending"] == {"1": "ck", "0": "tape"} and out["pair"] == [1, 2] and out["n"] == 3
    assert out == json.loads(json.dumps(out))


def test_simulate_a_partition_with_a_bandwidth_replaces_its_link(tmp_path) -> None:
    """`bandwidth` with a partition replaces the link it records, as ``memsched simulate --bandwidth`` does
    (session 44; it was refused as a host link before)."""
    rp = memsched.solve(memsched.data_path("pipeline/mlp7.chain.json"), "60%", solver="madpipe", problem="pipeline",
                        devices=2)
    path = tmp_path / "rp.json"
    path.write_text(json.dumps(rp.to_json()))
    replay = memsched.simulate(memsched.data_path("pipeline/mlp7.chain.json"), str(path), bandwidth=1e8)
    assert replay.problem == "pipeline" and replay.instance.bandwidth == 1e8
