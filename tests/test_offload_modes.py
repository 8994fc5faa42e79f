"""Per-mode forward overheads and times in the offloading problem (o_fa, u_fa for F_all; o_fn, u_fn
for F_ck / F_n): a schedule without transfers replays in the two-stream simulator exactly as in the
chain simulator, and every offloading solver that models memory charges the same per-mode values
(pofo's DP on a dead link is rotor's, exact models never above pofo, every schedule fits)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fa_cheap_instance, mode_chain
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain import reference_peak as store_all_peak
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule, store_all_schedule
from memsched.solvers.chain.dp import rotor_min_budget, solve_rotor
from memsched.solvers.offload import OffloadInstance, OffloadSchedule
from memsched.solvers.offload import load as load_offload
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.dp import PofoTable, solve_pofo

PAPER = Path(__file__).resolve().parents[1] / "results" / "fig_paper_offload" / "gpt2_medium-b8-1024.v100.json"


def _same_replay(chain: Chain, schedule, budget: int | None = None) -> None:
    inst = OffloadInstance(chain, 1e9)
    a = simulate(chain, schedule, budget)
    b = simulate_offload(inst, OffloadSchedule.from_chain(schedule), budget)
    assert a.peak_memory == b.peak_memory or not (a.valid and b.valid)
    assert a.valid == b.valid, (a.violation, b.violation)
    if a.valid:
        assert a.makespan == pytest.approx(b.makespan, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 9), seed=st.integers(0, 10_000), frac=st.floats(0.0, 1.0),
       fa_larger=st.sampled_from([None, True, False]), times=st.booleans())
def test_no_transfers_replay_as_the_chain_simulator(L, seed, frac, fa_larger, times):
    chain = mode_chain(L, seed, fa_larger=fa_larger, times=times)
    lo, hi = rotor_min_budget(chain), store_all_peak(chain)
    budget = int(lo + frac * (hi - lo))
    schedules = [store_all_schedule(L), recompute_all_schedule(L), periodic_schedule(L, max(1, L // 2))]
    rotor = solve_rotor(chain, budget, slots=0)
    if rotor.schedule is not None:
        schedules.append(rotor.schedule)
    for schedule in schedules:
        _same_replay(chain, schedule)
        peak = simulate(chain, schedule).peak_memory
        _same_replay(chain, schedule, peak)       # fits in both
        _same_replay(chain, schedule, peak - 1)   # rejected by both


def test_paper_chain_remat_only_replays_as_the_chain():
    """The reported bug: rotor's schedule for GPT-2 medium (o_fa != o_fn) at 10258013147 bytes was
    rejected by the offload simulator (10.68 GB, charging max(o_fa, o_fn) to every F_all)."""
    inst = load_offload(str(PAPER), bandwidth=12e9)
    chain, budget = inst.chain, 10258013147
    assert chain.has_mode_overheads()
    rotor = solve_rotor(chain, budget, slots=200)
    assert rotor.schedule is not None
    a = simulate(chain, rotor.schedule, budget)
    b = simulate_offload(inst, OffloadSchedule.from_chain(rotor.schedule), budget)
    assert a.valid and b.valid, b.violation
    assert a.peak_memory == b.peak_memory <= budget and a.makespan == pytest.approx(b.makespan, rel=1e-12)
    for name in ("remat-only", "pofo"):
        res = registry.solve("offload", inst, name, budget, slots=200)
        assert res.status in ("optimal", "feasible") and res.peak_memory <= budget
        sim = simulate_offload(inst, res.schedule, budget)
        assert sim.valid and res.objective == pytest.approx(sim.makespan, rel=1e-12)
    assert res.objective <= rotor.objective * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(L=st.integers(1, 7), seed=st.integers(0, 10_000), frac=st.floats(0.0, 1.0),
       fa_larger=st.sampled_from([None, True, False]), slots=st.sampled_from([0, 60]), times=st.booleans())
def test_pofo_on_a_dead_link_is_per_mode_rotor(L, seed, frac, fa_larger, slots, times):
    """With transfers that never pay, pofo's table is the chain's rotor table, which charges
    per mode (checked there against a brute force): same value at every budget."""
    chain = mode_chain(L, seed, fa_larger=fa_larger, times=times)
    inst = OffloadInstance(chain, 1e-6)
    lo, hi = rotor_min_budget(chain), store_all_peak(chain)
    budget = int(lo + frac * (hi - lo))
    work, M = (chain, budget) if slots == 0 else (chain.discretised(budget / slots), slots)
    rotor = solve_rotor(work, M, slots=0)  # rotor's table at the same sizes (slots of budget / slots)
    value = PofoTable(work, inst, M).value(M - int(work.x[0]))
    if rotor.schedule is None:  # only a transfer (at a ruinous price) can make it fit
        assert value >= inst.transfer_time(1)
    else:
        assert value == pytest.approx(rotor.objective, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(L=st.integers(1, 6), seed=st.integers(0, 10_000), frac=st.floats(0.5, 1.05),
       bandwidth=st.sampled_from([1e15, 1e4, 3e3]), fa_larger=st.sampled_from([None, True, False]),
       slots=st.sampled_from([0, 40]), times=st.booleans())
def test_solvers_schedules_fit_on_mode_chains(L, seed, frac, bandwidth, fa_larger, slots, times):
    chain = mode_chain(L, seed, fa_larger=fa_larger, times=times)
    inst = OffloadInstance(chain, bandwidth)
    lo, hi = rotor_min_budget(chain), store_all_peak(chain)
    budget = max(1, int(lo * frac) if frac < 1 else int(lo + (frac - 1) * 20 * (hi - lo)))
    results = {}
    for name in ("none", "remat-only", "vdnn", "offload-prefix", "pofo", "rotor-offload"):
        res = registry.solve("offload", inst, name, budget, slots=slots)
        results[name] = res
        if res.schedule is None:
            continue
        sim = simulate_offload(inst, res.schedule, budget)
        assert sim.valid, (name, sim.violation)
        assert res.peak_memory == sim.peak_memory <= budget
        assert res.objective == pytest.approx(sim.makespan, rel=1e-12, abs=1e-12)
    pofo = results["pofo"]
    for name in ("remat-only", "rotor-offload"):
        if results[name].schedule is not None and results[name].details.get("slots", slots) == slots:
            assert pofo.objective is not None and pofo.objective <= results[name].objective * (1 + 1e-9)


def test_hand_case_fits_only_when_charged_per_mode():
    inst, budget = fa_cheap_instance()
    chain = inst.chain
    assert budget < store_all_peak(Chain(chain.u_f, chain.u_b, chain.x, chain.xbar, chain.o_f, chain.o_b))
    total = chain.total_time()
    for name in ("none", "remat-only", "pofo", "offload-prefix"):
        res = registry.solve("offload", inst, name, budget, slots=0)
        assert res.status in ("optimal", "feasible"), (name, res.message)
        assert res.objective == pytest.approx(total) and res.peak_memory <= budget
    res = solve_pofo(inst, budget, slots=0)
    assert res.details["dp_estimate"] == pytest.approx(total)
    for name in ("cpsat", "exact-combined", "offload-exact"):
        res = registry.solve("offload", inst, name, budget, slots=0, time_limit=20, workers=1)
        assert res.status in ("optimal", "feasible"), (name, res.message)
        assert res.objective == pytest.approx(total) and res.peak_memory <= budget
    # one byte less: nothing fits without transfers, with F_all's real overhead charged
    assert registry.solve("offload", inst, "none", budget - 1).status == "infeasible"


@pytest.mark.parametrize("L, seed, fa_larger, bandwidth, times", [
    (2, 3, False, 500.0, False), (3, 5, True, 2000.0, False), (3, 2, False, 500.0, False),
    (3, 4, False, 500.0, True), (3, 6, True, 2000.0, True)])
def test_exact_models_never_above_pofo_on_mode_chains(L, seed, fa_larger, bandwidth, times):
    chain = mode_chain(L, seed, fa_larger=fa_larger, times=times, integer_times=True, size_range=(1, 8))
    assert chain.has_mode_times() == times
    inst = OffloadInstance(chain, bandwidth)
    budget = (rotor_min_budget(chain) + store_all_peak(chain)) // 2
    pofo = solve_pofo(inst, budget, slots=0)
    assert pofo.schedule is not None
    for name in ("exact-combined", "offload-exact"):
        res = registry.solve("offload", inst, name, budget, slots=0, time_limit=20, workers=1)
        assert res.schedule is not None, (name, res.message)
        sim = simulate_offload(inst, res.schedule, budget)
        assert sim.valid, (name, sim.violation)
        assert res.objective == pytest.approx(sim.makespan, abs=1e-9)
        assert res.objective <= pofo.objective + 1e-9
        if res.status == "optimal" and res.details.get("model_makespan") is not None \
                and "solution_from" not in res.details:  # the model's own schedule (not a seed's) is the answer
            assert res.details["model_makespan"] == pytest.approx(res.objective, abs=1e-9)
