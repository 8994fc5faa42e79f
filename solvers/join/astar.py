"""Exact methods for small join networks.

``solve_exact`` -- an exact formulation of the *whole* join problem (every schedule the join
simulator accepts: forwards of several branches interleaved, backward phases interleaved,
recomputation in any pattern, non-persistent schedules) as a shortest path: states are the
simulator's states (per branch: the standalone activations, the tapes and how far its backward
has gone), arcs are operations whose memory while running fits the budget, arc lengths are
their times. A* with an admissible, consistent bound (pending backward times, the loss, and one
F_all(i) for each pending B(i) whose tape is missing) returns a proven optimum. Pruned arcs
are only dominated ones, which no optimal schedule needs: an F_all(i) or F_ck(i) whose output no
pending operation uses, an F_ck(i) beside the tape abar_{i+1} (a standalone copy of an activation
the tape holds until B(i+1) or the loss frees the copy), F_n(0) (it frees the input, which B(0)
needs and nothing recomputes) and an F_n that frees no standalone a_i (it is F_ck). Every other
F_n(i) is an arc, also beside the tape abar_{i+1}: it is the only operation that frees a
standalone a_i before B(i) (F_all(i) then F_n(i) drops a_i before the loss).
Status ``optimal`` when the search completes (scope: all schedules of the join simulator),
``infeasible`` when it proves none fits, ``feasible`` (the DP's schedule, with the search's
best bound) or ``timeout`` when it hits `time_limit` or `max_states`. Tiny instances only
(the state space grows like 4^(sum L_b)). The search is one deterministic thread without a
backend: the exact layer's ``workers``, ``seed``, ``verbose`` and ``memory_gb`` mean nothing to
it and are refused (`OPTIONS_NOT_TAKEN`, `check_options`).

``enumerate_class`` -- exhaustive enumeration of the DP's model (join-persistent schedules,
`solvers.join.dp`): every backward order and every persistent rotor tree of every branch,
each candidate replayed by the simulator. Used by the tests to certify the DP.
"""

from __future__ import annotations

import heapq
import math
import time
from itertools import permutations, product
from typing import Any

from ..discretize import scope_text
from ..errors import InputError, flag, option_field
from ..exact.cpsat_runner import check_first
from ..exact.layer import exact_solver, same_or_less
from ..exact.options import ALIASES, Deadline, ExactOptions
from ..result import INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .cpsat import FAST
from .instance import Join
from .schedule import LOSS_OP, JoinSchedule, JOp
from .simulator import simulate

DEFAULT_TIME_LIMIT = 60.0
MAX_STATES = 2_000_000


def _lower(join: Join, state: tuple, loss_done: bool) -> float:
    h = 0.0 if loss_done else join.loss_time
    for c, (_, T, p) in zip(join.branches, state):
        for i in range(min(p, c.length)):
            h += float(c.u_b[i])
            if not (T >> (i + 1)) & 1:  # F_all(i) must still run: its time u_fa
                h += float(c.u_fa[i])
    return h


