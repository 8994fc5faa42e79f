"""One rotor table for many budgets: the table of the largest budget, read at every smaller one.

The rotor DP (`dp.rotor_table`) fills C(m, i, l) for every memory m = 0..M, so one table at a
budget B (discretised into N slots of B / N bytes) also answers every budget b < B: b holds
floor(b N / B) whole slots, and the optimum there is C(floor(b N / B) - x[0], 0, L). A sweep of
k budgets of one chain then costs one DP instead of k; each answer is optimal among persistent
schedules at the discretisation of B (a coarser one for b than b's own N slots: fewer slots,
so the makespan can be larger than `solve_rotor` at b alone; the scope says so).

With B at most N units (`solvers.discretize.effective_slots`) the table keeps exact sizes: its
memory values are bytes, and b reads C(b - x[0], 0, L), the same as `solve_rotor` at b alone.

`cached_table` keeps the tables of the last `CACHE_SIZE` (chain, B, N) in this process; the
chain is identified by the bytes of its arrays (u_fa, u_fn, u_b, x, xbar, o_fa, o_fn, o_b).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from ..discretize import effective_slots
from .instance import Chain

if TYPE_CHECKING:
    from .dp import RotorTable

#: Tables kept per process (a 200-stage chain at 500 slots is about 80 MB).
CACHE_SIZE = 2
_CACHE: OrderedDict[tuple[str, int, int], tuple[Chain, RotorTable]] = OrderedDict()


def fingerprint(chain: Chain) -> str:
    """A hash of the chain's times and sizes (not its names)."""
    h = hashlib.sha1()
    for a in (chain.u_fa, chain.u_fn, chain.u_b, chain.x, chain.xbar, chain.o_fa, chain.o_fn, chain.o_b):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def cached_table(chain: Chain, table_budget: int, slots: int) -> tuple[Chain, RotorTable]:
    """(the chain discretised into `slots` slots of `table_budget` (the chain's memory unit), its full rotor table),
    built once per (chain, table_budget, slots) and kept in `_CACHE`."""
    from .dp import rotor_table

    key = (fingerprint(chain), int(table_budget), int(slots))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    n = effective_slots(int(table_budget), int(slots))  # 0: exact sizes, B itself is the top value
    work = chain.discretised(int(table_budget) / n) if n else chain
    entry = (work, rotor_table(work, max((n or int(table_budget)) - int(work.x[0]), 0)))
    _CACHE[key] = entry
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return entry


def slots_within(budget: int, table_budget: int, slots: int) -> int:
    """Whole slots of ``table_budget / slots`` (the chain's memory unit) within `budget` (exact integer floor); the
    budget itself when the table keeps exact sizes (a table budget of at most `slots` units)."""
    if not effective_slots(int(table_budget), int(slots)):
        return int(budget)
    return (int(budget) * int(slots)) // int(table_budget)
