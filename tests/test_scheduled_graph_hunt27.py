"""ScheduledGraph against plain autograd (hunt 27): parameters frozen or unfrozen after the
plan is made, a loss_fn with its own parameters, BatchNorm statistics under recomputation (and, hunt 28,
the running statistics a functional ``F.batch_norm`` is handed), a step under torch.inference_mode(), and
the gradients a rejected step leaves."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.graph import simulate  # noqa: E402
from torch import nn  # noqa: E402

import memsched  # noqa: E402

torch.set_num_threads(1)


class Skip(nn.Module):
    """A tiny network with a skip connection (not a chain), BatchNorm and dropout."""

    def __init__(self, bn: bool = True, drop: float = 0.3) -> None:
        super().__init__()
        self.l1 = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8) if bn else nn.Identity()
        self.d = nn.Dropout(drop)
        self.l2 = nn.Linear(8, 8)
        self.l3 = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.d(torch.relu(self.bn(self.l1(x))))
        return self.l3(self.l2(h) + x)


class HeadLoss(nn.Module):
    """A loss with parameters of its own: a linear head and a temperature."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 3)
        self.t = nn.Parameter(torch.tensor(2.0))

    def forward(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.head(out) / self.t, y)


def _recompute_all(graph) -> list[int]:
    """The graph's order with every F_v computed again right before its B_v (most recomputation)."""
    idx = {n: i for i, n in enumerate(graph.names)}
    seq: list[int] = []
    for v, name in enumerate(graph.names):
        if name.startswith("grad_") and name[5:] in idx:
            seq.append(idx[name[5:]])
        seq.append(v)
    assert simulate(graph, seq).valid
    return seq


def _data(classes: int = 4):
    torch.manual_seed(0)
    return torch.randn(6, 8), torch.randint(0, classes, (6,))


def _trainer(net: nn.Module, x, y, loss_fn=F.cross_entropy):
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=loss_fn, problem="graph", repeats=1)
    return memsched.ScheduledGraph(net, _recompute_all(graph), loss_fn, example_input=x, graph=graph)


def _same_grads(a: nn.Module, b: nn.Module) -> None:
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)


def _same_buffers(a: nn.Module, b: nn.Module) -> None:
    for (name, p), (_, q) in zip(a.named_buffers(), b.named_buffers()):
        assert torch.equal(p, q), name


def _step_both_with_l1_weight(trainer, net: nn.Module, twin: nn.Module, x, y, *, requires_grad: bool) -> None:
    """Set ``l1.weight.requires_grad`` on both copies after wrapping, then one scheduled step on `net`
    and one plain autograd step on `twin` (same seed): their gradients must be equal."""
    for m in (net, twin):
        m.l1.weight.requires_grad_(requires_grad)
    torch.manual_seed(1)
    trainer.step(x, y)
    torch.manual_seed(1)
    F.cross_entropy(twin(x), y).backward()
    _same_grads(net, twin)


def test_freezing_after_wrapping_leaves_its_grad_none_as_autograd():
    x, y = _data()
    net = Skip(bn=False)
    twin = copy.deepcopy(net)
    trainer = _trainer(net, x, y)
    _step_both_with_l1_weight(trainer, net, twin, x, y, requires_grad=False)
    assert net.l1.weight.grad is None


def test_unfreezing_after_wrapping_gives_the_gradient():
    x, y = _data()
    net = Skip(bn=False)
    net.l1.weight.requires_grad_(False)  # its bias trains: the node has a backward node
    twin = copy.deepcopy(net)
    trainer = _trainer(net, x, y)
    _step_both_with_l1_weight(trainer, net, twin, x, y, requires_grad=True)
    assert net.l1.weight.grad is not None


def test_unfreezing_a_node_without_backward_asks_for_a_new_plan():
    x, y = _data()
    net = Skip(bn=False)
    for p in net.l1.parameters():
        p.requires_grad_(False)  # nothing of l1 trains and x needs no gradient: no backward node
    trainer = _trainer(net, x, y)
    net.l1.weight.requires_grad_(True)
    with pytest.raises(InputError, match="profile and solve the graph again") as err:
        trainer.step(x, y)
    assert err.value.field == "model" and "0.l1.weight" in str(err.value) and "\n" not in str(err.value)


def test_loss_fn_parameters_get_their_gradients():
    x, y = _data(classes=3)
    torch.manual_seed(2)
    net, loss_fn = Skip(bn=False, drop=0.0), HeadLoss()
    twin, twin_loss = copy.deepcopy(net), copy.deepcopy(loss_fn)
    trainer = _trainer(net, x, y, loss_fn)
    trainer.step(x, y)
    twin_loss(twin(x), y).backward()
    _same_grads(net, twin)
    _same_grads(loss_fn, twin_loss)
    trainer.step(x, y)  # a second step accumulates, as a second backward does
    twin_loss(twin(x), y).backward()
    _same_grads(loss_fn, twin_loss)


def test_recomputed_batchnorm_updates_its_statistics_once():
    x, y = _data()
    net = Skip(drop=0.0)
    twin = copy.deepcopy(net)
    trainer = _trainer(net, x, y)
    assert [trainer.graph.names[v] for v in trainer.seq].count("0.bn") == 2
    trainer.step(x, y)
    F.cross_entropy(twin(x), y).backward()
    assert int(net.bn.num_batches_tracked) == 1
    _same_buffers(net, twin)
    _same_grads(net, twin)


def test_batchnorm_statistics_under_a_solver_plan_that_recomputes():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64),
                        nn.ReLU(), nn.Linear(64, 4))
    twin = copy.deepcopy(net)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    graph = memsched.profile(net, example_input=x, target=y, loss_fn=F.cross_entropy, problem="graph", repeats=1)
    plan = memsched.solve(graph, "85%", solver="dtr")
    assert plan.found
    trainer = memsched.ScheduledGraph(net, plan, F.cross_entropy, example_input=x)
    names = [graph.names[v] for v in trainer.seq]
    assert any(names.count(n) > 1 for n in ("1:BatchNorm1d", "4:BatchNorm1d")), "the plan recomputes no BatchNorm"
    trainer.step(x, y)
    F.cross_entropy(twin(x), y).backward()
    _same_buffers(net, twin)
    _same_grads(net, twin)


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


def test_step_under_inference_mode_says_so():
    x, y = _data()
    trainer = _trainer(Skip(bn=False, drop=0.0), x, y)
    with torch.inference_mode(), pytest.raises(InputError, match="inference_mode") as err:
        trainer.step(x, y)
    assert err.value.field is None and "\n" not in str(err.value)


def test_rejected_target_leaves_gradients_none():
    x, y = _data()
    net = Skip()
    trainer = _trainer(net, x, y)
    with pytest.raises(InputError, match="target"):
        trainer.step(x, torch.full((6,), 9))  # a class index out of range
    assert all(p.grad is None for p in net.parameters())
