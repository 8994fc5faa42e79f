"""Recognise which problem an instance file states, and load it.

- JSON with ``"format": "memsched.chain/1"``: a chain (Problem 1).
- JSON with ``"format": "memsched.join/1"``: a join network of chains.
- JSON with ``"nodes"`` and ``"links"`` (networkx node-link, as Checkmate and Moccasin export):
  a general graph (Problem 2).
- a PipeDream profile ``graph.txt`` (lines ``nodeN -- desc -- forward_compute_time=...``):
  a layer chain for pipelining (Problem 4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import registry
from .errors import InputError
from .jsonio import read_json, read_text


def detect_problem(path: str | Path) -> str:
    """The problem name of the file at `path` (InputError if it is none of ours)."""
    path = Path(path)
    if str(path) != "-" and path.is_dir():
        raise InputError("is a directory, expected an instance file", path=str(path))
    head = read_text(path)[:4096].lstrip()  # a pipe is read once: read_json sees the same text
    if head.startswith("{"):
        return detect_json(read_json(path), str(path))
    if head.startswith("node") or " -- " in head:
        return "pipeline"
    raise InputError("not a chain, join, graph (node-link JSON) or PipeDream graph.txt file", path=str(path))


def detect_json(data: Any, path: str = "<json>") -> str:
    """The problem name of a parsed JSON instance (`InputError` naming `path` if it is none of ours)."""
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    fmt = data.get("format")
    if isinstance(fmt, str):
        if fmt.startswith("memsched.chain/"):
            return "chain"
        if fmt.startswith("memsched.join/"):
            return "join"
        if fmt.startswith("memsched.offload/"):
            return "offload"
        raise InputError(f"unknown format {fmt!r}", path=path, field="format")
    if "nodes" in data and ("links" in data or "edges" in data):
        return "graph"
    raise InputError("no 'format' tag and not a node-link graph (expected 'nodes' and 'links')", path=path,
                     field="format")


def load_instance(path: str | Path, problem: str | None = None) -> tuple[str, Any]:
    """(problem, instance) for the file at `path`."""
    problem = problem or detect_problem(path)
    try:
        descriptor = registry.get_problem(problem)
    except ImportError:
        raise InputError(f"problem {problem!r} is not available in this installation", path=str(path)) from None
    return problem, descriptor.load(str(path))
