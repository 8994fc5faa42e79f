"""Exact MILP for join networks: the join phase model of `solvers.join.cpsat` (same rows, built by the
same code: `JoinPhaseModel` with ``linear=True`` states them as a `LinearModel`), solved for every
backward order by OR-Tools' MILP backends (`solvers.exact.milp_runner.run_milp`).

Backends (``--option backend=``, as the chain's ``milp``, `solvers.chain.milp.BACKENDS`): ``"scip"``
(default), ``"highs"``, ``"cbc"``, ``"cp-sat"`` (CP-SAT on the linear model, `cpsat_runner.linear_to_cpsat`)
and ``"portfolio"`` (SCIP and HiGHS raced in two processes; the default with ``workers >= 2``).
``memory_gb`` (GB) is SCIP's memory limit, taken with SCIP and the portfolio only
(`solvers.chain.milp.check_memory`).

Each order's model gets the seed's schedule as its start (`JoinPhaseModel.encode`; a MIP start with
SCIP, CBC and CP-SAT, none with HiGHS) when the model can express it. Memory rows are in bytes (exact
sizes) or slots; a backend's plan that breaks one at exact sizes (SCIP's feasibility tolerance is
relative: 1 byte over a row of ~1e10 passes) is excluded by a no-good row and the order solved again
(`exact.exact_rows.exclude_broken`; SCIP for HiGHS and the portfolio) until a plan fits, infeasibility
is proven, or the order's share of the time limit ends; a plan that still breaks a row is dropped
(`drop_broken`). Statuses, bounds, the order loop, the exact-size retry and the scope are join
``cpsat``'s (`cpsat.solve_orders`), the scope ending "MILP (backend)".
"""

from __future__ import annotations

from typing import Any

from ..chain.milp import EXCLUDING_BACKENDS, PORTFOLIO, check_backend, check_memory, default_backend
from ..discretize import GAP_TOLERANCE
from ..exact.cpsat_runner import check_first, cost_slack, linear_to_cpsat, rounded_rows, run_cpsat
from ..exact.exact_rows import broken, drop_broken, exact_rows_cpsat, exclude_broken, nogood_row
from ..exact.layer import exact_solver
from ..exact.linear import LinearModel
from ..exact.milp_runner import BackendRun, run_milp
from ..exact.options import Deadline, DeadlineExceeded, ExactOptions
from ..exact.portfolio import run_portfolio
from ..result import FEASIBLE, OPTIMAL, TIMEOUT, SolveResult, gap_closed
from .cpsat import FAST, JoinPhaseModel, OrderEngine, checked_orders, solve_orders
from .instance import Join


def check_options(join: Join, *, orders: Any = None, backend: str | None = None, memory_gb: Any = None,
                  **_: Any) -> None:
    """``orders`` (`cpsat.checked_orders`), ``backend`` and ``memory_gb`` with it (the chain ``milp``'s
    checks), before the warm start; each an `InputError` naming its option."""
    checked_orders(join, orders)
    check_backend(backend)
    check_memory(backend, memory_gb)


@check_first(check_options)
@exact_solver("join", "milp", FAST, least=lambda join: join.total_time())
def solve_milp(join: Join, budget: int, *, options: ExactOptions, deadline: Deadline,
               seed: SolveResult | None = None, orders: list[list[int]] | str | None = None,
               backend: str | None = None, **_: Any) -> SolveResult:
    """Best schedule of the join phase model (`solvers.join.cpsat`) over the backward orders `orders`
    (default all k!), each order's `LinearModel` solved by `backend` (module docstring; default SCIP on
    one worker). Options as join ``cpsat``'s (``slots``: N > 0 rounds sizes up to N slots, 0 exact
    sizes; ``time_limit`` in s, wall clock, shared by the orders; ``orders``) plus ``backend`` and
    ``memory_gb`` (GB). When the rounded sizes make every order infeasible the model is solved again
    with exact sizes in the time left (`cpsat.solve_orders`)."""
    name = (backend or default_backend(options.workers)).lower()
    engine = OrderEngine("milp", f"MILP ({name})", True,
                         lambda model, hint, share, opts: _milp_run(model, hint, share, opts, name))
    res = solve_orders(join, budget, options=options, deadline=deadline, seed=seed, orders=orders, engine=engine)
    res.details["backend"] = name
    return res


def _start(model: JoinPhaseModel, hint: Any) -> tuple[list[float] | None, bool]:
    """(the seed's schedule `hint` as 0-1 values of `model`, whether they satisfy every row of
    ``model.lm``): (None, False) when there is no seed or the model cannot express it."""
    values = model.encode(hint) if hint is not None else None
    if values is None:
        return None, False
    assert model.lm is not None
    start = [float(v) for v in values]
    return start, model.lm.violated(start) == 0


def _binary(run: BackendRun, lm: LinearModel) -> BackendRun:
    """`run` with its values rounded to 0 or 1 (every variable is a Boolean) and its objective their
    value in time units (`lm`'s objective, offset included)."""
    if run.values is not None:
        run.values = [1.0 if v > 0.5 else 0.0 for v in run.values]
        run.objective = lm.value(run.values)
        if run.bound is not None:
            run.bound = min(run.bound, run.objective)
    return run


