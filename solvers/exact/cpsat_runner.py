"""Run a CP-SAT model under a wall-clock `Deadline` and map its answer once (same `BackendRun`
as `milp_runner`): ``optimal`` / ``feasible`` / ``infeasible`` / ``timeout``, a finite bound or
None, the log of (s, objective, bound) as solutions improve. CP-SAT's ``INFEASIBLE`` is a proof
unless a hint known to satisfy the model was given (then the answer is inconsistent and is
reported ``timeout``). The model is given what is left of the deadline, and a watchdog stops
the search if CP-SAT overruns it (0.2 s after the deadline).

`linear_to_cpsat` states a `LinearModel` (integer variables, integer row coefficients) in
CP-SAT; a non-integral objective is scaled with `solvers.discretize.integer_costs`, which may round
it (`cost_slack`: by how much at most, so that a caller lowers CP-SAT's bound by it).

`fit_row` keeps a row's coefficients within `ROW_LIMIT` (CP-SAT 9.15's presolve overflows past
2^31, or-tools issue #5293): exact by their gcd, else rounded into a relaxation or a restriction.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..discretize import CPSAT_COST_DIGITS, integer_costs, rounding_error
from ..progress import current_reporter, report
from .interrupt import in_charge, stop_on_interrupt
from .linear import LinearModel
from .milp_runner import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, BackendRun, finite_bound, not_started
from .options import Deadline, ExactOptions


def run_cpsat(model: Any, deadline: Deadline, options: ExactOptions | None = None, *,
              variables: Sequence[Any] | None = None, offset: float = 0.0, scale: float = 1.0,
              hint_feasible: bool = False, stop_at_first: bool = False, parameters: str = "",
              extra: dict[str, Any] | None = None, log_start: float | None = None,
              progress: bool = True, watched: bool = False) -> BackendRun:
    """Solve `model` (a `cp_model.CpModel`). Objective and bound are reported as
    ``(value + offset) / scale`` (the model minimises integer ticks; `scale` ticks per unit).
    `variables`: read their values into ``run.values``; ``run.solver`` keeps the solver for
    other reads. `extra` sets CP-SAT parameters by name; `parameters` is "name:value" text
    (spaces or commas between pairs) applied last. `progress`: log every improving solution
    (a Python callback; off for many small solves). `watched`: the model is the whole problem and
    its objective the problem's, so improving solutions and bounds go to the progress watcher
    (`solvers.progress`) as CP-SAT finds them; the stage is reported in any case."""
    from ortools.sat.python import cp_model

    options = options or ExactOptions()
    if (skipped := not_started(deadline)) is not None:
        return skipped
    solver = cp_model.CpSolver()
    p = solver.parameters
    left = deadline.left()
    if left is not None:
        p.max_time_in_seconds = max(0.001, left)
    p.num_workers = options.workers
    p.random_seed = options.seed
    p.log_search_progress = options.verbose
    for name, value in (extra or {}).items():
        setattr(p, name, value)
    set_parameters(p, parameters)
    log_to_stderr(solver)
    start = deadline.start if log_start is None else log_start
    report("search (cp-sat)")
    send = current_reporter() if watched else None  # CP-SAT calls back from its own threads
    log: list[tuple[float, float | None, float | None]] = []

    class _Progress(cp_model.CpSolverSolutionCallback):
        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()

        def on_solution_callback(self) -> None:
            with self.lock:
                entry = (time.perf_counter() - start, (self.objective_value + offset) / scale,
                         _bound(self.best_objective_bound, offset, scale))
                log.append(entry)
            if send is not None and not stop_at_first:
                send(best=entry[1], bound=entry[2])
            if stop_at_first:
                self.stop_search()

    timer = None
    if left is not None:
        timer = threading.Timer(max(0.0, left) + 0.2, solver.stop_search)
        timer.daemon = True
        timer.start()
    if send is not None and model.has_objective():
        solver.best_bound_callback = lambda value: send(bound=_bound(value, offset, scale))
    if in_charge():  # Ctrl-C is ours (`interrupt`): CP-SAT would end as at its limit, unsaid
        p.catch_sigint_signal = False
    try:
        with stop_on_interrupt(solver.stop_search, repeat=True):
            code = solver.solve(model, _Progress() if progress or stop_at_first or send is not None else None)
    finally:
        if timer is not None:
            timer.cancel()
    wall = deadline.elapsed()
    run = BackendRun(TIMEOUT, wall=wall, backend_status=solver.status_name(code), solver=solver, log=log)
    if code == cp_model.MODEL_INVALID:
        why = model.validate()
        if not why:  # the model is sound: the parameters set are not
            raise rejected_parameters(solver.solution_info(), parameters)
        raise RuntimeError(f"CP-SAT rejects the model: {why}")
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        has_objective = model.has_objective()
        objective = (solver.objective_value + offset) / scale if has_objective else None
        bound = _bound(solver.best_objective_bound, offset, scale) if has_objective else None
        status = OPTIMAL if code == cp_model.OPTIMAL and has_objective and not stop_at_first else FEASIBLE
        if objective is not None and bound is not None:
            bound = min(bound, objective)
        if status == OPTIMAL and bound is None:
            bound = objective
        run.status, run.objective, run.bound = status, objective, bound
        if send is not None and not stop_at_first:
            send(best=objective, bound=bound)
        if variables is not None:
            run.values = [float(solver.value(v)) for v in variables]
        else:
            run.values = []
        return run
    if code == cp_model.INFEASIBLE and not hint_feasible:
        run.status = INFEASIBLE
        return run
    if code == cp_model.UNKNOWN and model.has_objective():
        run.bound = _bound(solver.best_objective_bound, offset, scale)
    if code == cp_model.UNKNOWN and hint_feasible and variables is not None:
        # stopped (limit, Ctrl-C) before CP-SAT had checked the start it was given: answer with the start
        start_answer = _hint_answer(model, variables, offset, scale)
        if start_answer is not None:
            run.values, run.objective = start_answer
            run.status = FEASIBLE
            if run.bound is not None and run.objective is not None:
                run.bound = min(run.bound, run.objective)
    return run


def log_to_stderr(solver: Any) -> None:
    """Send `solver`'s log (``verbose``, or ``log_search_progress`` among the ``parameters``) to
    standard error, never to standard output, which holds ``memsched solve --json``'s answer:
    CP-SAT's own ``log_to_stdout`` is turned off (even when the parameters ask for it) and the
    log lines are written to ``sys.stderr`` by a callback."""
    p = solver.parameters
    p.log_to_stdout = False
    if p.log_search_progress:
        solver.log_callback = _write_log


def _write_log(line: str) -> None:
    """One CP-SAT log line (called from CP-SAT's threads) to ``sys.stderr``."""
    try:
        sys.stderr.write(line if line.endswith("\n") else line + "\n")
        sys.stderr.flush()
    except (AttributeError, ValueError, OSError):  # no stderr, or a closed one: the log is lost
        pass


def _hint_answer(model: Any, variables: Sequence[Any], offset: float, scale: float
                 ) -> tuple[list[float], float | None] | None:
    """(values of `variables`, objective) of the model's solution hint, or None when the hint does
    not give every one of them a value. Only for a hint the caller knows to be feasible."""
    proto = model.proto
    hint = dict(zip(proto.solution_hint.vars, proto.solution_hint.values))

    def value(ref: int) -> int | None:
        v = hint.get(ref if ref >= 0 else -ref - 1)
        return None if v is None else (v if ref >= 0 else -v)

    values: list[float] = []
    for var in variables:
        v = value(var.index)
        if v is None:
            return None
        values.append(float(v))
    objective = None
    if model.has_objective():
        terms = [value(r) for r in proto.objective.vars]
        if any(t is None for t in terms):
            return None
        ticks = sum(c * t for c, t in zip(proto.objective.coeffs, terms)) + proto.objective.offset
        factor = proto.objective.scaling_factor or 1.0
        objective = (ticks * factor + offset) / scale
    return values, objective


def _bound(value: float, offset: float, scale: float) -> float | None:
    b = finite_bound(value)
    return None if b is None else (b + offset) / scale


#: CP-SAT parameters set from an exact-layer option (`ExactOptions`) or the time limit, by the option
#: that sets them: refused in ``parameters`` (`parse_parameters`), where they would silently win
OWN_PARAMETERS = {"num_workers": "workers", "random_seed": "seed", "max_time_in_seconds": "time_limit"}


def rejected_parameters(info: str, parameters: str = "") -> Exception:
    """The error for CP-SAT's ``MODEL_INVALID`` on a sound model (its parameters are at fault;
    `info`: CP-SAT's ``solution_info``, "parameter 'num_workers' should be in [0,10000]..."): an
    `InputError` naming the option that set the parameter (``--option workers`` for
    ``num_workers``, ``--option seed`` for ``random_seed``, ``--option parameters`` for the others
    when `parameters` were given), else a `RuntimeError` (parameters set by the solver itself)."""
    from ..errors import InputError

    for name in OWN_PARAMETERS:
        if f"'{name}'" in info:
            return InputError(f"CP-SAT rejects it: {info}", field=own_option(name))
    if parameters:
        return InputError(f"CP-SAT rejects them: {info}", field=parameters_field())
    return RuntimeError(f"CP-SAT rejects its parameters: {info}")


def parameters_field() -> str:
    """The field of the errors about the ``parameters`` option (``--option parameters`` on the
    command line, ``parameters`` in Python: `errors.option_field`)."""
    from ..errors import option_field

    return option_field("parameters")


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def parse_parameters(text: str) -> Any:
    """CP-SAT parameters (a ``sat_parameters_pb2.SatParameters`` holding only those given) read
    from "name:value" pairs (spaces or commas between them; booleans true/false, 1/0, yes/no;
    enums by name or number; a repeated field is appended to once per pair). An unknown name, a
    pair without a value, a value of the wrong type or out of the field's range is an `InputError`
    on ``--option parameters``, as is a parameter that an option sets (`OWN_PARAMETERS`: num_workers,
    random_seed, max_time_in_seconds: ``workers``, ``seed``, the time limit), which would silently win
    over it; the ranges CP-SAT itself sets are checked by `check_parameters`."""
    from ortools.sat import sat_parameters_pb2

    from ..errors import InputError

    text = "" if text is None else text
    if not isinstance(text, str):
        raise InputError(f"must be a string of name:value pairs, got {text!r}", field=parameters_field())
    msg = sat_parameters_pb2.SatParameters()
    fields = msg.DESCRIPTOR.fields_by_name
    for item in text.replace(",", " ").split():
        name, colon, raw = item.partition(":")
        field = fields.get(name)
        if field is None:
            raise InputError(f"unknown CP-SAT parameter {name!r}", field=parameters_field())
        if name in OWN_PARAMETERS:
            raise InputError(f"{name} is set with {own_option(name)}, not in parameters", field=parameters_field())
        if not colon or not raw:
            raise InputError(f"{item!r}: expected name:value", field=parameters_field())
        if field.type == field.TYPE_MESSAGE:
            raise InputError(f"{name} is a message, not a name:value parameter", field=parameters_field())
        value: Any
        try:
            if field.type == field.TYPE_BOOL:
                if raw.lower() not in (*_TRUE, *_FALSE):
                    raise ValueError
                value = raw.lower() in _TRUE
            elif field.type == field.TYPE_ENUM:
                known = field.enum_type.values_by_name
                value = known[raw].number if raw in known else int(raw)
                if value not in field.enum_type.values_by_number:
                    raise ValueError
            elif field.cpp_type in (field.CPPTYPE_FLOAT, field.CPPTYPE_DOUBLE):
                value = float(raw)
            elif field.cpp_type == field.CPPTYPE_STRING:
                value = raw
            else:
                value = int(raw)
            if _repeated(field):
                getattr(msg, name).append(value)
            else:
                setattr(msg, name, value)
        except (ValueError, TypeError):
            raise InputError(f"{name}: expected {_kind(field)}, got {raw!r}", field=parameters_field()) from None
    return msg


def own_option(name: str) -> str:
    """The option that sets CP-SAT parameter `name` of `OWN_PARAMETERS`, as the caller writes it
    (``--option workers`` / ``--time-limit`` on the command line, ``workers`` / ``time_limit`` in Python)."""
    from ..errors import flag, option_field

    option = OWN_PARAMETERS[name]
    return flag(option) if option == "time_limit" else option_field(option)


def _repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 5.29; `label` is deprecated there
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _kind(field: Any) -> str:
    """What a value of the SatParameters field must be, for a message."""
    if field.type == field.TYPE_BOOL:
        return "true or false"
    if field.type == field.TYPE_ENUM:
        return "one of " + ", ".join(field.enum_type.values_by_name)
    if field.cpp_type in (field.CPPTYPE_FLOAT, field.CPPTYPE_DOUBLE):
        return "a number"
    bits = 32 if field.cpp_type in (field.CPPTYPE_INT32, field.CPPTYPE_UINT32) else 64
    return f"an integer ({bits} bits)"


def check_parameters(text: str) -> None:
    """`parse_parameters`, then CP-SAT's own check of the parameters (their ranges: e.g.
    num_workers in 0..10000, max_time_in_seconds >= 0), by solving an empty model with them (a
    millisecond): what it rejects is an `InputError` on ``--option parameters`` with its reason."""
    from ortools.sat.python import cp_model

    from ..errors import InputError

    msg = parse_parameters(text)
    if not msg.ListFields():
        return
    solver = cp_model.CpSolver()
    _merge(solver.parameters, msg)
    solver.parameters.log_search_progress = False
    solver.parameters.catch_sigint_signal = False
    if solver.solve(cp_model.CpModel()) == cp_model.MODEL_INVALID:
        raise InputError(f"CP-SAT rejects them: {solver.solution_info()}", field=parameters_field())


def _merge(params: Any, msg: Any) -> None:
    """Set the fields of `msg` in a solver's `params` (a protobuf message in older OR-Tools)."""
    if hasattr(params, "MergeFrom"):
        params.MergeFrom(msg)
    elif not params.merge_text_format(str(msg)):  # str(msg): its text format
        raise RuntimeError(f"CP-SAT does not read its own parameters {str(msg)!r}")


def set_parameters(params: Any, text: str) -> None:
    """Apply "name:value" pairs (spaces or commas between them, `parse_parameters`) to CP-SAT's
    parameters `params` (a solver's ``parameters``); bad ones are an `InputError`."""
    msg = parse_parameters(text)
    if msg.ListFields():
        _merge(params, msg)


def check_first(check: Callable[..., None]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator put over `exact_solver`'s: ``check(instance, **options)`` runs before anything
    else (the warm start's fast solvers can take seconds), so that an option with a bad value is
    an `InputError` at once. The solver keeps its signature and attributes (``exact_layer``...)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def solver(instance: Any, budget: int, **kw: Any) -> Any:
            check(instance, **kw)
            return fn(instance, budget, **kw)

        return solver

    return decorate


#: the largest sum of |coefficients| of one row handed to CP-SAT (`fit_row`). CP-SAT 9.15's presolve
#: (``ActivityBoundHelper::RemoveEnforcementThatMakesConstraintTrivial``, "linear + amo") sums a
#: row's Boolean coefficients in a 32-bit int: past 2^31 the sum wraps and an enforcement literal
#: is dropped as if the row always held (or-tools issue #5293). Presolve also *extracts* such
#: literals from unconditional rows (a Boolean whose 0 makes the row trivial), so a plain memory
#: row in bytes is exposed too: the chain's phase model at exact sizes (slots=0, sizes ~1e9 bytes)
#: proved 19 optimal where 16 fits. 2^30 keeps a factor 2 to spare (as `pipeline.interleave`).
ROW_LIMIT = 2**30

#: one row for CP-SAT: (integer coefficients, lower bound or None, upper bound or None)
Row = tuple[list[int], int | None, int | None]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def fit_row(coefs: Sequence[int], lo: int | None, hi: int | None, *, up: bool, limit: int = ROW_LIMIT
            ) -> tuple[list[Row], bool]:
    """``lo <= sum c_i x_i <= hi`` (x_i integer and >= 0, e.g. Booleans) as rows whose |coefficients|
    add up to at most `limit`: ``(rows, exact)``. Unchanged when they already do; divided by the
    coefficients' gcd g when that is enough (exact: an integer sum of multiples of g is <= hi iff
    it is <= g floor(hi / g)); else in a unit u (a multiple of g) with each bound its own row:
    with `up` a restriction (coefficients of the <= row rounded up, of the >= row down: every
    solution satisfies the original row), else a relaxation (the other way: every solution of the
    original row satisfies them). ``exact`` when the rows are equivalent to the original one."""
    coefs = [int(c) for c in coefs]
    need = sum(abs(c) for c in coefs)
    if need <= limit:
        return [(coefs, lo, hi)], True
    g = functools.reduce(math.gcd, coefs, 0) or 1
    room = max(1, limit - len(coefs))  # a coefficient rounded away from 0 grows by < 1 unit
    unit = g if need <= g * limit else g * _ceil_div(need, g * room)
    if all(c % unit == 0 for c in coefs):
        return [([c // unit for c in coefs], None if lo is None else _ceil_div(lo, unit),
                 None if hi is None else hi // unit)], True
    rows: list[Row] = []
    if hi is not None:  # sum floor(c/u) x <= sum c x / u <= hi / u; sum c x <= u sum ceil(c/u) x
        rows.append(([_ceil_div(c, unit) if up else c // unit for c in coefs], None, hi // unit))
    if lo is not None:
        rows.append(([c // unit if up else _ceil_div(c, unit) for c in coefs], _ceil_div(lo, unit), None))
    return rows, False


def fit_linear(model: Any, constraint: Any, *, up: bool, limit: int = ROW_LIMIT) -> bool:
    """`fit_row` on a one-sided linear `constraint` of the CP-SAT `model` (``expr <= hi`` or
    ``expr >= lo``, any enforcement), rewritten in place; True when it is still exact. Its
    variables must be >= 0 (`fit_row`): a `ValueError` otherwise, or for a two-sided row that must
    be rounded (a programming error), or for a constraint that is not linear (``model.add(True)``, a row
    with no variable, is a ``bool_or``: reading its ``linear`` field would replace it by an always-false row)."""
    if not constraint.proto.has_linear():
        raise ValueError("fit_linear: a linear constraint is needed (a constant row is a bool_or)")
    lin = constraint.proto.linear
    coefs = [int(c) for c in lin.coeffs]
    if sum(abs(c) for c in coefs) <= limit:
        return True
    low, high = (int(v) for v in lin.domain) if len(lin.domain) == 2 else (None, None)
    if low is None or high is None or (low > _INT64_MIN and high < _INT64_MAX):
        raise ValueError("fit_linear: a one-sided row (one interval, one infinite end) is needed")
    if any(int(v) < 0 or int(model.proto.variables[int(v)].domain[0]) < 0 for v in lin.vars):
        raise ValueError("fit_linear: every variable of the row must be >= 0")
    rows, exact = fit_row(coefs, None if low <= _INT64_MIN else low, None if high >= _INT64_MAX else high,
                          up=up, limit=limit)
    (new, lo, hi), = rows
    for i, c in enumerate(new):
        lin.coeffs[i] = c
    lin.domain[0] = _INT64_MIN if lo is None else lo
    lin.domain[1] = _INT64_MAX if hi is None else hi
    return exact


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def max_row_sum(model: Any) -> int:
    """The largest sum of |coefficients| over the linear constraints of the CP-SAT `model`."""
    return max((sum(abs(int(c)) for c in ct.linear.coeffs) for ct in model.proto.constraints
                if ct.has_linear()), default=0)


def linear_to_cpsat(model: LinearModel, *, feasibility_only: bool = False, hint: list[float] | None = None,
                    deadline: Deadline | None = None, up: bool = False) -> tuple[Any, list[Any], float, float]:
    """(CpModel, variables, offset, scale) for `model`; every variable must be integer-valued
    with integer bounds and row coefficients integers. The reported objective of a run is
    ``(ticks + offset) / scale``, i.e. pass the returned offset and scale to `run_cpsat`. The ticks
    may be rounded (`integer_costs` to `CPSAT_COST_DIGITS` significant digits): CP-SAT's objective and
    bound are then the rounded objective's, and `cost_slack` says how far that bound may lie above one
    of the real objective (0 when the ticks are exact).

    A row whose |coefficients| add up past `ROW_LIMIT` is stated by `fit_row` (CP-SAT 9.15's
    presolve overflow): exactly when its gcd allows, else rounded into a relaxation (every
    solution of `model` satisfies it; a proof of optimality or infeasibility carries over, a plan
    must be checked with ``model.violated``) or, with `up`, a restriction (every plan satisfies
    `model`; its optimum bounds nothing). `rounded_rows` counts the rows that are rounded. Such a
    row must have variables >= 0 (`ValueError` otherwise)."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    xs = [m.new_int_var(int(math.ceil(lo)), int(math.floor(hi)), "") for lo, hi in zip(model.lb, model.ub)]
    for n, (idx, coef, lo, hi) in enumerate(model.rows):
        if deadline is not None and n % 4096 == 0:
            deadline.check()
        for cs, a, b in _fitted(model, idx, coef, lo, hi, up=up):
            expr = sum(c * xs[i] for i, c in zip(idx, cs))
            if a is not None and a == b:
                m.add(expr == a)
            else:
                if a is not None:
                    m.add(expr >= a)
                if b is not None:
                    m.add(expr <= b)
    offset, scale = 0.0, 1.0
    if not feasibility_only and model.objective:
        keys = list(model.objective)
        ints, scale, _ = integer_costs([model.objective[i] for i in keys], digits=CPSAT_COST_DIGITS)  # see cost_slack
        m.minimize(sum(c * xs[i] for i, c in zip(keys, ints)))
        offset = model.offset * scale
    if hint is not None:
        for x, v in zip(xs, hint):
            m.add_hint(x, int(round(v)))
    return m, xs, offset, scale


def cost_slack(model: LinearModel) -> float:
    """The most by which `linear_to_cpsat`'s objective ticks misstate `model`'s objective at any point
    within the variables' bounds (time units, as the objective): sum_i |cost_i - ticks_i / scale| *
    max(|lb_i|, |ub_i|) over the costs that `integer_costs` rounded (for 0-1 variables each cost's error
    once; infinite when such a variable is unbounded); 0 when the ticks are exact. CP-SAT's bound minus
    it bounds the real objective, so a run's ``optimal`` is a proof only when that lowered bound is
    within the gap tolerance (`discretize.GAP_TOLERANCE`) of its plan's real objective."""
    if not model.objective:
        return 0.0
    keys = list(model.objective)
    costs = [model.objective[i] for i in keys]
    ints, scale, exact = integer_costs(costs, digits=CPSAT_COST_DIGITS)
    if exact:
        return 0.0
    return math.fsum(e * max(abs(model.lb[i]), abs(model.ub[i]))
                     for i, e in zip(keys, rounding_error(costs, ints, scale)) if e > 0)


def rounded_rows(model: LinearModel) -> int:
    """How many rows of `model` `linear_to_cpsat` must round (0: its CP-SAT model is exact)."""
    return sum(1 for idx, coef, lo, hi in model.rows
               if sum(abs(int(c)) for c in coef) > ROW_LIMIT and not _fit(idx, coef, lo, hi, up=False)[1])


def _fit(idx: list[int], coef: list[float], lo: float, hi: float, *, up: bool) -> tuple[list[Row], bool]:
    """`fit_row` of one `LinearModel` row (infinite bounds as None, finite ones made integer)."""
    a = None if lo == -math.inf else int(math.ceil(lo - 1e-9))
    b = None if hi == math.inf else int(math.floor(hi + 1e-9))
    return fit_row([int(c) for c in coef], a, b, up=up)


def _fitted(model: LinearModel, idx: list[int], coef: list[float], lo: float, hi: float, *, up: bool) -> list[Row]:
    """The CP-SAT rows of one `LinearModel` row (`_fit`); a rounded row needs variables >= 0."""
    rows, exact = _fit(idx, coef, lo, hi, up=up)
    if not exact and any(model.lb[i] < 0 for i in idx):
        raise ValueError("linear_to_cpsat: a row past ROW_LIMIT with a variable that may be negative")
    return rows


__all__ = ["ROW_LIMIT", "BackendRun", "FEASIBLE", "INFEASIBLE", "OPTIMAL", "TIMEOUT", "check_first",
           "check_parameters", "cost_slack", "fit_linear", "fit_row", "linear_to_cpsat", "max_row_sum",
           "parse_parameters", "rounded_rows", "run_cpsat", "set_parameters"]
