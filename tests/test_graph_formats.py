"""The field's own graph files load as they are: excerpts of Checkmate's MLSys graphs (as
shipped with Moccasin) and of Moccasin's random-layered ("RL") graphs, keys and values verbatim."""

from __future__ import annotations

import json

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.graph import load, reference_peak, simulate

# haoming-codes/moccasin data/VGG16 (MLSys)_256_(224, 224, 3)_train_nx.json: 7 of its 45 nodes, the
# links among them, and two links (2 -> 22 -> 42) standing for the cut-out middle of the network
CHECKMATE_VGG16 = {
    "directed": True, "multigraph": False, "graph": {"name": "VGG16 (MLSys)_256_(224, 224, 3)_train"},
    "nodes": [
        {"name": "block1_conv1", "backward": False, "cost_cpu": 385, "cost_ram": 3288334336, "id": 0},
        {"name": "block1_conv2", "backward": False, "cost_cpu": 305, "cost_ram": 3288334336, "id": 1},
        {"name": "block1_pool", "backward": False, "cost_cpu": 120, "cost_ram": 822083584, "id": 2},
        {"name": "Loss", "backward": True, "cost_cpu": 1170, "cost_ram": 1024, "id": 22},
        {"name": "block1_pool_backward", "backward": True, "cost_cpu": 325, "cost_ram": 822083584, "id": 42},
        {"name": "block1_conv2_backward", "backward": True, "cost_cpu": 300, "cost_ram": 3288334336, "id": 43},
        {"name": "block1_conv1_backward", "backward": True, "cost_cpu": 390, "cost_ram": 3288334336, "id": 44}],
    "links": [{"source": 0, "target": 1}, {"source": 0, "target": 44}, {"source": 1, "target": 2},
              {"source": 1, "target": 43}, {"source": 1, "target": 44}, {"source": 2, "target": 22},
              {"source": 2, "target": 42}, {"source": 2, "target": 43}, {"source": 22, "target": 42},
              {"source": 42, "target": 43}, {"source": 43, "target": 44}],
}

# haoming-codes/moccasin data/random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14.json: 6 of its 100
# nodes, the links among them, the graph tags (positions dropped) and the order restricted to them
MOCCASIN_RL = {
    "directed": True, "multigraph": False,
    "graph": {"name": "random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14", "pos": {"0": [0, 0], "2": [-3, -1]},
              "source_node": 0, "target_node": 1, "node_output_cost_tag": "out_cost",
              "node_output_block_tag": "output_blocks", "node_param_cost_tag": "param_cost",
              "node_input_cost_tag": "input_cost", "node_duration_tag": "duration", "edge_cost_tag": "edge_cost",
              "edge_output_blocks_tag": "edge_output_blocks", "max_cost": 1, "inset_state": [],
              "order": [0, 3, 2, 9, 4, 10]},
    "nodes": [{"out_cost": 790, "param_cost": 0, "duration": 0, "name": 0},
              {"out_cost": 1950, "param_cost": 0, "duration": 514, "name": 2},
              {"out_cost": 1980, "param_cost": 0, "duration": 896, "name": 3},
              {"out_cost": 5320, "param_cost": 0, "duration": 955, "name": 4},
              {"out_cost": 960, "param_cost": 0, "duration": 74, "name": 9},
              {"out_cost": 2040, "param_cost": 0, "duration": 800, "name": 10}],
    "links": [{"0": 0, "1": 2}, {"0": 0, "1": 3}, {"0": 0, "1": 4}, {"0": 2, "1": 9}, {"0": 2, "1": 10},
              {"0": 3, "1": 9}, {"0": 3, "1": 10}, {"0": 4, "1": 10}],
}


def _write(tmp_path, data, name):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_checkmate_mlsys_graph_loads_unchanged(tmp_path):
    g = load(_write(tmp_path, CHECKMATE_VGG16, "VGG16 (MLSys)_256_(224, 224, 3)_train_nx.json"))
    assert g.n == 7 and g.name == "VGG16 (MLSys)_256_(224, 224, 3)_train"
    assert g.names[0] == "block1_conv1" and g.backward == [False] * 3 + [True] * 4
    assert g.cost_ram[0] == 3288334336 and g.total_cpu() == 385 + 305 + 120 + 1170 + 325 + 300 + 390
    # computing each node once in order: block1_conv1_backward needs conv1 (resident) and conv2_backward
    order = list(range(g.n))
    assert simulate(g, order).peak_memory == reference_peak(g) > 3 * 3288334336


def test_moccasin_random_layered_graph_loads_with_its_tags(tmp_path):
    g = load(_write(tmp_path, MOCCASIN_RL, "random_layered_n100.json"))
    assert g.n == 6 and g.ids == [0, 3, 2, 9, 4, 10]  # the file's order
    by_id = {v: i for i, v in enumerate(g.ids)}
    assert g.cost_ram[by_id[4]] == 5320 and g.cost_cpu[by_id[4]] == 955  # out_cost / duration
    assert g.cost_cpu[by_id[0]] == 0
    assert sorted((g.ids[i], g.ids[k]) for i, k in g.edges) == sorted(
        (e["0"], e["1"]) for e in MOCCASIN_RL["links"])
    assert reference_peak(g) > 0


def test_node_without_id_or_tags_is_still_an_error(tmp_path):
    data = {"nodes": [{"name": 0, "cost_cpu": 1, "cost_ram": 1}], "links": []}
    with pytest.raises(InputError, match=r"nodes\[0\]"):
        load(_write(tmp_path, data, "bad.json"))


def test_rl_file_with_a_missing_cost_names_the_node(tmp_path):
    data = json.loads(json.dumps(MOCCASIN_RL))
    del data["nodes"][1]["duration"]
    with pytest.raises(InputError, match="node 2: duration"):
        load(_write(tmp_path, data, "bad.json"))
