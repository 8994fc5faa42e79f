"""Hunt 27 (graphs, models, schedule files): Chen's greedy on a training graph whose forward outputs
are all empty answers (no geomspace crash); a graph export always records its dtype, and a graph
file naming its model but no dtype (older exports) counts as float32 when `memsched run` compares
--dtype; chain and offload schedules are saved atomically, a missing folder an `InputError`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import memsched.solvers
import pytest
from conftest import run_cli
from memsched.solvers.chain.schedule import Bwd, F_all, Loss, Schedule
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph
from memsched.solvers.graph.baselines import solve_greedy
from memsched.solvers.offload.schedule import OffloadSchedule

GRAPHS = Path(memsched.solvers.__file__).parent / "data" / "graphs"

#: a training graph whose only forward node has cost_ram 0 (its output is empty): the loss and the
#: backward nodes hold 8 bytes at the peak
ZERO_FORWARD = {
    "directed": True, "multigraph": False, "graph": {"name": "z", "order": [0, 1, 2, 3]},
    "nodes": [{"id": 0, "cost_cpu": 1.0, "cost_ram": 0, "name": "f0", "backward": False},
              {"id": 1, "cost_cpu": 1.0, "cost_ram": 4, "name": "loss", "backward": True},
              {"id": 2, "cost_cpu": 2.0, "cost_ram": 4, "name": "b0", "backward": True},
              {"id": 3, "cost_cpu": 0.5, "cost_ram": 2, "name": "b_in", "backward": True}],
    "links": [{"source": 0, "target": 1}, {"source": 0, "target": 2}, {"source": 1, "target": 2},
              {"source": 2, "target": 3}],
}


# --------------------------------------------------------------------------- 1: greedy, empty forward outputs
def test_greedy_on_empty_forward_outputs_answers():
    graph = Graph.from_dict(ZERO_FORWARD, path="z.json")
    small = solve_greedy(graph, 6)
    assert small.status == "infeasible" and small.min_budget == 8
    fits = solve_greedy(graph, 8)
    assert fits.status == "feasible" and fits.peak_memory == 8 and fits.schedule is not None


def test_cli_solve_on_empty_forward_outputs(tmp_path: Path):
    path = tmp_path / "z.json"
    path.write_text(json.dumps(ZERO_FORWARD))
    greedy = run_cli("solve", path, "--solver", "greedy", "--budget", "6")
    assert greedy.code == 1 and "internal error" not in greedy.err and "8" in greedy.err
    default = run_cli("solve", path, "--budget", "4")  # the smallest-budget search runs the baselines
    assert default.code == 1 and "internal error" not in default.err


# --------------------------------------------------------------------------- 2: graph dtype
@pytest.fixture(scope="module")
def gpt_graph():
    """A tiny gpt2 graph exported at the default dtype (counted costs, one node per block)."""
    pytest.importorskip("torch")
    from memsched.models.graph.export import export_training_graph

    return export_training_graph("gpt2", batch=1, seq_len=8, width=16, depth=1, vocab=50, granularity="module")


def test_export_records_the_default_dtype(gpt_graph):
    assert gpt_graph.meta["dtype"] == "float32" and gpt_graph.meta["model"] == "gpt2"


def test_export_records_bfloat16():
    pytest.importorskip("torch")
    from memsched.models.graph.export import export_training_graph

    graph = export_training_graph("gpt2", batch=1, seq_len=8, width=16, depth=1, vocab=50, granularity="module",
                                  dtype="bfloat16")
    assert graph.meta["dtype"] == "bfloat16"


def _without_dtype(graph: Graph, tmp_path: Path) -> Graph:
    """`graph` as an older export wrote it: meta without dtype (saved and loaded again)."""
    data = graph.to_dict()
    data["graph"]["meta"].pop("dtype", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    return Graph.load(path)


def test_a_graph_without_dtype_counts_as_float32(gpt_graph, tmp_path):
    from memsched.models.run import instance_sizes

    old = _without_dtype(gpt_graph, tmp_path)
    with pytest.raises(InputError, match="profiled at dtype float32, not bfloat16"):
        instance_sizes(old, "gpt2", {"dtype": "bfloat16"}, "graph", path="old.json")
    assert instance_sizes(old, "gpt2", {"dtype": "float32"}, "graph")["dtype"] == "float32"
    assert "dtype" not in instance_sizes(old, "gpt2", None, "graph")  # compared, not filled in


def test_a_new_export_refuses_another_dtype(gpt_graph):
    from memsched.models.run import instance_sizes

    with pytest.raises(InputError, match="--dtype"):
        instance_sizes(gpt_graph, "gpt2", {"dtype": "bfloat16"}, "graph", path="g.json")


def test_a_graph_of_no_model_is_not_given_a_dtype():
    pytest.importorskip("torch")
    from memsched.models.run import instance_sizes

    graph = Graph.from_dict(ZERO_FORWARD, path="z.json")
    assert instance_sizes(graph, "gpt2", {"dtype": "bfloat16"}, "graph") == {"dtype": "bfloat16"}


def test_cli_run_of_a_float32_graph_at_bfloat16_is_refused(gpt_graph, tmp_path):
    path = tmp_path / "g.json"
    _without_dtype(gpt_graph, tmp_path).save(path)
    res = run_cli("run", path, "--budget", "100%", "--dtype", "bfloat16")
    assert res.code == 2 and "--dtype" in res.err and "float32" in res.err


@pytest.mark.parametrize("name", ["gpt2_tiny.json", "resnet18_tiny.json"])
def test_committed_graphs_read_as_float32(name):
    pytest.importorskip("torch")
    from memsched.models.run import instance_sizes

    graph = Graph.load(GRAPHS / name)
    assert "dtype" not in graph.meta
    with pytest.raises(InputError, match="profiled at dtype float32, not bfloat16"):
        instance_sizes(graph, graph.meta["model"], {"dtype": "bfloat16"}, "graph")
    assert instance_sizes(graph, graph.meta["model"], {"dtype": "float32"}, "graph")["dtype"] == "float32"


# --------------------------------------------------------------------------- 3: schedule files
def _schedules() -> list[Schedule | OffloadSchedule]:
    """A store-all schedule of a 2-stage chain, as a chain and as an offloading schedule."""
    chain_sched = Schedule([F_all(0), F_all(1), Loss(2), Bwd(1), Bwd(0)], 2)
    return [chain_sched, OffloadSchedule.from_chain(chain_sched)]


@pytest.mark.parametrize("k", [0, 1], ids=["chain", "offload"])
def test_schedule_save_to_a_missing_folder_is_bad_input(tmp_path, k):
    sched = _schedules()[k]
    target = tmp_path / "nodir" / "s.json"
    with pytest.raises(InputError, match="cannot write") as info:
        sched.save(target)
    assert str(target) in str(info.value)


@pytest.mark.parametrize("k", [0, 1], ids=["chain", "offload"])
def test_schedule_save_replaces_the_file(tmp_path, k):
    sched = _schedules()[k]
    target = tmp_path / "s.json"
    target.write_text("old\n")
    before = os.stat(target).st_ino
    keep = tmp_path / "link.json"
    os.link(target, keep)  # a hard link to the old file keeps its content: the new file was renamed in
    sched.save(target)
    assert keep.read_text() == "old\n"
    assert os.stat(target).st_ino != before
    assert json.loads(target.read_text()) == sched.to_json()
