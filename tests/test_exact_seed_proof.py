"""A fast solver's schedule proven optimal by the model's bound (bench_papers_graphs, FCN-8 at 90%:
CBC stopped on time with its bound 1.3e-12 below dtr-orders' makespan, answered `feasible`)."""

from __future__ import annotations

from memsched.solvers.chain import Chain, reference_peak
from memsched.solvers.exact.layer import referee
from memsched.solvers.exact.options import Deadline, ExactOptions
from memsched.solvers.registry import solve
from memsched.solvers.result import FEASIBLE, OPTIMAL, TIMEOUT, SolveResult


def _chain() -> Chain:
    from memsched.solvers.chain.generate import random_chain

    return random_chain(6, 3)


def _seed(chain: Chain, budget: int) -> SolveResult:
    seed = solve("chain", chain, "rotor", budget, slots=0)
    assert seed.objective is not None
    return seed


def _model(status: str, bound: float | None) -> SolveResult:
    return SolveResult(problem="chain", solver="milp", status=status, message="", scope="phase-model schedules",
                       lower_bound=bound)


def test_a_bound_at_the_seeds_makespan_proves_it_at_exact_sizes() -> None:
    chain = _chain()
    budget = int(0.7 * reference_peak(chain))
    seed = _seed(chain, budget)
    for status in (FEASIBLE, TIMEOUT):
        res = referee("chain", "milp", chain, budget, _model(status, seed.objective * (1 - 1e-12)), [seed], seed,
                      Deadline(None), ExactOptions(slots=0))
        assert res.status == OPTIMAL and res.objective == seed.objective, (status, res.status)
        assert "bound reaches rotor's makespan" in res.scope


def test_a_bound_below_the_seed_or_under_slots_proves_nothing() -> None:
    chain = _chain()
    budget = int(0.7 * reference_peak(chain))
    seed = _seed(chain, budget)
    below = referee("chain", "milp", chain, budget, _model(TIMEOUT, seed.objective * (1 - 1e-6)), [seed], seed,
                    Deadline(None), ExactOptions(slots=0))
    assert below.status == FEASIBLE
    slotted = referee("chain", "milp", chain, budget, _model(TIMEOUT, seed.objective), [seed], seed,
                      Deadline(None), ExactOptions(slots=max(1, budget // 4)))
    assert slotted.status == FEASIBLE  # a bound of the slot-rounded model says nothing at exact sizes
