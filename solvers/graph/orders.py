"""Memory-aware topological orders and the `dtr-orders` heuristic (docs/graph.md).

On graphs whose file order is not memory-friendly (Moccasin's random layered graphs), the
budget is often met *without any recomputation* by another topological order, and DTR-like
eviction works far better in a good order. This module searches orders for a small peak and
then fills the remaining gap with recomputations:

1. **Orders.** The file's order, `baselines.memory_order`, and `tries` randomised greedy orders
   (among the ready nodes, the one with the smallest net memory change, perturbed by noise);
   the best ones by peak are improved by a local search that moves one node inside its
   precedence window (between its last predecessor and its first successor) while the peak of
   the order does not grow. An order with peak <= B is a schedule with no overhead (optimal: every
   node once).
2. **Recomputation.** Otherwise the DTR-like greedy (`baselines.dtr_sequence`, three eviction
   scores) runs in the `keep` best orders.
3. **Pruning.** Each schedule found is pruned: a recomputation is removed (most expensive first)
   whenever the schedule without it is still valid and fits the budget (consumers then use the
   earlier copy, which lives longer).

The peak of an order ("no recomputation") is the simulator's: at step t, M of the node computed
plus the outputs made before t that are consumed at t or later. Everything is seeded
(`seed`) and deterministic; `time_budget` (s) only cuts the number of tries.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..result import FEASIBLE, INFEASIBLE, SolveResult
from .baselines import Sizes, below_necessary, dtr_sequence, greedy_order, memory_order, net_growth
from .instance import Graph
from .schedule import GraphSchedule
from .simulator import simulate

__all__ = [
    "order_peak",
    "random_memory_order",
    "improve_order",
    "candidate_orders",
    "prune_recomputations",
    "repair_sequence",
    "search_sequences",
    "solve_dtr_orders",
]


def order_peak(graph: Graph, order: Sequence[int], M: Sizes | None = None) -> int:
    """Peak memory of computing each node once in `order` (a topological order), sizes `M`
    (default ``cost_ram`` and the workspaces W_v): the simulator's rule without recomputation."""
    return int(_OrderProfile(graph, M).memory(order).max(initial=0))


class _OrderProfile:
    """Per-step memory of orders of one graph (numpy; edges and sizes prepared once)."""

    def __init__(self, graph: Graph, M: Sizes | None) -> None:
        self.n = graph.n
        self.M = np.asarray(graph.cost_ram if M is None else M, dtype=np.int64)
        # workspaces W_v in the graph's units; with other sizes (slots) the caller's replay checks them
        self.W = graph.workspace if M is None and graph.has_workspace else None
        edges = np.asarray(graph.edges, dtype=np.int64).reshape(-1, 2)
        self.src, self.dst = edges[:, 0], edges[:, 1]

    def memory(self, order: Sequence[int]) -> np.ndarray:
        """Memory at each step of `order`."""
        pos = np.empty(self.n, dtype=np.int64)
        pos[np.asarray(order, dtype=np.int64)] = np.arange(self.n)
        last = pos.copy()
        np.maximum.at(last, self.src, pos[self.dst])
        delta = np.zeros(self.n + 1, dtype=np.int64)
        np.add.at(delta, pos, self.M)
        np.add.at(delta, last + 1, -self.M)
        if self.W is not None:
            np.add.at(delta, pos, self.W)
            np.add.at(delta, pos + 1, -self.W)
        return np.cumsum(delta[: self.n])

    def score(self, order: Sequence[int], cap: float) -> tuple[int, int]:
        """(total excess over `cap` summed over the steps, peak): what the local search lowers."""
        mem = self.memory(order)
        return int(np.maximum(mem - cap, 0).sum()), int(mem.max(initial=0))


def random_memory_order(graph: Graph, M: Sizes | None, rng: random.Random, noise: float) -> list[int]:
    """A topological order built greedily (`greedy_order`): among the ready nodes, the one whose
    computation changes the resident memory least (`net_growth`: its output, unless it is a sink,
    minus the inputs whose last user it is), each key multiplied by (1 + noise * U) plus
    noise * U * mean size (U uniform in [0, 1)); noise 0 is a deterministic greedy."""
    M = graph.cost_ram if M is None else M
    mean = float(sum(int(m) for m in M)) / max(1, graph.n)

    def key(w: int, left: list[int]) -> float:
        return net_growth(graph, M, w, left) * (1 + noise * rng.random()) + noise * rng.random() * mean

    return greedy_order(graph, key)


