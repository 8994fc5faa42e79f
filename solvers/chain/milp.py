"""Exact MILP for chain rematerialization: the phase model of `solvers.chain.exact_model`,
solved through OR-Tools' linear solver wrapper (pywraplp) with an open backend.

Backends: ``"scip"`` (default), ``"highs"``, ``"cbc"``, ``"cp-sat"`` (CP-SAT on the same
linear model) and ``"portfolio"`` (SCIP and HiGHS raced in two processes, `solvers.exact.portfolio`;
the default with ``workers >= 2``). The default was chosen with `experiments/bench_chain_exact.py`
(results/bench_chain_exact.csv; random_chain(L, 0), 100 slots, 60 s, 2 shared cores): SCIP
reaches the smallest gaps at the tight budgets from L = 20 on (CP-SAT's bound is weaker), and
L <= 15 is proven by every backend. At L = 50 only the loose budget is proven in 60 s by every
MILP backend, the mid one by HiGHS with its default seed (53-56 s; also through the portfolio)
and the tight one by none (SCIP needs 439 s):
the root LP relaxation is 2.4% (tight) to 0.5% (mid) below the best schedule (docs/chain.md,
"Scale"). CBC was left out of the timed grid: it counts CPU seconds, so under load it overran
its limit (164 s wall for a 60 s limit at L = 20).

Before the backend runs, violated *tape cuts* (`solvers.chain.phase_cuts`, option ``cuts``,
default True) are added in rounds of the LP relaxation; the last LP value is reported as the
lower bound when the backend's is lower or missing (``details["bound_from"]``). The last LP's
duals then fix the variables whose other value would make every schedule slower than the warm
start (reduced-cost fixing, `phase_cuts.fixings`; ``details["rc_fixed"]``).

The model is the phase model's `LinearModel` (`PhaseModel.to_linear`), run by
`solvers.exact.milp_runner` (or `cpsat_runner` for backend "cp-sat") under the exact layer:
the chain's fast solvers seed it (MIP start with SCIP; CBC ignores starts and HiGHS crashes on
them) and referee it at exact sizes. With "cp-sat" the objective goes to CP-SAT in integer ticks
(`linear_to_cpsat`: rounded to nine significant digits when no 10^k makes the times whole), and every
run's bound is lowered by the rounding's largest total error (`cpsat_runner.cost_slack`,
``details["cost_rounding_slack"]``, time units), as the chain ``cpsat``'s, so that ``optimal`` is a proof
for the real times. Option ``memory_gb`` (GB) is SCIP's memory limit (``limits/memory``: a
growing tree stops SCIP with its incumbent); it is taken with SCIP and the portfolio (its SCIP side) only, and
refused with HiGHS, CBC and CP-SAT, which have no limit that holds (`check_memory`).

Statuses: ``optimal`` when the backend proves it (relative gap 1e-9) for the phase model;
``feasible`` when the time limit stops it with a schedule (the backend's or, failing that,
the seed's), ``lower_bound`` being the backend's best bound (a finite number or None);
``timeout`` without any schedule; ``infeasible`` when the backend proves that no phase-model
schedule fits (a backend INFEASIBLE at the time limit, or with a feasible start, is no proof).

A backend plan that breaks an exact row is not used (`_exact_plan`): SCIP's feasibility tolerance
is relative, so at exact sizes in bytes it returned as "optimal" a plan 1 byte over a memory row of
~2e9 (a 2-stage chain one byte below its smallest feasible budget; 16 where 19 is optimal on 4
stages of 1e9 bytes). Another backend (HiGHS; SCIP after HiGHS) then gets half the time left; its
proof of infeasibility or a plan that fits is the answer; else the first backend (SCIP for HiGHS and
the portfolio) runs again with each broken plan excluded (a no-good row: the model stays a
relaxation, so its proofs and bounds hold) until a plan fits, infeasibility is proven, or the deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..discretize import GAP_TOLERANCE
from ..exact import highs_runner
from ..exact.cpsat_runner import BackendRun, check_first, cost_slack, linear_to_cpsat, rounded_rows, run_cpsat
from ..exact.exact_rows import broken, drop_broken, exact_rows_cpsat, exclude_broken, nogood_row
from ..exact.layer import exact_solver
from ..exact.linear import LinearModel
from ..exact.milp_runner import check_backend_name, run_milp
from ..exact.options import Deadline, DeadlineExceeded, ExactOptions
from ..exact.portfolio import run_isolated, run_portfolio
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult, gap_closed
from .cpsat import (
    FAST,
    phase_answer,
    phase_details,
    phase_hint,
    root_bound_on_timeout,
    usable_fixings,
)
from .exact_model import PhaseModel, discretise, retry_exact_sizes
from .instance import Chain
from .phase_cuts import CutReport, separate_tape_cuts

#: backend name: SCIP and HiGHS raced in two processes, the first proof wins (`solvers.exact.portfolio`)
PORTFOLIO = "portfolio"

BACKENDS = ("scip", "highs", "cbc", "cp-sat", PORTFOLIO)
DEFAULT_BACKEND = "scip"


def default_backend(workers: int) -> str:
    """SCIP on one worker; with two or more, SCIP and HiGHS raced in two processes
    (`solvers.exact.portfolio`) when highspy is installed (neither backend uses a second core here)."""
    return PORTFOLIO if workers >= 2 and highs_runner.available() else DEFAULT_BACKEND


def check_backend(backend: str | None) -> None:
    """The ``backend`` option of `solve_milp`: None (the default) or one of BACKENDS, in any case;
    else `InputError` naming the option."""
    check_backend_name(backend, BACKENDS)


#: the backends that honour ``memory_gb`` (SCIP's ``limits/memory``, `milp_runner.scip_settings`; the portfolio
#: gives it to its SCIP side): HiGHS, CBC and CP-SAT have no memory limit that holds, so they refuse it
MEMORY_BACKENDS = ("scip", PORTFOLIO)


def check_memory(backend: str | None, memory_gb: Any = None) -> None:
    """``memory_gb`` (GB) is taken only with a backend of `MEMORY_BACKENDS` (the default backend, None, is
    one: SCIP or the portfolio): given a value with another backend, an `InputError` naming the option
    and the backend, rather than a limit that silently does not hold."""
    from ..errors import InputError, option_field

    if memory_gb is not None and backend is not None and backend.lower() not in MEMORY_BACKENDS:
        raise InputError(f"not taken with backend {backend.lower()!r}: it is SCIP's memory limit (limits/memory), "
                         f"taken with backend scip or portfolio (the defaults); {backend.lower()} has no memory limit "
                         "that holds",
                         field=option_field("memory_gb"))


def check_options(_chain: Chain, *, backend: str | None = None, memory_gb: Any = None, **_: Any) -> None:
    """The ``backend`` option (`check_backend`) and ``memory_gb`` with it (`check_memory`), before the warm start."""
    check_backend(backend)
    check_memory(backend, memory_gb)


@check_first(check_options)
@exact_solver("chain", "milp", FAST, least=lambda chain: chain.total_time())
def solve_milp(chain: Chain, budget: int, *, options: ExactOptions, deadline: Deadline,
               seed: SolveResult | None = None, backend: str | None = None, dominance: bool = True,
               cuts: bool = True, **_: Any) -> SolveResult:
    """Minimise the makespan (chain time unit) under `budget` (bytes) over the phase model.
    Options (`ExactOptions`): ``slots`` (N > 0: sizes in N slots, rounded up; 0: exact),
    ``time_limit`` (s, default 60, wall clock for everything), ``workers``, ``memory_gb`` (GB: SCIP's memory
    limit, `milp_runner.scip_settings`; only with SCIP or the portfolio, `check_memory`); model options
    ``backend`` (one of BACKENDS, default SCIP), ``dominance`` (default True) and ``cuts`` (default
    True: tape cuts at the root, `solvers.chain.phase_cuts`). When the rounded
    sizes make the budget infeasible the model is solved again with exact sizes."""
    return retry_exact_sizes(_solve_milp, chain, budget, options=options, deadline=deadline, seed=seed,
                             backend=backend, dominance=dominance, cuts=cuts)


def _solve_milp(chain: Chain, budget: int, *, options: ExactOptions, deadline: Deadline,
                seed: SolveResult | None = None, backend: str | None = None, dominance: bool = True,
                cuts: bool = True, **_: Any) -> SolveResult:
    backend = (backend or default_backend(options.workers)).lower()
    t_build = deadline.elapsed()
    dchain, M = discretise(chain, budget, options.slots)
    model = PhaseModel.build(dchain, M, dominance=dominance, deadline=deadline)
    scope = model.scope(options.slots if M != budget else 0) + f"; MILP ({backend})"

    def result(status: str, **kw: Any) -> SolveResult:
        return SolveResult(problem="chain", solver="milp", status=status, budget=budget, scope=scope,
                           details={"backend": backend, **({"answered_by": answered_by} if answered_by else {}),
                                    **kw.pop("details", {})}, **kw)

    answered_by = ""  # the backend that answered when `backend` failed (`milp_runner.after_failure`)
    if model.trivially_infeasible:
        return result(INFEASIBLE, message=f"no schedule fits: {model.trivially_infeasible}")
    hint_values, hint_ok, source = phase_hint(model, seed, deadline, warm_start=options.warm_start)
    incumbent = model.objective.value(hint_values) if hint_ok and hint_values is not None else None
    report = CutReport()  # filled by the rounds as they go: a Ctrl-C in them keeps the last LP's bound
    with root_bound_on_timeout(report, scope):  # a build cut short keeps the root LP's bound
        if cuts:
            separate_tape_cuts(model, deadline, incumbent=incumbent, report=report)
        lm = model.to_linear(deadline)
        for i, v in usable_fixings(report, hint_values, hint_ok).items():  # reduced-cost fixing at the root LP
            lm.lb[i] = lm.ub[i] = v
        build_s = deadline.elapsed() - t_build
        if backend == "cp-sat":
            run = _run_on_cpsat(lm, model, hint_values, hint_ok, deadline, options)
            if rounded_rows(lm):
                scope += ", memory rows rounded for CP-SAT (a plan is checked at exact sizes)"
        else:
            def solve(linear: LinearModel, name: str = backend, within: Deadline = deadline,
                      watched: bool = True, isolated: bool = False) -> BackendRun:
                if name == PORTFOLIO:
                    return _binary(run_portfolio(linear, within, options, hint=hint_values, hint_feasible=hint_ok,
                                                 watched=watched))
                if isolated:  # one thread, as the portfolio's HiGHS on two workers
                    return _binary(run_isolated(linear, name, within, replace(options, workers=1), hint=hint_values,
                                                hint_feasible=hint_ok))
                return _binary(run_milp(linear, name, within, options, hint=hint_values, hint_feasible=hint_ok,
                                        watched=watched))

            run = solve(lm)
            answered_by = run.answered_by
            if answered_by:  # the asked backend failed: the answer is another's, and says so
                scope = scope.replace(f"MILP ({backend})", f"MILP ({answered_by}, after {backend} failed)")
            if broken(run, model):
                failure = run.failure
                run = _exact_plan(run, lm, model, backend, solve, deadline)
                if failure and run.failure != failure:  # the answer still says that the backend failed
                    run.backend_status = f"{failure}; then {answered_by or 'another backend'}: {run.backend_status}"
        details = {**phase_details(model, build_s, source, hint_values, hint_ok), **report.as_details(),
                   "backend_status": run.backend_status}
        if backend == "cp-sat":  # as the chain's cpsat: the bound was lowered by it (`_run_on_cpsat`)
            details["cost_rounding_slack"] = cost_slack(lm)
        run = drop_broken(run, model)  # a backend answer that breaks the model: do not trust it
        return phase_answer(result, model, run, run.values, hint_values, hint_ok, dchain, M, deadline, details,
                            lp_bound=report.lp_after)


def _binary(run: BackendRun) -> BackendRun:
    """`run` with its values rounded to 0 or 1 (every phase-model variable is binary)."""
    if run.values is not None:
        run.values = [1.0 if v > 0.5 else 0.0 for v in run.values]
    return run


#: the backend asked when `backend`'s plan breaks an exact row (`_exact_plan`); HiGHS's tolerances are absolute
OTHER_BACKEND = {"highs": "scip"}
#: the backends that solve the model with broken plans excluded (`_exact_plan`); SCIP for the others: HiGHS
#: 1.x answered wrongly there (4 stages of 1e9 bytes at 7e9 - 1 with 2 to 18 no-good rows: "infeasible",
#: "optimal" 20 and 22, where SCIP and the warm start have 19 satisfying every row)
EXCLUDING_BACKENDS = ("scip", "cbc")


def _other_backend(backend: str) -> str | None:
    """The backend that checks `backend`'s broken plan: HiGHS (when highspy is installed), SCIP for HiGHS."""
    other = OTHER_BACKEND.get(backend, "highs")
    return None if other == "highs" and not highs_runner.available() else other


