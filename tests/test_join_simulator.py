"""The join simulator: a hand-computed replay, the loss's rules, first violations, schedule JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.join import load, replay, schedule_from_json, simulate, store_all_schedule
from memsched.solvers.join.simulator import JoinSchedule, JOp

JOIN_DIR = Path(__file__).resolve().parent.parent / "solvers" / "data" / "join"


@pytest.fixture
def tiny():
    return load(str(JOIN_DIR / "tiny.json"))


def test_store_all_by_hand(tiny):
    # left: x = [2,2,1], xbar = [-,4,2]; right: x = [3,2,2,1], xbar = [-,3,4,2], o_b[1] = 1; loss 1 / +1
    sim = simulate(tiny, store_all_schedule(tiny)).raise_if_invalid()
    #        F00 F01 F10 F11 F12 Loss B01 B00 B12 B11 B10
    during = [9, 11, 14, 18, 20, 23, 24, 23, 17, 17, 13]
    after = [9, 11, 14, 18, 20, 22, 21, 15, 14, 10, 5]
    assert [s.mem_during for s in sim.steps] == during
    assert [s.mem_after for s in sim.steps] == after
    assert sim.peak_memory == 24
    assert sim.makespan == pytest.approx(18.0)


def test_loss_frees_standalone_outputs_and_makes_all_gradients(tiny):
    ops = [JOp("F_ck", 0, 0), JOp("F_n", 0, 1), JOp("F_ck", 1, 0), JOp("F_n", 1, 1), JOp("F_n", 1, 2), JOp("Loss")]
    sim = simulate(tiny, ops)
    # before the loss: a_0^0 (2) + a_2^0 (1) + a_0^1 (3) + a_3^1 (1) = 7; loss: + deltas 1 + 1 + overhead 1
    assert sim.steps[-1].mem_during == 10
    assert sim.steps[-1].mem_after == 7  # the standalone outputs are replaced by their gradients
    assert not sim.valid and "incomplete" in str(sim.violation)


def test_loss_needs_every_branch(tiny):
    ops = [JOp("F_all", 0, 0), JOp("F_all", 0, 1), JOp("Loss")]
    sim = simulate(tiny, ops)
    assert sim.violation.position == 2
    assert "branch 1" in sim.violation.reason


def test_first_violations(tiny):
    assert "not resident" in simulate(tiny, [JOp("F_all", 0, 1)]).violation.reason
    assert "delta_2" in simulate(tiny, [JOp("F_all", 0, 0), JOp("F_all", 0, 1), JOp("B", 0, 1)]).violation.reason
    ops = store_all_schedule(tiny).ops
    sim = simulate(tiny, ops, budget=20)
    assert sim.violation.position == 5 and "over budget" in sim.violation.reason  # the loss: 23 > 20
    assert replay(tiny, JoinSchedule(ops, tiny.lengths), 20).violation.startswith("op #5 Loss")
    again = simulate(tiny, ops + [JOp("B", 0, 0)])
    assert "already ran" in again.violation.reason
    assert "branch 3 outside" in simulate(tiny, [JOp("F_ck", 3, 0)]).violation.reason


def test_inputs_over_budget(tiny):
    sim = simulate(tiny, store_all_schedule(tiny), budget=4)
    assert sim.violation.position == 0 and "inputs alone" in sim.violation.reason


def test_schedule_json_round_trip(tiny):
    sched = store_all_schedule(tiny)
    data = sched.to_json()
    assert data["problem"] == "join" and data["ops"][5] == {"op": "Loss"}
    assert data["ops"][0] == {"op": "F_all", "branch": 0, "stage": 0}
    again = schedule_from_json(data, tiny)
    assert again.ops == sched.ops
    wrapped = schedule_from_json({"status": "optimal", "schedule": data}, tiny)
    assert wrapped.ops == sched.ops
    short = schedule_from_json([["Fe", 1, 2], "loss", ["Bwd", 0, 1]], tiny)
    assert short.ops == [JOp("F_all", 1, 2), JOp("Loss"), JOp("B", 0, 1)]


@pytest.mark.parametrize("bad, field", [
    ([{"op": "F_ck", "branch": 2, "stage": 0}], "ops[0]"),
    ([{"op": "Loss"}, {"op": "F_ck", "branch": 0, "stage": 2}], "ops[1]"),
    ([{"op": "jump", "branch": 0, "stage": 0}], "ops[0]"),
])
def test_bad_schedules(tiny, bad, field):
    with pytest.raises(InputError) as err:
        schedule_from_json(bad, tiny, path="s.json")
    assert f"s.json: {field}" in str(err.value)


def test_per_mode_forward_overheads_are_charged_by_kind():
    from memsched.solvers.join import Join

    data = {"format": "memsched.join/1", "branches": [{"input_size": 2, "stages": [
        {"fwd_time": 1, "bwd_time": 2, "out_size": 2, "tape_size": 3, "fwd_overhead": 5, "bwd_overhead": 0,
         "fwd_overhead_all": 1, "fwd_overhead_nograd": 5}]}], "loss": {"bwd_time": 1, "bwd_overhead": 0}}
    join = Join.from_dict(data)
    all_ = simulate(join, [JOp("F_all", 0, 0)])
    ck = simulate(join, [JOp("F_ck", 0, 0)])
    assert all_.steps[0].mem_during == 2 + 3 + 1  # a_0 + tape + o_fa
    assert ck.steps[0].mem_during == 2 + 2 + 5  # a_0 + a_1 + o_fn
