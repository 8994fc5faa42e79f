"""The ways a profiler times the network (torch-free: `memsched.run` and the commands check a timing before torch is
imported or anything is built).

- ``isolated``: each block (a graph's op) timed alone;
- ``in_step``: each timed inside store-all training steps (needs store-all's memory).

`models.chain.profiler` and `models.graph.export` take these; which one is the default differs per profiler and
device (docs/cli.md, `memsched profile` and `export-graph`).
"""
from __future__ import annotations

__all__ = ["TIMINGS"]

#: The ``timing`` values every profiler takes.
TIMINGS: tuple[str, ...] = ("isolated", "in_step")
