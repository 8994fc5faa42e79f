"""Exact CP-SAT model for join networks: the chain *phase model* extended to k branches.

**Scope (the join phase model).** For a backward order sigma of the branches, the schedule is

- the forward phase: branch sigma(k), then sigma(k-1), ..., sigma(1); in the phase of branch b
  each stage j = 0..L_b-1 runs at most one forward (F_all, F_ck or F_n), in increasing order;
- the loss;
- for p = 1..k, the backward of b = sigma(p): phases kk = L_b-1, ..., 0, phase kk running at
  most one forward per stage j <= kk (only F_all at j = kk), in increasing order, then B(b, kk).

Every join-persistent schedule (the DP's model, `solvers.join.dp`) has this form, so the
optimum of this model is <= the DP's; unlike the DP it also contains non-persistent schedules
(a stage recomputed in several phases in any pattern). Schedules outside it interleave the
backward phases of branches, or run a stage twice inside one phase; `solvers.join.astar`
covers those (tiny instances). The model is solved for every order sigma (k! models, generated
one at a time, until the time limit) and the best is kept; ``optimal`` means every order was solved
to optimality, or the bound (``Join.total_time`` for an order not run) reaches the makespan.

**Variables and constraints.** One Boolean per (slot, kind): FA, FC, FN. The state (standalone
a_j^b, tape abar_j^b) is a linear expression of the Booleans of the slots before (F_ck / F_n
at slot j-1 add a_j, F_all at j-1 adds abar_j, F_n at j removes a_j, B(b, j) and the loss reset
them to 0), kept in [0, 1]. Rows, with the simulator's rules: at most one kind per slot; a forward
at stage j needs a_j (standalone or in its tape); F_ck/F_n must not re-create a resident
standalone a_{j+1}, F_all a resident tape; F_n only when it frees a standalone a_j (an F_n that
frees nothing is an F_ck); the loss needs every a_{L_b}; B(b, kk) needs abar_{kk+1} and a_kk;
memory of every slot, loss and B: the state of all branches (delta's included) + output +
overhead <= M. Objective: sum (u_fa FA + u_fn (FC + FN)) + sum u_b + loss time (per-mode forward
times; u_f (FA + FC + FN) with one forward time), in integer ticks (`discretize.integer_costs`: exactly
by 10^k when that makes the times whole, times of 1e-12 units included; else to `CPSAT_COST_DIGITS`
significant digits, CP-SAT's bound then lowered by the total rounding error and an order ``optimal``
only within `GAP_TOLERANCE`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator
from itertools import permutations
from typing import Any, NamedTuple

from ..discretize import CPSAT_COST_DIGITS, GAP_TOLERANCE, effective_slots, integer_costs, rounding_error, scope_text
from ..errors import InputError, option_field
from ..exact.cpsat_runner import check_first, fit_linear, run_cpsat
from ..exact.exact_rows import drop_broken, exact_rows_cpsat
from ..exact.interrupt import interrupted
from ..exact.layer import exact_solver, retry_rounded_infeasible, same_or_less
from ..exact.linear import LinearModel
from ..exact.milp_runner import BackendRun
from ..exact.options import CPSAT_MEMORY, Deadline, DeadlineExceeded, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult, gap_closed
from .instance import Join
from .schedule import LOSS_OP, JoinSchedule, JOp
from .simulator import simulate

#: the join problem's fast solvers: they seed and referee the exact join solvers
FAST = ("dp", "equal", "proportional", "sequential", "store-all")

Lin = dict  # variable index (or -1 for the constant) -> coefficient


def _add(a: Lin, b: Lin, coef: int = 1) -> Lin:
    out = dict(a)
    for v, c in b.items():
        out[v] = out.get(v, 0) + coef * c
    return out


def _const(c: int) -> Lin:
    return {-1: c} if c else {}


class JoinPhaseModel:
    """The model for one backward order; `slots` lists (branch, phase, stage, {kind: var})."""

    def __init__(self, join: Join, M: int, order: list[int], deadline: Deadline | None = None, *,
                 round_up: bool = False, linear: bool = False):
        from ortools.sat.python import cp_model

        self.join, self.M, self.order = join, int(M), list(order)
        # rows within ROW_LIMIT (CP-SAT 9.15's presolve overflow, `cpsat_runner.fit_linear`): sizes in
        # bytes rounded down (a relaxation, the default) or with `round_up` up (every plan fits the
        # budget) when a row's gcd is not enough; `rows_exact` when no row was rounded
        self.round_up, self.rows_exact = round_up, True
        self.deadline = deadline
        # `linear`: the same rows stated as a backend-neutral `LinearModel` (`lm`, exact sizes, for the MILP
        # backends, `solvers.join.milp`) instead of a CP-SAT model (`cp` is then None); `vars` holds the
        # CP-SAT variables, or the `LinearModel` indices (the same numbering: variable i is vars[i])
        self.lm: LinearModel | None = LinearModel() if linear else None
        self.cp: Any = None if linear else cp_model.CpModel()
        self.vars: list[Any] = []
        self.events: list[tuple] = []  # ("F", b, j, {kind: var index}) | ("Loss",) | ("B", b, kk)
        self.objective: Lin = {}
        self.infeasible = ""
        self._build()

    # -------------------------------------------------------------- helpers
    def _bool(self, name: str) -> int:
        if self.lm is not None:
            self.vars.append(self.lm.var(0, 1, True, name))
        else:
            self.vars.append(self.cp.new_bool_var(name))
        return len(self.vars) - 1

    def _at_most_one(self, idx: list[int]) -> None:
        """At most one of the Booleans `idx` is 1."""
        if self.lm is not None:
            self.lm.add(list(idx), [1.0] * len(idx), -math.inf, 1)
        else:
            self.cp.add_at_most_one(self.vars[i] for i in idx)

    def _expr(self, lin: Lin) -> tuple[Any, int]:
        terms = [(self.vars[v], int(c)) for v, c in lin.items() if v >= 0 and c]
        return sum(c * x for x, c in terms), int(lin.get(-1, 0))

    def _linear_row(self, lin: Lin, lo: float, hi: float, name: str) -> None:
        """``lo <= lin <= hi`` in `lm` (exact integer coefficients; a constant row only checked)."""
        assert self.lm is not None
        terms = {v: int(c) for v, c in lin.items() if v >= 0 and c}
        c = int(lin.get(-1, 0))
        if not terms:
            if not lo <= c <= hi:
                self.infeasible = self.infeasible or name
            return
        self.lm.add(list(terms), [float(t) for t in terms.values()], lo - c, hi - c)

    def _le(self, lin: Lin, hi: int, name: str) -> None:
        if self.lm is not None:
            self._linear_row(lin, -math.inf, hi, name)
            return
        expr, c = self._expr(lin)
        if isinstance(expr, int):  # constant row
            if c > hi:
                self.infeasible = self.infeasible or name
            return
        self._fit(self.cp.add(expr <= hi - c))

    def _fit(self, constraint: Any) -> None:
        if not fit_linear(self.cp, constraint, up=self.round_up):
            self.rows_exact = False

    def _ge(self, lin: Lin, lo: int, name: str) -> None:
        if self.lm is not None:
            self._linear_row(lin, lo, math.inf, name)
            return
        expr, c = self._expr(lin)
        if isinstance(expr, int):
            if c < lo:
                self.infeasible = self.infeasible or name
            return
        self._fit(self.cp.add(expr >= lo - c))

    # -------------------------------------------------------------- building
    def _build(self) -> None:
        join, M = self.join, self.M
        br = join.branches
        k = join.k
        x = [[int(v) for v in c.x] for c in br]
        xb = [[int(v) for v in c.xbar] for c in br]
        ofa = [[int(v) for v in c.o_fa] for c in br]  # F_all's forward overhead
        ofn = [[int(v) for v in c.o_fn] for c in br]  # F_ck's and F_n's
        ob = [[int(v) for v in c.o_b] for c in br]
        Ls = [c.length for c in br]
        A = [[_const(1)] + [{} for _ in range(Ls[b])] for b in range(k)]  # standalone a_j^b, j = 0..L
        T: list[list[Lin]] = [[{} for _ in range(Ls[b] + 1)] for b in range(k)]  # tape abar_j^b, j = 1..L
        grad = [0] * k
        const_time = join.loss_time + sum(float(c.u_b[: c.length].sum()) for c in br)
        self.objective = {-1: const_time}

        def memory() -> Lin:
            tot: Lin = _const(sum(grad))
            for b in range(k):
                for j in range(Ls[b] + 1):
                    if A[b][j]:
                        tot = _add(tot, A[b][j], x[b][j])
                    if j >= 1 and T[b][j]:
                        tot = _add(tot, T[b][j], xb[b][j])
            return tot

        def slot(b: int, j: int, kinds: tuple[str, ...], phase: str) -> None:
            if self.deadline is not None and len(self.vars) % 512 < 3:
                self.deadline.check()
            v = {kind: self._bool(f"{kind}_{b}_{phase}_{j}") for kind in kinds}
            run: Lin = {i: 1 for i in v.values()}
            self._at_most_one(list(v.values()))
            self._le(_add(run, _add(A[b][j], T[b][j]), -1), 0, f"F({b},{j}) needs a_{j}")
            fcn: Lin = {v[kd]: 1 for kd in ("FC", "FN") if kd in v}
            if fcn:
                self._le(_add(fcn, A[b][j + 1]), 1, f"a_{j + 1} of {b} not twice")
            if "FA" in v:
                self._le(_add({v["FA"]: 1}, T[b][j + 1]), 1, f"abar_{j + 1} of {b} not twice")
            if "FN" in v:
                self._le(_add({v["FN"]: 1}, A[b][j], -1), 0, f"F_n({b},{j}) frees a_{j}")
            mem = memory()
            if "FA" in v:
                mem = _add(mem, {v["FA"]: xb[b][j + 1]})
            mem = _add(mem, fcn, x[b][j + 1])
            if "FA" in v:  # per-mode forward overheads: o_fa for F_all, o_fn for F_ck / F_n
                mem = _add(mem, {v["FA"]: ofa[b][j]})
            mem = _add(mem, fcn, ofn[b][j])
            self._le(mem, M, f"memory F({b},{j}) {phase}")
            A[b][j + 1] = _add(A[b][j + 1], fcn)
            if "FA" in v:
                T[b][j + 1] = _add(T[b][j + 1], {v["FA"]: 1})
            if "FN" in v:
                A[b][j] = _add(A[b][j], {v["FN"]: 1}, -1)
            for kind, i in v.items():  # per-mode forward times: u_fa for F_all, u_fn for F_ck / F_n
                self.objective[i] = float((br[b].u_fa if kind == "FA" else br[b].u_fn)[j])
            self.events.append(("F", b, j, v))

        if sum(c.x[0] for c in br) > M:
            self.infeasible = "the inputs exceed the budget"
        for b in reversed(self.order):
            for j in range(Ls[b]):
                slot(b, j, ("FA", "FC") if j == 0 else ("FA", "FC", "FN"), "fwd")
        for b in range(k):
            self._ge(_add(A[b][Ls[b]], T[b][Ls[b]]), 1, f"Loss needs a_L of branch {b}")
        self._le(_add(memory(), _const(sum(x[b][Ls[b]] for b in range(k)) + join.loss_overhead)), M, "memory Loss")
        for b in range(k):
            A[b][Ls[b]] = {}
            grad[b] = x[b][Ls[b]]
        self.events.append(("Loss",))
        for b in self.order:
            for kk in range(Ls[b] - 1, -1, -1):
                for j in range(kk + 1):
                    kinds = ("FA",) if j == kk else (("FA", "FC") if j == 0 else ("FA", "FC", "FN"))
                    slot(b, j, kinds, f"p{kk}")
                self._ge(T[b][kk + 1], 1, f"B({b},{kk}) needs abar_{kk + 1}")
                if kk >= 1:
                    self._ge(_add(A[b][kk], T[b][kk]), 1, f"B({b},{kk}) needs a_{kk}")
                self._le(_add(memory(), _const(x[b][kk] + ob[b][kk])), M, f"memory B({b},{kk})")
                T[b][kk + 1] = {}
                A[b][kk] = {}  # B frees the standalone a_kk (a_0 too)
                grad[b] = x[b][kk]
                self.events.append(("B", b, kk))
        terms = {v: c for v, c in self.objective.items() if v >= 0}
        self.const = float(self.objective.get(-1, 0.0))
        if self.lm is not None:  # the MILP backends take the times as they are (`milp_runner.objective_scale`)
            self.lm.objective, self.lm.offset = dict(terms), self.const
            self.scale, self.slack = 1.0, 0.0
            return
        # integer ticks, `scale` per time unit (CP-SAT's own float objective has an absolute precision:
        # it took times of 1e-12 units as 0); `slack` bounds the rounding error of any plan's cost
        ints, self.scale, exact = integer_costs(list(terms.values()), digits=CPSAT_COST_DIGITS)
        self.slack = 0.0 if exact else math.fsum(rounding_error(list(terms.values()), ints, self.scale))
        self.cp.minimize(sum(t * self.vars[v] for v, t in zip(terms, ints)))

    def violated(self, values: list[float], *, deadline: Deadline | None = None) -> list[str]:
        """What the plan of the 0-1 point `values` breaks at this model's exact sizes and budget (`join`,
        `M`, in its units: the rows CP-SAT got may be rounded, `rows_exact`): the join simulator's
        violation, or [] when it fits (`exact.exact_rows.ExactRows`; linear in the plan, `deadline` unused)."""
        violation = simulate(self.join, self.decode([int(round(v)) for v in values]), self.M).violation
        return [] if violation is None else [str(violation)]

    def value(self, values: list[float]) -> float:
        """The real objective (time units) of a solution `values` (0/1 per variable)."""
        return self.const + math.fsum(c * values[v] for v, c in self.objective.items() if v >= 0)

    def encode(self, schedule: JoinSchedule) -> list[int] | None:
        """0-1 values of a schedule of this model's form (None when it is not of that form)."""
        values = [0] * len(self.vars)
        names = {"F_all": "FA", "F_ck": "FC", "F_n": "FN"}
        e = 0
        for op in schedule.ops:
            if op.kind in names:
                while (e < len(self.events) and self.events[e][0] == "F"
                       and self.events[e][1:3] != (op.branch, op.stage)):
                    e += 1
                if e >= len(self.events) or self.events[e][0] != "F":
                    return None
                var = self.events[e][3].get(names[op.kind])
                if var is None:
                    return None
                values[var] = 1
                e += 1
            else:
                while e < len(self.events) and self.events[e][0] == "F":
                    e += 1
                want = ("Loss",) if op.kind == "Loss" else ("B", op.branch, op.stage)
                if e >= len(self.events) or self.events[e] != want:
                    return None
                e += 1
        return values

    def decode(self, values: list[int]) -> JoinSchedule:
        """The join schedule of a solution `values` (0/1 per variable), in event order."""
        ops: list[JOp] = []
        names = {"FA": "F_all", "FC": "F_ck", "FN": "F_n"}
        for ev in self.events:
            if ev[0] == "F":
                _, b, j, v = ev
                for kind, i in v.items():
                    if values[i]:
                        ops.append(JOp(names[kind], b, j))
            elif ev[0] == "Loss":
                ops.append(LOSS_OP)
            else:
                ops.append(JOp("B", ev[1], ev[2]))
        return JoinSchedule(ops, self.join.lengths)


