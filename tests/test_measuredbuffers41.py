"""Session 41: a measured step ran the schedule several times, each run updating the buffers.

`models.measure.measure_runs` runs a step once with the memory watch, once more (after a warm-up) under
the allocator probe, and again for each timed repeat. Every run is a training forward: before this
session each one updated BatchNorm's running statistics and ``num_batches_tracked`` (which then counted
every run, 5 after one measured step here) and spectral_norm's ``u`` and ``v``, so each run started from
other buffers, and a spectral-normed network's gradients (one power iteration per forward, the weight
depends on ``u``) were those of the fifth step, not the first: `memsched run`'s gradient check against
plain autograd could report a mismatch. Now every run starts from the buffers as the step found them
(the chain, offloading, join and graph executors all hand their modules to `measure_runs`), so a
measured step leaves gradients and buffers as one plain step does.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from conftest import assert_as_plain, plain_reference  # noqa: E402
from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.graph.executor import GraphExecutor  # noqa: E402
from memsched.models.graph.export import export_training_graph  # noqa: E402
from memsched.models.join.executor import JoinExecutor  # noqa: E402
from memsched.models.offload.executor import OffloadExecutor  # noqa: E402
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, Loss  # noqa: E402
from memsched.solvers.join import JoinSchedule, JOp  # noqa: E402
from memsched.solvers.offload.schedule import Off, Pre  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("float64_default")  # conftest: exact comparisons in float64

#: the measuring the CLI's `memsched run` asks for: memory by the tracker and the probe, three timed runs
MEASURED = {"measure_memory": True, "measure_time": True, "time_repeats": 3, "independent": True}
L = 3
#: stage 0 computed without a tape, recomputed with one for B(0)
CHAIN_PLAN = [F_ck(0), F_all(1), F_all(2), Loss(L), Bwd(2), Bwd(1), F_all(0), Bwd(0)]
OFFLOAD_PLAN = [F_ck(0), F_ck(1), Off("a", 1), F_all(2), Loss(L), Bwd(2), Pre("a", 1), F_all(1), Bwd(1),
                F_all(0), Bwd(0)]


def _net() -> nn.Sequential:
    """Three blocks: a spectral-normed Linear (each training forward updates ``u``, ``v``), one with
    BatchNorm (running statistics, ``num_batches_tracked``), a plain head."""
    torch.manual_seed(0)
    return nn.Sequential(nn.utils.spectral_norm(nn.Linear(8, 16)),
                         nn.Sequential(nn.Tanh(), nn.Linear(16, 16), nn.BatchNorm1d(16), nn.Tanh()),
                         nn.Linear(16, 3))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(4, 8), torch.randint(0, 3, (4,))


def test_a_run_changes_the_buffers() -> None:
    """One training forward moves ``u`` and the batch count: else the tests below could not fail."""
    net = _net()
    x, _ = _data()
    before = [b.clone() for b in net.buffers()]
    net(x)
    assert any(not torch.equal(a, b) for a, b in zip(before, net.buffers()))


@pytest.mark.parametrize("executor", [ChainExecutor, OffloadExecutor])
def test_a_measured_chain_step_is_one_plain_step(executor: type[ChainExecutor]) -> None:
    net = _net()
    x, y = _data()
    ref = plain_reference(net, x, y)
    plan = OFFLOAD_PLAN if executor is OffloadExecutor else CHAIN_PLAN
    executor(list(net), F.cross_entropy).step(plan, x, y, **MEASURED)  # type: ignore[arg-type]
    assert net[1][2].num_batches_tracked.item() == 1  # before: 5 (warm-up, probe, watch, 2 more timed runs)
    assert_as_plain(net, ref)


def test_a_measured_join_step_is_one_plain_step() -> None:
    def branch() -> list[nn.Module]:
        return [nn.Sequential(nn.utils.spectral_norm(nn.Linear(5, 6)), nn.BatchNorm1d(6), nn.Tanh()),
                nn.Linear(6, 6)]

    def loss_fn(outs: list[torch.Tensor], target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(outs[0] - outs[1], target)

    torch.manual_seed(0)
    branches = [branch(), branch()]
    torch.manual_seed(2)
    xs, target = [torch.randn(4, 5), torch.randn(4, 5)], torch.randn(4, 6)
    ref = copy.deepcopy(branches)
    loss_fn([nn.Sequential(*b)(x) for b, x in zip(ref, xs)], target).backward()  # one plain step
    ops = [JOp("F_ck", 1, 0), JOp("F_all", 1, 1), JOp("F_all", 0, 0), JOp("F_all", 0, 1), JOp("Loss"),
           JOp("B", 0, 1), JOp("B", 0, 0), JOp("B", 1, 1), JOp("F_all", 1, 0), JOp("B", 1, 0)]
    JoinExecutor(branches, loss_fn).step(JoinSchedule(ops, [2, 2]), xs, target, **MEASURED)
    for got, want in zip(branches, ref):
        assert_as_plain(nn.Sequential(*got), nn.Sequential(*want))
    assert branches[1][0][1].num_batches_tracked.item() == 1


def test_a_measured_graph_step_is_one_plain_step() -> None:
    net = _net()
    x, y = _data()
    graph = export_training_graph([copy.deepcopy(net)], example_input=x, loss_fn=F.cross_entropy, target=y)
    forward = [v for v in range(graph.n) if not graph.backward[v] and graph.names[v] != "loss"]
    seq = forward + forward + [v for v in range(graph.n) if v not in forward]  # every forward node twice
    ref = plain_reference(net, x, y)
    GraphExecutor([net], F.cross_entropy, graph, x).step(seq, x, y, **MEASURED)
    assert net[1][2].num_batches_tracked.item() == 1
    assert_as_plain(net, ref)


def test_the_gradient_check_starts_from_the_buffers_the_step_started_from() -> None:
    """`execute` and `execute_graph` compare with plain autograd after the step: the reference ran from the
    buffers the step had left (``u`` one power iteration further), so a spectral-normed network failed the
    check even for store-all. Now it starts from those the step started from, and the step's are put back."""
    from memsched.models.chain.executor import execute
    from memsched.models.graph.executor import execute_graph
    from memsched.solvers.chain.baselines import store_all_schedule

    net = _net()
    x, y = _data()
    ref = plain_reference(net, x, y)
    _, ok = execute(list(net), F.cross_entropy, store_all_schedule(L), x, y, measure_time=False)
    assert ok is True  # before: False
    for (name, b), (_, rb) in zip(net.named_buffers(), ref.named_buffers()):  # those the step left
        assert torch.equal(b, rb), name
    net = _net()
    graph = export_training_graph([copy.deepcopy(net)], example_input=x, loss_fn=F.cross_entropy, target=y)
    _, ok = execute_graph([net], F.cross_entropy, graph, list(range(graph.n)), x, y, measure_time=False)
    assert ok is True


