"""Session 40: the offloading executor hid in-place changes of saved tensors from autograd. Its pack hook keeps
each saved tensor as a handle into a holder (so the tape can leave the device), and autograd checks the version
counter of no tensor that a pack hook handled: a saved value modified in place between its save and its
backward (by a loss that modifies a_L, by the rest of the block's forward, by a module that kept its output)
gave silently wrong gradients where plain autograd raises "one of the variables needed for gradient computation
has been modified by an inplace operation". The chain executor checked versions itself (`_Versioned`); that
check now lives in `models.offload.values` (`Versioned`, shared), and the offloading executor's handles count
changes through the saved tensor's own counter and through the holder's device copies, before and after an
``Off`` (a change before the copy would be copied silently, one after it leaves the host copy stale)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.training import _unit_chain  # noqa: E402
from memsched.models.offload.executor import OffloadExecutor  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, Loss  # noqa: E402
from memsched.solvers.offload import OffloadInstance, OffloadSchedule  # noqa: E402
from memsched.solvers.offload import simulate as simulate_offload  # noqa: E402
from memsched.solvers.offload.schedule import Off, Pre  # noqa: E402

L = 3
STORE_ALL = [F_all(0), F_all(1), F_all(2), Loss(L), Bwd(2), Bwd(1), Bwd(0)]
#: the last tape abar_3 (tanh saved a_3) leaves the device after the loss and comes back for B(2)
OFF_LAST = [F_all(0), F_all(1), F_all(2), Loss(L), Off("abar", 3), Pre("abar", 3), Bwd(2), Bwd(1), Bwd(0)]
#: the tape abar_2 is on the host while the loss runs
OFF_MIDDLE = [F_all(0), F_all(1), F_all(2), Off("abar", 2), Loss(L), Pre("abar", 2), Bwd(2), Bwd(1), Bwd(0)]
SCHEDULES = {"store-all": STORE_ALL, "off-last": OFF_LAST, "off-middle": OFF_MIDDLE}
VERSIONS = re.compile(r"is at version (\d+); expected version (\d+) instead")


class InPlaceRelu(nn.Module):
    """relu_ saves its result; with `twice`, mul_ then modifies it (plain autograd's backward raises),
    else nothing changes it afterwards (a valid in-place block)."""

    def __init__(self, twice: bool) -> None:
        super().__init__()
        self.lin, self.twice = nn.Linear(8, 8), twice

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        y.relu_()
        if self.twice:
            y.mul_(2)
        return y


class Keep(nn.Module):
    """Linear then tanh (which saves its output), keeping its output as an attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.kept: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.kept = torch.tanh(self.lin(x))
        return self.kept


class Scale(nn.Module):
    """A linear layer whose weight is modified in place after it was used (and saved)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        with torch.no_grad():
            self.lin.weight.mul_(1.0)
        return torch.tanh(y)


def _tanh() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 8), nn.Tanh())


def _square(a: torch.Tensor, target: Any) -> torch.Tensor:
    return a.pow(2).sum()


def _double_then_square(a: torch.Tensor, target: Any) -> torch.Tensor:
    a.mul_(2)
    return a.pow(2).sum()


def _net(kind: str) -> tuple[list[nn.Module], Callable[[torch.Tensor, Any], torch.Tensor]]:
    """Blocks and loss of each case (seeded)."""
    torch.manual_seed(0)
    if kind == "loss modifies a_L":  # tanh saved a_3
        return [_tanh(), _tanh(), _tanh()], _double_then_square
    if kind == "block modifies its saved output":
        return [_tanh(), InPlaceRelu(twice=True), _tanh()], _square
    if kind == "kept output modified by the loss":
        blocks: list[nn.Module] = [_tanh(), Keep(), _tanh()]

        def loss(a: torch.Tensor, target: Any) -> torch.Tensor:
            kept = blocks[1].kept
            assert isinstance(kept, torch.Tensor)
            kept.add_(1)  # a_2 as block 1 returned it, saved by its tanh: on the host in OFF_MIDDLE
            return a.pow(2).sum()

        return blocks, loss
    if kind == "weight modified after use":
        return [_tanh(), Scale(), _tanh()], _square
    if kind == "valid relu_":
        return [_tanh(), InPlaceRelu(twice=False), _tanh()], _square
    if kind == "loss modifies an unsaved a_L":  # linear saves its input, not its output
        return [_tanh(), InPlaceRelu(twice=False), nn.Linear(8, 8)], _double_then_square
    raise AssertionError(kind)


def _plain(kind: str, x: torch.Tensor) -> tuple[str | None, list[torch.Tensor]]:
    """Plain autograd's error (None: it runs) and gradients of case `kind`."""
    blocks, loss = _net(kind)
    try:
        loss(nn.Sequential(*blocks)(x.clone()), None).backward()
    except RuntimeError as err:
        return str(err), []
    return None, [p.grad.clone() for b in blocks for p in b.parameters()]


def _x() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(4, 8)


def test_the_schedules_are_valid() -> None:
    for ops in SCHEDULES.values():
        assert simulate_offload(OffloadInstance(_unit_chain(L), 0.5), OffloadSchedule(ops, L)).valid


RAISING = ["loss modifies a_L", "block modifies its saved output", "weight modified after use"]


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("kind", RAISING)
def test_a_saved_tensor_modified_in_place_raises_autograds_error(kind: str, schedule: str) -> None:
    """Where plain autograd raises, the offloading executor raises the same error (same versions), whether
    the tape stays on the device or goes to the host after the change and comes back."""
    x = _x()
    expected, _ = _plain(kind, x)
    assert expected is not None and "modified by an inplace operation" in expected
    blocks, loss = _net(kind)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as err:
        OffloadExecutor(blocks, loss).train_step(OffloadSchedule(SCHEDULES[schedule], L), x, None)
    want, got = VERSIONS.search(expected), VERSIONS.search(str(err.value))
    assert want is not None and got is not None and got.groups() == want.groups()


def test_a_change_after_the_offload_leaves_a_stale_host_copy_and_raises() -> None:
    """A module keeps a_2 (saved by its tanh); the loss modifies it while abar_2 is on the host: the host
    copy is stale (no gradient from it would be plain autograd's, which raises), so B(1) raises."""
    x = _x()
    expected, _ = _plain("kept output modified by the loss", x)
    assert expected is not None and "modified by an inplace operation" in expected
    for schedule in ("store-all", "off-middle"):
        blocks, loss = _net("kept output modified by the loss")
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            OffloadExecutor(blocks, loss).train_step(OffloadSchedule(SCHEDULES[schedule], L), x, None)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("kind", ["valid relu_", "loss modifies an unsaved a_L"])
def test_valid_in_place_changes_run_with_plain_autograds_gradients(kind: str, schedule: str) -> None:
    """Where plain autograd raises nothing, neither does the executor (the prefetch's own copy is no change),
    and the gradients are plain autograd's."""
    x = _x()
    error, want = _plain(kind, x)
    assert error is None
    blocks, loss = _net(kind)
    OffloadExecutor(blocks, loss).train_step(OffloadSchedule(SCHEDULES[schedule], L), x, None)
    got = [p.grad for b in blocks for p in b.parameters()]
    assert len(got) == len(want)
    assert all(g is not None and torch.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want))


