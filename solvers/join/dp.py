"""The dynamic program for join networks (after Beaumont, Herrmann, Pallez, Shilova, 2020).

**The model it is optimal for ("join-persistent schedules").** A schedule of this class is

1. the *forward sweeps*: for each branch, the part of a persistent rotor schedule of that
   branch that precedes its loss (its "spine": segments F_ck(i) F_n(i+1..j-1) that store
   a_j^b, and F_all(i) that store tapes, down to a_{L_b}^b), branch after branch in the
   order sigma(k), ..., sigma(1);
2. the shared Loss;
3. the *backward phases*: branch sigma(1), then sigma(2), ..., each running the rest of its
   persistent rotor schedule (the sub-schedules C(m, i, j-1) hanging off its spine and the
   B(i) of its F_all(i)), one branch after the other, never interleaved;

where the backward order sigma and, per branch, the persistent schedule (which checkpoints and
tapes its forward sweep keeps) are free. As in the paper, the forward phase of every branch
completes before the loss and the branches are back-propagated one after another; the DP
chooses the order and how much memory each branch's stored checkpoints take while the other
branches are processed. The rotor convention that a sub-chain's forward steps are checked
against the memory the sub-chain has during its backward is kept: this is no restriction when
the forward overheads are 0 (then the backward conditions imply the forward ones), and is
conservative otherwise.

**Accounting** (all in slots of the discretised instance, a_0 excluded from m as in rotor).
Let X_0 = sum_b x^b[0]. A branch waiting for its backward holds w_b (besides a_0^b): its spine's
checkpoints and tapes, and delta_{L_b}^b (the standalone a_{L_b}^b is freed by the loss). A
branch already processed holds delta_0^b (size x^b[0]). Hence when sigma(p) runs its backward it
has ``m_p = M - X_0 - sum_{q>p} w_{sigma(q)}``; its forward sweep, run while the branches sigma(q),
q > p, hold only their checkpoints (<= w), has at least as much. The loss needs
``X_0 + sum_b w_b + sum_{b: a_L^b standalone} x^b[L_b] + loss_overhead <= M``.

**Per branch** (chain of L stages, rotor table C(m, i, l) of `solvers.chain.dp`):
``V^t(i, m, w)`` = least time of the spine from node (i, L) (forward F's of the spine, the
sub-schedules hanging off it, the B's of its F_all) with memory m at the node, the spine below
holding at most w while waiting; t = "ck" (a_L stored standalone: w includes its delta_L
in its place) or "tape" (the spine ends with F_all(L-1): w includes abar_L and delta_L):

    V^t(i, m, w) = min( min_{i<j<=L, m >= sweep(i, j)}
                              sum_{k=i}^{j-1} u_fn[k] + C(m, i, j-1) + V^t(j, m-x[j], w-x[j]),
                        u_fa[i] + u_b[i] + V^t(i+1, m-xbar[i+1], w-xbar[i+1])
                              if m >= max(xbar[i+1]+o_fa[i], x[i]+x[i+1]+xbar[i+1]+o_b[i]) )
    sweep(i, j)  = max(x[i+1]+o_fn[i], max_{i<k<j} x[k]+x[k+1]+o_fn[k])   (F_ck(i) F_n(i+1..j-1))
    V^ck(L, m, w) = 0 if reached by a ck step (w >= 0);  V^tape(L, m, w) = 0 if reached by the
    F_all(L-1) step with w >= x[L] (the delta_L), +inf otherwise.

Forward overheads and times are per mode, as in the chain simulator: o_fa and u_fa for F_all,
o_fn and u_fn for F_ck / F_n (o_f and u_f in a file without per-mode values). The per-split
gate sweep(i, j) replaces the paper's gate mmin(i, L) = sweep(i, L) of the whole entry: with
o_fa = o_fn the recursion's own conditions imply mmin (the table is the same), with o_fa < o_fn
a spine of F_all steps never runs F_n and must not be charged its overhead.

**Join level**: a DP over (set S of branches processed last, set T subset of S of ck-ending
ones, W = sum_{b in S} w_b): ``f(S+{b}, T', W+w) = min f(S, T, W) + V_b^t(0, M-X_0-W, w)``;
the answer is ``loss_time + min f(all, T, W)`` over ``X_0 + W + sum_{b in T} x^b[L_b] +
loss_overhead <= M``. O(sum_b L_b^2 M^2) for the spines, O(3^k k M^2) for the join.
The DP is exact for the class above at the discretisation (with ``slots = 0``: exact sizes);
tests check it against an enumeration of the class replayed by the simulator.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from ..chain.dp import rotor_table
from ..chain.instance import Chain
from ..discretize import check_slots, effective_slots  # the one discretisation rule of every problem
from ..errors import InputError, flag
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, SolveResult
from .instance import Join
from .schedule import LOSS_OP, JoinSchedule, JOp
from .simulator import simulate

CK, TAPE = 0, 1
TYPES = (CK, TAPE)
#: Largest spine table (cells over all branches, both ending types) we build.
MAX_CELLS = 12_000_000


# --------------------------------------------------------------------------- discretisation
def discretise(join: Join, budget: int, slots: int) -> tuple[Join, int]:
    """(the instance in slots, the budget M in slots); `slots` = 0 keeps exact sizes, and so
    does a budget of at most `slots` units (integer sizes are then finer than slots)."""
    budget = int(budget)
    slots = check_slots(slots, default=0)
    n = effective_slots(budget, slots)
    return (join.discretised(budget / n), n) if n else (join, budget)


def scope_text(slots: int) -> str:
    """How memory was discretised, for `SolveResult.scope`: exact sizes (0) or N slots."""
    return "exact sizes" if not slots else f"{slots}-slot discretisation"


# --------------------------------------------------------------------------- per branch
@dataclass
class BranchTables:
    """Rotor table and spine tables of one branch, for memory values 0..M (slots)."""

    chain: Chain
    table: Any  # RotorTable
    V: np.ndarray  # (2, L+1, M+1, M+1): V^t(i, m, w)
    choice: np.ndarray  # same shape: j > 0 ck split, 0 F_all, -2 none

    @property
    def L(self) -> int:
        """Number of stages of the branch."""
        return self.chain.length

    def root(self, t: int) -> np.ndarray:
        """V^t(0, m, w) as an (M+1, M+1) array."""
        return self.V[t, 0]


def _shift2(a: np.ndarray, s: int) -> np.ndarray:
    """out[m, w] = a[m - s, w - s] (inf where out of range)."""
    out = np.full_like(a, np.inf)
    n = a.shape[0]
    if s <= 0:
        return a.copy()
    if s < n:
        out[s:, s:] = a[: n - s, : n - s]
    return out


def spine_mmin(chain: Chain) -> np.ndarray:
    """mmin(i, L) = sweep(i, L) for i = 0..L-1: the memory of the forward sweep F_ck(i) F_n(i+1..L-1)
    storing a_L alone (x[L+1] = 0), charged o_fn; the gate of the "output-only" spine."""
    L = chain.length
    return np.array([spine_sweeps(chain, i)[-1] for i in range(L)], dtype=np.int64)


def spine_sweeps(chain: Chain, i: int) -> list[int]:
    """sweep(i, j) for j = i+1..L: the memory (beyond a_i) of the spine segment F_ck(i) F_n(i+1..j-1)
    that stores a_j, ``max(x[i+1] + o_fn[i], max_{i<k<j} x[k] + x[k+1] + o_fn[k])`` (no delta is
    resident before the loss)."""
    x, o_fn = chain.x, chain.o_fn
    out = [int(x[i + 1] + o_fn[i])]
    for j in range(i + 2, chain.length + 1):
        out.append(max(out[-1], int(x[j - 1] + x[j] + o_fn[j - 1])))
    return out


def branch_tables(chain: Chain, M: int, *, restrict: str | None = None) -> BranchTables:
    """Fill V^t(i, m, w) for m, w = 0..M.

    `restrict` = "output-only" keeps only the spine F_ck(0) F_n(1..L-1) (store a_L alone), used
    by the sequential heuristic."""
    L = chain.length
    M = int(M)
    table = rotor_table(chain, M)
    x, xbar, o_fa, o_b = (np.asarray(a, dtype=np.int64) for a in (chain.x, chain.xbar, chain.o_fa, chain.o_b))
    sf = np.concatenate([[0.0], np.cumsum(chain.u_fn)])  # the no-grad spine sweeps, as rotor's C_ck
    n = M + 1
    V = np.full((2, L + 1, n, n), np.inf)
    ch = np.full((2, L + 1, n, n), -2, dtype=np.int16 if L < 32000 else np.int32)
    ms = np.arange(n)
    ws = np.arange(n)
    for i in range(L - 1, -1, -1):
        for t in TYPES:
            best = np.full((n, n), np.inf)
            arg = np.full((n, n), -2, dtype=ch.dtype)
            js = [L] if restrict == "output-only" else range(i + 1, L + 1)
            sweeps = spine_sweeps(chain, i)  # sweep(i, j) = sweeps[j - i - 1]
            for j in js:
                if restrict == "output-only" and i != 0:
                    break
                tail = sf[j] - sf[i] + table.C[table.off[i] + (j - 1 - i), :]  # C(m, i, j-1) over m
                nxt: np.ndarray | None
                if j < L:
                    nxt = _shift2(V[t, j], int(x[j]))
                else:
                    if t != CK:
                        continue
                    xl = int(x[L])
                    nxt = np.where((ms[:, None] >= xl) & (ws[None, :] >= xl), 0.0, np.inf)
                cand = tail[:, None] + nxt
                cand[: min(sweeps[j - i - 1], n), :] = np.inf  # the forward sweep F_ck(i) F_n(i+1..j-1)
                better = cand < best
                best = np.where(better, cand, best)
                arg[better] = j
            if restrict != "output-only":
                xb = int(xbar[i + 1])
                need = max(xb + int(o_fa[i]), int(x[i] + x[i + 1]) + xb + int(o_b[i]))
                if i + 1 < L:
                    nxt = _shift2(V[t, i + 1], xb)
                elif t == TAPE:
                    nxt = np.where((ms[:, None] >= xb) & (ws[None, :] >= xb + int(x[L])), 0.0, np.inf)
                else:
                    nxt = None
                if nxt is not None:
                    cand = float(chain.u_fa[i] + chain.u_b[i]) + nxt
                    cand[: min(need, n), :] = np.inf
                    better = cand < best
                    best = np.where(better, cand, best)
                    arg[better] = 0
            arg[~np.isfinite(best)] = -2
            V[t, i] = best
            ch[t, i] = arg
    return BranchTables(chain, table, V, ch)


def spine_ops(bt: BranchTables, b: int, t: int, m: int, w: int) -> tuple[list[JOp], list[JOp]]:
    """(ops before the loss, ops after it) of branch `b` achieving V^t(0, m, w)."""
    from ..chain.schedule import LOSS

    L = bt.L
    x, xbar = bt.chain.x, bt.chain.xbar
    pre: list[JOp] = []
    tails: list[list[JOp]] = []
    i = 0
    while i < L:
        c = int(bt.choice[t, i, m, w])
        if c == -2 or not math.isfinite(bt.V[t, i, m, w]):
            raise ValueError(f"V({i}, {m}, {w}) of branch {b} is infeasible")
        if c > 0:
            pre.append(JOp("F_ck", b, i))
            pre.extend(JOp("F_n", b, k) for k in range(i + 1, c))
            sub = bt.table.schedule(m, i, c - 1)
            tails.append([JOp(op.kind, b, op.index) for op in sub.ops if op.kind != LOSS])
            m, w, i = m - int(x[c]), w - int(x[c]), c
        else:
            pre.append(JOp("F_all", b, i))
            tails.append([JOp("B", b, i)])
            m, w, i = m - int(xbar[i + 1]), w - int(xbar[i + 1]), i + 1
    post = [op for tail in reversed(tails) for op in tail]
    return pre, post


# --------------------------------------------------------------------------- join level
@dataclass
class JoinPlan:
    """The DP's answer in slots: value, backward order, per branch (type, m, w)."""

    value: float
    order: list[int]  # sigma(1), ..., sigma(k): backward order
    choices: dict[int, tuple[int, int, int]]  # b -> (t, m, w)


