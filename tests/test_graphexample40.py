"""ScheduledGraph keeps no batch: the plan of another training mode is built from the batch of
the step that first runs in it, not from a stored copy of the example input (on a GPU that copy
held a batch of memory for the wrapper's life)."""

from __future__ import annotations

import copy
import gc

import pytest
import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.nn import functional as F

import memsched


class _ReadsTraining(nn.Module):
    """A dropout whose ``training`` argument is ``self.training``: another plan per mode."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.a(x))
        return self.c(F.dropout(F.relu(self.b(h)), 0.5, self.training) + h)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)


def test_the_wrapper_keeps_no_reference_to_the_example_input() -> None:
    torch.manual_seed(0)
    net = _ReadsTraining()
    x, y = _data()
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph")
    plan = memsched.solve(graph, 1e9, solver="checkmate", time_limit=5)
    example = x.clone()
    storage = StorageWeakRef(example.untyped_storage())
    sg = memsched.ScheduledGraph(net, plan, F.cross_entropy, example_input=example)
    del example
    gc.collect()
    assert storage.expired(), "the wrapper still holds the example input's storage"
    # a step in the other mode builds its plan from its own batch and matches plain autograd
    ref = copy.deepcopy(net)
    ref.eval()
    sg.eval()
    expected = F.cross_entropy(ref(x), y)
    expected.backward()
    loss = sg.step(x, y)
    assert float(loss) == pytest.approx(expected.item(), rel=1e-6, abs=1e-7)
    for p, q in zip(ref.parameters(), net.parameters()):
        assert q.grad is not None and torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6)