def test_memsched_run_checks_a_spectral_normed_network() -> None:
    """`memsched.run` on a caller's network: its gradient check holds for the schedule and store-all."""
    import memsched

    net = _net()
    x, y = _data()
    out = memsched.run(net, "100%", solver="rotor", example_input=x, target=y, loss_fn=F.cross_entropy,
                       time_repeats=1, repeats=1)
    assert out.grad_check is True


class _Counting(nn.Module):
    """A block whose training forward rebinds a registered buffer (``self.count = self.count + 1``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.count = self.count + 1
        return self.lin(x)


@pytest.mark.parametrize("check", [False, True])
def test_the_gradient_check_keeps_a_rebound_buffer_as_the_step_left_it(check: bool) -> None:
    """`from_buffers` put back the tensor bound before the step (still holding the old value) where the step
    had bound a new one: the check undid the step's update (count 0 after one step)."""
    from memsched.models.chain.executor import execute
    from memsched.solvers.chain.baselines import store_all_schedule

    torch.manual_seed(0)
    blocks = [_Counting(), nn.Linear(4, 3)]
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    _, ok = execute(blocks, F.cross_entropy, store_all_schedule(2), x, y, measure_time=False, check=check)
    assert ok is (True if check else None)
    assert blocks[0].count.item() == 1


def test_a_join_over_budget_warning_does_not_call_forwards_recomputations() -> None:
    """A join step's ``rng_states`` counts the forwards of random stages (each holds a copy of the generator's
    state while it runs), not recomputed stages: `memsched run`'s warning for a store-all join step with
    dropout, predicted above a budget its model fits, gives the bytes beyond the model, never "the RNG states
    of N recomputed random stages" of a schedule that recomputes nothing."""
    from memsched.models.join.executor import JoinExecutor
    from memsched.models.join.profiler import profile_join_branches
    from memsched.models.run import step_warning
    from memsched.solvers.join import simulate, store_all_schedule

    torch.manual_seed(0)

    def branch() -> nn.Module:
        return nn.Sequential(nn.Linear(24, 24, dtype=torch.float32), nn.Tanh(), nn.Dropout(0.3)).train()

    def loss(outs: list[torch.Tensor], _: object) -> torch.Tensor:
        return sum((o ** 2).sum() for o in outs)  # type: ignore[return-value]

    branches = [[branch(), branch()], [branch()]]
    inputs = [torch.randn(8, 24, dtype=torch.float32) for _ in range(2)]  # the reviewer's sizes: a fork at the peak
    join = profile_join_branches(branches, loss, inputs, None, repeats=1, warmup=0)
    schedule = store_all_schedule(join)
    step = JoinExecutor(branches, loss).step(schedule, inputs, None, join=join, measure_time=False)
    model = simulate(join, schedule.ops).peak_memory
    assert step.predicted_peak > model and step.rng_states > 0  # the forks' states are charged beyond the model
    warning = step_warning("join", {"peak_memory": step.predicted_peak, "model_peak_memory": model}, model, step)
    assert warning is not None and "recomputed random stage" not in warning
    assert f"the run holds {step.predicted_peak - model} B" in warning