@pytest.mark.parametrize("kind", RAISING)
def test_the_chain_executor_keeps_raising_with_the_shared_check(kind: str) -> None:
    x = _x()
    blocks, loss = _net(kind)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ChainExecutor(blocks, loss).train_step(STORE_ALL, x, None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", ["loss modifies a_L", "block modifies its saved output", "valid relu_"])
def test_cuda_offload_counts_changes_across_the_side_stream_copies(kind: str) -> None:
    """On CUDA (pinned host copies on a side stream): a change before the ``Off`` raises after the ``Pre``; a
    valid run has plain autograd's gradients."""
    x = _x().cuda()
    blocks, loss = _net(kind)
    plain = [b.cuda() for b in blocks]
    try:
        loss(nn.Sequential(*plain)(x.clone()), None).backward()
        want: list[torch.Tensor] | None = [p.grad.clone() for b in plain for p in b.parameters()]
    except RuntimeError:
        want = None
    blocks, loss = _net(kind)
    blocks = [b.cuda() for b in blocks]
    run = OffloadExecutor(blocks, loss)
    if want is None:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            run.train_step(OffloadSchedule(OFF_LAST, L), x, None)
        return
    run.train_step(OffloadSchedule(OFF_MIDDLE, L), x, None)
    got = [p.grad for b in blocks for p in b.parameters()]
    assert all(g is not None and torch.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(got, want))