def search(join: Join, M: int, *, time_limit: float = DEFAULT_TIME_LIMIT, max_states: int = MAX_STATES,
           cap: float = math.inf) -> tuple[str, float, list[JOp] | None, float]:
    """A* over simulator states under memory M (the instance's units), expanding only states
    whose bound is below `cap` (a known makespan; "infeasible" then means nothing beats it).

    Returns (status, value, ops, bound): status "optimal" (value, ops), "infeasible", or
    "limit" (bound = the least f-value still open, a lower bound on the optimum)."""
    t0 = time.perf_counter()
    k = join.k
    br = join.branches
    Ls = [c.length for c in br]
    x = [[int(v) for v in c.x] for c in br]
    xb = [[int(v) for v in c.xbar] for c in br]
    ofa = [[int(v) for v in c.o_fa] for c in br]  # F_all's forward overhead
    ofn = [[int(v) for v in c.o_fn] for c in br]  # F_ck's and F_n's
    ob = [[int(v) for v in c.o_b] for c in br]
    ufa = [[float(v) for v in c.u_fa] for c in br]  # F_all's forward time
    ufn = [[float(v) for v in c.u_fn] for c in br]  # F_ck's and F_n's
    ub = [[float(v) for v in c.u_b] for c in br]
    start = tuple((1, 0, Ls[b] + 1) for b in range(k))
    mem0 = join.input_total()
    if mem0 > M:
        return "infeasible", math.inf, None, math.inf
    dist: dict[tuple, float] = {start: 0.0}
    parent: dict[tuple, tuple[tuple | None, JOp | None]] = {start: (None, None)}
    heap = [(_lower(join, start, False), 0.0, 0, start, mem0)]
    counter = 1
    while heap:
        fval, g, _, s, mem = heapq.heappop(heap)
        if g > dist.get(s, math.inf):
            continue
        if same_or_less(cap, fval):
            break  # nothing left beats the cap (relative, no absolute floor: times of 1e-12 units too)
        if all(p == 0 for (_, _, p) in s):
            ops: list[JOp] = []
            cur: tuple | None = s
            while cur is not None:
                prev, op = parent[cur]
                if op is not None:
                    ops.append(op)
                cur = prev
            return "optimal", g, ops[::-1], g
        if len(dist) > max_states or time.perf_counter() - t0 > time_limit:
            return "limit", math.inf, None, fval
        loss_done = s[0][2] <= Ls[0]
        succ: list[tuple[JOp, tuple, int, float]] = []
        for b in range(k):
            A, T, p = s[b]
            L = Ls[b]
            for i in range(L):
                if not ((A >> i) & 1 or (T >> i) & 1):
                    continue
                if i < p and not (T >> (i + 1)) & 1:  # F_all(i): its tape serves the pending B(i)
                    during = mem + xb[b][i + 1] + ofa[b][i]
                    if during <= M:
                        succ.append((JOp("F_all", b, i), _set(s, b, (A, T | 1 << (i + 1), p)),
                                     mem + xb[b][i + 1], ufa[b][i]))
                if (A >> (i + 1)) & 1:  # the simulator's rule: F_ck / F_n never re-create a standalone a_{i+1}
                    continue
                if mem + x[b][i + 1] + ofn[b][i] > M:
                    continue
                if i + 1 <= p - 1 and not (T >> (i + 1)) & 1:  # F_ck(i): a_{i+1} serves a pending op, no tape has it
                    succ.append((JOp("F_ck", b, i), _set(s, b, (A | 1 << (i + 1), T, p)),
                                 mem + x[b][i + 1], ufn[b][i]))
                # F_n(i) whenever it frees a standalone a_i, also beside the tape abar_{i+1} (F_all(i) F_n(i) drops
                # a_i before the loss) or past B(i+1); i = 0 would free the input, which nothing recomputes
                if i >= 1 and (A >> i) & 1:
                    succ.append((JOp("F_n", b, i), _set(s, b, ((A | 1 << (i + 1)) & ~(1 << i), T, p)),
                                 mem + x[b][i + 1] - x[b][i], ufn[b][i]))
            if 1 <= p <= L and (T >> p) & 1 and ((A >> (p - 1)) & 1 or (T >> (p - 1)) & 1):
                i = p - 1
                during = mem + x[b][i] + ob[b][i]
                if during <= M:
                    after = mem + x[b][i] - xb[b][p] - x[b][p] - (x[b][i] if (A >> i) & 1 else 0)
                    succ.append((JOp("B", b, i), _set(s, b, (A & ~(1 << i), T & ~(1 << p), i)), after, ub[b][i]))
        if not loss_done and all(((A >> Ls[b]) & 1 or (T >> Ls[b]) & 1) for b, (A, T, _) in enumerate(s)):
            during = mem + sum(x[b][Ls[b]] for b in range(k)) + join.loss_overhead
            if during <= M:
                after = mem + sum(x[b][Ls[b]] - (x[b][Ls[b]] if (s[b][0] >> Ls[b]) & 1 else 0) for b in range(k))
                new = tuple((A & ~(1 << Ls[b]), T, Ls[b]) for b, (A, T, _) in enumerate(s))
                succ.append((LOSS_OP, new, after, join.loss_time))
        for op, s2, mem2, dt in succ:
            g2 = g + dt
            if g2 < dist.get(s2, math.inf) - 1e-12:
                dist[s2] = g2
                parent[s2] = (s, op)
                ld = s2[0][2] <= Ls[0]
                heapq.heappush(heap, (g2 + _lower(join, s2, ld), g2, counter, s2, mem2))
                counter += 1
    return "infeasible", math.inf, None, math.inf


def _set(s: tuple, b: int, v: tuple) -> tuple:
    return s[:b] + (v,) + s[b + 1 :]


#: the exact layer's options the A* search has no use for (one deterministic thread, no backend, no
#: model to size): given a value, each is an `InputError` (`check_options`) rather than ignored
OPTIONS_NOT_TAKEN = ("workers", "seed", "verbose", "memory_gb")


def check_options(_join: Join, **kw: Any) -> None:
    """`InputError` naming the first option of `OPTIONS_NOT_TAKEN` (or an older spelling, `ALIASES`)
    given a value other than None; before the warm start (`check_first`)."""
    for key, value in kw.items():
        if ALIASES.get(key, key) in OPTIONS_NOT_TAKEN and value is not None:
            raise InputError("not taken by the join's exact A* search (one deterministic thread, no backend log, "
                             f"no model to size); {flag('solver', 'cpsat')} runs a CP-SAT model",
                             field=option_field(key))


