"""The exact CP-SAT model of rematerialization + offloading (`exact-combined`) on small chains:
its schedules replay within the budget with the model's own makespan, and it is never worse
than the DP (pofo), the heuristic (rotor-offload), remat-only (rotor) or the store-all-order
offloading CP-SAT model whenever those have schedules ("exact <= DP")."""

from __future__ import annotations

import pytest
from conftest import offload_int_instance
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import reference_peak as store_all_peak
from memsched.solvers.chain.schedule import Op
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.baselines import solve_remat_only
from memsched.solvers.offload.combined import solve_rotor_offload
from memsched.solvers.offload.cpsat import solve_cpsat
from memsched.solvers.offload.dp import solve_pofo
from memsched.solvers.offload.exact_combined import phase_sequences, solve_exact_combined

#: The solvers whose schedules lie in exact-combined's class (their compute sequences have the
#: phase form, checked below, and each idle gap of a value carries at most one Off/Pre pair).
OTHERS = {"pofo": solve_pofo, "rotor-offload": solve_rotor_offload, "remat-only": solve_remat_only,
          "cpsat": solve_cpsat}


sizes = st.lists(st.integers(1, 5), min_size=5, max_size=5)
small = st.lists(st.integers(0, 3), min_size=5, max_size=5)
times = st.lists(st.integers(1, 3), min_size=5, max_size=5)


@settings(max_examples=15, deadline=None)
@given(L=st.integers(2, 4), x=sizes, extra=small, u_f=times, u_b=times, o_f=small, o_b=small,
       per_byte=st.sampled_from([0.5, 1.0, 2.0]), frac=st.floats(0.7, 1.0))
def test_exact_combined_bounds_the_dp_and_heuristics(L, x, extra, u_f, u_b, o_f, o_b, per_byte, frac):
    inst = offload_int_instance(L, x, extra, u_f, u_b, o_f, o_b, per_byte)
    budget = int(store_all_peak(inst.chain) * frac)
    res = solve_exact_combined(inst, budget, slots=0, time_limit=30)
    assert res.status in ("optimal", "feasible", "infeasible")
    if res.schedule is not None:
        sim = simulate_offload(inst, res.schedule, budget)
        assert sim.valid, sim.violation
        assert sim.peak_memory <= budget
        assert res.objective == pytest.approx(sim.makespan, abs=1e-9)
        assert res.peak_memory == sim.peak_memory
        if res.status == "optimal":
            assert res.details["model_makespan"] == pytest.approx(sim.makespan, abs=1e-9)
            assert res.lower_bound == pytest.approx(res.objective, abs=1e-9)
    classes = {tuple(seq) for seq in phase_sequences(L)}
    for name, solve in OTHERS.items():
        other = solve(inst, budget, slots=0)
        if other.schedule is None:
            continue
        assert tuple(op for op in other.schedule.ops if isinstance(op, Op)) in classes, name
        assert res.schedule is not None, f"{name} has a schedule, exact-combined has none"
        assert res.objective <= other.objective + 1e-9, (name, res.objective, other.objective)


def test_combined_beats_both_pure_strategies():
    """A chain where mixing recomputation and transfers is strictly better than the best
    pure-offloading (store-all order: none fits) and pure-checkpointing schedules; pofo reaches
    it only by offloading the input of an F_all (a_2 during the loss), which it covers."""
    inst = offload_int_instance(4, [1, 4, 1, 3, 2], [0, 4, 2, 3, 1], [1, 2, 3, 1], [2, 3, 3, 2, 2],
                     [0] * 5, [0] * 5, 1.0)
    budget = 14
    res = solve_exact_combined(inst, budget, slots=0, time_limit=120)  # ~20 s alone; 2 shared cores
    assert res.status == "optimal"
    assert res.objective == pytest.approx(24.0)
    assert res.lower_bound == pytest.approx(24.0)
    assert res.peak_memory <= budget
    assert res.schedule.transfers()
    offload_only = solve_cpsat(inst, budget, slots=0)  # no store-all-order schedule fits: pofo's is returned
    assert offload_only.details.get("model_status") == "infeasible" and offload_only.status == "feasible"
    assert solve_remat_only(inst, budget, slots=0).objective == pytest.approx(26.0)
    pofo = solve_pofo(inst, budget, slots=0)
    assert pofo.objective == pytest.approx(res.objective)
    assert "F_all(2) Off(a_2)" in str(pofo.schedule)


def test_through_the_registry(monkeypatch):
    from memsched.solvers import registry
    from memsched.solvers.offload import SOLVERS

    monkeypatch.setitem(SOLVERS, "exact-combined",
                        ("memsched.solvers.offload.exact_combined:solve_exact_combined", "test"))
    inst = offload_int_instance(3, [2, 3, 1, 4, 1], [0, 2, 1, 3, 0], [1, 2, 1, 1, 1], [2, 2, 3, 1, 1],
                     [0] * 5, [0] * 5, 0.5)
    budget = int(store_all_peak(inst.chain) * 0.8)
    res = registry.solve("offload", inst, "exact-combined", budget, slots=0)
    assert res.status == "optimal"
    assert res.peak_memory <= budget


def test_too_small_budget_is_infeasible():
    inst = offload_int_instance(2, [3, 3, 3, 1, 1], [0, 2, 2, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1],
                     [0] * 5, [0] * 5, 1.0)
    res = solve_exact_combined(inst, 4, slots=0)
    assert res.status == "infeasible"
    assert res.schedule is None


def test_phase_sequences_contain_store_all():
    from memsched.solvers.chain.baselines import store_all_schedule

    for L in range(1, 5):
        assert tuple(store_all_schedule(L).ops) in {tuple(s) for s in phase_sequences(L)}


def test_slots_keep_the_real_budget():
    inst = offload_int_instance(3, [2, 3, 1, 4, 1], [0, 2, 1, 3, 0], [1, 2, 1, 1, 1], [2, 2, 3, 1, 1],
                     [0] * 5, [0] * 5, 1.0)
    budget = int(store_all_peak(inst.chain) * 0.7)
    res = solve_exact_combined(inst, budget, slots=7, time_limit=30)
    if res.schedule is not None:
        sim = simulate_offload(inst, res.schedule, budget)
        assert sim.valid and sim.peak_memory <= budget
        assert res.status in ("optimal", "feasible")
