"""Which sizes `offload-exact` (`solvers.offload.exact_free`) solves with: N slots or exact.

The model runs with sizes rounded up to N slots of the budget (docs/offload.md, *Budget
semantics*). Rounding up only removes schedules, and the answer must never lose to pofo at exact
sizes, so two cases are solved with exact sizes (``slots = 0``), whose class contains the one at
N slots (an ``optimal`` or ``infeasible`` there is a proof about the real budget):

* pofo at exact sizes is faster than the fast solvers at N slots (the exact layer's ``reseed``,
  `exact_free_hint.any_size_seed`, runs it once within the time limit and hands it over as the
  seed, which the layer's referee also keeps, a model cut short included): the rounding
  visibly costs, and at N slots the model's optimum may be slower than the seed, so that the
  answer could only be the seed's schedule, ``feasible``. The model then runs with exact sizes
  from the start (a CP-SAT model is no larger with exact sizes: its memory rows have the same
  terms with other coefficients).
* no fast solver has a schedule (pofo included, at exact sizes, when it ran in time): the
  budget is likely infeasible, and ``infeasible`` at N slots would be solved again with exact
  sizes; one solve with exact sizes decides it.
* ``infeasible`` at N slots: solved again with exact sizes in the time left, so that
  ``infeasible`` is about the real budget.

``details.exact_sizes`` (first two cases) or ``details.retried_exact_sizes`` (third) says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..discretize import effective_slots
from ..exact.options import Deadline, ExactOptions
from ..result import INFEASIBLE, SolveResult


def with_exact_sizes(
    solve: Callable[..., SolveResult],
    inst: Any,
    budget: int,
    options: ExactOptions,
    deadline: Deadline,
    seed: SolveResult | None = None,
    **kwargs: Any,
) -> SolveResult:
    """`solve` (exact_free._solve) at the options' slots or with exact sizes, as the module
    docstring says; `seed`: the exact layer's seed, the best fast solver at the options' slots or
    pofo at exact sizes when faster (``details["slots"] = 0``: the layer's ``reseed``,
    `exact_free_hint.any_size_seed`, ran it once within the time limit; it is not run again here)."""
    n = effective_slots(int(budget), options.slots)
    why = ""
    if n and options.warm_start:
        if seed is not None and seed.details.get("slots") == 0:
            best = seed.details.get("fast_best_at_slots")
            why = (
                f"pofo at exact sizes ({seed.objective:g}) is faster than the fast solvers with sizes in {n} "
                f"slots ({'none' if best is None else best})"
            )
            options = replace(options, slots=0)
        elif seed is None or seed.schedule is None:
            why = f"no fast solver has a schedule, with sizes in {n} slots or pofo's at exact sizes"
            options = replace(options, slots=0)
    res = solve(inst, budget, options=options, deadline=deadline, seed=seed, **kwargs)
    if not why and n and res.status == INFEASIBLE and not deadline.expired():
        res = solve(inst, budget, options=replace(options, slots=0), deadline=deadline, seed=seed, **kwargs)
        res.details["retried_exact_sizes"] = f"infeasible with sizes in {n} slots"
    elif why:
        res.details["exact_sizes"] = why
    return res