def _milp_run(model: JoinPhaseModel, hint: Any, deadline: Deadline, options: ExactOptions,
              backend: str) -> BackendRun:
    """One order's `LinearModel` (``model.lm``) by `backend` within `deadline`, the seed's schedule as
    its start (`_start`); a plan that breaks a row of `model` at exact sizes is excluded and the order
    solved again (`_exact_plan`), and dropped if it still breaks one at the deadline. Objective and
    bound in time units."""
    lm = model.lm
    assert lm is not None
    start, start_ok = _start(model, hint)
    try:
        if backend == "cp-sat":
            return _run_on_cpsat(lm, model, start, start_ok, deadline, options)
        return _run_on_milp(lm, model, start, start_ok, deadline, options, backend)
    except DeadlineExceeded:  # the order's share ran out while the model was emitted: no plan, no proof
        return BackendRun(TIMEOUT, backend_status="not started: the time limit came while the model was emitted")


def _run_on_milp(lm: LinearModel, model: JoinPhaseModel, start: list[float] | None, start_ok: bool,
                 deadline: Deadline, options: ExactOptions, backend: str) -> BackendRun:
    """`_milp_run` with a MILP backend (or the portfolio): `run_milp` on `lm`, then `_exact_plan` for a
    plan that breaks a row of `model` at exact sizes, and `drop_broken`."""

    def solve(name: str) -> BackendRun:
        if name == PORTFOLIO:
            run = run_portfolio(lm, deadline, options, hint=start, hint_feasible=start_ok)
        else:
            run = run_milp(lm, name, deadline, options, hint=start, hint_feasible=start_ok)
        return _binary(run, lm)

    run = solve(backend)
    if broken(run, model):
        run = _exact_plan(run, lm, model, backend, solve, deadline)
    return drop_broken(run, model)


def _exact_plan(run: BackendRun, lm: LinearModel, model: JoinPhaseModel, backend: str, solve: Any,
                deadline: Deadline) -> BackendRun:
    """The answer when `run`'s plan breaks a row of `model` at exact sizes (within the backend's
    tolerance): each broken plan excluded from `lm` by a no-good row (`nogood_row`; the model stays a
    relaxation, so its proofs and bounds hold) and `lm` solved again by `backend` (SCIP for HiGHS and
    the portfolio, `chain.milp.EXCLUDING_BACKENDS`) until a plan fits, infeasibility is proven, or
    `deadline` (`exclude_broken`). ``solve(name)`` runs a backend on `lm`."""
    again = backend if backend in EXCLUDING_BACKENDS else "scip"

    def resolve(plan: list[float]) -> BackendRun:
        lm.add(*nogood_row(plan))
        return solve(again)

    return exclude_broken(run, model, resolve, deadline)


def _run_on_cpsat(lm: LinearModel, model: JoinPhaseModel, start: list[float] | None, start_ok: bool,
                  deadline: Deadline, options: ExactOptions) -> BackendRun:
    """One order's `LinearModel` on CP-SAT (`linear_to_cpsat`, the start as its hint). Rows past CP-SAT's
    coefficient limit are rounded into a relaxation; its plan is kept when it fits `model` at exact
    sizes, else the broken plans are excluded and a restriction (rows rounded up) tried
    (`exact.exact_rows.exact_rows_cpsat`), as the chain ``milp``'s backend ``cp-sat``."""
    cp, xs, offset, scale = linear_to_cpsat(lm, hint=start, deadline=deadline)
    scales = {id(cp): (offset, scale)}

    slack = cost_slack(lm)  # the objective's ticks may be rounded: CP-SAT's bound lowered by it

    def solve(cp_: Any, xs_: list[Any], *, relaxed: bool) -> BackendRun:
        off, sc = scales[id(cp_)]
        run = run_cpsat(cp_, deadline, options, variables=xs_, offset=off, scale=sc,
                        hint_feasible=start_ok and relaxed, progress=False)
        if slack > 0 and run.bound is not None:  # rounded ticks: the bound holds for the real times
            run.bound -= slack
        run = _binary(run, lm)
        if run.status == OPTIMAL and run.objective is not None and not gap_closed(run.objective, run.bound,
                                                                                  GAP_TOLERANCE):
            run.status = FEASIBLE
        return run

    run = solve(cp, xs, relaxed=True)
    if not rounded_rows(lm):
        return drop_broken(run, model)
    model.rows_exact = False  # the scope says the rows were rounded for CP-SAT (`cpsat._solve_orders`)

    def restriction() -> tuple[Any, list[Any]]:
        cp_up, xs_up, off, sc = linear_to_cpsat(lm, hint=start, deadline=deadline, up=True)
        scales[id(cp_up)] = (off, sc)
        return cp_up, xs_up

    return exact_rows_cpsat(run, model, cp, xs, solve, restriction, deadline)


__all__ = ["solve_milp", "check_options"]
