"""The 1 PiB size limit of instance files is worded in the unit their numbers are in.

A file whose ``meta.units.memory`` (a graph's ``graph.meta.units.memory``) is no byte unit ("slots")
has its numbers capped as written, at 2^50 units (docs/graph.md, docs/cli.md): the error says
``at most 1125899906842624 slots (2^50)``, not "bytes (1 PiB)". A file in a byte unit larger than a
byte (KiB, MB, TB) is capped at 1 PiB once in bytes, that is at 2^50 // (bytes per unit) units: the
error states that number in the file's unit. Files in bytes keep their wording. Each case is one
line on stderr and exit 2 from the CLI, or the same `InputError` from the loaders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, run_cli
from memsched.solvers.chain.instance import check_bytes, check_total
from memsched.solvers.errors import InputError
from memsched.solvers.graph.instance import Graph
from memsched.solvers.join.instance import Join
from memsched.solvers.offload.instance import OffloadInstance
from memsched.solvers.pipeline import instance as pipeline_instance
from memsched.solvers.units import check_number

PIB = 2**50
KIB_LIMIT = PIB // 2**10  # 1099511627776 KiB are 1 PiB


def _graph(unit: str | None, cost_ram: float, *, second: float = 2, workspace: float | None = None) -> dict[str, Any]:
    """A 3-node graph file in `unit` (None: no units, bytes) whose node 0 has `cost_ram` (and `workspace`)
    and node 1 `second`."""
    first: dict[str, Any] = {"id": 0, "cost_cpu": 1.0, "cost_ram": cost_ram, "name": "f0", "backward": False}
    if workspace is not None:
        first["workspace"] = workspace
    attrs: dict[str, Any] = {"name": "g", "order": [0, 1, 2]}
    if unit is not None:
        attrs["meta"] = {"units": {"memory": unit}}
    return {"directed": True, "multigraph": False, "graph": attrs,
            "nodes": [first, {"id": 1, "cost_cpu": 1.0, "cost_ram": second, "name": "loss", "backward": True},
                      {"id": 2, "cost_cpu": 2.0, "cost_ram": 4, "name": "b0", "backward": True}],
            "links": [{"source": 0, "target": 1}, {"source": 0, "target": 2}, {"source": 1, "target": 2}]}


def _chain(unit: str | None, out_size: float) -> dict[str, Any]:
    """tiny.json in `unit` (None: as it is, bytes) with its first stage's out_size and tape_size `out_size`."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    if unit is not None:
        data.setdefault("meta", {})["units"] = {"memory": unit}
    data["stages"][0]["out_size"] = data["stages"][0]["tape_size"] = out_size
    return data


def _cli_error(tmp_path: Path, data: dict[str, Any], problem: str) -> str:
    """The one line `memsched simulate` writes for the instance `data` (exit 2), without its prefix."""
    path = tmp_path / "v.json"
    path.write_text(json.dumps(data))
    schedule = tmp_path / "vs.json"
    schedule.write_text(json.dumps({"format": "memsched.schedule/1", "problem": problem, "sequence": [0, 1, 2]}))
    res = run_cli("simulate", path, schedule)
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    prefix = f"memsched simulate: error: {path}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


# ------------------------------------------------------------------------------- graph files, CLI
@pytest.mark.parametrize("unit, cost_ram, second, message", [
    ("slots", PIB + 1, 2, f"node 0: cost_ram: {PIB + 1} is too large (at most {PIB} slots (2^50))"),
    ("slots", PIB, 6, f"nodes: the sizes add up to {PIB + 10} slots, more than {PIB} slots (2^50)"),
    ("KiB", PIB + 1, 2, f"node 0: cost_ram: {PIB + 1} is too large (at most {KIB_LIMIT} KiB (1 PiB))"),
    ("KiB", 2**41, 2, f"node 0: cost_ram: {2**41} KiB is {2**51} bytes, too large (at most {KIB_LIMIT} KiB (1 PiB))"),
    ("kib", KIB_LIMIT, KIB_LIMIT, f"nodes: the sizes add up to {2 * KIB_LIMIT + 4} KiB ({(2 * KIB_LIMIT + 4) * 1024} "
                                  f"bytes), more than {KIB_LIMIT} KiB (1 PiB)"),
    ("TB", 1126, 2, "node 0: cost_ram: 1126 TB is 1126000000000000 bytes, too large (at most 1125 TB (1 PiB is "
                    "1125.899906842624 TB))"),
    ("MB", 10**9, 2 * 10**8, "nodes: the sizes add up to 1200000004 MB (1200000004000000 bytes), more than "
                             "1125899906 MB (1 PiB is 1125899906.842624 MB)"),
])
def test_graph_file_limit_in_its_unit(tmp_path: Path, unit: str, cost_ram: int, second: int, message: str) -> None:
    assert _cli_error(tmp_path, _graph(unit, cost_ram, second=second), "graph") == message


