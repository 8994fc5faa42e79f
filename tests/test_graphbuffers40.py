"""Session 40: a graph recomputation ran on the buffers its node's first computation had already updated.

`models.graph.executor.GraphExecutor._forward` copied the buffers a recomputed forward node changes as
they were at the recomputation (already updated by the node's first computation in the step), ran the
node and put them back: the recomputation started one update ahead of what plain autograd's single
forward saw, as the chain executor's did (tests/test_recomputebuffers40.py). BatchNorm in training mode
hides this (its output reads batch statistics); spectral_norm does not: each forward in training mode runs
one power iteration that updates ``u`` and ``v`` in place, and the weight it uses depends on the updated
``u``. A recomputed spectral-normed node (DTR's and Checkmate's plans recompute it) so gave gradients
off by about 1e-6 in float64 (plain autograd's agree to 1e-16).

Now the first computation of a node the step computes again copies its buffers first; each recomputation
runs on that copy and puts back what the first computation left. Both copies (`BufferCopies`) are made
before the step and kept by the executor (`GraphExecutor.buffer_copies_for`), refilled in place during it,
so a step allocates nothing for them and the measured peaks still equal the predictions, step by step.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
if not (hasattr(torch.nn.utils, "parametrizations") and hasattr(torch.nn.utils.parametrizations, "spectral_norm")):
    pytest.skip("torch.nn.utils.parametrizations.spectral_norm is missing", allow_module_level=True)

from conftest import assert_as_plain, plain_reference  # noqa: E402
from memsched.models.graph.executor import GraphExecutor  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.solvers.graph import Graph, simulate  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)

SN = "0.sn"  # the spectral-normed Linear's node


class _Net(nn.Module):
    """A residual network around a spectral-normed Linear (its forward in training mode updates ``u``, ``v``)."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.sn = nn.utils.parametrizations.spectral_norm(nn.Linear(16, 16))
        self.l3 = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.l1(x))
        return self.l3(torch.tanh(self.sn(h)) + h)


pytestmark = pytest.mark.usefixtures("float64_default")  # conftest: exact comparisons in float64


def _setup() -> tuple[_Net, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    net = _Net()
    return net, torch.randn(4, 8), torch.randint(0, 3, (4,))


def _forward_twice(graph: Graph) -> list[int]:
    """Every forward node, then every forward node again (each a recomputation), the loss, the backward."""
    forward = [v for v in range(graph.n) if not graph.backward[v] and graph.names[v] != "loss"]
    rest = [v for v in range(graph.n) if v not in forward]
    return forward + forward + rest


def test_a_second_forward_gives_another_output() -> None:
    """What the old executor's recomputation computed (the node after one update of ``u``) differs from
    the first computation's output: else the tests below could not tell the two apart."""
    sn = _setup()[0].sn
    h = torch.randn(4, 16)
    with torch.no_grad():
        assert (sn(h) - sn(h)).abs().max().item() > 1e-8


@pytest.mark.parametrize(("solver", "budget"), [("dtr", "81%"), ("checkmate", "84%")])
def test_a_solver_plan_recomputing_spectral_norm_gets_plain_gradients(solver: str, budget: str) -> None:
    """A plan of a graph with counted costs (the same every run) that recomputes the spectral norm: DTR's
    computes it three times, Checkmate's twice."""
    net, x, y = _setup()
    graph = export_training_graph([copy.deepcopy(net)], example_input=x, loss_fn=F.cross_entropy, target=y,
                                  cost="flops", ram="tape")
    plan = memsched.solve(graph, budget, solver=solver)
    assert plan.found
    trainer = memsched.ScheduledGraph(net, plan, F.cross_entropy, example_input=x, graph=graph)
    assert [graph.names[v] for v in trainer.seq].count(SN) >= 2, "the plan does not recompute the spectral norm"
    ref = plain_reference(net, x, y)
    trainer.step(x, y)  # before: gradients off by 1e-6
    assert_as_plain(net, ref)


def test_two_recomputations_and_two_steps_stay_with_plain_autograd() -> None:
    """The spectral norm computed three times in a step (the copy from before its first computation serves
    both recomputations), and a second step, follow plain training."""
    net, x, y = _setup()
    graph = export_training_graph([copy.deepcopy(net)], example_input=x, loss_fn=F.cross_entropy, target=y)
    sn = graph.names.index(SN)
    seq = _forward_twice(graph)
    seq.insert(seq.index(graph.names.index("grad_" + SN)), sn)  # a third computation, right before its backward
    assert simulate(graph, seq).valid and seq.count(sn) == 3
    trainer = memsched.ScheduledGraph(net, seq, F.cross_entropy, example_input=x, graph=graph)
    ref = copy.deepcopy(net)
    for _ in range(2):
        for p in (*net.parameters(), *ref.parameters()):
            p.grad = None
        trainer.step(x, y)
        F.cross_entropy(ref(x), y).backward()
        assert_as_plain(net, ref)


def test_a_measured_step_meets_its_predictions_step_by_step() -> None:
    """Both copies (u and v, 256 B each) are made before the step (`buffer_copies_for`, `buffer_copy_bytes`)
    and refilled in place: every step's measured peak equals its prediction, and so do the step's tracker
    and allocator-probe peaks, in a second step too (the copies kept by the executor)."""
    net, x, y = _setup()
    graph = export_training_graph([copy.deepcopy(net)], example_input=x, loss_fn=F.cross_entropy, target=y,
                                  cost="measured", ram="tape", repeats=1, warmup=0)
    seq = _forward_twice(graph)
    executor = GraphExecutor(net, F.cross_entropy, graph, x)
    ref = plain_reference(net, x, y)
    result = executor.step(seq, x, y, seed=0, measure_time=False, trace=True)
    assert_as_plain(net, ref)
    first = seq.index(graph.names.index(SN))
    assert executor.buffer_copy_bytes(seq) == 2 * (2 * 16 * 8)  # two copies of u and v, float64
    for s, t in enumerate(result.trace):
        # the spectral norm's first computation keeps no tape (its recomputation does, for its backward),
        # but the graph (``ram="tape"``) charges its tape until its consumer: over the measurement there
        # (by the same bytes before this change); exact from then on
        assert t.measured_during <= t.predicted_during, (s, graph.names[seq[s]])
        if s > first + 1:
            assert t.measured_during == t.predicted_during, (s, graph.names[seq[s]])
    assert result.peak_memory == result.tracker_predicted_peak
    probed = executor.step(seq, x, y, seed=0, measure_memory=False, measure_time=False, independent=True)
    assert probed.independent_peak == probed.predicted_peak
    again = executor.step(seq, x, y, seed=0, measure_time=False, trace=True)
    assert [t.measured_during for t in again.trace] == [t.measured_during for t in result.trace]
