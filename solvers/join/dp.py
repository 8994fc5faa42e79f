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
loss_overhead <= M``. O(sum_b L_b^2 M^2) for the spines, O(3^k k M^2) for the join: about
``join_steps(k, M) = 2 k 3^(k-1) (M+1)`` steps (S, T, branch, ending, W), each a vector operation
over the M+1 memory values. The slot count is lowered so that the spine tables have at most
`MAX_CELLS` cells and the join level at most `MAX_JOIN_STEPS` steps, the latter not below
`MIN_JOIN_SLOTS` slots: a join beyond that (11 branches or more) is refused up front
(`check_join_level`, `InputError`), and ``time_limit`` is checked inside the tables, the join
level and `least_memory` (at the limit: the fastest heuristic's schedule, ``feasible``, else
``timeout``).
The DP is exact for the class above at the discretisation (with ``slots = 0``: exact sizes);
tests check it against an enumeration of the class replayed by the simulator.

**Least memory and rounding.** `least_memory` gives the least budget of the class at exact sizes
without a table (the frontiers of the spine tables, then a bisection over the join level): the
``min_budget`` of an ``infeasible`` answer. When the sizes rounded up to slots leave no schedule,
`rounding_retry` decides about the real budget (rotor on a single branch, exact sizes, finer
slots, a rounded-down relaxation, the least-memory schedule): docs/join.md, "When the rounding
leaves no schedule".
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import combinations
from typing import Any

import numpy as np

from ..chain.dp import rotor_table
from ..chain.dp import value_tolerance as chain_value_tolerance
from ..chain.instance import Chain
from ..discretize import check_slots, effective_slots  # the one discretisation rule of every problem
from ..errors import InputError, flag
from ..exact.options import Deadline, DeadlineExceeded
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .instance import Join
from .schedule import LOSS_OP, JoinSchedule, JOp
from .simulator import simulate

CK, TAPE = 0, 1
TYPES = (CK, TAPE)
#: Largest spine table (cells over all branches, both ending types) we build.
MAX_CELLS = 12_000_000
#: Most steps of the join level (`join_steps`: about a minute at 1-2 microseconds a step): beyond, the
#: slot count is lowered, and a join that needs fewer than `MIN_JOIN_SLOTS` slots for it is refused.
MAX_JOIN_STEPS = 50_000_000
#: The fewest slots the DP lowers its count to for the join level (`check_join_level`; fewer slots
#: round too coarsely). 10 branches fit at 100 slots, 11 do not.
MIN_JOIN_SLOTS = 100
#: a no-op deadline (no time limit)
_NO_LIMIT = Deadline(None)


# --------------------------------------------------------------------------- discretisation
def discretise(join: Join, budget: int, slots: int) -> tuple[Join, int]:
    """(the instance in slots, the budget M in slots); `slots` = 0 keeps exact sizes, and so
    does a budget of at most `slots` units (integer sizes are then finer than slots)."""
    budget = int(budget)
    slots = check_slots(slots, default=0)
    n = effective_slots(budget, slots)
    return (join.discretised(budget / n), n) if n else (join, budget)


#: the DP's class of schedules, for `SolveResult.scope`
CLASS = ("join-persistent schedules (forward sweeps, loss, branches back-propagated one after another, "
         "persistent per branch)")


def scope_text(slots: int) -> str:
    """How memory was discretised, for `SolveResult.scope`: exact sizes (0) or N slots."""
    return "exact sizes" if not slots else f"{slots}-slot discretisation"


# --------------------------------------------------------------------------- per branch
@dataclass
class BranchTables:
    """Rotor table and spine tables of one branch, for memory values 0..M (slots). V holds V^t(i, m, w)
    for w <= m only (+inf above the diagonal, choice -2): a branch's waiting spine is held within its
    memory, and `join_dp` and `spine_ops` read no other entry."""

    chain: Chain
    table: Any  # RotorTable
    V: np.ndarray  # (2, L, M+1, M+1): V^t(i, m, w) for i < L, w <= m
    choice: np.ndarray  # same shape: j > 0 ck split, 0 F_all, -2 none

    @property
    def L(self) -> int:
        """Number of stages of the branch."""
        return self.chain.length

    def root(self, t: int) -> np.ndarray:
        """V^t(0, m, w) as an (M+1, M+1) array."""
        return self.V[t, 0]


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


