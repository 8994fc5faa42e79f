"""Brute force over all schedules of the H-Revolve abstract model (`solvers.offload.hrevolve`),
for tiny instances: the ground truth the H-Revolve DP is tested against."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any

from .hrevolve import as_levels, check_length, check_step_costs


def brute_force_hrevolve(l: int, levels: Sequence[Any], u_f: float = 1.0, u_b: float = 1.0,
                         max_states: int = 2_000_000) -> float:
    """The optimum over *all* schedules of the model, by Dijkstra over the states (next backward
    step, buffer content, values stored per level). Only for tiny instances (l <= 5, a few
    slots). Returns math.inf when no schedule exists.

    Two reductions keep it exact: a forward step F_i with i >= next is never useful (x_i with
    i >= next is never needed again), and stored values x_i with i >= next are discarded for
    free after each backward step (they can never be read usefully). Its inputs are checked as the
    DP's are (`check_length`, `as_levels`, `check_step_costs`): a negative, fractional or bool `l` is an
    `InputError`, a negative or non-finite step cost a ValueError (a negative u_f made the search
    endless)."""
    l = check_length(l)
    check_step_costs(u_f, u_b)
    levs = as_levels(levels)
    K = len(levs)
    caps = [lev.slots if lev.slots is not None else l + 1 for lev in levs]
    empty: tuple[frozenset[int], ...] = tuple(frozenset() for _ in range(K))
    start = (l + 1, 0, empty)
    dist: dict[Any, float] = {start: 0.0}
    heap: list[tuple[float, int, Any]] = [(0.0, 0, start)]
    tie = 0
    while heap:
        d, _, state = heapq.heappop(heap)
        if d > dist.get(state, math.inf):
            continue
        nxt, buf, stored = state
        if nxt == 0:
            return d
        if len(dist) > max_states:
            raise RuntimeError(f"brute force: more than {max_states} states; instance too large")
        moves: list[tuple[float, Any]] = []
        if buf is not None and buf + 1 <= nxt - 1:
            moves.append((u_f, (nxt, buf + 1, stored)))
        if buf == nxt - 1:
            n2 = nxt - 1
            moves.append((u_b, (n2, None, tuple(frozenset(i for i in s if i < n2) for s in stored))))
        for k in range(K):
            s = stored[k]
            if buf is not None and buf not in s and len(s) < caps[k]:
                moves.append((levs[k].write, (nxt, buf, _with(stored, k, s | {buf}))))
            for i in s:
                if i != buf:
                    moves.append((levs[k].read, (nxt, i, stored)))
                moves.append((0.0, (nxt, buf, _with(stored, k, s - {i}))))
        for c, s2 in moves:
            d2 = d + c
            if d2 < dist.get(s2, math.inf):
                dist[s2] = d2
                tie += 1
                heapq.heappush(heap, (d2, tie, s2))
    return math.inf


def _with(stored: tuple[frozenset[int], ...], k: int, s: frozenset[int]) -> tuple[frozenset[int], ...]:
    return stored[:k] + (s,) + stored[k + 1:]
