"""Exact CP-SAT model for chain rematerialization: the phase model of
`solvers.chain.exact_model` stated with Booleans in `ortools.sat.python.cp_model`.

The rows of the phase model become linear constraints over Booleans (CP-SAT's presolve
turns the small ones into clauses); "at most one forward kind per slot" is an AtMostOne
constraint. The solver goes through the exact layer (`solvers.exact.layer`): the chain's fast
solvers run first and the best schedule is the CP-SAT hint (``seeded_by``); the answer is
refereed against them at exact sizes. Times with integer values are used as they are;
otherwise they are scaled to integer ticks (`discretize.integer_costs`: exactly by the coarsest
10^k that makes them whole, else to `CPSAT_COST_DIGITS` significant digits), and CP-SAT's bound
is lowered by the largest total rounding error, every variable's cost error summed
(``details["cost_rounding_slack"]``), so that it holds for the real times; an answer is
``optimal`` only when that bound is within 1e-6 (relative) of its makespan, else ``feasible``.
(CP-SAT's own floating-point objective stopped "optimal" with a bound 0.9% below the makespan on
examples/random10.json at 50% and 100 slots: answered ``feasible`` after 0.3 s of a 5 s limit.)

Statuses (`solvers.exact.cpsat_runner`): ``optimal`` only when CP-SAT proves it for the phase
model; ``feasible`` at the time limit with a schedule; ``timeout`` without one; ``infeasible``
when proven and no fast solver has a schedule.

Memory rows rounded for CP-SAT (exact sizes in bytes, `cpsat_runner.fit_row`) are solved by
`exact.exact_rows.exact_rows_cpsat`: the relaxation (rows rounded down) with each of its plans that breaks an exact
row excluded in turn (`exclude_broken`: a no-good row, so the model stays a relaxation and its
``infeasible`` and bound hold), the restriction (rows rounded up) for a plan that fits when that
takes many rounds, and the exclusions again until the deadline when the restriction has none.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..discretize import CPSAT_COST_DIGITS, integer_costs, rounding_error
from ..exact.cpsat_runner import check_first, check_parameters, fit_row, run_cpsat
from ..exact.exact_rows import exact_rows_cpsat
from ..exact.layer import BOUND_SO_FAR, BuildTimeout, exact_solver, same_or_less
from ..exact.milp_runner import BackendRun
from ..exact.options import CPSAT_MEMORY, Deadline, DeadlineExceeded, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult, gap_closed
from .exact_model import CHECK_ROWS, PhaseModel, discretise, retry_exact_sizes
from .instance import Chain
from .phase_cuts import CutReport, separate_tape_cuts
from .simulator import simulate

#: the chain's fast solvers, best first: they seed and referee the exact models
FAST = ("rotor", "periodic", "revolve", "sqrt", "store-all", "recompute-all")


def check_options(chain: Chain, *, parameters: Any = "", **_: Any) -> None:
    """The option `parameters` (`exact.cpsat_runner.check_parameters`: names, types and CP-SAT's
    own ranges), before the warm start: bad values are an `InputError` at once."""
    check_parameters(parameters)


@refuses("the chain's cpsat", "memory_gb", why=CPSAT_MEMORY)
@check_first(check_options)
@exact_solver("chain", "cpsat", FAST, least=lambda chain: chain.total_time())
def solve_cpsat(chain: Chain, budget: int, *, options: ExactOptions, deadline: Deadline,
                seed: SolveResult | None = None, dominance: bool = True, parameters: str = "",
                root_lp: bool = True, cuts: bool = False, **_: Any) -> SolveResult:
    """Minimise the makespan (chain time unit) under `budget` (bytes) over the phase model.
    Options (`ExactOptions`): ``slots`` (N > 0: sizes in N slots, rounded up; 0: exact),
    ``time_limit`` (s, default 60, wall clock for everything), ``workers`` (default 1: on 2 shared
    cores one worker with the full LP relaxation, linearization_level 2, proved more than two),
    ``seed``; model options ``dominance`` (default True), ``root_lp`` (default True: the LP
    relaxation with tape cuts, `solvers.chain.phase_cuts`, is solved first and its value reported
    as the bound when CP-SAT's is lower), ``cuts`` (default False: also state the tape cuts in the
    CP-SAT model; on `random_chain(20, 0)` at M = 74 they lowered CP-SAT's own bound after the
    same deterministic time, docs/chain.md) and ``parameters`` (CP-SAT parameters as
    "name:value" pairs, e.g. "linearization_level:1 symmetry_level:0"; an unknown name or a value
    CP-SAT does not take is an `InputError` on ``--option parameters``). When the rounded sizes make
    the budget infeasible the model is solved again with exact sizes (`retry_exact_sizes`)."""
    return retry_exact_sizes(_solve_cpsat, chain, budget, options=options, deadline=deadline, seed=seed,
                             dominance=dominance, parameters=parameters, root_lp=root_lp, cuts=cuts)


def _solve_cpsat(chain: Chain, budget: int, *, options: ExactOptions, deadline: Deadline,
                 seed: SolveResult | None = None, dominance: bool = True, parameters: str = "",
                 root_lp: bool = True, cuts: bool = False, **_: Any) -> SolveResult:
    t_build = deadline.elapsed()
    dchain, M = discretise(chain, budget, options.slots)
    model = PhaseModel.build(dchain, M, dominance=dominance, deadline=deadline)
    scope = model.scope(options.slots if M != budget else 0) + "; CP-SAT"

    def result(status: str, **kw: Any) -> SolveResult:
        return SolveResult(problem="chain", solver="cpsat", status=status, budget=budget, scope=scope,
                           details=kw.pop("details", {}), **kw)

    if model.trivially_infeasible:
        return result(INFEASIBLE, message=f"no schedule fits: {model.trivially_infeasible}")
    hint_values, hint_ok, source = phase_hint(model, seed, deadline, warm_start=options.warm_start)
    n_rows = len(model.rows)  # the rows CP-SAT gets unless `cuts`
    incumbent = model.objective.value(hint_values) if hint_ok and hint_values is not None else None
    report = CutReport()  # filled by the rounds as they go: a Ctrl-C in them keeps the last LP's bound
    with root_bound_on_timeout(report, scope):  # a build cut short keeps the root LP's bound
        if root_lp or cuts:
            separate_tape_cuts(model, deadline, incumbent=incumbent, report=report)
        rows = model.rows if cuts else model.rows[:n_rows]

        ticks = ObjectiveTicks.of(model)
        extra: dict[str, Any] = {"linearization_level": 2}  # the LP relaxation is what raises the bound here
        # rows within ROW_LIMIT (CP-SAT 9.15's presolve overflow, `cpsat_runner.fit_row`): exact sizes in
        # bytes are first rounded into a relaxation, whose plan is kept (and its proof) when it fits the
        # real rows; else into a restriction (every plan fits; `feasible` at best, `restricted_run`)
        cp, xs, rows_exact = _cp_model(model, rows, report, hint_values, hint_ok, deadline, ticks, up=False)
        build_s = deadline.elapsed() - t_build
        run = ticks.lowered(run_cpsat(cp, deadline, options, variables=xs, offset=ticks.offset, scale=ticks.scale,
                                      hint_feasible=hint_ok, parameters=parameters, extra=extra, watched=True))
        if not rows_exact:
            scope += ", memory rows rounded for CP-SAT (a plan is checked at exact sizes)"

            def solve(cp_: Any, xs_: list[Any], *, relaxed: bool) -> BackendRun:
                # the start fits the exact rows, hence the relaxation and every exclusion, not the restriction
                return ticks.lowered(run_cpsat(cp_, deadline, options, variables=xs_, offset=ticks.offset,
                                               scale=ticks.scale, hint_feasible=hint_ok and relaxed,
                                               parameters=parameters, extra=extra, watched=True))

            def restriction() -> tuple[Any, list[Any]]:
                cp_up, xs_up, _exact = _cp_model(model, rows, report, hint_values, hint_ok, deadline, ticks, up=True)
                return cp_up, xs_up

            run = exact_rows_cpsat(run, model, cp, xs, solve, restriction, deadline)
        details = {**phase_details(model, build_s, source, hint_values, hint_ok), **report.as_details(),
                   "cuts_in_model": cuts, "constraints": len(rows),
                   "workers": options.workers, "integral_objective": ticks.integral, "cost_scale": ticks.scale,
                   "cost_rounding_slack": ticks.slack, "backend_status": run.backend_status}
        return phase_answer(result, model, run, run.values, hint_values, hint_ok, dchain, M, deadline, details,
                            lp_bound=report.lp_after)


@dataclass(frozen=True)
class ObjectiveTicks:
    """The phase model's objective in integer ticks for CP-SAT: ``ticks[v]`` per variable with a
    non-zero cost, `scale` ticks per time unit, `offset` the constant (sum of u_b) in ticks, so that
    CP-SAT's value v reads (v + offset) / scale time units. `slack` (time units) bounds how far the
    rounded objective can fall below the real one on any 0-1 point (each variable's cost error
    summed; 0 when the scaling is exact); `integral`: the costs were whole numbers already."""

    ticks: dict[int, int]
    scale: float
    offset: float
    slack: float
    integral: bool
    objective: Any  # the model's own objective (`exact.linear` expression): real values of a plan

    @classmethod
    def of(cls, model: PhaseModel) -> ObjectiveTicks:
        """The ticks of `model`'s objective (`discretize.integer_costs`, `CPSAT_COST_DIGITS` significant
        digits when no 10^k makes the costs whole) and the slack of that rounding."""
        costs = {v: c for v, c in model.objective.terms.items() if c != 0}
        ints, scale, exact = integer_costs(list(costs.values()), digits=CPSAT_COST_DIGITS)
        slack = 0.0 if exact else math.fsum(rounding_error(list(costs.values()), ints, scale))
        integral = scale == 1.0 and exact
        return cls(dict(zip(costs, ints)), scale, model.objective.const * scale, slack, integral, model.objective)

    def lowered(self, run: BackendRun) -> BackendRun:
        """`run` in the real times: its bound lowered by `slack` (a bound of the rounded objective made
        one of the real objective), its objective its plan's real value (CP-SAT reports the rounded
        one). Unchanged when the scaling is exact."""
        if self.slack > 0:
            if run.bound is not None:
                run.bound -= self.slack
            if run.values is not None and run.objective is not None:
                run.objective = float(self.objective.value(run.values))
        return run


def _cp_model(model: PhaseModel, rows: list[Any], report: CutReport, hint_values: list[float] | None,
              hint_ok: bool, deadline: Deadline, ticks: ObjectiveTicks, *, up: bool) -> tuple[Any, list[Any], bool]:
    """The phase model's `rows` in CP-SAT: ``(model, variables, exact)``; every row's coefficients
    within `ROW_LIMIT` (`fit_row`: a relaxation, or with `up` a restriction, when a row must be
    rounded; ``exact`` when none was); the objective in `ticks`."""
    from ortools.sat.python import cp_model

    deadline.check()  # before the variables: at L = 101 their 25,654 named Booleans take 0.1 s
    cp = cp_model.CpModel()
    xs = [cp.new_bool_var(f"{k[0]}_{k[1]}_{k[2]}") for k in model.keys]
    exact = True
    for n, row in enumerate(rows):
        if n % CHECK_ROWS == 0:  # a memory row of 2L terms is slow to state: 2048 rows took 0.28 s at L = 101
            deadline.check()
        variables = [xs[v] for v in row.expr.terms]
        coefs = [int(round(c)) for c in row.expr.terms.values()]
        lo = None if row.lo is None else int(round(row.lo))
        hi = None if row.hi is None else int(round(row.hi))
        if row.name.startswith("one kind") and all(c == 1 for c in coefs) and lo is None and hi == 1:
            cp.add_at_most_one(variables)
            continue
        fitted, row_exact = fit_row(coefs, lo, hi, up=up)
        exact = exact and row_exact
        for cs, a, b in fitted:
            expr = sum(c * x for x, c in zip(variables, cs))
            if a is not None and b is not None:
                cp.add_linear_constraint(expr, a, b)
            elif a is not None:
                cp.add(expr >= a)
            elif b is not None:
                cp.add(expr <= b)
    for i, v in usable_fixings(report, hint_values, hint_ok).items():  # reduced-cost fixing at the root LP
        cp.add(xs[i] == int(v))
    cp.minimize(sum(t * xs[v] for v, t in ticks.ticks.items()))
    if hint_values is not None:
        for x, v in zip(xs, hint_values):
            cp.add_hint(x, bool(v > 0.5))
    return cp, xs, exact


def phase_hint(model: PhaseModel, seed: SolveResult | None, deadline: Deadline, *, warm_start: bool = True
               ) -> tuple[list[float] | None, bool, str]:
    """The warm start of a phase model: (values, fits, source); ``(None, False, "")`` without
    `warm_start` (``ExactOptions.warm_start`` false: no hint, hence no reduced-cost fixing against one,
    `usable_fixings`). Two candidates, the faster one that
    satisfies every row wins (the seed on ties): the seed's schedule (the exact layer's best fast
    solver, replayed at exact sizes) and the rotor DP's schedule computed on the model's own chain
    and budget (`model.chain`, `model.budget`: the same rounding as the model's rows, so whenever the
    DP finds a schedule it fits the model, and the start is the best persistent schedule of the
    model's discretisation; the seed's rotor ran with the requested slots, whose rounding may differ).
    `values` is None when neither candidate lies inside the model; `fits` says the values satisfy
    every row (then they are a feasible start); `source` names the candidate ("" for none)."""
    best: tuple[float, list[float], str] | None = None
    fallback: tuple[list[float] | None, bool, str] = (None, False, "")
    if not warm_start:
        return fallback
    if seed is not None:
        values = model.encode(seed.schedule)
        if values is not None:
            fallback = (values, False, seed.solver)
            if not model.violated(values, deadline=deadline):
                best = (model.objective.value(values), values, seed.solver)
    dp_values = _dp_hint(model)
    if dp_values is not None and not model.violated(dp_values, deadline=deadline):
        value = model.objective.value(dp_values)
        if best is None or not same_or_less(best[0], value):  # relative: times of 1e-12 units too
            best = (value, dp_values, DP_HINT)
    if best is None:
        return fallback
    return best[1], True, best[2]


def usable_fixings(report: CutReport, hint_values: list[float] | None, hint_ok: bool) -> dict[int, float]:
    """The root LP's reduced-cost fixings (`phase_cuts.fixings`, made against the warm start's
    makespan) when the warm start is a feasible start that satisfies them all, else none: they keep
    every schedule at most as slow as the start, so a proof on the fixed model is one on the model."""
    if not report.fixed or not hint_ok or hint_values is None:
        return {}
    if any(abs(hint_values[i] - v) > 0.5 for i, v in report.fixed.items()):
        return {}
    return report.fixed


#: relative margin taken off the root LP's value (GLOP's tolerances) before it is reported as a bound
#: (of its magnitude, no absolute floor: GLOP scales the costs, so times of 1e-12 units keep their bound)
LP_BOUND_TOLERANCE = 1e-7
#: relative disagreement between the model's objective and the simulator's makespan that `phase_answer`
#: reports as a modelling bug (of the larger magnitude, no absolute floor: both are sums of the same
#: non-negative times, so float noise is relative to them at any scale of the time unit)
CLAIM_RTOL = 1e-6
#: `phase_hint`'s name for the rotor DP run on the model's own (discretised) chain and budget
DP_HINT = "rotor (model's sizes)"
#: the model-sized DP is skipped above this many table cells (exact sizes of a large budget)
DP_HINT_MAX_CELLS = 5_000_000


def _dp_hint(model: PhaseModel) -> list[float] | None:
    """The rotor DP's optimal persistent schedule for `model.chain` under `model.budget` (the
    model's units), encoded in the model's variables; None when the DP is unavailable, its table
    would be too large, or no persistent schedule fits."""
    try:
        from .dp import rotor_table, table_cells
    except ImportError:
        return None
    m_top = model.budget - int(model.chain.x[0])
    if m_top < 0 or table_cells(model.L, m_top) > DP_HINT_MAX_CELLS:
        return None
    table = rotor_table(model.chain, m_top)
    if not math.isfinite(table.value(m_top)):
        return None
    return model.encode(table.schedule(m_top))


def phase_details(model: PhaseModel, build_s: float, source: str, hint_values: list[float] | None,
                  hint_ok: bool) -> dict[str, Any]:
    """The details every phase-model answer reports: size, build time (s) and warm start (`source`:
    `phase_hint`'s name of the start; "" for none)."""
    return {"variables": len(model.keys), "constraints": len(model.rows), "build_s": round(build_s, 3),
            "warm_start": source if hint_values is not None else "", "warm_start_fits": hint_ok}


#: `details["bound_from"]` of an answer whose lower bound is the root LP's (`separate_tape_cuts`)
ROOT_LP_BOUND = "root LP with tape cuts"


def root_lp_bound(lp_value: float | None) -> float | None:
    """The root LP's value (`CutReport.lp_after`, chain time unit) as a lower bound of the phase model's
    optimum: less `LP_BOUND_TOLERANCE` (relative: GLOP solves a rescaled objective); None without a
    finite LP value."""
    if lp_value is None or not math.isfinite(lp_value):
        return None
    return lp_value - LP_BOUND_TOLERANCE * abs(lp_value)


@contextmanager
def root_bound_on_timeout(report: CutReport, scope: str) -> Iterator[None]:
    """Around the tape-cut rounds of a phase model's root LP (`separate_tape_cuts`, filling `report` as they
    go) and the build and run after them: a `DeadlineExceeded`
    from the block (the model still being stated for the backend at the limit) is raised again as
    `exact.layer.BuildTimeout` with the root LP's bound (`root_lp_bound`, as `phase_answer` reports it)
    and `scope`, the model's scope (its sizes: exact or in N slots). A `KeyboardInterrupt` from the block
    carries that `BuildTimeout` as its ``exact.layer.BOUND_SO_FAR`` attribute (an answered Ctrl-C keeps the
    bound too, the last solved LP's when it came during the rounds). Without a solved LP either passes as it is."""
    try:
        yield
    except BuildTimeout:
        raise
    except DeadlineExceeded as exc:
        known = _bound_so_far(report, scope)
        if known is None:
            raise
        raise known from exc
    except KeyboardInterrupt as exc:
        if getattr(exc, BOUND_SO_FAR, None) is None:
            setattr(exc, BOUND_SO_FAR, _bound_so_far(report, scope))
        raise


def _bound_so_far(report: CutReport, scope: str) -> BuildTimeout | None:
    """The root LP's bound (`root_lp_bound`, at least 0) with `scope`, as a `BuildTimeout`; None without an LP."""
    bound = root_lp_bound(report.lp_after)
    return None if bound is None else BuildTimeout(max(bound, 0.0), scope, ROOT_LP_BOUND, report.as_details())


def phase_answer(result: Callable[..., SolveResult], model: PhaseModel, run: Any, values: list[float] | None,
                 hint_values: list[float] | None, hint_ok: bool, dchain: Chain, M: int, deadline: Deadline,
                 details: dict[str, Any], lp_bound: float | None = None) -> SolveResult:
    """The answer of a phase-model run (`run`: the exact layer's BackendRun, `values` its trusted
    solution or None): ``infeasible`` when proven, the warm start when the backend has no
    solution, ``timeout`` without either; else the decoded schedule replayed on the discretised
    chain `dchain` under M (its makespan must be the model's objective), ``optimal`` when the
    backend proved it and its bound is within 1e-6 (relative) of the makespan, ``feasible``
    otherwise; the lower bound is the larger of the backend's and `lp_bound` (the root LP with
    tape cuts, `solvers.chain.phase_cuts`, less a 1e-7 relative tolerance for GLOP's), clamped to
    [0, makespan]; ``details["bound_from"]`` says which."""
    if run.status == INFEASIBLE:
        return result(INFEASIBLE, message="no phase-model schedule fits the budget", details=details)
    source = "backend"
    if values is None and hint_ok:
        values, source = hint_values, "warm start"
    if values is None:
        why = "no schedule before the time limit" if deadline.expired() else \
            f"no schedule and no proof of infeasibility (backend: {run.backend_status})"
        return result(TIMEOUT, lower_bound=run.bound, message=why, log=run.log, details=details)
    schedule = model.decode(values)
    claimed = model.objective.value(values)
    sim = simulate(dchain, schedule, M).raise_if_invalid()
    if abs(sim.makespan - claimed) > CLAIM_RTOL * max(abs(claimed), abs(sim.makespan)):
        raise RuntimeError(f"phase model claims {claimed} but the simulator charges {sim.makespan}")
    bound = run.bound
    proven = run.status == OPTIMAL and source == "backend"
    details["bound_from"] = "backend" if bound is not None else ""
    lp_bound = root_lp_bound(lp_bound)
    if lp_bound is not None and (bound is None or lp_bound > bound):
        bound, details["bound_from"] = lp_bound, ROOT_LP_BOUND
    if proven and bound is not None and not gap_closed(claimed, bound):
        proven = False  # a backend that stopped at its gap or scaled the objective: not a proof
    if bound is not None:
        bound = min(max(bound, 0.0), claimed)
    if proven and bound is None:
        bound = claimed
    details["solution_from"] = source
    return result(OPTIMAL if proven else FEASIBLE, objective=sim.makespan, lower_bound=bound, schedule=schedule,
                  log=list(run.log) + [(deadline.elapsed(), sim.makespan, bound)], details=details)
