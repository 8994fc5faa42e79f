"""ScheduledGraph puts back the buffers a recomputed op is handed as arguments: a network calling
``F.batch_norm(x, self.running_mean, self.running_var, training=True)`` itself (no BatchNorm module
call) had its running statistics updated once more per recomputation."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from memsched.solvers.graph import simulate  # noqa: E402
from torch import nn  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)


class FunctionalNorm(nn.Module):
    """Linear, a hand-written batch norm over registered buffers, ReLU, Linear, with a skip."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(8, 8)
        self.register_buffer("running_mean", torch.zeros(8))
        self.register_buffer("running_var", torch.ones(8))
        self.l2 = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.batch_norm(self.l1(x), self.running_mean, self.running_var, training=True, momentum=0.5)
        return self.l2(torch.relu(h) + x)


def _recompute_all(graph) -> list[int]:
    """Every F_v computed again right before its B_v (most recomputation)."""
    idx = {n: i for i, n in enumerate(graph.names)}
    seq: list[int] = []
    for v, name in enumerate(graph.names):
        if name.startswith("grad_") and name[5:] in idx:
            seq.append(idx[name[5:]])
        seq.append(v)
    assert simulate(graph, seq).valid
    return seq


def test_functional_batch_norm_statistics_are_updated_once():
    torch.manual_seed(0)
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    net = FunctionalNorm()
    twin = copy.deepcopy(net)
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph", repeats=1)
    seq = _recompute_all(graph)
    norm = [n for n in graph.names if "batch_norm" in n]
    assert norm and sum(graph.names[v] == norm[0] for v in seq) == 2  # the norm is recomputed
    trainer = memsched.ScheduledGraph(net, seq, F.cross_entropy, example_input=x, graph=graph)
    for _ in range(2):
        trainer.step(x, y)
        F.cross_entropy(twin(x), y).backward()
        torch.testing.assert_close(net.running_mean, twin.running_mean, rtol=0, atol=0)
        torch.testing.assert_close(net.running_var, twin.running_var, rtol=0, atol=0)
    for (name, p), (_, q) in zip(net.named_parameters(), twin.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)
