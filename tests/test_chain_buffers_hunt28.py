"""Hunt 28 fixes: the chain executor's buffers under recomputation, and the RNG states above the budget.

1. A chain step (`ScheduledChain`, `ChainExecutor.step` / `train_step`, the join executor) leaves
   BatchNorm's running statistics and ``num_batches_tracked`` as plain training does: the first
   forward of a stage updates them, every recomputation puts them back (before: updated once per
   computation, ``num_batches_tracked`` 2 after one step). The copy this takes is made outside the
   step: the measured peaks (tracker, allocator probe) still equal their predictions.
2. docs: no longer say that recomputations update the running statistics "as with torch.utils.checkpoint".
3. ``memsched run`` warns (JSON ``warning``, a text line) when the executed step's predicted peak, the
   RNG states of recomputed dropout stages included, exceeds the budget.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import memsched.models.run  # noqa: E402
from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.profiler import profile_chain  # noqa: E402
from memsched.models.chain.training import ScheduledChain  # noqa: E402
from memsched.models.join.executor import JoinExecutor, reference_join_step  # noqa: E402
from memsched.solvers.chain.baselines import recompute_all_schedule  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Schedule  # noqa: E402
from memsched.solvers.join import JoinSchedule, JOp  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]


def _net(seed: int = 0) -> nn.Sequential:
    """Four Conv/BN/ReLU blocks and a linear head on 4 channels of 6x6 (BatchNorm in training mode)."""
    torch.manual_seed(seed)
    blocks = [nn.Sequential(nn.Conv2d(3 if i == 0 else 4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
              for i in range(4)]
    return nn.Sequential(*blocks, nn.Sequential(nn.Flatten(), nn.Linear(4 * 6 * 6, 3)))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(2, 3, 6, 6), torch.tensor([0, 2])


def _plain(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> nn.Module:
    ref = copy.deepcopy(net)
    F.cross_entropy(ref(x), y).backward()
    return ref


def _buffers_differ(got: nn.Module, ref: nn.Module) -> list[str]:
    return [n for (n, b), (_, rb) in zip(got.named_buffers(), ref.named_buffers()) if not torch.equal(b, rb)]


def _mixed_schedule() -> Schedule:
    """Recomputes stages 0-3 with F_ck / F_n and F_all (block 4 once): every forward kind repeats."""
    ops = [F_ck(0), F_n(1), F_ck(2), F_all(3), F_all(4), Loss(5), Bwd(4), Bwd(3),
           F_all(2), Bwd(2), F_ck(0), F_all(1), Bwd(1), F_all(0), Bwd(0)]
    return Schedule(ops, 5)


@pytest.mark.parametrize("schedule", [_mixed_schedule(), recompute_all_schedule(5)], ids=["mixed", "recompute-all"])
def test_scheduled_chain_leaves_batchnorm_statistics_as_plain_training(schedule):
    net = _net()
    x, y = _data()
    ref = _plain(net, x, y)
    for mode in ("drop-in", "step"):
        got = copy.deepcopy(net)
        scheduled = ScheduledChain(got, schedule, F.cross_entropy)
        if mode == "drop-in":
            F.cross_entropy(scheduled(x), y).backward()
        else:
            scheduled.step(x, y)
        assert _buffers_differ(got, ref) == [], mode
        assert all(int(m.num_batches_tracked) == 1 for m in got.modules() if isinstance(m, nn.BatchNorm2d)), mode
        for p, rp in zip(got.parameters(), ref.parameters()):
            assert torch.allclose(p.grad, rp.grad, rtol=1e-4, atol=1e-6), mode


def test_executor_step_counts_one_batch_and_its_peaks_equal_the_predictions():
    """One measured run (tracker), then one more under the allocator probe (after its warm-up): each
    step counts one batch, and neither memory method sees the copy of the buffers."""
    net = _net()
    x, y = _data()
    blocks = list(copy.deepcopy(net))
    chain = profile_chain(blocks, F.cross_entropy, x, y, repeats=1, warmup=0)
    # profiling ran the blocks: start from the net's own statistics, as plain training does
    for b, nb in zip(blocks, net):
        b.load_state_dict(nb.state_dict())
    executor = ChainExecutor(blocks, F.cross_entropy)
    result = executor.step(_mixed_schedule(), x, y, chain=chain, measure_time=False)
    assert _buffers_differ(nn.Sequential(*blocks), _plain(net, x, y)) == []
    assert result.peak_memory == (result.tracker_predicted_peak or result.predicted_peak)
    probed = executor.step(_mixed_schedule(), x, y, chain=chain, measure_memory=False, measure_time=False,
                           independent=True)
    assert probed.independent_peak == probed.predicted_peak
    # the second step ran 3 runs (warm-up, probe, an unwatched run), each from the buffers the step found
    # (session 41; before, each run counted a batch: 4): two steps, two batches
    assert all(int(m.num_batches_tracked) == 2 for b in blocks for m in b.modules() if isinstance(m, nn.BatchNorm2d))


def test_join_executor_recomputations_leave_the_statistics_of_each_branch():
    """Two branches (each its own BatchNorm), each recomputing its stages once: each branch counts one
    batch, as the plain forward of both."""
    torch.manual_seed(0)

    def branch() -> list[nn.Module]:
        return [nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.ReLU()),
                nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6))]

    branches = [branch(), branch()]

    def loss_fn(outs, target):
        return F.mse_loss(outs[0] - outs[1], target)

    torch.manual_seed(2)
    xs, target = [torch.randn(2, 5), torch.randn(2, 5)], torch.randn(2, 6)
    ref = copy.deepcopy(branches)
    reference_join_step(ref, loss_fn, xs, target)
    ops = []
    for b in (1, 0):
        ops += [JOp("F_ck", b, 0), JOp("F_all", b, 1)]
    ops.append(JOp("Loss"))
    for b in (0, 1):
        ops += [JOp("B", b, 1), JOp("F_all", b, 0), JOp("B", b, 0)]
    JoinExecutor(branches, loss_fn).step(JoinSchedule(ops, [2, 2]), xs, target, measure_time=False)
    for got, want in zip(branches, ref):
        assert _buffers_differ(nn.Sequential(*got), nn.Sequential(*want)) == []


def test_executor_docstring_and_docs_no_longer_promise_updates_per_recomputation():
    cli = (ROOT / "docs" / "cli.md").read_text()
    chain = (ROOT / "docs" / "chain.md").read_text()
    assert "running statistics are updated by each\n  recomputation" not in cli
    assert "every later one (a recomputation)" in chain.replace("\n", " ") or "puts them back" in chain
    import memsched.models.chain.executor as ex

    assert "recomputations\nincluded (as with ``torch.utils.checkpoint``)" not in (ex.__doc__ or "")


# ---------------------------------------------------------------------------- 3. RNG states above the budget
def test_run_warns_when_the_rng_states_take_the_step_above_the_budget():
    """gpt2 (dropout) at 1962 B, just under store-all: rotor recomputes one dropout stage, whose CPU RNG
    state (5,056 B, not in the chain model) takes the executed step to 10 KiB."""
    out = memsched.models.run.run("gpt2", 1962, sizes={"batch": 1, "seq_len": 1, "width": 8, "depth": 1, "vocab": 2},
                                  time_repeats=1, profile_repeats=1, store_all=False)
    assert out["predicted"]["model_peak_memory"] <= out["budget"] < out["predicted"]["peak_memory"]
    assert "1 recomputed random stage" in out["warning"] and "1962 B" in out["warning"]
    assert f"  warning: {out['warning']}" in memsched.models.run.describe(out).splitlines()


def test_over_budget_warning_only_above_the_budget():
    warn = memsched.models.run.over_budget_warning
    assert warn({"peak_memory": 1000, "model_peak_memory": 900}, 1000, 1) is None
    assert "2 recomputed random stages" in warn({"peak_memory": 11000, "model_peak_memory": 900}, 1000, 2)
    text = warn({"peak_memory": 6000, "model_peak_memory": 900}, 1000, None)  # an offloading step: count unknown
    assert "5100 B the model does not charge" in text
    assert "solver's own model" in warn({"peak_memory": 1200, "model_peak_memory": 1100}, 1000, 0)


def test_offloading_schedules_leave_batchnorm_statistics_as_plain_training():
    """The offloading executor's forwards (F_ck / F_n and F_all with saved tensors moved to the host)
    put the buffers back on recomputation too (before: ``num_batches_tracked`` 4, 3, 2 on the first
    three blocks after one recompute-all step)."""
    from memsched.solvers.offload import OffloadSchedule
    from memsched.solvers.offload.schedule import Off, Pre

    net = _net()
    x, y = _data()
    ref = _plain(net, x, y)
    ops = [F_ck(0), Off("a", 0), *[F_all(i) for i in range(1, 5)], Loss(5), Bwd(4), Bwd(3), Bwd(2), Bwd(1),
           Pre("a", 0), F_all(0), Bwd(0)]  # stage 0 twice: F_ck, then F_all after the prefetch
    for schedule in (OffloadSchedule(ops, 5), OffloadSchedule(list(recompute_all_schedule(5).ops), 5)):
        got = copy.deepcopy(net)
        F.cross_entropy(ScheduledChain(got, schedule, F.cross_entropy)(x), y).backward()
        assert _buffers_differ(got, ref) == []
