"""The join DP's tables and join level, made faster without changing an answer (solvers/join/dp.py).

On byte-sized joins of 2-3 branches the DP at 500 slots can find nothing (the rounding), and its
rounding retry solves again at the finest slot count (815-1094 slots here) and with the sizes rounded
down: three rounds of spine tables V^t(i, m, w) over every (m, w) in 0..M, and a join level that looped
over W in Python. The join level only reads a branch's table at m, w <= M - X0 with w <= m, identical
branches (a Siamese join's) have identical tables, and the join level's min over W + w is one array
operation. The structural test counts the spine-table entries the retry fills (no timing); the others
check the answers against the tree before the change (recorded below) and against the dense recursion.
"""

from __future__ import annotations

import hashlib
import math
from itertools import combinations
from typing import Any

import numpy as np
import pytest
from memsched.solvers.join import dp
from memsched.solvers.join.generate import random_join
from memsched.solvers.join.instance import Join
from memsched.solvers.join.schedule import store_all_schedule
from memsched.solvers.join.simulator import simulate


def _siamese() -> Join:
    """Two identical 3-stage branches, sizes of 1e5-1e7 bytes."""
    chain = random_join([3], 4, size_range=(100_000, 10_000_000), overhead=0.5).branches[0]
    return Join.from_chains([chain, chain], loss_time=1.0, name="siamese")


JOINS = {
    "byte23": lambda: random_join([2, 3], 0, size_range=(100_000, 10_000_000), overhead=0.5),
    "byte222": lambda: random_join([2, 2, 2], 1, size_range=(100_000, 10_000_000), overhead=0.5),
    "siamese": _siamese,
    "unit": lambda: random_join([3, 2, 2], 5, size_range=(1, 10), overhead=1.0, mode_overheads=True, mode_times=True,
                                integer_times=True, loss_overhead=2),
}

#: (join, budget, slots, status, makespan, peak, min_budget, sha1 of the schedule's ops), from the tree before
#: the change; the first three are at the least budget, where the 500-slot rounding leaves no schedule
ANSWERS = [
    ("byte23", 54884258, 500, "optimal", 45.39148598353235, 54884258, None, "21364144d2251e37"),  # [500, 924]
    ("byte222", 58879736, 500, "feasible", 52.661843355854536, 58879736, None, "bd602b26621cd825"),  # [500, 815]
    ("siamese", 47950629, 500, "optimal", 31.895925524720717, 47950629, None, "3488b73286381afa"),  # [500, 865]
    ("byte222", 61629789, 500, "optimal", 49.17516896498821, 60706670, None, "08e65060ca9ffed8"),
    ("siamese", 51018818, 500, "optimal", 31.004089030964696, 50381319, None, "a90600d8c450b7ce"),
    ("unit", 62, 5, "optimal", 52.0, 62, None, "eebce919fa2cadc2"),  # [5, 0]
    ("unit", 70, 0, "optimal", 50.0, 70, None, "af2354dd95e9cc68"),
    ("unit", 90, 500, "optimal", 47.0, 88, None, "c6cbeae43ed9eb5c"),
]


@pytest.mark.parametrize("key,budget,slots,status,makespan,peak,min_budget,digest", ANSWERS)
def test_answers_are_the_old_trees(key, budget, slots, status, makespan, peak, min_budget, digest):
    join = JOINS[key]()
    res = dp.solve_join_dp(join, budget, slots=slots)
    assert (res.status, res.objective, res.peak_memory, res.min_budget) == (status, makespan, peak, min_budget)
    ops = " ".join(map(str, res.schedule.ops))
    assert hashlib.sha1(ops.encode()).hexdigest()[:16] == digest
    sim = simulate(join, res.schedule)
    sim.raise_if_invalid()
    assert sim.makespan == makespan and sim.peak_memory == peak


@pytest.fixture
def spy(monkeypatch) -> list[tuple[int, int, list[Any]]]:
    """Every join level run: (M, X0, its branches' tables)."""
    runs: list = []
    level = dp.join_dp

    def join_dp(work, M, tables, *args, **kwargs):
        runs.append((int(M), int(work.input_total()), list(tables)))
        return level(work, M, tables, *args, **kwargs)

    monkeypatch.setattr(dp, "join_dp", join_dp)
    return runs


@pytest.mark.parametrize("key,budget,levels,distinct", [("byte23", 54884258, 3, 2), ("siamese", 47950629, 3, 1)])
def test_retry_fills_only_what_the_join_level_reads(spy, key, budget, levels, distinct):
    """At the least budget the retry runs the join level three times (500 slots, the finest count, the
    rounded-down relaxation); each reads tables for m, w <= M - X0 only, one per distinct branch. Before,
    every branch got a table over 0..M, more than twice the entries (of which the DP now evaluates the
    lower triangle w <= m only)."""
    res = dp.solve_join_dp(JOINS[key](), budget, slots=500)
    assert res.details["slots_tried"][0] == 500 and len(spy) == levels
    filled = dense = 0
    for M, X0, tables in spy:
        assert len({id(t) for t in tables}) == distinct
        for t in {id(t): t for t in tables}.values():
            assert t.V.shape[-1] == t.V.shape[-2] == M - X0 + 1  # before: M + 1
            filled += t.V.size
        dense += sum(2 * (t.L + 1) * (M + 1) ** 2 for t in tables)  # the tables over 0..M of before
    assert filled * 2 < dense, (filled, dense)