@pytest.mark.parametrize("unit", [None, "bytes", "B"])
def test_graph_file_in_bytes_keeps_its_wording(tmp_path: Path, unit: str | None) -> None:
    assert _cli_error(tmp_path, _graph(unit, PIB + 1), "graph") == \
        f"node 0: cost_ram: {PIB + 1} is too large (at most {PIB} bytes (1 PiB))"
    assert _cli_error(tmp_path, _graph(unit, PIB, second=6), "graph") == \
        f"nodes: the sizes add up to {PIB + 10} bytes, more than {PIB} (1 PiB)"


def test_graph_workspace_and_python_check_in_slots() -> None:
    with pytest.raises(InputError) as err:
        Graph.from_dict(_graph("slots", 1, workspace=PIB + 1), path="g.json")
    assert str(err.value) == f"g.json: node 0: workspace: {PIB + 1} is too large (at most {PIB} slots (2^50))"
    g = Graph.from_dict(_graph("slots", 4), path="g.json")
    g.cost_ram[0] = PIB + 1
    with pytest.raises(InputError) as err:
        g.check(path="g.json")
    assert str(err.value) == f"g.json: node 0: cost_ram: {PIB + 1} is too large (at most {PIB} slots (2^50))"
    g.cost_ram[0] = g.cost_ram[1] = PIB // 2 + 1
    with pytest.raises(InputError) as err:
        g.check(path="g.json")
    assert str(err.value) == f"g.json: nodes: the sizes add up to {PIB + 6} slots, more than {PIB} slots (2^50)"


