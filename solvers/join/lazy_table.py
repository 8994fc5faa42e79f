"""Rotor tables evaluated only where they are read, for the heuristics' exact-size retries.

A heuristic (`baselines`) reads the rotor table C(m, i, l) of a branch (`chain.dp.rotor_table`)
at one or a few memory values m, then rebuilds a schedule from the O(L) entries it visits. At
exact byte sizes (or about 10^7 slots: `baselines.retry_slots`) the dense table fills every m of
0..M for every row, ``table_cells(L, M)`` entries (3e7 for a 2-stage branch, 0.5 s and 240 MB),
while the recursion from C(M, 0, L) only reaches the memory values M minus sums of sizes: a
handful for a short branch.

`LazyRotorTable` evaluates C(m, i, l) by that recursion, memoised over the states (i, l, m)
actually reached, with the kernels' own floating-point operations in the same order (C_ck as
``(sf[j] - sf[i] + C(m - x[j], j, l)) + C(m, i, j - 1)``, C_all as ``(u_fa[i] + u_b[i]) +
C(m - xbar[i+1], i+1, l)``, the minimum over the same gated options), so every value, every
choice and every schedule is the dense table's, bit for bit. When a query would take the memo
beyond its `max_states` (a long branch: up to 3^L memory offsets a row), it fills the dense table
once and answers from it. `heuristic_table` picks the dense table when it is small. A 1-2 stage
branch at exact byte sizes evaluates a few hundred states where the dense table has 3e7 entries;
a 10-stage one at 4e5 bytes about 4,000 (0.1 s) for 2.4e7 (2 s).
"""

from __future__ import annotations

import math

import numpy as np

from ..chain.dp import RotorTable, rotor_table, table_cells
from ..chain.instance import Chain
from ..chain.min_memory import ALL, LEAF

#: dense tables up to this many entries are filled directly (a few tens of milliseconds in C)
DENSE_CELLS = 2_000_000
#: most states (i, l, m) a lazy table memoises before it fills the dense table instead
MAX_STATES = 50_000
#: ... and at most the dense table's entries over this: a state costs microseconds in Python, an
#: entry of the C kernel about 10 L nanoseconds, so the states a fallback wastes cost less than the table
DENSE_PER_STATE = 1000

State = tuple[int, int, int]  # (i, l, m): C(m, i, l)


