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
take the peak of every c in 1..L (`revolve_peaks`: the simulator's charges summed over the
recursion's sub-problems, each (length, checkpoints, holds the loss) computed once; tests check
it equals the replay, `revolve_peak`) and use the largest c whose peak fits the budget: the
fastest, as p(L, c) does not grow with c. The peak need not grow with c: when o_fn > o_fa an
F_n, which holds the working activation and its successor, can be the peak, and fewer
checkpoints mean longer advances (example: sizes 5, tape 5, o_fn = 30, o_fa = 0, L = 4: peaks
50, 45, 50, 50 for c = 1..4). So every c is checked, and the least budget is the least peak over
all c, not always c = 1's. When o_fn <= o_fa each advance is followed, with at least its state
held, by a turn whose F_all charges at least as much (xbar >= x), so the turns set the peak.
Without overheads and for L >= 2 the peak is (min(c, L - 1) + 3) x + xbar: c checkpoints, the
working a_k, delta_{k+1} and delta_k while B(k) runs, and the tape (tests check this formula).

**What is proven.** p(L, c) is optimal for Revolve's model (fixed c, every step costs the
same, no tape kept beyond a turn). It is not optimal for the rotor model of this project: the
persistent DP (`solvers.chain.dp`) may keep tapes (F_all ahead of the turn) and uses every
byte of the budget, so at the same budget rotor (exact sizes) <= Revolve; tests check this.

**Against periodic** (docs/chain.md "Revolve and periodic"). Revolve records each tape only at
its turn, so it runs L + p(L, c) >= 2L - 1 forwards for every c; periodic keeps the tapes of its
last segment (a taped forward costs an advance here, and a tape also serves as the activation)
and runs at most 2L - 1. On homogeneous chains periodic is never slower when some segment count
fits. When o_fn <= o_fa (one forward overhead included) Revolve's peak with c = 1 is at most
periodic's least (tested), so below that only Revolve runs; when o_fn > o_fa Revolve's least peak
may exceed periodic's least (Revolve advances with F_n for L >= 2, store-all runs none), by at most
o_fn - o_fa (lower o_fn to o_fa: Revolve's peaks fall by at most that, periodic's do not rise).
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


def _relative_peaks(chain: Chain) -> Callable[[int, int, bool], int]:
    """rel(l, cc, last): how far above the memory at its start the Revolve sub-problem of l steps
    with cc checkpoints peaks on homogeneous `chain` (bytes), by the simulator's rules; `last`: it
    holds the last step (its turn runs the loss; no gradient held before). The sub-problem starts
    with a_i held (and delta_n unless `last`) and ends with delta_i instead: its memory changes by
    `net(last)`. It depends on (l, cc, last) alone, and few such triples occur (about 5000 for
    every c at L = 1000), so each is computed once, on an explicit stack (no recursion limit)."""
    x, xbar = int(chain.x[0]), int(chain.xbar[1])
    o_fa, o_fn, o_b, o_loss = int(chain.o_fa[0]), int(chain.o_fn[0]), int(chain.o_b[0]), int(chain.o_b[chain.length])

    def net(last: bool) -> int:  # a_i and delta_n (none when last) out, delta_i in
        return 0 if last else -x

    def advance(m: int) -> int:  # m >= 1 steps from a_i: F_ck(i) adds a_{i+1}; each F_n then holds a_q and a_{q+1}
        return x + o_fn if m == 1 else 2 * x + o_fn

    def turn(last: bool) -> int:  # F_all(k), [the loss], B(k) at a_k held (and delta_{k+1} unless last)
        if last:
            return max(xbar + o_fa, xbar + x + o_loss, xbar + 2 * x + o_b)
        return max(xbar + o_fa, xbar + x + o_b)

    def key(l: int, cc: int, last: bool) -> tuple[int, int, bool]:
        return l, min(cc, l), last  # cc >= l - 1 gives the same schedule (j = 1 all the way down)

    memo: dict[tuple[int, int, bool], int] = {}

    def rel(l: int, cc: int, last: bool) -> int:
        stack = [key(l, cc, last)]
        while stack:
            l_, cc_, last_ = top = stack[-1]
            if top in memo:
                stack.pop()
            elif l_ == 1:
                memo[top] = turn(last_)
            elif cc_ == 1:  # advance to a_{n-1} and turn, then from a_i (held, with one delta) to each k < n - 1
                first = max(advance(l_ - 1), x + turn(last_))
                after = x + net(last_)
                rest = max(after + turn(False), after + x + turn(False), after + advance(l_ - 2)) if l_ >= 3 \
                    else after + turn(False)
                memo[top] = max(first, rest)
            else:  # advance j, keep a_{i+j}, reverse (i+j .. n-1) with cc - 1, then (i .. i+j-1) with cc
                j = revolve_split(l_, cc_)
                kids = key(l_ - j, cc_ - 1, last_), key(j, cc_, False)
                missing = [kid for kid in kids if kid not in memo]
                if missing:
                    stack += missing
                    continue
                memo[top] = max(advance(j), x + memo[kids[0]], x + net(last_) + memo[kids[1]])
        return memo[key(l, cc, last)]

    return rel