def _exact_plan(run: BackendRun, lm: LinearModel, model: PhaseModel, backend: str,
                solve: Callable[..., BackendRun], deadline: Deadline) -> BackendRun:
    """The answer when `run`'s plan (of `backend` on `lm`, values 0-1) breaks a row of `model` at exact
    sizes, within the backend's feasibility tolerance: another backend (`_other_backend`) on `lm` with
    half the time left, kept when it proves infeasibility or its plan fits; else `backend` again (SCIP for
    HiGHS and the portfolio, `EXCLUDING_BACKENDS`) with each broken plan excluded
    (`exact.exact_rows.exclude_broken`: `lm` gets a no-good row) until a plan fits,
    infeasibility is proven, or the deadline. The bound is the largest of the runs' (each is a
    bound of `model`'s optimum: a backend solves a relaxation within its tolerance). ``solve(linear,
    name, within, watched, isolated)`` runs a backend (`isolated`: in a forked child,
    `portfolio.run_isolated`; the other backend runs so, as HiGHS fixes its thread count once per
    process and the portfolio keeps it out of this one). The plan of the answer may still break a row at the
    deadline (`drop_broken`)."""
    def resolve(plan: list[float]) -> BackendRun:
        lm.add(*nogood_row(plan))
        return solve(lm, backend if backend in EXCLUDING_BACKENDS else "scip", deadline, False)

    bound = run.bound
    other = _other_backend(backend)
    if other is not None and not deadline.expired():
        share = deadline.share(0.5)
        try:
            alt = solve(lm, other, share, False, True)  # in a child: HiGHS's threads are set once per process
        except DeadlineExceeded:  # its share ran out while the model was emitted
            alt = BackendRun(TIMEOUT)
        alt.log = [(t + share.start - deadline.start, o, b) for t, o, b in alt.log]
        if alt.status == INFEASIBLE or (alt.values is not None and not broken(alt, model)):
            return exclude_broken(alt, model, resolve, deadline, rounds=0, bound=bound)  # the bounds merged
        if alt.bound is not None:
            bound = alt.bound if bound is None else max(bound, alt.bound)
    return exclude_broken(run, model, resolve, deadline, bound=bound)


