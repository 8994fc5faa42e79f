"""Edge cases of the graph export and executor (models.graph): gradient stops inside a module
(``torch.no_grad()``, ``.detach()``), parameters the forward does not use, in-place ops, and a
`ScheduledGraph` step on a batch of another shape than its example. CPU, small sizes.

The gradient check: every schedule's parameter gradients equal plain autograd's
(`models.chain.executor.reference_step`, same seed), including which parameters have one.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from memsched.models.chain.executor import reference_step  # noqa: E402
from memsched.models.graph.executor import GraphExecutor  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.graph.training import ScheduledGraph  # noqa: E402
from memsched.models.measure import compare_gradients  # noqa: E402
from memsched.solvers import registry  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.graph import reference_peak  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(1)


def _ce(out, target):
    return F.cross_entropy(out, target)


def _schedules(graph) -> dict[str, list[int]]:
    """Store-all (the graph's order) and DTR at 60% of its peak (recomputations)."""
    out = {"store-all": list(range(graph.n))}
    res = registry.solve("graph", graph, "dtr", int(0.6 * reference_peak(graph)))
    if res.schedule is not None:
        out["dtr"] = res.schedule.indices(graph)
    return out


def _matches_plain_autograd(net: nn.Module, x, y, **export) -> object:
    """Export `net`, run each schedule of `_schedules` and compare with plain autograd; the graph."""
    graph = export_training_graph(net, example_input=x, loss_fn=_ce, target=y, **export)
    executor = GraphExecutor(net, _ce, graph, x)
    ref_loss, ref, _ = reference_step(net, _ce, x, y, seed=0)
    for label, seq in _schedules(graph).items():
        result = executor.step(seq, x, y, seed=0, measure_time=False, measure_memory=False)
        ok, msg = compare_gradients(result.grads, ref)
        assert ok, f"{label}: {msg}"
        assert abs(result.loss - ref_loss) < 1e-5
    return graph


# ------------------------------------------------------------------ gradient stops
class _Frozen(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            return torch.tanh(self.l(x))


class _Detached(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.l(x)).detach() * 2


class _HalfDetached(nn.Module):
    """One path detached, one not: the gradient flows through the second only."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.l(x))
        return h.detach() * h


class _Net(nn.Module):
    def __init__(self, mid: nn.Module) -> None:
        super().__init__()
        self.a, self.mid, self.b, self.c = nn.Linear(8, 8), mid, nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        return self.c(torch.tanh(self.b(self.mid(torch.tanh(self.a(x))))))


@pytest.mark.parametrize("mid", [_Frozen, _Detached, _HalfDetached])
def test_gradient_stops_inside_a_module(mid):
    torch.manual_seed(0)
    net = _Net(mid())
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    graph = _matches_plain_autograd(net, x, y)
    stopped = mid is not _HalfDetached
    assert ("grad_0.mid_l" in graph.names) is not stopped  # no backward node behind the stop
    assert ("grad_0.a" in graph.names) is not stopped


# ------------------------------------------------------------------ unused parameters
class _AuxHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.aux = nn.Linear(8, 16), nn.Linear(16, 4), nn.Linear(16, 4)  # aux: not used

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def test_unused_parameters_get_no_gradient():
    torch.manual_seed(0)
    net = _AuxHead()
    twin = copy.deepcopy(net)
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    graph = export_training_graph(net, example_input=x, loss_fn=_ce, target=y)
    trainer = ScheduledGraph(net, list(range(graph.n)), _ce, example_input=x, graph=graph)
    opt = torch.optim.AdamW(net.parameters(), lr=0.1, weight_decay=0.1)
    opt_twin = torch.optim.AdamW(twin.parameters(), lr=0.1, weight_decay=0.1)
    for _ in range(2):
        opt.zero_grad()
        trainer.step(x, y)
        opt.step()
        opt_twin.zero_grad()
        _ce(twin(x), y).backward()
        opt_twin.step()
    assert net.aux.weight.grad is None and net.aux.bias.grad is None
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(p, q, atol=1e-6)  # weight decay leaves the unused head alone
    executor = GraphExecutor(net, _ce, graph, x)  # a measured step covers the parameters autograd does
    _, ref, _ = reference_step(net, _ce, x, y, seed=0)
    assert compare_gradients(executor.step(list(range(graph.n)), x, y, measure_time=False).grads, ref)[0]


# ------------------------------------------------------------------ batch of another shape
class _Centred(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        return self.b(h - h.sum(0, keepdim=True) / h.size(0))  # h.size(0) is a constant of the plan


def test_step_on_another_batch_size_is_bad_input():
    torch.manual_seed(0)
    net = _Centred()
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    graph = export_training_graph(net, example_input=x, loss_fn=_ce, target=y)
    trainer = ScheduledGraph(net, list(range(graph.n)), _ce, example_input=x, graph=graph)
    with pytest.raises(InputError) as err:
        trainer.step(x[:3], y[:3])
    assert err.value.field == "inputs" and "\n" not in str(err.value)
    assert "(6, 8)" in str(err.value) and "(3, 8)" in str(err.value) and "drop_last" in str(err.value)
    with pytest.raises(InputError, match="float64"):
        trainer.step(x.double(), y)
    short = ScheduledGraph(net, list(range(graph.n)), _ce, example_input=x[:3], graph=graph)  # the documented way
    net.zero_grad()
    loss = short.step(x[:3], y[:3])
    assert torch.allclose(loss, _ce(net(x[:3]), y[:3]).detach())


# ------------------------------------------------------------------ in-place ops
class _Residual(nn.Module):
    """torchvision's BasicBlock pattern: ``out += identity``, ``nn.ReLU(inplace=True)``."""

    def __init__(self, d: int, inplace: bool) -> None:
        super().__init__()
        self.l1, self.l2, self.bn = nn.Linear(d, d), nn.Linear(d, d), nn.BatchNorm1d(d)
        self.act, self.drop, self.inplace = nn.ReLU(inplace=inplace), nn.Dropout(0.3, inplace), inplace

    def forward(self, x):
        out = self.act(self.bn(self.drop(self.l1(x))))
        out = self.l2(out)
        if self.inplace:
            out += x
            out.mul_(0.5)
            torch.clamp_(out, max=2.0)
            F.relu(out, True)  # positional inplace, result unused: later reads see it
            return out
        return F.relu(torch.clamp((out + x) * 0.5, max=2.0))


def _residual_net(inplace: bool) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), _Residual(16, inplace), _Residual(16, inplace), nn.Linear(16, 4))


