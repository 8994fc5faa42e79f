"""The referee of Problem 2: replays a sequence of node computations on a `Graph`.

Rules (DESIGN.md, Problem 2). A schedule is a sequence s = 0..N-1 of node computations,
repetitions allowed. Each computation creates a *copy* of the node's output (size M_v =
``cost_ram[v]``).

- When v is computed at step s, every predecessor u of v must have been computed at some step
  before s; v consumes the *latest* copy of u.
- A copy stays resident from its computation until the last step that consumes it; a copy that
  nothing consumes (a sink, or a wasted recomputation) is freed right after its own step.
- Memory at step s = M_v of the node being computed + the sizes of the copies made before s
  that are consumed at s or later. Peak memory = max over steps.
- Makespan = sum of ``cost_cpu`` over the sequence. Every node must appear at least once.

The first violation (a predecessor never computed, a node never computed, memory over the
budget) is reported with its step and node.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..jsonio import read_json
from .instance import Graph

SCHEDULE_FORMAT = "memsched.schedule/1"


@dataclass
class GraphSchedule:
    """A sequence of node ids (as in the graph file), repetitions allowed."""

    sequence: list[Hashable]

    def to_json(self) -> dict[str, Any]:
        return {"format": SCHEDULE_FORMAT, "problem": "graph", "sequence": [_plain(v) for v in self.sequence]}

    def __len__(self) -> int:
        return len(self.sequence)

    @classmethod
    def from_indices(cls, graph: Graph, indices: Iterable[int]) -> GraphSchedule:
        return cls([graph.ids[int(i)] for i in indices])

    def indices(self, graph: Graph) -> list[int]:
        """Node indices of the sequence; an unknown id is an `InputError`."""
        out = []
        for s, v in enumerate(self.sequence):
            i = graph.index.get(v)
            if i is None and isinstance(v, str):
                i = next((graph.index[u] for u in graph.ids if str(u) == v), None)
            if i is None:
                raise InputError(f"step {s}: unknown node {v!r}", field="sequence")
            out.append(i)
        return out

    @classmethod
    def from_json(cls, data: Any, *, path: str = "<schedule>") -> GraphSchedule:
        if isinstance(data, list):
            return cls(list(data))
        if not isinstance(data, dict):
            raise InputError("expected a JSON object", path=path)
        if "schedule" in data and "sequence" not in data:  # the output of `memsched solve --json`
            if data["schedule"] is None:
                raise InputError(f"holds no schedule (status {data.get('status')!r})", path=path, field="schedule")
            data = data["schedule"]
        if data.get("format", SCHEDULE_FORMAT) != SCHEDULE_FORMAT:
            raise InputError(f"expected {SCHEDULE_FORMAT!r}", path=path, field="format")
        if data.get("problem", "graph") != "graph":
            raise InputError(f"expected problem 'graph', got {data.get('problem')!r}", path=path, field="problem")
        seq = data.get("sequence")
        if not isinstance(seq, list):
            raise InputError("must be a list of node ids", path=path, field="sequence")
        return cls(list(seq))

    @classmethod
    def load(cls, path: str | Path) -> GraphSchedule:
        return cls.from_json(read_json(path), path=str(path))


@dataclass
class GraphSimulation:
    """Replay of a sequence: per-step memory, makespan, peak and the first violation."""

    memory: np.ndarray
    makespan: float
    violation: str | None
    retention_end: list[int]  # per step: last step that consumes the copy made there

    @property
    def valid(self) -> bool:
        return self.violation is None

    @property
    def peak_memory(self) -> int:
        return int(self.memory.max()) if len(self.memory) else 0


def simulate(graph: Graph, sequence: Sequence[int] | GraphSchedule, budget: int | None = None) -> GraphSimulation:
    """Replay `sequence` (node indices, or a `GraphSchedule` of ids) under the rules above."""
    seq = sequence.indices(graph) if isinstance(sequence, GraphSchedule) else [int(v) for v in sequence]
    N = len(seq)
    latest = [-1] * graph.n  # step of the latest copy of each node
    end = list(range(N))  # last consumer of the copy made at each step (itself if none)
    violation: str | None = None
    for s, v in enumerate(seq):
        if not 0 <= v < graph.n:
            violation = violation or f"step {s}: node index {v} out of range"
            continue
        for u in graph.preds[v]:
            c = latest[u]
            if c < 0:
                if violation is None:
                    violation = (f"step {s}: node {graph.ids[v]!r} needs predecessor {graph.ids[u]!r}, "
                                 "which has not been computed")
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
            delta[s] += graph.cost_ram[v]
            delta[end[s] + 1] -= graph.cost_ram[v]
            cpu += float(graph.cost_cpu[v])
    memory = np.cumsum(delta[:N])
    if violation is None and budget is not None and N:
        over = np.nonzero(memory > budget)[0]
        if len(over):
            s = int(over[0])
            violation = (f"step {s} (node {graph.ids[seq[s]]!r}): memory {int(memory[s])} exceeds the "
                         f"budget {int(budget)}")
    return GraphSimulation(memory, cpu, violation, end)


def _plain(v: Any) -> Any:
    return int(v) if isinstance(v, np.integer) else v
