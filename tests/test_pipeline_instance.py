"""Pipeline instances: PipeDream graph.txt and chain-file loading, bad input, the partition command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli as _cli
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import from_graph_txt, load
from memsched.solvers.pipeline.generate import random_pipeline
from memsched.solvers.pipeline.profiles import vgg16

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data" / "pipeline"

LINE = ("{id} -- {desc} -- forward_compute_time={f}, backward_compute_time={b}, activation_size={a}, "
        "parameter_size={w}")


def node(i, desc="Layer", f=1.0, b=2.0, a=10.0, w=0.0):
    return LINE.format(id=f"node{i}", desc=desc, f=f, b=b, a=a, w=w)


def test_examples_load():
    vgg = load(DATA / "vgg16-b32.graph.txt")
    ref = vgg16()
    assert vgg.length == ref.length
    np.testing.assert_allclose(vgg.fwd, ref.fwd, rtol=1e-5)
    assert list(vgg.act) == list(ref.act) and list(vgg.params) == list(ref.params)
    assert vgg.input_size == ref.input_size and vgg.time_unit == 1e-3
    mlp = load(DATA / "mlp7.chain.json")
    assert mlp.length == 7 and mlp.params[1] == 1049600 and mlp.act[0] == 4096 * 64
    assert mlp.bwd[-1] == pytest.approx(0.2 + 0.05)  # the loss is folded into the last layer
    assert load(DATA / "tiny-resnet.graph.txt").length == 10


def test_topological_order_ties_by_file_order_and_cuts():
    def text(input_bytes: int) -> str:
        return "\n".join([node(3, "c", a=30), node(1, "Input", a=input_bytes), node(2, "b", a=20),
                          node(4, "d", a=40), node(5, "e", a=50, w=8),
                          "\tnode1 -- node2", "\tnode1 -- node3", "\tnode2 -- node4", "\tnode3 -- node4",
                          "\tnode4 -- node5"]) + "\n"

    inst = from_graph_txt(text(0), path="g.txt")
    # node1 is the Input (dropped, its output is the input); node3 and node2 are both ready: file order
    assert inst.meta["node_ids"] == ["node3", "node2", "node4", "node5"]
    assert inst.input_size == 0
    # cut after node3: node3's output (30) and the input still needed by node2 is not a layer output
    assert list(inst.cut) == [30, 50, 40]
    with pytest.raises(InputError, match="besides"):  # an input of 7 bytes read by two layers
        from_graph_txt(text(7), path="g.txt")
    assert inst.params[-1] == 8


def test_activation_lists_and_stage_ids_are_accepted():
    text = (node(1).replace("activation_size=10.0", "activation_size=[1.0; 2.5]") + " -- stage_id=0\n"
            + node(2) + "\n\tnode1 -- node2\n")
    inst = from_graph_txt(text)
    assert inst.act[0] == 4  # 3.5 rounded up to whole bytes


@pytest.mark.parametrize("text, where", [
    (node(1).replace("forward_compute_time=1.0", "forward_compute_time=abc"), "line 1: forward_compute_time"),
    (node(1).replace(", parameter_size=0.0", ""), "line 1: parameter_size"),
    (node(1).replace("backward_compute_time=2.0", "backward_compute_time=-2"), "line 1: backward_compute_time"),
    (node(1) + "\n" + node(2) + "\n\tnode1 -- node9", "line 3"),
    (node(1) + "\n" + node(2) + "\n\tnode1 -- node2\n\tnode2 -- node1", "cycle"),
    (node(1) + "\n" + node(1), "line 2"),
    ("node1 -- just a description", "line 1"),
    (node(1) + "\n\tnode1 node2", "line 2"),
    ("", "no nodes"),
    (node(1).replace("activation_size", "activation_sise"), "activation_sise"),
])
def test_bad_graph_txt(tmp_path, text, where):
    path = tmp_path / "bad.txt"
    path.write_text(text + "\n")
    with pytest.raises(InputError) as err:
        load(path)
    assert str(path) in str(err.value) and where in str(err.value)


def test_bad_chain_param_sizes(tmp_path):
    data = json.loads((DATA / "mlp7.chain.json").read_text())
    data["meta"]["param_sizes"] = [1, 2]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="meta.param_sizes"):
        load(path)
    data["meta"]["param_sizes"] = None
    del data["stages"][0]["fwd_time"]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="fwd_time"):
        load(path)


def test_graph_txt_round_trip():
    inst = random_pipeline(np.random.default_rng(5), 6)
    back = from_graph_txt(inst.to_graph_txt())
    np.testing.assert_allclose(back.fwd, inst.fwd, rtol=1e-6)
    assert list(back.act) == list(inst.act) and list(back.params) == list(inst.params)
    assert back.input_size == inst.input_size


# ---------------------------------------------------------------------------- command line


def test_cli_partition_json():
    code, out, _ = _cli("partition", DATA / "vgg16-b32.graph.txt", "--devices", "4", "--memory", "6GB", "--json")
    assert code == 0
    obj = json.loads(out)
    for key in ("status", "solver", "period", "stages", "solve_time_s", "peak_memory"):
        assert key in obj
    assert obj["status"] == "optimal" and obj["solver"] == "madpipe"
    assert "not charged" in obj["communication"]
    assert obj["stages"][0]["first_layer"] == 0 and obj["stages"][-1]["last_layer"] == 20
    assert obj["period"] == pytest.approx(max(s["time"] for s in obj["stages"]))
    assert obj["period"] < 1.0  # seconds, not ms
    assert all(s["memory"] <= 6e9 for s in obj["stages"])


def test_cli_partition_human_and_bandwidth():
    code, out, _ = _cli("partition", DATA / "tiny-resnet.graph.txt", "--devices", "2", "--memory", "30MB",
                        "--bandwidth", "1GB/s", "--solver", "cpsat")
    assert code == 0 and "period" in out and "bytes/s" in out
    code, out, _ = _cli("partition", DATA / "tiny-resnet.graph.txt", "--devices", "2", "--memory", "30MB")
    assert code == 0 and "not charged" in out


def test_cli_partition_exit_codes(tmp_path):
    code, _, err = _cli("partition", DATA / "vgg16-b32.graph.txt", "--devices", "4", "--memory", "1GB")
    assert code == 1 and "smallest feasible memory" in err
    code, _, err = _cli("partition", tmp_path / "missing.txt", "--devices", "2", "--memory", "1GB")
    assert code == 2 and "no such file" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli("partition", DATA / "mlp7.chain.json", "--devices", "2", "--memory", "lots")
    assert code == 2 and "--memory" in err
    code, _, err = _cli("partition", DATA / "mlp7.chain.json", "--devices", "0", "--memory", "1GB")
    assert code == 2
    code, _, err = _cli("partition", DATA / "mlp7.chain.json", "--devices", "2", "--memory", "1GB",
                        "--solver", "nope")
    assert code == 2 and "nope" in err
    code, out, _ = _cli("partition", DATA / "mlp7.chain.json", "--devices", "3", "--memory", "1GB",
                        "--schedule", "gpipe", "--micro-batches", "6", "--json", "--solver", "balance-time")
    assert code == 0 and json.loads(out)["stages"][0]["in_flight"] == 6


def test_partition_json_round_trip_and_replay():
    from memsched.solvers import pipeline, registry

    inst = load(DATA / "resnet50-b32.graph.txt")
    res = registry.solve("pipeline", inst, "madpipe", 2 * 10**9, devices=4)
    code, out, _ = _cli("partition", DATA / "resnet50-b32.graph.txt", "--devices", "4", "--memory", "2GB", "--json")
    assert code == 0
    for data in (res.schedule.to_json(), json.loads(out)):
        part = pipeline.schedule_from_json(data, inst)
        rep = pipeline.replay(inst, part, 2 * 10**9)
        assert rep.violation is None
        assert rep.objective == pytest.approx(res.objective) and rep.peak_memory == res.peak_memory
    with pytest.raises(InputError):
        pipeline.schedule_from_json({"stages": [{"first_layer": 0}]}, inst)