def branch_tables(chain: Chain, M: int, *, restrict: str | None = None, deadline: Deadline = _NO_LIMIT
                  ) -> BranchTables:
    """Fill V^t(i, m, w) for 0 <= w <= m <= M (+inf for w > m, see `BranchTables`).

    `restrict` = "output-only" keeps only the spine F_ck(0) F_n(1..L-1) (store a_L alone), used
    by the sequential heuristic. `deadline` is checked once per stage (`DeadlineExceeded`).

    V(i, m, w) reads only V(j, m - s, w - s), s >= 0: entries at smaller (m, w) in the same triangle,
    so a table filled up to M is the top-left block of any larger one, value for value. Each option is
    evaluated only where it can be finite (m >= its gate and its shift, w >= its shift: `_improve`) and
    written in place where strictly better, in the order j = i+1..L then F_all: the floating-point sums,
    comparisons and ties of an evaluation over the whole (M+1, M+1) square."""
    L = chain.length
    M = int(M)
    table = rotor_table(chain, M)
    x, xbar, o_fa, o_b = (np.asarray(a, dtype=np.int64) for a in (chain.x, chain.xbar, chain.o_fa, chain.o_b))
    sf = np.concatenate([[0.0], np.cumsum(chain.u_fn)])  # the no-grad spine sweeps, as rotor's C_ck
    n = M + 1
    V = np.full((2, L, n, n), np.inf)  # V^t(L, ., .) is the end of the spine, never stored
    ch = np.full((2, L, n, n), -2, dtype=np.int16 if L < 32000 else np.int32)
    above = np.triu(np.ones((n, n), dtype=bool), 1)  # w > m
    for i in range(L - 1, -1, -1):
        deadline.check()
        for t in TYPES:
            best, arg = V[t, i], ch[t, i]  # written in place
            js = [L] if restrict == "output-only" else range(i + 1, L + 1)
            sweeps = spine_sweeps(chain, i)  # sweep(i, j) = sweeps[j - i - 1]
            for j in js:
                if restrict == "output-only" and i != 0:
                    break
                tail = sf[j] - sf[i] + table.C[table.off[i] + (j - 1 - i), :]  # C(m, i, j-1) over m
                if j < L:  # V^t(j, m - x[j], w - x[j])
                    _improve(best, arg, j, tail, V[t, j], int(x[j]), int(x[j]), sweeps[j - i - 1])
                elif t == CK:  # 0 where m, w >= x[L]
                    xl = int(x[L])
                    _improve(best, arg, j, tail, None, xl, xl, sweeps[j - i - 1])
            if restrict != "output-only":
                xb = int(xbar[i + 1])
                need = max(xb + int(o_fa[i]), int(x[i] + x[i + 1]) + xb + int(o_b[i]))
                step = np.full(n, float(chain.u_fa[i] + chain.u_b[i]))
                if i + 1 < L:
                    _improve(best, arg, 0, step, V[t, i + 1], xb, xb, need)
                elif t == TAPE:  # 0 where m >= xbar[L] and w >= xbar[L] + x[L]
                    _improve(best, arg, 0, step, None, xb, xb + int(x[L]), need)
            best[above] = np.inf  # `_improve`'s diagonal blocks evaluate a few w > m
            arg[~np.isfinite(best)] = -2
    return BranchTables(chain, table, V, ch)


def spine_tables(work: Join, M: int, deadline: Deadline = _NO_LIMIT) -> list[BranchTables]:
    """`branch_tables` of every branch of `work` as `join_dp` reads them at budget M (slots): for
    m, w = 0..M - X0 (a branch never has more, `join_dp`); identical branches (a Siamese join's) share
    one table. Empty when X0 > M (nothing fits)."""
    top = M - work.input_total()
    if top < 0:
        return []
    built: dict[bytes, BranchTables] = {}
    out = []
    for chain in work.branches:
        key = _chain_key(chain)
        if key not in built:
            built[key] = branch_tables(chain, top, deadline=deadline)
        out.append(built[key])
    return out


def _chain_key(chain: Chain) -> bytes:
    """The arrays `branch_tables` and `rotor_table` read from `chain` (times, sizes, overheads), as bytes:
    equal keys give equal tables."""
    parts = []
    for a in (chain.u_fa, chain.u_fn, chain.u_b, chain.x, chain.xbar, chain.o_fa, chain.o_fn, chain.o_b):
        arr = np.ascontiguousarray(a)
        parts += [arr.dtype.str.encode(), str(arr.shape).encode(), arr.tobytes()]
    return b"|".join(parts)


#: rows of the lower triangle w <= m that `_improve` handles per array operation
_ROW_BLOCK = 64


def _improve(best: np.ndarray, arg: np.ndarray, label: int, tail: np.ndarray, nxt: np.ndarray | None,
             ds: int, dw: int, gate: int) -> None:
    """One option of `branch_tables`, in place on the triangle w <= m: where ``cand[m, w] = tail[m] +
    nxt[m - ds, w - ds]`` (``tail[m] + 0.0`` where `nxt` is None: the end of the spine) is strictly
    below `best[m, w]`, write it and `label` into `arg`. The candidate is +inf for m < max(gate, ds)
    or w < dw (a shifted table is +inf outside its range), so only m >= max(gate, ds), dw <= w <= m
    is evaluated, in blocks of `_ROW_BLOCK` rows."""
    n = best.shape[0]
    r0 = max(int(gate), ds, dw, 0)
    for ra in range(r0, n, _ROW_BLOCK):
        rb = min(ra + _ROW_BLOCK, n)  # rows ra..rb-1, columns dw..rb-1 (w <= m)
        if nxt is None:
            cand = tail[ra:rb, None] + np.zeros((1, rb - dw))
        else:
            cand = tail[ra:rb, None] + nxt[ra - ds: rb - ds, dw - ds: rb - ds]
        sub = best[ra:rb, dw:rb]
        better = cand < sub
        np.copyto(sub, cand, where=better)
        np.copyto(arg[ra:rb, dw:rb], label, where=better)


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


def join_dp(work: Join, M: int, tables: list[BranchTables], deadline: Deadline = _NO_LIMIT) -> JoinPlan | None:
    """The join-level DP over (S, T, W); None when no join-persistent schedule fits M. About
    `join_steps` (k, M) vector steps; `deadline` is checked once per (S, T) (`DeadlineExceeded`).

    Only W <= M - X0 matters (the loss needs X0 + W <= M, and W only grows), so a branch's root table
    is read at m, w <= M - X0 (`spine_tables` fills no more). Each (S, T, b, t) is one array
    operation over every W at once (`_join_step`), with the tie-breaking of a loop over W ascending."""
    k = work.k
    X0 = work.input_total()
    if X0 > M:
        return None
    top = M - X0  # the most a branch's memory m and the waiting sets' W can be
    n = top + 1
    xl = [int(c.x[c.length]) for c in work.branches]
    roots = [[tb.root(t)[:n, :n] for t in TYPES] for tb in tables]
    # f[(S, T)] = least cost over W; back[(S, T)] = (source id, W before) per W
    f: dict[tuple[frozenset, frozenset], np.ndarray] = {(frozenset(), frozenset()): _first_row(n)}
    back: dict[tuple[frozenset, frozenset], tuple[np.ndarray, np.ndarray]] = {}
    sources: list[tuple[frozenset, frozenset, int, int]] = []
    buf = np.full((n, 2 * n), np.inf)  # `_join_step`'s scratch
    for size in range(k):
        for S in map(frozenset, combinations(range(k), size)):
            for T in _subsets(S):
                F = f.get((S, T))
                if F is None:
                    continue
                deadline.check()
                for b in range(k):
                    if b in S:
                        continue
                    S2 = S | {b}
                    for t in TYPES:
                        key = (S2, T | {b} if t == CK else T)
                        if key not in f:
                            f[key] = np.full(n, np.inf)
                            back[key] = (np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64))
                        sid = len(sources)
                        sources.append((S, T, b, t))
                        _join_step(F, roots[b][t], buf, f[key], *back[key], sid)
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


