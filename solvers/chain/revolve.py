"""Revolve: binomial checkpointing on homogeneous chains (Griewank & Walther, ACM TOMS 26(1),
2000, Algorithm 799).

**Revolve's model.** l identical steps, c checkpoint slots (the initial state a_0 occupies one),
reversal of step k = record it (a taped forward) then its adjoint. The least number of
*advances* (untaped forward steps, on top of the l recording ones) is the binomial optimum

    beta(c, r) = binom(c + r, c),
    r = r(l, c): the repetition number with beta(c, r - 1) < l <= beta(c, r),
    p(l, c) = r * l - beta(c + 1, r - 1)          (p(1, c) = 0; p(l, 1) = l (l - 1) / 2).

The schedule: with a_i checkpointed and steps i..n-1 to reverse, if one step is left, turn;
with one checkpoint, advance from a_i to each k = n-1 .. i and turn there; otherwise advance
j steps (j in Griewank's optimal range, `revolve_split`), keep a_{i+j} as a new checkpoint,
reverse (i+j .. n-1) with c - 1 checkpoints, then (i .. i+j-1) with c.

**On our ops** (`solvers.chain.schedule`, stages = Revolve's steps, loss = stage L): an advance
from checkpoint a_i to a_k is F_ck(i) F_n(i+1) .. F_n(k-1) (a_i stays, a_k is stored); a turn
at step k is F_all(k) B(k) (F_all(L-1) Loss B(L-1) for the last step, the loss being the start
of the adjoint). B(k) frees a standalone a_k, so checkpoints are released as in Revolve. So the
number of forward operations is exactly L + p(L, c) (L F_all, p(L, c) F_ck / F_n), and the
makespan ``L u_fa + p(L, c) u_fn + L u_b + u_b[L]`` (``(L + p(L, c)) u_f + ..`` with one forward time).

**Budget -> c.** Checkpoints are activations a_j of x bytes; besides them the simulator charges
the working activation, the gradients delta, the tape xbar of the turn and the overheads. We
replay the Revolve schedule of each c in the simulator and use the largest c (at most L) whose
peak fits the budget (binary search: the peak is non-decreasing in c, `revolve_peak`). Without
overheads and for L >= 2 the peak is (min(c, L - 1) + 3) x + xbar: c checkpoints, the working
a_k, delta_{k+1} and delta_k while B(k) runs, and the tape (tests check this formula).

**What is proven.** p(L, c) is optimal for Revolve's model (fixed c, every step costs the
same, no tape kept beyond a turn). It is not optimal for the rotor model of this project: the
persistent DP (`solvers.chain.dp`) may keep tapes (F_all ahead of the turn) and uses every
byte of the budget, so at the same budget rotor (exact sizes) <= Revolve; tests check this.

**Against periodic** (docs/chain.md "Revolve and periodic"). Revolve records each tape only at
its turn, so it runs L + p(L, c) >= 2L - 1 forwards for every c; periodic keeps the tapes of its
last segment (a taped forward costs an advance here, and a tape also serves as the activation)
and runs at most 2L - 1. On homogeneous chains periodic is never slower when some segment count
fits; Revolve's least peak (c = 1) is at most periodic's least, so below that only Revolve runs.
"""

from __future__ import annotations

import time
from math import comb
from typing import Any

from ..errors import InputError, flag
from ..result import FEASIBLE, INFEASIBLE, SolveResult
from .instance import Chain
from .schedule import Bwd, F_all, F_ck, F_n, Loss, Op, Schedule, unfold
from .simulator import simulate


def beta(c: int, r: int) -> int:
    """binom(c + r, c): the most steps c checkpoints reverse with r repetitions (0 for r < 0)."""
    return comb(c + r, c) if r >= 0 else 0


def repetitions(l: int, c: int) -> int:
    """r(l, c): the least r with l <= beta(c, r)."""
    if c < 1:
        raise ValueError("Revolve needs at least one checkpoint (the input)")
    r = 0
    while beta(c, r) < l:
        r += 1
    return r


