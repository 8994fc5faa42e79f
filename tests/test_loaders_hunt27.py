"""Hunt 27, instance loaders: every malformed file is a one-line `InputError` naming the file and
the field (CLI exit 2), and the 1 PiB size limit is compared in bytes.

1. ``host_link.bandwidth`` / ``latency`` as integers beyond float range (10**400, 2**1024);
2. a chain file read as a pipeline parses its JSON with `jsonio.parse_json` (huge numbers, deep nesting);
3. ``graph.meta.units`` validated as a chain's ``meta.units``; ``meta.units.memory`` names a unit;
4. the 1 PiB limit (per value and summed over the file) in bytes: size x bytes per memory unit;
5. a join branch's ``name`` is a string (or an integer, read as its text), like a stage's;
6. a PipeDream ``activation_size`` list and ``meta.param_sizes`` summed under 1 PiB;
7. docs/graph.md states the 1e-9 tolerance of the graph sizes' rounding up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import memsched.solvers as solvers_pkg
import pytest
from conftest import write_file as _write
from memsched.solvers.chain.instance import Chain
from memsched.solvers.errors import InputError
from memsched.solvers.graph.instance import Graph
from memsched.solvers.join.instance import Join
from memsched.solvers.offload.instance import OffloadInstance
from memsched.solvers.pipeline import instance as pipeline_instance

DATA = Path(solvers_pkg.__file__).resolve().parent / "data"
TINY = DATA / "examples" / "tiny.json"
MLP7 = DATA / "pipeline" / "mlp7.chain.json"
DOCS = Path(__file__).resolve().parent.parent / "docs"
PIB = 2**50


def _tiny() -> dict[str, Any]:
    return json.loads(TINY.read_text())




def _graph(meta: dict[str, Any] | None = None, cost_ram: float = 4, workspace: float | None = None) -> dict[str, Any]:
    """A 3-node graph (forward, loss, backward) whose first node has `cost_ram` and `workspace`."""
    first: dict[str, Any] = {"id": 0, "cost_cpu": 1.0, "cost_ram": cost_ram, "name": "f0", "backward": False}
    if workspace is not None:
        first["workspace"] = workspace
    attrs: dict[str, Any] = {"name": "g", "order": [0, 1, 2]}
    if meta is not None:
        attrs["meta"] = meta
    return {"directed": True, "multigraph": False, "graph": attrs,
            "nodes": [first, {"id": 1, "cost_cpu": 1.0, "cost_ram": 2, "name": "loss", "backward": True},
                      {"id": 2, "cost_cpu": 2.0, "cost_ram": 4, "name": "b0", "backward": True}],
            "links": [{"source": 0, "target": 1}, {"source": 0, "target": 2}, {"source": 1, "target": 2}]}


def _join(name: Any = "left", unit: str = "bytes", size: int = 10) -> dict[str, Any]:
    stage = {"fwd_time": 1.0, "bwd_time": 2.0, "out_size": size, "tape_size": size, "fwd_overhead": 0,
             "bwd_overhead": 0}
    return {"format": "memsched.join/1", "name": "j", "meta": {"units": {"time": "ms", "memory": unit}},
            "branches": [{"name": name, "input_size": 4, "stages": [dict(stage)]},
                         {"name": "right", "input_size": 4, "stages": [dict(stage)]}],
            "loss": {"bwd_time": 1.0, "bwd_overhead": 0}}


# ---------------------------------------------------------------------------- 1. host link integers
@pytest.mark.parametrize("link, field", [({"bandwidth": 10**400}, "host_link.bandwidth"),
                                         ({"bandwidth": -(10**400)}, "host_link.bandwidth"),
                                         ({"bandwidth": 1e9, "latency": 2**1024}, "host_link.latency")])
def test_host_link_integer_beyond_float_range_is_input_error(tmp_path: Path, link: dict[str, Any], field: str) -> None:
    path = _write(tmp_path, "o.json", {**_tiny(), "host_link": link})
    with pytest.raises(InputError) as err:
        OffloadInstance.load(path)
    assert err.value.field == field and str(path) in str(err.value) and "digits" in str(err.value)


def test_host_link_integer_too_long_to_print_is_input_error() -> None:
    with pytest.raises(InputError) as err:
        OffloadInstance(Chain.load(TINY), 10**5000)  # repr() refuses integers of more than 4300 digits
    assert err.value.field == "host_link.bandwidth"


def test_host_link_integer_in_range_is_kept_as_a_float(tmp_path: Path) -> None:
    path = _write(tmp_path, "o.json", {**_tiny(), "host_link": {"bandwidth": 12 * 10**9, "latency": 0}})
    inst = OffloadInstance.load(path)
    assert inst.bandwidth == 12e9 and isinstance(inst.bandwidth, float) and inst.latency == 0.0


# ---------------------------------------------------------------------------- 2. pipeline JSON
def _mlp7_with(extra: str) -> str:
    text = json.dumps(json.loads(MLP7.read_text()))
    return text[:-1] + ', "x": ' + extra + "}"


@pytest.mark.parametrize("extra, words", [("1" * 5000, "4300 digits"), ("[" * 100000 + "]" * 100000, "nested"),
                                          ("[1, }", "line 1")])
def test_pipeline_from_chain_json_bad_json_is_input_error(tmp_path: Path, extra: str, words: str) -> None:
    path = _write(tmp_path, "p.json", _mlp7_with(extra))
    for load in (pipeline_instance.load, lambda p: pipeline_instance.from_chain_json(p.read_text(), path=str(p))):
        with pytest.raises(InputError) as err:
            load(path)
        assert str(path) in str(err.value) and words in str(err.value)


def test_parse_json_is_shared_by_read_json() -> None:
    from memsched.solvers.jsonio import parse_json

    assert parse_json('{"a": [1, 2.5]}', "x.json") == {"a": [1, 2.5]}
    with pytest.raises(InputError, match="x.json: invalid JSON: a number of more than 4300 digits"):
        parse_json("1" * 5000, "x.json")


# ---------------------------------------------------------------------------- 3. units
@pytest.mark.parametrize("units, field", [("bytes", "graph.meta.units"), ([], "graph.meta.units"),
                                          ({"time": "hours"}, "graph.meta.units.time"),
                                          ({"time": 3}, "graph.meta.units.time"),
                                          ({"memory": 5}, "graph.meta.units.memory"),
                                          ({"memory": ""}, "graph.meta.units.memory"),
                                          ({"memory": "5"}, "graph.meta.units.memory"),
                                          ({"memory": ["KiB"]}, "graph.meta.units.memory")])
def test_graph_units_are_checked_as_a_chains(units: Any, field: str) -> None:
    with pytest.raises(InputError) as err:
        Graph.from_dict(_graph({"units": units}), path="g.json")
    assert err.value.field == field and "g.json" in str(err.value)


@pytest.mark.parametrize("units", [{"time": "ms", "memory": "bytes"}, {"time": "MFLOP", "memory": "KiB"},
                                   {"memory": "slots"}, {"time": "s", "memory": " mb "}, {}])
def test_graph_valid_units_still_load(units: dict[str, Any]) -> None:
    assert Graph.from_dict(_graph({"units": units}), path="g.json").meta["units"] == units


@pytest.mark.parametrize("unit", [5, 2.0, None, True, ["KiB"], {"b": 1}, "", "  ", "5", "1KiB"])
def test_chain_and_join_memory_unit_must_name_a_unit(unit: Any) -> None:
    data = _tiny()
    data["meta"]["units"]["memory"] = unit
    with pytest.raises(InputError) as err:
        Chain.from_dict(data, path="c.json")
    assert err.value.field == "meta.units.memory" and "c.json" in str(err.value)
    join = _join()
    join["meta"]["units"]["memory"] = unit
    with pytest.raises(InputError) as err:
        Join.from_dict(join, path="j.json")
    assert err.value.field == "meta.units.memory"


@pytest.mark.parametrize("unit", ["bytes", "KiB", "mb", "slots", "words"])
def test_chain_memory_units_that_name_a_unit_still_load(unit: str) -> None:
    data = _tiny()
    data["meta"]["units"]["memory"] = unit
    assert Chain.from_dict(data, path="c.json").meta["units"]["memory"] == unit


# ---------------------------------------------------------------------------- 4. 1 PiB in bytes
def test_chain_size_cap_is_in_bytes() -> None:
    data = _tiny()
    data["meta"]["units"]["memory"] = "GiB"
    data["stages"][0]["out_size"] = data["stages"][0]["tape_size"] = 2**30  # 2^60 bytes each
    with pytest.raises(InputError) as err:
        Chain.from_dict(data, path="c.json")
    assert err.value.field == "stages[0] (conv1).out_size" and "1 PiB" in str(err.value)
    data["stages"][0]["out_size"] = data["stages"][0]["tape_size"] = 2**18  # a quarter of a PiB each: fine
    assert Chain.from_dict(data, path="c.json").xbar[1] == 2**18


@pytest.mark.parametrize("field", ["input_size", "loss"])
def test_chain_input_and_loss_caps_are_in_bytes(field: str) -> None:
    data = _tiny()
    data["meta"]["units"]["memory"] = "TiB"
    if field == "loss":
        data["loss"]["bwd_overhead"] = 2**11  # 2 PiB
    else:
        data["input_size"] = 2**11
    with pytest.raises(InputError) as err:
        Chain.from_dict(data, path="c.json")
    assert err.value.field == ("loss.bwd_overhead" if field == "loss" else "input_size")


def test_chain_total_cap_is_in_bytes() -> None:
    data = _tiny()
    data["meta"]["units"]["memory"] = "KiB"
    for stage in data["stages"]:
        stage["out_size"] = stage["tape_size"] = 2**39  # each 512 TiB: fine alone, not summed
    with pytest.raises(InputError) as err:
        Chain.from_dict(data, path="c.json")
    assert err.value.field == "stages" and "add up" in str(err.value)


def test_a_unit_that_is_no_byte_unit_keeps_the_cap_on_the_numbers() -> None:
    data = _tiny()
    data["meta"]["units"]["memory"] = "slots"
    data["stages"][0]["out_size"] = 2**30
    data["stages"][0]["tape_size"] = 2**30
    assert Chain.from_dict(data, path="c.json").x[1] == 2**30  # 2^30 slots: no byte count to compare
    data["stages"][0]["tape_size"] = PIB + 1
    with pytest.raises(InputError):
        Chain.from_dict(data, path="c.json")


def test_join_caps_are_in_bytes() -> None:
    with pytest.raises(InputError) as err:
        Join.from_dict(_join(unit="MB", size=2 * 10**9), path="j.json")  # 2e15 bytes each
    assert "out_size" in err.value.field and "j.json" in str(err.value)
    with pytest.raises(InputError) as err:
        Join.from_dict(_join(unit="MB", size=3 * 10**8), path="j.json")  # 3e14 each, 4 of them: 1.2e15
    assert err.value.field == "branches" and "add up" in str(err.value)
    assert Join.from_dict(_join(unit="MB", size=10**8), path="j.json").branches[0].x[1] == 10**8


def test_graph_caps_are_in_bytes() -> None:
    with pytest.raises(InputError) as err:
        Graph.from_dict(_graph({"units": {"memory": "KiB"}}, cost_ram=2**41), path="g.json")  # 2 PiB
    assert err.value.field == "node 0: cost_ram"
    with pytest.raises(InputError) as err:
        Graph.from_dict(_graph({"units": {"memory": "GiB"}}, cost_ram=1, workspace=2**21), path="g.json")
    assert err.value.field == "node 0: workspace"
    with pytest.raises(InputError) as err:  # 3/4 PiB of cost_ram and of workspace: each fine, not summed
        Graph.from_dict(_graph({"units": {"memory": "TiB"}}, cost_ram=768, workspace=768), path="g.json")
    assert err.value.field == "nodes" and "add up" in str(err.value)
    g = Graph.from_dict(_graph({"units": {"memory": "TiB"}}, cost_ram=512), path="g.json")
    assert int(g.cost_ram[0]) == 512


# ---------------------------------------------------------------------------- 5. join branch names
@pytest.mark.parametrize("name", [[1], {"a": 1}, True, 1.5, None])
def test_join_branch_name_must_be_a_string(name: Any) -> None:
    with pytest.raises(InputError) as err:
        Join.from_dict(_join(name=name), path="j.json")
    assert err.value.field == "branches[0].name" and "j.json" in str(err.value)


def test_join_branch_name_integer_is_read_as_text() -> None:
    assert Join.from_dict(_join(name=7), path="j.json").branches[0].name == "7"


# ---------------------------------------------------------------------------- 6. PipeDream sums
_PROFILE = """node1 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=786432.0, \
parameter_size=0.000
node2 -- Conv -- forward_compute_time=0.410, backward_compute_time=0.950, activation_size={act}, parameter_size=1792.0
node3 -- ReLU -- forward_compute_time=0.020, backward_compute_time=0.040, activation_size={act3}, parameter_size=0.000
\tnode1 -- node2
\tnode2 -- node3
"""


def test_pipedream_activation_list_sum_is_capped() -> None:
    text = _PROFILE.format(act="[600000000000000; 600000000000000]", act3="4194304.0")
    with pytest.raises(InputError) as err:
        pipeline_instance.from_graph_txt(text, path="p.graph.txt")
    assert err.value.field == "line 2: activation_size" and "p.graph.txt" in str(err.value)


def test_pipedream_file_sum_is_capped() -> None:
    text = _PROFILE.format(act="600000000000000", act3="600000000000000")
    with pytest.raises(InputError) as err:
        pipeline_instance.from_graph_txt(text, path="p.graph.txt")
    assert err.value.field == "line 3" and "add up" in str(err.value)
    ok = pipeline_instance.from_graph_txt(_PROFILE.format(act="[1000; 24]", act3="8"), path="p.graph.txt")
    assert list(ok.act) == [1024, 8]


def test_param_sizes_sum_is_capped(tmp_path: Path) -> None:
    data = json.loads(MLP7.read_text())
    L = len(data["stages"])
    data["meta"]["param_sizes"] = [PIB // 4] * L  # each fine, summed far above 1 PiB
    path = _write(tmp_path, "p.json", data)
    with pytest.raises(InputError) as err:
        pipeline_instance.load(path)
    assert err.value.field == "meta.param_sizes" and str(path) in str(err.value)
    data["meta"]["param_sizes"] = [1000] * L
    assert list(pipeline_instance.load(_write(tmp_path, "q.json", data)).params) == [1000] * L


# ---------------------------------------------------------------------------- 7. rounding documented
def test_graph_rounding_tolerance_is_documented() -> None:
    g = Graph.from_dict(_graph(cost_ram=4.0000000001, workspace=1e-10), path="g.json")
    assert int(g.cost_ram[0]) == 4 and int(g.workspace[0]) == 0  # unchanged: committed instances rely on it
    assert int(Graph.from_dict(_graph(cost_ram=4.5), path="g.json").cost_ram[0]) == 5
    text = (DOCS / "graph.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `nodes[j].cost_ram`"))
    assert "10^{-9}" in row and "4.0000000001 gives 4" in row
