"""The gradient check compares each gradient with plain autograd's relative to the tensor's scale:
a weight shared by the branches of a join gets its branch gradients added in the schedule's order,
which in float32 moves elements whose sum nearly cancels by a few ulps of the largest terms (a
correct triplet schedule was reported "grad check: FAILED", 3e-5 on values of ~300)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _branch_terms() -> list:
    gen = torch.Generator().manual_seed(0)
    big = torch.randn(3, 256, generator=gen) * 300
    big[2, :64] = -(big[0, :64] + big[1, :64]) + torch.randn(64, generator=gen) * 1e-3  # sums that nearly cancel
    return [b.to(torch.float32) for b in big]


def test_another_summation_order_passes_and_a_wrong_gradient_fails() -> None:
    from memsched.models.measure import compare_gradients, gradient_close

    a, b, c = _branch_terms()
    ref = (a + b) + c
    got = (c + b) + a  # the same three branch gradients, added in another order
    assert not torch.allclose(got, ref, rtol=1e-4, atol=1e-6)  # the element-wise test the check used
    assert gradient_close(got, ref, rtol=1e-4, atol=1e-6)
    assert compare_gradients({"w": got}, {"w": ref}) == (True, "")
    for wrong in ((a + b), ref * 1.01, ref + 0.1 * ref.abs().max() * (torch.arange(256) == 7)):
        assert not gradient_close(wrong, ref, rtol=1e-4, atol=1e-6)
    assert not gradient_close(ref.clone().fill_(float("nan")), ref, rtol=1e-4, atol=1e-6)
    assert not gradient_close(ref[:10], ref, rtol=1e-4, atol=1e-6)
    ok, message = compare_gradients({"w": a + b}, {"w": ref})
    assert not ok and "w" in message
