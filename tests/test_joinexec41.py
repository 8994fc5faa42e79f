"""The join executor (session 41 hunt): `JoinExecutor.step` without a join replays the schedule on a
unit-size join first and refuses an invalid or incomplete one (`InputError` naming ``schedule``)
before anything runs; only the stages that draw random numbers fork and seed the generator, so a
step without dropout allocates nothing the prediction misses, and with dropout the prediction
charges the forks' copies of the generator's state; the gradient check runs the plain forwards in
the order the schedule first runs them (branches sharing a module whose output reads the buffers its
forward updates) and from the buffers the step started from."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memsched.models.buffers import from_buffers, snapshot_buffers  # noqa: E402
from memsched.models.join.executor import JoinExecutor, execute_join, reference_join_step  # noqa: E402
from memsched.models.join.profiler import profile_join_branches  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.join import JOp, simulate, store_all_schedule  # noqa: E402


class Counter(nn.Module):
    """Multiplies its input by how many forwards it has run (a buffer its forward updates and its
    output reads, as spectral_norm's ``u``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros((), dtype=torch.float64))

    def forward(self, x: Any) -> Any:
        self.n.add_(1)
        return x * float(self.n)


def _mlp(d: int, *, drop: bool = False, dtype: Any = torch.float32) -> nn.Module:
    mods = [nn.Linear(d, d), nn.Tanh()] + ([nn.Dropout(0.3)] if drop else [])
    return nn.Sequential(*mods).to(dtype).train()


def _sq_loss(outs: Any, target: Any) -> Any:
    return sum((o ** 2).sum() for o in outs)


def _asym_loss(outs: Any, target: Any) -> Any:
    return (outs[0] ** 2).sum() + 3 * outs[1].sum()


# ----------------------------------------------------------------------------- A: schedules checked
_GOOD = [JOp("F_all", 0, 0), JOp("F_all", 0, 1), JOp("F_all", 1, 0), JOp("Loss"),
         JOp("B", 0, 1), JOp("B", 0, 0), JOp("B", 1, 0)]


@pytest.mark.parametrize("ops, why", [
    (_GOOD[:-1], "missing B(1,0)"),
    ([op for op in _GOOD if op.kind != "Loss"], "delta_2 of branch 0 is not resident"),
    (_GOOD[:3], "missing Loss"),
    ([JOp("B", 0, 1)] + _GOOD, "B(0,1)"),
    (_GOOD + [JOp("B", 1, 0)], "B(1,0)"),
    ([JOp("F_all", 2, 0)] + _GOOD, "branch 2"),
])
def test_step_refuses_invalid_schedules_before_running(ops: list[JOp], why: str) -> None:
    torch.manual_seed(0)
    branches = [[nn.Linear(4, 4), nn.Linear(4, 4)], [nn.Linear(4, 4)]]
    inputs = [torch.randn(2, 4), torch.randn(2, 4)]
    with pytest.raises(InputError) as err:
        JoinExecutor(branches, _sq_loss).step(ops, inputs, None, measure_time=False)
    assert isinstance(err.value, ValueError) and err.value.field == "schedule"
    assert why in str(err.value)
    assert all(p.grad is None for b in branches for m in b for p in m.parameters())  # nothing ran
    res = JoinExecutor(branches, _sq_loss).step(_GOOD, inputs, None, measure_time=False)  # the valid one runs
    assert res.input_grads[1] is not None and res.loss == res.loss


# ----------------------------------------------------------------------------- B: RNG bytes
@pytest.mark.parametrize("drop", [False, True])
def test_rng_bytes_only_for_random_stages(drop: bool) -> None:
    """A one-branch join of 4 Linear+Tanh blocks: the allocator probe measured 9,664 B against 8,544
    predicted (the per-stage forks), 8,544 as the chain executor on the same blocks now; with dropout
    the forks' states are charged (here one is live at the peak, during a forward)."""
    torch.manual_seed(0)
    blocks = [_mlp(24, drop=drop) for _ in range(4)]
    x = torch.randn(8, 24)
    join = profile_join_branches([blocks], _sq_loss, [x], None, repeats=1, warmup=0)
    sim = simulate(join, store_all_schedule(join)).peak_memory
    res = JoinExecutor([blocks], _sq_loss).step(store_all_schedule(join), [x], None, join=join, measure_time=False,
                                                independent=True)
    assert res.independent_peak == res.predicted_peak
    assert res.random_stages == [[0, 1, 2, 3] if drop else []] and res.rng_states == (4 if drop else 0)
    assert res.peak_memory == res.tracker_predicted_peak == sim
    assert (res.predicted_peak > sim) if drop else (res.predicted_peak == sim)


def _recomputing(L0: int, L1: int) -> list[JOp]:
    """Branch 0 checkpointed (stages 0 and 1 recomputed), branch 1 store-all."""
    ops = [JOp("F_ck", 0, 0), JOp("F_n", 0, 1)] + [JOp("F_all", 0, i) for i in range(2, L0)]
    ops += [JOp("F_all", 1, i) for i in range(L1)] + [JOp("Loss")]
    ops += [JOp("B", 1, i) for i in reversed(range(L1))] + [JOp("B", 0, i) for i in reversed(range(2, L0))]
    return ops + [JOp("F_all", 0, 0), JOp("F_all", 0, 1), JOp("B", 0, 1), JOp("B", 0, 0)]


@pytest.mark.parametrize("drop", [False, True])
def test_probe_matches_prediction_with_and_without_dropout(drop: bool) -> None:
    torch.manual_seed(0)
    branches = [[_mlp(24, drop=drop) for _ in range(4)], [_mlp(24) for _ in range(3)]]
    inputs = [torch.randn(8, 24) for _ in range(2)]
    join = profile_join_branches(branches, _sq_loss, inputs, None, repeats=1, warmup=0)
    ops = _recomputing(4, 3)
    res, ok = execute_join(branches, _sq_loss, ops, inputs, None, join=join, measure_time=False, independent=True)
    assert ok is True  # the same masks on recomputation, plain autograd's gradients
    sim = simulate(join, ops).peak_memory
    assert res.independent_peak == res.predicted_peak
    assert res.random_stages == ([[0, 1, 2, 3], []] if drop else [[], []])
    assert res.peak_memory == res.tracker_predicted_peak == sim  # the tracker sees no generator state
    if drop:  # 4 + 2 recomputed forwards of random stages, each holding a 5,056 B CPU state
        assert res.rng_states == 6 and sim <= res.predicted_peak <= sim + 5056
    else:
        assert res.rng_states == 0 and res.predicted_peak == sim


# ----------------------------------------------------------------------------- C, D: the reference
_BRANCH1_FIRST = [JOp("F_all", 1, 0), JOp("F_ck", 1, 1), JOp("F_all", 0, 0), JOp("F_all", 0, 1),
                  JOp("F_all", 1, 1), JOp("Loss"), JOp("B", 0, 1), JOp("B", 0, 0), JOp("B", 1, 1), JOp("B", 1, 0)]


def test_shared_counter_reference_follows_the_schedules_order() -> None:
    """Siamese branches sharing a block whose output reads the buffer its forward updates: the
    schedule runs branch 1 first, so plain autograd in branch order computes other gradients; the
    check compares with the plain run in the schedule's order (and the step recomputes stage 1 of
    branch 1 on the buffer its first forward saw)."""
    torch.manual_seed(0)
    enc = [nn.Linear(4, 4).double(), Counter()]
    inputs = [torch.randn(3, 4, dtype=torch.float64) for _ in range(2)]
    before = snapshot_buffers(enc)
    res, ok = execute_join([enc, enc], _asym_loss, _BRANCH1_FIRST, inputs, None, measure_time=False)
    assert ok is True
    assert float(enc[1].n) == 2.0  # one step: one update per branch
    with from_buffers(before):
        _, g_sched, gi_sched = reference_join_step([enc, enc], _asym_loss, inputs, None,
                                                   order=[(1, 0), (1, 1), (0, 0), (0, 1)])
        _, g_plain, _ = reference_join_step([enc, enc], _asym_loss, inputs, None)
    for name, g in g_sched.items():
        torch.testing.assert_close(res.grads[name], g, rtol=1e-12, atol=1e-12)
    for got, ref in zip(res.input_grads, gi_sched):
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(g_plain["0.0.weight"], g_sched["0.0.weight"])  # the order matters here
    with pytest.raises(InputError):  # an order that is not one of the branches' stages in order
        reference_join_step([enc, enc], _asym_loss, inputs, None, order=[(0, 1), (0, 0), (1, 0), (1, 1)])


def test_shared_spectral_norm_branch1_first() -> None:
    """The hunt's Siamese spectral_norm encoder under a schedule running branch 1's forwards first:
    the step's gradients are plain autograd's in that order, from the buffers the step started from."""
    torch.manual_seed(0)
    sn = nn.utils.parametrizations.spectral_norm
    enc = [nn.Sequential(sn(nn.Linear(6, 6)), nn.Tanh()).double(), nn.Sequential(sn(nn.Linear(6, 6))).double()]
    with torch.no_grad():  # u far from converged: every power iteration moves it
        for m in enc:
            m[0].parametrizations.weight[0]._u.copy_(torch.nn.functional.normalize(torch.randn(6, dtype=torch.float64),
                                                                                   dim=0))
    inputs = [torch.randn(5, 6, dtype=torch.float64) for _ in range(2)]
    res, ok = execute_join([enc, enc], _asym_loss, _BRANCH1_FIRST, inputs, None, measure_time=False,
                           rtol=1e-9, atol=1e-12)
    assert ok is True


def test_execute_join_checks_from_the_buffers_the_step_started_from() -> None:
    torch.manual_seed(0)
    branch = [nn.Linear(4, 4).double(), Counter(), nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).double()]
    x = torch.randn(6, 4, dtype=torch.float64)
    ops = [JOp("F_all", 0, 0), JOp("F_all", 0, 1), JOp("F_all", 0, 2), JOp("Loss"),
           JOp("B", 0, 2), JOp("B", 0, 1), JOp("B", 0, 0)]
    loss = lambda outs, t: (outs[0] ** 3).sum()  # noqa: E731
    for step in (1, 2):  # the counter the second step starts from is the first's
        _, ok = execute_join([branch], loss, ops, [x], None, measure_time=False)
        assert ok is True
        assert float(branch[1].n) == step and int(branch[2][1].num_batches_tracked) == step  # the step's buffers
