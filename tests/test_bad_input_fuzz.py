"""Random edits of valid instance files, as `tests/test_bad_input.py`'s table cannot list them
all: `memsched solve` with a fast solver answers (exit 0 or 1) or refuses the file (exit 2, one
line on stderr naming it), never with an internal error (exit 3). Fuzzing this way found a
graph node's `backward` flag taken as any value, and graphs whose flags made sqrt, greedy and
griewank build schedules the simulator rejected."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).resolve().parent.parent / "solvers" / "data"
CHAIN = json.loads((DATA / "examples" / "tiny.json").read_text())
GRAPH = json.loads((DATA / "graphs" / "vgg16_like.json").read_text())
JOIN = json.loads((DATA / "join" / "tiny.json").read_text())
OFFLOAD = {**CHAIN, "host_link": {"bandwidth": 1000.0, "latency": 0.0}}
BASES = {"chain": (CHAIN, "rotor"), "offload": (OFFLOAD, "pofo"), "join": (JOIN, "dp")}
GRAPH_SOLVERS = ("greedy", "sqrt", "griewank", "dtr", "checkpoint-all")
VALUES = (None, "x", "", -1, -0.5, 0, 0.5, 1, 10**30, float("nan"), float("inf"), True, False, [], {}, [1])


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path below `obj` (dict keys and list indices), the root excluded."""
    out = [prefix] if prefix else []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        out += _paths(value, prefix + (key,))
    return out


def _value() -> st.SearchStrategy[Any]:
    """One of VALUES, a fresh copy (an edit inside a drawn list must not change VALUES)."""
    return st.sampled_from(VALUES).map(copy.deepcopy)


def _edit(data: Any, path: tuple, value: Any, delete: bool) -> None:
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value


def _answers_or_refuses(tmp_path: Path, data: Any, *argv: str) -> None:
    target = tmp_path / "edited.json"
    target.write_text(json.dumps(data))
    res = run_cli("solve", str(target), *argv)
    lines = [line for line in res.err.splitlines() if line.strip()]
    assert res.code in (0, 1, 2), f"exit {res.code}: {res.err}"
    assert "Traceback" not in res.err and "internal error" not in res.err, res.err
    if res.code == 2:
        assert len(lines) == 1 and "edited.json" in lines[0], lines


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(BASES)), data=st.data(), budget=st.sampled_from(["50%", "90%", "100", "10**9"]))
def test_an_edited_file_is_answered_or_refused(tmp_path, kind, data, budget):
    base, solver = BASES[kind]
    edited = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 2))):
        paths = _paths(edited)
        if not paths:
            break
        _edit(edited, data.draw(st.sampled_from(paths)), data.draw(_value()), data.draw(st.booleans()))
    _answers_or_refuses(tmp_path, edited, "--budget", budget.replace("10**9", "1000000000"), "--solver", solver)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), solver=st.sampled_from(GRAPH_SOLVERS), budget=st.sampled_from(["40%", "70%", "100%"]))
def test_an_edited_graph_is_answered_or_refused(tmp_path, data, solver, budget):
    """Structural edits of a valid training graph: backward flags flipped, links added (forward
    in the file's order, so it stays a DAG) or dropped, a node's field set to any value."""
    graph = copy.deepcopy(GRAPH)
    nodes, links = graph["nodes"], graph["links"]
    for _ in range(data.draw(st.integers(1, 3))):
        edit = data.draw(st.sampled_from(["flip", "add", "drop", "field"]))
        if edit == "flip":
            node = data.draw(st.sampled_from(nodes))
            node["backward"] = not node.get("backward", False)
        elif edit == "add":
            a, b = sorted(data.draw(st.lists(st.integers(0, len(nodes) - 1), min_size=2, max_size=2, unique=True)))
            link = {"source": nodes[a]["id"], "target": nodes[b]["id"]}
            if link not in links:
                links.append(link)
        elif edit == "drop" and links:
            links.pop(data.draw(st.integers(0, len(links) - 1)))
        else:
            field = data.draw(st.sampled_from(["backward", "cost_ram", "cost_cpu", "name"]))
            data.draw(st.sampled_from(nodes))[field] = data.draw(_value())
    _answers_or_refuses(tmp_path, graph, "--budget", budget, "--solver", solver)
