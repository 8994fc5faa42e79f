"""Unknown keys of an instance file: each is one `UnknownFieldWarning` naming the file and the JSON path,
with the closest key that object accepts, and the file still loads (outside tools may add keys); the
command line prints it as one line ``memsched <cmd>: warning: ...`` and exits as before. Every instance
file memsched ships or writes (profile, export-graph) loads without one."""

from __future__ import annotations

import copy
import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from memsched.solvers import chain as chain_pkg
from memsched.solvers import graph as graph_pkg
from memsched.solvers import join as join_pkg
from memsched.solvers import offload as offload_pkg
from memsched.solvers import pipeline as pipeline_pkg
from memsched.solvers.formats import detect_json

ROOT = Path(importlib.import_module("memsched.solvers").__file__).resolve().parents[1]
#: the warning's category (UserWarning on a tree without it: the messages below then never come)
CATEGORY: type[Warning] = getattr(importlib.import_module("memsched.solvers.jsonio"), "UnknownFieldWarning",
                                  UserWarning)


def _stage(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "fwd_time": 1.0, "bwd_time": 2.0, "out_size": 4, "tape_size": 8, "fwd_overhead": 2,
            "bwd_overhead": 0, **extra}


CHAIN = {"format": "memsched.chain/1", "name": "c", "input_size": 4,
         "stages": [_stage("a"), _stage("b"), _stage("c"), _stage("conv2")],
         "loss": {"bwd_time": 1.0, "bwd_overhead": 0}, "meta": {"units": {"time": "s", "memory": "bytes"}}}
JOIN = {"format": "memsched.join/1", "name": "j",
        "branches": [{"name": "left", "input_size": 4, "stages": [_stage("l0"), _stage("l1")]},
                     {"name": "right", "input_size": 4, "stages": [_stage("r0")]}],
        "loss": {"bwd_time": 1.0, "bwd_overhead": 0}, "meta": {}}
GRAPH = {"directed": True, "multigraph": False, "graph": {"name": "g", "order": [0, 1, 2]},
         "nodes": [{"id": 0, "cost_cpu": 1.0, "cost_ram": 4, "name": "f"},
                   {"id": 1, "cost_cpu": 1.0, "cost_ram": 4, "name": "loss", "backward": True},
                   {"id": 2, "cost_cpu": 2.0, "cost_ram": 4, "name": "b", "backward": True}],
         "links": [{"source": 0, "target": 1}, {"source": 0, "target": 2}, {"source": 1, "target": 2}]}


