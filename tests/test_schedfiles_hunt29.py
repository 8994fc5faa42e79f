"""Schedule files (hunt 29): a graph ``schedule`` wrapper that is not an object, the op index of
offloading parse errors, lone surrogate escapes in any JSON file, the graph referee's earliest
violation, and the branch lengths of a join schedule compared as JSON integers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from conftest import write_file as _write
from memsched.solvers.errors import InputError
from memsched.solvers.graph import Graph, GraphSchedule, simulate
from memsched.solvers.jsonio import parse_json, read_json

import memsched

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

#: four nodes a -> b -> c -> d and a -> d; b has a workspace of 5 (memory 12 at step 1 of a, b, ...)
GRAPH = {"directed": True, "multigraph": False, "graph": {"name": "g4"},
         "nodes": [{"id": "a", "cost_cpu": 1.0, "cost_ram": 4, "name": "f0", "backward": False},
                   {"id": "b", "cost_cpu": 2.0, "cost_ram": 3, "name": "f1", "backward": False, "workspace": 5},
                   {"id": "c", "cost_cpu": 0.5, "cost_ram": 2, "name": "loss", "backward": True},
                   {"id": "d", "cost_cpu": 3.0, "cost_ram": 1, "name": "b1", "backward": True}],
         "links": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"},
                   {"source": "a", "target": "d"}, {"source": "c", "target": "d"}]}


def _stage(name: str, fwd: int, bwd: int, out: int, tape: int, bwd_overhead: int = 0) -> dict:
    return {"name": name, "fwd_time": fwd, "bwd_time": bwd, "out_size": out, "tape_size": tape,
            "fwd_overhead": 0, "bwd_overhead": bwd_overhead}


JOIN = {"format": "memsched.join/1", "name": "tiny-join", "branches": [
    {"name": "left", "input_size": 2, "stages": [_stage("l1", 1, 2, 2, 4), _stage("l2", 1, 2, 1, 2)]},
    {"name": "right", "input_size": 3, "stages": [_stage("r1", 2, 3, 2, 3), _stage("r2", 1, 2, 2, 4, 1),
                                                  _stage("r3", 1, 2, 1, 2)]}],
    "loss": {"bwd_time": 1, "bwd_overhead": 1}}

JOIN_OPS = [("F_ck", 0, 0), ("F_n", 0, 1), ("F_all", 1, 0), ("F_all", 1, 1), ("F_all", 1, 2), ("Loss",),
            ("B", 1, 2), ("B", 1, 1), ("B", 1, 0), ("F_all", 0, 0), ("F_all", 0, 1), ("B", 0, 1), ("B", 0, 0)]




def _join_schedule(lengths: list) -> dict:
    ops = [{"op": o[0]} if len(o) == 1 else {"op": o[0], "branch": o[1], "stage": o[2]} for o in JOIN_OPS]
    return {"format": "memsched.schedule/1", "problem": "join", "lengths": lengths, "ops": ops}


# ---------------------------------------------------------------- 1. graph "schedule" wrapper


@pytest.mark.parametrize("inner", [5, "x", True, 2.5])
def test_graph_schedule_wrapper_not_an_object_is_an_input_error(tmp_path: Path, inner: object) -> None:
    with pytest.raises(InputError) as err:
        GraphSchedule.from_json({"schedule": inner}, path="s.json")
    assert err.value.field == "schedule" and err.value.path == "s.json"
    graph = _write(tmp_path, "g.json", GRAPH)
    sched = _write(tmp_path, "s.json", {"schedule": inner})
    for command in (["simulate", graph, sched], ["plot", graph, sched, "-o", tmp_path / "f.png"]):
        res = run_cli(*command)
        assert res.code == 2, res.err
        assert "s.json: schedule:" in res.err and "internal error" not in res.err


def test_graph_schedule_wrapper_holding_a_bare_list_reads_as_the_top_level_does(tmp_path: Path) -> None:
    graph = _write(tmp_path, "g.json", GRAPH)
    assert GraphSchedule.from_json({"schedule": ["a", "b", "c", "d"]}).sequence == ["a", "b", "c", "d"]
    assert memsched.simulate(graph, {"schedule": ["a", "b", "c", "d"]}).status == "valid"
    with pytest.raises(InputError, match="schedule"):
        memsched.simulate(graph, {"schedule": 5})
    res = run_cli("simulate", graph, _write(tmp_path, "s.json", {"schedule": ["a", "b", "c", "d"]}))
    assert res.code == 0, res.err


# ---------------------------------------------------------------- 2. offloading op index


def test_offload_compute_op_error_names_its_index_in_the_file(tmp_path: Path) -> None:
    ops = [{"op": "F_all", "stage": 0}, {"op": "Off", "value": "a", "index": 0},
           {"op": "F_all", "stage": 9}, {"op": "F_all", "stage": 2}]
    sched = _write(tmp_path, "o.json", {"format": "memsched.schedule/1", "problem": "offload", "length": 4,
                                        "ops": ops})
    res = run_cli("simulate", EXAMPLES / "tiny.json", sched, "--bandwidth", "1000B/s")
    assert res.code == 2, res.err
    assert "ops[2]: stage must be an integer" in res.err


def test_offload_errors_come_in_file_order() -> None:
    from memsched.solvers.offload.schedule import OffloadSchedule

    ops = [{"op": "F_all", "stage": 0}, {"op": "F_all", "stage": 7}, {"op": "Off", "value": "z", "index": 0}]
    with pytest.raises(InputError) as err:
        OffloadSchedule.from_json(ops, 4, path="o.json")
    assert err.value.field == "ops[1]"
    good = OffloadSchedule.from_json([{"op": "F_all", "stage": 0}, {"op": "Off", "value": "a", "index": 1},
                                      {"op": "Loss"}], 1)
    assert [str(op) for op in good.ops] == ["F_all(0)", "Off(a_1)", "Loss"]


# ---------------------------------------------------------------- 3. lone surrogates


def test_parse_json_refuses_lone_surrogates_naming_the_json_path() -> None:
    with pytest.raises(InputError) as err:
        parse_json('{"nodes": [{"id": 1}, {"id": "x\\ud800"}]}', "f.json")
    assert err.value.path == "f.json" and err.value.field == "nodes[1].id" and "surrogate" in str(err.value)
    with pytest.raises(InputError) as err:
        parse_json('{"a": {"b\\uDFFF": 1}}', "f.json")
    assert err.value.field == "a" and "key" in str(err.value)
    with pytest.raises(InputError) as err:
        parse_json('"\\udc00"', "f.json")
    assert err.value.field is None
    str(err.value).encode("utf-8")  # the message itself prints anywhere
    # a surrogate pair is one character, and an escaped backslash is no escape
    assert parse_json('{"x": "\\ud83d\\ude00", "y": "\\\\ud800"}', "f.json") == {"x": "\U0001F600", "y": "\\ud800"}


def _surrogate_chain(tmp_path: Path) -> Path:
    text = (EXAMPLES / "tiny.json").read_text().replace('"name": "tiny"', '"name": "t\\ud800"', 1)
    assert "\\ud800" in text
    return _write(tmp_path, "tiny_sur.json", text)


def test_lone_surrogate_in_an_instance_is_exit_2_everywhere(tmp_path: Path) -> None:
    chain = _surrogate_chain(tmp_path)
    with pytest.raises(InputError, match="surrogate"):
        read_json(chain)
    sched = _write(tmp_path, "s.json", {"format": "memsched.schedule/1", "problem": "chain", "length": 4,
                                        "ops": [{"op": "F_all", "stage": 0}]})
    for command in (["solve", chain, "--budget", "30"], ["simulate", chain, sched],
                    ["plot", chain, sched, "-o", tmp_path / "f.png"]):
        res = run_cli(*command)
        assert res.code == 2, (command, res.err)
        assert "tiny_sur.json: name:" in res.err and "surrogate" in res.err


# ---------------------------------------------------------------- 4. graph: the earliest violation


def test_graph_budget_violation_before_a_missing_predecessor_is_reported_first() -> None:
    graph = Graph.from_dict(GRAPH)
    # step 1 (b: 4 + 3 + 5) is over 10; step 2 computes d before its predecessor c
    sim = simulate(graph, GraphSchedule(["a", "b", "d", "c", "d"]), 10)
    assert sim.violation is not None and sim.violation.startswith("step 1 (node 'b')")
    # a node never computed is found at the end: the budget at step 1 comes first
    sim = simulate(graph, GraphSchedule(["a", "b", "c"]), 10)
    assert sim.violation is not None and sim.violation.startswith("step 1 (node 'b')")


def test_graph_earlier_structural_violation_and_ties_still_win() -> None:
    graph = Graph.from_dict(GRAPH)
    # d at step 0 misses its predecessors; memory goes over 10 only at step 2 (b)
    sim = simulate(graph, GraphSchedule(["d", "a", "b", "c", "d"]), 10)
    assert sim.violation is not None and sim.violation.startswith("step 0: node 'd' needs predecessor")
    # same step: b at step 0 misses a and holds 3 + 5 > 5: the missing predecessor is reported
    sim = simulate(graph, GraphSchedule(["b", "a", "b", "c", "d"]), 5)
    assert sim.violation is not None and sim.violation.startswith("step 0: node 'b' needs predecessor 'a'")
    # without a budget, and within it, nothing changes
    assert simulate(graph, GraphSchedule(["a", "b", "c"])).violation == "node 'd' is never computed"
    assert simulate(graph, GraphSchedule(["a", "b", "c", "d"]), 12).valid


def test_graph_cli_reports_the_earliest_violation(tmp_path: Path) -> None:
    graph = _write(tmp_path, "g.json", GRAPH)
    sched = _write(tmp_path, "s.json", {"sequence": ["a", "b", "d", "c", "d"]})
    res = run_cli("simulate", graph, sched, "--budget", "10", "--json")
    assert res.code == 2
    assert json.loads(res.out)["violation"].startswith("step 1 (node 'b'): memory 12 exceeds the budget 10")


# ---------------------------------------------------------------- 5. join lengths as JSON integers


@pytest.mark.parametrize("lengths", [[2.0, 3], [2, 3.0], [True, 3], [2, "3"]])
def test_join_lengths_must_be_true_integers(tmp_path: Path, lengths: list) -> None:
    join = _write(tmp_path, "j.json", JOIN)
    res = run_cli("simulate", join, _write(tmp_path, "s.json", _join_schedule(lengths)))
    assert res.code == 2, res.err
    assert "s.json: lengths:" in res.err and "(item" in res.err


def test_join_lengths_of_integers_still_accepted(tmp_path: Path) -> None:
    join = _write(tmp_path, "j.json", JOIN)
    res = run_cli("simulate", join, _write(tmp_path, "s.json", _join_schedule([2, 3])))
    assert res.code == 0, res.err
    res = run_cli("simulate", join, _write(tmp_path, "s2.json", _join_schedule([2, 4])))
    assert res.code == 2 and "lengths" in res.err and "(item" not in res.err
