"""Redundant link-capacity rows of `offload-exact` (`solvers.offload.exact_free`): a stronger bound
(and `run_edge`, the Boolean that marks where a run of away pieces starts or ends).

The model's linear relaxation only sees the compute stream: its bound stays at the sum of the
compute times while the transfer stream, tied to the slots by enforced (big-M) rows, is left to
the search. These rows state, linearly in the away Booleans ``w[v, q]``, that the single link
must carry the transfers that memory forces. Notation of docs/offload.md: piece q of slot p is
``G_p = [e(p-1), s(p))`` (q = 2p) or ``W_p = [s(p), e(p))`` (q = 2p+1); value v = ``a_i`` or
``abar_i`` has *index* i(v) = i and transfer time T(v) (ticks).

*Off side.* A value of index i >= 1 first exists at the end of slot (L, i-1) (phase L runs every
stage once, stage i-1 producing ``a_i`` or ``abar_i``); ``a_0`` exists from time 0. A value away
during piece q had an Off that moved its bytes (its first: later ones are free) after it first
existed and before q started; these Offs are distinct intervals of the one transfer stream. So
for each threshold i0 with slot (L, i0-1) before slot p:

    start(q) >= e(L, i0-1) + sum_{v: i(v) >= i0} T(v) w[v, q]        (e(L, -1) = 0)

*Pre side.* A value away during piece q is read again (every resident value is freed by a
reader: a backward op or an F_n), so a Pre of it (always T(v)) lies between the end of q and
the start of its next reader, which starts no later than its last possible reader: ``B(i)`` for
``a_i`` (i < L), the Loss for ``a_L``, ``B(i-1)`` for ``abar_i``. For each backward slot b = B(m)
(or the Loss, m = L) after slot p, with D(b) the values whose last possible reader is b or an
earlier backward op:

    s(b) >= end(q) + sum_{v in D(b)} T(v) w[v, q]

Both hold for every schedule of the model's class (each term is a distinct interval of the
transfer stream inside the window), so the optimum is unchanged; they give the relaxation the
knapsack "values away at a memory peak cost their transfer time on the link". `offload-exact`
states them by default (`exact_free.LINK_ROWS`) and solves at linearization level 2
(`exact_free_hint.CPSAT_EXTRA`), which puts them in the LP; tests: tests/test_offload_exact_cuts.py,
tests/test_offload_exact_proof.py (every row at arbitrary solutions of the class).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .exact_free import FreeOrderModel, Value


def add_link_bounds(model: FreeOrderModel, every_piece: bool = False) -> list[tuple[Any, Any]]:
    """Add the rows of the module docstring to `model.cp`; returns them as (lhs, rhs) pairs of
    linear expressions (``lhs >= rhs``), so that a test can evaluate them at any solution.
    `every_piece`: rows for every piece; by default only for the pieces of the backward slots and
    the Loss (the memory peaks, where the store-all state is largest), a few hundred rows."""
    cp, L, slots = model.cp, model.L, model.slots
    T = model.T
    by_piece: dict[int, list[tuple[Value, Any]]] = {}
    for (v, q), wv in model.w.items():
        if T.get(v, 0) > 0:
            by_piece.setdefault(q, []).append((v, wv))
    # backward slots in time order, each with the smallest stage index whose values it is the deadline of
    backs = [(p, sl.k) for p, sl in enumerate(slots) if sl.j is None]

    def last_reader(v: Value) -> int:
        """The phase (k of B(k); L for the Loss) of the last op that may read v."""
        return v[1] if v[0] == "a" else v[1] - 1

    added: list[tuple[Any, Any]] = []
    for q, terms in by_piece.items():
        p = q // 2
        if not every_piece and slots[p].j is not None:
            continue
        start = model.s[p] if q % 2 else model.e[p - 1]
        end = model.e[p] if q % 2 else model.s[p]
        # Off side: thresholds i0 = 0 (a_0 exists from time 0) and i0 >= 1 with slot (L, i0-1) < p
        for i0 in range(0, L + 1):
            if i0 >= 1 and i0 - 1 >= p:
                break
            part = [(T[v], wv) for v, wv in terms if v[1] >= i0]
            if not part:
                continue
            origin = 0 if i0 == 0 else model.e[i0 - 1]
            added.append((start, origin + sum(t * wv for t, wv in part)))
        # Pre side: backward slots after p; values whose last possible reader is at or before them
        for b, m in backs:
            if b <= p:
                continue
            part = [(T[v], wv) for v, wv in terms if last_reader(v) >= m]
            if not part:
                continue
            added.append((model.s[b], end + sum(t * wv for t, wv in part)))
    for lhs, rhs in added:
        cp.add(lhs >= rhs)
    return added


def run_edge(cp: Any, w: Any, neighbour: Any) -> Any:
    """A Boolean of `cp` (the model's CP-SAT model) that is 1 exactly when piece `w` is away and
    its `neighbour` piece (the one before it for a run's start, after it for its end; None at the
    ends) is not: the start or end of a run of away pieces (an Off or a Pre)."""
    edge = cp.new_bool_var("")
    cp.add_implication(edge, w)
    if neighbour is None:
        cp.add(edge == w)
    else:
        cp.add(edge >= w - neighbour)
        cp.add_implication(edge, neighbour.negated())
    return edge
