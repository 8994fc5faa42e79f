"""The persistent dynamic program of rotor (Beaumont et al., arXiv 1911.13214) on heterogeneous chains.

Notation of docs/chain.md (stages 0-based, the loss is stage L): activation sizes ``x[0..L+1]``
(``x[L+1] = 0``), tape sizes ``xbar``, times ``u_b``, transient overheads ``o_b``, the
per-mode forward overheads ``o_fa`` (while F_all runs) and ``o_fn`` (while F_ck / F_n run)
and the per-mode forward times ``u_fa`` (F_all's) and ``u_fn`` (F_ck's and F_n's); they are
``o_f`` and ``u_f`` in a chain without per-mode values.

``C(m, i, l)`` is the least time to back-propagate through stages i..l when a_i is resident
(not counted in m) and the gradient delta_{l+1} is resident (counted in m), using at most m
memory besides a_i, with a *persistent* schedule (each sub-chain is processed by one of the
two decompositions below). With the charges of the simulator (`solvers.chain.simulator`):

    C(m, i, i) = u_fa[i] + u_b[i]      if m >= max(x[i+1] + xbar[i+1] + o_fa[i],
                                                    x[i] + x[i+1] + xbar[i+1] + o_b[i])
                 (the leaf i = L is the loss alone: m >= x[L] + o_b[L])
    C(m, i, l) = min(C_ck, C_all) for l > i, where
    C_ck  = min_{i<j<=l, m >= sweep(i,j,l)}  sum_{k=i}^{j-1} u_fn[k] + C(m - x[j], j, l) + C(m, i, j-1)
            (F_ck(i) F_n(i+1) .. F_n(j-1) keep a_i and store a_j; then (j, l); then (i, j-1))
    sweep(i, j, l) = x[l+1] + max(x[i+1] + o_fn[i], max_{i<k<j} (x[k] + x[k+1] + o_fn[k]))
    C_all = u_fa[i] + u_b[i] + C(m - xbar[i+1], i+1, l)
            if m >= max(x[l+1] + xbar[i+1] + o_fa[i], x[i] + x[i+1] + xbar[i+1] + o_b[i])
            (F_all(i); then (i+1, l) with the tape abar_{i+1} resident; then B(i))

and the optimum at budget M is ``C(M - x[0], 0, L)``. ``sweep(i, j, l)`` is the memory of the
forward sweep of split j (delta_{l+1} held). The paper gates the whole entry with
``mmin(i, l) = sweep(i, l, l)``; with one forward overhead (o_fa = o_fn) that gate is implied by
the conditions of every option (the sub-problems' own forward terms cover k >= j), so the table
is the same; with o_fa < o_fn it is not (a C_all chain never runs F_n), hence the per-split gate.

**Exact charge of C_all.** The paper prints ``C_all = C(m,i,i) + C(m - xbar[i+1], i+1, l)``,
whose forward term ``x[i+1] + xbar[i+1] + o_f[i]`` assumes delta_{i+1} is resident while
F_all(i) runs; in the C_all branch of (i, l) it is delta_{l+1} (size x[l+1]), which is the
simulator's charge ``state + xbar[i+1] + o_fa[i]``. Both versions agree when the forward
overheads are zero; otherwise they differ both ways: the printed one admits schedules that
overflow (`OVERFLOW` in tests/test_chain_rotor.py) and rejects fitting ones (`TOO_STRICT`).

**Memory.** ``slots = N > 0`` discretises: a slot is ``budget / N`` bytes, every size is rounded
up to whole slots (`Chain.discretised`), and the table spans m = 0..N; a schedule that fits N
slots fits the real budget. ``slots = 0`` keeps exact integer sizes (m = 0..budget), only
sensible for small sizes; tables over `MAX_CELLS` cells are refused with an `InputError`.

**Speed.** The table has (L+1)(L+2)/2 rows of M+1 entries and costs O(L^3 M) time at most.
Three kernels fill it, bit for bit the same: C (``rotor_kernel.c``, built on first use with the
system compiler and loaded with ctypes by `ckernel`), numba (compiled on its first call, `jit`)
and numpy (vectorised over (j, m), the slowest); the fastest available runs
(`jit.kernel_backend`; ``MEMSCHED_NO_CC=1`` skips C, ``MEMSCHED_NO_NUMBA=1`` numba). The C and
numba kernels skip the options that provably change nothing (rows are non-increasing in m: a
split j is tried only below the first m where the row is already at most its least value, and
on an aligned block of `BLOCK` values of m only when its value at the block's end is below the
row's at the block's start) and fill `TILE` values of l together, so that the rows (i, j-1) are
read while in cache: L = 200 at 500 slots is a few tenths of a second
(`experiments/bench_chain_dp.py`). With C a process also never imports numba (its import and
JIT start-up cost more than the table). Choices are not stored: the schedule is rebuilt by
re-evaluating the options of the O(L) entries it visits, with the kernels' own floating-point
operations.

**Precision.** The kernels charge a sweep F_ck(i) F_n(i+1..j-1) as ``sf[j] - sf[i]``, a
difference of prefix sums of u_fn: it is within about L eps sum(u_fn) of the range's sum, so a
table value can be off by far more than the rounding of its own terms when the times span many
orders of magnitude (a no-grad time of 1e9 upstream of times of 1e-3: the small ones are lost).
The choices are optimal up to that drift (`value_tolerance`); the makespan reported is the
simulator's replay of the chosen schedule, checked against the table's value within that bound
(`replayed_makespan`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..discretize import check_slots, effective_slots
from ..errors import InputError, flag, option_field
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, SolveResult
from ..units import MAX_BYTES, MEMORY_UNIT_BYTES, max_size, memory_unit, size_unit_name
from .baselines import store_all_schedule
from .instance import Chain
from .jit import HAVE_NUMBA, KERNELS, kernel_backend, njit  # noqa: F401 - HAVE_NUMBA re-exported
from .min_memory import (  # noqa: F401 - re-exported
    ALL,
    LEAF,
    NONE,
    _arrays,
    _min_memory_numba,
    _min_memory_numpy,
    _sweeps,
    min_memory_schedule,
    rotor_min_budget,
)
from .rotor_guard import never_worse
from .schedule import Bwd, F_all, F_ck, F_n, Loss, Schedule, unfold
from .simulator import simulate

#: Largest table (rows x memory values) we build: 8 bytes a cell (float64).
MAX_CELLS = 100_000_000

#: When a slot discretisation leaves no schedule, solve with exact sizes if the table is this small.
EXACT_RETRY_CELLS = 5_000_000

#: Machine epsilon of float64 (twice the unit roundoff u).
EPS = float(np.finfo(np.float64).eps)


def _offsets(L: int) -> np.ndarray:
    """Row of (i, l) in the packed table is off[i] + l - i (rows i..L for each i)."""
    sizes = np.arange(L + 1, 0, -1, dtype=np.int64)  # L+1-i rows for i
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


# --------------------------------------------------------------------------- kernels
#: Width of the aligned blocks of m over which a C_ck option is tried only when it can improve the row.
BLOCK = 16
#: Values of l filled together, so that the rows (i, j-1) that C_ck reads are reused while in cache.
TILE = 4


@njit(cache=True)
def _dp_numba(x, xbar, o_fa, o_fn, o_b, u_fa, u_b, sf, off, C, first):  # pragma: no cover - compiled
    """Fill the packed table C (rows (i, l), columns m) in place; first[r] = least finite m.
    ``u_fa`` is F_all's time (leaves and C_all), ``sf[k] = u_fn[0] + .. + u_fn[k-1]`` (C_ck's sweeps).

    The same work as ``rotor_kernel.c`` (see there): l is taken `TILE` values at a time, the
    rows (j, l) of those values kept in a contiguous buffer (`col`); for each i (descending),
    the splits j ascending, each row (i, j-1) stored once final. Every row is non-increasing in
    m, so a C_ck option is only tried below the first m where the row is already at most the
    option's least value (bisection), and on each aligned block of `BLOCK` values only when its
    value at the block's end (a lower bound, read from the block-end summary S) is below the
    row's value at the block's start. The table is that of the plain recurrence: a minimum over
    the same candidate values, whatever their order.
    """
    L = u_fa.shape[0] - 1
    M = C.shape[1] - 1
    W = M + 1
    inf = np.inf
    nb = (M + BLOCK) // BLOCK
    S = np.empty((C.shape[0], nb))
    col = np.empty((TILE, L + 1, W))
    fcol = np.empty((TILE, L + 1), dtype=np.int64)
    sw = np.empty(TILE, dtype=np.int64)
    for l0 in range(0, L + 1, TILE):
        l1 = min(l0 + TILE, L + 1)
        for i in range(l1 - 1, -1, -1):
            for l in range(max(i, l0), l1):  # leaves and C_all: F_all(i), (i+1, l), B(i)
                g = l - l0
                c = col[g, i]
                c[:] = inf
                t = u_fa[i] + u_b[i]
                if i == l:
                    need = max(x[i + 1] + xbar[i + 1] + o_fa[i], x[i] + x[i + 1] + xbar[i + 1] + o_b[i])
                    for m in range(max(need, 0), W):
                        c[m] = t
                else:
                    xb = xbar[i + 1]
                    s = col[g, i + 1]
                    lo = max(x[l + 1] + xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i], xb + fcol[g, i + 1])
                    for m in range(lo, W):
                        c[m] = t + s[m - xb]
                sw[g] = x[l + 1] + x[i + 1] + o_fn[i]  # sweep(i, i+1, l)
            for j in range(i + 1, l1 + 1):  # C_ck: F_ck(i) F_n(i+1..j-1), (j, l), (i, j-1)
                lf = j - 1
                if lf >= l0:  # row (i, j-1) is final: store it, its first finite m, its summary
                    g = lf - l0
                    r = off[i] + (lf - i)
                    c = col[g, i]
                    f = W
                    for m in range(W):
                        if c[m] < inf:
                            f = m
                            break
                    first[r] = f
                    fcol[g, i] = f
                    C[r, :] = c
                    sr = S[r]
                    for k in range(nb):
                        sr[k] = c[min(k * BLOCK + BLOCK, W) - 1]
                if j == l1:
                    break
                xj = x[j]
                rb = off[i] + (j - 1 - i)
                fb = first[rb]
                b = C[rb]
                sb = S[rb]
                base = sf[j] - sf[i]
                for l in range(max(j, l0), l1):
                    g = l - l0
                    if j > i + 1:
                        sw[g] = max(sw[g], x[l + 1] + x[j - 1] + x[j] + o_fn[j - 1])
                    a = col[g, j]
                    c = col[g, i]
                    m0 = max(sw[g], xj + fcol[g, j], fb)
                    if m0 > M:
                        continue
                    least = base + a[M - xj] + sb[nb - 1]  # sb[nb-1] = b[M]
                    lo = m0
                    hi = W
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if c[mid] > least:
                            lo = mid + 1
                        else:
                            hi = mid
                    end = lo
                    if end <= m0:
                        continue
                    for k in range(m0 // BLOCK, (end - 1) // BLOCK + 1):
                        s0 = max(m0, k * BLOCK)
                        s1 = min(end, k * BLOCK + BLOCK)
                        if base + a[s1 - 1 - xj] + sb[k] < c[s0]:
                            for m in range(s0, s1):
                                v = base + a[m - xj] + b[m]
                                if v < c[m]:
                                    c[m] = v


def _dp_numpy(x, xbar, o_fa, o_fn, o_b, u_fa, u_b, sf, off, C, first) -> None:
    """The same table as `_dp_numba` (bit for bit), vectorised over (j, m) for each (i, l)."""
    L = u_fa.shape[0] - 1
    M = C.shape[1] - 1
    inf = np.inf
    ms = np.arange(M + 1)
    for l in range(L + 1):
        S = np.full((L + 2, M + 1), inf)  # S[j, m] = C(m - x[j], j, l)
        for i in range(l, -1, -1):
            r = off[i] + (l - i)
            t = u_fa[i] + u_b[i]
            if i == l:
                need = max(x[i + 1] + xbar[i + 1] + o_fa[i], x[i] + x[i + 1] + xbar[i + 1] + o_b[i])
                C[r, need:] = t
            else:
                xb = xbar[i + 1]
                rs = off[i + 1] + (l - i - 1)
                lo = max(x[l + 1] + xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i], xb)
                if lo <= M:
                    C[r, lo:] = t + C[rs, lo - xb : M + 1 - xb]
                cand = (sf[i + 1 : l + 1] - sf[i])[:, None] + S[i + 1 : l + 1] + C[off[i] : off[i] + l - i]
                cand[ms[None, :] < _sweeps(x, o_fn, i, l)[:, None]] = inf
                np.minimum(C[r], cand.min(axis=0), out=C[r])
            finite = np.flatnonzero(C[r] < inf)
            first[r] = finite[0] if finite.size else M + 1
            xi = x[i]
            if xi <= M:
                S[i, xi:] = C[r, : M + 1 - xi]


# --------------------------------------------------------------------------- tables
@dataclass
class RotorTable:
    """The table C(m, i, l) for m = 0..M (in the chain's size unit).

    ``C[off[i] + l - i, m]`` is C(m, i, l). Choices are not stored: `choice` re-evaluates
    the options of one entry with the same floating-point operations as the kernels, so the
    value it picks is exactly the table's.
    """

    chain: Chain
    C: np.ndarray
    off: np.ndarray

    @property
    def M(self) -> int:
        """The largest memory value of the table (slots, or bytes with exact sizes)."""
        return self.C.shape[1] - 1

    @cached_property
    def prefix_forward(self) -> np.ndarray:
        """sf[k] = u_fn[0] + ... + u_fn[k-1] (the no-grad sweeps of C_ck), as the kernels compute it."""
        return np.concatenate([[0.0], np.cumsum(np.asarray(self.chain.u_fn, dtype=np.float64))])

    def value(self, m: int, i: int = 0, l: int | None = None) -> float:
        """C(m, i, l); C(m, 0, L) by default. +inf when infeasible (or m < 0)."""
        l = self.chain.length if l is None else l
        if m < 0:
            return math.inf
        if m > self.M:
            raise ValueError(f"m = {m} is beyond the table (M = {self.M})")
        return self._entry(int(m), i, l)

    def _entry(self, m: int, i: int, l: int) -> float:
        """C(m, i, l) for 0 <= m <= M (`value` checks m): the table's entry."""
        return float(self.C[self.off[i] + l - i, m])

    def optimum(self, budget: int) -> float:
        """The optimal makespan at `budget` (table units, a_0 included): C(budget - x[0], 0, L)."""
        return self.value(int(budget) - int(self.chain.x[0]))

    def choice(self, m: int, i: int, l: int) -> int:
        """How C(m, i, l) is achieved: LEAF (-1), ALL (0: C_all) or j > 0 (C_ck with split j);
        ties prefer C_all, then the smallest j. Raises `ValueError` when it is infinite."""
        target = self.value(m, i, l)
        if not math.isfinite(target):
            raise ValueError(f"C({m}, {i}, {l}) is infeasible")
        if i == l:
            return LEAF
        ch, C, off = self.chain, self.C, self.off
        x, xbar = ch.x, ch.xbar
        xb = int(xbar[i + 1])
        if m >= max(x[l + 1] + xb + ch.o_fa[i], x[i] + x[i + 1] + xb + ch.o_b[i]):
            v = (float(ch.u_fa[i]) + float(ch.u_b[i])) + C[off[i + 1] + l - i - 1, m - xb]
            if v == target:
                return ALL
        js = np.arange(i + 1, l + 1)
        shifted = m - x[js]
        ok = (shifted >= 0) & (m >= _sweeps(x, ch.o_fn, i, l))
        sf = self.prefix_forward
        vals = np.full(js.size, np.inf)
        vals[ok] = ((sf[js[ok]] - sf[i]) + C[off[js[ok]] + l - js[ok], shifted[ok]]) + C[off[i] + js[ok] - 1 - i, m]
        k = int(np.argmin(vals))
        if vals[k] != target:  # pragma: no cover - would be a bug
            raise RuntimeError(f"cannot reconstruct C({m}, {i}, {l}) = {target} (best option {vals[k]})")
        return int(js[k])

    def schedule(self, m: int, i: int = 0, l: int | None = None) -> Schedule:
        """The schedule achieving C(m, i, l) (an explicit stack: no recursion limit)."""
        L = self.chain.length
        l = L if l is None else l
        x, xbar = self.chain.x, self.chain.xbar

        def expand(item: tuple[int, int, int]) -> list[Any]:  # C(mm, a, b): its ops and sub-problems, in order
            a, b, mm = item
            c = self.choice(mm, a, b)
            if c == LEAF:
                return [Loss(L)] if a == L else [F_all(a), Bwd(a)]
            if c == ALL:
                return [F_all(a), (a + 1, b, mm - int(xbar[a + 1])), Bwd(a)]
            return [F_ck(a), *(F_n(k) for k in range(a + 1, c)), (c, b, mm - int(x[c])), (a, c - 1, mm)]

        return Schedule(unfold((i, l, m), expand), L)


def table_cells(L: int, M: int) -> int:
    """Entries of the table for L stages and memory values 0..M."""
    return (L + 1) * (L + 2) // 2 * (M + 1)


def rotor_table(chain: Chain, M: int, *, use_numba: bool | None = None, kernel: str | None = None) -> RotorTable:
    """Fill C(m, i, l) for m = 0..M in the chain's own size unit (bytes, or slots of a
    discretised chain). Raises `InputError` when the table would exceed `MAX_CELLS`.

    ``kernel`` ("c", "numba" or "numpy") forces a kernel; else `jit.kernel_backend(use_numba)`
    picks one (the fastest available by default). Every kernel gives the same table."""
    L = chain.length
    M = max(int(M), 0)
    cells = table_cells(L, M)
    if cells > MAX_CELLS:
        raise InputError(f"the rotor table would have {cells:.3g} cells (L={L}, {M + 1} memory values), "
                         f"more than {MAX_CELLS:.3g}; discretise memory into fewer slots (e.g. "
                         f"{flag('slots', 500)})", field=flag("slots"))
    kernel = kernel_backend(use_numba) if kernel is None else kernel
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r} (one of {', '.join(KERNELS)})")
    arrays = _arrays(chain)
    u_fa = np.ascontiguousarray(chain.u_fa, dtype=np.float64)  # F_all's time: leaves and C_all
    u_b = np.ascontiguousarray(chain.u_b, dtype=np.float64)
    sf = np.concatenate([[0.0], np.cumsum(np.asarray(chain.u_fn, dtype=np.float64))])  # C_ck's no-grad sweeps
    off = _offsets(L)
    nrows = (L + 1) * (L + 2) // 2
    # the C and numba kernels write every row and every first[r]; the numpy one needs the +inf
    C = np.full((nrows, M + 1), np.inf) if kernel == "numpy" else np.empty((nrows, M + 1))
    first = np.full(nrows, M + 1, dtype=np.int64)
    if kernel == "c":
        from .ckernel import fill_table

        fill_table(*arrays, u_fa, u_b, sf, off, C, first)
    else:
        (_dp_numba if kernel == "numba" else _dp_numpy)(*arrays, u_fa, u_b, sf, off, C, first)
    return RotorTable(chain, C, off)