def checked_orders(join: Join, orders: Any = None) -> list[list[int]] | None:
    """The ``orders`` option checked, without building the k! orders: None for None or "all" (every
    order), else the non-empty list of orders it names, each a permutation of the branches 0..k-1
    (the first back-propagated first), none twice, as lists of Python ints; anything else is an
    `InputError` on ``--option orders``. Array-likes are read with ``.tolist()`` (a numpy array
    ``[[1, 0]]``, an order ``np.array([1, 0])``) and a branch is any `numbers.Integral` but a bool
    (``np.int64(1)``, as the integer options take them). Linear in the length of the list."""
    k = join.k
    if orders is None or (isinstance(orders, str) and orders == "all"):  # (an array's == is elementwise)
        return None
    want = (f'must be "all" or a list of backward orders, each a permutation of the branches 0..{k - 1} '
            f"(e.g. [{list(reversed(range(k)))}])")
    listed = _plain_list(orders)
    if listed is None or not listed:
        raise InputError(f"{want}, got {orders!r}", field=option_field("orders"))
    out: list[list[int]] = []
    seen: set[tuple[int, ...]] = set()
    for given in listed:
        order = _plain_list(given)
        if (order is None or any(isinstance(b, bool) or not isinstance(b, numbers.Integral) for b in order)
                or sorted(int(b) for b in order) != list(range(k))):
            raise InputError(f"{want}, got {given!r} in {orders!r}", field=option_field("orders"))
        plain = [int(b) for b in order]
        if tuple(plain) in seen:
            raise InputError(f"lists the order {plain} twice", field=option_field("orders"))
        seen.add(tuple(plain))
        out.append(plain)
    return out


