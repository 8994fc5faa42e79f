"""Session 40: a recomputation ran on the buffers its stage's first forward had already updated.

`models.chain.executor.kept_buffers` copied the buffers a recomputed stage had when it was recomputed
(already updated by the stage's first forward in the step), ran the block and put them back: the
recomputation started one update ahead of what plain autograd's single forward saw. BatchNorm in
training mode hides this (its output reads batch statistics, not the running ones); spectral_norm does
not: each forward in training mode runs one power iteration that updates its buffer ``u`` (and ``v``) in
place, and the weight it uses depends on the updated ``u``. A recomputed spectral-normed block so got a
different weight than the first forward, and gradients off by a relative 1e-3 in float64, through
``ScheduledChain.step``, the drop-in forward + ``loss.backward()``, and the offloading executor alike.

Now a recomputation runs on the buffers as they were before the stage's first forward in the step (a
copy refilled in place just before that forward) and puts back those the first forward left; both
copies are made before the step (`BufferCopies`), so the measured peaks still equal the predictions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")

from conftest import assert_as_plain, plain_reference  # noqa: E402
from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.chain.training import ScheduledChain  # noqa: E402
from memsched.models.offload.executor import OffloadExecutor  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss  # noqa: E402
from memsched.solvers.offload import OffloadSchedule  # noqa: E402
from memsched.solvers.offload.schedule import Off, Pre  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

L = 3
#: stage 0 is first computed without a tape (F_ck), then recomputed with one (F_all) for B(0)
CHAIN_PLAN = [F_ck(0), F_n(1), F_all(2), Loss(L), Bwd(2), F_all(0), F_all(1), Bwd(1), Bwd(0)]
#: stages 0 and 1 both recomputed; a_1 goes to the host and comes back for the recomputation of stage 1
OFFLOAD_PLAN = [F_ck(0), F_ck(1), Off("a", 1), F_all(2), Loss(L), Bwd(2), Pre("a", 1), F_all(1), Bwd(1),
                F_all(0), Bwd(0)]

Norm = Callable[[nn.Module], nn.Module]
NORMS: dict[str, Norm] = {"utils": nn.utils.spectral_norm}
if hasattr(nn.utils, "parametrizations") and hasattr(nn.utils.parametrizations, "spectral_norm"):
    NORMS["parametrizations"] = nn.utils.parametrizations.spectral_norm


pytestmark = pytest.mark.usefixtures("float64_default")  # conftest: exact comparisons in float64


def _net(norm: Norm) -> nn.Sequential:
    """Three blocks, the first two spectral-normed (their forward in training mode updates ``u``, ``v``)."""
    torch.manual_seed(0)
    return nn.Sequential(norm(nn.Linear(8, 16)), nn.Sequential(nn.Tanh(), norm(nn.Linear(16, 16)), nn.Tanh()),
                         nn.Linear(16, 3))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(4, 8), torch.randint(0, 3, (4,))


@pytest.mark.parametrize("norm", NORMS)
def test_a_second_forward_gives_another_output(norm: str) -> None:
    """What the old executor's recomputation computed (the block's forward after one update of ``u``)
    differs from the first forward's output: else the tests below could not tell the two apart."""
    block = copy.deepcopy(_net(NORMS[norm])[0])
    x, _ = _data()
    with torch.no_grad():
        first, second = block(x), block(x)
    assert (first - second).abs().max().item() > 1e-8


def _step(net: nn.Sequential, how: str, x: torch.Tensor, y: torch.Tensor) -> None:
    """One training step of `net` under the recomputing plan: `ScheduledChain.step`, its drop-in forward with
    ``loss.backward()``, or the offloading executor's step."""
    if how == "step":
        ScheduledChain(net, CHAIN_PLAN, F.cross_entropy).step(x, y)
    elif how == "drop-in":
        F.cross_entropy(ScheduledChain(net, CHAIN_PLAN)(x), y).backward()
    else:
        ScheduledChain(net, OffloadSchedule(OFFLOAD_PLAN, L), F.cross_entropy).step(x, y)


@pytest.mark.parametrize("how", ["step", "drop-in", "offload"])
@pytest.mark.parametrize("norm", NORMS)
def test_a_recomputed_spectral_norm_steps_as_plain_autograd(norm: str, how: str) -> None:
    net = _net(NORMS[norm])
    x, y = _data()
    ref = plain_reference(net, x, y)
    _step(net, how, x, y)
    assert_as_plain(net, ref)
    net = _net(NORMS[norm])
    OffloadExecutor(list(net), F.cross_entropy).train_step(OffloadSchedule(OFFLOAD_PLAN, L), x, y)
    assert_as_plain(net, ref)


def test_two_steps_and_a_repeated_recomputation_stay_with_plain_autograd() -> None:
    """A stage recomputed twice in a step (the copies are reused, refilled in place) and a second step
    (the executor keeps its copies across runs) still follow plain training."""
    net = _net(NORMS["utils"])
    x, y = _data()
    ref = copy.deepcopy(net)
    plan = [F_ck(0), F_ck(1), F_all(2), Loss(L), Bwd(2), F_ck(0), F_all(1), Bwd(1), F_all(0), Bwd(0)]
    run = ChainExecutor(list(net), F.cross_entropy)
    for _ in range(2):
        for p in (*net.parameters(), *ref.parameters()):
            p.grad = None
        run.train_step(plan, x, y)
        F.cross_entropy(ref(x), y).backward()
        assert_as_plain(net, ref)


def test_a_measured_step_still_meets_its_predictions() -> None:
    """The copies are made before the measured windows: the tracker's and the allocator probe's peaks
    still equal their predictions, for the chain and the offloading executor. (The parametrized
    spectral_norm: ``nn.utils.spectral_norm`` keeps its last computed weight as a module attribute across
    forwards, a tensor no profile sees, old and new executors alike.)"""
    if "parametrizations" not in NORMS:
        pytest.skip("torch.nn.utils.parametrizations.spectral_norm is missing")
    net = _net(NORMS["parametrizations"])
    x, y = _data()
    blocks = list(copy.deepcopy(net))
    chain = profile_chain(blocks, F.cross_entropy, x, y, repeats=1, warmup=0)
    for b, nb in zip(blocks, net):  # profiling ran the blocks: start from the net's own buffers
        b.load_state_dict(nb.state_dict())
    executor = ChainExecutor(blocks, F.cross_entropy)
    result = executor.step(CHAIN_PLAN, x, y, chain=chain, measure_time=False)
    assert_as_plain(nn.Sequential(*blocks), plain_reference(net, x, y))
    assert result.peak_memory == (result.tracker_predicted_peak or result.predicted_peak)
    probed = executor.step(CHAIN_PLAN, x, y, chain=chain, measure_memory=False, measure_time=False,
                           independent=True)
    assert probed.independent_peak == probed.predicted_peak
    offloaded = OffloadExecutor(blocks, F.cross_entropy).step(OffloadSchedule(OFFLOAD_PLAN, L), x, y, chain=chain,
                                                             bandwidth=1e9, measure_time=False)
    assert offloaded.peak_memory == (offloaded.tracker_predicted_peak or offloaded.predicted_peak)
