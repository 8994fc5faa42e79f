"""Early release in B(i) (``bwd_overhead_released``): the file field, the simulator's charge, the
rotor DP and the exact models against brute force, and the problems that charge the held value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import (
    FAST,
    TIGHT_FRACS,
    assert_dp_equals_brute_force,
    brute_force,
    chains,
    least_phase_budget,
    tight_budget,
    tiny_chains,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.baselines import periodic_schedule
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import LOSS, B
from memsched.solvers.errors import InputError
from memsched.solvers.join import Join
from memsched.solvers.offload.instance import OffloadInstance
from memsched.solvers.registry import solve


def released_file(chain: Chain) -> dict:
    """The chain's file with stage 1 releasing its inputs as far as the field allows."""
    data = chain.to_dict()
    st1 = data["stages"][1]
    st1["bwd_overhead_released"] = -(st1["out_size"] + st1["tape_size"])
    return data


# --------------------------------------------------------------------------- the file field
def test_file_round_trip_and_the_held_view() -> None:
    chain = Chain.from_dict(released_file(random_chain(4, 1, overhead=1.0)))
    assert chain.has_release() and chain.o_b[1] < 0 <= chain.o_bh[1]
    again = Chain.from_dict(chain.to_dict())
    assert np.array_equal(again.o_b, chain.o_b) and np.array_equal(again.o_bh, chain.o_bh)
    held = chain.held()
    assert not held.has_release() and np.array_equal(held.o_b, chain.o_bh)
    assert "bwd_overhead_released" not in held.to_dict()["stages"][1]
    # rounding up keeps both arrays safe and the invariant o_bh >= o_b
    coarse = chain.discretised(3)
    assert np.all(coarse.o_bh >= coarse.o_b) and coarse.o_b[1] * 3 >= chain.o_b[1]


@pytest.mark.parametrize("value,message", [(-10**6, "must lie between"), (10**6, "must lie between"),
                                           ("a", "must be a number"), (0.5, "integer")])
def test_bad_released_field_names_the_stage_and_field(value, message) -> None:
    data = random_chain(3, 2, overhead=1.0).to_dict()
    data["stages"][2]["bwd_overhead_released"] = value
    with pytest.raises(InputError, match=message) as err:
        Chain.from_dict(data, path="c.json")
    assert "stages[2]" in str(err.value) and "bwd_overhead_released" in str(err.value)


def test_chain_rejects_a_release_beyond_its_inputs() -> None:
    chain = random_chain(3, 3)
    o_b = chain.o_b.copy()
    o_b[0] = -(chain.x[1] + chain.xbar[1]) - 1
    with pytest.raises(ValueError, match="cannot free more than its inputs"):
        Chain(chain.u_f, chain.u_b, chain.x, chain.xbar, chain.o_f, o_b)
    with pytest.raises(ValueError, match="must be >= o_b"):
        Chain(chain.u_f, chain.u_b, chain.x, chain.xbar, chain.o_f, chain.o_b + 1, o_bh=chain.o_b)


def test_join_and_offload_charge_the_held_overheads() -> None:
    chain = Chain.from_dict(released_file(random_chain(4, 4, overhead=1.0)))
    assert not OffloadInstance(chain, bandwidth=1e9).chain.has_release()
    join = Join([chain, random_chain(3, 5)], loss_time=1.0)
    assert not join.branches[0].has_release()
    assert np.array_equal(join.branches[0].o_b[:-1], chain.o_bh[:-1])


# --------------------------------------------------------------------------- the simulator's charge
@settings(max_examples=80, deadline=None)
@given(st.integers(1, 9), st.integers(0, 10_000), st.floats(0.0, 1.0))
def test_each_charge_covers_the_memory_left_after_the_op(L, seed, release) -> None:
    """The bound o_b >= -(x[i+1] + xbar[i+1]) keeps every op's charge at or above the state it
    leaves, so the peak (a maximum over charges) is the true maximum over time; counted here
    from the live values of the replay, independently of the simulator's charge."""
    chain = random_chain(L, seed, overhead=1.0, release=release)
    for k in sorted({1, min(2, L), max(1, L // 2)}):
        sched = periodic_schedule(L, k)
        sim = simulate(chain, sched)
        assert sim.valid, sim.violation
        live: dict[tuple[str, int], int] = {("a", 0): int(chain.x[0])}
        for op, step in zip(sched.ops, sim.steps):
            kind, i = op
            if kind == B:
                live.pop(("tape", i + 1), None)
                live.pop(("delta", i + 1), None)
                live.pop(("a", i), None)
                live[("delta", i)] = int(chain.x[i])
            elif kind == LOSS:
                live.pop(("a", i), None)
                live[("delta", i)] = int(chain.x[i])
            elif kind == "F_all":
                live[("tape", i + 1)] = int(chain.xbar[i + 1])
            else:
                live[("a", i + 1)] = int(chain.x[i + 1])
                if kind == "F_n":
                    live.pop(("a", i), None)
            assert step.mem_after == sum(live.values()), (op, step.mem_after, live)
            assert step.mem_during >= step.mem_after, (op, step.mem_during, step.mem_after)


# --------------------------------------------------------------------------- solvers
@settings(max_examples=120, deadline=None)
@given(tiny_chains(release=True))
def test_rotor_equals_brute_force_over_persistent_schedules(chain) -> None:
    assert_dp_equals_brute_force(chain)


@FAST
@given(chains(max_length=3, release=True), TIGHT_FRACS)
def test_exact_equals_brute_force(chain: Chain, frac: float) -> None:
    """Both exact models equal the brute force over phase schedules with early release, at budgets
    drawn from the least feasible one (or one below) up to the store-all peak."""
    budget = tight_budget(chain, frac, least_phase_budget(chain))
    best, _ = brute_force(chain, budget, phase=True)
    for solver in ("milp", "cpsat"):
        res = solve("chain", chain, solver, budget, slots=0, time_limit=20)
        if best is None:
            assert res.status == "infeasible", solver
        else:
            assert res.status == "optimal", solver
            assert res.objective == pytest.approx(best), solver
            sim = simulate(chain, res.schedule, budget)
            assert sim.valid and sim.peak_memory <= budget and sim.makespan == pytest.approx(res.objective)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.integers(0, 10_000), st.floats(0.05, 1.0))
def test_release_never_costs_more_than_holding(L, seed, frac) -> None:
    """Lower charges only widen what fits: rotor on the chain is at most rotor on its held view, and
    its least memory at most the held one's; every schedule replays within the budget."""
    chain = random_chain(L, seed, overhead=1.0, release=0.7)
    held = chain.held()
    assert rotor_min_budget(chain) <= rotor_min_budget(held)
    lo = rotor_min_budget(chain)
    budget = lo + int(frac * (simulate(held, periodic_schedule(L, 1)).peak_memory - lo))
    res, res_held = (solve("chain", c, "rotor", budget, slots=0) for c in (chain, held))
    assert res.schedule is not None
    sim = simulate(chain, res.schedule, budget)
    assert sim.valid and sim.peak_memory <= budget and sim.makespan == pytest.approx(res.objective)
    held_cost = res_held.objective if res_held.objective is not None else math.inf
    assert res.objective <= held_cost + 1e-9