def _plain_list(value: Any) -> list[Any] | None:
    """`value` as a list when it is a list, a tuple or an array-like with ``.tolist()`` (numpy) that gives
    one; else None (a string, a number, a 0-d array)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str) or not callable(getattr(value, "tolist", None)):
        return None
    try:
        plain = value.tolist()
    except (TypeError, ValueError):
        return None
    return plain if isinstance(plain, list) else None


def order_count(join: Join, orders: Any = None) -> int:
    """How many backward orders the (checked) ``orders`` option names: k! for every order."""
    listed = checked_orders(join, orders)
    return math.factorial(join.k) if listed is None else len(listed)


def iter_orders(join: Join, orders: Any = None, first: list[int] | None = None) -> Iterator[list[int]]:
    """The backward orders the ``orders`` option names (`checked_orders`), generated one at a time
    (k! of them by default: never held in memory), `first` first when it is one of them."""
    listed = checked_orders(join, orders)
    source: Iterable[Any] = permutations(range(join.k)) if listed is None else listed
    head = tuple(first) if first else None
    if head is not None and (sorted(head) == list(range(join.k)) if listed is None
                             else list(head) in listed):
        yield list(head)
    for order in source:
        if tuple(order) != head:
            yield list(order)


def _add_hint(model: JoinPhaseModel, hint: Any) -> None:
    """The seed's schedule `hint` as `model`'s CP-SAT hint when the model can express it (the seed fits
    the real budget, not necessarily rounded rows: its hint proves nothing). Once per model: CP-SAT
    rejects a hint that names a variable twice."""
    if hint is not None:
        values = model.encode(hint)
        if values is not None:
            for var, val in zip(model.vars, values):
                model.cp.add_hint(var, bool(val))


def _run_order(model: JoinPhaseModel, hint: Any, deadline: Deadline, options: ExactOptions) -> BackendRun:
    """CP-SAT on one order's model, the seed's schedule hinted (`_add_hint`); `_run_model`."""
    _add_hint(model, hint)
    return _run_model(model, model.cp, model.vars, deadline, options)


def _run_model(model: JoinPhaseModel, cp: Any, xs: list[Any], deadline: Deadline, options: ExactOptions
               ) -> BackendRun:
    """CP-SAT on `cp` (variables `xs`): `model`'s CP-SAT model, or one with the same variables and
    objective (`model` with no-good rows, or rounded up). Objective and bound in time units; with rounded
    ticks (``model.slack`` > 0) the bound holds for the real times and ``optimal`` needs the bound within
    `GAP_TOLERANCE` of the plan's real objective."""
    run = run_cpsat(cp, deadline, options, variables=xs, offset=model.const * model.scale, scale=model.scale)
    if model.slack > 0:  # rounded ticks: the bound lowered by the rounding error, the plan's real objective
        if run.bound is not None:
            run.bound -= model.slack
        if run.values is not None and run.objective is not None:
            run.objective = model.value(run.values)
            if run.status == OPTIMAL and not gap_closed(run.objective, run.bound, GAP_TOLERANCE):
                run.status = FEASIBLE
    return run