def _join_step(F: np.ndarray, R: np.ndarray, buf: np.ndarray, G: np.ndarray, src: np.ndarray, srcW: np.ndarray,
               sid: int) -> None:
    """``G[W + w] = min(G[W + w], F[W] + R[top - W, w])`` over W, w >= 0 with W + w <= top = len(F) - 1,
    in place, recording (`sid`, W) where G drops: as a loop over W ascending with strict improvements
    would (the same sums, the smallest W reaching a minimum; a W where F is +inf never improves).
    `buf`: (top + 1, 2 (top + 1)) scratch whose right half is +inf."""
    finite = np.flatnonzero(np.isfinite(F))
    if not finite.size:
        return
    n = len(F)
    lo, hi = int(finite[0]), int(finite[-1]) + 1  # the rows W that can improve G
    np.add(F[lo:hi, None], R[n - 1 - lo: n - 1 - hi: -1] if hi < n else R[n - 1 - lo:: -1], out=buf[lo:hi, :n])
    # shear[W, k] = buf[W, k - W] = F[W] + R[top - W, k - W]; for k < W it reads the +inf right half of row W - 1
    flat = buf.reshape(-1)  # C-contiguous: buf[W, c] = flat[2 n W + c]
    step = flat.strides[0]
    shear = np.lib.stride_tricks.as_strided(flat[(2 * n - 1) * lo:], shape=(hi - lo, n),
                                            strides=((2 * n - 1) * step, step), writeable=False)
    first = shear.argmin(axis=0)  # the first (smallest) W of each least sum
    best = shear[first, np.arange(n)]
    better = np.flatnonzero(best < G)
    G[better] = best[better]
    src[better] = sid
    srcW[better] = lo + first[better]


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
    """The most memory slots whose spine tables stay within `MAX_CELLS` and whose join level takes
    at most `MAX_JOIN_STEPS` steps (`join_level_slots`), at least 1."""
    return max(1, min(cell_slots(join), join_level_slots(join.k)))


