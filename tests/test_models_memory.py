"""The live-tensor tracker counts each storage once, frees on release, ignores outside storages."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.memory import LiveTensorTracker, unique_bytes  # noqa: E402


def test_counts_allocations_and_frees():
    with LiveTensorTracker() as mem:
        a = torch.zeros(1000)  # 4000 bytes
        b = torch.ones(500, dtype=torch.float64)  # 4000 bytes
        assert mem.current == 8000
        del a
        assert mem.current == 4000
        del b
    assert mem.current == 0
    assert mem.peak == 8000


def test_views_and_outside_storages_are_not_counted():
    outside = torch.randn(100, 100)
    with LiveTensorTracker() as mem:
        v = outside.t()
        d = outside.detach()
        s = outside[:10]
        assert mem.current == 0
        mine = outside * 2
        view = mine.view(-1)
        assert mem.current == 40000
        del mine
        assert mem.current == 40000  # the view keeps the storage alive
        del view
        assert mem.current == 0
    del v, d, s


def test_autograd_saved_tensors_and_gradients_are_counted():
    lin = torch.nn.Linear(100, 100)
    x = torch.randn(10, 100)
    with LiveTensorTracker() as mem:
        xi = x.detach().requires_grad_()
        y = torch.relu(lin(xi))
        assert mem.current == 4000  # relu's output, saved for its backward (addmm's output is freed)
        assert mem.peak == 8000
        y.sum().backward()
        assert xi.grad is not None
        assert mem.current >= 4000 + 4000 + 40000 + 400  # y, xi.grad, weight and bias grads
    lin.weight.grad = lin.bias.grad = None


def test_mark_resets_the_peak_window():
    with LiveTensorTracker() as mem:
        a = torch.zeros(1000)
        b = torch.zeros(1000)
        del b
        assert mem.peak == 8000
        assert mem.mark() == 4000
        assert mem.peak == 4000
        del a


def test_unique_bytes_counts_shared_storage_once():
    t = torch.zeros(10)
    assert unique_bytes((t, t.view(2, 5), t[:3])) == 40
    assert unique_bytes([t, torch.zeros(5)]) == 60
