"""Chain and join replays under a budget: memory over the budget is reported (the first op over it)
but the replay goes on, so makespan and peak memory are the whole schedule's (as the offloading and
graph simulators report, and as `memory_profile` lists); a broken rule still ends the replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_file as _write
from memsched.solvers.chain import Chain, Op, Schedule
from memsched.solvers.chain import simulate as chain_simulate
from memsched.solvers.join import load as load_join
from memsched.solvers.join import schedule_from_json as join_schedule_from_json
from memsched.solvers.join import simulate as join_simulate

CHAIN = {
    "format": "memsched.chain/1", "input_size": 4,
    "stages": [
        {"name": "conv1", "fwd_time": 1.0, "bwd_time": 2.0, "out_size": 4, "tape_size": 8,
         "fwd_overhead": 0, "bwd_overhead": 0},
        {"name": "conv2", "fwd_time": 2.0, "bwd_time": 4.0, "out_size": 2, "tape_size": 6,
         "fwd_overhead": 1, "bwd_overhead": 1},
    ],
    "loss": {"bwd_time": 0.5, "bwd_overhead": 0},
}
# memory while each op runs: 8, 15, 16, 21, 16, 20; ends at 10.5
CHAIN_OPS = [("F_ck", 0), ("F_all", 1), ("Loss", 2), ("B", 1), ("F_all", 0), ("B", 0)]
CHAIN_SCHEDULE = {"format": "memsched.schedule/1", "problem": "chain", "length": 2,
                  "ops": [{"op": k, "stage": i} if k != "Loss" else {"op": k} for k, i in CHAIN_OPS]}

JOIN = {
    "format": "memsched.join/1", "name": "tiny-join",
    "branches": [
        {"name": "left", "input_size": 2, "stages": [
            {"name": "l1", "fwd_time": 1, "bwd_time": 2, "out_size": 2, "tape_size": 4,
             "fwd_overhead": 0, "bwd_overhead": 0},
            {"name": "l2", "fwd_time": 1, "bwd_time": 2, "out_size": 1, "tape_size": 2,
             "fwd_overhead": 0, "bwd_overhead": 0}]},
        {"name": "right", "input_size": 3, "stages": [
            {"name": "r1", "fwd_time": 2, "bwd_time": 3, "out_size": 3, "tape_size": 5,
             "fwd_overhead": 1, "bwd_overhead": 0}]},
    ],
    "loss": {"bwd_time": 1, "bwd_overhead": 1},
}
JOIN_SCHEDULE = {"format": "memsched.schedule/1", "problem": "join", "ops": [
    {"op": "F_all", "branch": 0, "stage": 0}, {"op": "F_all", "branch": 0, "stage": 1},
    {"op": "F_all", "branch": 1, "stage": 0}, {"op": "Loss"},
    {"op": "B", "branch": 0, "stage": 1}, {"op": "B", "branch": 0, "stage": 0},
    {"op": "B", "branch": 1, "stage": 0}]}




@pytest.fixture
def chain(tmp_path: Path) -> Chain:
    return Chain.load(str(_write(tmp_path, "chain.json", CHAIN)))


@pytest.fixture
def join(tmp_path: Path):
    return load_join(str(_write(tmp_path, "join.json", JOIN)))


def _ops() -> Schedule:
    return Schedule([Op(k, i) for k, i in CHAIN_OPS], 2)


def test_chain_over_budget_replays_the_whole_schedule(chain):
    free = chain_simulate(chain, _ops())
    assert free.valid and free.makespan == pytest.approx(10.5) and free.peak_memory == 21
    sim = chain_simulate(chain, _ops(), 20)
    assert not sim.valid
    assert str(sim.violation) == "op #3 B(1): memory over budget: 21 > 20 bytes while it runs"
    assert sim.makespan == pytest.approx(10.5) and sim.peak_memory == 21
    assert [s.mem_during for s in sim.steps] == [s.mem_during for s in free.steps]
    cut = sim.before_violation()  # the replay as far as the first op over the budget
    assert len(cut.steps) == 3 and cut.makespan == pytest.approx(3.5) and cut.peak_memory == 16
    assert cut.violation == sim.violation


def test_chain_first_violation_kept_and_broken_rule_still_stops(chain):
    sim = chain_simulate(chain, _ops(), 15)  # F_all(1) at 16 is the first over the budget
    assert sim.violation is not None and sim.violation.position == 2 and "16 > 15" in sim.violation.reason
    assert len(sim.steps) == 6 and sim.peak_memory == 21
    broken = [Op(k, i) for k, i in CHAIN_OPS[:4]] + [Op("B", 0)]  # B(0) without the tape abar_1
    sim = chain_simulate(chain, broken, 20)
    assert sim.violation is not None and sim.violation.position == 3 and "over budget" in sim.violation.reason
    assert len(sim.steps) == 4 and sim.makespan == pytest.approx(7.5)  # ends before B(0)
    incomplete = chain_simulate(chain, [Op(k, i) for k, i in CHAIN_OPS[:4]], 20)
    assert incomplete.violation is not None and incomplete.violation.position == 3
    assert len(incomplete.steps) == 4


def test_chain_input_over_budget_replays_the_whole_schedule(chain):
    sim = chain_simulate(chain, _ops(), 3)
    assert sim.violation is not None and "input a_0 alone (4) exceeds the budget 3" in sim.violation.reason
    assert sim.makespan == pytest.approx(10.5) and sim.peak_memory == 21
    assert sim.before_violation().steps == []


def test_join_over_budget_replays_the_whole_schedule(join):
    schedule = join_schedule_from_json(JOIN_SCHEDULE, join)
    free = join_simulate(join, schedule)
    assert free.valid and free.makespan == pytest.approx(12.0) and free.peak_memory == 22
    sim = join_simulate(join, schedule, 20)
    assert sim.violation is not None and sim.violation.position == 3 and "21 > 20" in sim.violation.reason
    assert sim.makespan == pytest.approx(12.0) and sim.peak_memory == 22
    cut = sim.before_violation()
    assert cut.makespan == pytest.approx(4.0) and cut.peak_memory == 17


@pytest.mark.parametrize("problem", ["chain", "join"])
def test_cli_simulate_budget_reports_whole_replay(cli, tmp_path: Path, problem: str):
    instance, schedule = (CHAIN, CHAIN_SCHEDULE) if problem == "chain" else (JOIN, JOIN_SCHEDULE)
    res = cli("simulate", _write(tmp_path, "i.json", instance), _write(tmp_path, "s.json", schedule),
              "--budget", "20", "--json")
    assert res.code == 2
    out = json.loads(res.out)
    assert out["valid"] is False and "over budget" in out["violation"]
    profile = out["memory_profile"]
    assert out["makespan"] == pytest.approx(profile[-1]["end"])
    assert out["peak_memory"] == max(r["mem_during"] for r in profile)
