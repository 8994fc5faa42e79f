"""Plans checked against exact rows: a backend's plan that breaks a row of the model at exact sizes
(memory in bytes) is excluded by a no-good row and the model solved again.

Two sources of such plans: a backend's feasibility tolerance (SCIP's is relative: a memory row of
~2e9 bytes passes 1 byte over; `chain.milp`), and memory rows rounded down for CP-SAT
(`cpsat_runner.fit_row`; the chain's and the join's `cpsat`). The model with exclusions stays a
relaxation of the exact one, so its ``infeasible`` is a proof and its bound a lower bound; a restriction
(rows rounded up, every plan fits) gives a plan when the exclusions take too long (`exact_rows_cpsat`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, gap_closed
from .milp_runner import BackendRun
from .options import Deadline, DeadlineExceeded


class ExactRows(Protocol):
    """What the exact-rows loop (`exact_rows_cpsat`, `exclude_broken`) checks a plan against: the model
    at exact sizes in bytes. `PhaseModel` is one (its rows); the join phase model another (its plan
    replayed by the join simulator, `solvers.join.cpsat.JoinPhaseModel.violated`)."""

    def violated(self, values: list[float], *, deadline: Deadline | None = None) -> Sequence[str]:
        """What the 0-1 point `values` (indexed like the CP-SAT variables) breaks; empty when it fits."""
        ...


#: rounds of `exclude_broken` before the restriction (rows rounded up) is tried (`exact_rows_cpsat`)
EXCLUDE_ROUNDS = 32


def nogood_row(values: Sequence[float]) -> tuple[list[int], list[float], float]:
    """The row ``sum_{v_i = 0} x_i - sum_{v_i = 1} x_i >= 1 - #{v_i = 1}`` as (indices, coefficients, lower
    bound): it excludes the 0-1 point `values` (rounded at 0.5) and no other 0-1 point."""
    ones = [i for i, v in enumerate(values) if v > 0.5]
    zeros = [i for i, v in enumerate(values) if v <= 0.5]
    return ones + zeros, [-1.0] * len(ones) + [1.0] * len(zeros), float(1 - len(ones))


def broken(run: BackendRun, model: ExactRows, deadline: Deadline | None = None) -> bool:
    """True when `run` has a plan and it breaks a row of `model` (exact sizes): a backend's tolerance
    (SCIP's is relative: a memory row in bytes 1 byte over passes), or rows rounded for CP-SAT."""
    return run.values is not None and bool(model.violated(run.values, deadline=deadline))


def exclude_broken(run: BackendRun, model: ExactRows, resolve: Callable[[list[float]], BackendRun],
                   deadline: Deadline, rounds: int | None = None, bound: float | None = None) -> BackendRun:
    """While `run`'s plan breaks a row of `model` (`broken`) and time is left: ``resolve(plan)`` adds
    `nogood_row(plan)` to the model the plan came from (a relaxation of `model`: the model itself within a
    backend's tolerance, or rows rounded down) and solves it again, at most `rounds` times (None: until
    the deadline). Only 0-1 points that break `model` are excluded, so the model stays a relaxation:
    its ``infeasible`` is a proof, and each run's bound (and `bound`) a lower bound of `model`'s
    optimum; the answer carries the largest, and is ``optimal`` when its plan fits and that bound
    reaches the plan's objective (within 1e-6 relative). Its ``backend_status`` counts the rounds.
    A plan that still breaks a row is returned as it is (the caller drops it, `drop_broken`)."""
    best = _max_bound(bound, run.bound)
    n = 0
    try:
        while broken(run, model, deadline) and not deadline.expired() and (rounds is None or n < rounds):
            assert run.values is not None
            run = resolve(run.values)
            n += 1
            best = _max_bound(best, run.bound)
    except DeadlineExceeded:  # while checking a plan or building the next model
        pass
    if n:
        run = replace(run, backend_status=f"{run.backend_status} ({n} broken plans excluded)")
    if run.values is not None and run.objective is not None and best is not None:
        best = min(best, run.objective)
        if run.status == FEASIBLE and gap_closed(run.objective, best) \
                and not broken(run, model):
            run = replace(run, status=OPTIMAL)  # a relaxation's bound reached by a plan that fits
    return replace(run, bound=best) if best is not None and run.status != INFEASIBLE else run


def _max_bound(a: float | None, b: float | None) -> float | None:
    """The larger of two lower bounds (None: none)."""
    return b if a is None else a if b is None else max(a, b)


def restricted_run(relaxed: BackendRun, restricted: BackendRun) -> BackendRun:
    """The answer when the relaxed model's plan broke a real row and `restricted` (rows rounded the
    safe way) ran: its plan (it fits at exact sizes) with the relaxation's bound (a bound of the exact
    model), ``optimal`` when that bound reaches the plan's objective (within 1e-6 relative), else
    ``feasible``. Without a plan: no values, the relaxation's bound and status ``timeout`` (no plan,
    no proof: an infeasible restriction proves nothing about the exact rows; `exact_rows_cpsat` goes
    on with the relaxation), the backend status saying what the restriction answered."""
    bound = relaxed.bound
    if restricted.values is None:
        return replace(restricted, status=TIMEOUT, bound=bound,
                       backend_status=f"{restricted.backend_status} with memory rows rounded up (no proof)")
    status = FEASIBLE
    if bound is not None and restricted.objective is not None:
        bound = min(bound, restricted.objective)
        if gap_closed(restricted.objective, bound):
            status = OPTIMAL  # the relaxation's bound is reached by a plan of the restriction
    return replace(restricted, status=status, bound=bound,
                   backend_status=f"{restricted.backend_status} (memory rows rounded up)")


def drop_broken(run: BackendRun, model: ExactRows) -> BackendRun:
    """`run` without its plan when the plan breaks a row of `model` (kept: its bound, which is a
    relaxation's); status ``timeout`` then (no plan, no proof)."""
    if not broken(run, model):
        return run
    return replace(run, status=TIMEOUT, values=None, objective=None,
                   backend_status=f"{run.backend_status}; its plan breaks an exact row")


def exact_rows_cpsat(run: BackendRun, model: ExactRows, cp: Any, xs: list[Any],
                     solve: Callable[..., BackendRun], restriction: Callable[[], tuple[Any, list[Any]]],
                     deadline: Deadline) -> BackendRun:
    """The answer of CP-SAT on a model with memory rows rounded (`cpsat_runner.fit_row`; `model` the
    exact rows, `ExactRows`: the chain's phase model, or one backward order of the join's `cpsat`):
    `run` solved the relaxation `cp` (rows rounded down; variables `xs`, in `model`'s order) with
    ``solve(cp, xs, relaxed=True)``. While its plan breaks an exact row, that plan is excluded from
    `cp` and it is solved again (`exclude_broken`, `EXCLUDE_ROUNDS` rounds); then the restriction
    (``restriction()``: rows rounded up, every plan fits; `restricted_run`); if that has
    no plan (an infeasible restriction proves nothing), the exclusions go on until a plan fits, the
    relaxation is proven infeasible, or the deadline. The answer's plan fits `model` (or is None)."""

    def resolve(plan: list[float]) -> BackendRun:
        idx, coefs, lo = nogood_row(plan)
        cp.add(sum(int(c) * xs[i] for i, c in zip(idx, coefs)) >= int(lo))
        return solve(cp, xs, relaxed=True)

    run = exclude_broken(run, model, resolve, deadline, EXCLUDE_ROUNDS)
    if not broken(run, model) or deadline.expired():
        return drop_broken(run, model)
    cp_up, xs_up = restriction()
    restricted = restricted_run(run, solve(cp_up, xs_up, relaxed=False))
    if restricted.values is not None or deadline.expired():
        return restricted
    return drop_broken(exclude_broken(run, model, resolve, deadline, bound=restricted.bound), model)
