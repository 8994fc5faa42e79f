"""Pipeline results without a schedule, and 1F1B's micro-batch count in sweeps.

(1) An infeasible pipeline result (``solve``'s `Result`, its JSON, or a ``memsched partition --json``
file) given to `memsched.simulate` or `memsched.plot` says that it holds no schedule, naming
``schedule``, as the other problems' results and ``memsched simulate`` do (before, the partition
parser said "expected an object with a non-empty 'stages' list").

(2) ``micro_batches`` below ``devices`` under 1F1B (the default schedule) is refused by every
pipeline solver whatever the instance, so an instance sweep and a sweep file refuse it before any
cell runs, with the solver's message, instead of a table of ``unsupported`` rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import sweep_toml
from memsched.solvers.errors import InputError

import memsched

VGG = memsched.data_path("pipeline/vgg16-b32.graph.txt")
NO_SCHEDULE = "holds no schedule (status 'infeasible')"
TOO_FEW = "under 1F1B at least as many micro-batches as devices are needed, got 1 for 4 devices"


@pytest.fixture(scope="module")
def infeasible() -> memsched.Result:
    """madpipe on VGG-16 at 30% of its one-device peak on 4 devices: no partition fits."""
    result = memsched.solve(VGG, "30%", devices=4)
    assert result.status == "infeasible" and result.to_json()["schedule"] is None
    return result


@pytest.fixture
def partition_file(cli, tmp_path: Path) -> Path:
    """The ``memsched partition --json`` output of that infeasible run (``schedule: null``, ``stages: []``)."""
    res = cli("partition", VGG, "--devices", "4", "--memory", "30%", "--json")
    data = json.loads(res.out)
    assert data["status"] == "infeasible" and data["schedule"] is None and data["stages"] == []
    path = tmp_path / "part_inf.json"
    path.write_text(res.out)
    return path


@pytest.mark.parametrize("verb", ["simulate", "plot"])
def test_an_infeasible_results_json_holds_no_schedule(infeasible, verb):
    with pytest.raises(InputError) as err:
        getattr(memsched, verb)(VGG, infeasible.to_json())
    assert err.value.field == "schedule" and NO_SCHEDULE in str(err.value), str(err.value)


@pytest.mark.parametrize("verb", ["simulate", "plot"])
def test_an_infeasible_partition_file_holds_no_schedule(partition_file, verb):
    for schedule in (partition_file, str(partition_file), json.loads(partition_file.read_text())):
        with pytest.raises(InputError) as err:
            getattr(memsched, verb)(VGG, schedule)
        assert err.value.field == "schedule" and NO_SCHEDULE in str(err.value), str(err.value)
        assert "stages" not in str(err.value)


def test_schedule_from_json_says_so_directly(infeasible):
    from memsched.solvers.pipeline import load, schedule_from_json

    with pytest.raises(InputError) as err:
        schedule_from_json(infeasible.to_json(), load(VGG), path="r.json")
    assert err.value.field == "schedule" and str(err.value) == f"r.json: schedule: {NO_SCHEDULE}"


def test_a_partition_with_stages_is_still_read(cli, tmp_path):
    """A feasible ``partition --json`` output, and a partition whose ``schedule`` (its pipeline schedule
    type) is null next to its stages, are not taken for results without a schedule."""
    res = cli("partition", VGG, "--devices", "4", "--memory", "80%", "--json")
    assert res.code == 0, res.err
    assert memsched.simulate(VGG, json.loads(res.out)).status == "valid"
    from memsched.solvers.pipeline import load, schedule_from_json

    with pytest.raises(InputError, match="unknown schedule"):
        schedule_from_json({"stages": [{"first_layer": 0, "last_layer": 20}], "schedule": None}, load(VGG))


@pytest.mark.parametrize("verb", ["simulate", "plot"])
def test_the_cli_says_the_same(cli, partition_file, tmp_path, verb):
    extra = ["-o", tmp_path / "fig.png"] if verb == "plot" else []
    res = cli(verb, VGG, partition_file, *extra)
    assert res.code == 2 and f"{partition_file}: schedule: {NO_SCHEDULE}" in res.err, res.err
    assert not (tmp_path / "fig.png").exists()


# ----------------------------------------------------------------------------------- micro_batches
def test_solve_refuses_too_few_micro_batches():
    with pytest.raises(InputError, match=TOO_FEW) as err:
        memsched.solve(VGG, "60%", devices=4, micro_batches=1)
    assert err.value.field == "micro_batches"


@pytest.mark.parametrize("solvers", [["madpipe"], ["pipedream", "balance-time"]])
def test_an_instance_sweep_refuses_too_few_micro_batches(solvers, monkeypatch):
    ran: list[str] = []
    from memsched import api

    real = api._solve
    monkeypatch.setattr(api, "_solve", lambda *a, **k: ran.append("cell") or real(*a, **k))
    with pytest.raises(InputError, match=TOO_FEW) as err:
        memsched.sweep(VGG, ["60%", "80%"], solvers=solvers, devices=4, micro_batches=1)
    assert err.value.field == "micro_batches" and ran == []


def test_an_instance_sweep_keeps_what_the_solvers_take():
    """GPipe takes any m >= 1, and 1F1B m >= devices: those cells run."""
    gpipe = memsched.sweep(VGG, ["60%"], solvers=["madpipe"], devices=4, micro_batches=1, schedule="gpipe")
    enough = memsched.sweep(VGG, ["60%"], solvers=["madpipe"], devices=4, micro_batches=4)
    assert [r["status"] for r in gpipe.rows + enough.rows] == ["optimal", "optimal"]


def _sweep_file(tmp_path: Path, options: dict, defaults: dict | None = None) -> Path:
    path = tmp_path / "mb.toml"
    path.write_text(sweep_toml("mb", budgets=["60%"], instances=[{"file": str(VGG)}],
                               solvers=[{"name": "madpipe", "options": options}], defaults=defaults))
    return path


@pytest.mark.parametrize("options, defaults, field", [
    ({"devices": 4, "micro_batches": 1}, None, "solvers[0].options.micro_batches"),
    ({"devices": 4, "micro_batches": 1, "schedule": "1F1B"}, None, "solvers[0].options.micro_batches"),
    ({"devices": 4}, {"options": {"micro_batches": 1}}, "defaults.options.micro_batches")])
def test_a_sweep_file_refuses_too_few_micro_batches(cli, tmp_path, options, defaults, field):
    cfg = _sweep_file(tmp_path, options, defaults)
    res = cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress", "--workers", "1")
    assert res.code == 2, (res.out, res.err)
    assert res.err.strip().count("\n") == 0 and f"{field}: {TOO_FEW}" in res.err, res.err
    assert not (tmp_path / "out").exists()


def test_a_sweep_file_with_gpipe_or_enough_micro_batches_runs(tmp_path):
    from memsched.experiments.sweep import load_config

    for options in ({"devices": 4, "micro_batches": 1, "schedule": "gpipe"}, {"devices": 4, "micro_batches": 4}):
        load_config(_sweep_file(tmp_path, options))
