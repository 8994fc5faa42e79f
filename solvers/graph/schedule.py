"""Schedules of Problem 2: a sequence of node computations (node ids of the graph file),
repetitions allowed; JSON ``{"format": "memsched.schedule/1", "problem": "graph", "sequence": [...]}``.
The referee that charges them is `solvers.graph.simulator`."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np

from ..chain.schedule import result_prefix
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

    def indices(self, graph: Graph, path: str | None = None, *, field: str | None = "sequence") -> list[int]:
        """Node indices (0-based, in the file's node order) of the sequence of node ids. An id is a
        string or a number (a numpy one too; not a bool) equal to a node's id, or a string spelling it
        (``"3"`` names the node of id 3); anything else, or an id naming no node, is an `InputError`
        naming `path` and `field` (``sequence``; ``schedule.sequence`` in a ``solve --json`` output)."""
        out = []
        for s, v in enumerate(self.sequence):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (str, Real)):
                raise InputError(f"step {s}: a node id is a string or a number, got {_plain(v)!r}"[:200], path=path,
                                 field=field)
            i = graph.index.get(_plain(v))
            if i is None and isinstance(v, str):
                i = next((graph.index[u] for u in graph.ids if str(u) == v), None)
            if i is None:
                raise InputError(f"step {s}: unknown node {_plain(v)!r}"[:200], path=path, field=field)
            out.append(i)
        return out

    @classmethod
    def from_json(cls, data: Any, *, path: str = "<schedule>") -> GraphSchedule:
        """Parse a schedule object, a bare list of node ids, or a `memsched solve --json` output
        (its ``schedule`` holds either of the first two, as the top level may); an error in the
        schedule such an output holds names ``schedule.FIELD``."""
        return cls._read(data, path)[0]

    @classmethod
    def read(cls, data: Any, graph: Graph, *, path: str = "<schedule>") -> GraphSchedule:
        """`from_json`, every step naming a node of `graph` (`indices`): an unknown id is an `InputError`
        naming `path` and where the ids came from (``sequence``, ``schedule.sequence``, ``schedule``)."""
        schedule, field = cls._read(data, path)
        schedule.indices(graph, path=path, field=field)
        return schedule

    @classmethod
    def _read(cls, data: Any, path: str) -> tuple[GraphSchedule, str]:
        """(the schedule in `data`, the field its ids were read from) for `from_json` and `read`."""
        if isinstance(data, list):
            return cls(list(data)), "sequence"
        if not isinstance(data, dict):
            raise InputError("expected a JSON object", path=path)
        prefix = result_prefix(data, "sequence")
        if prefix:  # the output of `memsched solve --json`
            check_holds_schedule(data, path, "sequence")
            inner = data["schedule"]
            if isinstance(inner, list):
                return cls(list(inner)), "schedule"
            if not isinstance(inner, dict):
                raise InputError(f"expected a schedule object or a list of node ids, got {repr(inner)[:60]}",
                                 path=path, field="schedule")
            data = inner
        fmt = data.get("format", SCHEDULE_FORMAT)
        if fmt != SCHEDULE_FORMAT:
            raise InputError(f"expected {SCHEDULE_FORMAT!r}, got {repr(fmt)[:60]}", path=path, field=prefix + "format")
        if data.get("problem", "graph") != "graph":
            raise InputError(f"expected problem 'graph', got {data.get('problem')!r}", path=path,
                             field=prefix + "problem")
        seq = data.get("sequence")
        if not isinstance(seq, list):
            raise InputError("must be a list of node ids", path=path, field=prefix + "sequence")
        return cls(list(seq)), prefix + "sequence"

    @classmethod
    def load(cls, path: str | Path) -> GraphSchedule:
        """Read a graph schedule JSON file (`InputError` naming the file and field)."""
        return cls.from_json(read_json(path), path=str(path))


def _plain(v: Any) -> Any:
    """A numpy number as the Python number it holds (JSON writes it; a dict of ids finds it); else `v`."""
    return v.item() if isinstance(v, np.generic) else v