def check_options(join: Join, *, orders: Any = None, **_: Any) -> None:
    """The option `orders` (`checked_orders`: the k! orders are not built), before the warm start."""
    checked_orders(join, orders)


@refuses("the join's cpsat", "memory_gb", why=CPSAT_MEMORY)
@check_first(check_options)
@exact_solver("join", "cpsat", FAST, workers=2, least=lambda join: join.total_time())
def solve_cpsat(join: Join, budget: int, *, options: ExactOptions, deadline: Deadline,
                seed: SolveResult | None = None, orders: list[list[int]] | str | None = None, **_: Any
                ) -> SolveResult:
    """Best schedule of the join phase model (module docstring) over all backward orders, by
    CP-SAT. ``options.slots`` = N > 0 rounds sizes up to N slots (exact sizes when the budget is
    at most N units); the time limit (s, default 60, wall clock) is shared by the k! orders, the
    loop stopping at it (`_solve_cpsat`: the orders not run are counted, not listed). The
    seed (the best fast schedule: the join DP's, usually) is the hint of the model of its
    backward order, which is solved first. `orders`: the backward orders to solve (`iter_orders`;
    default all k!). When the rounded sizes make every order infeasible the model is solved again
    with exact sizes in the time left (`exact.layer.retry_rounded_infeasible`, as the chain's
    exact models), so that ``infeasible`` is about the real budget; the scope then says so, and
    with no time left for that retry the answer is ``timeout``, not ``infeasible``."""
    return solve_orders(join, budget, options=options, deadline=deadline, seed=seed, orders=orders, engine=CPSAT)


