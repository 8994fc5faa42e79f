"""offload-exact's primal phase (`solvers.offload.exact_free_lns`): the neighbourhood search over
the compute sequence that follows stage 1 of the warm start.

Seeded with a worse compute sequence (remat-only's, no transfer) it finds a faster schedule of the
model; what it returns is a solution of the full model: its schedule replays in the offload
simulator within the budget with the model's makespan, and is never below the model's proven
optimum."""

from __future__ import annotations

import pytest
from memsched.solvers.chain import reference_peak
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.exact_model import discretise
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.offload import OffloadInstance, simulate
from memsched.solvers.offload.baselines import solve_remat_only
from memsched.solvers.offload.exact_free import FreeOrderModel, solve_offload_exact
from memsched.solvers.offload.exact_free_hint import complete_hint, hint
from memsched.solvers.offload.exact_free_lns import windows

SCALE = 1000.0  # ticks per time unit: integer times and transfers of whole milliseconds


def _instance(L: int, seed: int) -> OffloadInstance:
    """Integer times, sizes 1..8 bytes, 2000 bytes/s: every duration a whole number of ticks."""
    return OffloadInstance(random_chain(L, seed, integer_times=True, size_range=(1, 8)), 2000.0)


@pytest.mark.parametrize("L, seed", [(4, 0), (5, 2)])
def test_improves_a_remat_only_seed_and_replays(L, seed):
    inst = _instance(L, seed)
    budget = rotor_min_budget(inst.chain)
    dchain, M = discretise(inst.chain, budget, 0)
    model = FreeOrderModel(inst, dchain, M, SCALE, Deadline(60))
    remat = solve_remat_only(inst, budget, slots=0)
    assert hint(model, remat)
    makespan, solver = complete_hint(model, Deadline(60), ExactOptions(workers=1, time_limit=60), SCALE)
    notes = model.warm_notes
    assert makespan is not None and solver is not None
    # stage 1 keeps remat-only's sequence; the neighbourhood search finds a faster one
    assert notes["lns"]["improved"] >= 1
    assert makespan < notes["seed_sequence_makespan"] - 1e-9
    assert makespan < remat.objective - 1e-9
    sim = simulate(inst, model.schedule(solver), budget)
    assert sim.valid, sim.violation
    assert sim.peak_memory <= budget
    assert sim.makespan == pytest.approx(makespan, abs=1e-9)
    # never below the model's proven optimum (same class, exact sizes)
    best = solve_offload_exact(inst, budget, slots=0, time_limit=60)
    assert best.status == "optimal", best.message
    assert makespan >= best.objective - 1e-9


def test_windows_cover_every_stage_and_phase():
    inst = _instance(5, 0)
    budget = rotor_min_budget(inst.chain)
    dchain, M = discretise(inst.chain, budget, 0)
    model = FreeOrderModel(inst, dchain, M, SCALE, Deadline(60))
    wins = windows(model)
    assert len(set(wins)) == len(wins)
    stages = {j for axis, lo, hi in wins if axis == "j" for j in range(lo, hi + 1)}
    phases = {k for axis, lo, hi in wins if axis == "k" for k in range(lo, hi + 1)}
    assert stages == set(range(model.L))
    assert phases == set(range(model.L + 1))


def test_stops_at_the_every_op_once_bound():
    # a fast link and a budget just below store-all: a warm start hides every transfer, so its
    # makespan is sum u_fa + sum u_b and the full model is not run (optimal by that bound)
    inst = OffloadInstance(random_chain(4, 0, integer_times=True, size_range=(1, 8)), 1e6)
    budget = int(reference_peak(inst.chain)) - 1
    res = solve_offload_exact(inst, budget, slots=0, time_limit=60)
    assert res.status == "optimal", res.message
    assert res.objective == pytest.approx(inst.chain.total_time(), abs=1e-9)
    assert res.details["backend_status"].startswith("not run")
    sim = simulate(inst, res.schedule, budget)
    assert sim.valid, sim.violation
    assert sim.peak_memory <= budget
    assert sim.makespan == pytest.approx(res.objective, abs=1e-9)
