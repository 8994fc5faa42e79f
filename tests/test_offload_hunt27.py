"""Offloading fixes (hunt 27): `sequential_replay` times each forward with its own per-mode duration (u_fa for
F_all, u_fn for F_ck/F_n), as the two-stream simulator does, so a transfer-free schedule has the simulator's
makespan; cpsat answers a plainly infeasible instance at once (`forced_memory`, a necessary condition of its model)
instead of timing out at its default tick."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from memsched.solvers.chain.baselines import store_all_schedule
from memsched.solvers.chain.schedule import Bwd, F_all, F_ck, F_n, Loss, Op
from memsched.solvers.chain.simulator import op_cost
from memsched.solvers.offload import OffloadInstance, OffloadSchedule
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.baselines import offload_schedule
from memsched.solvers.offload.generate import random_offload
from memsched.solvers.offload.schedule import Off, Pre, Transfer
from memsched.solvers.registry import solve

pytest.importorskip("torch")
from memsched.models.offload.executor import sequential_replay  # noqa: E402


def mode_timed(L: int = 3) -> OffloadInstance:
    """A random offload instance whose per-mode forward times differ (u_fa != u_fn at every stage, in both
    directions), time unit ms."""
    inst = random_offload(L, 1, integer_times=True)
    chain = inst.chain
    u_fa = chain.u_f.copy()
    u_fn = chain.u_f.copy()
    u_fa[:L] += np.arange(1, L + 1) * 0.25 * (np.arange(L) % 2)  # F_all slower at odd stages
    u_fn[:L] += np.arange(1, L + 1) * 0.5 * (1 - np.arange(L) % 2)  # F_ck/F_n slower at even stages
    out = OffloadInstance(chain.with_mode_times(u_fa, u_fn), inst.bandwidth, inst.latency)
    assert out.chain.has_mode_times()
    return out


def per_mode_sum(inst: OffloadInstance, ops: list[Op | Transfer]) -> float:
    """Each compute op's own duration (`op_cost`) plus each transfer's time: a synchronous run's makespan."""
    chain = inst.chain
    total = 0.0
    for op in ops:
        if isinstance(op, Transfer):
            total += inst.transfer_time(int(chain.xbar[op.index] if op.value == "abar" else chain.x[op.index]))
        else:
            kind, i = op
            total += op_cost(chain, kind, chain.length if kind == "Loss" else i)[2]
    return total


def test_sequential_replay_of_store_all_is_the_simulators_makespan() -> None:
    inst = mode_timed()
    schedule = OffloadSchedule.from_chain(store_all_schedule(inst.length))
    seq = sequential_replay(inst, schedule)
    sim = simulate_offload(inst, schedule)
    assert seq.valid and sim.valid
    assert seq.makespan == pytest.approx(sim.makespan, rel=1e-12)
    assert seq.makespan == pytest.approx(inst.chain.total_time(), rel=1e-12)


def test_sequential_replay_of_a_recomputing_schedule_sums_per_mode_durations() -> None:
    inst = mode_timed()
    ops: list[Op | Transfer] = [F_ck(0), F_n(1), F_all(2), Loss(3), Bwd(2), F_all(0), F_all(1), Bwd(1), Bwd(0)]
    schedule = OffloadSchedule(ops, 3)
    seq = sequential_replay(inst, schedule)
    sim = simulate_offload(inst, schedule)  # no transfers: one stream, the same makespan
    assert seq.valid and sim.valid
    assert seq.makespan == pytest.approx(per_mode_sum(inst, ops), rel=1e-12)
    assert seq.makespan == pytest.approx(sim.makespan, rel=1e-12)
    # the old bug charged u_f = max(u_fa, u_fn) at every forward: strictly more on this chain
    assert seq.makespan < sum(float(inst.chain.u_f[i]) for i in (0, 1, 2, 0, 1)) + float(inst.chain.u_b.sum())


def test_sequential_replay_with_transfers_adds_them_to_the_per_mode_durations() -> None:
    inst = mode_timed()
    schedule = offload_schedule(3, {0})
    ops = list(schedule)
    assert Off("abar", 1) in ops and Pre("abar", 1) in ops
    seq = sequential_replay(inst, schedule)
    assert seq.valid, seq.violation
    assert seq.makespan == pytest.approx(per_mode_sum(inst, ops), rel=1e-12)


def test_cpsat_proves_the_plainly_infeasible_two_stage_instance_at_once() -> None:
    # B(1) must hold x0 + abar1 + abar2 + delta2 + delta1 = 9 + 8 + 6 + 6 + 7 = 36 bytes whatever is offloaded;
    # the old model timed out (even in 120 s) at its default tick
    inst = random_offload(2, 0, transfer_ratio=3.0, integer_times=True)
    for budget in (28, 32):
        r = solve("offload", inst, "cpsat", budget, slots=0, time_limit=5)
        assert r.status == "infeasible", (budget, r.status, r.message)
        assert r.schedule is None


def test_forced_memory_counts_the_backward_of_the_infeasible_instance() -> None:
    from memsched.solvers.offload.cpsat import forced_memory

    inst = random_offload(2, 0, transfer_ratio=3.0, integer_times=True)
    assert forced_memory(inst.chain, int, set()) == (36 - 9, "B(1)")


@pytest.mark.parametrize("L,seed", [(2, 0), (3, 1), (4, 2), (5, 3)])
def test_forced_memory_is_below_every_store_all_order_schedules_peak(L: int, seed: int) -> None:
    """A necessary condition: every valid schedule of the model's scope (store-all order, any tapes offloaded)
    peaks at least at x0 + forced_memory; here over every subset of offloaded tapes."""
    from memsched.solvers.offload.cpsat import forced_memory

    inst = random_offload(L, seed, transfer_ratio=1.0, integer_times=True)
    forced, _ = forced_memory(inst.chain, int, set())
    x0 = int(inst.chain.x[0])
    peaks = []
    for n in range(L):
        for offloaded in combinations(range(L - 1), n):
            sim = simulate_offload(inst, offload_schedule(L, set(offloaded)))
            assert sim.valid, sim.violation
            peaks.append(sim.peak_memory)
    assert x0 + forced <= min(peaks)


@pytest.mark.parametrize("L,seed", [(2, 0), (3, 1)])
def test_the_forced_memory_is_the_models_least_budget_here(L: int, seed: int) -> None:
    """On these instances the pre-check is tight: one unit below x0 + forced the model is infeasible (the exact
    layer may still return pofo's recomputing schedule), at it the model itself finds a schedule."""
    from memsched.solvers.offload.cpsat import forced_memory

    inst = random_offload(L, seed, transfer_ratio=1.0, integer_times=True)
    forced, _ = forced_memory(inst.chain, int, set())
    budget = int(inst.chain.x[0]) + forced
    below = solve("offload", inst, "cpsat", budget - 1, slots=0, time_limit=5)
    assert below.status == "infeasible" or below.details.get("model_status") == "infeasible"
    at = solve("offload", inst, "cpsat", budget, slots=0, time_limit=10)
    assert at.status in ("optimal", "feasible") and at.peak_memory <= budget
    assert at.details.get("model_makespan") is not None, at.details
