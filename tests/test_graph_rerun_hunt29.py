"""Hunt 29: `memsched plot` of a pipeline partition whose layer ``order`` is not a topological
permutation of the layers is refused as bad input (``cannot draw this partition: ...``, exit 2, as
`memsched simulate` calls it an invalid schedule) instead of an internal error; the graph executor's
predicted memory of a step that computes a backward node (or the loss) again leaves out the parameter
gradients only its first computation makes, so that it equals, step by step, what the tracker measures.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import run_cli
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import Partition, load

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data" / "pipeline"
MLP7 = DATA / "mlp7.chain.json"
STAGES = [(0, 1, 1), (2, 3, 1), (4, 6, 1)]
BAD_ORDERS = {
    "not topological": ([0, 1, 2, 3, 4, 6, 5], "not topological"),
    "too short": ([0, 1, 2], "permutation of the layers"),
    "duplicate": ([0, 1, 2, 3, 4, 5, 5], "permutation of the layers"),
}


# ---------------------------------------------------------------------------- 1. plot: a partition's bad order
def _partition_json(order: list[int]) -> dict:
    return {"format": "memsched.partition/1", "schedule": "1f1b", "devices": 3, "order": order,
            "stages": [{"first_layer": a, "last_layer": b} for a, b, _ in STAGES]}


@pytest.mark.parametrize("case", sorted(BAD_ORDERS))
def test_plot_refuses_a_partition_whose_order_is_not_a_topological_permutation(tmp_path, case):
    order, why = BAD_ORDERS[case]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_partition_json(order)))
    sim = run_cli("simulate", MLP7, path)
    assert sim.code == 2 and "invalid schedule" in sim.err and why in sim.err
    res = run_cli("plot", MLP7, path, "-o", tmp_path / "fig.png")
    assert res.code == 2, res.err
    assert "cannot draw this partition" in res.err and why in res.err and "internal error" not in res.err
    assert not (tmp_path / "fig.png").exists()


@pytest.mark.parametrize("case", sorted(BAD_ORDERS))
def test_pipeline_timeline_refuses_a_bad_order_with_input_error(case):
    from memsched.experiments.plotting.adapters import pipeline_timeline

    order, why = BAD_ORDERS[case]
    part = dataclasses.replace(Partition.from_bounds(STAGES, devices=3), order=order)
    with pytest.raises(InputError, match=f"cannot draw this partition: .*{why}"):
        pipeline_timeline(load(MLP7), part)


def test_a_valid_order_is_still_drawn():
    from memsched.experiments.plotting.adapters import pipeline_timeline

    part = dataclasses.replace(Partition.from_bounds(STAGES, devices=3), order=list(range(7)))
    assert pipeline_timeline(load(MLP7), part).bars


# ---------------------------------------------------------------------------- 2. graph: a backward node run again
def _tiny(head: bool):
    """(blocks, loss_fn, input, target, measured graph with tapes) of a two-layer MLP whose last
    layer's parameter gradients (32 x 256 + 256 floats) dominate its backward's temporaries."""
    torch = pytest.importorskip("torch")
    from memsched.models.graph.export import export_training_graph
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(256, 64)

        def forward(self, out, target):
            return ((self.lin(out) - target) ** 2).mean()

    blocks = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 256))
    x = torch.randn(2, 4)
    loss_fn = Head() if head else nn.MSELoss()
    target = torch.randn(2, 64 if head else 256)
    graph = export_training_graph(blocks, example_input=x, loss_fn=loss_fn, target=target, cost="measured",
                                  ram="tape", repeats=1, warmup=0)
    return blocks, loss_fn, x, target, graph


def _twice(graph, name: str) -> list[int]:
    """The graph's order (store-all) with node `name` computed again right after its first computation."""
    seq = list(range(graph.n))
    v = graph.names.index(name)
    k = seq.index(v)
    return seq[:k + 1] + [v] + seq[k + 1:]


def _measured_and_predicted(blocks, loss_fn, x, target, graph, seq):
    from memsched.models.chain.executor import reference_step
    from memsched.models.graph.executor import GraphExecutor
    from memsched.models.measure import compare_gradients
    from memsched.solvers.graph import simulate

    executor = GraphExecutor(blocks, loss_fn, graph, x)
    step = executor.step(seq, x, target, seed=0, measure_time=False, trace=True)
    _, ref, _ = reference_step(executor.blocks, loss_fn, x, target, seed=0)
    ok, msg = compare_gradients(step.grads, ref)
    assert ok, msg
    predicted = executor.predicted_memory(seq, simulate(graph, seq), "tracker")
    assert len(step.trace) == len(seq)
    return [t.measured_during for t in step.trace], predicted, step


def test_a_backward_node_computed_again_is_predicted_to_the_byte():
    """B of the last linear runs twice: the second computation makes no parameter gradient (they are
    accumulated once), so its temporaries are not charged again; every step's tracker peak is the
    prediction, and the step's predicted peak is the first computation's."""
    blocks, loss_fn, x, target, graph = _tiny(head=False)
    name = "grad_2.linear"
    temps = graph.meta["temporaries"]["tracker"][name]
    assert temps >= (32 * 256 + 256) * 4  # its weight's and bias's gradients
    seq = _twice(graph, name)
    measured, predicted, step = _measured_and_predicted(blocks, loss_fn, x, target, graph, seq)
    assert measured == predicted, [(graph.names[v], m, p) for v, m, p in zip(seq, measured, predicted) if m != p]
    first, again = (s for s, v in enumerate(seq) if graph.names[v] == name)
    assert predicted[first] - predicted[again] == (32 * 256 + 256) * 4
    assert step.tracker_predicted_peak in (None, max(predicted)) and step.peak_memory == max(measured)


def test_the_loss_computed_again_leaves_out_its_own_parameters_gradients():
    """A loss module with a parameter (a linear head) gives it its gradient once: its recomputation is
    charged without it, to the byte."""
    blocks, loss_fn, x, target, graph = _tiny(head=True)
    seq = _twice(graph, "loss")
    measured, predicted, _ = _measured_and_predicted(blocks, loss_fn, x, target, graph, seq)
    assert measured == predicted, [(graph.names[v], m, p) for v, m, p in zip(seq, measured, predicted) if m != p]
    first, again = (s for s, v in enumerate(seq) if graph.names[v] == "loss")
    assert predicted[first] > predicted[again]


def test_the_prediction_of_a_rerun_stays_within_the_simulators_charge():
    """The solvers' model charges the workspace W_v on every computation (conservative): the executor's
    prediction of a recomputation is at most the simulator's memory at that step."""
    from memsched.models.graph.executor import GraphExecutor
    from memsched.solvers.graph import simulate

    blocks, loss_fn, x, _, graph = _tiny(head=False)
    name = "grad_2.linear"
    seq = _twice(graph, name)
    sim = simulate(graph, seq)
    executor = GraphExecutor(blocks, loss_fn, graph, x)
    for method in ("tracker", "allocator"):
        predicted = executor.predicted_memory(seq, sim, method)
        assert all(p <= int(m) for p, m in zip(predicted, sim.memory))
    first, again = (s for s, v in enumerate(seq) if graph.names[v] == name)
    assert int(sim.memory[first]) - int(sim.memory[again]) == 0  # the model charges W_v both times
    skipped = executor.rerun_gradient_bytes(seq)
    assert skipped[again] == (32 * 256 + 256) * 4 and skipped[first] == 0 and sum(skipped) == skipped[again]
