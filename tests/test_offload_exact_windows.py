"""offload-exact: the neighbourhood windows of its warm start (`exact_free_lns`) and its choice of
sizes (`exact_free_retry`).

Windows: a ``"J"`` window frees what the ``"j"`` window of the same stages frees and the states
of the value its last stage makes; windows overlap when they share a stage (or a phase). Sizes:
when pofo at exact sizes beats the fast solvers at N slots, the model runs with exact sizes (its
scope says so), proves its optimum there, never loses to pofo at exact sizes, and its schedule
replays within the budget with the model's makespan."""

from __future__ import annotations

import pytest
from memsched.solvers.chain.exact_model import discretise
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.exact.options import Deadline
from memsched.solvers.offload import OffloadInstance, simulate
from memsched.solvers.offload.dp import solve_pofo
from memsched.solvers.offload.exact_free import FreeOrderModel, solve_offload_exact
from memsched.solvers.offload.exact_free_lns import in_window, overlaps, windows


def _instance(L: int, seed: int, bandwidth: float) -> OffloadInstance:
    """Integer times, sizes 1..8 bytes: durations and transfer times are whole ticks."""
    return OffloadInstance(random_chain(L, seed, integer_times=True, size_range=(1, 8)), bandwidth)


def test_state_windows_contain_stage_windows_and_free_the_values_made():
    inst = _instance(5, 0, 2000.0)
    dchain, M = discretise(inst.chain, 10**6, 0)
    model = FreeOrderModel(inst, dchain, M, 1000.0, Deadline(30))
    keys = model.pm.keys
    wins = windows(model)
    assert len(set(wins)) == len(wins)
    assert {w[0] for w in wins} == {"j", "J", "k"}
    for axis, lo, hi in wins:
        free = {key for key in keys if in_window(key, axis, lo, hi)}
        ops = {key for key in free if key[0] in ("FA", "FC", "FN")}
        if axis == "k":
            assert free == {key for key in keys if lo <= key[1] <= hi}
            continue
        assert ops == {key for key in keys if key[0] in ("FA", "FC", "FN") and lo <= key[2] <= hi}
        states = {key for key in free if key[0] in ("SA", "ST")}
        top = hi + 1 if axis == "J" else hi
        assert states == {key for key in keys if key[0] in ("SA", "ST") and lo <= key[2] <= top}
        if axis == "J":
            assert {key for key in keys if in_window(key, "j", lo, hi)} < free
            # the states of the value made by the last stage are free: some phase holds one
            assert any(key[2] == hi + 1 for key in states)


def test_overlaps_is_symmetric_and_separates_stage_and_phase_windows():
    assert overlaps(("j", 1, 2), ("J", 2, 4)) and overlaps(("J", 2, 4), ("j", 1, 2))
    assert not overlaps(("j", 1, 2), ("j", 3, 4))
    assert not overlaps(("j", 1, 2), ("k", 1, 2))
    assert overlaps(("k", 3, 5), ("k", 5, 6))


def _check_replay(inst: OffloadInstance, res, budget: int) -> None:
    sim = simulate(inst, res.schedule, budget)
    assert sim.valid, sim.violation
    assert sim.peak_memory <= budget
    assert res.objective == pytest.approx(sim.makespan, abs=1e-9)


# (L, seed, bandwidth, budget, slots): pofo is 24.0 at exact sizes and 25.0 with sizes in 6 slots
def test_runs_with_exact_sizes_when_pofo_at_exact_sizes_is_faster():
    inst, budget, slots = _instance(3, 1, 500.0), 41, 6
    pofo_exact = solve_pofo(inst, budget, slots=0)
    assert pofo_exact.objective < solve_pofo(inst, budget, slots=slots).objective - 1e-9
    res = solve_offload_exact(inst, budget, slots=slots, time_limit=30)
    assert "pofo at exact sizes" in res.details["exact_sizes"]
    assert "exact sizes" in res.scope and f"{slots} slots" not in res.scope
    assert res.status == "optimal", res.message
    _check_replay(inst, res, budget)
    assert res.objective <= pofo_exact.objective + 1e-9
    # the same model as asked for with exact sizes directly
    direct = solve_offload_exact(inst, budget, slots=0, time_limit=30)
    assert direct.status == "optimal"
    assert res.objective == pytest.approx(direct.objective, abs=1e-9)
    assert "exact_sizes" not in direct.details


def test_runs_with_exact_sizes_when_no_fast_solver_has_a_schedule():
    inst = _instance(3, 0, 2000.0)
    budget = 25  # one below pofo's least budget at exact sizes (26)
    assert solve_pofo(inst, budget, slots=0).objective is None
    assert solve_pofo(inst, budget + 1, slots=0).objective is not None
    res = solve_offload_exact(inst, budget, slots=6, time_limit=30)
    assert "no fast solver" in res.details["exact_sizes"]
    assert "exact sizes" in res.scope
    # the same answer as the model asked for with exact sizes directly
    direct = solve_offload_exact(inst, budget, slots=0, time_limit=30)
    assert res.status == direct.status == "infeasible"
