"""Bad schedules and blocks given to the executors directly: refused as `InputError`, never a raw error.

- The offloading simulator refuses a compute op at a stage outside the chain (F_n(L), B(-1)), with the
  chain simulator's reason ("stage i outside 0..L-1"); it used to accept F_n(L) as valid.
- `OffloadExecutor.step` (with or without an instance) refuses a schedule made for another chain length,
  naming both lengths, before anything runs (it was an IndexError: the schedule was replayed as if it had
  the model's length). `ScheduledChain` refuses it as bad input too.
- A block that returns a tuple is refused by both executors with the message of ``memsched run``'s dry
  run (it was an AttributeError on the tuple), in a forward with autograd (F_all) and without (F_ck).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memsched.models.chain.executor import ChainExecutor  # noqa: E402
from memsched.models.chain.training import ScheduledChain, _unit_chain  # noqa: E402
from memsched.models.offload.executor import OffloadExecutor  # noqa: E402
from memsched.solvers.chain import Schedule  # noqa: E402
from memsched.solvers.chain import simulate as simulate_chain  # noqa: E402
from memsched.solvers.chain.baselines import store_all_schedule  # noqa: E402
from memsched.solvers.chain.schedule import Op  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402
from memsched.solvers.offload import OffloadInstance, OffloadSchedule  # noqa: E402
from memsched.solvers.offload import simulate as simulate_offload  # noqa: E402
from torch import nn  # noqa: E402


def _ops(*pairs: tuple[str, int]) -> list[Op]:
    return [Op(kind, i) for kind, i in pairs]


STORE_ALL_3 = [("F_all", 0), ("F_all", 1), ("F_all", 2)]

#: (ops on a chain of length 3, position of the first bad op): each names a stage outside 0..2
OUT_OF_RANGE = [
    (_ops(*STORE_ALL_3, ("F_n", 3), ("Loss", 3), ("B", 2), ("B", 1), ("B", 0)), 3),
    (_ops(*STORE_ALL_3, ("F_all", 3), ("Loss", 3), ("B", 2), ("B", 1), ("B", 0)), 3),
    (_ops(*STORE_ALL_3, ("Loss", 3), ("B", 3), ("B", 2), ("B", 1), ("B", 0)), 4),
    (_ops(("F_all", -1), *STORE_ALL_3, ("Loss", 3), ("B", 2), ("B", 1), ("B", 0)), 0),
    (_ops(*STORE_ALL_3, ("Loss", 3), ("B", 2), ("B", 1), ("B", 0), ("B", -1)), 7),
]


@pytest.mark.parametrize("ops, position", OUT_OF_RANGE)
def test_offload_simulator_refuses_stages_outside_the_chain_as_the_chain_simulator(ops, position):
    chain = _unit_chain(3)
    offload = simulate_offload(OffloadInstance(chain, 0.5), OffloadSchedule(ops, 3))
    plain = simulate_chain(chain, Schedule(ops, 3))
    assert not plain.valid
    assert not offload.valid
    assert offload.violation.position == plain.violation.position == position
    assert offload.violation.reason == plain.violation.reason == f"stage {ops[position].index} outside 0..2"


def _mlp(n: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(n)])


def _square(out: torch.Tensor, target: object = None) -> torch.Tensor:
    return out.pow(2).mean()


def test_offload_executor_refuses_forward_at_stage_L_before_running():
    ops = OUT_OF_RANGE[0][0]
    for inst in (None, OffloadInstance(_unit_chain(3), 0.5)):
        with pytest.raises(InputError, match=r"op #3 F_n\(3\): stage 3 outside 0\.\.2") as err:
            OffloadExecutor(_mlp(3), _square).step(OffloadSchedule(ops, 3), torch.randn(2, 8), None, inst=inst,
                                                   measure_time=False)
        assert err.value.field == "schedule"


def _longer_offload_schedule() -> OffloadSchedule:
    """A valid offloading schedule of a chain of length 5 (offloads a_0, prefetches it back)."""
    ops = list(store_all_schedule(5).ops)
    from memsched.solvers.offload import Transfer

    ops = ops[:1] + [Transfer("Off", "a", 0)] + ops[1:-1] + [Transfer("Pre", "a", 0)] + ops[-1:]
    schedule = OffloadSchedule(ops, 5)
    assert simulate_offload(OffloadInstance(_unit_chain(5), 0.5), schedule).valid
    return schedule


@pytest.mark.parametrize("with_inst", [False, True])
def test_offload_executor_refuses_a_schedule_of_another_length(with_inst):
    inst = OffloadInstance(_unit_chain(3), 0.5) if with_inst else None
    net = _mlp(3)
    before = [p.detach().clone() for p in net.parameters()]
    with pytest.raises(InputError, match="the schedule is for length 5 but the model has 3 blocks") as err:
        OffloadExecutor(net, _square).step(_longer_offload_schedule(), torch.randn(2, 8), None, inst=inst,
                                           measure_time=False)
    assert err.value.field == "schedule"
    assert all(p.grad is None for p in net.parameters())  # refused before anything ran
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))


def test_chain_executor_still_refuses_a_schedule_of_another_length_by_its_replay():
    # its message is pinned by tests/test_models_exec_edge.py; the replay no longer lets a longer one through
    for chain in (None, _unit_chain(3)):
        with pytest.raises(InputError, match=r"stage 3 outside 0\.\.2"):
            ChainExecutor(_mlp(3), _square).step(store_all_schedule(5), torch.randn(2, 8), None, chain=chain,
                                                 measure_time=False)


def test_scheduled_chain_refuses_an_offloading_schedule_of_another_length():
    with pytest.raises(InputError, match="the schedule is for length 5 but the model has 3 blocks"):
        ScheduledChain(_mlp(3), _longer_offload_schedule(), _square)


class Tup(nn.Module):
    """A block that returns a tuple: not a chain block."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.lin(x)
        return y, 2 * y


