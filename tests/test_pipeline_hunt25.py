"""Fixes of hunt 25 (pipeline): graph.txt node lines with parts after the fields, the interleave
heuristic's "infeasible" wording, the device of each stage in `memsched partition`'s output, the
file and field of a partition's latency without bandwidth, fractional ``meta.param_sizes``, the
``min_budget`` sentence of docs/pipeline.md and the ``max_states`` check of the DAG solvers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.pipeline import from_graph_txt, load
from memsched.solvers.pipeline.generate import random_pipeline
from memsched.solvers.registry import get_solver
from memsched.solvers.result import INFEASIBLE, OPTIMAL

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "solvers" / "data" / "pipeline"
VGG = DATA / "vgg16-b32.graph.txt"
TINY = DATA / "tiny-resnet.graph.txt"
MLP = DATA / "mlp7.chain.json"

HEAD = ("node1 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=100.000, "
        "parameter_size=0.000")
LIN = ("node{k} -- Linear -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=50.0, "
       "parameter_size=10.0")


def _graph(tail2: str = "", tail3: str = "") -> str:
    """Input node1 -> node2 -> node3, with `tail2` / `tail3` appended to the node lines."""
    return (f"{HEAD}\n{LIN.format(k=2)}{tail2}\n{LIN.format(k=3)}{tail3}\n"
            "\tnode1 -- node2\n\tnode2 -- node3\n")


# ---------------------------------------------------------------------------- 1. graph.txt trailing parts
@pytest.mark.parametrize("tail", [" -- saved_extra=100000", " -- stage_id=abc -- whatever garbage",
                                  " -- stage_id=abc", " -- stage_id=1 -- stage_id=2", " -- whatever",
                                  " -- stage_id=-1", " -- stage_id=1.5"])
def test_graph_txt_refuses_anything_but_one_stage_id_after_the_fields(tail: str) -> None:
    with pytest.raises(InputError) as err:
        from_graph_txt(_graph(tail3=tail), path="g.txt")
    text = str(err.value)
    assert text.startswith("g.txt: line 3") and "\n" not in text and "stage_id=S" in text


def test_graph_txt_stage_id_still_accepted_and_ignored() -> None:
    plain = from_graph_txt(_graph(), path="g.txt")
    tagged = from_graph_txt(_graph(" -- stage_id=0", " -- stage_id=1"), path="g.txt")
    assert tagged.params.tolist() == plain.params.tolist() and tagged.act.tolist() == plain.act.tolist()


def test_partition_cli_exit_2_on_a_misplaced_field(cli, tmp_path: Path) -> None:
    f = tmp_path / "g.txt"
    f.write_text(_graph(" -- saved_extra=100000"))
    r = cli("partition", f, "--devices", "1", "--memory", "10MB")
    assert r.code == 2 and r.out == ""
    assert f"{f}: line 2" in r.err and "saved_extra=100000" in r.err and len(r.err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- 2. interleave's failure is no proof
def _hunt_instance():
    """The instance of repro_interleave_infeasible.py (seed 4): interleave finds nothing at 502
    bytes per device on 3 devices (GPipe, m = 2) where interleave-dp finds an allocation."""
    rng = np.random.default_rng(4)
    L = int(rng.integers(2, 7))
    rng.integers(1, 4)
    bw = [None, 2e4, 5e3][int(rng.integers(0, 3))]
    return random_pipeline(rng, L, bandwidth=bw)


def test_interleave_heuristic_failure_says_it_is_no_proof() -> None:
    inst, kw = _hunt_instance(), dict(devices=3, schedule="gpipe", micro_batches=2)
    exact = get_solver("pipeline", "interleave-dp")(inst, 502, **kw)
    assert exact.status == OPTIMAL and exact.schedule is not None  # an allocation of the same scope fits
    r = get_solver("pipeline", "interleave")(inst, 502, **kw)
    assert r.schedule is None and r.status == INFEASIBLE and r.min_budget is None  # the heuristics' status
    assert r.details.get("heuristic") is True
    assert "heuristic found nothing" in r.message and "no proof" in r.message and "interleave-dp" in r.message
    assert "no optimality claim" in r.scope


def test_partition_cli_interleave_error_line_says_heuristic(cli) -> None:
    r = cli("partition", VGG, "--devices", "4", "--memory", "20%", "--solver", "interleave")
    assert r.code == 1
    line = r.err.strip()
    assert "\n" not in line and "heuristic found nothing" in line and "no proof" in line
    assert "does not compute it" not in line


def test_docs_interleave_row_states_the_heuristic_failure() -> None:
    row = next(line for line in (ROOT / "docs" / "pipeline.md").read_text().splitlines()
               if line.startswith("| `interleave` |"))
    assert "`infeasible` for this heuristic only" in row and "no proof" in row


# ---------------------------------------------------------------------------- 3. device of each stage
def test_partition_json_and_human_name_the_device_of_each_stage(cli) -> None:
    args = ("partition", VGG, "--devices", "2", "--memory", "150%", "--solver", "interleave-dp")
    d = cli(*args, "--json").json()
    device_of = d["schedule"]["device_of"]
    assert [s["device"] for s in d["stages"]] == device_of
    totals = {t["device"]: t for t in d["device_totals"]}
    assert sorted(totals) == sorted(set(device_of))
    for dev, t in totals.items():
        ks = [k for k, v in enumerate(device_of) if v == dev]
        assert t["stages"] == ks
        assert t["memory"] == sum(d["stages"][k]["memory"] for k in ks)
        assert t["load"] == pytest.approx(sum(d["stages"][k]["time"] for k in ks))
    assert max(t["memory"] for t in totals.values()) == d["peak_memory"]
    h = cli(*args, "--no-progress")
    assert h.code == 0
    header = next(line for line in h.out.splitlines() if line.lstrip().startswith("stage"))
    assert re.search(r"\bdevice\b", header)
    rows = [line.split() for line in h.out.splitlines() if re.match(r"^\s+\d+\s+\d+-\d+\s", line)]
    assert [int(row[3]) for row in rows] == device_of
    assert sum(line.startswith("device ") for line in h.out.splitlines()) == len(totals)


def test_partition_json_straight_has_no_device_key(cli) -> None:
    d = cli("partition", MLP, "--devices", "2", "--memory", "12MB", "--json").json()
    assert d["stages"] and all("device" not in s for s in d["stages"]) and "device_totals" not in d


# ---------------------------------------------------------------------------- 4. latency without bandwidth
@pytest.mark.parametrize("inner", [True, False])
def test_simulate_latency_without_bandwidth_names_file_and_field(cli, tmp_path: Path, inner: bool) -> None:
    r = cli("partition", MLP, "--devices", "2", "--memory", "12MB", "--json")
    data = r.json()
    if inner:
        data["schedule"]["latency"] = 1e-3
    else:
        data["schedule"].pop("latency")
        data["latency"] = 1e-3
    f = tmp_path / "c7.json"
    f.write_text(json.dumps(data))
    s = cli("simulate", MLP, f)
    field = "schedule.latency" if inner else "latency"
    assert s.code == 2 and s.out == ""
    assert f"{f}: {field}: a latency needs a bandwidth" in s.err


def test_simulate_latency_flag_without_bandwidth_names_the_flag(cli, tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(cli("partition", MLP, "--devices", "2", "--memory", "12MB", "--json").out)
    s = cli("simulate", MLP, f, "--latency", "0.001")
    assert s.code == 2 and "--latency: a latency needs a bandwidth" in s.err


# ---------------------------------------------------------------------------- 5. fractional param_sizes
def test_param_sizes_must_be_integers(tmp_path: Path, cli) -> None:
    d = json.loads(MLP.read_text())
    d["meta"]["param_sizes"][0] = 1000000.7
    f = tmp_path / "m.json"
    f.write_text(json.dumps(d))
    with pytest.raises(InputError) as err:
        load(f)
    assert str(err.value).startswith(f"{f}: meta.param_sizes[0]:") and "1000000.7" in str(err.value)
    r = cli("partition", f, "--devices", "2", "--memory", "20MB")
    assert r.code == 2 and "meta.param_sizes[0]" in r.err
    d["meta"]["param_sizes"][0] = 1000000.0  # an integral float counts, as for out_size
    f.write_text(json.dumps(d))
    assert load(f).params[0] == 1000000


# ---------------------------------------------------------------------------- 6. min_budget sentence
def test_budget_semantics_names_who_computes_min_budget() -> None:
    text = (ROOT / "docs" / "pipeline.md").read_text()
    section = text.split("## Budget semantics", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())
    assert "A memory-aware or exact solver that finds no partition answers" not in flat
    for name in ("madpipe", "cpsat", "dag", "dag-cpsat", "interleave-v", "interleave-dp", "interleave-cpsat"):
        assert f"`{name}`" in flat, name
    assert "leave `min_budget` unset" in flat


@pytest.mark.parametrize("name,computes", [("madpipe", True), ("cpsat", True), ("dag", True), ("dag-cpsat", True),
                                           ("interleave", False), ("interleave-v", False),
                                           ("interleave-dp", False), ("interleave-cpsat", False)])
def test_min_budget_as_documented(name: str, computes: bool) -> None:
    inst = load(MLP)
    r = get_solver("pipeline", name)(inst, 1000, devices=2, time_limit=20)
    assert r.status == INFEASIBLE and (r.min_budget is not None) == computes


# ---------------------------------------------------------------------------- 7. max_states of the DAG solvers
@pytest.mark.parametrize("name", ["dag", "dag-pipedream", "dag-cpsat"])
@pytest.mark.parametrize("value", [2.5, "3", "abc", float("nan"), 0, True])
def test_dag_solvers_refuse_max_states_that_is_no_count(name: str, value: object) -> None:
    with pytest.raises(InputError, match="max_states: must be an integer >= 1"):
        get_solver("pipeline", name)(load(TINY), 10**12, devices=2, max_states=value)


def test_dag_solvers_take_integer_max_states() -> None:
    r = get_solver("pipeline", "dag")(load(TINY), 10**12, devices=2, max_states=np.int64(3))
    assert r.status == OPTIMAL
