"""Exhaustive references for tiny graphs (tests): the true optimum over all sequences, and the
optimum over Checkmate's frontier-advancing schedules.
"""

from __future__ import annotations

import itertools
import math

from .instance import Graph
from .simulator import simulate


def brute_force(graph: Graph, budget: int, *, max_len: int | None = None) -> tuple[float, list[int] | None]:
    """Minimum makespan over every valid sequence of length <= `max_len` (default 2n) whose
    peak fits `budget`, by depth-first branch and bound. Costs must be positive. Returns
    (makespan, sequence), (inf, None) when nothing fits. Meant for n <= 6."""
    n = graph.n
    max_len = max_len or 2 * n
    cost, size, work = graph.cost_cpu, graph.cost_ram, graph.workspace
    best: list = [math.inf, None]
    seq: list[int] = []
    latest = [-1] * n
    computed = [0] * n
    ends: list[int] = []

    def peak_ok() -> bool:
        # memory of the prefix with lifetimes up to the last consumer so far: a lower bound on
        # the memory of every extension at these steps
        N = len(seq)
        delta = [0] * (N + 1)
        for s, v in enumerate(seq):
            delta[s] += size[v] + work[v]  # the workspace W_v only during step s
            delta[s + 1] -= work[v]
            delta[ends[s] + 1] -= size[v]
        run = 0
        for s in range(N):
            run += delta[s]
            if run > budget:
                return False
        return True

    def dfs(spent: float) -> None:
        missing = sum(cost[v] for v in range(n) if not computed[v])
        if spent + missing >= best[0] - 1e-12:
            return
        if missing == 0:
            best[0], best[1] = spent, list(seq)
            return
        if len(seq) >= max_len:
            return
        for v in range(n):
            if any(latest[u] < 0 for u in graph.preds[v]):
                continue
            saved = [(u, ends[latest[u]]) for u in graph.preds[v]]
            for u in graph.preds[v]:
                ends[latest[u]] = len(seq)
            seq.append(v)
            ends.append(len(seq) - 1)
            old = latest[v]
            latest[v] = len(seq) - 1
            computed[v] += 1
            if peak_ok():
                dfs(spent + cost[v])
            computed[v] -= 1
            latest[v] = old
            ends.pop()
            seq.pop()
            for u, e in reversed(saved):
                ends[latest[u]] = e

    dfs(0.0)
    return best[0], best[1]


def brute_force_checkmate(graph: Graph, budget: int) -> tuple[float, list[int] | None]:
    """Minimum makespan over Checkmate's schedules: stage t computes a subset of 0..t-1 in index
    order, then t. Enumerates all 2^(n(n-1)/2) choices (n <= 6)."""
    n = graph.n
    best: tuple[float, list[int] | None] = (math.inf, None)
    stage_choices = [list(itertools.product((0, 1), repeat=t)) for t in range(n)]
    for choice in itertools.product(*stage_choices):
        seq = [k for t in range(n) for k in [*(i for i in range(t) if choice[t][i]), t]]
        sim = simulate(graph, seq, budget)
        if sim.valid and sim.makespan < best[0]:
            best = (sim.makespan, seq)
    return best
