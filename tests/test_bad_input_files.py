"""Bad input in the files the commands read besides instances: pipeline partition files
(`memsched simulate`), sweep files and their options (`memsched sweep`) and sweep tables
(`memsched figures`). Each case is exit 2 with one line on stderr naming the file (or option)
and the field, never a traceback or an internal error (exit 3), and nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import sweep_toml

ROOT = Path(__file__).resolve().parent.parent
MLP7 = ROOT / "solvers" / "data" / "pipeline" / "mlp7.chain.json"


def one_line_error(res: Any, *mentions: str) -> str:
    """`res` is exit 2 with one stderr line that names each of `mentions`; returns the line."""
    assert res.code == 2, (res.code, res.err)
    assert "Traceback" not in res.err and "internal error" not in res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    for m in mentions:
        assert m in lines[0], (m, lines[0])
    return lines[0]


# ------------------------------------------------------------------ pipeline partition files
@pytest.fixture(scope="module")
def partition() -> dict[str, Any]:
    """The bare ``memsched.partition/1`` object of `memsched partition --json` (its ``schedule``)."""
    from conftest import run_cli

    res = run_cli("partition", MLP7, "--devices", "2", "--memory", "100%", "--json")
    assert res.code == 0, res.err
    part = res.json()["schedule"]
    assert part["format"] == "memsched.partition/1" and "problem" not in part
    return part


def test_a_bare_partition_simulates(cli, tmp_path, partition):
    path = tmp_path / "part.json"
    path.write_text(json.dumps(partition))
    res = cli("simulate", MLP7, path, "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert out["problem"] == "pipeline" and out["valid"]
    assert out["period_file_units"] == pytest.approx(partition["period"])
    assert out["peak_memory"] == partition["peak_memory"]


def _stage(k: int, key: str, value: Any):
    return lambda d: d["stages"][k].__setitem__(key, value)


PARTITION_CASES = {
    "devices-string": (lambda d: d.update(devices="2"), "devices"),
    "devices-bool": (lambda d: d.update(devices=True), "devices"),
    "devices-zero": (lambda d: d.update(devices=0), "devices"),
    "micro-batches-string": (lambda d: d.update(schedule="gpipe", micro_batches="x"), "micro_batches"),
    "micro-batches-negative": (lambda d: d.update(schedule="gpipe", micro_batches=-3), "micro_batches"),
    "micro-batches-huge": (lambda d: d.update(schedule="gpipe", micro_batches=10**30), "micro_batches"),
    "micro-batches-float": (lambda d: d.update(schedule="gpipe", micro_batches=4.5), "micro_batches"),
    "first-layer-string": (_stage(0, "first_layer", "0"), "stages[0].first_layer"),
    "last-layer-negative": (_stage(1, "last_layer", -1), "stages[1].last_layer"),
    "last-layer-missing": (lambda d: d["stages"][1].pop("last_layer"), "stages[1].last_layer"),
    "replicas-float": (_stage(1, "replicas", 1.5), "stages[1].replicas"),
    "replicas-bool": (_stage(1, "replicas", True), "stages[1].replicas"),
    "replicas-huge": (_stage(1, "replicas", 10**7), "stages[1].replicas"),
    "stage-not-object": (lambda d: d["stages"].__setitem__(0, [0, 2]), "stages[0]"),
}


@pytest.mark.parametrize("cid", PARTITION_CASES)
def test_bad_partition_fields(cli, tmp_path, partition, cid):
    change, field = PARTITION_CASES[cid]
    data = json.loads(json.dumps(partition))
    change(data)
    path = tmp_path / "part.json"
    path.write_text(json.dumps(data))
    one_line_error(cli("simulate", MLP7, path), str(path), f": {field}: ")
    data["problem"] = "pipeline"  # the same with the problem named
    path.write_text(json.dumps(data))
    one_line_error(cli("simulate", MLP7, path), str(path), f": {field}: ")


# ------------------------------------------------------------------ sweep files
def _sweep(tmp_path: Path, *, defaults: dict[str, Any] | None = None, instances: list[dict[str, Any]] | None = None,
           solvers: list[Any] | None = None, **top: Any) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(sweep_toml("grid", budgets=["50%", "100%"], defaults=defaults or {"slots": 100, "time_limit": 5},
                               instances=instances or [{"example": "tiny"}],
                               solvers=solvers or ["rotor", "store-all"], **top))
    return path


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300, 0, -1])
def test_sweep_time_limit_is_checked_as_on_the_command_line(cli, tmp_path, value):
    path = _sweep(tmp_path, defaults={"slots": 100, "time_limit": value})
    one_line_error(cli("sweep", path, "--list", "--output", tmp_path / "out"), str(path), "defaults.time_limit")
    assert not (tmp_path / "out").exists()


def test_sweep_slots_are_capped_as_on_the_command_line(cli, tmp_path):
    path = _sweep(tmp_path, solvers=[{"name": "rotor", "slots": 10**12}])
    one_line_error(cli("sweep", path, "--list", "--output", tmp_path / "out"), str(path), "solvers[0].slots",
                   "1000000000")


def test_sweep_repeats_are_capped(cli, tmp_path):
    path = _sweep(tmp_path, repeats=10**9)
    one_line_error(cli("sweep", path, "--list", "--output", tmp_path / "out"), str(path), "repeats", "1000")


@pytest.mark.parametrize("instance, solvers, field", [
    ({"generate": "chain", "L": 100000}, ["rotor", "store-all"], "instances[0].L"),
    ({"generate": "graph", "n": 1500}, ["checkmate"], "instances[0].n"),
    ({"generate": "graph", "n": 2500}, ["sqrt"], "instances[0].n"),
    ({"generate": "join", "lengths": [600, 600]}, ["cpsat"], "instances[0].lengths"),
    ({"generate": "join", "lengths": [6, True]}, ["cpsat"], "instances[0].lengths[1]"),
])
def test_sweep_generated_instances_have_the_size_limits_of_files(cli, tmp_path, instance, solvers, field):
    path = _sweep(tmp_path, instances=[instance], solvers=solvers)
    one_line_error(cli("sweep", path, "--list", "--output", tmp_path / "out"), str(path), field)


def test_sweep_size_limits_spare_the_solvers_that_skip_or_scale(cli, tmp_path):
    path = _sweep(tmp_path, instances=[{"generate": "chain", "L": 1200}],
                  solvers=["store-all", {"name": "rotor", "max_length": 50}])
    res = cli("sweep", path, "--list", "--output", tmp_path / "out")
    assert res.code == 0, res.err
    assert "store-all" in res.out and "skipped" in res.out


def test_sweep_output_that_is_a_file(cli, tmp_path):
    path = _sweep(tmp_path)
    existing = tmp_path / "existing_file.json"
    existing.write_text("{}")
    one_line_error(cli("sweep", path, "--output", existing, "--no-progress"), str(existing), "--output",
                   "is a file, expected a folder")
    assert existing.read_text() == "{}"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a Linux /proc")
def test_sweep_output_that_cannot_be_made(cli, tmp_path):
    path = _sweep(tmp_path)
    one_line_error(cli("sweep", path, "--output", "/proc/memsched-nowhere", "--no-progress"),
                   "/proc/memsched-nowhere", "--output")


def test_sweep_bad_scheduler_address_before_any_work(cli, tmp_path):
    path = _sweep(tmp_path)
    out = tmp_path / "out"
    one_line_error(cli("sweep", path, "--output", out, "--scheduler", "garbage", "--fresh", "--no-progress"),
                   "--scheduler", "garbage")
    assert not out.exists()  # nothing made, no journal discarded


# ------------------------------------------------------------------ sweep tables
def test_figures_truncated_table_row(cli, tmp_path):
    results = tmp_path / "results"
    (results / "fig_a_chains").mkdir(parents=True)
    table = results / "fig_a_chains" / "fig_a_chains.csv"
    table.write_text("sweep,key,instance,solver,status,objective,budget\n"
                     "fig_a_chains,k1,resnet,rotor,ok\n"
                     "fig_a_chains,k2,resnet,rotor,ok,3.0,100\n")
    one_line_error(cli("figures", "--results", results, "--out", tmp_path / "figs", "--only", "a"), str(table),
                   ": line 2: ")
    assert not (tmp_path / "figs").exists()


def test_figures_results_that_is_a_file(cli, tmp_path):
    existing = tmp_path / "existing_file.json"
    existing.write_text("{}")
    one_line_error(cli("figures", "--results", existing), str(existing), "--results", "is a file, expected a folder")