# ------------------------------------------------------------------------------- chain files, CLI
@pytest.mark.parametrize("unit, out_size, message", [
    ("slots", PIB + 1, f"stages[0] (conv1).out_size: {PIB + 1} is too large (at most {PIB} slots (2^50))"),
    ("KiB", PIB + 1, f"stages[0] (conv1).out_size: {PIB + 1} is too large (at most {KIB_LIMIT} KiB (1 PiB))"),
    ("KiB", KIB_LIMIT + 1, f"stages[0] (conv1).out_size: {KIB_LIMIT + 1} KiB is {(KIB_LIMIT + 1) * 1024} bytes, too "
                           f"large (at most {KIB_LIMIT} KiB (1 PiB))"),
    ("slots", PIB // 2, f"stages: the sizes add up to {PIB + 25} slots, more than {PIB} slots (2^50)"),
    ("MB", 6 * 10**8, "stages: the sizes add up to 1200000025 MB (1200000025000000 bytes), more than 1125899906 MB "
                       "(1 PiB is 1125899906.842624 MB)"),
    ("slots", 2.5, "stages[0] (conv1).out_size: must be an integer number of slots, got 2.5"),
])
def test_chain_file_limit_in_its_unit(tmp_path: Path, unit: str, out_size: int, message: str) -> None:
    assert _cli_error(tmp_path, _chain(unit, out_size), "chain") == message


def test_chain_file_in_bytes_keeps_its_wording(tmp_path: Path) -> None:
    assert _cli_error(tmp_path, _chain(None, PIB + 1), "chain") == \
        f"stages[0] (conv1).out_size: {PIB + 1} is too large (at most {PIB} bytes (1 PiB))"
    assert _cli_error(tmp_path, _chain(None, PIB // 2), "chain") == \
        f"stages: the sizes add up to {PIB + 25} bytes, more than {PIB} (1 PiB)"
    assert _cli_error(tmp_path, _chain(None, 2.5), "chain") == \
        "stages[0] (conv1).out_size: must be an integer number of bytes, got 2.5"


# ------------------------------------------------------------------------------- the other loaders
def test_join_offload_and_pipeline_loaders_word_the_unit(tmp_path: Path) -> None:
    stage = {"fwd_time": 1.0, "bwd_time": 2.0, "out_size": 1, "tape_size": 1, "fwd_overhead": 0, "bwd_overhead": 0}
    join = {"format": "memsched.join/1", "name": "j", "meta": {"units": {"memory": "slots"}},
            "branches": [{"name": "a", "input_size": 4, "stages": [dict(stage)]},
                         {"name": "b", "input_size": 4, "stages": [dict(stage)]}],
            "loss": {"bwd_time": 1.0, "bwd_overhead": PIB + 1}}
    with pytest.raises(InputError) as err:
        Join.from_dict(join, path="j.json")
    assert str(err.value) == f"j.json: loss.bwd_overhead: {PIB + 1} is too large (at most {PIB} slots (2^50))"
    join["loss"]["bwd_overhead"] = PIB
    with pytest.raises(InputError) as err:
        Join.from_dict(join, path="j.json")
    assert str(err.value) == f"j.json: branches: the sizes add up to {PIB + 12} slots, more than {PIB} slots (2^50)"

    path = tmp_path / "c.json"
    path.write_text(json.dumps({**_chain("KiB", PIB + 1), "host_link": {"bandwidth": 1e9}}))
    want = f"{path}: stages[0] (conv1).out_size: {PIB + 1} is too large (at most {KIB_LIMIT} KiB (1 PiB))"
    with pytest.raises(InputError) as err:
        OffloadInstance.load(path)
    assert str(err.value) == want
    with pytest.raises(InputError) as err:
        pipeline_instance.load(path)
    assert str(err.value) == want


# ------------------------------------------------------------------------------- the checks themselves
def test_checks_default_to_bytes_and_take_the_unit() -> None:
    with pytest.raises(InputError) as err:
        check_number(PIB + 1, path="f", field="x", integer=True)
    assert str(err.value) == f"f: x: {PIB + 1} is too large (at most {PIB} bytes (1 PiB))"
    with pytest.raises(InputError) as err:
        check_number(PIB + 1, path="f", field="x", integer=True, unit="GiB")
    assert str(err.value) == f"f: x: {PIB + 1} is too large (at most {2**20} GiB (1 PiB))"
    with pytest.raises(InputError) as err:  # a unit that would break the line is quoted
        check_number(PIB + 1, path="f", field="x", unit="slo\nts")
    assert "\n" not in str(err.value) and str(err.value).endswith(f"at most {PIB} 'slo\\nts' (2^50))")
    with pytest.raises(InputError) as err:
        check_total(PIB + 1, "f", "x", per=1, unit="slots")
    assert str(err.value) == f"f: x: the sizes add up to {PIB + 1} slots, more than {PIB} slots (2^50)"
    with pytest.raises(InputError) as err:  # no unit given: the wording before units were named
        check_total(2**41, "f", "x", per=1024)
    assert str(err.value) == f"f: x: the sizes add up to {2**41} units of 1024 bytes each, {2**51} bytes, more than " \
                             f"{PIB} (1 PiB)"
    with pytest.raises(InputError) as err:
        check_bytes(2**41, 1024, "f", "x")
    assert str(err.value) == f"f: x: {2**41} units of the file's memory unit (1024 bytes each) is {2**51} bytes, too " \
                             f"large (at most {PIB} bytes, 1 PiB)"
    check_bytes(KIB_LIMIT, 1024, "f", "x", unit="KiB")  # exactly 1 PiB: fine
    check_total(PIB, "f", "x", unit="slots")
