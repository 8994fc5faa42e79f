"""Host copies in the offloading simulator end where the executor ends them (simulator rule 4): a tape abar_{i+1}'s
at the end of B(i), which uses it up (a later Pre of it is invalid), a standalone a_j's at the end of the step (also
after F_n, B or the loss freed its device copy). `host_peak` (bytes) follows, and equals the executor's host bytes."""

from __future__ import annotations

import pytest
from memsched.solvers.chain import Chain
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, Loss
from memsched.solvers.offload import OffloadInstance, OffloadSchedule
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.schedule import Off, Pre

#: block sizes of the hand-made chains: a_0 is 1000 bytes, a_j 100 (j + 1), abar_j 1000 j (distinct, so sums show)
X = [1000, 200, 300, 400, 0]
XBAR = [0, 1000, 2000, 3000, 0]


def _inst(L: int = 3, u_b: float = 1.0) -> OffloadInstance:
    """An L-stage chain (L <= 3) with the sizes above, unit forward times, backward times `u_b` (ms), a 1e6 B/s link
    (1000 B per ms)."""
    chain = Chain(u_f=[1.0] * L + [0.0], u_b=[u_b] * (L + 1), x=X[:L + 1] + [0], xbar=XBAR[:L + 1] + [0],
                  o_f=[0] * (L + 1), o_b=[0] * (L + 1), name="host-release")
    return OffloadInstance(chain, 1e6)


def _recompute_and_offload_each_tape() -> list:
    """F_ck twice, then each tape recomputed, offloaded and prefetched just before its backward: no two tapes are on
    the host at once (the executor's host holds at most the largest)."""
    return [F_ck(0), F_ck(1), F_all(2), Loss(3), Bwd(2), F_all(1), Off("abar", 2), Pre("abar", 2), Bwd(1),
            F_all(0), Off("abar", 1), Pre("abar", 1), Bwd(0)]


# --------------------------------------------------------------------------- bug 1: Pre of a used-up tape
def test_pre_of_tape_after_its_backward_is_invalid():
    # the hunter's repro: B(0) used abar_1 up, host copy included; the executor then had nothing to prefetch
    ops = [F_all(0), F_all(1), Loss(2), Bwd(1), Off("abar", 1), Pre("abar", 1), Bwd(0), Pre("abar", 1)]
    sim = simulate_offload(_inst(2), OffloadSchedule(ops, 2))
    assert not sim.valid
    v = sim.violation
    assert v is not None and v.position == 7 and v.op == Pre("abar", 1)
    assert "abar_1 is not on the host" in v.reason and "B(0)" in v.reason


def test_pre_of_tape_after_its_backward_is_invalid_on_a_longer_chain():
    # the CLI repro's shape (5 stages in the hunter's file, 3 here): Off/Pre just before B(0), a Pre after it
    ops = [F_all(0), F_all(1), F_all(2), Loss(3), Bwd(2), Bwd(1), Off("abar", 1), Pre("abar", 1), Bwd(0),
           Pre("abar", 1)]
    sim = simulate_offload(_inst(), OffloadSchedule(ops, 3))
    assert not sim.valid and sim.violation is not None
    assert sim.violation.op == Pre("abar", 1) and sim.violation.position == 9
    assert simulate_offload(_inst(), OffloadSchedule(ops[:-1], 3)).valid  # without the late Pre it is fine


def test_standalone_activation_keeps_its_host_copy_after_being_freed():
    # the executor keeps a_j's host copy when F_n / B / the loss frees its device copy: Pre(a_1) after B(1) is valid
    ops = [F_ck(0), Off("a", 1), Pre("a", 1), F_all(1), F_all(2), Loss(3), Bwd(2), Bwd(1), Pre("a", 1), F_all(0),
           Bwd(0)]
    sim = simulate_offload(_inst(), OffloadSchedule(ops, 3))
    assert sim.valid, sim.violation
    assert sim.host_peak == X[1]


# --------------------------------------------------------------------------- bug 2: host_peak
def test_host_peak_releases_tape_at_its_backward():
    sim = simulate_offload(_inst(), OffloadSchedule(_recompute_and_offload_each_tape(), 3))
    assert sim.valid, sim.violation
    assert sim.host_peak == max(XBAR[1], XBAR[2])  # was XBAR[1] + XBAR[2]: every offloaded tape to the end


def test_host_peak_counts_tapes_on_the_host_together():
    # both tapes are on the host until B(1): their sum; the second Off of abar_2 reuses its host copy
    ops = [F_all(0), F_all(1), Off("abar", 1), F_all(2), Off("abar", 2), Loss(3), Pre("abar", 2), Off("abar", 2),
           Pre("abar", 2), Bwd(2), Pre("abar", 1), Bwd(1), Bwd(0)]
    sim = simulate_offload(_inst(), OffloadSchedule(ops, 3))
    assert sim.valid, sim.violation
    assert sim.host_peak == XBAR[1] + XBAR[2]


