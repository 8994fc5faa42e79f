"""The smallest feasible budget of a solver that reported ``infeasible`` without one.

`find_min_budget` completes a `SolveResult` whose ``min_budget`` is None by running the
solver itself at other budgets: first at the smallest budget a fast solver of the problem
reports (`_FLOOR_SOLVERS`), else at the store-all peak (doubled up to `MAX_FACTOR` times),
then one byte below the first budget that works, then by bisection. ``min_budget`` = N only
when the solver finds a schedule at N bytes and proves N - 1 infeasible; exact solvers get
`PROBE_SECONDS` per run (a schedule found in that time answers the question). When
`SEARCH_SECONDS` run out first (or the solver fails even at `MAX_FACTOR` times the store-all
peak), ``details["min_budget_note"]`` says so, with the bracket known. A solver that refuses the
instance's structure (``details["not_applicable"]``: sqrt on a graph that is not a training
graph, say) is not searched: no budget would do, and its message says why.
"""

from __future__ import annotations

import time
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.result import INFEASIBLE, SolveResult

#: wall-clock seconds spent searching for the smallest budget
SEARCH_SECONDS = 10.0
#: time limit of one exact solve in the search (a feasibility question: the first schedule will do)
PROBE_SECONDS = 1.0
#: per problem, fast solvers whose infeasible answers carry their own smallest budget
_FLOOR_SOLVERS = {"chain": ("rotor",), "offload": ("remat-only",),
                  "graph": ("checkpoint-all", "sqrt", "greedy", "griewank"), "join": ("store-all",),
                  "pipeline": ("madpipe",)}
#: the search goes up to this many times the store-all peak (heuristics may need more)
MAX_FACTOR = 64
#: ``SolveResult.details`` key a solver sets (True) when it refuses the instance's structure, whatever
#: the budget (`solvers.graph.baselines.NOT_APPLICABLE`)
NOT_APPLICABLE = "not_applicable"


def find_min_budget(problem: str, instance: Any, result: SolveResult, options: dict[str, Any]) -> None:
    """Fill ``result.min_budget`` (or ``result.details["min_budget_note"]``) in place; nothing for a
    result that is not ``infeasible``, has its smallest budget, or is a structural refusal
    (`NOT_APPLICABLE`)."""
    if result.status != INFEASIBLE or result.min_budget is not None or result.budget is None \
            or result.details.get(NOT_APPLICABLE):
        return
    deadline = time.perf_counter() + SEARCH_SECONDS
    exact = getattr(registry.get_solver(problem, result.solver), "exact_layer", False)

    def finds(budget: int) -> bool | None:
        """True: a schedule at `budget`; False: proven infeasible; None: no verdict in time."""
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        opts = {**options, "time_limit": max(0.5, min(left, PROBE_SECONDS))} if exact else options
        try:
            res = registry.solve(problem, instance, result.solver, budget, **opts)
        except InputError:
            return None
        if res.found:
            return True
        return False if res.status == INFEASIBLE else None

    low = int(result.budget)  # proven infeasible
    reference = int(registry.get_problem(problem).reference_peak(instance))
    guess = _floor(problem, instance, low, options)
    high = None
    for candidate in (guess, *(reference * 2**k for k in range(MAX_FACTOR.bit_length()))):
        if candidate is not None and candidate > low:
            verdict = finds(candidate)
            if verdict is True:
                high = candidate
                break
            if verdict is None:
                break
            low = candidate
    if high is None:
        result.details["min_budget_note"] = (
            f"{result.solver} finds no schedule up to {low} bytes"
            + (f" ({MAX_FACTOR} x the store-all peak)" if low == reference * MAX_FACTOR
               else "; the search ran out of time"))
        return
    probe = high - 1  # the fast solver's need is usually the answer: check it first
    while high - low > 1:
        verdict = finds(probe)
        if verdict is None:
            why = (f"search stopped after {SEARCH_SECONDS:g} s" if time.perf_counter() >= deadline
                   else f"no verdict at {probe} bytes within a probe's {PROBE_SECONDS:g} s")
            result.details["min_budget_note"] = (f"the smallest feasible budget of {result.solver} is between "
                                                 f"{low + 1} and {high} bytes ({why})")
            return
        low, high = (low, probe) if verdict else (probe, high)
        probe = (low + high) // 2
    result.min_budget = high
    result.details["min_budget_method"] = f"checked: a schedule at {high} bytes, none at {high - 1}"


def _floor(problem: str, instance: Any, budget: int, options: dict[str, Any]) -> int | None:
    """The smallest budget the fast solvers of `problem` report (a first guess), or None."""
    found = []
    for name in _FLOOR_SOLVERS.get(problem, ()):
        try:
            res = registry.solve(problem, instance, name, budget, **options)
        except InputError:
            continue
        if res.min_budget is not None:
            found.append(int(res.min_budget))
    return min(found, default=None)