class LazyRotorTable(RotorTable):
    """C(m, i, l) for m = 0..M, evaluated on demand (see the module docstring); the interface of
    `RotorTable` (`value`, `choice`, `schedule`, `M`). ``C`` has no rows: use `cells` for the
    number of entries evaluated (memoised states, or the dense table's entries after a fallback)."""

    def __init__(self, chain: Chain, M: int, max_states: int = MAX_STATES) -> None:
        L = chain.length
        super().__init__(chain, np.empty((0, max(int(M), 0) + 1)), np.zeros(L + 1, dtype=np.int64))
        self.max_states = int(max_states)
        self.memo: dict[State, float] = {}
        self.dense: RotorTable | None = None
        x, xbar, o_fa, o_fn, o_b = ([int(v) for v in np.asarray(a, dtype=np.int64)]
                                    for a in (chain.x, chain.xbar, chain.o_fa, chain.o_fn, chain.o_b))
        self._x, self._xbar, self._o_fa, self._o_b = x, xbar, o_fa, o_b
        u_fa = np.ascontiguousarray(chain.u_fa, dtype=np.float64)
        u_b = np.ascontiguousarray(chain.u_b, dtype=np.float64)
        self._t = [float(u_fa[i] + u_b[i]) for i in range(L + 1)]  # the kernels' t = u_fa[i] + u_b[i]
        self._sf = [float(v) for v in self.prefix_forward]
        # acc[i][j] = max(x[i+1] + o_fn[i], max_{i<k<j} x[k] + x[k+1] + o_fn[k]): sweep(i, j, l) - x[l+1]
        self._acc: list[dict[int, int]] = []
        for i in range(L):
            row = {i + 1: x[i + 1] + o_fn[i]}
            for j in range(i + 2, L + 1):
                row[j] = max(row[j - 1], x[j - 1] + x[j] + o_fn[j - 1])
            self._acc.append(row)

    @property
    def cells(self) -> int:
        """Entries evaluated: the memoised states, or the dense table's entries after a fallback."""
        return int(self.dense.C.size) if self.dense is not None else len(self.memo)

    # ------------------------------------------------------------------ the recursion
    def _gate_all(self, i: int, l: int) -> int:
        """Least m for C_all of (i, l) (the leaf's gate for i = l, with x[l+1] = x[i+1])."""
        x, xb = self._x, self._xbar[i + 1]
        return max(x[l + 1] + xb + self._o_fa[i], x[i] + x[i + 1] + xb + self._o_b[i])

    def _children(self, s: State) -> list[State]:
        """The states the options of `s` that pass their gates read (none for a leaf)."""
        i, l, m = s
        if i == l:
            return []
        out: list[State] = []
        xb = self._xbar[i + 1]
        if m >= self._gate_all(i, l) and m - xb >= 0:
            out.append((i + 1, l, m - xb))
        x, acc = self._x, self._acc[i]
        for j in range(i + 1, l + 1):
            if m >= x[l + 1] + acc[j] and m >= x[j]:
                out.append((j, l, m - x[j]))
                out.append((i, j - 1, m))
        return out

    def _evaluate(self, s: State) -> float:
        """C(m, i, l) from its memoised children, the kernels' operations in their order."""
        i, l, m = s
        if i == l:
            return self._t[i] if m >= max(self._gate_all(i, i), 0) else math.inf
        memo, x, sf = self.memo, self._x, self._sf
        best = math.inf
        xb = self._xbar[i + 1]
        if m >= self._gate_all(i, l) and m - xb >= 0:
            best = self._t[i] + memo[(i + 1, l, m - xb)]
        acc = self._acc[i]
        for j in range(i + 1, l + 1):
            if m >= x[l + 1] + acc[j] and m >= x[j]:
                v = (sf[j] - sf[i]) + memo[(j, l, m - x[j])] + memo[(i, j - 1, m)]
                if v < best:
                    best = v
        return best

    def _ensure(self, root: State) -> bool:
        """Memoise `root` and every state it reaches; False (nothing added) when that would take the
        memo beyond `max_states`. Every child has a smaller l - i, so that order evaluates them first."""
        memo = self.memo
        if root in memo:
            return True
        new = {root}
        stack = [root]
        while stack:
            for c in self._children(stack.pop()):
                if c not in memo and c not in new:
                    new.add(c)
                    stack.append(c)
            if len(memo) + len(new) > self.max_states:
                return False
        for s in sorted(new, key=lambda s: s[1] - s[0]):
            memo[s] = self._evaluate(s)
        return True

    def _fallback(self) -> RotorTable:
        """The dense table (filled once), when the recursion reaches too many states."""
        if self.dense is None:
            self.dense = rotor_table(self.chain, self.M)
        return self.dense

    # ------------------------------------------------------------------ RotorTable's interface
    def _entry(self, m: int, i: int, l: int) -> float:
        """C(m, i, l) for 0 <= m <= M (`RotorTable.value` checks m): memoised, or the dense table's."""
        if self.dense is None and self._ensure((i, l, m)):
            return self.memo[(i, l, m)]
        return self._fallback().value(m, i, l)

    def choice(self, m: int, i: int, l: int) -> int:
        """How C(m, i, l) is achieved, as `RotorTable.choice` (ties prefer C_all, then the smallest j)."""
        target = self.value(m, i, l)
        if self.dense is not None:
            return self.dense.choice(m, i, l)
        if not math.isfinite(target):
            raise ValueError(f"C({m}, {i}, {l}) is infeasible")
        if i == l:
            return LEAF
        x, xb = self._x, self._xbar[i + 1]
        if m >= self._gate_all(i, l):
            if self._t[i] + self.value(m - xb, i + 1, l) == target:
                return ALL
        sf, acc = self._sf, self._acc[i]
        for j in range(i + 1, l + 1):
            if m - x[j] >= 0 and m >= x[l + 1] + acc[j]:
                if (sf[j] - sf[i]) + self.value(m - x[j], j, l) + self.value(m, i, j - 1) == target:
                    return j
        raise RuntimeError(f"cannot reconstruct C({m}, {i}, {l}) = {target}")  # pragma: no cover - a bug


def heuristic_table(chain: Chain, M: int) -> RotorTable:
    """The rotor table of `chain` for m = 0..M as the heuristics read it: the dense one
    (`rotor_table`) when it has at most `DENSE_CELLS` entries, else a `LazyRotorTable` (the same
    values, evaluated where read) that falls back to the dense one beyond `MAX_STATES` states or
    1/`DENSE_PER_STATE` of its entries."""
    M = max(int(M), 0)
    cells = table_cells(chain.length, M)
    if cells <= DENSE_CELLS:
        return rotor_table(chain, M)
    return LazyRotorTable(chain, M, max_states=min(MAX_STATES, cells // DENSE_PER_STATE))


def cells_of(table: RotorTable) -> int:
    """Entries a table evaluated: all of a dense one, the memoised ones of a lazy one."""
    return table.cells if isinstance(table, LazyRotorTable) else int(table.C.size)