def test_host_release_at_backward_end_precedes_an_equal_time_copy():
    # Off(a_0) starts with B(2) at 6 ms and takes 1 ms; B(2), B(1) take 0.5 ms each: abar_2's host copy is released at
    # the end of B(1), when a_0's copy ends (7 ms): releases first at equal times, so the two are never summed
    ops = [F_all(0), F_all(1), F_all(2), Off("abar", 2), Loss(3), Pre("abar", 2), Bwd(2), Off("a", 0), Bwd(1),
           Pre("a", 0), Bwd(0)]
    sim = simulate_offload(_inst(u_b=0.5), OffloadSchedule(ops, 3))
    assert sim.valid, sim.violation
    times = {str(t.op): (t.start, t.end) for t in sim.ops}
    assert times["Off(a_0)"] == (6.0, 7.0) and times["B(1)"] == (6.5, 7.0)
    assert sim.host_peak == max(XBAR[2], X[0])
    # a longer backward overlaps the copy: both are on the host for a while
    longer = simulate_offload(_inst(u_b=1.0), OffloadSchedule(ops, 3))
    assert longer.valid and longer.host_peak == XBAR[2] + X[0]
    # float noise does not change the order (rule 6's tolerance): B(2) 0.2 ms + B(1) 0.4 ms end at 6.6000000000000005,
    # the 0.6 ms copy of a 600 B a_0 at 6.6
    chain = Chain(u_f=[1.0] * 3 + [0.0], u_b=[0.5, 0.4, 0.2, 0.5], x=[600] + X[1:4] + [0], xbar=XBAR[:4] + [0],
                  o_f=[0] * 4, o_b=[0] * 4, name="noise")
    noisy = simulate_offload(OffloadInstance(chain, 1e6), OffloadSchedule(ops, 3))
    times = {str(t.op): (t.start, t.end) for t in noisy.ops}
    assert times["Off(a_0)"][1] < times["B(1)"][1] == pytest.approx(6.6, rel=1e-12)
    assert noisy.host_peak == XBAR[2]


# --------------------------------------------------------------------------- against the executor
def _tiny():
    """Three Linear(16, 16) + ReLU blocks, batch 4, profiled (chain sizes: 256 B per value)."""
    torch = pytest.importorskip("torch")
    from memsched.models.chain.profiler import profile_chain

    torch.manual_seed(0)
    blocks = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()) for _ in range(3)])
    x, y = torch.randn(4, 16), torch.randint(0, 16, (4,))
    loss = torch.nn.CrossEntropyLoss()
    chain = profile_chain(blocks, loss, x, y, repeats=1, warmup=0)
    return blocks, loss, x, y, OffloadInstance(chain, 1e6)


def _executor_host_peak(blocks, loss, schedule: OffloadSchedule, x, y, inst: OffloadInstance) -> int:
    """The largest host bytes (host copies the executor holds, measured after every op) of one step."""
    from memsched.models.offload.executor import OffloadExecutor

    class Probe(OffloadExecutor):
        host_max = 0

        def apply(self, op, s, target):  # type: ignore[no-untyped-def]
            super().apply(op, s, target)
            store = self._store(s)
            held = sum(st.nbytes for v in store.host.values() for st in v.holder.storages if st.host is not None)
            Probe.host_max = max(Probe.host_max, held)

    Probe(blocks, loss).step(schedule, x, y, inst=inst, measure_time=False)
    return Probe.host_max


def test_host_peak_equals_the_executors_host_bytes():
    from memsched.models.offload.executor import sequential_replay

    blocks, loss, x, y, inst = _tiny()
    # each tape offloaded just before its backward, plus a_1 (kept on the host to the end of the step)
    ops = [F_ck(0), Off("a", 1), Pre("a", 1)] + _recompute_and_offload_each_tape()[1:]
    schedule = OffloadSchedule(ops, 3)
    sim = simulate_offload(inst, schedule)
    assert sim.valid, sim.violation
    chain = inst.chain
    assert sim.host_peak == int(chain.x[1]) + max(int(chain.xbar[1]), int(chain.xbar[2]))
    assert sequential_replay(inst, ops).host_peak == sim.host_peak
    assert _executor_host_peak(blocks, loss, schedule, x, y, inst) == sim.host_peak


def test_scheduled_chain_refuses_pre_of_a_used_up_tape():
    # the hunter's repro: accepted before, then the step failed with a RuntimeError in the executor
    torch = pytest.importorskip("torch")
    from memsched.solvers.errors import InputError

    import memsched

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()),
                              torch.nn.Sequential(torch.nn.Linear(16, 4)))
    ops = [F_all(0), F_all(1), Loss(2), Bwd(1), Off("abar", 1), Pre("abar", 1), Bwd(0), Pre("abar", 1)]
    with pytest.raises(InputError, match=r"Pre\(abar_1\)"):
        memsched.ScheduledChain(net, OffloadSchedule(ops, 2))
