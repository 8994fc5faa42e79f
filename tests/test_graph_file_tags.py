"""Graph files: a Moccasin tag that is not a string and a ``graph.order`` with booleans are bad
input naming the field (before: an internal error, and a load that passed with every solve then
failing on a "sequence" the user never wrote)."""
from __future__ import annotations

import json

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.graph.instance import Graph

RL = {"graph": {"node_output_cost_tag": "o", "node_duration_tag": "d"},
      "nodes": [{"name": 0, "o": 1, "d": 1}, {"name": 1, "o": 2, "d": 3}], "links": [{"0": 0, "1": 1}]}


@pytest.mark.parametrize("key, tag", [("node_output_cost_tag", ["o"]), ("node_duration_tag", {}),
                                      ("node_duration_tag", 3)])
def test_a_tag_that_is_not_a_string_is_refused(key, tag):
    data = json.loads(json.dumps(RL))
    data["graph"][key] = tag
    with pytest.raises(InputError) as err:
        Graph.from_dict(data, path="rl.json")
    assert err.value.field == f"graph.{key}" and "must be a string" in str(err.value)


def test_a_null_tag_is_the_default_key():
    data = {"graph": {"node_output_cost_tag": None, "node_duration_tag": None},
            "nodes": [{"name": 0, "out_cost": 4, "duration": 2}], "links": []}
    g = Graph.from_dict(data, path="rl.json")
    assert list(g.cost_ram) == [4] and list(g.cost_cpu) == [2]


def test_the_tags_read_the_named_keys():
    g = Graph.from_dict(json.loads(json.dumps(RL)), path="rl.json")
    assert list(g.cost_ram) == [1, 2] and list(g.cost_cpu) == [1, 3]


@pytest.mark.parametrize("order", [[False, True, 2], [0, True, 2]])
def test_booleans_in_the_order_are_refused(order, cli, tmp_path):
    data = {"nodes": [{"id": i, "cost_cpu": 1, "cost_ram": 1} for i in range(3)],
            "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}], "graph": {"order": order}}
    with pytest.raises(InputError) as err:
        Graph.from_dict(data, path="g.json")
    assert err.value.field == "graph.order"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    res = cli("solve", path, "--budget", "100%", "--solver", "dtr")
    assert res.code == 2 and "graph.order" in res.err and "Traceback" not in res.err
