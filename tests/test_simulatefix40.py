"""Schedule reading shared by `memsched.simulate` / `memsched.plot` and ``memsched simulate`` (fix 40).

1. A graph's plain list names nodes by id, as a schedule file's ``sequence`` does (it meant node
   indices in Python: a solver's own ``schedule.sequence`` replayed "invalid" on a file whose ids are
   not 0..n-1); an id naming no node is an `InputError` naming it.
2. A partition recording a latency but no bandwidth is refused by the Python API as by the CLI.
3. Inside a ``solve --json`` / ``partition --json`` result, errors name ``schedule.FIELD``; a
   partition's ``format`` is checked; "a offload instance" reads "an offload instance".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")

from conftest import write_file as _write

import memsched  # noqa: E402

TINY = memsched.data_path("examples", "tiny.json")
PIPE = memsched.data_path("pipeline", "mlp7.chain.json")  # 7 layers


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsched", *map(str, args)], capture_output=True, text=True,
                          timeout=120)




@pytest.fixture
def renumbered(tmp_path: Path) -> Path:
    """A 4-node training graph whose ids (3, 2, 1, 0) are not its indices (0, 1, 2, 3)."""
    nodes = [{"id": 3, "cost_cpu": 1.0, "cost_ram": 4, "name": "f0", "backward": False},
             {"id": 2, "cost_cpu": 1.0, "cost_ram": 4, "name": "loss", "backward": True},
             {"id": 1, "cost_cpu": 2.0, "cost_ram": 4, "name": "b0", "backward": True},
             {"id": 0, "cost_cpu": 0.5, "cost_ram": 2, "name": "b_in", "backward": True}]
    links = [{"source": 3, "target": 2}, {"source": 3, "target": 1}, {"source": 2, "target": 1},
             {"source": 1, "target": 0}]
    return _write(tmp_path, "graph.json", {"directed": True, "multigraph": False, "graph": {"name": "renumbered"},
                                           "nodes": nodes, "links": links})


# ---------------------------------------------------------------------------- 1. graph lists are node ids
def test_a_plain_graph_list_is_node_ids_as_in_a_schedule_file(renumbered: Path, tmp_path: Path) -> None:
    graph = memsched.load(renumbered)
    sequence = [3, 2, 3, 1, 0]  # recomputes f0 (id 3) before b0
    from_list = memsched.simulate(graph, sequence)
    assert from_list.status == "valid", from_list.message
    from_file = memsched.simulate(graph, _write(tmp_path, "bare.json", sequence))
    assert from_file.status == "valid"
    assert (from_list.makespan, from_list.peak_memory) == (from_file.makespan, from_file.peak_memory) == (5.5, 12)
    assert from_list.to_json()["schedule"]["sequence"] == sequence
    cli = _cli("simulate", renumbered, tmp_path / "bare.json", "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["makespan"] == from_list.makespan
    assert memsched.plot(graph, sequence) is not None  # drawn from the same reading


def test_a_solvers_own_sequence_replays_as_a_plain_list(renumbered: Path) -> None:
    graph = memsched.load(renumbered)
    solved = memsched.solve(graph, "100%", solver="checkpoint-all")
    replay = memsched.simulate(graph, list(solved.raw.schedule.sequence))
    assert replay.status == "valid" and replay.makespan == solved.makespan == 4.5


@pytest.mark.parametrize("sequence, shown", [([3, 2, 3, 1, 0, 7], "unknown node 7"), ([3, 2, 1.5], "unknown node 1.5"),
                                             ([True], "got True")])
def test_a_plain_graph_list_naming_no_node_is_an_input_error(renumbered: Path, sequence: list[Any],
                                                             shown: str) -> None:
    for call in (memsched.simulate, memsched.plot):
        with pytest.raises(memsched.InputError) as err:
            call(renumbered, sequence)
        assert err.value.field == "schedule" and shown in str(err.value) and "node ids" in str(err.value)


def test_an_unknown_id_in_a_wrapped_graph_schedule_names_schedule_sequence(renumbered: Path, tmp_path: Path) -> None:
    result = {"problem": "graph", "status": "optimal",
              "schedule": {"format": "memsched.schedule/1", "problem": "graph", "sequence": [3, 2, 9]}}
    path = _write(tmp_path, "res.json", result)
    with pytest.raises(memsched.InputError) as err:
        memsched.simulate(renumbered, path)
    assert err.value.field == "schedule.sequence" and "unknown node 9" in str(err.value)
    result["schedule"]["format"] = "x"
    cli = _cli("simulate", renumbered, _write(tmp_path, "fmt.json", result))
    assert cli.returncode == 2 and "fmt.json: schedule.format: expected 'memsched.schedule/1'" in cli.stderr


# ---------------------------------------------------------------------------- 2. a latency needs a bandwidth
def _partition(**machine: Any) -> dict[str, Any]:
    return {"format": "memsched.partition/1", "schedule": "1f1b",
            "stages": [{"first_layer": 0, "last_layer": 2}, {"first_layer": 3, "last_layer": 6}], **machine}


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_partition_with_a_latency_and_no_bandwidth_is_refused_everywhere(tmp_path: Path, wrapped: bool) -> None:
    part = _partition(weight_factor=4.0, bandwidth=None, latency=0.01)
    data = {"problem": "pipeline", "schedule": part} if wrapped else part
    field = "schedule.latency" if wrapped else "latency"
    path = _write(tmp_path, "lat.json", data)
    for call in (memsched.simulate, memsched.plot):
        for form in (path, data):
            with pytest.raises(memsched.InputError, match="a latency needs a bandwidth") as err:
                call(PIPE, form)
            assert err.value.field == field
        with pytest.raises(memsched.InputError) as err:
            call(PIPE, path)
        assert err.value.path == str(path)
    for command in ("simulate", "plot"):
        extra = ["-o", str(tmp_path / "fig.png")] if command == "plot" else []
        cli = _cli(command, PIPE, path, *extra)
        assert cli.returncode == 2 and f"lat.json: {field}: a latency needs a bandwidth" in cli.stderr
    with_link = _write(tmp_path, "link.json", _partition(bandwidth=1e9, latency=0.01))
    assert memsched.simulate(PIPE, with_link).status == "valid"


# ---------------------------------------------------------------------------- 3. field names
def _chain_result() -> dict[str, Any]:
    return memsched.solve(TINY, "100%").to_json()


@pytest.mark.parametrize("change, field", [
    (lambda r: r["schedule"].update(format="x"), "schedule.format"),
    (lambda r: r["schedule"].update(length=99), "schedule.length"),
    (lambda r: r["schedule"]["ops"].__setitem__(1, {"op": "X"}), "schedule.ops[1]"),
    (lambda r: r["schedule"]["ops"].__setitem__(1, {"op": "B", "stage": 99}), "schedule.ops[1]"),
    (lambda r: r.__setitem__("schedule", "abc"), "schedule"),
])
def test_errors_inside_a_solve_result_name_the_schedules_field(tmp_path: Path, change: Any, field: str) -> None:
    result = _chain_result()
    change(result)
    path = _write(tmp_path, "res.json", result)
    with pytest.raises(memsched.InputError) as err:
        memsched.simulate(TINY, path)
    assert err.value.field == field
    cli = _cli("simulate", TINY, path)
    assert cli.returncode == 2 and f"res.json: {field}: " in cli.stderr and len(cli.stderr.splitlines()) == 1


def test_errors_inside_a_partition_result_name_the_schedules_field(tmp_path: Path) -> None:
    part = _partition()
    part["stages"][1]["replicas"] = 0
    path = _write(tmp_path, "res.json", {"problem": "pipeline", "schedule": part})
    with pytest.raises(memsched.InputError) as err:
        memsched.simulate(PIPE, path)
    assert err.value.field == "schedule.stages[1].replicas"
    cli = _cli("simulate", PIPE, path)
    assert cli.returncode == 2 and "res.json: schedule.stages[1].replicas: " in cli.stderr


@pytest.mark.parametrize("fmt", ["memsched.partition/9", "bogus", "memsched.schedule/1"])
@pytest.mark.parametrize("wrapped", [False, True])
def test_a_partitions_format_is_checked(tmp_path: Path, fmt: str, wrapped: bool) -> None:
    part = {**_partition(), "format": fmt}
    field = "schedule.format" if wrapped else "format"
    path = _write(tmp_path, "part.json", {"problem": "pipeline", "schedule": part} if wrapped else part)
    with pytest.raises(memsched.InputError, match="expected 'memsched.partition/1'") as err:
        memsched.simulate(PIPE, path, problem="pipeline")
    assert err.value.field == field
    cli = _cli("simulate", PIPE, path)
    assert cli.returncode == 2 and cli.stdout == "" and len(cli.stderr.splitlines()) == 1
    assert f"part.json: {field}: expected 'memsched.partition/1'" in cli.stderr


def test_a_partition_result_on_a_chain_reader_names_schedule_format(tmp_path: Path) -> None:
    join = memsched.data_path("join", "tiny.json")
    path = _write(tmp_path, "res.json", {"problem": "pipeline", "schedule": _partition()})
    with pytest.raises(memsched.InputError) as err:
        memsched.simulate(join, path, problem="join")
    assert err.value.field == "schedule.format" and "memsched.partition/1" in str(err.value)


def test_a_join_schedule_on_an_offloading_instance_says_an_offload_instance(tmp_path: Path) -> None:
    path = _write(tmp_path, "join.json", {"format": "memsched.schedule/1", "problem": "join", "ops": []})
    cli = _cli("simulate", TINY, path, "--bandwidth", "1GB/s")
    assert cli.returncode == 2 and "but the instance is an offload instance" in cli.stderr