class OrderEngine(NamedTuple):
    """How one backward order's `JoinPhaseModel` is solved: `solver` (the registry name the answer
    carries), `label` (the scope's last words: the backend), `linear` (the model is built as a
    `LinearModel`, `JoinPhaseModel.lm`, else as a CP-SAT model) and ``run(model, hint, share, options)``
    (the seed's schedule `hint`, or None; the order's share of the time limit): a `BackendRun` whose
    plan, when it has one, fits `model` at exact sizes (`JoinPhaseModel.violated`), objective and
    bound in time units."""

    solver: str
    label: str
    linear: bool
    run: Callable[[Any, Any, Deadline, ExactOptions], BackendRun]


def solve_orders(join: Join, budget: int, *, options: ExactOptions, deadline: Deadline,
                 seed: SolveResult | None = None, orders: list[list[int]] | str | None = None,
                 engine: OrderEngine) -> SolveResult:
    """`solve_cpsat`'s answer with `engine` solving each order (CP-SAT, or the MILP backends for join
    ``milp``): `_solve_orders`, again with exact sizes when the sizes rounded up to slots make every
    order infeasible (`exact.layer.retry_rounded_infeasible`), the scope then saying so."""
    n = effective_slots(int(budget), options.slots)
    res = retry_rounded_infeasible(_solve_orders, join, int(budget), options=options, deadline=deadline,
                                   seed=seed, orders=orders, engine=engine)
    if "retried_exact_sizes" in res.details:
        res.scope = phase_scope(join, orders, f"exact sizes (sizes rounded up to {n} slots left no schedule)",
                                engine.label)
    return res


