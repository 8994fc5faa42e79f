"""`memsched partition --json` and `memsched simulate --json` of pipeline partitions keep the design
contract: the top-level ``stages[].first_layer/last_layer`` are in the instance's layer order (null for a
DAG stage whose layers leave a gap there, never positions in the partition's ``order``), and simulate's
``period`` is in seconds per micro-batch, equal to partition's, with ``period_file_units`` and
``time_unit_s`` as partition gives them."""

from __future__ import annotations

import pytest
from conftest import run_cli, write_file

#: a PipeDream diamond Input -> A -> {B, C} -> D (times in ms): the best 2-stage DAG split puts A with C
#: and B with D, so stage 0 holds layers 0 and 2 (A, C) and is positions 0..1 of the order [0, 2, 1, 3]
DIAMOND = """\
node0 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=100.0, parameter_size=0.000
nodeA -- A -- forward_compute_time=0.5, backward_compute_time=0.5, activation_size=100.0, parameter_size=10.0
nodeB -- B -- forward_compute_time=2.5, backward_compute_time=2.5, activation_size=100.0, parameter_size=10.0
nodeC -- C -- forward_compute_time=2.0, backward_compute_time=2.0, activation_size=100.0, parameter_size=10.0
nodeD -- D -- forward_compute_time=0.05, backward_compute_time=0.05, activation_size=100.0, parameter_size=10.0
\tnode0 -- nodeA
\tnodeA -- nodeB
\tnodeA -- nodeC
\tnodeB -- nodeD
\tnodeC -- nodeD
"""

#: a 3-layer chain profile (ms)
CHAIN = """\
node1 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=786432, parameter_size=0
node2 -- Conv2d -- forward_compute_time=0.41, backward_compute_time=0.95, activation_size=4194304, parameter_size=1792
node4 -- Linear -- forward_compute_time=0.3, backward_compute_time=0.6, activation_size=1000.0, parameter_size=50000.0
node3 -- ReLU -- forward_compute_time=0.02, backward_compute_time=0.04, activation_size=4194304, parameter_size=0
\tnode1 -- node2
\tnode2 -- node3
\tnode3 -- node4
"""

#: the keys of a contiguous partition's top-level stage (no interleaving), as before
CHAIN_STAGE_KEYS = {"first_layer", "last_layer", "time", "memory", "devices", "replicas", "in_flight", "link_time"}


def _partition(path, *argv):
    res = run_cli("partition", path, *argv, "--json")
    assert res.code == 0, res.err
    return res.json()


def _simulate(path, schedule, *argv):
    res = run_cli("simulate", path, schedule, *argv)
    assert res.code == 0, res.err
    return res


def test_dag_stages_name_instance_layers_not_positions(tmp_path):
    graph = write_file(tmp_path, "dag.txt", DIAMOND)
    out = _partition(graph, "--devices", "2", "--memory", "1GB", "--solver", "dag")
    assert out["schedule"]["order"] == [0, 2, 1, 3]
    stages = out["stages"]
    assert [s["layers"] for s in stages] == [[0, 2], [1, 3]]
    # layers 0 and 2 (and 1 and 3) are no range of the instance's order: no misleading integers
    assert [(s["first_layer"], s["last_layer"]) for s in stages] == [(None, None), (None, None)]
    assert [(s["first_position"], s["last_position"]) for s in stages] == [(0, 1), (2, 3)]
    # the partition object keeps its own format (positions in its order), which simulate and plot read
    inner = out["schedule"]["stages"]
    assert [(s["first_layer"], s["last_layer"], s["layers"]) for s in inner] == [(0, 1, [0, 2]), (2, 3, [1, 3])]