def join_dp(work: Join, M: int, tables: list[BranchTables]) -> JoinPlan | None:
    """The join-level DP over (S, T, W); None when no join-persistent schedule fits M."""
    k = work.k
    X0 = work.input_total()
    n = M + 1
    if X0 > M:
        return None
    xl = [int(c.x[c.length]) for c in work.branches]
    roots = [[tb.root(t) for t in TYPES] for tb in tables]
    # f[(S, T)] = least cost over W; back[(S, T)] = (source id, W before) per W
    f: dict[tuple[frozenset, frozenset], np.ndarray] = {(frozenset(), frozenset()): _first_row(n)}
    back: dict[tuple[frozenset, frozenset], tuple[np.ndarray, np.ndarray]] = {}
    sources: list[tuple[frozenset, frozenset, int, int]] = []
    for size in range(k):
        for S in map(frozenset, combinations(range(k), size)):
            for T in _subsets(S):
                F = f.get((S, T))
                if F is None:
                    continue
                finite = np.flatnonzero(np.isfinite(F))
                for b in range(k):
                    if b in S:
                        continue
                    S2 = S | {b}
                    for t in TYPES:
                        key = (S2, T | {b} if t == CK else T)
                        if key not in f:
                            f[key] = np.full(n, np.inf)
                            back[key] = (np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64))
                        G, (src, srcW) = f[key], back[key]
                        sid = len(sources)
                        sources.append((S, T, b, t))
                        R = roots[b][t]
                        for W in finite:
                            m = M - X0 - int(W)
                            if m < 0:
                                continue
                            seg = F[W] + R[m, : n - W]
                            better = np.flatnonzero(seg < G[W:])
                            if better.size:
                                G[W + better] = seg[better]
                                src[W + better] = sid
                                srcW[W + better] = W
    full = frozenset(range(k))
    best, arg = math.inf, None
    for T in _subsets(full):
        GT = f.get((full, T))
        if GT is None:
            continue
        extra = sum(xl[b] for b in T)
        for w in np.flatnonzero(np.isfinite(GT)):
            if X0 + int(w) + extra + work.loss_overhead <= M and GT[w] < best:
                best, arg = float(GT[w]), (full, T, int(w))
    if arg is None:
        return None
    S, T, w_at = arg
    order: list[int] = []
    choices: dict[int, tuple[int, int, int]] = {}
    while S:
        src, srcW = back[(S, T)]
        prevS, prevT, b, t = sources[int(src[w_at])]
        Wp = int(srcW[w_at])
        order.append(b)  # added last = processed first among S
        choices[b] = (t, M - X0 - Wp, w_at - Wp)
        S, T, w_at = prevS, prevT, Wp
    return JoinPlan(best + work.loss_time, order, choices)