class Take(nn.Module):
    """Reads the tuple (so a plain forward of the net runs)."""

    def forward(self, t: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return t[0] + t[1]


def _tuple_net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.Tanh()), Tup(), Take(), nn.Linear(8, 4))


#: store-all (block 1 runs with autograd) and one that computes block 1 without grad first (F_ck)
TUPLE_SCHEDULES = {
    "F_all": list(store_all_schedule(4).ops),
    "F_ck": _ops(("F_all", 0), ("F_ck", 1), ("F_all", 2), ("F_all", 3), ("Loss", 4), ("B", 3), ("B", 2),
                 ("F_all", 1), ("B", 1), ("B", 0)),
}
TUPLE_MESSAGE = r"block 1 \(Tup\) returns a tuple; a chain passes one tensor from block to block"


@pytest.mark.parametrize("mode", sorted(TUPLE_SCHEDULES))
@pytest.mark.parametrize("executor", ["chain", "offload"])
def test_executors_refuse_a_block_that_returns_a_tuple(executor, mode):
    ops = TUPLE_SCHEDULES[mode]
    assert simulate_chain(_unit_chain(4), Schedule(ops, 4)).valid
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    loss = nn.functional.cross_entropy
    if executor == "chain":
        run = ChainExecutor(_tuple_net(), loss).step
        schedule: object = Schedule(ops, 4)
    else:
        run = OffloadExecutor(_tuple_net(), loss).step
        schedule = OffloadSchedule(ops, 4)
    with pytest.raises(InputError, match=TUPLE_MESSAGE):
        run(schedule, x, y, measure_time=False)


def test_scheduled_chain_and_executors_give_the_same_tuple_message():
    x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
    loss = nn.functional.cross_entropy
    ops = TUPLE_SCHEDULES["F_all"]
    messages = []
    for call in (lambda: ScheduledChain(_tuple_net(), Schedule(ops, 4), loss).step(x, y),
                 lambda: ChainExecutor(_tuple_net(), loss).step(Schedule(ops, 4), x, y, measure_time=False),
                 lambda: OffloadExecutor(_tuple_net(), loss).step(OffloadSchedule(ops, 4), x, y,
                                                                  measure_time=False)):
        with pytest.raises(InputError) as err:
            call()
        messages.append(err.value.message)
    assert len(set(messages)) == 1, messages
    assert "returns a tuple; a chain passes one tensor from block to block" in messages[0]