def rotor_curve(chain: Chain, max_budget: int, slots: int | None = 500) -> tuple[np.ndarray, np.ndarray]:
    """Optimal persistent makespan versus budget, from one table.

    Returns ``(budgets, makespans)``: budgets in bytes (integers, a_0 included) and the optimal
    makespans (+inf where infeasible). With ``slots = N > 0`` the slot is ``max_budget / N``
    bytes and the budgets are ``floor(k * max_budget / N)`` for k = 0..N (sizes rounded up, so
    each value is achievable within its budget); with ``slots = 0``, or a `max_budget` of at most
    N units (`solvers.discretize.effective_slots`), every byte 0..max_budget at exact sizes.
    """
    max_budget = int(max_budget)
    slots = effective_slots(max_budget, 500 if slots is None else int(slots))
    if slots > 0:
        work = chain.discretised(max_budget / slots)
        budgets = (np.arange(slots + 1, dtype=np.int64) * max_budget) // slots
        n = slots
    else:
        work = chain
        budgets = np.arange(max_budget + 1, dtype=np.int64)
        n = max_budget
    x0 = int(work.x[0])
    makespans = np.full(n + 1, np.inf)
    if n - x0 >= 0:
        table = rotor_table(work, n - x0)
        makespans[x0:] = table.C[table.off[0] + work.length, :]
    return budgets, makespans


