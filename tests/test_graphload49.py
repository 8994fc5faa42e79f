"""Graph files and replays as they are: `memsched simulate` labels a graph's makespan and peak as the whole
schedule's (the graph simulator replays every step past a broken rule, as --json reports), not "(up to the
violation)"; a Moccasin (RL) file's errors name its own keys (`duration`, `out_cost`, `"0"`/`"1"`, `name`),
not the Checkmate names it is read under; a node's ``"name": null`` is no name: the id stands in."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import GRAPH_EXAMPLE, run_cli
from conftest import write_file as _write
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph

#: the example node-link file of docs/graph.md
LINEAR3 = GRAPH_EXAMPLE
#: node 2 at step 1 needs node 1, computed only at step 2; every step is still replayed
EARLY = {"format": "memsched.schedule/1", "problem": "graph", "sequence": [0, 2, 1, 3]}

RL = {"graph": {"node_output_cost_tag": "out_cost", "node_duration_tag": "duration"},
      "nodes": [{"name": 0, "out_cost": 3, "duration": 1}, {"name": 1, "out_cost": 2, "duration": 1}],
      "links": [{"0": 0, "1": 1}]}


def test_graph_numbers_past_a_broken_rule_are_the_whole_schedules(tmp_path: Path) -> None:
    graph, sched = _write(tmp_path, "g.json", LINEAR3), _write(tmp_path, "s.json", EARLY)
    full = run_cli("simulate", graph, sched, "--json")
    assert full.code == 2 and "step 1" in full.json()["violation"]
    profile = [step["mem_during"] for step in full.json()["memory_profile"]]
    assert profile == [4, 8, 12, 6] and full.json()["makespan"] == 4.5 and full.json()["peak_memory"] == 12
    res = run_cli("simulate", graph, sched)
    assert res.code == 2 and "step 1" in res.err
    lines = {line.split()[0]: line for line in res.out.splitlines() if line.strip()}
    assert lines["makespan"].split()[1] == "4.5" and lines["peak"].split()[2] == "12"
    for line in (lines["makespan"], lines["peak"]):
        assert "up to the violation" not in line and line.endswith("(whole schedule, replayed past the violation)")


def test_a_valid_graph_schedule_is_not_labelled(tmp_path: Path) -> None:
    sched = dict(EARLY, sequence=[0, 1, 2, 3])
    res = run_cli("simulate", _write(tmp_path, "g.json", LINEAR3), _write(tmp_path, "s.json", sched))
    assert res.code == 0 and "violation" not in res.out


def _rl_error(tmp_path: Path, edit: Any) -> InputError:
    data = copy.deepcopy(RL)
    edit(data)
    with pytest.raises(InputError) as err:
        Graph.load(_write(tmp_path, "rl.json", data))
    return err.value


@pytest.mark.parametrize(("edit", "field", "text"), [
    (lambda d: d["nodes"][1].pop("duration"), "node 1: duration", "missing required field"),
    (lambda d: d["nodes"][1].update(out_cost=-2), "node 1: out_cost", "-2"),
    (lambda d: d["nodes"][1].pop("out_cost"), "node 1: out_cost", "missing required field"),
    (lambda d: d["links"][0].pop("1"), "links[0]", 'needs "0" and "1"'),
    (lambda d: d["links"][0].update({"1": 7}), "links[0].1", "7 is not a node"),
    (lambda d: d["nodes"][1].update(name=0), "nodes[1].name", "duplicate node id 0"),
    (lambda d: d["nodes"][1].pop("name"), "nodes[1]", 'needs a "name"'),
])
def test_moccasin_errors_name_the_files_own_keys(tmp_path: Path, edit: Any, field: str, text: str) -> None:
    err = _rl_error(tmp_path, edit)
    assert err.field == field and text in str(err)
    for checkmate in ("cost_cpu", "cost_ram", "source", '"id"'):
        assert checkmate not in str(err), str(err)


def test_moccasin_node_with_checkmate_keys_is_named_by_them(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["nodes"][1] = {"name": 1, "out_cost": 2, "cost_cpu": -1}  # the node's own key, not the tag's

    err = _rl_error(tmp_path, edit)
    assert err.field == "node 1: cost_cpu"


def test_null_node_name_falls_back_to_the_id(tmp_path: Path) -> None:
    data = json.loads(json.dumps(LINEAR3))
    data["nodes"][1]["name"] = None
    del data["nodes"][2]["name"]
    graph = Graph.load(_write(tmp_path, "g.json", data))
    assert graph.names == ["f0", "1", "2", "b_in"]


def test_a_moccasin_file_with_one_key_for_size_and_duration_is_refused(tmp_path: Path) -> None:
    data = {"graph": {"node_output_cost_tag": "out_cost", "node_duration_tag": "out_cost"},
            "nodes": [{"name": 0, "duration": 1.0, "out_cost": 3}, {"name": 1, "duration": 1.0, "out_cost": 2}],
            "links": [{"0": 0, "1": 1}]}
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="node_output_cost_tag names too") as err:
        Graph.load(path)
    assert err.value.field == "graph.node_duration_tag"
