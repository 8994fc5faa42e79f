"""``memsched run`` on instance files whose sizes are not in bytes, and on bad recorded sizes (hunt 28).

1. An instance file's sizes are in its ``meta.units.memory``; the network runs in bytes and its
   sizes are compared with the file's, so a file in another unit (KiB, slots) is bad input naming
   the file and ``meta.units.memory``. Before, its sizes were read as bytes (a budget of "1KiB"
   met by a chain that needs 992 KiB).
2. A bad size recorded in an instance file's meta is bad input naming the file and the field
   (``meta.batch``), not a command-line option the caller never gave (``--batch``).

The network is a tiny factory whose input at batch 2 is 1 KiB (2 x 128 float32), so a chain or
graph rewritten in KiB (sizes rounded up) records that input exactly (the old code refused it only
through that input check, as 1 byte, or ran it as bytes).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

FACTORY = """
import torch
from torch import nn


def build(batch: int = 2, width: int = 128, depth: int = 2):
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(128, width), nn.ReLU())]
    blocks += [nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth)]
    return nn.Sequential(*blocks), torch.randn(batch, 128)
"""
SPEC = "net.py:build"
RUN = ("--time-repeats", "1", "--no-independent", "--json")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tmp_path` as the working folder, holding the factory ``net.py`` (meta.model "net.py:build")."""
    (tmp_path / "net.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _kib(n: Any) -> int:
    return int(math.ceil(int(n) / 1024))


def _profiled_chain(cli: Any, here: Path) -> dict[str, Any]:
    res = cli("profile", SPEC, "--batch", "2", "--repeats", "1", "--device", "cpu", "-o", here / "p.json")
    assert res.code == 0, res.err
    return json.loads((here / "p.json").read_text())


def _chain_in_kib(data: dict[str, Any]) -> dict[str, Any]:
    """The chain file `data` (bytes) with every size in KiB, rounded up (its input, 1 KiB, exactly)."""
    assert data["input_size"] == 1024
    out = json.loads(json.dumps(data))
    out["input_size"] = 1
    for stage in out["stages"]:
        for key in ("out_size", "tape_size", "fwd_overhead", "bwd_overhead", "fwd_overhead_all",
                    "fwd_overhead_nograd"):
            if key in stage:
                stage[key] = _kib(stage[key])
    out["loss"]["bwd_overhead"] = _kib(out["loss"]["bwd_overhead"])
    out["meta"].pop("overheads", None)  # the tracker's own values: not needed here
    out["meta"]["units"] = {**out["meta"].get("units", {}), "memory": "KiB"}
    return out


def _write(path: Path, data: dict[str, Any]) -> Path:
    """`data` written to `path`; its name, relative to the working folder (`here`), as messages show it."""
    path.write_text(json.dumps(data))
    return Path(path.name)


# ---------------------------------------------------------------------------- 1. units
def _refused(res: Any, name: str, field: str, unit: str) -> None:
    assert res.code == 2, res.err
    assert res.err.startswith(f"memsched run: error: {name}: {field}: "), res.err
    assert repr(unit) in res.err and len(res.err.strip().splitlines()) == 1


def test_run_refuses_a_chain_in_kib(cli: Any, here: Path) -> None:
    """`memsched solve` reads the file in KiB (a budget of "1KiB" is infeasible); the run, which would
    read its numbers as bytes, refuses it naming meta.units.memory."""
    kib = _write(here / "kib.json", _chain_in_kib(_profiled_chain(cli, here)))
    assert cli("solve", kib, "--budget", "1KiB", "--json").json()["status"] == "infeasible"
    for budget in ("1KiB", "100%"):
        _refused(cli("run", kib, "--budget", budget, *RUN), "kib.json", "meta.units.memory", "KiB")


def test_run_refuses_a_graph_in_kib(cli: Any, here: Path) -> None:
    res = cli("export-graph", SPEC, "--cost", "measured", "--batch", "2", "--repeats", "1", "-o", here / "g.json")
    assert res.code == 0, res.err
    data = json.loads((here / "g.json").read_text())
    meta = data["graph"]["meta"]
    assert meta["input_size"] == 1024 and meta["units"]["memory"] == "bytes"
    for node in data["nodes"]:
        node["cost_ram"] = _kib(node["cost_ram"])
        if node.get("workspace") is not None:
            node["workspace"] = _kib(node["workspace"])
    meta["input_size"] = 1
    meta["units"]["memory"] = "KiB"
    gkib = _write(here / "gkib.json", data)
    assert cli("solve", gkib, "--budget", "1KiB", "--json").json()["status"] == "infeasible"
    _refused(cli("run", gkib, "--budget", "1KiB", *RUN), "gkib.json", "graph.meta.units.memory", "KiB")


def test_run_refuses_a_memory_unit_that_is_no_byte_unit(cli: Any, here: Path) -> None:
    """A chain or graph whose meta.units.memory is no byte unit ("furlongs", "slots") has no run:
    one line naming the file and the field, exit 2. Before: it ran, its sizes read as bytes."""
    data = _profiled_chain(cli, here)
    data["meta"]["units"]["memory"] = "furlongs"
    furl = _write(here / "furl.json", data)
    _refused(cli("run", furl, "--budget", "100%", *RUN), "furl.json", "meta.units.memory", "furlongs")

    graph = {"directed": True, "multigraph": False,
             "graph": {"name": "g", "meta": {"units": {"memory": "slots"}, "model": SPEC, "batch": 2}},
             "nodes": [{"id": 0, "cost_cpu": 1.0, "cost_ram": 4}], "links": []}
    slots = _write(here / "slots.json", graph)
    _refused(cli("run", slots, "--budget", "100%", *RUN), "slots.json", "graph.meta.units.memory", "slots")


# ---------------------------------------------------------------------------- 2. recorded sizes
@pytest.mark.parametrize(("key", "value", "message"), [
    ("batch", "two", "must be an integer in 1..16777216, got 'two'"),
    ("dtype", "float99", "unknown dtype 'float99'"),
    ("dropout", 2, "must be a probability in 0..1, got 2"),
    ("image_size", "abc", "expected N or HxW pixels, got 'abc'"),
    ("granularity", "atoms", "unknown granularity 'atoms'"),
])
def test_a_bad_recorded_size_names_the_file_and_field(cli: Any, here: Path, key: str, value: Any,
                                                      message: str) -> None:
    """meta.batch "two", an unknown meta.dtype...: one line naming the file and ``meta.<key>``, exit 2,
    before anything is built. Before: it blamed ``--batch`` / ``--dtype``, never given, without the file."""
    data = _profiled_chain(cli, here)
    data["meta"][key] = value
    bad = _write(here / "bad.json", data)
    res = cli("run", bad, "--budget", "100%", *RUN)
    assert res.code == 2
    assert res.err.startswith(f"memsched run: error: bad.json: meta.{key}: {message}")
    assert len(res.err.strip().splitlines()) == 1


def test_a_bad_recorded_size_in_python_names_the_file(here: Path) -> None:
    """`models.run.run` with an instance file of the zoo's lstm whose meta.seq_len is 0: the
    `InputError` names the file and ``meta.seq_len`` (before: ``seq_len`` / ``--seq-len``)."""
    from memsched.models.run import run

    import memsched

    chain = {"format": "memsched.chain/1", "name": "lstm", "input_size": 128,
             "stages": [{"fwd_time": 1.0, "bwd_time": 1.0, "out_size": 8, "tape_size": 8, "fwd_overhead": 0,
                         "bwd_overhead": 0}],
             "loss": {"bwd_time": 0.0, "bwd_overhead": 0},
             "meta": {"model": "lstm", "batch": 2, "seq_len": 0, "width": 16}}
    path = _write(here / "lstm.json", chain)
    with pytest.raises(memsched.InputError) as err:
        run("lstm", "100%", instance=str(path), time_repeats=1, independent=False)
    assert err.value.path == "lstm.json" and err.value.field == "meta.seq_len"
    assert "must be an integer in 1..1000000, got 0" in err.value.message