def phase_scope(join: Join, orders: Any, sizes: str, backend: str = "CP-SAT") -> str:
    """`SolveResult.scope` of the join phase model over the backward orders the ``orders`` option names
    (`orders_text`); `sizes` says how sizes were counted (`discretize.scope_text`); `backend` what solved it
    ("CP-SAT", "MILP (scip)")."""
    return ("join phase model (forward phase, loss, branches back-propagated one after another; per phase at "
            f"most one forward per stage; best over {orders_text(join, orders)}), {sizes}; {backend}")


#: At most this many listed orders are written out in a scope (`orders_text`); more are counted.
ORDERS_SHOWN = 4


def orders_text(join: Join, orders: Any = None) -> str:
    """The backward orders a run covers, for its scope and messages: "all 6 backward orders", or, for an
    ``orders`` option that lists some (the model restricted to them: its optimum, bound and infeasibility are
    of those orders only), "the 1 backward order listed ([[1, 0]])" (the list when at most `ORDERS_SHOWN`)."""
    listed = checked_orders(join, orders)
    if listed is None:
        return f"all {math.factorial(join.k)} backward orders"
    n = len(listed)
    shown = f" ({listed})" if n <= ORDERS_SHOWN else ""
    return f"the {n} backward order{'s' if n > 1 else ''} listed{shown}"


def _no_schedule_why(deadline: Deadline, per_order: list[dict[str, Any]]) -> str:
    """Why no order gave a schedule nor was proven infeasible: the time limit only when it came (an
    order may spend its share of it, `_solve_order`, and the orders after it need less)."""
    if deadline.expired():
        return "no schedule before the time limit"
    if interrupted():
        return "no schedule"
    open_orders = sum(1 for entry in per_order if entry["status"] != "infeasible")
    return (f"no schedule, and {open_orders} of the backward orders neither gave one nor were proven infeasible "
            "in their share of the time limit")


class _OrderRun(NamedTuple):
    """One backward order solved: its `details.orders` entry, its best schedule (None when none was
    found), a lower bound on its schedules (inf when infeasible) and whether its backend proved it."""

    entry: dict[str, Any]
    schedule: JoinSchedule | None
    bound: float
    proven: bool
    rows_exact: bool


