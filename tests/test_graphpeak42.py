"""The executor's predicted peak for schedules that recompute forward nodes (models.graph.executor).

`test_models_graph_profile` solved its checkpointing schedules on measured times, so which
schedule it ran changed with the machine's load; some of them were predicted 5% above what both
memory methods measured. Two charges were wrong, found by running many schedules (dtr and
checkmate on randomly scaled times) and comparing each step's prediction with the allocator's
events:

- a forward node's ``cost_ram`` (``ram="tape"``) is what its computation *with* a tape keeps: its
  output and the tape's saved tensors (dropout's mask, layer norm's statistics, attention's
  weights). A computation that keeps no tape (one recomputed before its B_v uses it) keeps its
  output alone, and a tape's saved tensors go at the last B_v that uses it, yet the simulator
  charges the whole copy until its last consumer (`GraphExecutor.untaped_excess`);
- the CPU RNG state a run keeps after the loss (when a random node is computed after it) is taken
  when the loss is done, its temporaries freed: it was charged on top of them.

Step by step, two smaller charges are profiled too: a computation without a tape runs under
``torch.no_grad()`` (attention then holds fewer of its weights at once: ``meta["untaped_temporaries"]``),
and a backward node that drops its tape frees the tape's saved tensors before its last gradient is
made (``meta["released"]``).

Here the schedules are fixed (the graph order with chosen forward nodes recomputed just before
their backward nodes), so the test does not depend on timings.
"""

from __future__ import annotations

import pytest
from conftest import order_with_recomputations

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import reference_step  # noqa: E402
from memsched.models.graph.executor import GraphExecutor  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.measure import compare_gradients  # noqa: E402
from memsched.models.zoo import build_model  # noqa: E402
from memsched.solvers.graph import simulate  # noqa: E402

torch.set_num_threads(1)

_CACHE: dict[str, tuple] = {}


def _setup():
    if "gpt2" not in _CACHE:
        model = build_model("gpt2", device="cpu", seed=0, batch=2, seq_len=8, width=16, depth=2, vocab=64)
        graph = export_training_graph(model, cost="measured", ram="tape", repeats=1, warmup=0)
        executor = GraphExecutor(model.blocks, model.loss_fn, graph, model.example_input)
        _, ref, _ = reference_step(model.blocks, model.loss_fn, model.example_input, model.target, seed=0)
        _CACHE["gpt2"] = (model, graph, executor, ref)
    return _CACHE["gpt2"]


def _recomputing(graph, executor, kinds: tuple[str, ...]) -> list[int]:
    """The graph's order with every forward node whose name ends in one of `kinds` (".drop", ...)
    computed again just before its backward node: its first computation keeps no tape."""
    again = {b: v for v, b in executor.bwd_of.items() if graph.names[v].rsplit(".", 1)[-1].startswith(kinds)}
    return order_with_recomputations(graph.n, again)


@pytest.mark.parametrize("kinds", [("drop",), ("scaled_dot_product_attention",), ("ln",),
                                   ("drop", "scaled_dot_product_attention", "ln")])
def test_recomputed_forward_nodes_are_predicted_by_both_methods(kinds):
    model, graph, executor, ref = _setup()
    seq = _recomputing(graph, executor, kinds)
    assert len(seq) > graph.n
    sim = simulate(graph, seq)
    assert sim.valid, sim.violation
    step = executor.step(seq, model.example_input, model.target, seed=0, measure_time=False, trace=True,
                         independent=True)
    ok, msg = compare_gradients(step.grads, ref)
    assert ok, msg
    tracker = executor.predicted_memory(seq, sim, "tracker")
    alloc = max(executor.predicted_memory(seq, sim, "allocator"))
    assert abs(step.peak_memory / max(tracker) - 1) <= 0.01, (step.peak_memory, max(tracker))
    assert step.independent_peak is not None
    assert abs(step.independent_peak / alloc - 1) <= 0.01, (step.independent_peak, alloc)
    # step by step, the tracker's bytes while each node runs are its prediction: a computation without
    # a tape (under no_grad, attention holds fewer weights at once) and an attention's backward (it
    # frees its tape's weights before its last gradient is made) included
    worst = max(abs(t.measured_during - p) for t, p in zip(step.trace, tracker))
    assert worst <= 0.005 * max(tracker), [(graph.names[v], t.measured_during, p)
                                           for v, t, p in zip(seq, step.trace, tracker) if t.measured_during != p]


def test_a_recomputed_dropout_keeps_its_output_alone():
    """The first computation of a recomputed dropout keeps no mask: from the step after it the
    prediction charges its output's bytes, which the profile records (``meta["untaped"]``)."""
    model, graph, executor, _ = _setup()
    untaped = graph.meta["untaped"]
    drops = [v for v in executor.bwd_of if graph.names[v].rsplit(".", 1)[-1].startswith("drop")]
    assert drops and all(0 < untaped[graph.names[v]] < graph.cost_ram[v] for v in drops)
    seq = _recomputing(graph, executor, ("drop",))
    sim = simulate(graph, seq)
    less = executor.untaped_excess(seq, sim.retention_end)
    first = seq.index(drops[0])
    assert less[first] == 0  # while it runs, the mask is drawn anyway
    assert less[first + 1] == graph.cost_ram[drops[0]] - untaped[graph.names[drops[0]]]
    assert less[-1] == 0 and executor.untaped_excess(list(range(graph.n)), simulate(graph, range(graph.n))
                                                     .retention_end) == [0] * graph.n
