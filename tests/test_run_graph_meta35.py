"""A bad size recorded in a graph file's meta names ``graph.meta.<key>`` (session 35).

A graph file (networkx node-link form) keeps its meta under ``graph.meta``; it has no top-level
``meta``. `models.run` checks a recorded size before it builds anything, and before this fix
named the field ``meta.width`` in a graph file, a field the file does not have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def _graph_file(path: Path, meta: dict[str, Any]) -> Path:
    """A one-node graph file profiled (as its meta says) from the zoo's lstm."""
    graph = {"directed": True, "multigraph": False,
             "graph": {"name": "g", "meta": {"model": "lstm", **meta}},
             "nodes": [{"id": 0, "cost_cpu": 1.0, "cost_ram": 4}], "links": []}
    path.write_text(json.dumps(graph))
    return path


@pytest.mark.parametrize(("key", "value", "message"), [
    ("width", -3, "must be an integer in 1..1000000, got -3"),
    ("batch", "two", "must be an integer in 1..16777216, got 'two'"),
])
def test_a_bad_recorded_size_in_a_graph_file_names_graph_meta(cli: Any, tmp_path: Path, key: str, value: Any,
                                                               message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bad = _graph_file(tmp_path / "bad.json", {key: value})
    res = cli("run", bad.name, "--budget", "100%", "--time-repeats", "1", "--no-independent")
    assert res.code == 2, res.err
    assert res.err.startswith(f"memsched run: error: bad.json: graph.meta.{key}: {message}"), res.err
    assert len(res.err.strip().splitlines()) == 1


def test_the_python_error_names_graph_meta(tmp_path: Path) -> None:
    """`models.run.instance_sizes` on a graph's meta: the `InputError`'s field is ``graph.meta.width``."""
    from memsched.models.run import instance_sizes
    from memsched.solvers.graph.instance import Graph

    import memsched

    path = _graph_file(tmp_path / "g.json", {"width": 0})
    graph = Graph.from_dict(json.loads(path.read_text()), path="g.json")
    with pytest.raises(memsched.InputError) as err:
        instance_sizes(graph, "lstm", None, "graph", path="g.json")
    assert err.value.field == "graph.meta.width"