def revolve_forwards(l: int, c: int) -> int:
    """p(l, c) = r l - beta(c + 1, r - 1): least advances (untaped forward steps) to reverse l
    steps with c checkpoints (Griewank's binomial optimum)."""
    if l <= 1:
        return 0
    r = repetitions(l, c)
    return r * l - beta(c + 1, r - 1)


def revolve_split(l: int, c: int) -> int:
    """An optimal first advance j (1 <= j < l) for l >= 2 steps and c >= 2 checkpoints:
    j + p(l - j, c - 1) + p(j, c) = p(l, c). Griewank's range is
    max(beta(c, r-2), l - beta(c-1, r)) <= j <= min(beta(c, r-1), l - beta(c-1, r-1));
    we take its upper end."""
    r = repetitions(l, c)
    hi = min(beta(c, r - 1), l - beta(c - 1, r - 1), l - 1)
    return max(hi, 1)


def _advance(i: int, k: int) -> list[Op]:
    return [F_ck(i)] + [F_n(q) for q in range(i + 1, k)] if k > i else []


def _turn(k: int, L: int) -> list[Op]:
    return [F_all(k), Loss(L), Bwd(k)] if k == L - 1 else [F_all(k), Bwd(k)]


def revolve_schedule(L: int, c: int) -> Schedule:
    """Revolve's schedule for L stages and c >= 1 checkpoints (a_0 included), on our ops."""
    if c < 1:
        raise ValueError("Revolve needs at least one checkpoint (the input)")

    def expand(item: tuple[int, int, int]) -> list[Any]:  # stages i..n-1 with cc checkpoints, in order
        i, n, cc = item
        if n - i == 1:
            return _turn(i, L)
        if cc == 1:
            return [op for k in range(n - 1, i - 1, -1) for op in _advance(i, k) + _turn(k, L)]
        j = revolve_split(n - i, cc)
        return [*_advance(i, i + j), (i + j, n, cc - 1), (i, i + j, cc)]

    return Schedule(unfold((0, L, min(c, L)), expand), L)


def revolve_peak(chain: Chain, c: int) -> int:
    """Peak memory (simulator) of `revolve_schedule(L, c)` on `chain`."""
    return simulate(chain, revolve_schedule(chain.length, c)).raise_if_invalid().peak_memory


def revolve_checkpoints(chain: Chain, budget: int) -> int | None:
    """The largest c in 1..L whose Revolve schedule fits `budget`, or None (binary search on the
    non-decreasing peak(c))."""
    L = chain.length
    if revolve_peak(chain, 1) > budget:
        return None
    lo, hi = 1, max(L, 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if revolve_peak(chain, mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def solve_revolve(chain: Chain, budget: int, **_: Any) -> SolveResult:
    """Revolve with as many checkpoints as the budget allows (homogeneous chains only)."""
    t0 = time.perf_counter()
    if not chain.is_homogeneous():
        raise InputError("Revolve needs a homogeneous chain (identical stages and x[0] = x[i]); "
                         f"use {flag('solver', 'rotor')} for heterogeneous chains", field=flag("solver"))
    L = chain.length
    budget = int(budget)
    c = revolve_checkpoints(chain, budget)
    scope = ("Revolve (optimal number of forwards for its homogeneous model with c checkpoints; "
             "no optimality claim for this memory model)")
    if c is None:
        need = revolve_peak(chain, 1)
        return SolveResult(problem="chain", solver="revolve", status=INFEASIBLE, budget=budget, min_budget=need,
                           scope=scope, solve_time_s=time.perf_counter() - t0,
                           message=f"Revolve with one checkpoint needs {need} > budget {budget}")
    schedule = revolve_schedule(L, c)
    sim = simulate(chain, schedule, budget).raise_if_invalid()
    forwards = L + revolve_forwards(L, c)
    return SolveResult(problem="chain", solver="revolve", status=FEASIBLE, objective=sim.makespan,
                       peak_memory=sim.peak_memory, schedule=schedule, budget=budget,
                       min_budget=revolve_peak(chain, 1), scope=scope.replace("with c", f"with c={c}"),
                       solve_time_s=time.perf_counter() - t0,
                       details={"checkpoints": c, "forwards": forwards,
                                "repetitions": repetitions(L, c) if L > 1 else 0})
