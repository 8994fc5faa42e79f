"""Graph files: an unknown key on a link is reported as for a node (`jsonio.warn_unknown`), and a
Moccasin tagged file whose node is not an object is refused naming that node (not the first one)."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.graph.instance import Graph
from memsched.solvers.jsonio import UnknownFieldWarning


def _graph(links: list[dict]) -> dict:
    nodes = [{"id": k, "cost_cpu": 1.0, "cost_ram": 4} for k in range(3)]
    return {"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "links": links}


def _write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_unknown_link_key_warns_naming_the_link(tmp_path: Path) -> None:
    path = _write(tmp_path, _graph([{"source": 0, "target": 1}, {"source": 1, "target": 2, "wieght": 3}]))
    with pytest.warns(UnknownFieldWarning, match=r"links\[1\]\.wieght"):
        graph = Graph.load(path)
    assert graph.n == 3


def test_known_link_keys_do_not_warn(tmp_path: Path) -> None:
    path = _write(tmp_path, _graph([{"source": 0, "target": 1, "key": 0}, {"source": 1, "target": 2}]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownFieldWarning)
        Graph.load(path)


def test_cli_prints_the_link_warning_once(tmp_path: Path) -> None:
    path = _write(tmp_path, _graph([{"source": 0, "target": 1, "foo": 1}, {"source": 1, "target": 2}]))
    run = subprocess.run([sys.executable, "-m", "memsched", "solve", path, "--budget", "100%", "--solver", "dtr"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if "warning" in line]
    assert len(lines) == 1 and "links[0].foo" in lines[0] and "a link" in lines[0]


def _moccasin(second_node: object) -> dict:
    return {"directed": True,
            "graph": {"node_output_cost_tag": "out_cost", "node_duration_tag": "duration", "order": [0, 1, 2]},
            "nodes": [{"name": 0, "out_cost": 4, "duration": 1}, second_node,
                      {"name": 2, "out_cost": 2, "duration": 1}],
            "links": [{"0": 0, "1": 1, "extra": "kept"}, {"0": 1, "1": 2}]}


def test_moccasin_node_not_an_object_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, _moccasin(5))
    with pytest.raises(InputError) as err:
        Graph.load(path)
    assert err.value.field == "nodes[1]" and "object" in str(err.value)


def test_moccasin_links_keep_their_own_keys_silently(tmp_path: Path) -> None:
    path = _write(tmp_path, _moccasin({"name": 1, "out_cost": 3, "duration": 1}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownFieldWarning)
        graph = Graph.load(path)
    assert graph.n == 3
