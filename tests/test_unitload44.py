"""Memory units of instance files, as every command reads them (docs/cli.md, *Memory units*):

1. a byte unit too large for sizes of at most 1 PiB (``"PiB"``, ``"PB"``, ``"EiB"``) in ``meta.units.memory``
   is bad input for every loader (chain, join, graph; offloading and pipelines read the chain), whatever the
   command: one line naming the file and the field, exit 2 (it was read as a word such as "slots" by
   ``solve`` and refused only by ``--bandwidth`` and ``partition``);
2. the violation "memory over the budget" names the instance's memory unit after the budget
   ("23 > 22 MB", "bytes" without a unit, "slots" as written), as printed sizes do."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import one_line_refusal, write_file
from memsched.solvers.chain import Chain
from memsched.solvers.errors import InputError

STAGES = [(1.0, 2.0, 4, 8, 0, 0), (2.0, 4.0, 2, 6, 1, 1), (1.5, 3.0, 3, 7, 0, 1), (0.5, 1.0, 2, 5, 1, 0)]
FIELDS = ("fwd_time", "bwd_time", "out_size", "tape_size", "fwd_overhead", "bwd_overhead")


def chain(memory: str | None) -> dict[str, Any]:
    """A 4-stage chain file (store-all peak 23 units) in the memory unit `memory` (None: no ``meta.units``)."""
    data: dict[str, Any] = {
        "format": "memsched.chain/1", "name": "c", "input_size": 4,
        "stages": [{"name": f"s{i}", **dict(zip(FIELDS, st))} for i, st in enumerate(STAGES)],
        "loss": {"bwd_time": 0.5, "bwd_overhead": 0},
    }
    if memory is not None:
        data["meta"] = {"units": {"time": "ms", "memory": memory}}
    return data


#: store-all with the checkpoint of a_0: 23 units while B(3) runs (op #5)
CHAIN_SCHEDULE = {"format": "memsched.schedule/1", "problem": "chain", "length": 4, "ops": [
    {"op": "F_ck", "stage": 0}, {"op": "F_n", "stage": 1}, {"op": "F_all", "stage": 2}, {"op": "F_all", "stage": 3},
    {"op": "Loss"}, {"op": "B", "stage": 3}, {"op": "B", "stage": 2}, {"op": "F_ck", "stage": 0},
    {"op": "F_all", "stage": 1}, {"op": "B", "stage": 1}, {"op": "F_all", "stage": 0}, {"op": "B", "stage": 0}]}


def graph(memory: str | None) -> dict[str, Any]:
    """f0 -> f1 -> b1 (f0 kept for b1): memory 4, 6, 12 at steps 0, 1, 2."""
    meta = {"units": {"memory": memory}} if memory is not None else {}
    return {"directed": True, "graph": {"name": "g", "meta": meta},
            "nodes": [{"id": "f0", "cost_cpu": 1, "cost_ram": 4}, {"id": "f1", "cost_cpu": 2, "cost_ram": 2},
                      {"id": "b1", "cost_cpu": 3, "cost_ram": 6, "backward": True}],
            "links": [{"source": "f0", "target": "f1"}, {"source": "f1", "target": "b1"},
                      {"source": "f0", "target": "b1"}]}


GRAPH_SCHEDULE = {"format": "memsched.schedule/1", "problem": "graph", "sequence": ["f0", "f1", "b1"]}


def join(memory: str) -> dict[str, Any]:
    """Two one-stage branches (inputs 2 + 3) and a loss, in the memory unit `memory`."""
    branch = [{"name": "s0", "fwd_time": 1, "bwd_time": 2, "out_size": 2, "tape_size": 4, "fwd_overhead": 0,
               "bwd_overhead": 0}]
    return {"format": "memsched.join/1", "name": "j",
            "branches": [{"name": "l", "input_size": 2, "stages": branch},
                         {"name": "r", "input_size": 3, "stages": copy.deepcopy(branch)}],
            "loss": {"bwd_time": 1, "bwd_overhead": 1}, "meta": {"units": {"time": "ms", "memory": memory}}}


# ----------------------------------------------------------------------------- 1. too large a byte unit
@pytest.mark.parametrize("unit", ["PiB", "PB", "eib", "ZB"])
def test_a_too_large_byte_unit_is_refused_by_every_command(cli, tmp_path, unit):
    path = write_file(tmp_path, "c.json", chain(unit))
    sched = write_file(tmp_path, "s.json", CHAIN_SCHEDULE)
    for argv in (["solve", path, "--budget", "24"], ["solve", path, "--budget", "24", "--bandwidth", "1GB/s"],
                 ["solve", path, "--budget", "60%", "--solver", "revolve"],
                 ["partition", path, "--devices", "2", "--memory", "100"],
                 ["simulate", path, sched, "--budget", "24"], ["simulate", path, sched]):
        line = one_line_refusal(cli(*argv), "meta.units.memory")
        assert "c.json" in line and repr(unit) in line, (argv, line)
        assert "too large to be supported (every size is at most 1 PiB)" in line, (argv, line)


def test_join_and_graph_files_refuse_it_too(cli, tmp_path):
    j = write_file(tmp_path, "j.json", join("PiB"))
    line = one_line_refusal(cli("solve", j, "--budget", "60%"), "j.json: meta.units.memory")
    assert "too large" in line
    g = write_file(tmp_path, "g.json", graph("PB"))
    for argv in (["solve", g, "--budget", "60%"], ["simulate", g, write_file(tmp_path, "gs.json", GRAPH_SCHEDULE)]):
        line = one_line_refusal(cli(*argv), "g.json: graph.meta.units.memory")
        assert "too large" in line and "'PB'" in line


def test_the_loaders_refuse_it_in_python(tmp_path):
    from memsched.solvers.graph import Graph
    from memsched.solvers.join import Join

    for build, data, field in ((Chain.from_dict, chain(" PiB "), "meta.units.memory"),
                               (Join.from_dict, join("EB"), "meta.units.memory"),
                               (Graph.from_dict, graph("YiB"), "graph.meta.units.memory")):
        with pytest.raises(InputError) as err:
            build(data, path="x.json")
        assert err.value.field == field and "too large" in str(err.value)
    assert Chain.from_dict(chain("TiB"), path="x.json").meta["units"]["memory"] == "TiB"  # the largest accepted
    assert Chain.from_dict(chain("petaslots"), path="x.json").length == 4  # a word that is no byte unit


# ----------------------------------------------------------------------------- 2. the unit in violations
@pytest.mark.parametrize(("memory", "budget", "unit"), [("MB", "22MB", "MB"), (None, "22", "bytes"),
                                                       ("slots", "22", "slots"), ("KiB", "22", "KiB")])
def test_chain_over_budget_names_the_unit(cli, tmp_path, memory, budget, unit):
    path = write_file(tmp_path, "c.json", chain(memory))
    sched = write_file(tmp_path, "s.json", CHAIN_SCHEDULE)
    line = one_line_refusal(cli("simulate", path, sched, "--budget", budget), "invalid schedule")
    assert line.endswith(f"op #5 B(3): memory over budget: 23 > 22 {unit} while it runs"), line
    line = one_line_refusal(cli("simulate", path, sched, "--budget", "3"), "invalid schedule")
    assert line.endswith(f"the input a_0 alone (4) exceeds the budget 3 {unit}"), line


def test_join_over_budget_names_the_unit(tmp_path):
    from memsched.solvers.join import Join
    from memsched.solvers.join import simulate as join_simulate

    j = Join.from_dict(join("MB"), path="j.json")
    assert join_simulate(j, [], 4).violation.reason == "the inputs alone (5) exceed the budget 4 MB"
    ops = [("F_all", 0, 0), ("F_all", 1, 0), ("Loss", -1, -1)]
    reason = join_simulate(j, ops, 5).violation.reason
    assert reason.startswith("memory over budget: ") and reason.endswith(" > 5 MB while it runs"), reason


@pytest.mark.parametrize(("memory", "unit"), [("MB", "MB"), (None, "bytes"), ("B", "bytes"), ("slots", "slots")])
def test_graph_over_budget_names_the_unit(cli, tmp_path, memory, unit):
    g = write_file(tmp_path, "g.json", graph(memory))
    res = cli("simulate", g, write_file(tmp_path, "gs.json", GRAPH_SCHEDULE), "--budget", "11")
    line = one_line_refusal(res, "invalid schedule")
    assert line.endswith(f"step 2 (node 'b1'): memory 12 exceeds the budget 11 {unit}"), line


@pytest.mark.parametrize(("memory", "unit"), [("MB", "MB"), (None, "bytes")])
def test_offload_over_budget_names_the_unit(cli, tmp_path, memory, unit):
    data = chain(memory)
    data["host_link"] = {"bandwidth": 2e9, "latency": 0.0}
    path = write_file(tmp_path, "o.json", data)
    ops = [{"op": "F_all", "stage": i} for i in range(4)] + [{"op": "Loss"}]
    ops += [{"op": "B", "stage": i} for i in reversed(range(4))]  # store-all
    sched = write_file(tmp_path, "os.json", {"format": "memsched.schedule/1", "problem": "offload", "length": 4,
                                            "ops": ops})
    line = one_line_refusal(cli("simulate", path, sched, "--budget", "3"), "invalid schedule")
    assert f"op #0 F_all(0): memory over budget: 12 > 3 {unit} at t=0" in line, line
