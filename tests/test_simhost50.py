"""Session 50 fixes: a chain schedule on a chain file with a ``host_link``; partition's weights note; join docs.

1. `memsched simulate FILE SCHED` (and `memsched plot`, `memsched.simulate`) replayed a schedule that declares
   ``"problem": "chain"`` on a chain file with a ``host_link`` as offloading, so the answer of
   ``memsched.solve(FILE, problem="chain")`` read back with another peak, invalid at the budget it was solved
   for (and `memsched.simulate(FILE, result.schedule)` was refused). Now such a schedule replays on the chain,
   the link set aside, unless a bandwidth or a latency is given; a schedule declaring no problem is still
   replayed there as offloading.
2. `memsched partition` of a chain file without ``meta.param_sizes`` (as ``memsched profile`` writes it) charged
   no weights yet printed "weights x 4"; it now says the file gives no per-layer weights (JSON ``weights``).
3. docs/join.md lists ``fwd_time_all`` / ``fwd_time_nograd`` and the schedule's ``lengths``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import memsched

ROOT = Path(__file__).resolve().parents[1]

#: a 2-stage chain (hand-written; the store-all peak is 21 bytes, a F_ck recomputation gets 20)
CHAIN: dict[str, Any] = {
    "format": "memsched.chain/1", "name": "tiny", "input_size": 4,
    "stages": [{"name": "conv1", "fwd_time": 1.0, "bwd_time": 2.0, "out_size": 4, "tape_size": 8,
                "fwd_overhead": 0, "bwd_overhead": 0},
               {"name": "conv2", "fwd_time": 2.0, "bwd_time": 4.0, "out_size": 2, "tape_size": 6,
                "fwd_overhead": 1, "bwd_overhead": 5, "bwd_overhead_released": -3}],
    "loss": {"bwd_time": 0.5, "bwd_overhead": 0},
    "meta": {"units": {"time": "ms", "memory": "bytes"}}}
OPS = [{"op": "F_ck", "stage": 0}, {"op": "F_all", "stage": 1}, {"op": "Loss"},
       {"op": "B", "stage": 1}, {"op": "F_all", "stage": 0}, {"op": "B", "stage": 0}]


def _write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """The chain file, the same with a host link, and the schedule with and without ``problem: chain``."""
    return {"plain": _write(tmp_path, "rel.json", CHAIN),
            "linked": _write(tmp_path, "rel_hl.json", {**CHAIN, "host_link": {"bandwidth": 2000}}),
            "chain": _write(tmp_path, "s.json", {"format": "memsched.schedule/1", "problem": "chain",
                                                 "length": 2, "ops": OPS}),
            "bare": _write(tmp_path, "bare.json", {"format": "memsched.schedule/1", "length": 2, "ops": OPS})}


def _simulate(cli, *argv: Any) -> dict[str, Any]:
    res = cli("simulate", *map(str, argv), "--json")
    assert res.code == 0, res.err
    out: dict[str, Any] = json.loads(res.out)
    return out


# ---------------------------------------------------------------------------- 1. chain schedules, host link
def test_cli_replays_a_chain_schedule_on_a_linked_file_as_the_chain(cli, files):
    plain = _simulate(cli, files["plain"], files["chain"])
    linked = _simulate(cli, files["linked"], files["chain"])
    assert (plain["problem"], plain["makespan"], plain["peak_memory"]) == ("chain", 10.5, 20)
    assert (linked["problem"], linked["makespan"], linked["peak_memory"]) == ("chain", 10.5, 20)  # was offload, 25
    # a link given, or no problem declared: offloading, as before
    assert _simulate(cli, files["linked"], files["bare"])["problem"] == "offload"
    assert _simulate(cli, files["linked"], files["chain"], "--latency", "0.1")["problem"] == "offload"
    assert _simulate(cli, files["linked"], files["chain"], "--bandwidth", "1000")["problem"] == "offload"
    assert _simulate(cli, files["plain"], files["chain"], "--bandwidth", "1000")["problem"] == "offload"


def test_a_chain_answer_of_a_linked_file_replays_as_solved(cli, files, tmp_path):
    result = memsched.solve(str(files["linked"]), 21, solver="rotor", problem="chain")
    assert (result.problem, result.status, result.peak_memory) == ("chain", "optimal", 21)
    saved = _write(tmp_path, "answer.json", result.to_json())
    res = cli("simulate", str(files["linked"]), str(saved), "--budget", "21")
    assert res.code == 0, res.err  # was: "problem offload", "memory over budget: 29 > 21", exit 2
    assert res.out.startswith("problem      chain")
    out = _simulate(cli, files["linked"], saved, "--budget", "21")
    assert (out["valid"], out["makespan"], out["peak_memory"]) == (True, result.makespan, result.peak_memory)
    res = cli("plot", str(files["linked"]), str(saved), "-o", str(tmp_path / "p.png"), "--budget", "21")
    assert res.code == 0 and "INVALID" not in res.err + res.out, res.err


def test_api_replays_a_chain_answer_of_a_linked_file_as_solved(files, tmp_path):
    path = str(files["linked"])
    result = memsched.solve(path, 21, solver="rotor", problem="chain")
    saved = _write(tmp_path, "answer.json", result.to_json())
    for schedule in (result.schedule, result.to_json(), saved, str(saved), result):  # the schedule object was refused
        got = memsched.simulate(path, schedule, 21)
        assert (got.problem, got.status, got.makespan, got.peak_memory) == ("chain", "valid", 9.5, 21), schedule
    assert memsched.simulate(path, files["chain"]).peak_memory == 20
    assert memsched.simulate(path, files["bare"]).problem == "offload"
    assert memsched.simulate(path, result.to_json(), latency=0.1).problem == "offload"
    assert memsched.simulate(path, result.to_json(), bandwidth=1000).problem == "offload"
    # an `OffloadInstance` object (no file to read as a chain) keeps refusing a chain schedule object
    with pytest.raises(memsched.InputError, match="chain schedule cannot be simulated as offload"):
        memsched.simulate(memsched.load(str(files["linked"])), result.schedule)


def test_docs_state_the_rule():
    cli_md = (ROOT / "docs" / "cli.md").read_text()
    chain_md = (ROOT / "docs" / "chain.md").read_text()
    assert 'A schedule that names `"chain"` replays a chain file with a\n`host_link` as the chain' in cli_md
    row = next(line for line in chain_md.splitlines() if line.startswith("| `host_link` |"))
    assert "set aside (the file read as this chain)" in row and "`\"problem\": \"chain\"`" in row


# ---------------------------------------------------------------------------- 2. partition: no per-layer weights
def test_partition_says_a_profiled_file_gives_no_per_layer_weights(cli, tmp_path):
    profiled = _write(tmp_path, "prof.json", {**CHAIN, "meta": {**CHAIN["meta"], "parameter_bytes": 2664}})
    res = cli("partition", str(profiled), "--devices", "2", "--memory", "100%")
    assert res.code == 0, res.err
    assert "weights x" not in res.out and "no weights charged" in res.out
    line = next(line for line in res.out.splitlines() if line.startswith("weights "))
    assert "the file gives no per-layer weights, no meta.param_sizes" in line and "parameter_bytes, 2664 bytes" in line
    res = cli("partition", str(profiled), "--devices", "2", "--memory", "100%", "--json")
    out = json.loads(res.out)
    assert out["weights"].startswith("not charged (the file gives no per-layer weights") and out["weight_factor"] == 4


def test_partition_with_param_sizes_keeps_the_weight_factor(cli, tmp_path):
    sized = _write(tmp_path, "sized.json", {**CHAIN, "meta": {**CHAIN["meta"], "param_sizes": [100, 50]}})
    res = cli("partition", str(sized), "--devices", "2", "--memory", "100%")
    assert res.code == 0 and "weights x 4" in res.out and "no weights charged" not in res.out, res.err
    assert json.loads(cli("partition", str(sized), "--devices", "2", "--memory", "100%", "--json").out)["weights"] \
        == "charged"
    graph = ROOT / "solvers" / "data" / "pipeline" / "tiny-resnet.graph.txt"
    res = cli("partition", str(graph), "--devices", "2", "--memory", "100%", "--json")
    assert res.code == 0 and json.loads(res.out)["weights"] == "charged", res.err


# ---------------------------------------------------------------------------- 3. docs/join.md
def test_join_docs_list_per_mode_times_and_lengths():
    text = (ROOT / "docs" / "join.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `branches[b].stages[i].")]
    assert any("stages[i].fwd_time_all`" in row and "`.fwd_time_nograd`" in row for row in rows)
    schedule = text[text.index("## Schedule format"):text.index("## Simulator rules")]
    assert '"lengths": [2, 1]' in schedule and "the schedule is for lengths [2, 2] but the\ninstance has [2, 1]" \
        in schedule
    # the message the docs quote, on this instance (behaviour unchanged: the docs now state it)
    join = memsched.load(memsched.data_path("join", "tiny.json"))
    with pytest.raises(memsched.InputError, match=r"lengths: the schedule is for lengths \[2, 2\] but the "
                                                  r"instance has \[2, 3\]"):
        memsched.simulate(join, {"format": "memsched.schedule/1", "problem": "join", "lengths": [2, 2], "ops": []})
