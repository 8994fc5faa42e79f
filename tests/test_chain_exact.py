"""Exact chain models (phase model; MILP and CP-SAT): replay, agreement, brute force, limits."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAST, TIGHT_FRACS, brute_force, budget_for, chains, check_replay, least_phase_budget, tight_budget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, reference_peak, simulate
from memsched.solvers.chain.baselines import periodic_schedule, store_all_schedule
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.min_memory import rotor_min_budget
from memsched.solvers.chain.schedule import F_ALL, Op, Schedule
from memsched.solvers.registry import solve


def rotor_available() -> bool:
    try:
        import memsched.solvers.chain.dp  # noqa: F401
    except ImportError:
        return False
    return True


@FAST
@given(chains(), TIGHT_FRACS)
def test_milp_and_cpsat_agree_and_replay(chain: Chain, frac: float) -> None:
    """Both exact models agree and replay, at budgets drawn from the least persistent one (rotor's, which a
    phase schedule always meets) or one below it (feasible for some chains, infeasible for others)."""
    budget = tight_budget(chain, frac, rotor_min_budget(chain))
    milp = solve("chain", chain, "milp", budget, slots=0, time_limit=20)
    cpsat = solve("chain", chain, "cpsat", budget, slots=0, time_limit=20)
    check_replay(chain, budget, milp)
    check_replay(chain, budget, cpsat)
    assert milp.status in ("optimal", "infeasible") and milp.status == cpsat.status
    if milp.status == "optimal":
        assert milp.objective == pytest.approx(cpsat.objective)
        assert milp.lower_bound == pytest.approx(milp.objective)
        for base in (store_all_schedule(chain.length), *(periodic_schedule(chain.length, k)
                                                         for k in range(1, chain.length + 1))):
            sim = simulate(chain, base, budget)
            if sim.valid:
                assert milp.objective <= sim.makespan + 1e-9


@FAST
@given(chains(max_length=3), TIGHT_FRACS)
def test_exact_equals_brute_force(chain: Chain, frac: float) -> None:
    """The MILP (with and without dominance cuts and warm start) equals the brute force over phase
    schedules, at budgets drawn from the least feasible one (or one below) up to the store-all peak."""
    budget = tight_budget(chain, frac, least_phase_budget(chain))
    best, _ = brute_force(chain, budget, phase=True)
    anything, _ = brute_force(chain, budget)
    res = solve("chain", chain, "milp", budget, slots=0, time_limit=20)
    plain = solve("chain", chain, "milp", budget, slots=0, time_limit=20, dominance=False, warm_start=False)
    if best is None:
        assert res.status == plain.status == "infeasible" and anything is None
    else:
        assert res.status == plain.status == "optimal"
        assert res.objective == pytest.approx(best) and plain.objective == pytest.approx(best)
        assert anything is not None and anything <= best + 1e-9


def test_phase_model_loses_nothing_on_small_random_chains() -> None:
    """Observed, not proven: on these chains the best of all op sequences is a phase schedule."""
    for seed in range(6):
        chain = random_chain(3, seed, size_range=(1, 5), integer_times=True, overhead=0.5 * (seed % 2))
        least = least_phase_budget(chain)
        for frac in (-0.1, 0.0, 0.2, 0.4, 0.7):  # one below the least feasible budget, then feasible ones
            budget = tight_budget(chain, frac, least)
            anything, best = brute_force(chain, budget)[0], brute_force(chain, budget, phase=True)[0]
            assert (anything is None) == (best is None)
            if best is not None:
                assert anything == pytest.approx(best)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_infeasible_below_smallest_budget(solver: str) -> None:
    chain = random_chain(4, 3, size_range=(1, 6), integer_times=True, overhead=0.5)
    budget = int(chain.x[0])
    while brute_force(chain, budget, phase=True)[0] is None:
        budget += 1
    assert solve("chain", chain, solver, budget - 1, slots=0, time_limit=20).status == "infeasible"
    assert solve("chain", chain, solver, budget, slots=0, time_limit=20).status == "optimal"
    assert solve("chain", chain, solver, int(chain.x[0]) - 1, slots=0).status == "infeasible"


@pytest.mark.parametrize("backend", ["scip", "highs", "cbc", "cp-sat"])
def test_milp_backends_agree(backend: str) -> None:
    chain = random_chain(6, 1, integer_times=True)
    budget = budget_for(chain, 0.3, feasible=True)
    ref = solve("chain", chain, "milp", budget, slots=0, time_limit=20)
    res = solve("chain", chain, "milp", budget, slots=0, time_limit=20, backend=backend)
    assert res.status == ref.status == "optimal"
    assert res.objective == pytest.approx(ref.objective)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_time_limit_is_not_optimal(solver: str) -> None:
    chain = random_chain(40, 7)
    budget = budget_for(chain, 0.15, feasible=True)
    res = solve("chain", chain, solver, budget, slots=100, time_limit=0.05, warm_start=False)
    assert res.status in ("feasible", "timeout")
    if res.status == "feasible":
        check_replay(chain, budget, res)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_slots_fit_real_budget_and_beat_baselines(solver: str) -> None:
    chain = random_chain(8, 2)  # float times, sizes in bytes-like units
    grow = lambda a: np.where(a > 0, a * 1000 + 7, 0)  # noqa: E731
    chain = Chain(chain.u_f, chain.u_b, grow(chain.x), grow(chain.xbar), chain.o_f, chain.o_b)
    budget = budget_for(chain, 0.4, feasible=True)
    res = solve("chain", chain, solver, budget, slots=100, time_limit=30)
    assert res.status == "optimal" and res.peak_memory <= budget
    assert "100 slots" in res.scope
    assert res.log and res.log[-1][1] == pytest.approx(res.objective) and res.log[-1][2] == pytest.approx(res.objective)
    if rotor_available():
        assert res.details["warm_start"] == "rotor" and res.details["warm_start_fits"]
    periodic = solve("chain", chain, "periodic", budget)
    if periodic.schedule is not None:
        assert res.objective <= periodic.objective + 1e-9
    if not rotor_available():
        return
    rotor = solve("chain", chain, "rotor", budget, slots=100)
    if rotor.schedule is not None:
        assert res.objective <= rotor.objective + 1e-9


def test_encode_decode_round_trip() -> None:
    chain = random_chain(7, 4, integer_times=True)
    model = PhaseModel.build(chain, reference_peak(chain))
    for sched in [store_all_schedule(7)] + [periodic_schedule(7, k) for k in range(1, 8)]:
        values = model.encode(sched)
        assert values is not None and not model.violated(values)
        assert model.decode(values).ops == sched.ops
        assert model.objective.value(values) == pytest.approx(simulate(chain, sched).makespan)
    assert model.encode(Schedule([Op(F_ALL, 1)], 7)) is None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(), st.floats(0.0, 1.0))
def test_exact_at_most_rotor(chain: Chain, frac: float) -> None:
    """At budgets from the rotor DP's least one (`rotor_min_budget`) up to the store-all peak, where
    the rotor always has a schedule, the exact MILP is optimal and at most as slow."""
    pytest.importorskip("memsched.solvers.chain.dp")
    from memsched.solvers.chain.dp import rotor_min_budget

    budget = tight_budget(chain, frac, rotor_min_budget(chain))
    rotor = solve("chain", chain, "rotor", budget, slots=0)
    assert rotor.schedule is not None
    exact = solve("chain", chain, "milp", budget, slots=0, time_limit=20)
    assert exact.status == "optimal"
    assert exact.objective <= rotor.objective + 1e-9


def test_exact_beats_rotor_with_a_non_persistent_schedule() -> None:
    """Found by search: the optimum frees a checkpoint (F_n(1) after B(3)) and recomputes from a_0."""
    pytest.importorskip("memsched.solvers.chain.dp")
    chain = random_chain(4, 29, size_range=(1, 6), integer_times=True, overhead=0.5)
    rotor = solve("chain", chain, "rotor", 22, slots=0)
    for solver in ("milp", "cpsat"):
        exact = solve("chain", chain, solver, 22, slots=0, time_limit=20)
        assert exact.status == "optimal"
        assert exact.objective == pytest.approx(22.0) and rotor.objective == pytest.approx(23.0)


def test_exact_beats_rotor_by_a_tenth_without_overheads() -> None:
    """Found by search (23 of 723 random cells, L = 3-7, sizes 1-8, no overheads): a checkpoint
    a_4 serves phases 6 and 5 only and is consumed by F_n(4) before B(5); the persistent optimum
    pays 68 where the true optimum over all op sequences (Dijkstra) is 61."""
    pytest.importorskip("memsched.solvers.chain.dp")
    chain = random_chain(7, 1149, size_range=(1, 8), integer_times=True)
    assert not chain.o_f.any() and not chain.o_b.any()
    best, _ = brute_force(chain, 43)
    assert best == pytest.approx(61.0)
    assert solve("chain", chain, "rotor", 43, slots=0).objective == pytest.approx(68.0)
    for solver in ("milp", "cpsat"):
        exact = solve("chain", chain, solver, 43, slots=0, time_limit=20)
        assert exact.status == "optimal" and exact.objective == pytest.approx(best)
        check_replay(chain, 43, exact)


def test_highs_proves_the_true_optimum() -> None:
    """pywraplp's HiGHS stops at its default gap 1e-4 unless told otherwise (it then called
    121.1059 optimal here, where 121.0986 is the optimum)."""
    chain = random_chain(15, 0)
    highs = solve("chain", chain, "milp", 68, slots=100, backend="highs", time_limit=60)
    cpsat = solve("chain", chain, "cpsat", 68, slots=100, time_limit=60)
    assert highs.status == cpsat.status == "optimal"
    assert highs.objective == pytest.approx(cpsat.objective, rel=1e-9)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_rounding_infeasibility_retries_with_exact_sizes(solver: str) -> None:
    chain = random_chain(5, 0)  # budget 46 fits, but not once sizes are rounded up to 100 slots
    res = solve("chain", chain, solver, 46, slots=100, time_limit=20)
    assert res.status == "optimal" and res.peak_memory <= 46
    assert "exact sizes" in res.scope  # a budget of at most 100 units is never rounded (solvers.discretize)
    chain = Chain(chain.u_f, chain.u_b, chain.x * 10, chain.xbar * 10, chain.o_f * 10, chain.o_b * 10)
    res = solve("chain", chain, solver, 460, slots=100, time_limit=20)
    assert res.status == "optimal" and res.peak_memory <= 460
    assert "exact sizes" in res.scope and res.details["retried_exact_sizes"]


def test_rotor_is_not_a_lower_bound_without_overheads() -> None:
    """Found by brute force (random tiny chains, every o_f = o_b = 0): the phase model beats the
    persistent optimum here too, so the rotor DP's value bounds the phase model from above only."""
    pytest.importorskip("memsched.solvers.chain.dp")
    stages = [{"fwd_time": f, "bwd_time": b, "out_size": o, "tape_size": t, "fwd_overhead": 0, "bwd_overhead": 0}
              for f, b, o, t in ((2, 6, 2, 7), (1, 6, 5, 5), (1, 3, 4, 5), (4, 1, 3, 7))]
    chain = Chain.from_stages(5, stages, {"bwd_time": 0, "bwd_overhead": 0})
    best, schedule = brute_force(chain, 25, phase=True)
    assert best == pytest.approx(29.0) and schedule is not None
    assert solve("chain", chain, "rotor", 25, slots=0).objective == pytest.approx(31.0)
    res = solve("chain", chain, "milp", 25, slots=0, time_limit=20)
    assert res.status == "optimal" and res.objective == pytest.approx(29.0)
    check_replay(chain, 25, res)


def test_rotor_and_the_model_keep_exact_sizes_at_a_budget_within_the_slots() -> None:
    """A budget of at most 100 units keeps exact sizes in every solver (`effective_slots`): rotor
    with --slots 100 at M = 74 is rotor with exact sizes (it rounded to 100 slots of 0.74 units
    before, 145.87 against 140.16), and the exact model starts from it."""
    pytest.importorskip("memsched.solvers.chain.dp")
    chain = random_chain(20, 0)
    coarse = solve("chain", chain, "rotor", 74, slots=100)
    fine = solve("chain", chain, "rotor", 74, slots=0)
    assert coarse.objective == pytest.approx(fine.objective, rel=1e-12) and "exact sizes" in coarse.scope
    assert coarse.objective < 141.0
    res = solve("chain", chain, "milp", 74, slots=100, time_limit=3)
    assert res.details["warm_start_fits"]
    assert res.objective <= fine.objective + 1e-9
    check_replay(chain, 74, res)
