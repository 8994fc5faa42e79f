"""The least memory of a persistent schedule of a chain (the feasibility frontier of the rotor DP).

``Mmin(i, l)`` is the least m for which C(m, i, l) of `solvers.chain.dp` is finite, in the same
notation (x, xbar, o_fa, o_fn, o_b; a_i not counted, delta_{l+1} counted):

    Mmin(i, i) = max(x[i+1] + xbar[i+1] + o_fa[i], x[i] + x[i+1] + xbar[i+1] + o_b[i])
    Mmin(i, l) = min( max(x[l+1] + xbar[i+1] + o_fa[i], x[i] + x[i+1] + xbar[i+1] + o_b[i],
                          xbar[i+1] + Mmin(i+1, l)),                                   (C_all)
                      min_{i<j<=l} max(sweep(i, j, l), x[j] + Mmin(j, l), Mmin(i, j-1)) )  (C_ck)

in O(L^3) integer operations, exact (no discretisation).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .instance import Chain
from .jit import kernel_backend, njit
from .schedule import Bwd, F_all, F_ck, F_n, Loss, Op, Schedule

LEAF, ALL, NONE = -1, 0, -2  # choice codes; j > 0 means C_ck with split j


def _sweeps(x, o_fn, i: int, l: int) -> np.ndarray:
    """sweep(i, j, l) for j = i+1..l: the least m for F_ck(i) F_n(i+1) .. F_n(j-1) with
    delta_{l+1} resident, x[l+1] + max(x[i+1] + o_fn[i], max_{i<k<j} x[k] + x[k+1] + o_fn[k])."""
    terms = np.concatenate([[x[i + 1] + o_fn[i]], x[i + 1 : l] + x[i + 2 : l + 1] + o_fn[i + 1 : l]])
    return x[l + 1] + np.maximum.accumulate(terms)


@njit(cache=True)
def _min_memory_numba(x, xbar, o_fa, o_fn, o_b, Mm, ch):  # pragma: no cover - compiled
    L = o_b.shape[0] - 1
    for l in range(L + 1):
        for i in range(l, -1, -1):
            if i == l:
                Mm[i, l] = max(x[i + 1] + xbar[i + 1] + o_fa[i], x[i] + x[i + 1] + xbar[i + 1] + o_b[i])
                ch[i, l] = -1
                continue
            xb = xbar[i + 1]
            best = max(x[l + 1] + xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i], xb + Mm[i + 1, l])
            arg = 0
            sw = x[l + 1] + x[i + 1] + o_fn[i]
            for j in range(i + 1, l + 1):
                if j > i + 1:
                    sw = max(sw, x[l + 1] + x[j - 1] + x[j] + o_fn[j - 1])
                v = max(sw, x[j] + Mm[j, l], Mm[i, j - 1])
                if v < best:
                    best = v
                    arg = j
            Mm[i, l] = best
            ch[i, l] = arg


def _min_memory_numpy(x, xbar, o_fa, o_fn, o_b, Mm, ch) -> None:
    L = o_b.shape[0] - 1
    for l in range(L + 1):
        for i in range(l, -1, -1):
            if i == l:
                Mm[i, l] = max(x[i + 1] + xbar[i + 1] + o_fa[i], x[i] + x[i + 1] + xbar[i + 1] + o_b[i])
                ch[i, l] = LEAF
                continue
            xb = xbar[i + 1]
            best = max(x[l + 1] + xb + o_fa[i], x[i] + x[i + 1] + xb + o_b[i], xb + Mm[i + 1, l])
            cand = np.maximum(np.maximum(x[i + 1 : l + 1] + Mm[i + 1 : l + 1, l], Mm[i, i:l]), _sweeps(x, o_fn, i, l))
            k = int(np.argmin(cand))
            if int(cand[k]) < best:
                Mm[i, l], ch[i, l] = int(cand[k]), i + 1 + k
            else:
                Mm[i, l], ch[i, l] = best, ALL


def _arrays(chain: Chain) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x, xbar, o_fa, o_fn, o_b as contiguous int64 arrays (what the kernels take)."""
    x, xbar, o_fa, o_fn, o_b = (np.ascontiguousarray(a, dtype=np.int64)
                                for a in (chain.x, chain.xbar, chain.o_fa, chain.o_fn, chain.o_b))
    return x, xbar, o_fa, o_fn, o_b


def _min_memory(chain: Chain) -> tuple[np.ndarray, np.ndarray]:
    L = chain.length
    Mm = np.zeros((L + 1, L + 1), dtype=np.int64)
    ch = np.full((L + 1, L + 1), NONE, dtype=np.int64)
    kernel = kernel_backend()
    if kernel == "c":
        from .ckernel import min_memory

        min_memory(*_arrays(chain), Mm, ch)
    else:
        (_min_memory_numba if kernel == "numba" else _min_memory_numpy)(*_arrays(chain), Mm, ch)
    return Mm, ch


def rotor_min_budget(chain: Chain) -> int:
    """The smallest budget (bytes, a_0 included) for which a persistent schedule exists,
    computed exactly (no discretisation) in O(L^3) integer operations: x[0] + Mmin(0, L)
    where Mmin(i, l) is the least m with C(m, i, l) finite."""
    Mm, _ = _min_memory(chain)
    return int(chain.x[0] + Mm[0, chain.length])


def min_memory_schedule(chain: Chain) -> Schedule:
    """A persistent schedule whose peak is `rotor_min_budget(chain)` (not time-optimal)."""
    Mm, ch = _min_memory(chain)
    L = chain.length
    ops: list[Op] = []
    stack: list[Any] = [(0, L)]
    while stack:
        item = stack.pop()
        if isinstance(item, Op):
            ops.append(item)
            continue
        a, b = item
        c = int(ch[a, b])
        if c == LEAF:
            ops.extend([Loss(L)] if a == L else [F_all(a), Bwd(a)])
        elif c == ALL:
            ops.append(F_all(a))
            stack.append(Bwd(a))
            stack.append((a + 1, b))
        else:
            ops.append(F_ck(a))
            ops.extend(F_n(k) for k in range(a + 1, c))
            stack.append((a, c - 1))
            stack.append((c, b))
    return Schedule(ops, L)