def _solve_order(join: Join, work: Join, M: int, budget: int, order: list[int], deadline: Deadline,
                 remaining: int, hint: Any, options: ExactOptions, engine: OrderEngine) -> _OrderRun:
    """The model of `order` (sizes of `work`, budget `M` in its units) by `engine`, given the time left
    over the `remaining` orders (this one included; at least 0.01 s); its plan replayed on `join`
    at `budget` bytes. Raises `DeadlineExceeded` when the limit comes while a model is built."""
    floor = work.total_time()
    model = JoinPhaseModel(work, M, order, deadline, linear=engine.linear)
    if model.infeasible:
        return _OrderRun({"order": order, "status": "infeasible"}, None, math.inf, True, True)
    left = deadline.left()
    share = Deadline(None if left is None else max(0.01, left / remaining))
    run = engine.run(model, hint, share, options)
    if run.status == INFEASIBLE:
        return _OrderRun({"order": order, "status": "infeasible"}, None, math.inf, True, model.rows_exact)
    bound = run.bound if run.bound is not None else floor
    proven = run.status == OPTIMAL
    if run.values is None or run.objective is None or run.status not in (OPTIMAL, FEASIBLE):
        return _OrderRun({"order": order, "status": "timeout"}, None, bound, False, model.rows_exact)
    schedule = model.decode([int(round(v)) for v in run.values])
    sim = simulate(join, schedule, budget).raise_if_invalid()
    claimed = float(run.objective)
    if abs(sim.makespan - claimed) > 1e-6 * max(1.0, abs(claimed)):
        raise RuntimeError(f"join phase model claims {claimed} but the simulator charges {sim.makespan}")
    entry = {"order": order, "status": run.status, "makespan": sim.makespan}
    return _OrderRun(entry, schedule, bound, proven, model.rows_exact)


def _cpsat_run(model: JoinPhaseModel, hint: Any, deadline: Deadline, options: ExactOptions) -> BackendRun:
    """CP-SAT on one order's model (`_run_order`); when its memory rows were rounded (`rows_exact` false),
    the plans that break the exact budget excluded (`_exact_rows`)."""
    run = _run_order(model, hint, deadline, options)
    return run if model.rows_exact else _exact_rows(model, run, hint, deadline, options)


#: join ``cpsat``'s engine: each order's model stated in CP-SAT
CPSAT = OrderEngine("cpsat", "CP-SAT", False, _cpsat_run)


def _exact_rows(model: JoinPhaseModel, run: BackendRun, hint: Any, deadline: Deadline, options: ExactOptions
                ) -> BackendRun:
    """The answer of one order whose memory rows were rounded down for CP-SAT (`run`: the relaxation's),
    as the chain's (`exact.exact_rows.exact_rows_cpsat`): each plan that overflows the exact budget
    (`JoinPhaseModel.violated`) excluded by a no-good row and the relaxation solved again, up to 32
    times; then the rows rounded up (every plan fits, no proof); when that has no plan, the exclusions
    again until a plan fits, the relaxation is proven ``infeasible`` (a proof for the exact budget), or
    `deadline`. Its plan fits the exact budget, or it has none (``timeout``, the relaxation's bound).
    After a Ctrl-C (`interrupted`) no further run: the relaxation's plan if it fits, else none."""
    if interrupted():
        return drop_broken(run, model)

    def solve(cp: Any, xs: list[Any], *, relaxed: bool) -> BackendRun:
        if interrupted():  # no plan, no proof: the loop stops (`exclude_broken`)
            return BackendRun(TIMEOUT, backend_status="interrupted")
        return _run_model(model, cp, xs, deadline, options)

    def restriction() -> tuple[Any, list[Any]]:
        up = JoinPhaseModel(model.join, model.M, model.order, model.deadline, round_up=True)
        _add_hint(up, hint)
        return up.cp, up.vars

    return exact_rows_cpsat(run, model, model.cp, model.vars, solve, restriction, deadline)


def _reaches(value: float, bound: float) -> bool:
    """Whether makespan `value` is at most the lower bound `bound`: `exact.layer.same_or_less`
    (relative tolerance `REL_TOL` of the larger, no absolute floor: makespans of 1e-12 units
    are compared as finely as makespans of seconds, and 0 reaches only 0)."""
    return same_or_less(value, bound)


def _least_seed(join: Join, budget: int, seed: SolveResult | None, total: int, slots: int,
                solver: str = "cpsat") -> SolveResult | None:
    """The seed's schedule as the ``optimal`` answer when it runs every operation once (makespan
    `Join.total_time`, the least of any schedule: no order can improve it; e.g. store-all fits),
    with none of the `total` orders solved; None otherwise."""
    if seed is None or seed.schedule is None or seed.objective is None:
        return None
    floor = join.total_time()
    if not _reaches(float(seed.objective), floor):
        return None
    sim = simulate(join, seed.schedule, budget).raise_if_invalid()
    if not _reaches(sim.makespan, floor):
        return None
    details = {"slots": slots, "orders": [], "orders_not_run": total}
    return SolveResult(problem="join", solver=solver, budget=budget, status=OPTIMAL, objective=sim.makespan,
                       peak_memory=sim.peak_memory, schedule=seed.schedule, lower_bound=floor, details=details,
                       scope=f"{seed.solver}'s schedule; optimal among all schedules: the makespan is the least "
                             "possible (every operation once)",
                       message=f"{seed.solver}'s schedule runs every operation once: none of the {total} backward "
                               "orders solved")