# --------------------------------------------------------------------------- solver
def solve_rotor(chain: Chain, budget: int, *, slots: int | None = 500, time_limit: float | None = None,
                table_budget: int | None = None, **_: Any) -> SolveResult:
    """Optimal persistent schedule (rotor DP) for `budget` (in the chain's memory unit, ``meta.units.memory``;
    `table_budget` too: `check_table_budget`) (`_solve_rotor_slots`), never
    slower at exact sizes than the periodic, sqrt(L) and (homogeneous chains) Revolve baselines
    that fit: when the slot rounding made the DP's schedule slower, finer slots, exact sizes or
    the baseline's schedule
    (`rotor_guard.never_worse`; the scope and ``details`` say which)."""
    t0 = time.perf_counter()
    check_table_budget(table_budget, memory_unit(chain))
    result = _solve_rotor_slots(chain, budget, slots=slots, time_limit=time_limit, table_budget=table_budget)
    result = never_worse(chain, int(budget), result, effective_slots(budget, check_slots(slots)),
                         lambda s: _solve_rotor_slots(chain, budget, slots=s, time_limit=time_limit),
                         lambda s: table_cells(chain.length, s),
                         table_cells(chain.length, int(budget) - int(chain.x[0])), EXACT_RETRY_CELLS)
    result.solve_time_s = time.perf_counter() - t0
    return result


