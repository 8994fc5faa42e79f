"""Schedules of Problem 2: a sequence of node computations (node ids of the graph file),
repetitions allowed; JSON ``{"format": "memsched.schedule/1", "problem": "graph", "sequence": [...]}``.
The referee that charges them is `solvers.graph.simulator`."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..jsonio import check_holds_schedule, read_json
from .instance import Graph

SCHEDULE_FORMAT = "memsched.schedule/1"


@dataclass
class GraphSchedule:
    """A sequence of node ids (as in the graph file), repetitions allowed."""

    sequence: list[Hashable]

    def to_json(self) -> dict[str, Any]:
        """The ``memsched.schedule/1`` object (``problem: graph``, ``sequence`` of node ids)."""
        return {"format": SCHEDULE_FORMAT, "problem": "graph", "sequence": [_plain(v) for v in self.sequence]}

    def __len__(self) -> int:
        return len(self.sequence)

    def __str__(self) -> str:
        """The node ids in order, separated by spaces (as the chain and join schedules print)."""
        return " ".join(str(v) for v in self.sequence)

    @classmethod
    def from_indices(cls, graph: Graph, indices: Iterable[int]) -> GraphSchedule:
        """The schedule computing the nodes of `graph` with these 0-based indices, in order."""
        return cls([graph.ids[int(i)] for i in indices])

    def indices(self, graph: Graph, path: str | None = None) -> list[int]:
        """Node indices of the sequence; an unknown id is an `InputError` (naming `path`)."""
        out = []
        for s, v in enumerate(self.sequence):
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise InputError(f"step {s}: a node id is a string or a number, got {v!r}", path=path,
                                 field="sequence")
            i = graph.index.get(v)
            if i is None and isinstance(v, str):
                i = next((graph.index[u] for u in graph.ids if str(u) == v), None)
            if i is None:
                raise InputError(f"step {s}: unknown node {v!r}", path=path, field="sequence")
            out.append(i)
        return out

    @classmethod
    def from_json(cls, data: Any, *, path: str = "<schedule>") -> GraphSchedule:
        """Parse a schedule object, a bare list of node ids, or a `memsched solve --json` output
        (its ``schedule`` holds either of the first two, as the top level may)."""
        if isinstance(data, list):
            return cls(list(data))
        if not isinstance(data, dict):
            raise InputError("expected a JSON object", path=path)
        if "schedule" in data and "sequence" not in data:  # the output of `memsched solve --json`
            check_holds_schedule(data, path, "sequence")
            inner = data["schedule"]
            if isinstance(inner, list):
                return cls(list(inner))
            if not isinstance(inner, dict):
                raise InputError(f"expected a schedule object or a list of node ids, got {repr(inner)[:60]}",
                                 path=path, field="schedule")
            data = inner
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
        """Read a graph schedule JSON file (`InputError` naming the file and field)."""
        return cls.from_json(read_json(path), path=str(path))


def _plain(v: Any) -> Any:
    return int(v) if isinstance(v, np.integer) else v