def improve_order(
    graph: Graph, order: list[int], M: Sizes | None, rng: random.Random, moves: int, cap: float = 0.0
) -> list[int]:
    """Local search on `order`: `moves` times, move a random node to a random place inside its
    precedence window; keep the move when (the memory above `cap` summed over the steps, the
    peak) does not grow (plateaus are crossed). With cap 0 this lowers the total memory then
    the peak; with cap = the budget it looks for an order that fits. The peak never grows."""
    order = list(order)
    n = len(order)
    prof = _OrderProfile(graph, M)
    best = prof.score(order, cap)
    pos = [0] * graph.n
    for t, v in enumerate(order):
        pos[v] = t
    for _ in range(moves):
        if best[0] == 0 and cap > 0:
            break
        v = order[rng.randrange(n)]
        lo = max((pos[u] for u in graph.preds[v]), default=-1) + 1
        hi = min((pos[w] for w in graph.succs[v]), default=n) - 1
        if hi <= lo:
            continue
        new = rng.randint(lo, hi)
        old = pos[v]
        if new == old:
            continue
        trial = order[:old] + order[old + 1 :]
        trial.insert(new, v)
        score = prof.score(trial, cap)
        if score[0] <= best[0] and score[1] <= best[1]:
            best, order = score, trial
            a, b = min(old, new), max(old, new)
            for t in range(a, b + 1):
                pos[order[t]] = t
    return order


def candidate_orders(
    graph: Graph,
    M: Sizes | None = None,
    *,
    tries: int = 24,
    keep: int = 4,
    moves: int = 0,
    cap: float = 0.0,
    seed: int = 0,
    deadline: float | None = None,
) -> list[tuple[int, list[int]]]:
    """Up to `keep` distinct (peak, order) pairs, smallest peak first: the file's order,
    `memory_order` and `tries` randomised greedy orders (stopping early at the wall-clock
    `deadline`, a `time.perf_counter()` value), the best improved by `moves` local-search moves."""
    rng = random.Random(seed)
    orders = [list(range(graph.n)), memory_order(graph, M)]
    for i in range(tries):
        if deadline is not None and time.perf_counter() > deadline:
            break
        orders.append(random_memory_order(graph, M, rng, 0.3 if i % 2 else 1.0))
    scored: dict[tuple[int, ...], int] = {}
    for o in orders:
        scored.setdefault(tuple(o), order_peak(graph, o, M))
    ranked = sorted(((p, list(o)) for o, p in scored.items()), key=lambda po: po[0])[:keep]
    if moves > 0 and ranked:
        improved = improve_order(graph, ranked[0][1], M, rng, moves, cap)
        ranked.insert(0, (order_peak(graph, improved, M), improved))
        ranked.sort(key=lambda po: po[0])
    return ranked[:keep]


def prune_recomputations(graph: Graph, seq: list[int], budget: int) -> list[int]:
    """Remove recomputations (most expensive first, each tried once) while the schedule stays
    valid and within `budget` (``cost_ram`` units); the result is never slower."""
    seq = list(seq)
    seen: set[int] = set()
    repeats = []
    for step, v in enumerate(seq):
        if v in seen:
            repeats.append((float(graph.cost_cpu[v]), step))
        seen.add(v)
    removed: set[int] = set()
    for _, step in sorted(repeats, key=lambda cs: (-cs[0], cs[1])):
        trial = [v for s, v in enumerate(seq) if s != step and s not in removed]
        if simulate(graph, trial, budget).valid:
            removed.add(step)
    return [v for s, v in enumerate(seq) if s not in removed]


def repair_sequence(
    graph: Graph, seq: Sequence[int], budget: int, rng: random.Random, *, moves: int, deadline: float | None = None
) -> list[int] | None:
    """Local search that inserts recomputations into `seq` (a valid schedule, e.g. an order over
    the budget) until its peak fits `budget` (``cost_ram`` units, workspaces charged); None when
    `moves` trials (or the wall-clock `deadline`) end first.

    Score: $E = \\sum_t \\max(0, \\mathrm{mem}(t) - B)$, then the makespan. A move picks a step t
    over B (at random, or the peak), a copy of some u made before t whose retention spans t and
    that step t does not read (weighted by $M_u / (C_u + 1)$), and inserts a recomputation of u
    at a random place after t up to its next consumer: the old copy then ends at its last use
    before t. With probability 1/2 the inputs of u whose copies are already dead there are
    recomputed just before it too (when their own inputs exist). The move is kept when the score
    drops. Every candidate is replayed by the simulator, so the result is valid."""
    seq = list(seq)
    sim = simulate(graph, seq)
    if not sim.valid:
        return None
    best = (int(np.maximum(sim.memory - budget, 0).sum()), sim.makespan)
    for _ in range(moves):
        if best[0] == 0 or (deadline is not None and time.perf_counter() > deadline):
            break
        over = np.nonzero(sim.memory > budget)[0]
        t = int(over[rng.randrange(len(over))]) if rng.random() < 0.5 else int(np.argmax(sim.memory))
        end = sim.retention_end
        read = set(graph.preds[seq[t]])
        # a copy of zero bytes frees nothing (and would make every weight 0)
        cands = [s for s in range(t) if end[s] > t and seq[s] not in read and graph.cost_ram[seq[s]] > 0]
        if not cands:
            continue
        s = rng.choices(cands, [graph.cost_ram[seq[c]] / (graph.cost_cpu[seq[c]] + 1.0) for c in cands])[0]
        u = seq[s]
        # the copy's next consumer after t (no other copy of u lies between s and end[s])
        nxt = next(q for q in range(t + 1, end[s] + 1) if u in graph.preds[seq[q]])
        pos = rng.randint(t + 1, nxt)
        insert = [u]
        if rng.random() < 0.5:
            latest: dict[int, int] = {}
            for i in range(pos):
                latest[seq[i]] = i
            dead = [x for x in graph.preds[u] if end[latest[x]] < pos]
            if dead and all(p in latest for x in dead for p in graph.preds[x]):
                insert = dead + [u]
        trial = seq[:pos] + insert + seq[pos:]
        tsim = simulate(graph, trial)
        score = (int(np.maximum(tsim.memory - budget, 0).sum()), tsim.makespan)
        if tsim.valid and (score[0] < best[0] or (score[0] == best[0] and score[1] < best[1])):
            best, seq, sim = score, trial, tsim
    return seq if best[0] == 0 else None