def test_dag_stage_contiguous_in_the_instance_order_gets_its_range(tmp_path):
    graph = write_file(tmp_path, "dag.txt", DIAMOND)
    out = _partition(graph, "--devices", "1", "--memory", "1GB", "--solver", "dag")
    (stage,) = out["stages"]
    assert stage["layers"] == [0, 1, 2, 3] and (stage["first_layer"], stage["last_layer"]) == (0, 3)
    # B and D as slow as A and C together: on 3 devices the best stages are {A, C}, {B}, {D} in the order
    # A, C, B, D, whose last two stages are ranges of the instance's order and the first is none
    balanced = DIAMOND.replace("B -- forward_compute_time=2.5, backward_compute_time=2.5",
                               "B -- forward_compute_time=1.0, backward_compute_time=1.0")
    balanced = balanced.replace("C -- forward_compute_time=2.0, backward_compute_time=2.0",
                                "C -- forward_compute_time=0.5, backward_compute_time=0.5")
    balanced = balanced.replace("D -- forward_compute_time=0.05, backward_compute_time=0.05",
                                "D -- forward_compute_time=1.0, backward_compute_time=1.0")
    graph = write_file(tmp_path, "balanced.txt", balanced)
    for solver in ("dag", "dag-pipedream", "dag-cpsat"):
        out = _partition(graph, "--devices", "3", "--memory", "1GB", "--solver", solver)
        assert out["schedule"]["order"] == [0, 2, 1, 3], solver
        assert [(s["first_layer"], s["last_layer"], s["layers"]) for s in out["stages"]] == \
            [(None, None, [0, 2]), (1, 1, [1]), (3, 3, [3])], solver
        assert [(s["first_position"], s["last_position"]) for s in out["stages"]] == [(0, 1), (2, 2), (3, 3)], solver


def test_dag_human_output_lists_instance_layers(tmp_path):
    graph = write_file(tmp_path, "dag.txt", DIAMOND)
    res = run_cli("partition", graph, "--devices", "2", "--memory", "1GB", "--solver", "dag")
    assert res.code == 0, res.err
    rows = {line.split()[0]: line.split()[1] for line in res.out.splitlines()
            if line.split() and line.split()[0] in ("0", "1")}
    assert rows == {"0": "0,2", "1": "1,3"}
    assert "positions" not in res.out


def test_chain_partition_stages_unchanged(tmp_path):
    graph = write_file(tmp_path, "graph.txt", CHAIN)
    out = _partition(graph, "--devices", "2", "--memory", "100MB")
    assert "order" not in out["schedule"]
    inner = out["schedule"]["stages"]
    assert [(s["first_layer"], s["last_layer"]) for s in out["stages"]] == \
        [(s["first_layer"], s["last_layer"]) for s in inner] == [(0, 0), (1, 2)]
    assert all(set(s) == CHAIN_STAGE_KEYS for s in out["stages"])


@pytest.mark.parametrize("whole", [True, False], ids=["partition-output", "bare-partition"])
def test_simulate_period_in_seconds_as_partition(tmp_path, whole):
    graph = write_file(tmp_path, "graph.txt", CHAIN)
    out = _partition(graph, "--devices", "2", "--memory", "100MB", "--bandwidth", "12GB/s")
    saved = write_file(tmp_path, "part.json", out if whole else out["schedule"])
    sim = _simulate(graph, saved, "--json").json()
    assert sim["problem"] == "pipeline" and sim["valid"]
    assert sim["period"] == pytest.approx(out["period"], rel=1e-12)  # seconds, not the file's ms
    assert sim["period_file_units"] == pytest.approx(out["period_file_units"], rel=1e-12)
    assert sim["time_unit_s"] == out["time_unit_s"] == 0.001
    assert sim["peak_memory"] == out["peak_memory"]
    # the stage times of the memory profile are seconds too, as partition's stage times
    assert [e["time"] for e in sim["memory_profile"]] == pytest.approx([s["time"] for s in out["stages"]])
    text = _simulate(graph, saved).out
    (line,) = [ln for ln in text.splitlines() if ln.startswith("period ")]
    value, unit = line.split()[1:3]
    assert unit == "s" and float(value) == pytest.approx(out["period"], rel=1e-5)


def test_simulate_round_trip_of_a_dag_partition_output(tmp_path):
    graph = write_file(tmp_path, "dag.txt", DIAMOND)
    out = _partition(graph, "--devices", "2", "--memory", "1GB", "--solver", "dag")
    saved = write_file(tmp_path, "part.json", out)
    sim = _simulate(graph, saved, "--json").json()
    assert sim["valid"] and sim["period"] == pytest.approx(out["period"], rel=1e-12)
    assert sim["peak_memory"] == out["peak_memory"]
    assert [e["layers"] for e in sim["memory_profile"]] == [[0, 2], [1, 3]]
    assert [e["op"] for e in sim["memory_profile"]] == ["stage 0 [0,2]", "stage 1 [1,3]"]
