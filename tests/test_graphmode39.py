"""ScheduledGraph in train and eval modes: the plan is traced in the mode each step runs in
(fx bakes ``self.training`` in as a constant), and a network whose traced graph changes with the
mode raises InputError naming ``training`` before anything runs. The plan of another mode is built
from the batch of the step that first runs in it: the wrapper keeps no example input."""

from __future__ import annotations

import copy
import gc

import pytest
import torch
from memsched.solvers.errors import InputError
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.nn import functional as F

import memsched


class _ReadsTraining(nn.Module):
    """A dropout whose ``training`` argument is ``self.training`` (gpt2's attention does this)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.a(x))
        return self.c(F.dropout(F.relu(self.b(h)), 0.5, self.training) + h)


class _BranchesOnTraining(_ReadsTraining):
    """A dropout traced only in training mode: another graph in eval mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.a(x))
        g = F.relu(self.b(h))
        if self.training:
            g = F.dropout(g, 0.5)
        return self.c(g + h)


class _ModeFree(_ReadsTraining):
    """Reads no ``self.training``: one graph and the same values in every mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.a(x))
        return self.c(torch.tanh(self.b(h)) + h)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)


def _scheduled(net: nn.Module, build_mode: str, x: torch.Tensor, y: torch.Tensor) -> memsched.ScheduledGraph:
    """`net` profiled, solved and wrapped, the wrapper built with the net in `build_mode`."""
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph")
    plan = memsched.solve(graph, 1e9, solver="checkmate", time_limit=5)
    getattr(net, build_mode)()
    return memsched.ScheduledGraph(net, plan, F.cross_entropy, example_input=x)


def _check_like_autograd(cls: type[nn.Module], build_mode: str, modes: list[str]) -> None:
    torch.manual_seed(0)
    ref = cls()
    x, y = _data()
    net = copy.deepcopy(ref)
    sg = _scheduled(net, build_mode, x, y)
    for mode in modes:
        getattr(ref, mode)()
        getattr(sg, mode)()
        ref.zero_grad()
        sg.zero_grad()
        torch.manual_seed(5)
        expected = F.cross_entropy(ref(x), y)
        expected.backward()
        torch.manual_seed(5)
        loss = sg.step(x, y)
        assert float(loss) == pytest.approx(expected.item(), rel=1e-6, abs=1e-7), mode
        for (name, p), q in zip(ref.named_parameters(), net.parameters()):
            assert p.grad is not None and q.grad is not None, (mode, name)
            assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7), (mode, name)


@pytest.mark.parametrize("build_mode, modes", [("train", ["train", "eval", "train"]),
                                               ("eval", ["eval", "train", "eval"])])
def test_reads_training_matches_autograd_in_each_mode(build_mode: str, modes: list[str]) -> None:
    _check_like_autograd(_ReadsTraining, build_mode, modes)


@pytest.mark.parametrize("build_mode, modes", [("train", ["train", "eval", "train"]),
                                               ("eval", ["eval", "train"])])
def test_mode_free_net_as_before(build_mode: str, modes: list[str]) -> None:
    _check_like_autograd(_ModeFree, build_mode, modes)


@pytest.mark.parametrize("build_mode, other", [("train", "eval"), ("eval", "train")])
def test_graph_changing_with_mode_raises(build_mode: str, other: str) -> None:
    torch.manual_seed(0)
    net = _BranchesOnTraining()
    x, y = _data()
    getattr(net, build_mode)()
    sg = _scheduled(net, build_mode, x, y)
    getattr(sg, other)()
    sg.zero_grad(set_to_none=True)
    with pytest.raises(InputError) as err:
        sg.step(x, y)
    assert err.value.field == "training"
    assert f"another graph in {other if other == 'eval' else 'training'} mode" in str(err.value)
    assert "build the ScheduledGraph (and its plan) in the mode you run it in" in str(err.value)
    assert all(p.grad is None for p in net.parameters())  # raised before anything ran
    getattr(sg, build_mode)()  # back in the plan's mode: steps run again
    assert torch.isfinite(sg.step(x, y))


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


def test_the_step_returns_the_loss_in_its_own_dtype() -> None:
    """A float64 network's loss is float64, as plain autograd's (it was made a float32 tensor)."""
    torch.manual_seed(0)
    net = _ModeFree().double()
    ref = copy.deepcopy(net)
    x, y = _data()
    x = x.double()
    sg = _scheduled(net, "train", x, y)
    expected = F.cross_entropy(ref(x), y)
    loss = sg.step(x, y)
    assert loss.dtype == torch.float64 and loss.device == x.device and not loss.requires_grad
    assert loss.item() == expected.item()