@check_first(check_options)
@exact_solver("join", "exact", FAST, least=lambda join: join.total_time())
def solve_exact(join: Join, budget: int, *, options: ExactOptions, deadline: Deadline,
                seed: SolveResult | None = None, max_states: int = MAX_STATES, **_: Any) -> SolveResult:
    """Proven optimum over all schedules of the join simulator (A*, tiny instances), with the
    exact sizes (options ``workers``, ``seed``, ``verbose`` and ``memory_gb`` are refused,
    `check_options`): the search never needs a discretisation, so ``options.slots`` only matters to
    the fast solvers that seed it. The seed's makespan caps the search (states whose bound
    exceeds it are never expanded: the seed is returned if nothing beats it); at the time limit
    or `max_states` the referee of the exact layer returns the seed's schedule as ``feasible``."""
    budget = int(budget)
    left = deadline.left()
    cap = seed.objective if seed is not None and seed.objective is not None else math.inf
    status, value, ops, bound = search(join, budget, time_limit=math.inf if left is None else max(0.0, left),
                                       max_states=max_states, cap=cap)
    scope = f"all schedules of the join simulator (exhaustive A* search), {scope_text(0)}"
    common: dict[str, Any] = {"problem": "join", "solver": "exact", "budget": budget, "scope": scope,
                              "details": {"slots": 0}}
    if status == "optimal":
        schedule = JoinSchedule(ops or [], join.lengths)
        sim = simulate(join, schedule).raise_if_invalid()
        return SolveResult(status=OPTIMAL, objective=sim.makespan, peak_memory=sim.peak_memory, schedule=schedule,
                           lower_bound=value, **common)
    if status == "infeasible" and seed is not None:  # nothing beats the seed: it is optimal
        return SolveResult(status=OPTIMAL, objective=seed.objective, peak_memory=seed.peak_memory,
                           schedule=seed.schedule, lower_bound=seed.objective,
                           message=f"the search proves that nothing beats {seed.solver}'s schedule", **common)
    if status == "infeasible":
        return SolveResult(status=INFEASIBLE, message=f"no schedule fits {budget} ({scope_text(0)})", **common)
    lb = min(bound, cap) if math.isfinite(bound) else None
    return SolveResult(status=TIMEOUT, lower_bound=lb, message="search limit reached before a proof", **common)


#: read by the option lists (`solver_parameters`): the exact layer's options this solver refuses
solve_exact.options_not_taken = OPTIONS_NOT_TAKEN  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the DP's class
def _trees(L: int, i: int, l: int, memo: dict) -> list[list[tuple[str, int]]]:
    """All persistent rotor schedules of sub-chain (i, l), l < L (delta_{l+1} given)."""
    key = (i, l)
    if key in memo:
        return memo[key]
    out: list[list[tuple[str, int]]] = []
    if i == l:
        out.append([("F_all", i), ("B", i)])
    else:
        for t in _trees(L, i + 1, l, memo):
            out.append([("F_all", i)] + t + [("B", i)])
        for j in range(i + 1, l + 1):
            seg = [("F_ck", i)] + [("F_n", q) for q in range(i + 1, j)]
            for t1 in _trees(L, j, l, memo):
                for t2 in _trees(L, i, j - 1, memo):
                    out.append(seg + t1 + t2)
    memo[key] = out
    return out


def spines(L: int, i: int = 0, memo: dict | None = None) -> list[tuple[list[tuple[str, int]], list[tuple[str, int]]]]:
    """All (before-loss, after-loss) splits of the persistent schedules of (i, L) (the loss is the leaf)."""
    memo = {} if memo is None else memo
    out = []
    if i + 1 == L:
        out.append(([("F_all", i)], [("B", i)]))
    else:
        for pre, post in spines(L, i + 1, memo):
            out.append(([("F_all", i)] + pre, post + [("B", i)]))
    for j in range(i + 1, L + 1):
        seg = [("F_ck", i)] + [("F_n", q) for q in range(i + 1, j)]
        tails = _trees(L, i, j - 1, memo)
        if j == L:
            out.extend((seg, t) for t in tails)
        else:
            for pre, post in spines(L, j, memo):
                out.extend((seg + pre, post + t) for t in tails)
    return out


def enumerate_class(join: Join, budget: int, *, max_candidates: int = 2_000_000) -> tuple[float, JoinSchedule | None]:
    """Best join-persistent schedule by enumeration, each candidate replayed by the simulator
    (exact sizes). Forward sweeps run in the reverse of the backward order, as in the DP."""
    per_branch = [spines(c.length) for c in join.branches]
    total = math.factorial(join.k) * math.prod(len(s) for s in per_branch)
    if total > max_candidates:
        raise ValueError(f"{total} candidates: too many to enumerate")
    best: tuple[float, JoinSchedule | None] = (math.inf, None)
    for order in permutations(range(join.k)):
        for combo in product(*(per_branch[b] for b in order)):
            ops: list[JOp] = []
            for b, (pre, _) in reversed(list(zip(order, combo))):
                ops += [JOp(kind, b, i) for kind, i in pre]
            ops.append(LOSS_OP)
            for b, (_, post) in zip(order, combo):
                ops += [JOp(kind, b, i) for kind, i in post]
            sched = JoinSchedule(ops, join.lengths)
            sim = simulate(join, sched, budget)
            if sim.valid and sim.makespan < best[0] - 1e-12:
                best = (sim.makespan, sched)
    return best
