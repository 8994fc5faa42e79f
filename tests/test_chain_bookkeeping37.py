"""Bookkeeping of two chain answers (hunt 37).

1. `periodic` without ``segments`` reported the chosen count's peak as ``min_budget`` when a
   count fitted (examples/tiny.json: 21 at budget 21, 28 at budget 28, makespan 14), while
   ``min_budget`` is the smallest budget the solver meets: the least peak over all counts, as
   its infeasible answer already said.
2. The exact layer's referee, returning the seed's schedule when it beat the model, dropped the
   model's bound (a bound of the model at N slots, above the seed's makespan) but left
   ``details["bound_from"]`` naming it, the log ending with a bound above the objective, and the
   scope stating the slot model that the returned schedule lies outside of (cpsat on gpt2_medium at
   45%: bound_from "root LP with tape cuts", log ``[30.01, 1467.35, 1469.71]``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memsched.solvers import registry
from memsched.solvers.chain import load, reference_peak
from memsched.solvers.chain.baselines import periodic_schedule, recompute_all_schedule
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.simulator import simulate
from memsched.solvers.exact import Deadline, ExactOptions
from memsched.solvers.exact.layer import referee
from memsched.solvers.result import FEASIBLE, INFEASIBLE, SolveResult

TINY = Path(__file__).resolve().parents[1] / "examples" / "tiny.json"
FLOOR = "every operation once"  # details["bound_from"] of the floor (sum of the op times)
ROOT_LP = "root LP with tape cuts"


# --------------------------------------------------------------------------- 1. periodic's min_budget
def _least_periodic_peak(chain) -> int:
    return min(simulate(chain, periodic_schedule(chain.length, k)).peak_memory for k in range(1, chain.length + 1))


def test_periodic_min_budget_is_the_least_peak_over_counts_on_tiny() -> None:
    chain = load(str(TINY))
    least = _least_periodic_peak(chain)
    at_least = registry.solve("chain", chain, "periodic", least)
    roomy = registry.solve("chain", chain, "periodic", 28)
    assert at_least.status == FEASIBLE and roomy.status == FEASIBLE
    assert roomy.objective < at_least.objective  # a faster count with a larger peak is chosen at 28
    assert roomy.peak_memory > least
    assert at_least.min_budget == roomy.min_budget == least
    below = registry.solve("chain", chain, "periodic", least - 1)
    assert below.status == INFEASIBLE and below.min_budget == least


def test_periodic_with_a_fixed_count_keeps_that_counts_peak() -> None:
    chain = load(str(TINY))
    for k in range(1, chain.length + 1):
        peak = simulate(chain, periodic_schedule(chain.length, k)).peak_memory
        res = registry.solve("chain", chain, "periodic", 10**6, segments=k)
        assert res.status == FEASIBLE and res.min_budget == peak


@pytest.mark.parametrize("seed", range(12))
def test_periodic_min_budget_never_depends_on_the_budget(seed: int) -> None:
    chain = random_chain(3 + seed % 6, seed, size_range=(0, 8), integer_times=True, overhead=1.5 * (seed % 2),
                         release=0.5 * (seed % 3 == 0))
    least = _least_periodic_peak(chain)
    peaks = {simulate(chain, periodic_schedule(chain.length, k)).peak_memory for k in range(1, chain.length + 1)}
    for budget in sorted(peaks | {least - 1, reference_peak(chain)}):
        res = registry.solve("chain", chain, "periodic", budget)
        assert res.min_budget == least, (budget, res.status, res.details)
        assert (res.status == FEASIBLE) == (budget >= least)


# --------------------------------------------------------------------------- 2. the referee's bookkeeping
def _case():
    """A 6-stage chain at a budget where rotor (exact sizes) takes 46 and recompute-all (the stand-in
    for a slower model schedule) 75; every op once is 38."""
    chain = random_chain(6, 3, size_range=(1, 9), integer_times=True)
    budget = 47
    seed = registry.solve("chain", chain, "rotor", budget, slots=0)
    model_schedule = recompute_all_schedule(chain.length)
    model_makespan = simulate(chain, model_schedule).makespan
    assert seed.objective is not None and chain.total_time() < seed.objective < model_makespan
    return chain, budget, seed, model_schedule, model_makespan


def _referee(chain, budget, seed, res: SolveResult) -> SolveResult:
    return referee("chain", "cpsat", chain, budget, res, [seed], seed, Deadline(10.0),
                   ExactOptions(time_limit=10.0, slots=20), float(chain.total_time()))


def _slot_model_answer(schedule, makespan: float, bound: float, seed_objective: float) -> SolveResult:
    """What the phase model at 20 slots answers (then through `log_from_seed`): slower than the seed,
    with `bound` from the root LP."""
    return SolveResult(
        problem="chain", solver="cpsat", status=FEASIBLE, objective=makespan, schedule=schedule, lower_bound=bound,
        scope="phase model: between consecutive backward ops at most one forward per stage; sizes in 20 slots; CP-SAT",
        log=[(0.1, seed_objective, None), (0.5, seed_objective, 0.5 * seed_objective), (2.0, seed_objective, bound)],
        details={"bound_from": ROOT_LP, "root_lp": bound})


def test_a_dropped_slot_model_bound_is_not_named_logged_or_scoped() -> None:
    chain, budget, seed, schedule, makespan = _case()
    bound = seed.objective + 3.0  # a bound of the 20-slot model, above rotor's exact-size makespan
    res = _referee(chain, budget, seed, _slot_model_answer(schedule, makespan, bound, seed.objective))
    assert res.status == FEASIBLE and res.details["solution_from"] == "rotor"
    assert res.objective == pytest.approx(seed.objective)
    assert res.lower_bound == pytest.approx(chain.total_time())
    assert res.details["bound_from"] == FLOOR
    assert all(b is None or b <= res.objective for _, _, b in res.log), res.log
    assert res.log[-1][2] == pytest.approx(res.lower_bound)  # the log ends at the answer's bound
    assert res.log[0][2] is None  # nothing was known then, and nothing is invented
    assert res.scope.startswith("rotor's schedule (") and "20 slots" not in res.scope


def test_a_kept_model_bound_keeps_its_source_scope_and_log() -> None:
    chain, budget, seed, schedule, makespan = _case()
    bound = seed.objective - 1.0  # below the seed's makespan and above the floor: a valid bound, kept
    model = _slot_model_answer(schedule, makespan, bound, seed.objective)
    log, scope = list(model.log), model.scope
    res = _referee(chain, budget, seed, model)
    assert res.lower_bound == pytest.approx(bound) and res.details["bound_from"] == ROOT_LP
    assert res.log == log and res.scope == scope


def test_the_floor_replacing_a_weaker_model_bound_is_named() -> None:
    chain, budget, seed, schedule, makespan = _case()
    weak = chain.total_time() - 5.0  # valid, but the floor is higher
    res = _referee(chain, budget, seed, _slot_model_answer(schedule, makespan, weak, seed.objective))
    assert res.lower_bound == pytest.approx(chain.total_time()) and res.details["bound_from"] == FLOOR


def test_a_slot_models_optimum_that_loses_to_rotor_end_to_end() -> None:
    """random_chain(7, 4) at 80% with 8 slots: the model's optimum (at 8 slots, root LP 57.5) is
    slower than rotor's 54 at exact sizes; its bound must not survive in bound_from or the log."""
    chain = random_chain(7, 4, size_range=(1, 9), integer_times=True)
    budget = int(0.8 * reference_peak(chain))
    for name in ("cpsat", "milp"):
        res = registry.solve("chain", chain, name, budget, slots=8, time_limit=5)
        assert res.status in (FEASIBLE, "optimal") and res.objective is not None
        assert res.lower_bound is not None and res.lower_bound <= res.objective
        assert all(b is None or b <= res.objective * (1 + 1e-9) for _, _, b in res.log), (name, res.log)
        if res.details.get("solution_from") == "rotor" and res.lower_bound == pytest.approx(chain.total_time()):
            assert res.details.get("bound_from") == FLOOR, (name, res.details)