@pytest.mark.parametrize("granularity", ["op", "module"])
def test_in_place_ops_match_plain_autograd(granularity):
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    graph = _matches_plain_autograd(_residual_net(True), x, y, granularity=granularity)
    plain = export_training_graph(_residual_net(False), example_input=x, loss_fn=_ce, target=y,
                                  granularity=granularity)
    assert graph.n == plain.n and sorted(graph.edges) == sorted(plain.edges)


def test_in_place_activation_blocks():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True), nn.Linear(16, 16), nn.ReLU(inplace=True),
                        nn.Linear(16, 4))
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    for granularity in ("op", "module"):
        _matches_plain_autograd(net, x, y, granularity=granularity)
    assert net[1].inplace  # the user's modules are left as they are


class _Aliased(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 4)

    def forward(self, x):
        h = self.l(x)
        v = h.view(-1)
        h.mul_(2)  # v sees the change: out-of-place would not
        return h + v.view(h.shape)


def test_in_place_op_on_an_aliased_tensor_is_bad_input():
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    with pytest.raises(InputError) as err:
        export_training_graph(_Aliased(), example_input=x, loss_fn=_ce, target=y)
    assert "mul_" in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------ views of parameters
class _ParameterViews(nn.Module):
    """Reads its parameters through views (a transpose, a slice) in plain functions, not through
    modules: the gradient reaches each parameter through its view."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8) / 3)
        self.v = nn.Parameter(torch.randn(8, 12) / 3)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.tanh(x @ self.w.t())
        h = torch.relu(h @ self.v[:, :8])
        return self.head(h)


@pytest.mark.parametrize("granularity", ["op", "module"])
def test_parameters_read_through_views_are_trained(granularity):
    """`x @ self.w.t()`: the graph has a backward node for the product and every schedule gives
    `w` (and the sliced `v`) plain autograd's gradient. A view of a parameter was recorded
    detached: the product got no backward and `w` no gradient under any schedule."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), _ParameterViews())
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    graph = _matches_plain_autograd(net, x, y, granularity=granularity)
    if granularity == "op":
        assert any(name.startswith("grad_") and "matmul" in name for name in graph.names)
