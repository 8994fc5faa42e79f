"""A block whose output has another floating dtype than the weights (float64 logits from float32 weights).

`ChainExecutor` keeps the tape's output as a stand-in without storage (`_Handle`, on a 0-d scalar of the output's
dtype) so that the loss frees a_L, and B(i) with early release frees a_{i+1}, as the prediction assumes. The scalar
used to be made for the parameters' dtypes only: a float64 output got no stand-in, the tape kept a_L alive through
the loss, and the measured peak exceeded the prediction (store-all: tracker 548,880 B vs 493,568 B predicted).
Each test drops the float64 scalar first, as in a fresh process (the profiler may have made it).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain import executor as E  # noqa: E402
from memsched.models.chain.executor import ChainExecutor, compare_gradients, reference_step  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.solvers.chain import Schedule, simulate  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)
CPU64 = (torch.device("cpu"), torch.float64)


class Cast(nn.Module):
    """Linear(n_in, n_out) on its input cast to float32, its output cast to `dtype` (the weights stay float32)."""

    def __init__(self, n_in: int, n_out: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x.float()).to(self.dtype)


def head_net(widths: tuple[int, ...] = (64,)) -> tuple[list[nn.Module], torch.Tensor, torch.Tensor]:
    """float32 blocks 64 -> widths... -> 64 (Linear + Tanh), then a head giving float64 logits (batch 32, 512
    classes). The default is the hunter's network; a wider, deeper body leaves rotor room to recompute it."""
    torch.manual_seed(0)
    dims = (64, *widths, 64)
    blocks: list[nn.Module] = [nn.Sequential(nn.Linear(a, b), nn.Tanh()) for a, b in zip(dims, dims[1:])]
    blocks.append(Cast(64, 512, torch.float64))
    return blocks, torch.randn(32, 64), torch.randint(0, 512, (32,))


def middle_net() -> tuple[list[nn.Module], torch.Tensor, torch.Tensor]:
    """A float64 activation in the middle of float32 blocks (the next block casts it back)."""
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(64, 64), nn.Tanh()), Cast(64, 512, torch.float64),
              Cast(512, 64, torch.float32), nn.Linear(64, 16)]
    return blocks, torch.randn(32, 64), torch.randint(0, 16, (32,))


def _schedules(chain, rotor_fraction: float | None) -> list[Schedule]:
    """Store-all, and rotor's schedule at `rotor_fraction` of store-all's simulated peak (the file's overheads)."""
    schedules = [store_all_schedule(chain.length)]
    if rotor_fraction is not None:
        dp = pytest.importorskip("memsched.solvers.chain.dp")
        peak = simulate(chain, schedules[0]).peak_memory
        rotor = dp.solve_rotor(chain, int(rotor_fraction * peak), slots=500).schedule
        assert rotor is not None and rotor.ops != schedules[0].ops
        schedules.append(rotor)
    return schedules


def _check(blocks, x, target, chain, *, release: bool | None = None, rotor_fraction: float | None = None) -> None:
    """Every schedule: measured tracker peak <= predicted, gradients and loss those of plain autograd."""
    loss_ref, grads_ref, _ = reference_step(blocks, F.cross_entropy, x, target, seed=0)
    for schedule in _schedules(chain, rotor_fraction):
        E._ONES.pop(CPU64, None)  # as in a fresh process: no float64 scalar yet
        result = ChainExecutor(blocks, F.cross_entropy, release=release).step(schedule, x, target, chain=chain,
                                                                             measure_time=False)
        predicted = result.tracker_predicted_peak or result.predicted_peak
        assert result.peak_memory <= predicted, (str(schedule), result.peak_memory, predicted)
        ok, msg = compare_gradients(result.grads, grads_ref)
        assert ok, msg
        assert result.loss == pytest.approx(loss_ref, rel=1e-6)


@pytest.mark.parametrize("widths, rotor_fraction", [((64,), None), ((256, 256), 0.9)])
def test_float64_logits_from_float32_weights_are_freed_by_the_loss(widths, rotor_fraction):
    blocks, x, target = head_net(widths)
    chain = profile_chain(blocks, F.cross_entropy, x, target, repeats=1, warmup=0)
    _check(blocks, x, target, chain, rotor_fraction=rotor_fraction)


def test_float64_activation_is_released_early_by_its_backward():
    """B(i) with early release frees a float64 a_{i+1} (it did before the fix too: the tape's own output works)."""
    blocks, x, target = middle_net()
    chain = profile_chain(blocks, F.cross_entropy, x, target, repeats=1, warmup=0, release=True)
    _check(blocks, x, target, chain, release=True)


def test_stand_ins_of_the_usual_dtypes_exist_before_the_step():
    blocks, _, _ = head_net()
    E._ONES.pop(CPU64, None)
    ChainExecutor(blocks, F.cross_entropy).new_run_state([], torch.device("cpu"))
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        one = E._ONES[(torch.device("cpu"), dtype)]
        assert one.shape == () and one.dtype == dtype


def test_a_rare_output_dtype_gets_its_stand_in_at_its_forward():
    y = torch.zeros(2, 3, dtype=torch.float8_e4m3fn) if hasattr(torch, "float8_e4m3fn") else None
    if y is None:
        pytest.skip("no float8 dtype in this torch")
    one = E.standin_for(y)
    assert one is not None and one.dtype == y.dtype and one.shape == ()
    assert E.standin_for(torch.zeros(2, dtype=torch.int64)) is None
