"""The phase model: an exact 0-1 linear formulation of chain rematerialization.

Shared by the MILP (`solvers.chain.milp`) and CP-SAT (`solvers.chain.cpsat`) solvers. It is
built once, backend-neutrally, as rows ``lo <= sum coef * var <= hi`` over binary variables.

Notation of docs/chain.md (stages 0-based, the loss is stage L, sizes ``x``, ``xbar``, ``o_f``,
``o_b``, times ``u_fa``, ``u_fn``, ``u_b``); the memory rules are the simulator's table.

Phases. The schedule is cut at its backward ops: phases k = L, L-1, ..., 0 run in this
order; phase L ends with the Loss, phase k < L ends with B(k). Inside phase k forward ops run
in increasing stage order, each stage at most once, stages 0..min(k, L-1); in phase k < L
stage k may only run F_all (F_ck(k)/F_n(k) would produce an a_{k+1} nothing can use or free).
**Scope**: schedules of this form. Every persistent (rotor) schedule has it, so the optimum
of this model is <= the rotor DP's; schedules outside it repeat a stage inside one phase.

Variables (binary), for phase k and stage j of that phase:

- ``FA[k,j]``, ``FC[k,j]``, ``FN[k,j]``: F_all(j), F_ck(j), F_n(j) runs in phase k;
  ``R[k,j] = FA + FC + FN <= 1``. F_n(0) never runs (a_0 cannot be rebuilt).
- ``SA[k,j]`` (1 <= j <= k < L): standalone a_j resident when phase k starts (a_0 always is;
  when phase L starts only a_0 is).
- ``ST[k,j]`` (1 <= j <= k+1, k < L): tape abar_j resident when phase k starts.

Derived expressions: a_j standalone before slot j of phase k
``Ain[k,j] = SA[k,j] + FC[k,j-1] + FN[k,j-1] <= 1`` (F_ck/F_n need a_{j} not resident) and
the tape before slot j ``Tin[k,j] = ST[k,j] + FA[k,j-1]``. Constraints:

- availability: ``R[k,j] <= Ain[k,j] + Tin[k,j]``; B(k) needs a_k available
  (``Ain[k,k] + Tin[k,k] >= 1``) and its tape: ``ST[k,k+1] + FA[k,k] = 1``; the Loss needs
  ``R[L,L-1] = 1``;
- tapes are freed only by their backward: ``ST[k-1,j] = ST[k,j] + FA[k,j-1]`` (j <= k), and
  ``ST[L-1,j] = FA[L,j-1]``; binarity of ST forbids a second F_all while the tape lives;
- F_n frees a standalone input: ``SA[k-1,j] = Ain[k,j] AND NOT FN[k,j]`` (linearised); B(k)
  and the Loss free the standalone a_k, a_L;
- memory, charged as the simulator does (state before + output + overhead while an op runs):
  for each slot (k, j), resident = standalone a_i (after their slot for i < j: SA[k-1,i];
  Ain[k,j]; SA[k,i] for i > j) + tapes (after their slot for i <= j, ST[k,i] for i > j) +
  delta_{k+1}; ``resident + xbar[j+1] FA + x[j+1] (FC + FN) + o_fa[j] FA + o_fn[j] (FC + FN) <= M``
  (per-mode forward overheads; both are o_f[j] unless the chain gives them apart); for the
  terminal op, the state after all slots + ``x[k] + o_b[k] <= M``.

Dominance rows (``dominance=True``, the default; they remove schedules that another schedule
of the model matches or beats at every step, so the optimum is unchanged, and cut symmetry):
F_n(j) runs only when it frees a standalone a_j (``FN[k,j] <= Ain[k,j]``; otherwise it acts
as F_ck(j)), and no F_ck(j) runs while the tape abar_{j+1} lives (``FC[k,j] + ST[k,j+1] <= 1``:
its output would be redundant).

Objective: ``sum_{k,j} (u_fa[j] FA[k,j] + u_fn[j] (FC[k,j] + FN[k,j])) + sum_i u_b[i]`` (per-mode
forward times; ``u_f[j] R[k,j]`` with one forward time). An idle slot needs no memory row: its
memory equals that after the previous op, already bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..discretize import effective_slots
from ..exact.layer import retry_rounded_infeasible
from ..exact.linear import LinearModel
from ..exact.options import Deadline, ExactOptions
from ..result import SolveResult
from .instance import Chain
from .schedule import F_ALL, F_CK, F_N, LOSS, B, Bwd, Loss, Op, Schedule
from .simulator import simulate

Key = tuple[str, int, int]
#: rows between two deadline checks in the loops that state or check the model's rows (here, for GLOP in
#: `phase_cuts`, for CP-SAT in `cpsat`): a memory row has up to 2L terms, and at L = 101 (41,511 rows,
#: 1.06 million coefficients) 256 rows take ~30 ms to state for CP-SAT, 2048 took 0.28 s
CHECK_ROWS = 256
_KIND_OF = {"FA": F_ALL, "FC": F_CK, "FN": F_N}
_VAR_OF = {v: k for k, v in _KIND_OF.items()}


class Lin:
    """A linear expression over variable indices: ``sum coef * var + const``."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[int, float] | None = None, const: float = 0.0):
        self.terms: dict[int, float] = dict(terms or {})
        self.const = const

    def add(self, other: Lin | int | float | None, coef: float = 1.0) -> Lin:
        """In place: ``self += coef * other`` (None counts as 0)."""
        if other is None:
            return self
        if isinstance(other, Lin):
            for v, c in other.terms.items():
                self.terms[v] = self.terms.get(v, 0.0) + coef * c
            self.const += coef * other.const
        else:
            self.const += coef * other
        return self

    def value(self, values: list[float]) -> float:
        """The expression's value for the variable values `values` (indexed as the model's variables)."""
        return self.const + sum(c * values[v] for v, c in self.terms.items())


