"""The referee of Problem 2: replays a sequence of node computations on a `Graph`.

Rules (docs/graph.md). A schedule is a sequence s = 0..N-1 of node computations,
repetitions allowed. Each computation creates a *copy* of the node's output (size M_v =
``cost_ram[v]``).

- When v is computed at step s, every predecessor u of v must have been computed at some step
  before s; v consumes the *latest* copy of u.
- A copy stays resident from its computation until the last step that consumes it; a copy that
  nothing consumes (a sink, or a wasted recomputation) is freed right after its own step.
- Memory at step s = M_v + W_v of the node v being computed (its output and its workspace,
  ``graph.workspace``, alive only during the step) + the sizes of the copies made before s that
  are consumed at s or later. Peak memory = max over steps.
- Makespan = sum of ``cost_cpu`` over the sequence. Every node must appear at least once.

The first violation (a predecessor never computed, memory over the budget) is reported with its
step and node: the one at the earliest step, a missing predecessor before memory over the budget at
the same step (as the chain's referee checks an op's inputs before its memory); a node never
computed is found at the end of the sequence, so it comes last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..units import memory_unit, size_unit_name
from .instance import Graph
from .schedule import GraphSchedule


@dataclass
class GraphSimulation:
    """Replay of a sequence: per-step memory, makespan, peak and the first violation."""

    memory: np.ndarray
    makespan: float
    violation: str | None
    retention_end: list[int]  # per step: last step that consumes the copy made there

    @property
    def valid(self) -> bool:
        """True when the replay met no violation."""
        return self.violation is None

    @property
    def peak_memory(self) -> int:
        """Largest per-step memory (``cost_ram`` units); 0 for an empty sequence."""
        return int(self.memory.max()) if len(self.memory) else 0


def simulate(graph: Graph, sequence: Sequence[int] | GraphSchedule, budget: int | None = None) -> GraphSimulation:
    """Replay `sequence` (node indices, or a `GraphSchedule` of ids) under the rules above."""
    seq = sequence.indices(graph) if isinstance(sequence, GraphSchedule) else [int(v) for v in sequence]
    N = len(seq)
    latest = [-1] * graph.n  # step of the latest copy of each node
    end = list(range(N))  # last consumer of the copy made at each step (itself if none)
    violation: str | None = None
    at = N  # the step of `violation` (N: the end of the sequence)
    for s, v in enumerate(seq):
        if not 0 <= v < graph.n:
            if violation is None:
                violation, at = f"step {s}: node index {v} out of range", s
            continue
        for u in graph.preds[v]:
            c = latest[u]
            if c < 0:
                if violation is None:
                    violation, at = (f"step {s}: node {graph.ids[v]!r} needs predecessor {graph.ids[u]!r}, "
                                     "which has not been computed"), s
                continue
            end[c] = s
        latest[v] = s
    if violation is None:
        missing = [graph.ids[v] for v in range(graph.n) if latest[v] < 0]
        if missing:
            violation = f"node {missing[0]!r} is never computed" + (
                f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
    delta = np.zeros(N + 1, dtype=np.int64)
    cpu = 0.0
    for s, v in enumerate(seq):
        if 0 <= v < graph.n:
            delta[s] += graph.cost_ram[v] + graph.workspace[v]
            delta[s + 1] -= graph.workspace[v]
            delta[end[s] + 1] -= graph.cost_ram[v]
            cpu += float(graph.cost_cpu[v])
    memory = np.cumsum(delta[:N])
    over = _over_budget(graph, seq, memory, budget)
    if over is not None and over[0] < at:  # earlier than the rule broken (or the end): it comes first
        violation = over[1]
    return GraphSimulation(memory, cpu, violation, end)


def _over_budget(graph: Graph, seq: list[int], memory: np.ndarray, budget: int | None) -> tuple[int, str] | None:
    """The first step whose `memory` (``cost_ram`` units) exceeds `budget`, with its violation (which names
    the graph's memory unit after the budget: `units.size_unit_name`, "bytes" without ``meta.units.memory``);
    None without a budget or when every step fits."""
    if budget is None or not len(memory):
        return None
    over = np.nonzero(memory > budget)[0]
    if not len(over):
        return None
    s = int(over[0])
    unit = size_unit_name(memory_unit(graph))
    return s, (f"step {s} (node {graph.ids[seq[s]]!r}): memory {int(memory[s])} exceeds the budget {int(budget)} "
               f"{unit}")


def replay_into(result: Any, graph: Graph, sequence: list[int], budget: int, solver: str) -> GraphSimulation:
    """Replay an exact model's extracted `sequence` under `budget` (bytes) and store it in the
    `SolveResult` `result`: its schedule, objective (makespan) and peak memory. A sequence the
    referee rejects is a bug of the model: RuntimeError naming `solver` and the violation."""
    sim = simulate(graph, sequence, int(budget))
    if not sim.valid:
        raise RuntimeError(f"{solver}: extracted schedule is invalid: {sim.violation}")
    result.schedule = GraphSchedule.from_indices(graph, sequence)
    result.objective = sim.makespan
    result.peak_memory = sim.peak_memory
    return sim


def seed_at_least(result: Any, graph: Graph, seed: Any, budget: int, solver: str) -> bool:
    """When the seed (a fast solver's `SolveResult`) computes every node once within `budget`,
    nothing is faster: store its schedule in `result` (status ``feasible``; the exact layer's
    referee reports it optimal among all schedules), say so in the message and in
    ``details["model_status"]`` ("not built") and return True (the caller builds no model); else
    False."""
    if seed is None or seed.schedule is None or seed.objective is None:
        return False
    if seed.objective > graph.total_cpu() * (1 + 1e-12):
        return False
    try:
        seq = seed.schedule.indices(graph)
    except Exception:  # not a schedule of this graph
        return False
    if not simulate(graph, seq, int(budget)).valid:
        return False
    replay_into(result, graph, seq, budget, solver)
    result.status = "feasible"
    result.lower_bound = graph.total_cpu()
    result.message = f"{seed.solver}'s schedule computes every node once: no model was built"
    result.details["model_status"] = "not built"
    return True


def memory_profile(graph: Graph, schedule: GraphSchedule) -> list[dict[str, Any]]:
    """Per step: the node computed and the memory at that step (``cost_ram`` units)."""
    sim = simulate(graph, schedule)
    return [{"op": str(v), "mem_during": int(m)} for v, m in zip(schedule.sequence, sim.memory)]