def revolve_peaks(chain: Chain) -> list[int]:
    """Peak memory (bytes) of Revolve's schedule for each c = 1..L (index c - 1) on homogeneous
    `chain`, as the simulator charges it (`revolve_peak`; tests check they agree): about 0.2 s for
    all c at L = 1000, where L replays take about a minute (c = 1 alone runs L (L + 1) / 2 forwards).
    Not monotone in c when o_fn > o_fa (module docstring)."""
    L = chain.length
    if L < 1:
        raise ValueError("Revolve needs at least one stage")
    rel = _relative_peaks(chain)
    x0 = int(chain.x[0])
    return [x0 + max(0, rel(L, c, True)) for c in range(1, L + 1)]


def revolve_checkpoints(chain: Chain, budget: int, peaks: list[int] | None = None) -> int | None:
    """The largest c in 1..L whose Revolve schedule fits `budget` (`peaks`: `revolve_peaks(chain)`,
    computed when None), or None. Every c is checked: the peak need not grow with c. The largest
    fitting c is the fastest one: the makespan L u_fa + p(L, c) u_fn + L u_b + u_b[L] does not
    grow with c, as p(L, c) does not (c + 1 checkpoints can leave one unused; tests check it)."""
    peaks = revolve_peaks(chain) if peaks is None else peaks
    fits = [c for c, peak in enumerate(peaks, start=1) if peak <= budget]
    return max(fits) if fits else None


def solve_revolve(chain: Chain, budget: int, **_: Any) -> SolveResult:
    """Revolve with as many checkpoints as the budget allows (homogeneous chains only)."""
    t0 = time.perf_counter()
    if not chain.is_homogeneous():
        raise InputError("Revolve needs a homogeneous chain (identical stages and x[0] = x[i]); "
                         f"use {flag('solver', 'rotor')} for heterogeneous chains", field=flag("solver"))
    L = chain.length
    budget = int(budget)
    peaks = revolve_peaks(chain)
    need = min(peaks)  # the least budget at which some c runs (not always c = 1: o_fn > o_fa)
    fewest = peaks.index(need) + 1
    c = revolve_checkpoints(chain, budget, peaks)
    scope = ("Revolve (optimal number of forwards for its homogeneous model with c checkpoints; "
             "no optimality claim for this memory model)")
    if c is None:
        return SolveResult(problem="chain", solver="revolve", status=INFEASIBLE, budget=budget, min_budget=need,
                           scope=scope, solve_time_s=time.perf_counter() - t0,
                           message=f"Revolve needs {need} (its least peak, with c={fewest} checkpoints) "
                                   f"> budget {budget}")
    schedule = revolve_schedule(L, c)
    sim = simulate(chain, schedule, budget).raise_if_invalid()
    if sim.peak_memory != peaks[c - 1]:  # revolve_peaks must charge what the simulator does
        raise RuntimeError(f"Revolve's peak with c={c}: {peaks[c - 1]} by sub-problems, {sim.peak_memory} replayed")
    forwards = L + revolve_forwards(L, c)
    return SolveResult(problem="chain", solver="revolve", status=FEASIBLE, objective=sim.makespan,
                       peak_memory=sim.peak_memory, schedule=schedule, budget=budget,
                       min_budget=need, scope=scope.replace("with c", f"with c={c}"),
                       solve_time_s=time.perf_counter() - t0,
                       details={"checkpoints": c, "forwards": forwards,
                                "repetitions": repetitions(L, c) if L > 1 else 0})
