"""Valid inequalities for the phase model (`solvers.chain.exact_model`): the *tape cuts*, and
their separation at the root with the LP relaxation (GLOP), whose value is then a lower bound.

Why. At tight budgets the LP relaxation of the phase model is 2-8% below the optimum, and the
gap comes from fractional tapes: with only the ST (or the FA) variables integral, SCIP's bound
on ``random_chain(10, 0)`` at M = 50 is 66.32 against an optimum of 66.49 and an LP of 62.64.
One trick of the relaxation is to *reuse* a fraction of an input: a fraction of the tape
``abar_j`` created in phase c stays resident through phases c-1, c-2, ... and, in each of them,
feeds a fraction of F_all(j), so that the tape ``abar_{j+1}``, which the model creates exactly
once (``sum_k FA[k,j] = 1``), is built piecemeal in several phases from one fraction of input.

The cut. For a stage 1 <= j < L and phases a >= b >= j (run in the order a, a-1, ..., b):

    sum_{k=b}^{a} FA[k,j] <= ST[a,j] + SA[a,j] + sum_{k=b}^{a} R[k,j-1]

(``ST[a,j]``, ``SA[a,j]``: tape abar_j, standalone a_j resident when phase a starts, 0 for a = L;
``R[k,j-1]``: stage j-1 runs in phase k). Valid for every 0-1 point of the model, with or
without its dominance rows: the left side is at most 1 (abar_{j+1} is made once); if F_all(j)
runs in phase k of the window, a_j is available before its slot: stage j-1 ran in phase k
(a term on the right), or a_j or abar_j was resident when phase k started, which, traced back
through the transition rows (a resident tape or standalone a_j either was resident at the start
of phase k+1 or was made there by stage j-1), ends at a run of stage j-1 inside the window or
at ``ST[a,j] + SA[a,j]``. So the model's optimum is unchanged
(tests/test_chain_exact_cuts.py checks it against the brute force and every cut against encoded
schedules).

There are O(L^3) such rows; `separate_tape_cuts` adds only violated ones, in rounds: solve the
LP (GLOP, incrementally), add the most violated rows, repeat while the bound rises and time is
left. The final LP value is a valid lower bound on the model's optimum, reported when it is above
the backend's (at L = 50 the backends often end a minute before finishing their root). Only an LP
that GLOP solves to optimality gives a value: GLOP is given the time left (never past the deadline),
and an LP it stops at that limit proves nothing (the first one: no bound; a later one: the previous
round's value stays).

Reduced-cost fixing. Given a schedule of makespan U (the warm start), the last LP's row duals y
prove, for every 0-1 point x of the model, ``c.x >= z(y) + sum_j d_j x_j - sum_j min(0, d_j)``
with ``d = c - A^T y`` and ``z(y) = sum_i (y_i lo_i if y_i > 0 else y_i hi_i) + sum_j min(0, d_j)
+ const`` (weak duality; recomputed here in floating point from the duals, with duals of the
wrong sign for their row clipped to 0, so GLOP's tolerances cannot make it invalid). So a
variable with ``z(y) + |d_j| > U`` (plus a margin) takes its LP bound's value in every schedule
faster than U: it is fixed there. The warm start satisfies every fixing (its makespan is U), so
the model keeps it, every strictly faster schedule, and its optimum, and ``optimal`` keeps its
meaning (`fixings`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exact.options import Deadline, DeadlineExceeded
from ..progress import report as report_progress
from .exact_model import CHECK_ROWS, Lin, PhaseModel

#: a cut is added when its left side exceeds its right side by more than this (0-1 units)
MIN_VIOLATION = 1e-4
#: seconds that must be left in the first LP's share for it to start (a chain of 10 stages states and
#: solves its LP in a few ms; larger ones stop at the share's end, `separate_tape_cuts`: the 101-stage
#: LSTM chain, 41,511 rows and 1.06 million coefficients, takes 2 s to state and 3 s in GLOP on 2 shared cores)
MIN_LP_SECONDS = 0.01


@dataclass
class CutReport:
    """What `separate_tape_cuts` did: LP rounds, rows added, the LP value (chain time unit)
    before and after the cuts (None when no LP was solved), seconds spent."""

    rounds: int = 0
    added: int = 0
    lp_before: float | None = None
    lp_after: float | None = None
    seconds: float = 0.0
    #: the LP value after each solve (chain time unit): the first LP, then one per round of cuts
    history: list[float] = field(default_factory=list)
    #: the row duals of the last solved LP (one per row of `model.rows` at that solve), or None
    duals: list[float] | None = None
    #: reduced-cost fixings {variable index: 0.0 or 1.0} valid for schedules faster than the incumbent
    fixed: dict[int, float] = field(default_factory=dict)

    def as_details(self) -> dict[str, float | int | None]:
        """The report as `SolveResult.details` entries."""
        return {
            "cut_rounds": self.rounds,
            "tape_cuts": self.added,
            "root_lp": self.lp_before,
            "root_lp_cuts": self.lp_after,
            "cuts_s": round(self.seconds, 3),
            "rc_fixed": len(self.fixed),
        }


def _value(expr: Lin | int | None, values: list[float]) -> float:
    if expr is None:
        return 0.0
    return expr.value(values) if isinstance(expr, Lin) else float(expr)


def tape_cut(model: PhaseModel, j: int, a: int, b: int) -> Lin:
    """The tape cut for stage j and phases a >= b >= j as ``lhs - rhs`` (the row is ``<= 0``)."""
    row = Lin()
    if a < model.L:
        row.add(model.st(a, j), -1.0).add(model.sa(a, j), -1.0)
    for k in range(b, a + 1):
        row.add(model.get("FA", k, j)).add(model.run(k, j - 1), -1.0)
    return row


def violated_tape_cuts(
    model: PhaseModel, values: list[float], tol: float = MIN_VIOLATION
) -> list[tuple[float, int, int, int]]:
    """(violation, j, a, b) of every tape cut that `values` (an LP point, indexed like
    `model.keys`) breaks by more than `tol`, most violated first."""
    L = model.L
    fa = [[_value(model.get("FA", k, j), values) for j in range(L)] for k in range(L + 1)]
    run = [[_value(model.run(k, j), values) for j in range(L)] for k in range(L + 1)]
    out = []
    for j in range(1, L):
        for a in range(L, j - 1, -1):
            slack = 0.0 if a == L else _value(model.st(a, j), values) + _value(model.sa(a, j), values)
            for b in range(a, j - 1, -1):
                slack += run[b][j - 1] - fa[b][j]
                if slack < -tol:
                    out.append((-slack, j, a, b))
    out.sort(key=lambda c: -c[0])
    return out


def separate_tape_cuts(
    model: PhaseModel,
    deadline: Deadline,
    *,
    max_rounds: int = 12,
    per_round: int = 400,
    share: float = 0.3,
    first_share: float = 0.5,
    min_gain: float = 1e-6,
    patience: int = 3,
    incumbent: float | None = None,
    min_gap: float = 1e-2,
    report: CutReport | None = None,
) -> CutReport:
    """Add violated tape cuts to `model.rows` (names "tape cut j a b") in rounds of at most
    `per_round` rows, re-solving the LP relaxation (GLOP, kept between rounds) after each; stop
    after `max_rounds`, when no cut is violated, after `patience` rounds in a row that raise the
    LP by less than `min_gain` (relative; a degenerate LP often moves to another optimal vertex
    first), or when `share` of the deadline's limit is spent (the first LP, a bound
    by itself, may take up to `first_share`; the LP value of the last solved round stays a valid
    bound). No round runs when the first LP is within `min_gap` (relative) of `incumbent` (the
    warm start's makespan): the cuts could only close that much, and there the backend's own root
    cuts do better with the time (random_chain(30, 0) at M = 201, a root gap of 0.58%: SCIP proves
    it in 32 s without the rounds, 59 s after them; random_chain(50, 0) at M = 248, 0.52%: a 60 s
    gap of 0.29% against 0.51%). With `incumbent`, the last solved LP's duals also give the
    reduced-cost fixings (`fixings`, `CutReport.fixed`). Returns a `CutReport`.

    The deadline holds (wall clock): both shares end at the deadline at the latest; nothing is done
    with less than `MIN_LP_SECONDS` left in the first share; GLOP is given the time to its end
    (``SetTimeLimit``), and an LP it does not solve to optimality gives no value, so a first LP cut
    off leaves `CutReport.lp_before` and `lp_after` None (no bound is claimed); a round (separation
    and re-solve) starts only when the time left in the share is at least the last LP's solve time.

    `report`, when given (a fresh `CutReport`), is the one filled and returned: it is filled as the rounds
    go, so that a caller holding it keeps the last solved LP's value (a valid bound) when a
    `KeyboardInterrupt` (Ctrl-C) ends the rounds (`chain.cpsat.root_bound_on_timeout` answers with it)."""
    report = CutReport() if report is None else report
    t0 = deadline.elapsed()
    try:
        return _separate(model, deadline, report, t0, max_rounds=max_rounds, per_round=per_round, share=share,
                         first_share=first_share, min_gain=min_gain, patience=patience, incumbent=incumbent,
                         min_gap=min_gap)
    finally:
        report.seconds = deadline.elapsed() - t0


def _separate(model: PhaseModel, deadline: Deadline, report: CutReport, t0: float, *, max_rounds: int,
              per_round: int, share: float, first_share: float, min_gain: float, patience: int,
              incumbent: float | None, min_gap: float) -> CutReport:
    """The body of `separate_tape_cuts` (same arguments), filling `report` (`t0`: its start, seconds since
    the deadline's start)."""
    from ortools.linear_solver import pywraplp

    report_progress("root LP and tape cuts")
    end = deadline.limit  # the deadline in seconds since its start (None: no limit)

    def share_end(fraction: float) -> float | None:
        """Seconds since the deadline's start at which `fraction` of the limit, counted from t0, is
        spent, capped at the deadline itself (None without a limit)."""
        return None if end is None else min(t0 + fraction * end, end)

    stop_at = share_end(first_share)
    if stop_at is not None and stop_at - t0 < MIN_LP_SECONDS:
        return report  # too little time for one LP: no round, no bound
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None or model.trivially_infeasible:
        return report
    inf = solver.infinity()
    xs = [solver.NumVar(0.0, 1.0, "") for _ in model.keys]

    cts: list[Any] = []  # GLOP's rows, parallel to model.rows

    def emit(expr: Lin, lo: float | None, hi: float | None) -> None:
        ct = solver.Constraint(-inf if lo is None else lo, inf if hi is None else hi)
        for v, c in expr.terms.items():
            ct.SetCoefficient(xs[v], c)
        cts.append(ct)

    for n, row in enumerate(model.rows):
        if n % CHECK_ROWS == 0 and stop_at is not None and deadline.elapsed() > stop_at:
            return report  # the share ended while the rows were being stated: no LP, no bound
        emit(row.expr, row.lo, row.hi)
    unit = objective_unit(model)
    obj = solver.Objective()
    for v, c in model.objective.terms.items():
        obj.SetCoefficient(xs[v], c / unit)
    obj.SetOffset(model.objective.const / unit)
    obj.SetMinimization()
    stalled = 0
    duals: list[float] | None = None
    solve_s = 0.0  # seconds of the last LP solve: what a round is expected to take at least
    while True:
        left = None if stop_at is None else stop_at - deadline.elapsed()
        if (left is not None and (left <= 0 or left < solve_s)) or deadline.expired():
            break  # no LP started that could not end within the share (and the deadline)
        if left is not None:  # GLOP stops at the end of the share (its answer is then not used)
            solver.SetTimeLimit(max(1, int(1000 * left)))
        started = deadline.elapsed()
        status = solver.Solve()
        solve_s = deadline.elapsed() - started
        if status != pywraplp.Solver.OPTIMAL:
            break  # cut off at its time limit (or failed): no value from it, the previous one stays
        value = obj.Value() * unit
        duals = [ct.dual_value() * unit for ct in cts]  # read now: adding rows below invalidates them
        gain = math.inf if report.lp_after is None else value - report.lp_after
        first = report.lp_before is None
        if first:
            report.lp_before = value
            stop_at = share_end(share)
        report.lp_after = value
        report.history.append(value)
        report_progress(bound=value)
        if first and incumbent is not None and incumbent - value <= min_gap * abs(incumbent):
            break
        stalled = stalled + 1 if gain <= min_gain * abs(value) else 0
        if report.rounds >= max_rounds or stalled >= patience:
            break
        if stop_at is not None and stop_at - deadline.elapsed() < solve_s:
            break  # no time for the separation and the re-solve of another round
        cuts = violated_tape_cuts(model, [x.solution_value() for x in xs])
        if not cuts:
            break
        report.rounds += 1
        for _, j, a, b in cuts[:per_round]:
            expr = tape_cut(model, j, a, b)
            n = len(model.rows)
            model._row(expr, None, 0, f"tape cut {j} {a} {b}")
            if len(model.rows) > n:
                emit(model.rows[-1].expr, None, model.rows[-1].hi)
                report.added += 1
    report.duals = duals
    if incumbent is not None and duals is not None and not deadline.expired():
        try:
            report.fixed = fixings(model, duals, incumbent, deadline=deadline)[1]
        except DeadlineExceeded:
            pass  # no fixing: the model keeps every schedule
    return report


def fixings(model: PhaseModel, duals: Sequence[float], incumbent: float, margin: float = 1e-6,
            deadline: Deadline | None = None) -> tuple[float, dict[int, float]]:
    """Reduced-cost fixing (module docstring) from row duals `duals` (one per row of `model.rows`,
    e.g. GLOP's): returns (z, fixed), z the weak-duality lower bound of the model's optimum that
    these duals prove (chain time unit; the LP value when they are optimal), and fixed
    {variable index: value} for every variable whose other value would cost more than `incumbent`
    (a makespan, chain time unit) plus `margin` (relative): every schedule of the model with a
    makespan at most `incumbent` satisfies the fixings. `deadline`: checked every `CHECK_ROWS` rows
    (`DeadlineExceeded` when spent)."""
    import numpy as np

    n = len(model.keys)
    d = np.zeros(n)
    for v, c in model.objective.terms.items():
        d[v] += c
    z = model.objective.const
    for n, (y, row) in enumerate(zip(duals, model.rows)):
        if deadline is not None and n % CHECK_ROWS == 0:
            deadline.check()
        side = row.lo if y > 0 else row.hi
        if y == 0 or side is None:  # a dual of the wrong sign for its row is clipped to 0
            continue
        z += y * side
        for v, a in row.expr.terms.items():
            d[v] -= y * a
    z += float(np.minimum(d, 0.0).sum())
    total = abs(model.objective.const) + sum(abs(c) for c in model.objective.terms.values())
    limit = incumbent + margin * max(abs(incumbent), total)  # relative to the instance's times, no floor of 1
    fixed = {int(v): (0.0 if d[v] > 0 else 1.0) for v in np.flatnonzero(z + np.abs(d) > limit)}
    return float(z), fixed


def objective_unit(model: PhaseModel) -> float:
    """The power of ten by which `separate_tape_cuts` divides the objective for GLOP (time units): 1 when the
    largest cost is at least 1, else the power bringing it into [1, 10). GLOP's dual tolerances are absolute, so
    costs of 1e-12 units would look optimal at once (on random_chain(10, 0) at M = 60, times scaled by 1e-12
    gave an LP 0.6% above the LP's optimum); the LP's solution is the same, its value and duals are scaled back."""
    largest = max((abs(c) for c in model.objective.terms.values()), default=0.0)
    if largest >= 1.0 or largest <= 0.0 or not math.isfinite(largest):
        return 1.0
    # at most 10^-307, a normal float: 10.0 ** -324 (a largest cost of 5e-324) underflows to 0, a division by zero
    return 10.0 ** max(math.floor(math.log10(largest)), -307)


def all_tape_cuts(model: PhaseModel) -> int:
    """Add every tape cut to `model.rows` (O(L^3) rows: for tests on small chains); returns how many."""
    n = len(model.rows)
    for j in range(1, model.L):
        for a in range(model.L, j - 1, -1):
            for b in range(a, j - 1, -1):
                model._row(tape_cut(model, j, a, b), None, 0, f"tape cut {j} {a} {b}")
    return len(model.rows) - n


__all__ = [
    "CutReport",
    "MIN_VIOLATION",
    "all_tape_cuts",
    "objective_unit",
    "fixings",
    "separate_tape_cuts",
    "tape_cut",
    "violated_tape_cuts",
]