def search_sequences(
    graph: Graph,
    budget: int,
    M: Sizes | None = None,
    B: float | None = None,
    *,
    tries: int | None = None,
    keep: int = 4,
    moves: int | None = None,
    seed: int = 0,
    time_budget: float | None = None,
    repairs: int = 2,
    repair_moves: int | None = None,
) -> list[tuple[float, list[int]]]:
    """Schedules that fit `budget` (``cost_ram`` units; the greedy runs with sizes `M` and
    budget `B` when given, e.g. slots), fastest first, as (makespan, sequence): every node once in
    one of the candidate orders when its peak fits, else the DTR-like greedy in the `keep` best
    orders and `repair_sequence` from the `repairs` best orders (`repair_moves` trials each,
    default 4 n, at most 4000), each pruned. Defaults: `tries` = 24 random orders (fewer above
    1000 nodes: 24000 / n, at least 4), `moves` = 20 n local-search moves, at most 10 000 (they
    stop once an order fits)."""
    start = time.perf_counter()
    deadline = None if time_budget is None else start + time_budget
    cap = B if B is not None else budget
    moves = min(20 * graph.n, 10_000) if moves is None else moves
    tries = max(4, min(24, 24_000 // max(1, graph.n))) if tries is None else tries
    ranked = candidate_orders(graph, M, tries=tries, keep=keep, moves=moves, cap=cap, seed=seed, deadline=deadline)
    found: dict[tuple[int, ...], float] = {}
    for peak, order in ranked:
        if peak <= cap and simulate(graph, order, budget).valid:
            found[tuple(order)] = graph.total_cpu()
    if not found:
        for _, order in ranked:
            for score in ("dtr", "size", "lru"):
                s = dtr_sequence(graph, cap, M, score=score, order=order)
                if s is None or not simulate(graph, s, budget).valid:
                    continue
                s = prune_recomputations(graph, s, budget)
                found.setdefault(tuple(s), simulate(graph, s).makespan)
            if deadline is not None and time.perf_counter() > deadline and found:
                break
        rng = random.Random(seed)
        trials = min(4 * graph.n, 4000) if repair_moves is None else repair_moves
        for _, order in ranked[:repairs]:
            s = repair_sequence(graph, order, budget, rng, moves=trials, deadline=deadline)
            if s is not None:
                s = prune_recomputations(graph, s, budget)
                found.setdefault(tuple(s), simulate(graph, s).makespan)
    return sorted(((c, list(s)) for s, c in found.items()), key=lambda cs: cs[0])


def solve_dtr_orders(graph: Graph, budget: int, *, seed: int = 0, **_: Any) -> SolveResult:
    """The `dtr-orders` heuristic (module docstring): the fastest schedule of `search_sequences`
    at exact sizes; ``infeasible`` (for this heuristic) when none fits; below `Graph.necessary_budget`
    none is searched: no schedule fits (`baselines.below_necessary`, a proof)."""
    start = time.perf_counter()
    scope = "no claim (memory-aware orders, DTR-like recomputation, pruned)"
    proven = below_necessary(graph, "dtr-orders", int(budget), scope, start)
    if proven is not None:
        return proven
    res = SolveResult(problem="graph", solver="dtr-orders", status=INFEASIBLE, scope=scope)
    found = search_sequences(graph, int(budget), seed=int(seed))
    if found:
        seq = found[0][1]
        sim = simulate(graph, seq, int(budget))
        res.status, res.schedule = FEASIBLE, GraphSchedule.from_indices(graph, seq)
        res.objective, res.peak_memory = sim.makespan, sim.peak_memory
    else:
        res.message = "no order or recomputing greedy fits this budget"
    res.solve_time_s = time.perf_counter() - start
    return res
