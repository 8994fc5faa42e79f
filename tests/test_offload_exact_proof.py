"""offload-exact's proof settings (docs/offload.md, *Link-capacity rows*): the rows of
`solvers.offload.exact_free_cuts` are on by default and the proof runs at linearization level 2.

The rows must cut off no schedule of the model's class. Two property tests on random chains with
L <= 3 check it: every row holds at *arbitrary* solutions of the model without the rows (found
with a random objective that rewards keeping values on the host, so that the link is busy; not
only at the optimum), and the default solver (rows, level 2, warm start) proves the same optimum
as the model without rows, solved plainly, and never claims to beat the enumeration's optimum
(`exact-combined`, the brute force over a wider class)."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.exact_model import discretise
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.discretize import tick_scale
from memsched.solvers.exact.options import Deadline
from memsched.solvers.offload import OffloadInstance, simulate
from memsched.solvers.offload.exact_combined import solve_exact_combined
from memsched.solvers.offload.exact_free import FreeOrderModel, solve_offload_exact
from memsched.solvers.offload.exact_free_cuts import add_link_bounds
from memsched.solvers.offload.exact_free_hint import CPSAT_EXTRA
from ortools.sat.python import cp_model

SETTINGS = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


def _instance(L: int, seed: int, bandwidth: float) -> OffloadInstance:
    return OffloadInstance(random_chain(L, seed, integer_times=True, size_range=(1, 8)), bandwidth)


def _plain(inst: OffloadInstance, budget: int) -> FreeOrderModel:
    """The model without the rows, exact sizes, whole ticks."""
    chain, L = inst.chain, inst.chain.length
    times = [float(t) for t in (*chain.u_fa[:L], *chain.u_fn[:L], *chain.u_b[: L + 1])] + [
        inst.transfer_time(int(b)) for b in (*chain.x[: L + 1], *chain.xbar[1 : L + 1])
    ]
    scale, exact = tick_scale(times)
    assert exact
    dchain, M = discretise(chain, budget, 0)
    return FreeOrderModel(inst, dchain, M, scale, Deadline(None), link_rows=False)


CASES = dict(  # random chains with L <= 3: lengths, seeds, link bandwidths, budget fractions
    L=st.integers(2, 3),
    seed=st.integers(0, 60),
    bandwidth=st.sampled_from([250.0, 1000.0, 4000.0]),
    frac=st.sampled_from([0.7, 0.85, 1.0]),
)


def _solver() -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 20.0
    return solver


@SETTINGS
@given(**CASES, weights=st.integers(0, 10_000))
def test_rows_hold_at_arbitrary_solutions_of_the_class(L, seed, bandwidth, frac, weights):
    inst = _instance(L, seed, bandwidth)
    budget = int(rotor_min_budget(inst.chain) * frac)
    model = _plain(inst, budget)
    if model.infeasible or not model.w:
        return
    rng = random.Random(weights)
    # reward away pieces (random weights) and some random compute Booleans: solutions far from the optimum
    terms = [rng.randint(1, 9) * w for w in model.w.values()] + [rng.randint(-3, 3) * x for x in model.x]
    model.cp.maximize(sum(terms))
    solver = _solver()
    code = solver.solve(model.cp)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return
    away = sum(solver.value(w) for w in model.w.values())
    rows = add_link_bounds(model, every_piece=True)  # every piece: more rows than the default checks
    assert rows
    for lhs, rhs in rows:
        assert solver.value(lhs) >= solver.value(rhs), (away, solver.value(lhs), solver.value(rhs))
    sim = simulate(inst, model.schedule(solver), budget)  # an arbitrary solution is a valid schedule too
    assert sim.valid, sim.violation


@SETTINGS
@given(**CASES)
def test_default_proof_matches_the_model_without_rows_and_the_brute_force(L, seed, bandwidth, frac):
    inst = _instance(L, seed, bandwidth)
    budget = int(rotor_min_budget(inst.chain) * frac)
    assert CPSAT_EXTRA["linearization_level"] == 2
    mine = solve_offload_exact(inst, budget, slots=0, time_limit=30)
    plain = _plain(inst, budget)
    solver = _solver()
    code = solver.solve(plain.cp) if not plain.infeasible else cp_model.INFEASIBLE
    if code == cp_model.INFEASIBLE:
        assert mine.status == "infeasible"
        return
    assert code == cp_model.OPTIMAL
    assert mine.status == "optimal", mine.message
    assert mine.details["link_rows"] > 0
    if mine.details.get("solution_from", "model") == "model":
        assert abs(mine.details["model_makespan"] * plain.scale - solver.objective_value) < 1e-6
    sim = simulate(inst, mine.schedule, budget)
    assert sim.valid, sim.violation
    assert mine.lower_bound is None or mine.lower_bound <= mine.objective + 1e-9
    truth = solve_exact_combined(inst, budget, slots=0, time_limit=30, workers=1)
    if truth.status == "optimal":  # the enumeration's class is wider: its optimum is never slower
        assert truth.objective <= mine.objective + 1e-9