def check_table_budget(table_budget: Any, unit: str | None = None) -> int:
    """The ``table_budget`` option, a budget in the chain's memory unit `unit` (``meta.units.memory``; None:
    bytes) as a plain-number budget is (docs/cli.md, *Memory units*): an integer in 1..`units.max_size`
    (at most 1 PiB, `MAX_BYTES`, in bytes). None is no shared table, -1 here; an `InputError` naming
    ``table_budget`` for anything else (a string, NaN, a bool, a value above the limit)."""
    if table_budget is None:
        return -1
    high = max_size(unit)
    if isinstance(table_budget, bool) or not isinstance(table_budget, (int, np.integer)) \
            or not 1 <= table_budget <= high:
        # a file in bytes keeps the command line's wording (`experiments.commands._checks.option_type_error`)
        what = "a number of bytes" if unit is None or MEMORY_UNIT_BYTES.get(unit.strip().lower()) == 1 \
            else f"a number of {size_unit_name(unit)} (the instance's memory unit, as a plain-number budget)"
        bound = "" if high == MAX_BYTES else " (at most 1 PiB)"
        raise InputError(f"must be {what}, an integer in 1..{high}{bound}, got {table_budget!r}",
                         field=option_field("table_budget"))
    return int(table_budget)


def _solve_rotor_slots(chain: Chain, budget: int, *, slots: int | None = 500, time_limit: float | None = None,
                       table_budget: int | None = None, **_: Any) -> SolveResult:
    """Optimal persistent schedule (rotor DP) for `budget` (the chain's memory unit) at `slots` slots.

    Status ``optimal`` (for persistent schedules at the stated discretisation), ``infeasible``
    below `rotor_min_budget` (exact sizes, given in ``min_budget``). When the budget is feasible
    but too tight for the rounding of the slots, the DP is rerun with exact sizes if that table
    is small (`EXACT_RETRY_CELLS`), else the least-memory persistent schedule is returned with
    status ``feasible``. When the store-all schedule fits, it is
    returned at once: no schedule is faster (lower bound sum u_fa + sum u_b). With
    ``table_budget`` >= budget (and slots > 0) the answer is read from the cached table of that
    larger budget (`shared_table`: one DP for the many budgets of a sweep).
    """
    t0 = time.perf_counter()
    budget = int(budget)
    slots = check_slots(slots)
    L = chain.length
    scope = "persistent schedules, exact sizes" if slots == 0 else f"persistent schedules, {slots}-slot discretisation"
    lower = chain.total_time()
    min_budget = rotor_min_budget(chain)
    common: dict[str, Any] = {"problem": "chain", "solver": "rotor", "budget": budget, "min_budget": min_budget}
    # sum u_fa + sum u_b bounds every schedule; kept apart from lower_bound, which would read as
    # a gap of this (optimal for its scope) answer
    details: dict[str, Any] = {"slots": slots, "no_recompute_time": lower}
    # the two answers before the DP are at exact sizes (`rotor_min_budget`, the store-all replay): no slots
    exact = "persistent schedules, exact sizes"
    if budget < min_budget:
        return SolveResult(status=INFEASIBLE, scope=exact, solve_time_s=time.perf_counter() - t0,
                           message=f"no persistent schedule fits {budget}; the smallest feasible budget is "
                                   f"{min_budget}", details=details, **common)
    store_all = store_all_schedule(L)
    sim = simulate(chain, store_all)
    if sim.peak_memory <= budget:
        return SolveResult(status=OPTIMAL, objective=sim.makespan, schedule=store_all, peak_memory=sim.peak_memory,
                           scope=exact + "; store-all fits, optimal among all schedules",
                           solve_time_s=time.perf_counter() - t0, details={**details, "recomputations": 0},
                           **common)
    shared = None
    # the shared table answers when it covers this budget and, if it is discretised, the budget is
    # above the slot count too (a budget of at most `slots` units keeps exact sizes: the next branch)
    top = -1 if table_budget is None else check_table_budget(table_budget, memory_unit(chain))
    exact_table = slots > 0 and top >= budget and not effective_slots(top, slots)
    if slots > 0 and top >= budget and (exact_table or effective_slots(budget, slots)):
        from .shared_table import cached_table, slots_within

        work, shared = cached_table(chain, top, slots)
        M = slots_within(budget, top, slots)
        details.update(table_budget=top, table_slots=M)
        if exact_table:  # a table budget of at most `slots` units: one exact-size table
            scope = f"persistent schedules, exact sizes (the shared table's budget {top})"
        else:
            details["slot_size"] = top / slots
            scope = f"persistent schedules, {slots}-slot discretisation of the shared table's budget {top}"
    elif effective_slots(budget, slots) == 0:  # a budget of at most `slots` units: integers are finer than slots
        work, M = chain, budget
        if slots:
            scope = "persistent schedules, exact sizes (a budget of at most the slot count)"
    else:
        slot = budget / slots
        work, M = chain.discretised(slot), slots
        details["slot_size"] = slot  # in the chain's memory unit, as budget
    m_top = M - int(work.x[0])
    value = math.inf
    if m_top >= 0:
        table = shared if shared is not None else rotor_table(work, m_top)
        details["table_cells"] = int(table.C.size)
        value = table.value(m_top)
    if shared is not None and not math.isfinite(value):  # the coarser slots lost it: this budget's own
        return _solve_rotor_slots(chain, budget, slots=slots, time_limit=time_limit)
    if not math.isfinite(value) and slots > 0 and table_cells(L, budget - int(chain.x[0])) <= EXACT_RETRY_CELLS:
        # the rounding of the slots lost the only schedules that fit: exact sizes are cheap here
        scope = "persistent schedules, exact sizes (the slot rounding left no schedule)"
        work, m_top = chain, budget - int(chain.x[0])
        table = rotor_table(work, m_top)
        details["table_cells"] = int(table.C.size)
        value = table.value(m_top)
    if not math.isfinite(value):
        schedule = min_memory_schedule(chain)
        sim = simulate(chain, schedule)
        return SolveResult(status=FEASIBLE, objective=sim.makespan, schedule=schedule, peak_memory=sim.peak_memory,
                           scope=scope, solve_time_s=time.perf_counter() - t0, details=details,
                           message=f"the {slots}-slot rounding leaves no schedule at this budget; returned the "
                                   f"least-memory persistent schedule (try more {flag('slots')})", **common)
    schedule = table.schedule(m_top)
    details["recomputations"] = schedule.recomputations()
    return SolveResult(status=OPTIMAL, objective=replayed_makespan(chain, schedule, value), schedule=schedule,
                       scope=scope, solve_time_s=time.perf_counter() - t0, details=details, **common)