def total(parts: Iterable[tuple[Lin | int | float | None, float]]) -> Lin:
    """The linear expression sum_k coef_k * expr_k (None terms are skipped, numbers are constants)."""
    out = Lin()
    for expr, coef in parts:
        out.add(expr, coef)
    return out


@dataclass
class Row:
    """``lo <= expr <= hi`` (None: unbounded on that side); `name` says what it states."""

    expr: Lin
    lo: float | None
    hi: float | None
    name: str


@dataclass
class PhaseModel:
    """The model for one (discretised) chain and an integer budget in the same size unit."""

    chain: Chain
    budget: int
    keys: list[Key] = field(default_factory=list)
    index: dict[Key, int] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    objective: Lin = field(default_factory=Lin)
    trivially_infeasible: str = ""
    dominance: bool = True

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, chain: Chain, budget: int, *, dominance: bool = True, deadline: Deadline | None = None
              ) -> PhaseModel:
        """`dominance` adds rows that remove dominated schedules (same optimum, less symmetry).
        `deadline`: checked once per phase while the variables are made and once per slot while the
        rows are stated (a slot's memory row has up to 2L terms; raises `DeadlineExceeded` when spent)."""
        m = cls(chain, int(budget), dominance=dominance)
        m._build(deadline)
        return m

    def to_linear(self, deadline: Deadline | None = None) -> LinearModel:
        """The same model as a backend-neutral `LinearModel` (binary variables, same indices)."""
        lm = LinearModel()
        for k in self.keys:
            lm.var(0, 1, True, f"{k[0]}_{k[1]}_{k[2]}")
        inf = float("inf")
        for n, row in enumerate(self.rows):
            if deadline is not None and n % CHECK_ROWS == 0:
                deadline.check()
            idx = list(row.expr.terms)
            lm.add(idx, [row.expr.terms[i] for i in idx], -inf if row.lo is None else row.lo,
                   inf if row.hi is None else row.hi)
        lm.objective = {v: c for v, c in self.objective.terms.items() if c}
        lm.offset = self.objective.const
        return lm

    @property
    def L(self) -> int:
        """Number of stages L of the (discretised) chain."""
        return self.chain.length

    def _var(self, *key) -> Lin:
        key = tuple(key)
        if key not in self.index:
            self.index[key] = len(self.keys)
            self.keys.append(key)
        return Lin({self.index[key]: 1.0})

    def get(self, *key) -> Lin | None:
        """The 0/1 variable named by `key` (kind, phase k, stage j) as a `Lin`, or None when the model has none."""
        i = self.index.get(tuple(key))
        return None if i is None else Lin({i: 1.0})

    def _row(self, expr: Lin, lo: float | None, hi: float | None, name: str) -> None:
        # fold the constant into the bounds
        c = expr.const
        e = Lin(expr.terms)
        e.terms = {v: a for v, a in e.terms.items() if a != 0}
        lo2 = None if lo is None else lo - c
        hi2 = None if hi is None else hi - c
        if not e.terms:
            if (lo2 is not None and lo2 > 1e-9) or (hi2 is not None and hi2 < -1e-9):
                self.trivially_infeasible = self.trivially_infeasible or name
            return
        self.rows.append(Row(e, lo2, hi2, name))

    def slots(self, k: int) -> range:
        """Stages that may run a forward in phase k."""
        return range(self.L) if k == self.L else range(k + 1)

    def kinds(self, k: int, j: int) -> tuple[str, ...]:
        """The forward kinds stage j may run in phase k: F_all only for stage k before its backward, else F_all,
        F_ck and (j > 0) F_n."""
        L = self.L
        if k < L and j == k:
            return ("FA",)
        return ("FA", "FC") if j == 0 else ("FA", "FC", "FN")

    def run(self, k: int, j: int) -> Lin:
        """1 when stage j runs a forward (of any kind) in phase k: the sum of its kind variables."""
        return total((self.get(kind, k, j), 1.0) for kind in ("FA", "FC", "FN"))

    def forward_time(self, k: int, j: int, u_fa: float, u_fn: float) -> Lin:
        """Time of stage j's forward in phase k, per mode: ``u_fa FA + u_fn (FC + FN)``."""
        return total([(self.get("FA", k, j), u_fa), (self.get("FC", k, j), u_fn), (self.get("FN", k, j), u_fn)])

    def sa(self, k: int, j: int) -> Lin | int:
        """Standalone a_j resident at the start of phase k (a variable or a constant)."""
        if j == 0:
            return 1
        if k == self.L or j > k:
            return 0
        return self.get("SA", k, j)  # type: ignore[return-value]

    def st(self, k: int, j: int) -> Lin | int:
        """Tape abar_j resident at the start of phase k."""
        if k == self.L or j == 0 or j > k + 1:
            return 0
        return self.get("ST", k, j)  # type: ignore[return-value]

    def a_in(self, k: int, j: int) -> Lin:
        """Standalone a_j resident just before slot j of phase k."""
        e = total([(self.sa(k, j), 1.0)])
        if j >= 1:
            e.add(self.get("FC", k, j - 1)).add(self.get("FN", k, j - 1))
        return e

    def t_in(self, k: int, j: int) -> Lin:
        """Tape abar_j resident just before slot j of phase k (j >= 1)."""
        e = total([(self.st(k, j), 1.0)])
        if j >= 1:
            e.add(self.get("FA", k, j - 1))
        return e

    def a_after(self, k: int, i: int) -> Lin | int:
        """Standalone a_i after slot i of phase k (i < last slot, or i <= k-1)."""
        if i == 0:
            return 1
        return self.sa(k - 1, i)

    def _build(self, deadline: Deadline | None = None) -> None:
        ch, L, M = self.chain, self.L, self.budget
        x, xbar = [int(v) for v in ch.x], [int(v) for v in ch.xbar]
        o_fa, o_fn, o_b = [int(v) for v in ch.o_fa], [int(v) for v in ch.o_fn], [int(v) for v in ch.o_b]
        if x[0] > M:
            self.trivially_infeasible = "input a_0 exceeds the budget"
        # variables
        for k in range(L, -1, -1):
            if deadline is not None:
                deadline.check()
            for j in self.slots(k):
                for kind in self.kinds(k, j):
                    self._var(kind, k, j)
        for k in range(L - 1, -1, -1):
            if deadline is not None:
                deadline.check()
            for j in range(1, k + 1):
                self._var("SA", k, j)
            for j in range(1, k + 2):
                self._var("ST", k, j)
        # objective
        for k in range(L, -1, -1):
            for j in self.slots(k):
                self.objective.add(self.forward_time(k, j, float(ch.u_fa[j]), float(ch.u_fn[j])))
        self.objective.const += float(ch.u_b.sum())

        for k in range(L, -1, -1):
            if deadline is not None:
                deadline.check()
            J = list(self.slots(k))
            for j in J:
                if deadline is not None:
                    deadline.check()
                r = self.run(k, j)
                self._row(r, None, 1, f"one kind F[{k},{j}]")
                ain, tin = self.a_in(k, j), self.t_in(k, j)
                if j >= 1:
                    self._row(ain, None, 1, f"a_{j} not produced twice in phase {k}")
                self._row(total([(r, 1.0), (ain, -1.0), (tin, -1.0)]), None, 0, f"F({j}) needs a_{j} in phase {k}")
                if self.dominance and isinstance(self.st(k, j + 1), Lin) and self.get("FC", k, j) is not None:
                    # no F_ck(j) while the tape abar_{j+1} lives: its output would be redundant
                    self._row(total([(self.get("FC", k, j), 1.0), (self.st(k, j + 1), 1.0)]), None, 1,
                              f"FC[{k},{j}] redundant")
                # memory during slot j
                mem = Lin()
                for i in range(1, L + 1):  # standalone a_i (a_0 below)
                    if i < j:
                        mem.add(self.a_after(k, i), x[i])
                    elif i == j:
                        mem.add(ain, x[i])
                    else:
                        mem.add(self.sa(k, i), x[i])
                mem.add(x[0])  # a_0 is always resident
                for i in range(1, L + 1):
                    mem.add(self.t_in(k, i) if i <= j else self.st(k, i), xbar[i])
                if k < L:
                    mem.add(x[k + 1])
                fa, fc, fn = self.get("FA", k, j), self.get("FC", k, j), self.get("FN", k, j)
                mem.add(fa, xbar[j + 1]).add(fc, x[j + 1]).add(fn, x[j + 1])
                mem.add(fa, o_fa[j]).add(fc, o_fn[j]).add(fn, o_fn[j])
                self._row(mem, None, M, f"memory F({j}) phase {k}")
            # transitions of standalone activations into phase k-1
            if k >= 1:
                for j in range(1, k):
                    nxt = self.get("SA", k - 1, j)
                    ain, fn = self.a_in(k, j), self.get("FN", k, j)
                    if self.dominance:  # F_n(j) only when it frees a standalone a_j: SA' = Ain - FN
                        self._row(total([(fn, 1.0), (ain, -1.0)]), None, 0, f"FN[{k},{j}] <= Ain")
                        self._row(total([(nxt, 1.0), (ain, -1.0), (fn, 1.0)]), 0, 0, f"SA[{k - 1},{j}] = Ain-FN")
                        continue
                    self._row(total([(nxt, 1.0), (ain, -1.0)]), None, 0, f"SA[{k - 1},{j}] <= Ain")
                    if fn is not None:
                        self._row(total([(nxt, 1.0), (fn, 1.0)]), None, 1, f"SA[{k - 1},{j}] <= 1-FN")
                    self._row(total([(nxt, 1.0), (ain, -1.0), (fn, 1.0)]), 0, None, f"SA[{k - 1},{j}] >= Ain-FN")
                # tapes into phase k-1
                for j in range(1, k + 1):
                    self._row(total([(self.get("ST", k - 1, j), 1.0), (self.st(k, j), -1.0),
                                     (self.get("FA", k, j - 1), -1.0)]), 0, 0, f"ST[{k - 1},{j}]")
            # terminal op
            mem = Lin()
            if k == L:
                self._row(self.run(L, L - 1), 1, None, "Loss needs a_L")
                for i in range(L):
                    mem.add(self.a_after(k, i), x[i])
                mem.add(self.get("FC", L, L - 1), x[L]).add(self.get("FN", L, L - 1), x[L])
                for i in range(1, L + 1):
                    mem.add(self.get("FA", L, i - 1), xbar[i])
            else:
                if k >= 1:
                    self._row(total([(self.a_in(k, k), 1.0), (self.t_in(k, k), 1.0)]), 1, None, f"B({k}) needs a_{k}")
                self._row(total([(self.st(k, k + 1), 1.0), (self.get("FA", k, k), 1.0)]), 1, 1,
                          f"B({k}) needs abar_{k + 1}")
                for i in range(k):
                    mem.add(self.a_after(k, i), x[i])
                mem.add(self.a_in(k, k) if k >= 1 else 1, x[k])
                for i in range(1, k + 2):
                    mem.add(self.t_in(k, i), xbar[i])
                mem.add(x[k + 1])
            mem.add(x[k] + o_b[k])
            self._row(mem, None, M, "memory Loss" if k == L else f"memory B({k})")

    # ------------------------------------------------------------------ solutions
    def decode(self, values: list[float]) -> Schedule:
        """The schedule of a 0-1 solution (values indexed like `keys`)."""
        L = self.L
        ops: list[Op] = []
        for k in range(L, -1, -1):
            for j in self.slots(k):
                for var in ("FA", "FC", "FN"):
                    i = self.index.get((var, k, j))
                    if i is not None and values[i] > 0.5:
                        ops.append(Op(_KIND_OF[var], j))
            ops.append(Loss(L) if k == L else Bwd(k))
        return Schedule(ops, L)

    def encode(self, schedule: Schedule) -> list[float] | None:
        """The 0-1 values of a schedule of the phase form, or None if it is not of that form."""
        L = self.L
        values = [0.0] * len(self.keys)
        phase_order = list(range(L, -1, -1))
        pos = 0
        last = -1
        for op in schedule.ops:
            if pos >= len(phase_order):
                return None
            k = phase_order[pos]
            if op.kind in (LOSS, B):
                want = LOSS if k == L else B
                if op.kind != want or (op.kind == B and op.index != k):
                    return None
                pos += 1
                last = -1
                continue
            j = op.index
            if j <= last:
                return None
            last = j
            i = self.index.get((_VAR_OF[op.kind], k, j))
            if i is None:
                return None
            values[i] = 1.0
        if pos != len(phase_order):
            return None
        # states follow from the forward ops
        for k in range(L, 0, -1):
            for j in range(1, k):
                ain = self.a_in(k, j).value(values)
                fn = self.get("FN", k, j)
                if fn is not None and fn.value(values) > 0.5 and ain < 0.5 and self.dominance:
                    # F_n(j) that frees nothing acts as F_ck(j): the model keeps only the latter
                    values[self.index[("FN", k, j)]], values[self.index[("FC", k, j)]] = 0.0, 1.0
                keep = ain > 0.5 and not (fn is not None and fn.value(values) > 0.5)
                values[self.index[("SA", k - 1, j)]] = 1.0 if keep else 0.0
            for j in range(1, k + 1):
                st = self.st(k, j)
                v = (st.value(values) if isinstance(st, Lin) else st) + values[self.index[("FA", k, j - 1)]]
                values[self.index[("ST", k - 1, j)]] = float(v)
        return values

    def violated(self, values: list[float], tol: float = 1e-6, deadline: Deadline | None = None) -> list[str]:
        """Names of the rows a solution breaks (empty when it is feasible)."""
        bad = []
        for n, row in enumerate(self.rows):
            if deadline is not None and n % CHECK_ROWS == 0:
                deadline.check()
            v = row.expr.value(values)
            if (row.lo is not None and v < row.lo - tol) or (row.hi is not None and v > row.hi + tol):
                bad.append(row.name)
        if any(not (abs(v) < tol or abs(v - 1) < tol) for v in values):
            bad.append("non-binary value")
        return bad

    def scope(self, slots: int) -> str:
        """The class of schedules the model is exact for, with its memory discretisation (`SolveResult.scope`)."""
        sizes = f"sizes in {slots} slots" if slots else "exact sizes"
        return ("phase model: between consecutive backward ops at most one forward per stage, in increasing "
                f"stage order (contains every persistent schedule); {sizes}")


