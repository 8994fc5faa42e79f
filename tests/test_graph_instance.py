"""Graph files: node-link JSON as Checkmate/Moccasin write it, validation errors, generators."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph, generate, load, reference_peak, simulate


def _write(tmp_path, data, name="g.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def _checkmate_style() -> dict:
    """A file as networkx.node_link_data (links) exports it, with extra attributes."""
    g = nx.DiGraph(name="tiny")
    for v, (cpu, ram, bwd) in enumerate([(1.0, 4, False), (2.0, 4, False), (1.5, 2, True), (3.0, 4, True)]):
        g.add_node(v, cost_cpu=cpu, cost_ram=ram, name=f"op{v}", backward=bwd, extra="ignored")
    g.add_edges_from([(0, 1), (1, 2), (0, 3), (2, 3)])
    return nx.node_link_data(g, edges="links")


def test_loads_node_link_file_unchanged(tmp_path):
    data = _checkmate_style()
    assert "links" in data and data["directed"] is True
    graph = load(_write(tmp_path, data))
    assert graph.n == 4 and graph.name == "tiny"
    assert graph.edges == [(0, 1), (0, 3), (1, 2), (2, 3)]
    assert graph.backward == [False, False, True, True]
    assert graph.cost_ram.tolist() == [4, 4, 2, 4]


def test_accepts_edges_key_and_string_ids(tmp_path):
    data = {"nodes": [{"id": "a", "cost_cpu": 1, "cost_ram": 1}, {"id": "b", "cost_cpu": 1, "cost_ram": 2}],
            "edges": [{"source": "a", "target": "b"}]}
    graph = load(_write(tmp_path, data))
    assert graph.ids == ["a", "b"] and graph.edges == [(0, 1)]


def test_order_attribute_is_the_index_order(tmp_path):
    data = _checkmate_style()
    data["graph"] = {"name": "tiny", "order": [0, 1, 2, 3]}
    assert load(_write(tmp_path, data)).ids == [0, 1, 2, 3]
    data["graph"]["order"] = [1, 0, 2, 3]
    with pytest.raises(InputError, match="graph.order"):
        load(_write(tmp_path, data))


def test_save_load_roundtrip(tmp_path):
    g = generate.random_layered(20, 3)
    path = tmp_path / "rl.json"
    g.save(path)
    h = load(str(path))
    assert h.edges == g.edges and h.cost_cpu.tolist() == g.cost_cpu.tolist()
    assert h.cost_ram.tolist() == g.cost_ram.tolist() and h.name == g.name
    assert reference_peak(h) == reference_peak(g)


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["links"].append({"source": 3, "target": 0}), "cycle"),
    (lambda d: d["nodes"][1].pop("cost_cpu"), "node 1: cost_cpu"),
    (lambda d: d["nodes"][2].pop("cost_ram"), "node 2: cost_ram"),
    (lambda d: d["nodes"][0].__setitem__("cost_ram", -3), "node 0: cost_ram"),
    (lambda d: d["links"].append({"source": 1, "target": 99}), "dangling"),
    (lambda d: d["nodes"].append({"id": 1, "cost_cpu": 1, "cost_ram": 1}), "duplicate"),
])
def test_bad_files_name_file_and_field(tmp_path, mutate, match):
    data = _checkmate_style()
    mutate(data)
    path = _write(tmp_path, data, "bad.json")
    with pytest.raises(InputError, match=match) as err:
        load(path)
    assert "bad.json" in str(err.value)


def test_invalid_json_and_missing_file(tmp_path):
    path = _write(tmp_path, "{not json", "broken.json")
    with pytest.raises(InputError, match="broken.json.*invalid JSON"):
        load(path)
    with pytest.raises(InputError, match="nope.json.*no such file"):
        load(str(tmp_path / "nope.json"))


def test_example_files_load_and_fit_their_reference():
    from memsched import solvers
    files = sorted((Path(solvers.__file__).parent / "data" / "graphs").glob("*.json"))
    assert len(files) >= 4
    for p in files:
        g = load(str(p))
        sim = simulate(g, list(range(g.n)), reference_peak(g))
        assert sim.valid, p.name


def test_generators_shapes():
    lin = generate.linear_graph(5)
    assert lin.n == 11 and sum(lin.backward) == 6
    vgg = generate.vgg16()
    assert 40 <= vgg.n <= 50
    res = generate.resnet()
    assert 300 <= res.n <= 400
    rl = generate.random_layered(30, 0)
    assert rl.n == 30 and rl.sinks == [29]
    assert isinstance(rl, Graph)