def value_tolerance(chain: Chain, makespan: float, ops: int) -> float:
    """Bound (the chain's time unit) on |a table value - the makespan of its schedule| for a schedule of
    `ops` operations whose makespan is `makespan` (>= 0).

    With S = sum u_fn, u = eps/2 the unit roundoff and every time >= 0: each prefix sum sf[k] is
    within L u S of its exact value, so a sweep's charge sf[j] - sf[i] is within (2L + 1) u S of
    its range sum, and a schedule has at most L sweeps: L (2L + 1) u S; the value's other roundings
    (at most 6 (L + 1) additions of non-negative terms, each at most the value) and the simulator's
    (one addition an op) are within (3 (L + 1) + ops) eps makespan. Both are below
    ((L + 2)^2 + ops) eps (S + makespan). Tiny for times of one magnitude (1e-12 relative at L = 200), it
    grows with S: a time of 1e9 beside 1e-3 ones makes it about 1e-7 absolute."""
    L = chain.length
    return ((L + 2) ** 2 + ops) * EPS * (math.fsum(chain.u_fn) + abs(makespan))


def replayed_makespan(chain: Chain, schedule: Schedule, value: float) -> float:
    """The simulator's makespan of the DP's `schedule` (the chain's time unit), which the table
    valued at `value`; `RuntimeError` (a bug of the DP) when they differ by more than the drift of
    the table's prefix sums (`value_tolerance`) and 1e-9 relative, which alone can separate them."""
    makespan = simulate(chain, schedule).makespan
    if not math.isclose(makespan, value, rel_tol=1e-9, abs_tol=value_tolerance(chain, makespan, len(schedule.ops))):
        raise RuntimeError(f"rotor table value {value} differs from its schedule's replay {makespan}")
    return makespan