def cell_slots(join: Join) -> int:
    """The most memory slots whose spine tables stay within `MAX_CELLS` (at least 1)."""
    rows = 2 * sum(c.length + 1 for c in join.branches)
    return max(1, int(math.isqrt(MAX_CELLS // rows)) - 1)


def join_steps(k: int, M: int) -> int:
    """Steps of the join level of `join_dp` for k branches and M+1 memory values (slots): one per
    (S, T, branch b not in S, ending type, W), ``2 k 3^(k-1) (M+1)`` at most, each a vector operation
    over the M+1 memory values (O(3^k k M^2) in all)."""
    return 2 * k * 3 ** (k - 1) * (int(M) + 1)


def join_level_slots(k: int) -> int:
    """The most memory slots M whose join level takes at most `MAX_JOIN_STEPS` steps (`join_steps`);
    0 or less when even one slot is too many."""
    return MAX_JOIN_STEPS // join_steps(k, 0) - 1


def dp_slots(join: Join, budget: int, slots: int) -> int:
    """The slot count the DP runs at when asked for `slots` (0, or a budget of at most that many
    units: exact sizes): lowered to the most whose spine tables have at most `MAX_CELLS` cells
    (`cell_slots`), then to the most whose join level takes at most `MAX_JOIN_STEPS` steps
    (`join_level_slots`), not below `MIN_JOIN_SLOTS` for the latter (nor below the count itself when
    it is fewer): `check_join_level` refuses the join then. Exact sizes are kept as asked (their
    tables are checked by `check_cells` and `check_join_level`)."""
    slots = int(slots or 0)
    if slots <= 0:
        return 0
    wanted = effective_slots(budget, min(slots, cell_slots(join)))
    M = wanted or int(budget)
    allowed = join_level_slots(join.k)
    if join_steps(join.k, M) <= MAX_JOIN_STEPS or allowed < min(M, MIN_JOIN_SLOTS):
        return wanted  # within the limit, or refused by `check_join_level` (after the store-all check)
    return effective_slots(budget, allowed)


def check_join_level(join: Join, M: int, slots: int) -> None:
    """`InputError` naming the join and its branches when its join level at M+1 memory values (`slots`
    slots, 0: exact sizes) would take more than `MAX_JOIN_STEPS` steps (`join_steps`): beyond what
    finishes in minutes, and `dp_slots` did not lower the count (below `MIN_JOIN_SLOTS`, or exact sizes)."""
    k, steps = join.k, join_steps(join.k, M)
    if steps <= MAX_JOIN_STEPS:
        return
    at = f"{slots} slots" if slots else f"exact sizes ({M + 1} memory values)"
    allowed = join_level_slots(k)
    most = max(b for b in range(1, k + 1) if join_steps(b, MIN_JOIN_SLOTS) <= MAX_JOIN_STEPS)
    if not slots and allowed >= MIN_JOIN_SLOTS:
        fix, field = f"use at most {allowed} memory slots ({flag('slots', allowed)})", flag("slots")
    else:
        fix, field = (f"the DP handles at most {most} branches (at {MIN_JOIN_SLOTS} slots); use a heuristic "
                      f"({flag('solver', 'equal')} or proportional) or join fewer branches"), "branches"
    raise InputError(f"join {join.name!r} has {k} branches: the join DP's level over the sets of branches would take "
                     f"{steps:.3g} steps (2 k 3^(k-1) (M+1)) at {at}, more than {MAX_JOIN_STEPS:.3g} (minutes); {fix}",
                     field=field)


def check_cells(work: Join, M: int) -> None:
    """`InputError` on ``--slots`` when the DP tables of `work` at M slots would exceed MAX_CELLS."""
    cells = 2 * sum(c.length + 1 for c in work.branches) * (M + 1) ** 2
    if cells > MAX_CELLS:
        raise InputError(f"the join DP tables would have {cells:.3g} cells ({M + 1} memory values), more than "
                         f"{MAX_CELLS:.3g}; use fewer memory slots (e.g. {flag('slots', 100)})", field=flag("slots"))


# --------------------------------------------------------------------------- least memory (exact sizes)
#: a frontier point of a spine: (m, w, choice, k) = V^t(i, m, w) is finite through `choice` (j > 0: ck split
#: j, 0: F_all(i)) and point k of the next frontier (-1: the end of the spine)
Point = tuple[int, int, int, int]


def spine_frontiers(chain: Chain) -> list[list[list[Point]]]:
    """F[t][i]: the minimal pairs (m, w) with V^t(i, m, w) finite at exact sizes, sorted by m (w
    decreasing): the feasibility frontier of the spine tables, in O(L^2 |F|) integer operations
    without a memory dimension. The recursion is `branch_tables`' with "finite" for the values
    and the sub-chains' least memory `Mmin(i, j-1)` (`chain.min_memory`) for C(m, i, j-1)."""
    from ..chain.min_memory import _min_memory

    L = chain.length
    Mm, _ = _min_memory(chain)
    x, xbar, o_fa, o_b = ([int(v) for v in a] for a in (chain.x, chain.xbar, chain.o_fa, chain.o_b))
    F: list[list[list[Point]]] = [[[] for _ in range(L + 1)] for _ in TYPES]
    for i in range(L - 1, -1, -1):
        sweeps = spine_sweeps(chain, i)
        xb = xbar[i + 1]
        need = max(xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i])
        for t in TYPES:
            cands: list[Point] = []
            for j in range(i + 1, L + 1):
                gate = max(sweeps[j - i - 1], int(Mm[i, j - 1]))
                if j < L:
                    cands.extend((max(gate, a + x[j]), c + x[j], j, k) for k, (a, c, _, _) in enumerate(F[t][j]))
                elif t == CK:
                    cands.append((max(gate, x[L]), x[L], j, -1))
            if i + 1 < L:
                cands.extend((max(need, a + xb), c + xb, 0, k) for k, (a, c, _, _) in enumerate(F[t][i + 1]))
            elif t == TAPE:
                cands.append((max(need, xb), xb + x[L], 0, -1))
            front: list[Point] = []
            for point in sorted(cands):
                if not front or point[1] < front[-1][1]:
                    front.append(point)
            F[t][i] = front
    return F


@dataclass
class LeastMemory:
    """The smallest budget of a join-persistent schedule at exact sizes and a schedule of that class
    whose replay fits it (`least_memory`)."""

    budget: int
    schedule: JoinSchedule


def least_memory(join: Join, deadline: Deadline = _NO_LIMIT) -> LeastMemory | None:
    """The smallest budget (bytes) at which the join DP at exact sizes has a schedule, and one such
    schedule (not time-optimal), independent of the sizes' magnitude: the spines' frontiers
    (`spine_frontiers`), then a bisection on the budget over the join level, where at a fixed
    budget the least W of each (S, T) decides (a smaller W leaves more memory to every branch
    processed before and to the loss). None when no schedule of the class exists at any budget.
    O(3^k k) steps per budget tried; `deadline` is checked once per set S (`DeadlineExceeded`)."""
    k = join.k
    X0 = join.input_total()
    fronts = [spine_frontiers(c) for c in join.branches]
    xl = [int(c.x[c.length]) for c in join.branches]
    roots = [[(f[t][0], [p[0] for p in f[t][0]]) for t in TYPES] for f in fronts]
    if any(not f[CK][0] and not f[TAPE][0] for f in fronts):
        return None

    def plan(M: int) -> list[tuple[int, int, int]] | None:
        """(branch, type, frontier point) in backward order when something fits M, else None."""
        best: dict[tuple[frozenset, frozenset], tuple[int, Any]] = {(frozenset(), frozenset()): (0, None)}
        for size in range(k):
            for S in map(frozenset, combinations(range(k), size)):
                deadline.check()
                for T in _subsets(S):
                    if (S, T) not in best:
                        continue
                    W = best[(S, T)][0]
                    avail = M - X0 - W
                    for b in set(range(k)) - S:
                        for t in TYPES:
                            front, ms = roots[b][t]
                            n = bisect_right(ms, avail)
                            if n == 0:
                                continue
                            key = (S | {b}, T | {b} if t == CK else T)
                            w = W + front[n - 1][1]
                            if key not in best or w < best[key][0]:
                                best[key] = (w, ((S, T), b, t, n - 1))
        full = frozenset(range(k))
        for T in _subsets(full):
            got = best.get((full, T))
            if got is not None and X0 + got[0] + sum(xl[b] for b in T) + join.loss_overhead <= M:
                order, key = [], (full, T)
                while best[key][1] is not None:
                    prev, b, t, n = best[key][1]
                    order.append((b, t, n))
                    key = prev
                return order  # processed first = added last
        return None

    lo = X0
    hi = X0 + join.loss_overhead + sum(int(c.x.sum() + c.xbar.sum() + c.o_f.max(initial=0) + c.o_b.max(initial=0))
                                       for c in join.branches)
    found = plan(hi)
    while found is None and hi < 2**62:
        hi *= 2
        found = plan(hi)
    if found is None:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if plan(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    order = plan(hi)
    assert order is not None
    parts = {b: _frontier_spine_ops(join.branches[b], fronts[b], b, t, n) for b, t, n in order}
    ops: list[JOp] = []
    for b, _, _ in reversed(order):
        ops.extend(parts[b][0])
    ops.append(LOSS_OP)
    for b, _, _ in order:
        ops.extend(parts[b][1])
    return LeastMemory(hi, JoinSchedule(ops, join.lengths))


def _frontier_spine_ops(chain: Chain, F: list[list[list[Point]]], b: int, t: int, n: int
                        ) -> tuple[list[JOp], list[JOp]]:
    """(ops before the loss, ops after it) of branch `b` along frontier point n of F[t][0] (as
    `spine_ops`), the sub-chains run by their least-memory persistent schedules."""
    pre: list[JOp] = []
    tails: list[list[JOp]] = []
    i = 0
    while n >= 0 and i < chain.length:
        _, _, c, nxt = F[t][i][n]
        if c > 0:
            pre.append(JOp("F_ck", b, i))
            pre.extend(JOp("F_n", b, k) for k in range(i + 1, c))
            tails.append([JOp(kind, b, index) for kind, index in _least_memory_ops(chain, i, c - 1)])
            i = c
        else:
            pre.append(JOp("F_all", b, i))
            tails.append([JOp("B", b, i)])
            i += 1
        n = nxt
    return pre, [op for tail in reversed(tails) for op in tail]


def _least_memory_ops(chain: Chain, a: int, l: int) -> list[tuple[str, int]]:
    """(kind, stage) of the least-memory persistent schedule of the sub-chain (a, l), l < L, with
    a_a and delta_{l+1} resident (`chain.min_memory.min_memory_schedule` for a sub-chain)."""
    from ..chain.min_memory import ALL, LEAF, _min_memory

    _, ch = _min_memory(chain)
    ops: list[tuple[str, int]] = []
    stack: list[Any] = [(a, l)]
    while stack:
        item = stack.pop()
        if isinstance(item[0], str):
            ops.append(item)
            continue
        i, j = item
        c = int(ch[i, j])
        if c == LEAF:
            ops.extend([("F_all", i), ("B", i)])
        elif c == ALL:
            ops.append(("F_all", i))
            stack.append(("B", i))
            stack.append((i + 1, j))
        else:
            ops.append(("F_ck", i))
            ops.extend(("F_n", k) for k in range(i + 1, c))
            stack.append((i, c - 1))
            stack.append((c, j))
    return ops


# --------------------------------------------------------------------------- solver
def solve_join_dp(join: Join, budget: int, *, slots: int = 500, time_limit: float | None = None,
                  **_: Any) -> SolveResult:
    """Optimal join-persistent schedule (see the module docstring) for `budget` bytes.

    Status ``optimal`` for that class at the stated discretisation, ``infeasible`` when no
    schedule of the class fits the budget at exact sizes (``min_budget``: the least budget of the
    class, `least_memory`). At most `MAX_CELLS` cells keep the O(L^2 M^2) spine tables small;
    pass ``slots`` for more precision (it is lowered to the largest count whose tables have at
    most `MAX_CELLS` cells; the scope says which was used). When the sizes rounded up to slots
    leave no schedule, the answer is decided about the real budget (`rounding_retry`); the scope
    says what ran. A one-branch join is the chain problem of its branch and gets rotor's
    guarantee (`one_branch_never_worse`). The answer is never slower than the heuristics run
    with the same `slots` (`heuristics_never_worse`), also when the DP lowered its count.

    A join whose join level would take more than `MAX_JOIN_STEPS` steps even at `MIN_JOIN_SLOTS`
    slots (11 branches or more) is refused (`check_join_level`, `InputError`) when store-all does
    not fit. `time_limit` (seconds, None: none) is checked inside the spine tables, the join level
    and `least_memory`: at the limit the answer is the fastest heuristic's schedule, ``feasible``
    (`timed_out`), or ``timeout`` when none has one."""
    t0 = time.perf_counter()
    budget = int(budget)
    deadline = Deadline(time_limit, start=t0)
    try:
        result = _solve_join_dp(join, budget, int(slots), deadline)
    except DeadlineExceeded:
        result = timed_out(join, budget, int(slots), deadline)
    result.solve_time_s = time.perf_counter() - t0
    return result


def _solve_join_dp(join: Join, budget: int, slots: int, deadline: Deadline) -> SolveResult:
    """`solve_join_dp` within `deadline` (`DeadlineExceeded` at it, but for the least budget of an
    ``infeasible`` answer, left unknown then)."""
    result = _solve_join_dp_slots(join, budget, slots=slots, deadline=deadline)
    first_slots = int(result.details.get("slots", 0))  # `slots`, lowered by `dp_slots`
    if result.status == INFEASIBLE and first_slots:
        result = rounding_retry(join, budget, result, deadline)
    elif join.k == 1:
        result = one_branch_never_worse(join, budget, result)
    result = heuristics_never_worse(join, budget, result, slots)
    if result.status == INFEASIBLE and result.min_budget is None:
        try:
            least = least_memory(join, deadline)
        except DeadlineExceeded:
            return result
        result.min_budget = None if least is None else least.budget
    return result


def timed_out(join: Join, budget: int, slots: int, deadline: Deadline) -> SolveResult:
    """The answer when `deadline` came before the DP's: the fastest heuristic's schedule
    (`fastest_heuristic` with `slots`, a join-persistent schedule found in well under a second),
    ``feasible`` without a bound, or ``timeout`` when no heuristic has one (the DP's search was not
    finished, so nothing is proven)."""
    limit = f"the join DP did not finish within the time limit of {deadline.limit:g} s"
    best = fastest_heuristic(join, budget, slots)
    common: dict[str, Any] = {"problem": "join", "solver": "dp", "budget": budget}
    if best is None or best.schedule is None or best.objective is None:
        n = dp_slots(join, budget, int(slots or 0))  # the count the DP ran at (exact sizes for a budget <= slots)
        return SolveResult(status=TIMEOUT, scope=f"{CLASS}, {scope_text(n)}", message=f"{limit}; no heuristic "
                           "(equal, proportional, sequential) has a schedule that fits",
                           details={"timed_out": True, "slots": n}, **common)
    details = {"timed_out": True, "heuristic": {"solver": best.solver, "makespan": best.objective, **best.details},
               "recomputations": best.schedule.recomputations()}
    return SolveResult(status=FEASIBLE, objective=best.objective, peak_memory=best.peak_memory, schedule=best.schedule,
                       scope=f"the {best.solver} heuristic's schedule ({best.scope}); {limit}: no optimality claim",
                       message=f"{limit}; returned the {best.solver} heuristic's schedule", details=details, **common)


def rounding_retry(join: Join, budget: int, first: SolveResult, deadline: Deadline = _NO_LIMIT) -> SolveResult:
    """The answer when the DP at ``first.details["slots"]`` = N slots found nothing: the sizes
    rounded up to slots may have lost the only schedules that fit (a join-persistent schedule
    that fits the budget at exact sizes can need more than N slots), so ``infeasible`` at N slots
    says nothing about the real budget. In this order:

    1. one branch: the rotor DP on the branch (`branch_with_loss`, the same problem; `solve_rotor`
       with its own guards: exact sizes when its O(L^2 M) table is small, else its least-memory
       schedule), ``infeasible`` below `rotor_min_budget` (exact bytes, in ``min_budget``);
    2. the DP with exact sizes when its tables have at most `MAX_CELLS` cells;
    3. ``infeasible`` (about the real budget, ``min_budget`` given) when the budget is below the
       least budget of the class at exact sizes (`least_memory`, no table);
    4. the DP at the finest slot count `max_slots` (when finer than N): its schedule is
       ``optimal`` for that count (unless a heuristic's is faster: `heuristics_never_worse`);
    5. the DP with every size rounded *down* to the finest slots tried (`rounded_down`, a
       relaxation: every schedule of the class that fits the budget fits it): when its optimum
       replays within the budget at exact sizes it is ``optimal`` for the class at exact sizes;
    6. else the least-memory schedule of the class (`least_memory`), ``feasible``, with the
       relaxation's optimum as ``lower_bound`` (or a heuristic's faster schedule, the same bound).

    ``details["slots_tried"]`` lists the slot counts (0: exact sizes). Step 2 needs the join level at
    exact sizes within `MAX_JOIN_STEPS` too, and `max_slots` keeps it there in step 4; `deadline` is
    checked by the DPs and `least_memory` (`DeadlineExceeded`)."""
    n = int(first.details["slots"])
    if join.k == 1:
        return _one_branch_rotor(join, budget, n)
    tried = [n]
    cells = 2 * sum(c.length + 1 for c in join.branches) * (budget + 1) ** 2
    steps = join_steps(join.k, budget)
    if cells <= MAX_CELLS and steps <= MAX_JOIN_STEPS:
        res = _solve_join_dp_slots(join, budget, slots=0, deadline=deadline)
        res.scope = f"{CLASS}, exact sizes (the {n}-slot rounding left no schedule)"
        res.details.update(slots_tried=[n, 0], retried_exact_sizes=f"infeasible with sizes in {n} slots")
        return res
    least = least_memory(join, deadline)
    if least is None or budget < least.budget:
        first.scope = (f"{CLASS}, exact sizes (the least budget of the class, `least_memory`; the {n}-slot rounding "
                       "left no schedule)")
        first.min_budget = None if least is None else least.budget
        first.message = (f"no join-persistent schedule fits {budget}" if least is None else
                         f"no join-persistent schedule fits {budget}; the smallest feasible budget is {least.budget}")
        return first
    finest = effective_slots(budget, max_slots(join))
    if finest > n:
        tried.append(finest)
        res = _solve_join_dp_slots(join, budget, slots=finest, deadline=deadline)
        if res.status != INFEASIBLE:
            res.details["slots_tried"] = tried
            res.scope += f" (the {n}-slot rounding left no schedule)"
            return res
        n = finest
    details: dict[str, Any] = {"slots": n, "slots_tried": tried}
    why = f"the {'/'.join(map(str, tried))}-slot rounding left no schedule"
    too_large = (f"{cells:.3g} table cells, more than {MAX_CELLS:.3g}" if cells > MAX_CELLS else
                 f"{steps:.3g} join-level steps, more than {MAX_JOIN_STEPS:.3g}")  # the limit that skipped step 2
    down, cap = rounded_down(join, budget, n)
    tables = spine_tables(down, cap, deadline)
    relaxed = join_dp(down, cap, tables, deadline) if tables else None
    bound = None
    if relaxed is not None:
        schedule = plan_schedule(down, tables, relaxed)
        sim = simulate(join, schedule)
        sim.raise_if_invalid()
        bound = relaxed.value
        details["relaxation_bound"] = bound
        if sim.peak_memory <= budget and math.isclose(sim.makespan, bound, rel_tol=1e-9, abs_tol=1e-9):
            # the relaxation's optimum fits at exact sizes: nothing in the class is faster
            details.update(order=relaxed.order, recomputations=schedule.recomputations())
            return SolveResult(problem="join", solver="dp", status=OPTIMAL, objective=sim.makespan,
                               peak_memory=sim.peak_memory, schedule=schedule, budget=budget,
                               scope=f"{CLASS}, exact sizes (the optimum with every size rounded down to {n} slots "
                                     f"of the budget, a relaxation, fits the budget; {why})", details=details)
    sim = simulate(join, least.schedule)
    sim.raise_if_invalid()
    if sim.peak_memory > budget:
        raise RuntimeError(f"the least-memory join schedule peaks at {sim.peak_memory} > {least.budget}")
    details.update(recomputations=least.schedule.recomputations(), least_budget=least.budget)
    if bound is not None and sim.makespan <= bound * (1 + 1e-9) + 1e-9:  # it reaches the relaxation's bound
        return SolveResult(problem="join", solver="dp", status=OPTIMAL, objective=sim.makespan,
                           peak_memory=sim.peak_memory, schedule=least.schedule, budget=budget,
                           scope=f"{CLASS}, exact sizes (the least-memory schedule of the class reaches the optimum "
                                 f"with every size rounded down to {n} slots of the budget, a relaxation; {why})",
                           details=details)
    return SolveResult(problem="join", solver="dp", status=FEASIBLE, objective=sim.makespan,
                       peak_memory=sim.peak_memory, schedule=least.schedule, budget=budget,
                       lower_bound=None if bound is None else min(bound, sim.makespan),
                       scope=f"{CLASS}, exact sizes: the least-memory schedule of the class, not time-optimal ({why}; "
                             f"exact sizes need {too_large})",
                       message=f"{why} and exact sizes need {too_large}; returned the least-memory "
                               "join-persistent schedule, which fits", details=details)


#: relative tolerance of the makespan comparison with the heuristics (the same floats summed in another order)
REL_TOL = 1e-9


def proven_at_exact_sizes(result: SolveResult) -> bool:
    """Whether `result` is ``optimal`` for the class at exact sizes (or among all schedules): the DP
    at exact sizes (``details["slots"]`` 0), store-all (``lower_bound`` = objective) or the rounded-down
    relaxation's bound reached (``details["relaxation_bound"]``, `rounding_retry` steps 5 and 6). No
    heuristic (their schedules are in the class) can then be faster."""
    if result.status != OPTIMAL or result.objective is None:
        return False
    if result.lower_bound is not None and result.lower_bound >= result.objective * (1 - REL_TOL):
        return True
    return not int(result.details.get("slots", 0) or 0) or "relaxation_bound" in result.details


def fastest_heuristic(join: Join, budget: int, slots: int) -> SolveResult | None:
    """The fastest schedule of the heuristics (equal, proportional, sequential) run as they run on
    their own (`slots` slots, their retry with exact sizes or finer slots when the rounding leaves
    them none: `baselines.with_finer_retry`), or None when none finds one. Makespans are the
    simulator's at exact sizes."""
    from .baselines import solve_equal, solve_proportional, solve_sequential

    found = [r for fn in (solve_equal, solve_proportional, solve_sequential)
             if (r := fn(join, budget, slots=slots)).schedule is not None and r.objective is not None]
    return min(found, key=lambda r: float(r.objective or 0.0)) if found else None


def heuristics_never_worse(join: Join, budget: int, result: SolveResult, slots: int) -> SolveResult:
    """`result` unless a heuristic (`fastest_heuristic`), run with `slots` (the count asked for, which
    the DP may have lowered to `max_slots`), has a faster schedule; then that schedule, ``feasible``, the
    scope naming both. The heuristics' schedules are join-persistent, so the DP at N slots is never
    slower than theirs at N slots; but a heuristic that the N-slot rounding leaves no schedule
    retries with exact sizes (or finer slots) and can then be faster than the DP's N-slot optimum
    or its `rounding_retry` answer (finer slots, least-memory schedule). ``optimal`` for N slots
    stays only when the returned schedule is the DP's; `lower_bound` stays only when it bounds the
    class at exact sizes (`rounding_retry`'s relaxation)."""
    if result.schedule is None or result.objective is None or proven_at_exact_sizes(result):
        return result
    best = fastest_heuristic(join, budget, slots)
    if best is None or best.objective is None or float(best.objective) >= float(result.objective) * (1 - REL_TOL):
        return result
    first, target = float(result.objective), float(best.objective)
    assert best.schedule is not None
    bound = result.lower_bound if "relaxation_bound" in result.details else None
    details = {**{k: v for k, v in result.details.items() if k not in ("order", "ending")},
               "dp_makespan": first, "heuristic": {"solver": best.solver, "makespan": target, **best.details},
               "recomputations": best.schedule.recomputations()}
    return SolveResult(problem="join", solver="dp", status=FEASIBLE, objective=target, peak_memory=best.peak_memory,
                       schedule=best.schedule, budget=budget, min_budget=result.min_budget,
                       lower_bound=None if bound is None else min(bound, target),
                       scope=f"the {best.solver} heuristic's schedule ({best.scope}), faster at exact sizes than "
                             f"the DP's answer ({result.scope}: makespan {first:.6g}); no optimality claim",
                       message=f"the DP's schedule replays at {first:.6g}, slower than {best.solver}'s ({target:.6g}) "
                               f"at exact sizes; returned {best.solver}'s schedule",
                       solve_time_s=result.solve_time_s, details=details)


def rounded_down(join: Join, budget: int, slots: int) -> tuple[Join, int]:
    """(`join` with every size in slots of budget/slots bytes rounded *down*, exactly; the
    capacity in those slots). A relaxation of the DP at exact sizes: every check of the DP is
    a sum of sizes at most the budget, and floor(a / s) + floor(b / s) <= floor((a + b) / s), so
    every join-persistent schedule that fits the budget fits the capacity here."""
    frac = Fraction(budget / slots)
    num, den = frac.numerator, frac.denominator

    def down(a: np.ndarray) -> np.ndarray:
        arr = np.asarray(a)
        return np.array([(int(v) * den) // num for v in arr.ravel()], dtype=np.int64).reshape(arr.shape)

    branches = [replace(c, x=down(c.x), xbar=down(c.xbar), o_f=down(c.o_f), o_b=down(c.o_b), o_fa=down(c.o_fa),
                        o_fn=down(c.o_fn), o_bh=down(c.o_bh)) for c in join.branches]
    return (Join(branches, join.loss_time, (join.loss_overhead * den) // num, name=join.name, meta=dict(join.meta)),
            (budget * den) // num)


def _as_join(join: Join, budget: int, res: SolveResult, **changes: Any) -> SolveResult:
    """A chain solver's answer on `branch_with_loss(join, 0)` as the one-branch join's (the same
    problem): its schedule's ops on branch 0, the rest as given in `changes`."""
    schedule = None
    if res.schedule is not None:
        schedule = JoinSchedule([LOSS_OP if op.kind == LOSS_OP.kind else JOp(op.kind, 0, op.index)
                                 for op in res.schedule.ops], join.lengths)
    fields: dict[str, Any] = {"status": res.status, "objective": res.objective, "peak_memory": res.peak_memory,
                              "min_budget": res.min_budget, "scope": res.scope, "message": res.message,
                              "details": dict(res.details), "solve_time_s": res.solve_time_s, **changes}
    return SolveResult(problem="join", solver="dp", schedule=schedule, budget=budget, **fields)


def _one_branch_rotor(join: Join, budget: int, n: int) -> SolveResult:
    """Step 1 of `rounding_retry`: rotor (with its guards) on the one branch."""
    from ..chain.dp import solve_rotor
    from .instance import branch_with_loss

    rotor = solve_rotor(branch_with_loss(join, 0), budget, slots=n)
    scope = (f"join-persistent schedules of the one branch (the {n}-slot rounding left no schedule: the rotor DP "
             f"on the branch with the loss, the same problem): {rotor.scope}")
    res = _as_join(join, budget, rotor, scope=scope)
    res.details.update(order=[0], rotor_fallback=f"infeasible with sizes in {n} slots")
    return res


def one_branch_never_worse(join: Join, budget: int, result: SolveResult) -> SolveResult:
    """The answer for a one-branch join, never slower at exact sizes than the periodic, sqrt(L)
    and (homogeneous branch) Revolve schedules of its branch (`branch_with_loss`: the same problem), as rotor on that
    chain (`rotor_guard.never_worse`): when the slot rounding made the DP's schedule slower, the
    DP at finer slots or exact sizes, else the baseline's schedule (status ``feasible``). (When
    the rounding left no schedule at all, `rounding_retry` runs rotor on the branch instead.)"""
    from ..chain.rotor_guard import never_worse
    from .instance import branch_with_loss

    chain = branch_with_loss(join, 0)
    L = join.branches[0].length
    # the spine tables span memory values 0..M: M = s at s slots, the budget itself at exact sizes (`check_cells`)
    guarded = never_worse(chain, budget, result, int(result.details.get("slots", 0)),
                          lambda s: _solve_join_dp_slots(join, budget, slots=s),
                          lambda s: 2 * (L + 1) * (s + 1) ** 2, 2 * (L + 1) * (budget + 1) ** 2, MAX_CELLS)
    if guarded.problem == "join" or guarded.schedule is None:
        return guarded
    return _as_join(join, budget, guarded, status=FEASIBLE, scope=guarded.scope.replace("rotor's", "the join DP's"))


def value_tolerance(work: Join, makespan: float, schedule: JoinSchedule) -> float:
    """Bound (time unit) on |the DP's value - the replay's makespan| of `schedule`: the branches'
    drifts (`chain.dp.value_tolerance`: their rotor tables and their spines' sweeps are charged as
    differences of prefix sums of u_fn, which lose small times beside a large one), each over
    all of the schedule's ops and the whole makespan (its join-level sums included)."""
    return math.fsum(chain_value_tolerance(c, makespan, len(schedule.ops)) for c in work.branches)


def _solve_join_dp_slots(join: Join, budget: int, *, slots: int = 500, deadline: Deadline = _NO_LIMIT
                         ) -> SolveResult:
    """The join DP at `slots` slots (lowered by `dp_slots`; 0 or a budget of at most `slots`
    units: exact sizes), without the one-branch guard. `InputError` when store-all does not fit and
    the tables or the join level are too large (`check_cells`, `check_join_level`)."""
    t0 = time.perf_counter()
    budget = int(budget)
    slots = dp_slots(join, budget, int(slots or 0))
    work, M = discretise(join, budget, slots)
    scope = f"{CLASS}, {scope_text(slots)}"
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
    check_join_level(join, M, slots)
    tables = spine_tables(work, M, deadline)
    plan = join_dp(work, M, tables, deadline) if tables else None
    if plan is None:
        return SolveResult(status=INFEASIBLE, solve_time_s=time.perf_counter() - t0,
                           message=f"no join-persistent schedule fits {budget} at {scope_text(slots)}",
                           details={"slots": slots}, **common)
    schedule = plan_schedule(work, tables, plan)
    sim = simulate(join, schedule)
    sim.raise_if_invalid()
    drift = max(1e-9, value_tolerance(work, sim.makespan, schedule))
    if not math.isclose(sim.makespan, plan.value, rel_tol=1e-9, abs_tol=drift):
        raise RuntimeError(f"join DP value {plan.value} differs from its schedule's replay {sim.makespan}")
    if sim.peak_memory > budget:
        raise RuntimeError(f"join DP schedule peaks at {sim.peak_memory} > budget {budget}")
    status = OPTIMAL if math.isfinite(plan.value) else FEASIBLE
    return SolveResult(status=status, objective=sim.makespan, peak_memory=sim.peak_memory, schedule=schedule,
                       solve_time_s=time.perf_counter() - t0,
                       details={"slots": slots, "order": plan.order,
                                "ending": {b: ("ck" if t == CK else "tape") for b, (t, _, _) in plan.choices.items()},
                                "recomputations": schedule.recomputations()}, **common)