def _run_on_cpsat(lm: LinearModel, model: PhaseModel, hint: list[float] | None, hint_ok: bool, deadline: Deadline,
                  options: ExactOptions) -> BackendRun:
    """The linear phase model on CP-SAT. Rows past CP-SAT's coefficient limit (`linear_to_cpsat`)
    are first rounded into a relaxation, whose plan (and proof) is kept when it fits the real
    rows; else its broken plans are excluded, and a restriction (rows rounded up) tried, until a plan
    fits, infeasibility is proven, or the deadline (`exact.exact_rows.exact_rows_cpsat`). Objective and
    bound of every run in the real times (`_real_times`: the objective may go to CP-SAT rounded)."""
    extra = {"linearization_level": 2}
    slack = cost_slack(lm)
    cp, xs, offset, scale = linear_to_cpsat(lm, hint=hint, deadline=deadline)
    run = _real_times(run_cpsat(cp, deadline, options, variables=xs, offset=offset, scale=scale,
                                hint_feasible=hint_ok, extra=extra, watched=True), lm, slack)
    if not rounded_rows(lm):
        return run
    scales = {id(cp): (offset, scale)}

    def solve(cp_: Any, xs_: list[Any], *, relaxed: bool) -> BackendRun:
        off, sc = scales[id(cp_)]
        return _real_times(run_cpsat(cp_, deadline, options, variables=xs_, offset=off, scale=sc,
                                     hint_feasible=hint_ok and relaxed, extra=extra, watched=True), lm, slack)

    def restriction() -> tuple[Any, list[Any]]:
        cp_up, xs_up, off, sc = linear_to_cpsat(lm, hint=hint, deadline=deadline, up=True)
        scales[id(cp_up)] = (off, sc)
        return cp_up, xs_up

    return exact_rows_cpsat(run, model, cp, xs, solve, restriction, deadline)


def _real_times(run: BackendRun, lm: LinearModel, slack: float) -> BackendRun:
    """`run` of CP-SAT on `lm`'s objective in rounded ticks (`linear_to_cpsat`) stated in the real times, as
    the chain's ``cpsat`` does (`cpsat.ObjectiveTicks.lowered`): its bound lowered by `slack`
    (`cpsat_runner.cost_slack`, time units) so that it bounds the real objective, its objective its plan's
    real value, and ``optimal`` kept only when that bound is within `GAP_TOLERANCE` (relative) of it.
    Unchanged when `slack` is 0 (the ticks are exact)."""
    if slack <= 0:
        return run
    if run.bound is not None:
        run.bound -= slack
    if run.values is not None:
        run.objective = lm.value(run.values)
    if run.status == OPTIMAL and not (run.objective is not None and gap_closed(run.objective, run.bound,
                                                                               GAP_TOLERANCE)):
        run.status = FEASIBLE
    return run
