"""Baseline schedules on graphs: checkpoint-all, a DTR-like greedy, Chen's sqrt and greedy,
Griewank's binomial checkpointing on chains.

Each ``solve_*`` is a registered solver: it replays its schedule and answers ``feasible`` when
it fits the budget, ``infeasible`` (for this baseline) otherwise, with the peak it needs in
``min_budget``. None claims optimality. Under the simulator's rules a copy is freed after its
last consumer, so a baseline only decides *which computations* happen in which order;
"dropping" an activation means recomputing it before its next use.

Chen et al.'s baselines (sqrt, greedy) and Griewank's need a training graph: nodes flagged
``backward`` (the loss included) and forward nodes. Segment boundaries are the forward
*articulation points*: forward nodes that no forward edge jumps over in the given order.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from typing import Any, TypeAlias

import numpy as np

from ..result import FEASIBLE, INFEASIBLE, SolveResult
from .instance import Graph
from .schedule import GraphSchedule
from .simulator import simulate

#: node sizes (``cost_ram``, or slots): an array or a list
Sizes: TypeAlias = Sequence[float] | np.ndarray


# --------------------------------------------------------------------------- helpers
#: the ``scope`` of each baseline's answer, in the words of the other problems' baselines: what it is,
#: that it claims no optimum, and its sizes (the graph's own: the baselines ignore slots)
SCOPES: dict[str, str] = {
    "checkpoint-all": "checkpoint-all baseline: each node once, in the file's order (no optimality claim), exact sizes",
    "dtr": "dtr heuristic: greedy evict-and-recompute (no optimality claim), exact sizes",
    "sqrt": "sqrt baseline: ~sqrt(n) segments at forward articulation points (no optimality claim), exact sizes",
    "greedy": "greedy baseline: segments grown to a threshold (no optimality claim), exact sizes",
    "griewank": "griewank baseline: homogeneous binomial splits (no optimality claim), exact sizes",
}


def necessary_text(need: int) -> str:
    """Why no schedule fits a budget below `need` = `Graph.necessary_budget` (the graph's memory unit):
    the words of the exact solvers (`milp.exact_size_retry`), a proof for every solver."""
    return f"some node and its inputs do not fit the budget together (they need {need} at exact sizes)"


def below_necessary(graph: Graph, solver: str, budget: int, scope: str, start: float) -> SolveResult | None:
    """The proven ``infeasible`` answer of `solver` (`scope` its scope) when `budget` is below
    `Graph.necessary_budget` (every schedule holds some node, its workspace and all its inputs at once:
    docs/graph.md, "Budget semantics"), with ``details["necessary_budget"]``; None when it is not below."""
    need = graph.necessary_budget()
    if int(budget) >= need:
        return None
    return SolveResult(problem="graph", solver=solver, status=INFEASIBLE, scope=scope, message=necessary_text(need),
                       details={"necessary_budget": need}, solve_time_s=time.perf_counter() - start)


def _result(graph: Graph, name: str, seq: list[int] | None, budget: int, start: float,
            message: str = "", *, proof: bool = True, **details: Any) -> SolveResult:
    """Baseline `name`'s answer for the evaluation sequence `seq` (None: none found), replayed by the
    simulator: ``feasible`` when its peak fits `budget` (the graph's memory unit), else ``infeasible``
    with that peak as ``min_budget``; the scope is ``SCOPES[name]``. Below `Graph.necessary_budget`
    (with `proof`: not a refusal of the graph's structure) the message is the proof that no solver
    fits (`necessary_text`, then what this baseline needs) and ``details["necessary_budget"]`` is set."""
    res = SolveResult(problem="graph", solver=name, status=INFEASIBLE, scope=SCOPES[name], message=message,
                      details=dict(details))
    need = graph.necessary_budget() if proof else 0
    if budget < need:
        res.details["necessary_budget"] = need
        res.message = necessary_text(need)
    if seq is not None:
        sim = simulate(graph, seq)
        if sim.violation is not None:
            raise RuntimeError(f"{name}: invalid schedule: {sim.violation}")
        if sim.peak_memory <= budget:
            res.status = FEASIBLE
            res.schedule = GraphSchedule.from_indices(graph, seq)
            res.objective = sim.makespan
            res.peak_memory = sim.peak_memory
        else:
            res.min_budget = sim.peak_memory
            res.message = (f"{necessary_text(need)}; this baseline needs {sim.peak_memory}" if budget < need
                           else message or f"this baseline needs {sim.peak_memory}")
    res.solve_time_s = time.perf_counter() - start
    return res


def checkpoint_all_sequence(graph: Graph) -> list[int]:
    """Each node once, in the given (topological) order."""
    return list(range(graph.n))


def solve_checkpoint_all(graph: Graph, budget: int, **_: Any) -> SolveResult:
    """Compute every node once and keep each output until its last use (the reference peak)."""
    start = time.perf_counter()
    return _result(graph, "checkpoint-all", checkpoint_all_sequence(graph), int(budget), start)


# --------------------------------------------------------------------------- DTR-like greedy
def dtr_sequence(graph: Graph, budget: float, M: Sizes | None = None, *, score: str = "dtr",
                 max_steps: int | None = None, order: list[int] | None = None) -> list[int] | None:
    """Greedy evict-and-recompute in the given order (in the spirit of Dynamic Tensor
    Rematerialization, Kirisame et al. 2021).

    Nodes are computed in `order` (default: index order); before computing v its missing inputs are recomputed
    recursively; when v does not fit, the resident copy with the smallest score among those v
    does not need is evicted (it will be recomputed if needed again). Scores: "dtr"
    C_u / (M_u * staleness), "size" C_u / M_u, "lru" 1 / staleness. A copy is dropped as soon as
    every user of the node has been computed once. The tracked memory bounds the simulator's
    (a copy's real lifetime ends at its last consumer), so the result fits `budget` whenever it
    is returned; None when the greedy gets stuck. With the graph's own sizes (`M` None) a node's
    workspace W_v is charged while it computes; with other sizes (slots) the caller's replay checks it.
    """
    n = graph.n
    W = graph.workspace if M is None else np.zeros(n, dtype=np.int64)
    M = graph.cost_ram if M is None else M
    C = graph.cost_cpu
    max_steps = max_steps or 30 * n + 100
    resident: dict[int, int] = {}  # node -> last access clock
    done = [False] * n
    pending = [len(graph.succs[v]) for v in range(n)]  # users not yet computed once
    mem = 0.0
    seq: list[int] = []

    def value(u: int, clock: int) -> float:
        stale = clock - resident[u] + 1
        if score == "size":
            return (C[u] + 1e-9) / max(M[u], 1)
        if score == "lru":
            return 1.0 / stale
        return (C[u] + 1e-9) / (max(M[u], 1) * stale)

    def compute(v: int, pinned: set[int], needed: bool) -> bool:
        nonlocal mem
        if len(seq) >= max_steps:
            return False
        pins = set(pinned) | {v} | {u for u in graph.preds[v] if u in resident}
        for u in graph.preds[v]:
            if u not in resident:
                if not compute(u, pins, True):
                    return False
                pins.add(u)
        clock = len(seq)
        while mem + M[v] + W[v] > budget:
            cands = [u for u in resident if u not in pins]
            if not cands:
                return False
            u = min(cands, key=lambda w: value(w, clock))
            mem -= M[u]
            del resident[u]
        seq.append(v)
        if not done[v]:
            done[v] = True
            for u in graph.preds[v]:
                pending[u] -= 1
        for u in graph.preds[v]:
            resident[u] = clock
        resident[v] = clock
        mem += M[v]
        for u in graph.preds[v]:
            if pending[u] == 0 and u not in pinned and u in resident:
                mem -= M[u]
                del resident[u]
        if pending[v] == 0 and not needed:
            mem -= M[v]
            del resident[v]
        return True

    for v in order if order is not None else range(n):
        if not done[v] and not compute(v, set(), False):
            return None
    return seq


def greedy_order(graph: Graph, key: Callable[[int, list[int]], Any]) -> list[int]:
    """A topological order built greedily: repeatedly the ready node v with the smallest
    ``key(v, users_left)`` (the first such in the ready list), where ``users_left[u]`` counts the
    successors of u not ordered yet (u's output is released by the ready node that is its last
    user when ``users_left[u] == 1``). `key` is called once per ready node and round, in the ready
    list's order (a randomised key draws its numbers in a fixed order)."""
    n = graph.n
    indeg = [len(graph.preds[v]) for v in range(n)]
    users_left = [len(graph.succs[v]) for v in range(n)]
    ready = [v for v in range(n) if indeg[v] == 0]
    order: list[int] = []
    while ready:
        keys = [key(w, users_left) for w in ready]
        v = ready.pop(min(range(len(ready)), key=keys.__getitem__))
        order.append(v)
        for u in graph.preds[v]:
            users_left[u] -= 1
        for w in graph.succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return order


def net_growth(graph: Graph, M: Sizes, v: int, users_left: list[int]) -> int:
    """How much computing v changes the resident memory: its output (unless v is a sink) minus
    the inputs whose last user it is."""
    freed = sum(int(M[u]) for u in graph.preds[v] if users_left[u] == 1)
    return (int(M[v]) if graph.succs[v] else 0) - freed


def memory_order(graph: Graph, M: Sizes | None = None) -> list[int]:
    """A topological order chosen greedily for a small peak without recomputation: among the
    ready nodes, compute the one that grows the resident memory least (`net_growth`: most
    released first), ties broken by the smallest output, then the smallest index."""
    M = graph.cost_ram if M is None else M
    return greedy_order(graph, lambda v, left: (net_growth(graph, M, v, left), int(M[v]), v))


def heuristic_sequences(graph: Graph, budget: int, M: Sizes | None = None, B: float | None = None, *,
                        given_order_only: bool = False) -> Iterator[list[int]]:
    """Heuristic schedules that fit, cheapest first: each node once in the given order or in
    `memory_order`, then DTR-like variants in both orders. `M`, `B` (slots) are used for the
    greedy when given; the real budget checks the result. With `given_order_only`, only
    schedules whose first computations follow the given order (what Checkmate can express)."""
    found = []
    orders = [list(range(graph.n))]
    if not given_order_only:
        mo = memory_order(graph, M)
        if mo != orders[0]:
            orders.append(mo)
    for order in orders:
        sim = simulate(graph, order, budget)
        if sim.valid:
            found.append((sim.makespan, order))
    if not found:
        for order in orders:
            for score in ("dtr", "size", "lru"):
                s = dtr_sequence(graph, B if B is not None else budget, M, score=score, order=order)
                if s is not None:
                    sim = simulate(graph, s, budget)
                    if sim.valid:
                        found.append((sim.makespan, s))
    found.sort(key=lambda p: p[0])
    for _, s in found:
        yield s


def solve_dtr(graph: Graph, budget: int, **_: Any) -> SolveResult:
    """The best of the DTR-like greedy variants, in the given order and in `memory_order`; below
    `Graph.necessary_budget` none is tried: no schedule fits (`below_necessary`, a proof)."""
    start = time.perf_counter()
    proven = below_necessary(graph, "dtr", int(budget), SCOPES["dtr"], start)
    if proven is not None:
        return proven
    best = None
    for order in (list(range(graph.n)), memory_order(graph)):
        for score in ("dtr", "size", "lru"):
            s = dtr_sequence(graph, int(budget), score=score, order=order)
            if s is None:
                continue
            sim = simulate(graph, s, int(budget))
            if sim.valid and (best is None or sim.makespan < best[0]):
                best = (sim.makespan, s)
    if best is None:
        return _result(graph, "dtr", None, int(budget), start,
                       message="DTR's greedy eviction found no schedule in this budget (a heuristic's failure, "
                               "not a proof: an exact solver such as checkmate or cpsat may find one)")
    return _result(graph, "dtr", best[1], int(budget), start)


# --------------------------------------------------------------------------- training-graph structure
def forward_nodes(graph: Graph) -> list[int]:
    """Indices of the nodes not marked ``backward``, in file order."""
    return [v for v in range(graph.n) if not graph.backward[v]]


def articulation_points(graph: Graph) -> list[int]:
    """Forward nodes that no forward edge jumps over (in the given order), the last excluded."""
    fwd = forward_nodes(graph)
    pos = {v: p for p, v in enumerate(fwd)}
    cover = np.zeros(len(fwd) + 1, dtype=int)
    for u, w in graph.edges:
        if u in pos and w in pos and pos[w] > pos[u] + 1:
            cover[pos[u] + 1] += 1
            cover[pos[w]] -= 1
    jumped = np.cumsum(cover)[: len(fwd)]
    return [v for p, v in enumerate(fwd[:-1]) if jumped[p] == 0]


def segment_sequence(graph: Graph, checkpoints: set[int]) -> list[int]:
    """Chen et al.'s schedule: the forward pass once, then the backward nodes in the given order;
    before a backward node uses a forward node that is not a checkpoint, that node's segment
    (the forward nodes after the previous checkpoint up to the next one) is recomputed. The
    last segment is kept from the forward pass."""
    fwd = forward_nodes(graph)
    seg: dict[int, int] = {}
    segs: list[list[int]] = [[]]
    cur = 0
    for v in fwd:
        if v in checkpoints:
            seg[v] = -1
            cur += 1
            segs.append([])
        else:
            seg[v] = cur
            segs[cur].append(v)
    last = cur
    seq = list(fwd)
    live = {last}
    for b in range(graph.n):
        if not graph.backward[b]:
            continue
        for f in sorted(u for u in graph.preds[b] if not graph.backward[u]):
            j = seg[f]
            if j >= 0 and j not in live:
                seq.extend(segs[j])
                live.add(j)
        seq.append(b)
    return seq


#: ``SolveResult.details`` key set (True) when a baseline refuses the graph's structure (not a training
#: graph, forward nodes not a chain): no budget would give a schedule, so nothing searches for one
#: (`memsched solve`'s smallest-budget search), and the message says why
NOT_APPLICABLE = "not_applicable"


def _refused(graph: Graph, name: str, budget: int, start: float, why: str) -> SolveResult:
    """The answer of baseline `name` that refuses `graph`'s structure: no schedule, `why` as the
    message and ``details[NOT_APPLICABLE]`` set (whatever the budget, it would find none)."""
    res = _result(graph, name, None, budget, start, message=why, proof=False)
    res.details[NOT_APPLICABLE] = True
    return res


def _training_or_none(graph: Graph) -> str | None:
    """Why the segment baselines cannot run on `graph` (None when they can): they run the forward
    nodes first, so a training graph needs both kinds and no forward node fed by a backward one."""
    if not any(graph.backward) or all(graph.backward):
        return "needs a training graph (nodes flagged 'backward' and forward nodes)"
    for v in forward_nodes(graph):
        fed = [u for u in graph.preds[v] if graph.backward[u]]
        if fed:
            return (f"needs a training graph: forward node {graph.names[v]!r} has the backward node "
                    f"{graph.names[fed[0]]!r} among its inputs")
    return None


def sqrt_checkpoints(graph: Graph, k: int | None = None) -> set[int]:
    """About sqrt(#forward) evenly spaced articulation points (or `k` of them)."""
    cands = articulation_points(graph)
    fwd = forward_nodes(graph)
    if not cands:
        return set()
    k = k or max(1, round(math.sqrt(len(fwd))))
    pos = {v: p for p, v in enumerate(fwd)}
    chosen = set()
    for j in range(1, k + 1):
        target = j * len(fwd) / (k + 1)
        chosen.add(min(cands, key=lambda v: abs(pos[v] - target)))
    return chosen


def solve_sqrt(graph: Graph, budget: int, **_: Any) -> SolveResult:
    """Chen et al. (2016): ~sqrt(n) segments cut at forward articulation points."""
    start = time.perf_counter()
    why = _training_or_none(graph)
    if why:
        return _refused(graph, "sqrt", int(budget), start, why)
    return _result(graph, "sqrt", segment_sequence(graph, sqrt_checkpoints(graph)), int(budget), start)


def greedy_checkpoints(graph: Graph, b: float) -> set[int]:
    """Chen et al.'s greedy: walk the forward nodes, accumulating sizes; when the running sum
    since the last checkpoint exceeds `b`, make the next articulation point a checkpoint."""
    cands = set(articulation_points(graph))
    chosen, acc = set(), 0.0
    for v in forward_nodes(graph):
        acc += float(graph.cost_ram[v])
        if v in cands and acc > b:
            chosen.add(v)
            acc = 0.0
    return chosen


def greedy_thresholds(total: float, count: int = 40) -> list[float]:
    """The thresholds b (bytes) `solve_greedy` tries: `count` geometrically spaced values from
    ``total / 200`` to `total`, the summed size of the forward nodes (bytes, >= 0). When `total` is 0
    (every forward output is empty) every threshold gives the same checkpoints (none), so the
    single threshold 0 is tried."""
    if total <= 0:
        return [0.0]
    return [float(b) for b in np.geomspace(max(total / 200, 1e-9), total, count)]


def _fastest_fitting(graph: Graph, budget: int, sequences: Iterable[list[int] | None]) -> list[int] | None:
    """Of the candidate evaluation sequences (None: the candidate does not apply), the one with the
    smallest simulated makespan whose peak memory fits `budget` (bytes); when none fits, the one of
    smallest peak (the caller reports it infeasible); None when there is no candidate. Ties keep
    the first."""
    best: tuple[float, list[int]] | None = None  # (makespan, sequence) of the fastest that fits
    best_any: tuple[int, list[int]] | None = None  # (peak, sequence) of the smallest peak
    for seq in sequences:
        if seq is None:
            continue
        sim = simulate(graph, seq)
        if sim.peak_memory <= budget and (best is None or sim.makespan < best[0]):
            best = (sim.makespan, seq)
        if best_any is None or sim.peak_memory < best_any[0]:
            best_any = (sim.peak_memory, seq)
    chosen = best or best_any
    return None if chosen is None else chosen[1]


def solve_greedy(graph: Graph, budget: int, **_: Any) -> SolveResult:
    """Chen et al.'s greedy with its threshold b searched on a grid (the fastest schedule that
    fits; the smallest peak otherwise)."""
    start = time.perf_counter()
    why = _training_or_none(graph)
    if why:
        return _refused(graph, "greedy", int(budget), start, why)
    total = float(sum(graph.cost_ram[v] for v in forward_nodes(graph)))
    chosen = _fastest_fitting(graph, budget, (segment_sequence(graph, greedy_checkpoints(graph, b))
                                              for b in greedy_thresholds(total)))
    return _result(graph, "greedy", chosen, int(budget), start,
                   message="" if chosen else "no threshold gave a schedule")


# --------------------------------------------------------------------------- Griewank (chains)
def _chain_structure(graph: Graph) -> tuple[list[int], list[list[int]]] | None:
    """Forward path f_0..f_{L-1} and, per position a, the backward nodes run after f_a's
    recomputation (given order): those whose latest forward input is f_a, unless a backward input
    runs at a lower position (then they run there, after it); None unless the forward nodes form a path."""
    fwd = forward_nodes(graph)
    pos = {v: p for p, v in enumerate(fwd)}
    for p, v in enumerate(fwd):
        fp = [u for u in graph.preds[v] if u in pos]
        if (p == 0 and fp) or (p > 0 and fp != [fwd[p - 1]]):
            return None
    # The groups run from the last position down, so a backward node joins the group of its
    # latest forward input unless one of its backward inputs runs in a lower one (then that one).
    groups: list[list[int]] = [[] for _ in fwd]
    group: dict[int, int] = {}
    for b in range(graph.n):  # the given order is topological
        if graph.backward[b]:
            fp = [pos[u] for u in graph.preds[b] if u in pos]
            group[b] = min([max(fp) if fp else 0] + [group[u] for u in graph.preds[b] if u in group])
            groups[group[b]].append(b)
    return fwd, groups


@cache
def _binomial(length: int, s: int) -> tuple[float, int]:
    """(forward advances, first split) to reverse `length` unit steps with `s` checkpoints, the
    start state counted (Griewank & Walther's Revolve, Algorithm 799): t(l, s) = min over the
    split 1 <= m < l of m + t(l - m, s - 1) + t(m, s), t(1, s) = 0, t(l > 1, 0) = infinite; in
    closed form t(l, s) = r l - beta(s + 1, r - 1) with beta(s, r) = C(s + r, s) and r the least
    integer with l <= beta(s, r) (`revolve_advances`). The first sweep's l - 1 advances are
    counted: with s >= l - 1 checkpoints t = l - 1, each node computed once."""
    if length <= 1:
        return 0.0, 0
    if s <= 0:
        return math.inf, 0
    best = (math.inf, 1)
    for m in range(1, length):
        c = m + _binomial(length - m, s - 1)[0] + _binomial(m, s)[0]
        if c < best[0]:
            best = (c, m)
    return best


def revolve_advances(length: int, s: int) -> float:
    """Revolve's least number of forward advances t(l, s) to reverse `length` >= 1 unit steps with
    `s` checkpoints (the start state counted), in closed form (module `_binomial`); infinite
    when ``s < 1`` and ``length > 1``."""
    if length <= 1:
        return 0.0
    if s < 1:
        return math.inf
    r = 0
    while math.comb(s + r, s) < length:
        r += 1
    return float(r * length - math.comb(s + 1 + r - 1, s + 1))


def griewank_forward_count(length: int, snapshots: int, reuse: bool = True) -> float:
    """How many forward nodes `griewank_sequence` computes on a forward path of `length` >= 1 nodes
    with `snapshots` checkpoints: Revolve's advances t(l, s) plus one computation per backward
    step, which with `reuse` only the last node needs (every other node's backward reuses the
    output its advance left resident): ``length`` (no recomputation) when ``snapshots >= length - 1``.
    Without `reuse`, t(l, s) + l (Revolve's own count: each step recomputed before its backward).
    Infinite when no split applies."""
    return _binomial(length, snapshots)[0] + (1 if reuse else length)


def griewank_sequence(graph: Graph, snapshots: int, reuse: bool = True) -> list[int] | None:
    """Binomial checkpointing (Griewank & Walther's Revolve, homogeneous splits) on the forward
    path f_0..f_{L-1} of a chain-like training graph, with `snapshots` checkpoints counting the
    network input (as Revolve counts the start state). Reversing f_a..f_b from the resident
    input of f_a: advance f_a..f_{m-1} (m the split of `_binomial`), reverse f_m..f_b from
    f_{m-1}'s output with one checkpoint less, then f_a..f_{m-1}. The last step of a range is
    computed and its backward group run; with `reuse`, a step whose output is still resident
    (the checkpoint f_{m-1} the right part just started from) is not computed again, so that
    with ``snapshots >= L - 1`` each node is computed once; without it, each step is recomputed
    before its backward, as in Revolve (that frees the checkpoint sooner: a smaller peak on some
    graphs). The sequence computes `griewank_forward_count` forward nodes."""
    st = _chain_structure(graph)
    if st is None:
        return None
    fwd, groups = st
    seq: list[int] = []

    def rev(a: int, b: int, s: int, resident: bool) -> None:
        """Reverse f_a..f_b (the input of f_a resident; f_b's output too when `resident`)."""
        if a == b:
            if not resident:
                seq.append(fwd[a])
            seq.extend(groups[a])
            return
        m = a + _binomial(b - a + 1, s)[1]
        seq.extend(fwd[a:m])
        rev(m, b, s - 1, resident)
        rev(a, m - 1, s, reuse)

    if _binomial(len(fwd), snapshots)[0] == math.inf:
        return None
    rev(0, len(fwd) - 1, snapshots, False)
    return seq


def solve_griewank(graph: Graph, budget: int, **_: Any) -> SolveResult:
    """Revolve-like binomial checkpointing for graphs whose forward part is a chain: of every
    snapshot count, with and without reusing resident outputs (`griewank_sequence`), the fastest
    schedule that fits (the smallest peak otherwise; ties keep the reusing one)."""
    start = time.perf_counter()
    why = _training_or_none(graph)
    if why or _chain_structure(graph) is None:
        return _refused(graph, "griewank", int(budget), start,
                        why or "needs a training graph whose forward nodes form a chain")
    L = len(forward_nodes(graph))
    counts = range(1, min(L, 64) + 1)
    chosen = _fastest_fitting(graph, budget, (griewank_sequence(graph, s, reuse) for reuse in (True, False)
                                              for s in counts))
    if chosen is None:
        return _result(graph, "griewank", None, int(budget), start, message="no binomial split applies")
    return _result(graph, "griewank", chosen, int(budget), start)