# --------------------------------------------------------------------------- the dense recursion, as before
def _reference_tables(chain, M: int) -> np.ndarray:
    """V^t(i, m, w) over the whole (M+1, M+1) square, option by option as the DP did before."""
    from memsched.solvers.chain.dp import rotor_table

    L, n = chain.length, M + 1
    table = rotor_table(chain, M)
    x, xbar = chain.x.astype(np.int64), chain.xbar.astype(np.int64)
    sf = np.concatenate([[0.0], np.cumsum(chain.u_fn)])
    ms, ws = np.arange(n)[:, None], np.arange(n)[None, :]
    V = np.full((2, L + 1, n, n), np.inf)

    def shift(a, s):
        out = np.full_like(a, np.inf)
        if s < n:
            out[s:, s:] = a[: n - s, : n - s]
        return out

    for i in range(L - 1, -1, -1):
        sweeps = dp.spine_sweeps(chain, i)
        for t in dp.TYPES:
            best = np.full((n, n), np.inf)
            for j in range(i + 1, L + 1):
                tail = sf[j] - sf[i] + table.C[table.off[i] + (j - 1 - i), :]
                if j < L:
                    nxt = shift(V[t, j], int(x[j]))
                elif t == dp.CK:
                    nxt = np.where((ms >= x[L]) & (ws >= x[L]), 0.0, np.inf)
                else:
                    continue
                cand = tail[:, None] + nxt
                cand[: sweeps[j - i - 1]] = np.inf
                best = np.where(cand < best, cand, best)
            xb = int(xbar[i + 1])
            need = max(xb + int(chain.o_fa[i]), int(x[i] + x[i + 1]) + xb + int(chain.o_b[i]))
            nxt = (shift(V[t, i + 1], xb) if i + 1 < L else
                   np.where((ms >= xb) & (ws >= xb + x[L]), 0.0, np.inf) if t == dp.TAPE else None)
            if nxt is not None:
                cand = float(chain.u_fa[i] + chain.u_b[i]) + nxt
                cand[:need] = np.inf
                best = np.where(cand < best, cand, best)
            V[t, i] = best
    return V


def _reference_value(work: Join, M: int, V: list[np.ndarray]) -> tuple[float, list[tuple[int, int, int]]] | None:
    """The join level as a loop over W ascending (strict improvements): (value, [(b, t, m, w)] in
    backward order), None when nothing fits."""
    k, X0 = work.k, work.input_total()
    if X0 > M:
        return None
    n = M + 1
    f = {(frozenset(), frozenset()): np.where(np.arange(n) == 0, 0.0, np.inf)}
    back: dict = {}
    for size in range(k):
        for S in map(frozenset, combinations(range(k), size)):
            for T in dp._subsets(S):
                F = f.get((S, T))
                if F is None:
                    continue
                for b in sorted(set(range(k)) - S):
                    for t in dp.TYPES:
                        key = (S | {b}, T | {b} if t == dp.CK else T)
                        G = f.setdefault(key, np.full(n, np.inf))
                        src = back.setdefault(key, [None] * n)
                        for W in map(int, np.flatnonzero(np.isfinite(F))):
                            m = M - X0 - W
                            if m >= 0:
                                seg = F[W] + V[b][t, 0, m, : n - W]
                                for w in np.flatnonzero(seg < G[W:]):
                                    G[W + w], src[W + w] = seg[w], (S, T, b, t, W, m, int(w))
    best, arg = math.inf, None
    full = frozenset(range(k))
    for T in dp._subsets(full):
        G = f.get((full, T), np.full(n, np.inf))
        for w in range(n):
            need = X0 + w + sum(int(work.branches[b].x[work.branches[b].length]) for b in T) + work.loss_overhead
            if need <= M and G[w] < best:
                best, arg = float(G[w]), (full, T, w)
    if arg is None:
        return None
    S, T, w_at = arg
    picks = []
    while S:
        S, T, b, t, W, m, w = back[(S, T)][w_at]
        picks.append((b, t, m, w))
        w_at = W
    return best + work.loss_time, picks


@pytest.mark.parametrize("seed", range(12))
def test_tables_and_join_level_are_the_dense_recursions(seed):
    """On small random joins (integer times: many ties; per-mode overheads; identical branches) the DP's
    tables equal the dense recursion on w <= m, and its plan (value, order, each branch's (t, m, w))
    equals a loop over W ascending, at every budget up to the store-all peak."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 4))
    join = random_join([int(rng.integers(1, 4)) for _ in range(k)], seed, size_range=(1, 6), overhead=1.0,
                       mode_overheads=bool(seed % 2), integer_times=True, loss_overhead=int(rng.integers(0, 3)))
    if seed % 3 == 0:
        join = Join.from_chains([join.branches[0]] * k, loss_time=1.0, loss_overhead=join.loss_overhead)
    top = int(simulate(join, store_all_schedule(join)).peak_memory)
    for M in range(join.input_total(), top + 1, max(1, (top - join.input_total()) // 6)):
        refs = [_reference_tables(c, M) for c in join.branches]
        tables = [dp.branch_tables(c, M) for c in join.branches]
        lower = np.tril(np.ones((M + 1, M + 1), dtype=bool))
        for tb, ref in zip(tables, refs):
            for t in dp.TYPES:
                for i in range(tb.L):
                    assert np.array_equal(tb.V[t, i][lower], ref[t, i][lower]), (seed, M, t, i)
        plan, want = dp.join_dp(join, M, tables), _reference_value(join, M, refs)
        if want is None:
            assert plan is None, (seed, M)
            continue
        value, picks = want
        assert plan is not None and plan.value == value, (seed, M)
        assert [(b, *plan.choices[b]) for b in plan.order] == picks, (seed, M)