def _solve_cpsat(join: Join, budget: int, *, options: ExactOptions, deadline: Deadline,
                 seed: SolveResult | None = None, orders: list[list[int]] | str | None = None, **_: Any
                 ) -> SolveResult:
    """`solve_cpsat` at ``options.slots`` (0: exact sizes), without the exact-size retry (`_solve_orders`
    with CP-SAT)."""
    return _solve_orders(join, budget, options=options, deadline=deadline, seed=seed, orders=orders, engine=CPSAT)


def _solve_orders(join: Join, budget: int, *, options: ExactOptions, deadline: Deadline,
                  seed: SolveResult | None = None, orders: list[list[int]] | str | None = None,
                  engine: OrderEngine = CPSAT, **_: Any) -> SolveResult:
    """`solve_orders` at ``options.slots`` (0: exact sizes), without the exact-size retry. The orders
    are generated one at a time (`iter_orders`), the seed's first; the loop stops at the deadline,
    or when a schedule reaches `Join.total_time` (nothing is faster); ``details.orders`` lists the
    orders that ran, ``details.orders_not_run`` counts the others. The answer is ``optimal`` only
    when every order was proven, or when the bound (the orders' bounds, `Join.total_time` for
    the orders not proven or not run) reaches the makespan."""
    budget = int(budget)
    slots = effective_slots(budget, options.slots)
    total = order_count(join, orders)
    least = _least_seed(join, budget, seed, total, slots, engine.solver)
    if least is not None:
        return least
    work = join.discretised(budget / slots) if slots else join
    M = slots if slots else budget
    scope = phase_scope(join, orders, scope_text(slots), engine.label)
    hint: Any = seed.schedule if seed is not None else None
    first = list(seed.details.get("order", [])) if seed is not None else []
    floor = work.total_time()
    best: tuple[float, Any] | None = None
    bound = math.inf
    proven = True
    per_order: list[dict[str, Any]] = []
    for n, order in enumerate(iter_orders(join, orders, first)):
        left = deadline.left()
        if left is not None and left <= 0:
            break
        try:
            run = _solve_order(join, work, M, budget, order, deadline, total - n, hint, options, engine)
        except DeadlineExceeded:
            per_order.append({"order": order, "status": "not built"})
            proven, bound = False, min(bound, floor)
            break
        per_order.append(run.entry)
        proven, bound = proven and run.proven, min(bound, run.bound)
        if not run.rows_exact and "rows rounded" not in scope:
            scope += ", memory rows rounded for CP-SAT (a plan is checked at exact sizes)"
        if run.schedule is not None and (best is None or run.entry["makespan"] < best[0]):
            best = (run.entry["makespan"], run.schedule)
        if best is not None and _reaches(best[0], floor):
            break  # every operation once: no order can do better
        if interrupted():  # a Ctrl-C (answered by the exact layer): the orders left are not run
            break
    not_run = total - len(per_order)
    message = ""
    if not_run:
        proven, bound = False, min(bound, floor)
        why = ("a schedule runs every operation once" if best is not None and _reaches(best[0], floor)
               else "interrupted" if interrupted() else "the time limit came")
        message = f"{len(per_order)} of {total} backward orders run ({why})"
    details: dict[str, Any] = {"slots": slots, "orders": per_order, "orders_not_run": not_run}
    common: dict[str, Any] = {"problem": "join", "solver": engine.solver, "budget": budget, "scope": scope,
                              "details": details}
    if best is None:
        if proven:
            within = "" if checked_orders(join, orders) is None else f" in {orders_text(join, orders)}"
            return SolveResult(status=INFEASIBLE, message=f"no schedule of the join phase model{within} fits the "
                               "budget", **common)
        why = "; ".join(m for m in (_no_schedule_why(deadline, per_order), message) if m)
        return SolveResult(status=TIMEOUT, lower_bound=bound if math.isfinite(bound) else None,
                           message=why, **common)
    value, schedule = best
    sim = simulate(join, schedule)
    optimal = proven or _reaches(value, bound)  # every order proven, or the bound proves the makespan
    return SolveResult(status=OPTIMAL if optimal else FEASIBLE, objective=value, peak_memory=sim.peak_memory,
                       schedule=schedule, lower_bound=value if optimal else min(bound, value), message=message,
                       **common)
