"""H-Revolve: optimal checkpointing of a homogeneous adjoint chain on a hierarchy of storage
levels with write and read costs (Herrmann & Pallez, "H-Revolve: a framework for adjoint
computation on synchronous hierarchical platforms", ACM TOMS 46(2), 2020; its two-level
predecessor is Disk-Revolve: Aupy, Herrmann, Hovland & Robert, "Optimal multistage algorithm
for adjoint computation", SIAM J. Sci. Comput. 38(3), 2016).

**The model (abstract, not our offload simulator's).**

- *Adjoint chain of length l.* Values x_0 .. x_l. Forward steps F_i : x_{i-1} -> x_i
  (i = 1..l), each of cost u_f. Backward steps Fbar_i (i = l+1, l, .., 1), each of cost u_b:
  Fbar_i needs x_{i-1} (and the adjoint xbar_i, produced by Fbar_{i+1}; Fbar_{l+1} is the
  turn, it needs x_l only) and yields xbar_{i-1}. The backward steps run in that order, each
  exactly once, so Fbar_i is allowed only when Fbar_{i+1} .. Fbar_{l+1} are done. (In
  Revolve's terms, Fbar_i is the reversal of step i, taped forward included: a chain of
  length l is Revolve with l + 1 steps, l of which can be advanced.)
- *A buffer* holds the current forward value (one x_i, or nothing). Initially it holds x_0
  and no level stores anything. F_i needs x_{i-1} in the buffer and leaves x_i there;
  Fbar_i needs x_{i-1} in the buffer and leaves it empty.
- *K storage levels* k = 0 .. K-1 (0 the fastest, usually the device memory). Level k holds at
  most c_k values (c_k = None: unlimited); writing the buffer's value x_i to level k
  (W^k(x_i)) costs w_k, reading a stored x_i from level k into the buffer (R^k(x_i)) costs
  r_k, discarding it (D^k(x_i)) is free. Values move only between the buffer and a level.
  Level 0 is typically memory with w_0 = r_0 = 0.
- *Synchronous:* operations run one at a time, so the cost of a schedule is the sum of the
  costs of its operations: (#F) u_f + (l + 1) u_b + sum_k (#W^k w_k + #R^k r_k).

**The dynamic program** (H-Revolve; our notation). For level k, chain length l and m slots
of level k (levels 0..k-1 fully available, levels above k not usable):

- E_k(l, m): x_0 is in the buffer and stored nowhere;
- P_k(l, m), m >= 1: x_0 is in the buffer and stored at level k in one of the m slots.

    E_k(0, m) = P_k(0, m) = u_b                                (one step: turn / Fbar_1)
    E_k(l, 0) = E_{k-1}(l, c_{k-1})                           (E_{-1}(l, .) = inf for l >= 1)
    E_k(l, m) = min( E_{k-1}(l, c_{k-1}),  w_k + P_k(l, m) )
    P_k(l, m) = min( E_{k-1}(l, c_{k-1}),
                     min_{1<=j<=l}  j u_f + E_k(l - j, m - 1) + r_k + P_k(j - 1, m) )

The second branch of P: advance j steps to x_j, reverse the chain x_j .. x_l with one slot
of level k less, read x_0 back from level k, and reverse x_0 .. x_{j-1} with x_0 still stored.
The first branch of P drops x_0's copy at level k and continues with the lower levels only
(x_0 is still in the buffer). The optimum is E_{K-1}(l, c_{K-1}). With one level and
w_0 = r_0 = 0 this is Revolve: E_0(l, c) = (l + 1) u_b + p(l + 1, c) u_f with p the binomial
optimum of `solvers.chain.revolve`; with two levels, w_0 = r_0 = 0 and c_1 unlimited it is
Disk-Revolve's optimum. Differences from the table of the authors' public code: our P_k(1, m) charges
min(r_k, w_j + r_j for a lower level j) as the recurrence implies (the published table charges
r_0 there while its schedule reads from level k when that is cheaper), and j = l is allowed
in the second branch (pure recomputation from x_0), which makes the one-slot case a special
case of the recurrence instead of a closed form.

Slot counts are capped at l (no schedule of this class stores more than l values of a chain
of length l at one level), so unlimited levels cost O(l) slots, and the filling of level k
stops at the first m with E_k(., m) = E_k(., m - 1) (the columns repeat from there on). Time
O(sum_k c_k l^2) at worst, with the inner minimum over j vectorised.

**What is proven.** Herrmann & Pallez (2020) state H-Revolve optimal for this model with the
levels ordered by cost, w_0 <= w_1 <= ... and r_0 <= r_1 <= ... (Aupy et al. 2016 prove the
two-level case, Disk-Revolve: free memory, unlimited disk); we rely on their proofs. Here
`hrevolve_brute.brute_force_hrevolve` computes the true optimum over *all* schedules of the
model for tiny instances (Dijkstra over the states: buffer, next backward step, values stored
per level), and the tests check the DP against it; the schedules the DP reconstructs replay in
`simulate_hrevolve`, an independent checker of the rules above, to the DP's cost. On the
order given, the DP is *not* optimal when the costs are not monotone (e.g. l = 5, levels
[(1, 3, 4), (1, 2, 4)], u_f = 3, u_b = 2: DP 64, optimum 63, since level 1 is the cheaper
one); `hrevolve` therefore sorts the levels by cost first, and when no order is monotone
(a level cheaper to write but dearer to read than another) it takes the best DP over all
orders (up to 5 levels; beyond, the order by w_k + r_k only), which is a schedule without an
optimality proof (it matched the brute force on the tiny instances we tried). Levels with 0 slots
can hold nothing: they are left out of the ordering and of this monotonicity test (an unusable
level never costs the proof), and the schedule's levels are numbered as given. Orders sharing a
prefix share its tables; with a `time_limit` the search over orders stops early (the first
order, by w_k + r_k, always completes).

**Relation to the offload problem.** This is an abstract model: a homogeneous chain (every
value has the same size, one slot), transfers that block computation (synchronous), no
tapes kept beyond a turn. Its schedules are lists of `HOp` (F, B, W, R, D), not operations of
`solvers.offload.simulator`, so `solve_hrevolve` returns a `HSchedule` (with `to_json` and
`__len__`) that the offload simulator cannot replay.
"""