def _write(tmp_path: Path, data: Any, name: str = "f.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def _messages(load: Any, *args: Any) -> tuple[Any, list[str]]:
    """(what `load(*args)` returns, the messages of the `CATEGORY` warnings it gave, in order)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = load(*args)
    return out, [str(w.message) for w in caught if issubclass(w.category, CATEGORY)]


def test_misspelt_chain_stage_field_warns_with_the_suggestion_and_still_loads(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["stages"][3]["fwd_overhead_al"] = 1  # fwd_overhead_all: silently o_fa = o_f before
    path = _write(tmp_path, data)
    chain, got = _messages(chain_pkg.load, path)
    assert got == [f"{path}: stages[3] (conv2).fwd_overhead_al is not a field of a chain stage "
                   "(ignored; did you mean fwd_overhead_all?)"]
    assert chain.length == 4 and int(chain.o_fa[3]) == 2  # loaded, the key ignored


def test_misspelt_top_level_loss_and_units_keys_warn(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["nmae"] = "x"
    data["loss"]["bwd_overhaed"] = 3
    data["meta"]["units"]["tim"] = "ms"
    path = _write(tmp_path, data)
    _, got = _messages(chain_pkg.load, path)
    assert f"{path}: nmae is not a field of a chain file (ignored; did you mean name?)" in got
    assert any(m.startswith(f"{path}: loss.bwd_overhaed ") and m.endswith("did you mean bwd_overhead?)") for m in got)
    assert any(m.startswith(f"{path}: meta.units.tim ") and m.endswith("did you mean time?)") for m in got)
    assert len(got) == 3


def test_a_key_close_to_nothing_warns_without_a_suggestion(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["stages"][0]["zzzz"] = 1
    path = _write(tmp_path, data)
    _, got = _messages(chain_pkg.load, path)
    assert got == [f"{path}: stages[0] (a).zzzz is not a field of a chain stage (ignored)"]


def test_join_branch_and_stage_keys_warn(tmp_path):
    data = copy.deepcopy(JOIN)
    data["branches"][1]["input_sise"] = 4
    data["branches"][0]["stages"][1]["fwd_time_nograde"] = 0.5
    path = _write(tmp_path, data)
    join, got = _messages(join_pkg.load, path)
    assert join.k == 2
    assert got == [f"{path}: branches[0] (left).stages[1] (l1).fwd_time_nograde is not a field of a join stage "
                   "(ignored; did you mean fwd_time_nograd?)",
                   f"{path}: branches[1] (right).input_sise is not a field of a join branch "
                   "(ignored; did you mean input_size?)"]


def test_graph_node_and_attribute_keys_warn(tmp_path):
    data = copy.deepcopy(GRAPH)
    data["nodes"][2]["workspce"] = 8
    data["graph"]["ordr"] = [0, 1, 2]
    path = _write(tmp_path, data)
    graph, got = _messages(graph_pkg.load, path)
    assert graph.n == 3 and not graph.has_workspace
    assert f"{path}: nodes[2] (b).workspce is not a field of a graph node (ignored; did you mean workspace?)" in got
    assert any(m.startswith(f"{path}: graph.ordr ") and m.endswith("did you mean order?)") for m in got)
    assert len(got) == 2


def test_moccasin_tagged_graph_keys_do_not_warn(tmp_path):
    data = {"directed": True, "multigraph": False,
            "graph": {"node_output_cost_tag": "out_cost", "node_duration_tag": "duration",
                      "node_param_cost_tag": "param_cost", "pos": {}, "max_cost": 1},
            "nodes": [{"out_cost": 4, "param_cost": 0, "duration": 1, "name": 0},
                      {"out_cost": 4, "param_cost": 0, "duration": 1, "name": 1}],
            "links": [{"0": 0, "1": 1}]}
    _, got = _messages(graph_pkg.load, _write(tmp_path, data))
    assert got == []


def test_pipeline_chain_file_warns(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["meta"]["param_size"] = [1, 2, 3, 4]  # param_sizes: silently no weights before
    data["stages"][0]["out_sise"] = 4
    path = _write(tmp_path, data)
    pipe, got = _messages(pipeline_pkg.load, path)
    assert pipe.length == 4 and int(pipe.params.sum()) == 0
    assert any(m.startswith(f"{path}: stages[0] (a).out_sise ") and m.endswith("did you mean out_size?)") for m in got)
    assert any(m.startswith(f"{path}: meta.param_size ") and m.endswith("did you mean param_sizes?)") for m in got)
    assert len(got) == 2


def test_offload_host_link_key_warns(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["host_link"] = {"bandwidth": 1e9, "latncy": 0.5}
    path = _write(tmp_path, data)
    inst, got = _messages(offload_pkg.load, path)
    assert inst.latency == 0.0
    assert got == [f"{path}: host_link.latncy is not a field of a host link (ignored; did you mean latency?)"]


def test_cli_prints_one_warning_line_and_exits_0(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["stages"][3]["fwd_overhead_al"] = 1
    path = _write(tmp_path, data)
    res = run_cli("solve", path, "--budget", "100%")
    assert res.code == 0, res.err
    lines = [line for line in res.err.splitlines() if "warning" in line]
    assert lines == [f"memsched solve: warning: {path}: stages[3] (conv2).fwd_overhead_al is not a field of a "
                     "chain stage (ignored; did you mean fwd_overhead_all?)"], res.err
    assert "UnknownFieldWarning" not in res.err and ".py:" not in res.err


def _shipped_instances() -> list[tuple[str, str]]:
    """(file, problem) of every JSON instance under the repository's data folders."""
    out = []
    for folder in ("examples", "solvers/data", "results", "memsched"):
        for path in sorted((ROOT / folder).rglob("*.json")):
            try:
                problem = detect_json(json.loads(path.read_text()), str(path))
            except Exception:  # a result table, a config: not an instance
                continue
            out.append((str(path.relative_to(ROOT)), problem))
    return out


SHIPPED = _shipped_instances()


def _load_strict(path: Path, problem: str) -> None:
    """Load `path` as `problem` (a chain also as a pipeline, and as an offloading instance when it has a
    host link) with unknown-field warnings turned into errors."""
    loaders = {"chain": [chain_pkg.load, pipeline_pkg.load], "join": [join_pkg.load], "graph": [graph_pkg.load],
               "offload": [offload_pkg.load]}[problem]
    if problem == "chain" and "host_link" in json.loads(path.read_text()):
        loaders.append(offload_pkg.load)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CATEGORY)
        for load in loaders:
            try:
                load(str(path))
            except CATEGORY:
                raise
            except Exception as err:  # a pipeline of a chain in MFLOP: refused for another reason
                if load is not pipeline_pkg.load:
                    raise AssertionError(f"{path} does not load as {problem}: {err}") from err


def test_there_are_shipped_instances_of_each_kind():
    assert {"chain", "join", "graph"} <= {problem for _, problem in SHIPPED}


@pytest.mark.parametrize("name, problem", SHIPPED, ids=[name for name, _ in SHIPPED])
def test_shipped_instances_load_without_warnings(name, problem):
    _load_strict(ROOT / name, problem)


def test_profile_and_export_graph_outputs_load_without_warnings(tmp_path):
    pytest.importorskip("torch")
    sizes = ["resnet18", "--batch", "2", "--image-size", "32", "--width", "8", "--threads", "1"]
    chain_file, graph_file = tmp_path / "p.json", tmp_path / "g.json"
    for argv in (["profile", *sizes, "--repeats", "1", "--device", "cpu", "--early-release", "-o", str(chain_file)],
                 ["export-graph", *sizes, "-o", str(graph_file)]):
        res = subprocess.run([sys.executable, "-m", "memsched.experiments.cli", *argv], capture_output=True,
                             text=True, timeout=300)
        assert res.returncode == 0 and "warning" not in res.stderr, res.stderr
    _load_strict(chain_file, "chain")
    _load_strict(graph_file, "graph")


def test_the_warning_stays_one_line_when_a_stage_name_holds_a_newline(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["stages"][0]["name"] = "conv\nEVIL LINE"
    data["stages"][0]["fwd_tme"] = 1
    _, got = _messages(chain_pkg.load, _write(tmp_path, data))
    assert len(got) == 1 and "\n" not in got[0] and "conv\\nEVIL LINE" in got[0]


def test_a_file_that_does_not_load_gives_no_warnings_only_its_error(tmp_path):
    """A chain file read as a graph: the loader fails on `nodes`; the keys it did not read are no news then
    (six warnings came before the one error line)."""
    path = _write(tmp_path, CHAIN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Exception, match="nodes"):
            graph_pkg.load(path)
    assert not [w for w in caught if issubclass(w.category, CATEGORY)]
    res = run_cli("run", path, "--problem", "graph", "--budget", "80%")
    assert res.code == 2 and "warning" not in res.err and len(res.err.strip().splitlines()) == 1, res.err
