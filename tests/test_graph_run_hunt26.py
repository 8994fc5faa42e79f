"""Graph runs and graph max-batch (hunt 26): a graph file whose links miss one of the network's
dependencies is bad input naming the file; max-batch with a solver that refuses the graph's
structure says why (exit 2 naming --solver); a graph without temporaries (counted costs) or with
outputs-only sizes is run with a note advising measured costs and tapes; a --problem graph
max-batch answer says that its sizes are Checkmate's outputs-only model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from conftest import graph_file_without_link, run_cli  # noqa: E402
from memsched.models.graph.executor import GraphExecutor  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.run import run  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.graph import Graph  # noqa: E402

torch.set_num_threads(1)

SIZES = dict(batch=2, image_size=32, width=4, depth=1, classes=10)
MB_ARGS = ("--memory", "3MB", "--image-size", "64", "--width", "4", "--depth", "1", "--problem", "graph")


@pytest.fixture(scope="module")
def flops_tape(tmp_path_factory):
    """(the network, its counted-cost graph with tapes, the graph's file)."""
    model = build_model("resnet18", device="cpu", **SIZES)
    graph = export_training_graph(model, ram="tape")
    path = tmp_path_factory.mktemp("g") / "r18.json"
    graph.save(path)
    return model, graph, path


def _forward_link(graph: Graph) -> tuple[str, str]:
    """The names of the first link between two forward nodes (a real dependency of the network)."""
    u, v = next((u, v) for u, v in graph.edges if not graph.backward[u] and not graph.backward[v])
    return graph.names[u], graph.names[v]


def test_a_missing_forward_link_is_refused_before_any_step(flops_tape, tmp_path):
    model, graph, path = flops_tape
    u, v = _forward_link(graph)
    graph_file_without_link(path, tmp_path / "drop.json", u, v)
    with pytest.raises(ValueError, match=f"no link {u} -> {v}.*edges are not the network's"):
        GraphExecutor(model.blocks, model.loss_fn, Graph.load(tmp_path / "drop.json"), model.example_input)


def test_run_on_a_graph_missing_a_forward_link_is_bad_input_naming_the_file(flops_tape, tmp_path):
    _, graph, path = flops_tape
    u, v = _forward_link(graph)
    graph_file_without_link(path, tmp_path / "drop.json", u, v)
    r = run_cli("run", tmp_path / "drop.json", "--budget", "80%", "--solver", "dtr", "--threads", "1",
                "--time-repeats", "1", "--no-independent")
    assert r.code == 2, r.err
    assert "drop.json" in r.err and f"no link {u} -> {v}" in r.err and "internal error" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_missing_link_to_the_loss_is_refused(flops_tape, tmp_path):
    model, graph, path = flops_tape
    loss = graph.names.index("loss")
    source = graph.names[graph.preds[loss][0]]
    graph_file_without_link(path, tmp_path / "drop.json", source, "loss")
    with pytest.raises(InputError, match=f"no link {source} -> loss"):
        run("resnet18", "80%", problem="graph", solver="dtr", instance=str(tmp_path / "drop.json"),
            time_repeats=1, independent=False, store_all=False)


def test_the_exported_graph_itself_is_accepted(flops_tape):
    model, graph, _ = flops_tape
    GraphExecutor(model.blocks, model.loss_fn, graph, model.example_input)  # every real dependency is a link


def test_max_batch_with_a_solver_that_does_not_apply_says_why():
    r = run_cli("max-batch", "resnet18", *MB_ARGS, "--solver", "griewank", "--limit", "2")
    assert r.code == 2, (r.out, r.err)
    assert "--solver" in r.err and "griewank does not apply" in r.err and "forward nodes form a chain" in r.err
    assert "even at batch" not in r.err


def test_a_graph_without_temporaries_is_run_with_a_note(flops_tape):
    _, graph, path = flops_tape
    assert not graph.meta.get("temporaries") and not graph.has_workspace  # counted costs record none
    out = run("resnet18", "80%", problem="graph", solver="dtr", instance=str(path), time_repeats=1,
              independent=False, store_all=False)
    assert out["predicted"] is not None
    note = out.get("note") or ""
    assert "no temporaries" in note and "cost 'flops'" in note and "--cost measured --ram tape" in note


def test_the_outputs_only_note_advises_measured_costs_and_tapes(tmp_path):
    model = build_model("resnet18", device="cpu", **SIZES)
    path = tmp_path / "out.json"
    export_training_graph(model, ram="output").save(path)
    out = run("resnet18", "100%", problem="graph", solver="checkpoint-all", instance=str(path), time_repeats=1,
              independent=False, store_all=False)
    note = out.get("note") or ""
    assert "outputs only" in note and "--cost measured --ram tape" in note
    assert "export it with ram 'tape'" not in note  # the old advice: tapes alone still miss the temporaries


def test_max_batch_graph_answer_notes_the_outputs_only_model():
    r = run_cli("max-batch", "resnet18", *MB_ARGS, "--solver", "checkpoint-all", "--limit", "2", "--json")
    assert r.code == 0, r.err
    out = r.json()
    budget = out["result"]["budget"]
    assert "Checkmate's model" in out["note"] and "no temporaries" in out["note"]
    assert f"--batch {out['largest']} --budget {budget}" in out["note"]
    text = run_cli("max-batch", "resnet18", *MB_ARGS, "--solver", "checkpoint-all", "--limit", "1")
    assert text.code == 0 and text.out.strip().splitlines()[-1].startswith("note: the graph's sizes")
    chain = run_cli("max-batch", "resnet18", "--memory", "3MB", "--image-size", "64", "--width", "4", "--depth", "1",
                    "--limit", "1", "--json")
    assert chain.code == 0 and "fake-tensor profile" in chain.json()["note"]  # kernel scratch not in its sizes
    assert "--batch 1 --budget" in chain.json()["note"]