from __future__ import annotations

import itertools
import math
import numbers
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..exact.interrupt import answering, note_interrupt
from ..progress import report
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from ..units import short_number

FWD, BWD, WRITE, READ, DISCARD = "F", "B", "W", "R", "D"
KINDS = (FWD, BWD, WRITE, READ, DISCARD)
SCOPE = ("H-Revolve abstract model (homogeneous chain, synchronous transfers); the schedule is a list "
         "of abstract ops F/B/W/R/D, not an offload-simulator schedule")


# --------------------------------------------------------------------------------------------
# Instance, operations, schedule
# --------------------------------------------------------------------------------------------


class Level(NamedTuple):
    """One storage level: `slots` values at most (None: unlimited), write cost `write` (w_k),
    read cost `read` (r_k), in the unit of u_f and u_b."""

    slots: int | None
    write: float = 0.0
    read: float = 0.0


def _is_count(value: Any) -> bool:
    """Whether `value` is a whole number >= 0: an integer (numpy's too) or a float with an integral
    value (3.0); a bool, NaN, an infinity, a fraction or a non-number is not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    if isinstance(value, numbers.Integral):  # no float conversion: math.isfinite(10**400) overflows
        return int(value) >= 0
    try:
        as_float = float(value)  # a Real: numpy floats, Fraction(6, 2)
    except OverflowError:  # Fraction(10**400): too large to be a count anyway
        return False
    return math.isfinite(as_float) and as_float.is_integer() and as_float >= 0


def check_length(value: Any, field: str = "l") -> int:
    """The chain length l (forward steps) as an int >= 0: an integer, or a float with an integral
    value (3.0 -> 3). A bool, a fraction (2.5), NaN, an infinity, a negative number or a
    non-number is an `InputError` (a ValueError) naming `field`."""
    if not _is_count(value):
        shown = short_number(value) if isinstance(value, int) else repr(value)
        raise InputError(f"must be a non-negative integer (the chain length), got {shown[:80]}", field=field)
    return int(value)


def as_levels(levels: Sequence[Any]) -> tuple[Level, ...]:
    """Normalise `levels` ((c_k, w_k, r_k) triples or `Level`s) and check them: each level exactly 3
    items; c_k a whole number >= 0 (an integral float such as 2.0 is stored as 2) or None for an
    unlimited level (math.inf is refused: None is the spelling of unlimited); w_k and r_k real
    numbers (not bools, not strings), finite and >= 0. An `InputError` (a ValueError) naming the
    level (``level k``) otherwise; a ValueError when there is no level."""
    out = []
    if len(levels) == 0:
        raise ValueError("H-Revolve needs at least one storage level")
    for k, lev in enumerate(levels):
        c, w, r = _level_items(lev, k)
        if c is not None and not _is_count(c):
            shown = short_number(c) if isinstance(c, int) else repr(c)
            raise InputError(f"slots must be a non-negative integer or None (unlimited), got {shown[:80]}",
                             field=f"level {k}")
        write, read = _real(w), _real(r)
        if write is None or read is None or not (write >= 0 and read >= 0 and math.isfinite(write)
                                                 and math.isfinite(read)):
            raise InputError(f"write and read costs must be finite numbers >= 0, got {_shown(w)}, {_shown(r)}",
                             field=f"level {k}")
        out.append(Level(None if c is None else int(c), write, read))
    return tuple(out)


def _level_items(lev: Any, k: int) -> tuple[Any, Any, Any]:
    """The (slots, write, read) of level `k` as given; an `InputError` naming ``level k`` unless it
    is a sequence of exactly 3 items (a string is not one)."""
    items = None if isinstance(lev, (str, bytes)) else _items(lev)
    if items is None or len(items) != 3:
        raise InputError(f"expected (slots, write, read), 3 items, got {_shown(lev)}", field=f"level {k}")
    return items[0], items[1], items[2]


def _items(value: Any) -> tuple[Any, ...] | None:
    """`value` as a tuple, or None when it cannot be iterated."""
    try:
        return tuple(value)
    except TypeError:
        return None


def _real(value: Any) -> float | None:
    """`value` as a float when it is a real number (numpy's too) and not a bool; None otherwise. An
    integer too large for a float is inf (refused as not finite by the callers)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _shown(value: Any) -> str:
    """`value` for a message, at most 80 characters (a huge integer abbreviated)."""
    return (short_number(value) if isinstance(value, int) and not isinstance(value, bool) else repr(value))[:80]


def check_step_costs(u_f: Any, u_b: Any) -> None:
    """u_f and u_b are real numbers (not bools, not strings), finite and >= 0: an `InputError` (a
    ValueError) naming ``u_f`` or ``u_b`` otherwise."""
    for name, value in (("u_f", u_f), ("u_b", u_b)):
        as_float = _real(value)
        if as_float is None or not (as_float >= 0 and math.isfinite(as_float)):
            raise InputError(f"must be a finite number >= 0 (u_f and u_b are the step costs), got {_shown(value)}",
                             field=name)


def has_slot(l: int, levels: Sequence[Any]) -> bool:
    """Whether a schedule exists: l = 0 (the turn alone), or some level has a slot to hold x_0."""
    return l == 0 or any(lev.slots != 0 for lev in as_levels(levels))


#: why `hrevolve` finds no schedule
NO_SLOT = "a chain of length >= 1 needs at least one storage slot"


class HOp(NamedTuple):
    """An abstract operation. `kind`: F (forward F_index: x_{index-1} -> x_index), B (backward
    Fbar_index), W / R / D (write, read, discard x_index at storage level `level`). `str` writes
    ``F3``, ``Fbar3`` (kind B), ``W^1(x2)``, ``R^1(x2)``, ``D^1(x2)``; `to_json` keeps the kind letter."""

    kind: str
    index: int  # type: ignore[assignment]  # the field shadows tuple.index on purpose (the papers' index)
    level: int | None = None

    def __str__(self) -> str:
        if self.kind == FWD:
            return f"F{self.index}"
        if self.kind == BWD:
            return f"Fbar{self.index}"
        return f"{self.kind}^{self.level}(x{self.index})"

    def to_json(self) -> list[Any]:
        """``[kind, index, level]``."""
        return [self.kind, self.index, self.level]


@dataclass(frozen=True)
class HRevolveInstance:
    """An adjoint chain of `length` forward steps (l) on storage `levels`; costs u_f, u_b."""

    length: int
    levels: tuple[Level, ...]
    u_f: float = 1.0
    u_b: float = 1.0

    def __post_init__(self) -> None:
        # stored as an int (3.0 -> 3); InputError (a ValueError) naming `length` when not a whole number >= 0
        object.__setattr__(self, "length", check_length(self.length, "length"))
        check_step_costs(self.u_f, self.u_b)
        for name in ("u_f", "u_b"):  # -0.0 (which passes as >= 0) is stored and reported as 0.0
            if isinstance(getattr(self, name), float) and getattr(self, name) == 0:
                object.__setattr__(self, name, 0.0)
        object.__setattr__(self, "levels", as_levels(self.levels))

    def with_slots(self, level: int, slots: int | None) -> HRevolveInstance:
        """The same instance with `slots` at `level`."""
        levels = list(self.levels)
        levels[level] = levels[level]._replace(slots=slots)
        return HRevolveInstance(self.length, tuple(levels), self.u_f, self.u_b)


@dataclass
class HSchedule:
    """Abstract H-Revolve operations in execution order (see the module docstring)."""

    ops: list[HOp]
    length: int
    levels: tuple[Level, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[HOp]:
        return iter(self.ops)

    def __str__(self) -> str:
        return " ".join(map(str, self.ops))

    def counts(self) -> dict[str, int]:
        """Number of operations of each kind."""
        out = dict.fromkeys(KINDS, 0)
        for op in self.ops:
            out[op.kind] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        """The ``memsched.hrevolve/1`` object of this schedule."""
        return {
            "format": "memsched.hrevolve/1",
            "model": "H-Revolve abstract model (not replayable by the offload simulator)",
            "length": self.length,
            "levels": [[lev.slots, lev.write, lev.read] for lev in self.levels],
            "ops": [op.to_json() for op in self.ops],
        }


# --------------------------------------------------------------------------------------------
# The dynamic program
# --------------------------------------------------------------------------------------------


@dataclass
class HRevolveTables:
    """E[k], P[k]: arrays of shape (l + 1, cap_k + 1) (see the module docstring); `caps[k]` the
    slot count of level k capped at l."""

    length: int
    levels: tuple[Level, ...]
    u_f: float
    u_b: float
    caps: list[int]
    E: list[np.ndarray]
    P: list[np.ndarray]

    def lower(self, k: int, l: int) -> float:
        """E_{k-1}(l, c_{k-1}): the cost without level k (inf below level 0 unless l = 0)."""
        if k == 0:
            return self.u_b if l == 0 else math.inf
        return float(self.E[k - 1][l, self.caps[k - 1]])

    def split_costs(self, k: int, l: int, m: int) -> np.ndarray:
        """Second branch of P_k(l, m) for j = 1..l (entry j - 1)."""
        lev = self.levels[k]
        E, P = self.E[k], self.P[k]
        j = np.arange(1, l + 1, dtype=float)
        with np.errstate(over="ignore"):  # a sum beyond 1.8e308 is inf: `hrevolve_schedule` says so
            return j * self.u_f + E[:l, m - 1][::-1] + lev.read + P[:l, m]

    @property
    def optimum(self) -> float:
        """The optimal makespan for the whole chain with every level's capacity."""
        K = len(self.levels)
        return float(self.E[K - 1][self.length, self.caps[K - 1]])


def _cap(c: int | None, l: int) -> int:
    return l if c is None else min(c, l)


def hrevolve_tables(l: int, levels: Sequence[Any], u_f: float = 1.0, u_b: float = 1.0) -> HRevolveTables:
    """Fill the H-Revolve tables E_k(l', m), P_k(l', m) for all l' <= l. An entry whose cost
    overflows a float is inf (as is one without a schedule). `l` a whole number >= 0 (`check_length`:
    InputError naming ``l`` otherwise)."""
    l = check_length(l)
    check_step_costs(u_f, u_b)
    tabs = _no_tables(l, u_f, u_b)
    for lev in as_levels(levels):
        tabs = _add_level(tabs, lev)
    return tabs


def _no_tables(l: int, u_f: float, u_b: float) -> HRevolveTables:
    """The tables of no level (the start of `_add_level`)."""
    return HRevolveTables(l, (), float(u_f), float(u_b), [], [], [])


def _add_level(tabs: HRevolveTables, lev: Level) -> HRevolveTables:
    """New tables with `lev` on top of the levels of `tabs` (whose arrays it shares: filled
    tables are never written again, so orders of levels with a common prefix share them)."""
    l, k = tabs.length, len(tabs.levels)
    cap = _cap(lev.slots, l)
    E = np.full((l + 1, cap + 1), math.inf)
    P = np.full((l + 1, cap + 1), math.inf)
    out = HRevolveTables(l, (*tabs.levels, lev), tabs.u_f, tabs.u_b, [*tabs.caps, cap], [*tabs.E, E], [*tabs.P, P])
    lower = np.array([out.lower(k, q) for q in range(l + 1)])
    E[:, 0] = lower
    E[0, :] = tabs.u_b
    P[0, 1:] = tabs.u_b
    steps = np.arange(1, l + 1, dtype=float) * tabs.u_f  # j u_f for j = 1..l, as in `split_costs`
    for m in range(1, cap + 1):
        # rows q < m repeat column m - 1 (a chain of length q uses at most q slots; by induction the
        # recurrence of those entries reads only entries that repeat too): copy them, fill q >= m
        E[1:m, m] = E[1:m, m - 1]
        P[1:m, m] = P[1:m, m - 1]
        with np.errstate(over="ignore"):  # inf beyond 1.8e308, told apart by `hrevolve_schedule`
            for q in range(m, l + 1):
                # = split_costs(k, q, m), inlined: the same sums in the same order
                best = min(lower[q], float((steps[:q] + E[q - 1::-1, m - 1] + lev.read + P[:q, m]).min()))
                P[q, m] = best
                E[q, m] = min(lower[q], lev.write + best)
        if np.array_equal(E[:, m], E[:, m - 1]):
            # column m + 1 would repeat column m's recurrence: E and P saturate in m
            E[:, m + 1:] = E[:, m:m + 1]
            P[:, m + 1:] = P[:, m:m + 1]
            break
    return out


def hrevolve_cost(l: int, levels: Sequence[Any], u_f: float = 1.0, u_b: float = 1.0) -> float:
    """The H-Revolve optimum E_{K-1}(l, c_{K-1}) (math.inf when no schedule exists, `has_slot`, or
    when the cost overflows a float)."""
    return hrevolve_tables(l, levels, u_f, u_b).optimum


def hrevolve_schedule(tabs: HRevolveTables) -> list[HOp]:
    """Rebuild an optimal schedule from the tables (explicit stack, no recursion limit).
    ValueError when no schedule exists (`NO_SLOT`) or when the optimum overflows a float (costs too
    large; told apart, never the one for the other)."""
    if not math.isfinite(tabs.optimum):
        if not has_slot(tabs.length, tabs.levels):
            raise ValueError(f"no schedule: {NO_SLOT}")
        raise ValueError(f"the optimal cost overflows a float (above {sys.float_info.max:.3g}): the write/read "
                         "costs, u_f and u_b are too large for this chain; scale them down")
    K = len(tabs.levels)
    ops: list[HOp] = []
    stack: list[Any] = [("E", K - 1, tabs.length, tabs.caps[K - 1], 0)]
    while stack:
        item = stack.pop()
        if isinstance(item, HOp):
            ops.append(item)
            continue
        what, k, l, m, off = item
        if l == 0:  # x_off in the buffer: the last backward step of this sub-chain
            ops.append(HOp(BWD, off + 1))
            if what == "P":
                ops.append(HOp(DISCARD, off, k))
            continue
        lower = tabs.lower(k, l)
        if what == "E":
            if m == 0 or lower <= tabs.levels[k].write + tabs.P[k][l, m]:
                stack.append(("E", k - 1, l, tabs.caps[k - 1], off))
            else:
                ops.append(HOp(WRITE, off, k))
                stack.append(("P", k, l, m, off))
            continue
        splits = tabs.split_costs(k, l, m)
        jbest = int(np.argmin(splits))
        if lower <= splits[jbest]:
            ops.append(HOp(DISCARD, off, k))
            stack.append(("E", k - 1, l, tabs.caps[k - 1], off))
            continue
        j = jbest + 1
        ops.extend(HOp(FWD, i) for i in range(off + 1, off + j + 1))
        # run in order: E(k, l-j, m-1, off+j); read x_off; P(k, j-1, m, off)
        stack.append(("P", k, j - 1, m, off))
        stack.append(HOp(READ, off, k))
        stack.append(("E", k, l - j, m - 1, off + j))
    return ops


def costs_monotone(levels: Sequence[Any]) -> bool:
    """True when w_0 <= w_1 <= ... and r_0 <= r_1 <= ... (H-Revolve's ordering of the levels)."""
    levs = as_levels(levels)
    return all(a.write <= b.write and a.read <= b.read for a, b in zip(levs, levs[1:]))


#: the most usable levels whose every order `level_orders` tries when their costs are incomparable (5! = 120)
MAX_ALL_ORDERS = 5


def usable_levels(levels: Sequence[Any]) -> list[int]:
    """Indices of the levels with at least one slot (a 0-slot level can never hold a value)."""
    return [k for k, lev in enumerate(as_levels(levels)) if lev.slots != 0]


def level_orders(levels: Sequence[Any]) -> tuple[bool, list[tuple[int, ...]]]:
    """The orders of the levels to try: (proven, orders), each order a tuple of level indices
    (as given) of the usable levels only (`usable_levels`: 0-slot levels are left out, they
    change no DP). When some order makes the usable levels' costs monotone (each level dominates
    the next one), that order alone (proven = True); otherwise, with K usable levels, every order
    for K <= `MAX_ALL_ORDERS` (the order by (w_k + r_k) first, then the others in lexicographic
    order of that one, so that consecutive orders share prefixes), or the order by (w_k + r_k)
    alone beyond (proven = False either way). Without a usable level: the given order, proven
    (l = 0 costs u_b, l >= 1 has no schedule)."""
    levs = as_levels(levels)
    use = usable_levels(levs)
    if not use:
        return True, [tuple(range(len(levs)))]
    by_cost = tuple(sorted(use, key=lambda k: (levs[k].write, levs[k].read)))
    if costs_monotone([levs[k] for k in by_cost]):
        return True, [by_cost]
    by_sum = tuple(sorted(use, key=lambda k: (levs[k].write + levs[k].read, levs[k].write)))
    if len(use) <= MAX_ALL_ORDERS:
        return False, list(itertools.permutations(by_sum))
    return False, [by_sum]


@dataclass
class OrderSearch:
    """What `best_order` found: the best `tables` (levels in `order`, indices as given), and how
    many of the `total` orders it `tried` (fewer when its time limit came or a Ctrl-C stopped it:
    `interrupted`)."""

    tables: HRevolveTables
    order: tuple[int, ...]
    tried: int
    total: int
    interrupted: bool = False


def best_order(l: int, levels: Sequence[Any], orders: Sequence[tuple[int, ...]], u_f: float = 1.0,
               u_b: float = 1.0, time_limit: float | None = None) -> OrderSearch:
    """The DP on each of `orders` in turn (the first, cheapest on ties, wins): a stack of the
    tables of the current order's prefixes is shared with the next order. With `time_limit`
    (seconds, wall clock) no order starts after it has passed; the first always runs. `l` as in
    `hrevolve_tables`.

    Progress goes to `solvers.progress.report`: the stage ``level order i/N`` before each order,
    the best cost so far after it. A `KeyboardInterrupt` (Ctrl-C) inside `answer_on_interrupt` (the
    command line's block) stops the search with the best of the orders finished (``interrupted``,
    recorded by `note_interrupt`); before the first order finished, or outside such a block, it is
    raised, as for any Ctrl-C."""
    l = check_length(l)
    levs = as_levels(levels)
    check_step_costs(u_f, u_b)
    t0 = time.perf_counter()
    stack: list[tuple[int, HRevolveTables]] = []  # (level index, tables up to it)
    best: tuple[HRevolveTables, tuple[int, ...]] | None = None
    tried = 0
    stopped = False
    try:
        for i, order in enumerate(orders, 1):
            if best is not None and time_limit is not None and time.perf_counter() - t0 >= time_limit:
                break
            report(f"level order {i}/{len(orders)}")
            tabs = _order_tables(stack, order, levs, l, u_f, u_b)
            tried += 1
            if best is None or tabs.optimum < best[0].optimum:
                best = (tabs, tuple(order))
            if math.isfinite(best[0].optimum):
                report(best=best[0].optimum)
    except KeyboardInterrupt:
        if best is None or not answering():
            raise
        note_interrupt()
        stopped = True
    if best is None:
        raise ValueError("no order of the levels to try")
    return OrderSearch(best[0], best[1], tried, len(orders), stopped)


def _order_tables(stack: list[tuple[int, HRevolveTables]], order: tuple[int, ...], levs: tuple[Level, ...],
                  l: int, u_f: float, u_b: float) -> HRevolveTables:
    """The tables of `order`: `stack` (the previous order's (level index, tables) per prefix) is cut to
    the prefix it shares with `order`, then extended to all of it. Tables are never written once
    filled, so a `stack` cut short by an interrupt leaves every finished order's tables intact."""
    keep = 0
    while keep < min(len(stack), len(order)) and stack[keep][0] == order[keep]:
        keep += 1
    del stack[keep:]
    for k in order[keep:]:
        stack.append((k, _add_level(stack[-1][1] if stack else _no_tables(l, u_f, u_b), levs[k])))
    return stack[-1][1]


def hrevolve(l: int, levels: Sequence[Any], u_f: float = 1.0, u_b: float = 1.0, *,
             reorder: bool = True, time_limit: float | None = None) -> tuple[float, list[HOp]]:
    """H-Revolve for an adjoint chain of length `l` on `levels` = [(c_k, w_k, r_k), ...]
    (c_k = None for unlimited): (cost, schedule as a list of `HOp`, levels numbered as given).

    The DP assumes the levels ordered by cost (w_k and r_k non-decreasing in k); it is then
    optimal. With `reorder` (default) the levels with a slot are first sorted by cost (0-slot
    levels, which can hold nothing, are left out: `level_orders`) and the DP is optimal when
    that order is monotone. Otherwise (a level cheaper to write but dearer to read than
    another) the answer is a feasible schedule with no optimality proof: the best DP over all
    orders of the K usable levels when K <= 5 (120 orders), over the single order by
    w_k + r_k when K > 5; with `time_limit` (seconds) the orders stop when it has passed (the
    order by w_k + r_k is tried first and always completes). With `reorder=False` the DP runs
    on the order given. Raises ValueError when no schedule exists (l >= 1 and no storage slot
    at all) or when the optimal cost overflows a float (costs too large), with a message saying
    which, and an `InputError` (a ValueError) naming ``l`` when `l` is not a whole number >= 0
    (`check_length`; 3.0 is read as 3, a bool is refused). A Ctrl-C during the search over orders
    is handled as in `best_order`."""
    l = check_length(l)
    levs = as_levels(levels)
    orders = level_orders(levs)[1] if reorder else [tuple(range(len(levs)))]
    found = best_order(l, levs, orders, u_f, u_b, time_limit)
    return found.tables.optimum, _schedule_as_given(found)


def _schedule_as_given(found: OrderSearch) -> list[HOp]:
    """The schedule of `found`'s tables with its levels numbered as the caller gave them."""
    order = found.order
    return [op if op.level is None else op._replace(level=order[op.level]) for op in hrevolve_schedule(found.tables)]


# --------------------------------------------------------------------------------------------
# Independent simulator of the abstract model
# --------------------------------------------------------------------------------------------


class HRevolveViolation(ValueError):
    """A schedule breaks a rule of the model; `position` is the index of the offending op."""

    def __init__(self, message: str, position: int | None = None):
        self.position = position
        super().__init__(message if position is None else f"op {position}: {message}")


@dataclass
class HSimulation:
    """What `simulate_hrevolve` measured: total cost, peak number of stored values per level,
    and the number of operations of each kind."""

    cost: float
    peak_slots: list[int]
    counts: dict[str, int]


def simulate_hrevolve(l: int, levels: Sequence[Any], ops: Sequence[Any], u_f: float = 1.0,
                      u_b: float = 1.0) -> HSimulation:
    """Replay `ops` (HOp or (kind, index, level) triples) on the model of the module docstring.

    Checks: F_i needs x_{i-1} in the buffer (1 <= i <= l); Fbar_i needs x_{i-1} in the buffer and
    every later backward step done (so each is done once, in order); W^k(x_i) needs x_i in the
    buffer, x_i not yet at level k and a free slot (at most c_k values); R^k(x_i) and D^k(x_i)
    need x_i at level k; at the end all l + 1 backward steps are done. Raises
    `HRevolveViolation`; returns the total cost otherwise. `l` as in `hrevolve_tables` (InputError
    when not a whole number >= 0)."""
    l = check_length(l)
    levs = as_levels(levels)
    K = len(levs)
    buffer: int | None = 0
    nxt = l + 1  # the next backward step to run
    stored: list[set[int]] = [set() for _ in range(K)]
    peak = [0] * K
    counts = dict.fromkeys(KINDS, 0)
    cost = 0.0
    for pos, raw in enumerate(ops):
        kind, i, k = raw
        if kind not in KINDS:
            raise HRevolveViolation(f"unknown operation {kind!r}", pos)
        if kind in (WRITE, READ, DISCARD) and (k is None or not 0 <= k < K):
            raise HRevolveViolation(f"{kind} names level {k!r}, not one of 0..{K - 1}", pos)
        if kind == FWD:
            if not 1 <= i <= l:
                raise HRevolveViolation(f"F{i}: no such forward step (1..{l})", pos)
            if buffer != i - 1:
                raise HRevolveViolation(f"F{i} needs x{i - 1} in the buffer, which holds {_held(buffer)}", pos)
            buffer = i
            cost += u_f
        elif kind == BWD:
            if i != nxt:
                raise HRevolveViolation(f"Fbar{i} out of order: the next backward step is Fbar{nxt}", pos)
            if buffer != i - 1:
                raise HRevolveViolation(f"Fbar{i} needs x{i - 1} in the buffer, which holds {_held(buffer)}", pos)
            nxt -= 1
            buffer = None
            cost += u_b
        elif kind == WRITE:
            if buffer != i:
                raise HRevolveViolation(f"W^{k}(x{i}) needs x{i} in the buffer, which holds {_held(buffer)}", pos)
            if i in stored[k]:
                raise HRevolveViolation(f"x{i} is already stored at level {k}", pos)
            cap = levs[k].slots
            if cap is not None and len(stored[k]) >= cap:
                raise HRevolveViolation(f"level {k} is full ({cap} slots)", pos)
            stored[k].add(i)
            peak[k] = max(peak[k], len(stored[k]))
            cost += levs[k].write
        elif kind == READ:
            if i not in stored[k]:
                raise HRevolveViolation(f"R^{k}(x{i}): x{i} is not stored at level {k}", pos)
            buffer = i
            cost += levs[k].read
        else:
            if i not in stored[k]:
                raise HRevolveViolation(f"D^{k}(x{i}): x{i} is not stored at level {k}", pos)
            stored[k].discard(i)
        counts[kind] += 1
    if nxt != 0:
        raise HRevolveViolation(f"the schedule ends before Fbar{nxt} .. Fbar1 are done")
    return HSimulation(cost, peak, counts)


def _held(buffer: int | None) -> str:
    return "nothing" if buffer is None else f"x{buffer}"


# --------------------------------------------------------------------------------------------
# Solver-style entry point
# --------------------------------------------------------------------------------------------


def solve_hrevolve(instance: HRevolveInstance, budget: int | None = None, *, time_limit: float | None = None,
                   **_: Any) -> SolveResult:
    """H-Revolve on `instance`; `budget`, when given, is the number of slots of level 0 (the
    device memory, in values of the homogeneous chain). Status `optimal` for the abstract
    model (`SCOPE`) when the levels with a slot can be ordered by cost, or when l = 0 (every
    schedule runs the one backward step Fbar1, and the DP's runs nothing else: one order is run),
    `feasible` otherwise (see `hrevolve`; `time_limit`, in seconds, bounds the search over orders
    then), and `infeasible` only when no level has a slot (l >= 1). ValueError when the optimal cost
    overflows a float (costs too large). The schedule is an `HSchedule` of abstract ops,
    replayed here by `simulate_hrevolve` (objective = its cost), not by the offload simulator;
    ``details`` has the instance (``length``, ``levels``, ``u_f``, ``u_b``), the peak slots per
    level, the op counts, and ``orders_tried`` / ``orders`` (how many orders of the levels the DP
    ran, of how many); the last four are None when no level has a slot. A `budget` that is not a
    whole number >= 0 is an `InputError` naming ``budget``.

    A Ctrl-C inside `answer_on_interrupt` (the command line's) answers with what the search over
    orders had (`best_order`), marked ``details["interrupted"] = True`` with a message saying so:
    the best order finished (status `feasible`; `optimal` only when the one order of a monotone
    hierarchy had finished), or, before any order finished, status `timeout` without a schedule
    (``orders_tried`` 0). Outside such a block the `KeyboardInterrupt` is raised."""
    t0 = time.perf_counter()
    if budget is not None and not _is_count(budget):
        raise InputError(f"must be a non-negative integer (slots of level 0), got {budget!r}"[:120], field="budget")
    inst = instance if budget is None else instance.with_slots(0, int(budget))
    l, levels = inst.length, inst.levels
    common: dict[str, Any] = {"problem": "offload", "solver": "hrevolve", "budget": budget}
    given = {"length": l, "levels": [list(lev) for lev in levels], "u_f": inst.u_f, "u_b": inst.u_b}
    if not has_slot(l, levels):
        no_schedule = {"peak_slots": None, "counts": None, "orders_tried": None, "orders": None}
        return SolveResult(status=INFEASIBLE, scope=SCOPE, solve_time_s=time.perf_counter() - t0,
                           message=NO_SLOT, details={**given, **no_schedule}, **common)
    proven, orders = level_orders(levels)
    if l == 0:  # every schedule runs Fbar1 (cost u_b) and any transfer it adds costs >= 0: Fbar1 alone, the DP's
        # on every order, is optimal
        proven, orders = True, orders[:1]
    try:
        found = best_order(l, levels, orders, inst.u_f, inst.u_b, time_limit)
    except KeyboardInterrupt:  # before the first order finished: no schedule to answer with
        if not answering():
            raise
        note_interrupt()
        none_yet: dict[str, Any] = {"peak_slots": None, "counts": None, "orders_tried": 0, "orders": len(orders),
                                    "interrupted": True}
        return SolveResult(status=TIMEOUT, scope=SCOPE, solve_time_s=time.perf_counter() - t0,
                           message=f"interrupted after {time.perf_counter() - t0:.1f} s, before the first order "
                           "of the levels was finished", details={**given, **none_yet}, **common)
    cost = found.tables.optimum
    sched = HSchedule(_schedule_as_given(found), l, levels)  # ValueError when the cost overflows
    sim = simulate_hrevolve(l, levels, sched.ops, inst.u_f, inst.u_b)
    if not math.isclose(sim.cost, cost, rel_tol=1e-9, abs_tol=1e-9):
        raise AssertionError(f"H-Revolve: DP cost {cost} but the schedule replays to {sim.cost}")
    stopped = {"interrupted": True} if found.interrupted else {}
    message = (f"interrupted after {time.perf_counter() - t0:.1f} s, {found.tried} of {found.total} level orders "
               "tried" if found.interrupted else "")
    return SolveResult(status=OPTIMAL if proven else FEASIBLE, objective=sim.cost,
                       lower_bound=cost if proven else None, schedule=sched, scope=_scope(proven, found),
                       solve_time_s=time.perf_counter() - t0, message=message,
                       details={**given, "peak_slots": sim.peak_slots, "counts": sim.counts,
                                "orders_tried": found.tried, "orders": found.total, **stopped},
                       **common)


def _scope(proven: bool, found: OrderSearch) -> str:
    """`SCOPE`, plus what was searched when the levels' costs are incomparable (no proof)."""
    if proven:
        return SCOPE
    if found.total == 1:
        return (SCOPE + f"; levels with incomparable costs: more than {MAX_ALL_ORDERS} usable levels, DP on the "
                "order by write + read cost only, no proof")
    why = "interrupted" if found.interrupted else "time limit"
    searched = "all" if found.tried == found.total else f"{found.tried} ({why}) of the"
    return SCOPE + f"; levels with incomparable costs: best DP over {searched} {found.total} level orders, no proof"
