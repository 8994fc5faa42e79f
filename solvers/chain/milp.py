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
them) and referee it at exact sizes.

Statuses: ``optimal`` when the backend proves it (relative gap 1e-9) for the phase model;
``feasible`` when the time limit stops it with a schedule (the backend's or, failing that,
the seed's), ``lower_bound`` being the backend's best bound (a finite number or None);
``timeout`` without any schedule; ``infeasible`` when the backend proves that no phase-model
schedule fits (a backend INFEASIBLE at the time limit, or with a feasible start, is no proof).
"""

from __future__ import annotations

from typing import Any

from ..exact import highs_runner
from ..exact.cpsat_runner import BackendRun, check_first, linear_to_cpsat, rounded_rows, run_cpsat
from ..exact.layer import exact_solver
from ..exact.linear import LinearModel
from ..exact.milp_runner import run_milp
from ..exact.options import Deadline, ExactOptions
from ..exact.portfolio import run_portfolio
from ..result import INFEASIBLE, SolveResult
from .cpsat import FAST, phase_answer, phase_details, phase_hint, restricted_run, usable_fixings
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
    from ..errors import InputError, option_field

    if backend is not None and (not isinstance(backend, str) or backend.lower() not in BACKENDS):
        raise InputError(f"unknown MILP backend {backend!r} (one of {', '.join(BACKENDS)})",
                         field=option_field("backend"))


@check_first(lambda _chain, *, backend=None, **_: check_backend(backend))
@exact_solver("chain", "milp", FAST, least=lambda chain: chain.total_time())
def solve_milp(chain: Chain, budget: int, *, options: ExactOptions, deadline: Deadline,
               seed: SolveResult | None = None, backend: str | None = None, dominance: bool = True,
               cuts: bool = True, **_: Any) -> SolveResult:
    """Minimise the makespan (chain time unit) under `budget` (bytes) over the phase model.
    Options (`ExactOptions`): ``slots`` (N > 0: sizes in N slots, rounded up; 0: exact),
    ``time_limit`` (s, default 60, wall clock for everything), ``workers``; model options
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
                           details={"backend": backend, **kw.pop("details", {})}, **kw)

    if model.trivially_infeasible:
        return result(INFEASIBLE, message=f"no schedule fits: {model.trivially_infeasible}")
    hint_values, hint_ok, source = phase_hint(model, seed, deadline)
    incumbent = model.objective.value(hint_values) if hint_ok and hint_values is not None else None
    report = separate_tape_cuts(model, deadline, incumbent=incumbent) if cuts else CutReport()
    lm = model.to_linear(deadline)
    for i, v in usable_fixings(report, hint_values, hint_ok).items():  # reduced-cost fixing at the root LP
        lm.lb[i] = lm.ub[i] = v
    build_s = deadline.elapsed() - t_build
    if backend == "cp-sat":
        run = _run_on_cpsat(lm, model, hint_values, hint_ok, deadline, options)
        if rounded_rows(lm):
            scope += ", memory rows rounded for CP-SAT (a plan is checked at exact sizes)"
    elif backend == PORTFOLIO:
        run = run_portfolio(lm, deadline, options, hint=hint_values, hint_feasible=hint_ok, watched=True)
    else:
        run = run_milp(lm, backend, deadline, options, hint=hint_values, hint_feasible=hint_ok, watched=True)
    details = {**phase_details(model, build_s, source, hint_values, hint_ok), **report.as_details(),
               "backend_status": run.backend_status}
    values = run.values
    if values is not None:
        values = [1.0 if v > 0.5 else 0.0 for v in values]
        if model.violated(values):  # a rounded backend answer that breaks the model: do not trust it
            values = None
    return phase_answer(result, model, run, values, hint_values, hint_ok, dchain, M, deadline, details,
                        lp_bound=report.lp_after)


def _run_on_cpsat(lm: LinearModel, model: PhaseModel, hint: list[float] | None, hint_ok: bool, deadline: Deadline,
                  options: ExactOptions) -> BackendRun:
    """The linear phase model on CP-SAT. Rows past CP-SAT's coefficient limit (`linear_to_cpsat`)
    are first rounded into a relaxation, whose plan (and proof) is kept when it fits the real
    rows; else into a restriction, whose plan fits (`feasible` at best, `restricted_run`)."""
    extra = {"linearization_level": 2}
    cp, xs, offset, scale = linear_to_cpsat(lm, hint=hint, deadline=deadline)
    run = run_cpsat(cp, deadline, options, variables=xs, offset=offset, scale=scale, hint_feasible=hint_ok,
                    extra=extra, watched=True)
    if run.values is not None and model.violated(run.values, deadline=deadline):
        cp, xs, offset, scale = linear_to_cpsat(lm, hint=hint, deadline=deadline, up=True)
        run = restricted_run(run, run_cpsat(cp, deadline, options, variables=xs, offset=offset, scale=scale,
                                            hint_feasible=hint_ok, extra=extra, watched=True))
    return run
