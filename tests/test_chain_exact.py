"""Exact chain models (phase model; MILP and CP-SAT): replay, agreement, brute force, limits."""

from __future__ import annotations

import heapq
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, reference_peak, simulate
from memsched.solvers.chain.baselines import periodic_schedule, store_all_schedule
from memsched.solvers.chain.exact_model import PhaseModel
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op, Schedule
from memsched.solvers.registry import solve

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def brute_force(chain: Chain, budget: int, *, phase: bool = False) -> tuple[float | None, Schedule | None]:
    """Least makespan over all op sequences (Dijkstra on the simulator's states); with
    `phase`, forwards between two backward ops must run in increasing stage order."""
    L = chain.length
    x, xb = [int(v) for v in chain.x], [int(v) for v in chain.xbar]
    ofa, ofn, ob = [int(v) for v in chain.o_fa], [int(v) for v in chain.o_fn], [int(v) for v in chain.o_b]
    if x[0] > budget:
        return None, None

    def memory(acts: int, tapes: int, nb: int) -> int:
        m = sum(x[j] for j in range(L + 1) if acts >> j & 1) + sum(xb[j] for j in range(1, L + 1) if tapes >> j & 1)
        return m + (x[nb + 1] if nb < L else 0)  # the gradient delta_{nb+1}

    start = (1, 0, L, -1)  # standalone activations, tapes (bit masks), next backward, last forward
    dist, prev, tie = {start: 0.0}, {}, itertools.count()
    heap = [(0.0, next(tie), start)]
    while heap:
        d, _, s = heapq.heappop(heap)
        if d > dist[s]:
            continue
        acts, tapes, nb, last = s
        if nb == -1:
            ops = []
            while s in prev:
                s, op = prev[s]
                ops.append(op)
            return d, Schedule(ops[::-1], L)
        m = memory(acts, tapes, nb)
        succ = []
        for i in range(L):
            if (phase and i <= last) or not (acts >> i & 1 or (i >= 1 and tapes >> i & 1)):
                continue
            if not tapes >> (i + 1) & 1 and m + xb[i + 1] + ofa[i] <= budget:
                succ.append((Op(F_ALL, i), acts, tapes | 1 << (i + 1), nb, chain.u_fa[i]))
            if not acts >> (i + 1) & 1 and m + x[i + 1] + ofn[i] <= budget:
                succ.append((Op(F_CK, i), acts | 1 << (i + 1), tapes, nb, chain.u_fn[i]))
                succ.append((Op(F_N, i), (acts | 1 << (i + 1)) & ~(1 << i), tapes, nb, chain.u_fn[i]))
        if nb == L:
            if (acts >> L & 1 or tapes >> L & 1) and m + x[L] + ob[L] <= budget:
                succ.append((Op(LOSS, L), acts & ~(1 << L), tapes, L - 1, chain.u_b[L]))
        elif (tapes >> (nb + 1) & 1 and (acts >> nb & 1 or (nb >= 1 and tapes >> nb & 1))
              and m + x[nb] + ob[nb] <= budget):
            succ.append((Op(B, nb), acts & ~(1 << nb), tapes & ~(1 << (nb + 1)), nb - 1, chain.u_b[nb]))
        for op, a2, t2, nb2, dt in succ:
            s2 = (a2, t2, nb2, (-1 if op.kind in (B, LOSS) else op.index) if phase else -1)
            d2 = d + float(dt)
            if d2 < dist.get(s2, float("inf")) - 1e-12:
                dist[s2], prev[s2] = d2, (s, op)
                heapq.heappush(heap, (d2, next(tie), s2))
    return None, None


@st.composite
def chains(draw, max_length: int = 5, release: bool = False) -> Chain:
    """Random chains with per-mode forward overheads and times; with `release`, B(i) releases its
    inputs early (``bwd_overhead_released`` down to -(out_size + tape_size))."""
    L = draw(st.integers(1, max_length))
    size = st.integers(1, 6)
    stages = []
    for _ in range(L):
        out = draw(size)
        o_fa, o_fn = draw(st.integers(0, 2)), draw(st.integers(0, 4))  # per-mode forward overheads
        u_fa, u_fn = draw(st.integers(1, 5)), draw(st.integers(0, 5))  # per-mode forward times
        stages.append({"fwd_time": max(u_fa, u_fn), "fwd_time_all": u_fa, "fwd_time_nograd": u_fn,
                       "bwd_time": draw(st.integers(1, 8)), "out_size": out,
                       "tape_size": out + draw(st.integers(0, 6)), "fwd_overhead": max(o_fa, o_fn),
                       "fwd_overhead_all": o_fa, "fwd_overhead_nograd": o_fn, "bwd_overhead": draw(st.integers(0, 2))})
        if release:
            freed = stages[-1]["out_size"] + stages[-1]["tape_size"]
            stages[-1]["bwd_overhead_released"] = max(-freed, stages[-1]["bwd_overhead"]
                                                      - draw(st.integers(0, freed + 2)))
    loss = {"bwd_time": draw(st.integers(0, 2)), "bwd_overhead": draw(st.integers(0, 1))}
    return Chain.from_stages(draw(size), stages, loss)


def rotor_available() -> bool:
    try:
        import memsched.solvers.chain.dp  # noqa: F401
    except ImportError:
        return False
    return True


def budget_for(chain: Chain, frac: float, *, feasible: bool = False) -> int:
    """A budget `frac` of the way from the input size (or, with `feasible`, from the peak of
    recompute-all, which always fits) to the store-all peak."""
    lo = solve("chain", chain, "recompute-all", 0).min_budget if feasible else int(chain.x[0])
    return lo + int(round(frac * (reference_peak(chain) - lo)))


def least_phase_budget(chain: Chain) -> int:
    """The least integer budget M at which a phase schedule exists (brute force; bisection between
    x[0] - 1, where nothing fits, and the store-all peak, where store-all fits: a schedule that fits
    M fits every larger budget)."""
    lo, hi = int(chain.x[0]) - 1, reference_peak(chain)  # invariant: infeasible at lo, feasible at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if brute_force(chain, mid, phase=True)[0] is None:
            lo = mid
        else:
            hi = mid
    return hi


#: draws for `tight_budget`: below 0 (about one example in eight) just under the least budget, else a
#: fraction of the way from the least budget up to the store-all peak
TIGHT_FRACS = st.floats(-0.15, 1.0)


def tight_budget(chain: Chain, frac: float, least: int) -> int:
    """A budget for property tests that mostly admits a schedule: with `frac` >= 0, `frac` of the way
    from `least` (the least feasible budget of the scope under test) to the store-all peak, rounded
    down (so below the peak when `frac` < 1 and `least` < peak); with `frac` < 0, `least` - 1, where
    the exact models must answer infeasible."""
    if frac < 0:
        return least - 1
    peak = reference_peak(chain)
    return least + int(frac * (max(peak, least) - least))


def check_replay(chain: Chain, budget: int, res) -> None:
    if res.schedule is not None:
        sim = simulate(chain, res.schedule, budget)
        assert sim.valid, sim.violation
        assert sim.makespan == pytest.approx(res.objective)
        assert sim.peak_memory <= budget
    if res.lower_bound is not None and res.objective is not None:
        assert res.lower_bound <= res.objective + 1e-6


@FAST
@given(chains(), st.floats(0.0, 1.0))
def test_milp_and_cpsat_agree_and_replay(chain: Chain, frac: float) -> None:
    budget = budget_for(chain, frac)
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
        for frac in (0.0, 0.2, 0.4, 0.7):
            budget = budget_for(chain, frac)
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
