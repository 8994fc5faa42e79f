"""A pipeline `Result.to_json()` is the command line's object (hunt "apiparity").

`memsched.solve(..., problem="pipeline").to_json()` gave ``period``, ``lower_bound`` and an exact solver's
``fast`` periods in the file's time unit (9.0 for mlp7, in ms) where ``memsched partition --json`` gives them in
seconds (0.009) under the same keys, and lacked ``period_file_units`` and ``time_unit_s``; the replay's
(`memsched.simulate`) likewise against ``memsched simulate --json``. Now both are ``partition --json``'s object
(its own `to_json`); the `period` attribute stays in the file's unit, and the JSON still replays (the partition
object inside keeps its file-unit times).
"""

from __future__ import annotations

import json
import math

import pytest

import memsched

MLP7 = memsched.data_path("pipeline", "mlp7.chain.json")
MEMORY = 11000000  # bytes per device: two stages fit, one does not
#: keys that time the run (the search log's first entries are seconds of search)
TIMING = ("solve_time_s", "log")
#: ``memsched simulate --json``'s keys that a replay's `to_json` shares (the rest: `valid`, `violation` and
#: `memory_profile` there; `status`, `schedule`, `stages` ... here)
SIMULATE_KEYS = ("problem", "period", "period_file_units", "time_unit_s", "peak_memory", "budget",
                 "weight_factor", "bandwidth", "latency")


def _untimed(out: dict) -> dict:
    return {key: value for key, value in out.items() if key not in TIMING}


@pytest.fixture(params=["madpipe", "cpsat"])
def solved(request, cli):
    """(solver, API result, the CLI's ``partition --json`` object) on mlp7, 2 devices; cpsat (exact) with a
    small time limit (it proves mlp7 at once) and the fast solvers' periods that seeded it (``fast``)."""
    solver = request.param
    result = memsched.solve(MLP7, MEMORY, solver, devices=2, problem="pipeline", time_limit=10)
    res = cli("partition", MLP7, "--devices", 2, "--memory", MEMORY, "--solver", solver, "--time-limit", 10, "--json")
    assert res.code == 0, res.err
    return solver, result, res.json()


def test_to_json_is_the_partition_json_object(solved):
    solver, result, cli = solved
    api = json.loads(json.dumps(result.to_json()))
    assert api["status"] == cli["status"] == "optimal"
    assert api["period"] == pytest.approx(0.009) and api["lower_bound"] == pytest.approx(0.009)  # seconds
    assert api["period_file_units"] == result.period == 9.0  # the attribute stays in the file's unit
    assert api["time_unit_s"] == 0.001
    if solver == "cpsat":
        assert api["fast"] and all(period == pytest.approx(0.009) for period in api["fast"].values())
        assert api["log"][-1][1] == pytest.approx(0.009)  # (search seconds, period, bound): the period in seconds
    assert _untimed(api) == _untimed(cli)  # key by key, stages and schedule included


def test_replay_to_json_matches_simulate_json(solved, tmp_path, cli):
    _, result, partition_cli = solved
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result.to_json()))
    res = cli("simulate", MLP7, path, "--json")  # the CLI reads the API's JSON (period now in seconds)
    assert res.code == 0, res.err
    sim_cli = res.json()
    for given in (result, result.to_json(), path, partition_cli):
        replay = json.loads(json.dumps(memsched.simulate(MLP7, given).to_json()))
        assert replay["status"] == "valid"
        assert {k: replay[k] for k in SIMULATE_KEYS} == {k: sim_cli[k] for k in SIMULATE_KEYS}
        assert replay["period"] == pytest.approx(0.009) and replay["period_file_units"] == 9.0
        assert [s["time"] for s in replay["stages"]] == [e["time"] for e in sim_cli["memory_profile"]]
    again = memsched.simulate(MLP7, memsched.simulate(MLP7, result.to_json()).to_json())
    assert again.period == result.period and again.to_json()["period"] == sim_cli["period"]


def test_replay_of_a_malformed_partition_has_no_infinite_period():
    gap = {"stages": [{"first_layer": 0, "last_layer": 2}, {"first_layer": 4, "last_layer": 6}]}
    replay = memsched.simulate(MLP7, gap, problem="pipeline")
    assert replay.status == "invalid" and not math.isfinite(replay.period)
    out = replay.to_json()
    assert out["period"] is None and out["period_file_units"] is None and out["time_unit_s"] == 0.001
    assert out["schedule"]["stages"][0]["time"] is None
    json.dumps(out, allow_nan=False)