def _first_row(n: int) -> np.ndarray:
    row = np.full(n, np.inf)
    row[0] = 0.0
    return row


def _subsets(S: frozenset) -> list[frozenset]:
    items = sorted(S)
    return [frozenset(c) for r in range(len(items) + 1) for c in combinations(items, r)]


def plan_schedule(work: Join, tables: list[BranchTables], plan: JoinPlan) -> JoinSchedule:
    """Forward sweeps in the order sigma(k)..sigma(1), the loss, backward phases sigma(1)..sigma(k)."""
    parts = {b: spine_ops(tables[b], b, *plan.choices[b]) for b in plan.order}
    ops: list[JOp] = []
    for b in reversed(plan.order):
        ops.extend(parts[b][0])
    ops.append(LOSS_OP)
    for b in plan.order:
        ops.extend(parts[b][1])
    return JoinSchedule(ops, work.lengths)


def max_slots(join: Join) -> int:
    """The most memory slots whose spine tables stay within `MAX_CELLS`."""
    rows = 2 * sum(c.length + 1 for c in join.branches)
    return max(1, int(math.isqrt(MAX_CELLS // rows)) - 1)


def check_cells(work: Join, M: int) -> None:
    """`InputError` on ``--slots`` when the DP tables of `work` at M slots would exceed MAX_CELLS."""
    cells = 2 * sum(c.length + 1 for c in work.branches) * (M + 1) ** 2
    if cells > MAX_CELLS:
        raise InputError(f"the join DP tables would have {cells:.3g} cells ({M + 1} memory values), more than "
                         f"{MAX_CELLS:.3g}; use fewer memory slots (e.g. {flag('slots', 100)})", field=flag("slots"))


# --------------------------------------------------------------------------- solver
def solve_join_dp(join: Join, budget: int, *, slots: int = 500, time_limit: float | None = None,
                  **_: Any) -> SolveResult:
    """Optimal join-persistent schedule (see the module docstring) for `budget` bytes.

    Status ``optimal`` for that class at the stated discretisation, ``infeasible`` when no
    schedule of the class fits the (discretised) budget. At most `MAX_CELLS` cells keep the
    O(L^2 M^2) spine tables small; pass ``slots`` for more precision (it is lowered to the
    largest count whose tables have at most `MAX_CELLS` cells; the scope says which was used).
    A one-branch join is the chain problem of its branch and gets rotor's guarantee
    (`one_branch_never_worse`)."""
    t0 = time.perf_counter()
    result = _solve_join_dp_slots(join, budget, slots=slots)
    if join.k == 1:
        result = one_branch_never_worse(join, int(budget), result)
    result.solve_time_s = time.perf_counter() - t0
    return result


def one_branch_never_worse(join: Join, budget: int, result: SolveResult) -> SolveResult:
    """The answer for a one-branch join, never slower at exact sizes than the periodic and
    sqrt(L) schedules of its branch (`branch_with_loss`: the same problem), as rotor on that
    chain (`rotor_guard.never_worse`): when the slot rounding made the DP's schedule slower, the
    DP at finer slots or exact sizes, else the baseline's schedule (status ``feasible``)."""
    from ..chain.rotor_guard import never_worse
    from .instance import branch_with_loss

    chain = branch_with_loss(join, 0)
    x0 = int(chain.x[0])
    guarded = never_worse(chain, budget, result, int(result.details.get("slots", 0)),
                          lambda s: _solve_join_dp_slots(join, budget, slots=s),
                          lambda L, M: 2 * (L + 1) * (M + x0 + 1) ** 2, MAX_CELLS)
    if guarded.problem == "join" or guarded.schedule is None:
        return guarded
    ops = [LOSS_OP if op.kind == LOSS_OP.kind else JOp(op.kind, 0, op.index) for op in guarded.schedule.ops]
    return SolveResult(problem="join", solver="dp", status=FEASIBLE, objective=guarded.objective,
                       schedule=JoinSchedule(ops, join.lengths), peak_memory=guarded.peak_memory, budget=budget,
                       min_budget=guarded.min_budget, scope=guarded.scope.replace("rotor's", "the join DP's"),
                       message=guarded.message, details=guarded.details)


def _solve_join_dp_slots(join: Join, budget: int, *, slots: int = 500) -> SolveResult:
    """The join DP at `slots` slots (lowered to `max_slots`; 0 or a budget of at most `slots`
    units: exact sizes), without the one-branch guard."""
    t0 = time.perf_counter()
    budget = int(budget)
    slots = int(slots or 0)
    if slots > 0:
        slots = effective_slots(budget, min(slots, max_slots(join)))
    work, M = discretise(join, budget, slots)
    scope = f"join-persistent schedules (forward sweeps, loss, branches back-propagated one after another, " \
            f"persistent per branch), {scope_text(slots)}"
    common: dict[str, Any] = {"problem": "join", "solver": "dp", "budget": budget, "scope": scope,
                              "lower_bound": None}
    from .schedule import store_all_schedule

    store_all = store_all_schedule(join)
    sim = simulate(join, store_all)
    if sim.peak_memory <= budget:  # no recomputation: optimal among all schedules
        return SolveResult(status=OPTIMAL, objective=sim.makespan, peak_memory=sim.peak_memory, schedule=store_all,
                           solve_time_s=time.perf_counter() - t0,
                           details={"slots": slots, "order": list(range(join.k))},
                           **{**common, "scope": scope + "; store-all fits, optimal among all schedules",
                              "lower_bound": join.total_time()})
    check_cells(work, M)
    tables = [branch_tables(c, M) for c in work.branches]
    plan = join_dp(work, M, tables)
    if plan is None:
        return SolveResult(status=INFEASIBLE, solve_time_s=time.perf_counter() - t0,
                           message=f"no join-persistent schedule fits {budget} at {scope_text(slots)}",
                           details={"slots": slots}, **common)
    schedule = plan_schedule(work, tables, plan)
    sim = simulate(join, schedule)
    sim.raise_if_invalid()
    if not math.isclose(sim.makespan, plan.value, rel_tol=1e-9, abs_tol=1e-9):
        raise RuntimeError(f"join DP value {plan.value} differs from its schedule's replay {sim.makespan}")
    if sim.peak_memory > budget:
        raise RuntimeError(f"join DP schedule peaks at {sim.peak_memory} > budget {budget}")
    status = OPTIMAL if math.isfinite(plan.value) else FEASIBLE
    return SolveResult(status=status, objective=sim.makespan, peak_memory=sim.peak_memory, schedule=schedule,
                       solve_time_s=time.perf_counter() - t0,
                       details={"slots": slots, "order": plan.order,
                                "ending": {b: ("ck" if t == CK else "tape") for b, (t, _, _) in plan.choices.items()},
                                "recomputations": schedule.recomputations()}, **common)