def discretise(chain: Chain, budget: int, slots: int) -> tuple[Chain, int]:
    """The chain and budget the model works on (`solvers.discretize`): with N effective slots,
    sizes in slots of budget/N bytes (rounded up, so a schedule fitting N slots fits the real
    budget), else unchanged."""
    n = effective_slots(budget, slots)
    if n:
        return chain.discretised(budget / n), n
    return chain, int(budget)


def retry_exact_sizes(solve_fn: Any, chain: Chain, budget: int, *, options: ExactOptions, deadline: Deadline,
                      **kw: Any) -> SolveResult:
    """Run ``solve_fn(chain, budget, options=..., deadline=..., **kw)`` under two guards that keep
    the answer about the *real* budget (the exact-size guard of `solvers.exact.layer` does the rest):

    - when store-all fits the budget, it is returned at once as optimal (nothing is faster);
    - if the sizes rounded up to `options.slots` make the model infeasible, it is solved again
      with exact sizes (slots=0) in the time left, so that ``infeasible`` means the real budget is
      (`exact.layer.retry_rounded_infeasible`, shared with the join's CP-SAT model).
    """
    from ..result import OPTIMAL
    from .baselines import store_all_schedule

    store_all = store_all_schedule(chain.length)
    sim = simulate(chain, store_all)
    if sim.peak_memory <= budget:
        return SolveResult(problem="chain", solver="", status=OPTIMAL, objective=sim.makespan,
                           peak_memory=sim.peak_memory, lower_bound=chain.total_time(), schedule=store_all,
                           budget=budget, scope="store-all fits the budget: optimal among all schedules")
    return retry_rounded_infeasible(solve_fn, chain, budget, options=options, deadline=deadline, **kw)
