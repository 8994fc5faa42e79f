"""The drop-in `ScheduledChain` against plain autograd and ``torch.utils.checkpoint`` (CPU, tiny
networks): recomputations in the backward run under the forward's autocast state, an input
modified in place before the backward is refused, and so is ``backward(create_graph=True)``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

torch.set_num_threads(1)

Grads = list["torch.Tensor"]


def mlp() -> nn.Sequential:
    """5 blocks: Linear, Tanh, Linear, Tanh, Linear (16 -> 4 features)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def convnet() -> nn.Sequential:
    """5 blocks on 1x8x8 images: Conv, ReLU, Conv, Flatten, Linear (3 classes)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 3))


def recomputing(net: nn.Sequential):
    """`net` under the schedule that keeps a_0 only and recomputes every other activation in the backward."""
    from memsched.models.chain.training import ScheduledChain
    from memsched.solvers.chain.baselines import recompute_all_schedule

    return ScheduledChain(net, recompute_all_schedule(len(net)))


def autocast_grads(net: nn.Module, run: Callable, x: torch.Tensor, *, forward_autocast: bool = True,
                   backward_autocast: bool = False) -> Grads:
    """The parameter gradients of mean(run(x)^2) with the forward and/or the backward under CPU bfloat16 autocast."""
    for p in net.parameters():
        p.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=forward_autocast):
        loss = run(x).float().pow(2).mean()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=backward_autocast):
        loss.backward()
    return [p.grad.clone() for p in net.parameters()]


def assert_same(got: Grads, want: Grads) -> None:
    """Equal gradients (the same operations in the same dtypes; bfloat16 recomputations differ by ~1e-3)."""
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-7)


def non_reentrant(net: nn.Module) -> Callable:
    """`net` under ``torch.utils.checkpoint(use_reentrant=False)``."""
    return lambda a: checkpoint(net, a, use_reentrant=False)


# ----------------------------------------------------------------- bug 1: autocast


@pytest.mark.parametrize("make, shape", [(mlp, (8, 16)), (convnet, (2, 1, 8, 8))], ids=["mlp", "convnet"])
def test_recomputations_under_autocast_give_plain_autocast_gradients(make, shape):
    """Under CPU bfloat16 autocast, the recomputing schedule's gradients are plain autocast training's and
    non-reentrant checkpoint's (the recomputations ran in float32 before: a 4e-3 relative difference)."""
    net = make()
    x = torch.randn(*shape)
    plain = autocast_grads(net, net, x)
    assert_same(autocast_grads(net, non_reentrant(net), x), plain)
    assert_same(autocast_grads(net, recomputing(net), x), plain)


def test_a_recomputed_block_runs_under_the_forwards_autocast():
    """Block 2 runs in the forward and again in the backward (recomputations), each time under autocast:
    a bfloat16 output from float32 weights and input."""
    net, seen = mlp(), []
    net[2].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    autocast_grads(net, recomputing(net), torch.randn(4, 16))
    assert len(seen) > 1 and set(seen) == {torch.bfloat16}


def test_a_backward_under_autocast_recomputes_as_the_forward_ran_without_it():
    """Forward in float32, backward called under autocast: the recomputations stay float32 (autocast off,
    as recorded in the forward), so the gradients are plain autograd's."""
    net = mlp()
    x = torch.randn(8, 16)
    plain = autocast_grads(net, net, x, forward_autocast=False, backward_autocast=True)
    assert_same(autocast_grads(net, recomputing(net), x, forward_autocast=False, backward_autocast=True), plain)


# ----------------------------------------------------------------- bug 2: in-place input change

_INPLACE = "modified by an inplace operation"


@pytest.mark.parametrize("make, shape", [(mlp, (3, 16)), (convnet, (2, 1, 8, 8))], ids=["mlp", "convnet"])
def test_an_input_modified_in_place_before_the_backward_is_refused(make, shape):
    """``out = net(x); x.mul_(10); out.backward()`` raises as plain autograd and non-reentrant checkpoint do
    (the recomputations read the changed input: silently wrong gradients before)."""
    net = make()
    for run in (net, non_reentrant(net), recomputing(net)):
        x = torch.randn(*shape)
        loss = run(x).pow(2).mean()
        x.mul_(10)
        with pytest.raises(RuntimeError, match=_INPLACE):
            loss.backward()


def test_an_input_changed_after_the_backward_or_cloned_is_fine():
    """Changing the input after the backward, or a clone of it before, leaves plain autograd's gradients."""
    net = mlp()
    x = torch.randn(3, 16)
    for p in net.parameters():
        p.grad = None
    net(x).pow(2).mean().backward()
    want = [p.grad.clone() for p in net.parameters()]
    scheduled = recomputing(net)
    for p in net.parameters():
        p.grad = None
    mine = x.clone()
    loss = scheduled(mine).pow(2).mean()
    x.clone().mul_(10)  # an unrelated copy
    loss.backward()
    mine.mul_(10)  # after the backward
    assert_same([p.grad for p in net.parameters()], want)


def test_an_input_that_requires_grad_modified_in_place_is_refused():
    """A leaf input requiring grad, changed under no_grad before the backward: refused too."""
    net = mlp()
    x = torch.randn(3, 16, requires_grad=True)
    loss = recomputing(net)(x).pow(2).mean()
    with torch.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match=_INPLACE):
        loss.backward()
    assert x.grad is None


# ----------------------------------------------------------------- bug 3: create_graph


def test_backward_with_create_graph_is_refused_naming_it():
    """Plain autograd builds a graph of the gradients (a gradient penalty); the scheduled backward, which
    accumulates .grad without one, refuses ``create_graph=True`` instead of leaving graph-less gradients."""
    import memsched

    net = mlp()
    x = torch.randn(3, 16)
    net(x).pow(2).mean().backward(create_graph=True)
    assert net[0].weight.grad is not None and net[0].weight.grad.requires_grad  # plain: a graph to differentiate
    for p in net.parameters():
        p.grad = None
    loss = recomputing(net)(x).pow(2).mean()
    with pytest.raises(RuntimeError, match="create_graph"):
        loss.backward(create_graph=True)
    assert all(p.grad is None for p in net.parameters())
    assert "create_graph" in (memsched.ScheduledChain.__doc__ or "")


def test_a_plain_backward_still_works_after_a_refused_create_graph():
    """The refusal leaves the module usable: the next forward and backward give plain autograd's gradients."""
    net = mlp()
    x = torch.randn(3, 16)
    scheduled = recomputing(net)
    with pytest.raises(RuntimeError, match="create_graph"):
        scheduled(x).pow(2).mean().backward(create_graph=True)
    for p in net.parameters():
        p.grad = None
    net(x).pow(2).mean().backward()
    want = [p.grad.clone() for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    scheduled(x).pow(2).mean().backward()
    assert_same([p.grad for p in net.parameters()], want)
