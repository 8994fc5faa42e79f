"""Hunt 26 (join networks and the join DP):

1. ``memsched run siamese --batch 1 --image-size 32 --width 8 --depth 18`` (and ``triplet``) crashed
   with "internal error: ValueError: Expected more than 1 value per channel when training", exit 3:
   the join path profiled the branches without the chain path's check. A branch that cannot run at
   these sizes is now bad input (exit 2) naming the model with its sizes, the branch and the block
   (`models.join.zoo.diagnosed_join`, the chain path's `models.network.diagnosed` on each branch),
   from the command line, the Python facade and `profile_join`.
2. The join DP had no limit on the number of branches and ignored ``time_limit``: 12 branches of one
   stage at 80% never answered (its join level is O(3^k k M^2)), even with ``--time-limit 5``. A join
   whose join level would take more than `MAX_JOIN_STEPS` steps even at 100 slots is refused up front
   (11 branches or more; fewer lower the slot count), and the time limit is checked inside the DP: at
   it, the fastest heuristic's schedule (``feasible``) or ``timeout``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import join_replays, run_cli
from memsched.solvers.errors import InputError
from memsched.solvers.join import reference_peak
from memsched.solvers.join.dp import solve_join_dp
from memsched.solvers.join.generate import random_join
from memsched.solvers.result import FEASIBLE, OPTIMAL, TIMEOUT

#: the hunt's tiny encoder at batch 1: block 7 (a BasicBlock) gets a (1, 32, 2, 2) input and BatchNorm a 1x1 map
BATCH1 = ["--batch", "1", "--image-size", "32", "--width", "8", "--depth", "18"]
RUN = ["--device", "cpu", "--threads", "1", "--repeats", "1", "--time-repeats", "1", "--no-independent"]


def _branches(k: int):
    """The hunt's joins: k branches of one stage, sizes of 100-1000 bytes."""
    return random_join([1] * k, 3, size_range=(100, 1000))


@pytest.fixture
def no_join_level(monkeypatch):
    """A refusal comes up front: the join level (hours for 12 branches) must not start."""
    from memsched.solvers.join import dp

    def ran(*args, **kwargs):
        raise AssertionError("the join level ran")

    monkeypatch.setattr(dp, "join_dp", ran)


# --------------------------------------------------------------------------- 1. batch 1
@pytest.mark.parametrize(("model", "branch"), [("siamese", "branch 0 (left)"), ("triplet", "branch 0 (anchor)")])
def test_join_network_at_batch_1_is_bad_input(model: str, branch: str):
    pytest.importorskip("torch")
    res = run_cli("run", model, "--budget", "70%", *BATCH1, *RUN)
    code, err = res.code, res.err
    assert code == 2, (code, err)
    assert "internal error" not in err and len(err.strip().splitlines()) == 1, err
    assert f"MODEL: {model} {branch} with batch 1" in err, err
    assert "block 7 (BasicBlock) fails on its input of shape (1, 32, 2, 2): ValueError: Expected more than 1" in err


def test_facade_run_of_a_join_network_at_batch_1():
    pytest.importorskip("torch")
    import memsched

    with pytest.raises(InputError) as info:
        memsched.run("triplet", "50%", batch=1, image_size=32, width=8, depth=18, repeats=1, time_repeats=1)
    assert info.value.field == "model"  # Python's spelling of the argument (MODEL on the command line)
    assert "triplet branch 0 (anchor) with batch 1" in str(info.value) and "block 7 (BasicBlock)" in str(info.value)


def test_profile_join_at_batch_1_names_the_branch():
    pytest.importorskip("torch")
    from memsched.models.join.profiler import profile_join
    from memsched.models.join.zoo import build_join_model

    model = build_join_model("siamese", batch=1, image_size=32, width=8, depth=18)
    with pytest.raises(InputError, match=r"siamese branch 0 \(left\) with batch 1.*: block 7 \(BasicBlock\) fails"):
        profile_join(model, repeats=1, warmup=0)


# --------------------------------------------------------------------------- 2. branches and time limit
def test_twelve_branches_are_refused_up_front(no_join_level):
    join = _branches(12)
    budget = int(0.8 * reference_peak(join))
    with pytest.raises(InputError) as info:
        solve_join_dp(join, budget)
    err = info.value
    assert err.field == "branches"
    assert f"join {join.name!r} has 12 branches" in str(err) and "at most 10 branches" in str(err)


def test_twelve_branches_refused_on_the_command_line(tmp_path, no_join_level):
    path = tmp_path / "join12.json"
    _branches(12).save(str(path))
    res = run_cli("solve", path, "--budget", "80%", "--time-limit", "5")
    code, err = res.code, res.err
    assert code == 2, (code, res.out, err)
    assert len(err.strip().splitlines()) == 1 and "branches: join" in err and "12 branches" in err, err


def test_twelve_branches_where_store_all_fits_are_answered():
    join = _branches(12)
    res = solve_join_dp(join, reference_peak(join))
    assert res.status == OPTIMAL and "store-all fits" in res.scope


def test_ten_branches_lower_the_slot_count_eleven_are_refused(no_join_level):
    from memsched.solvers.join import dp

    for k, slots in ((8, 500), (9, 422), (10, 126)):
        join = _branches(k)
        assert dp.dp_slots(join, int(0.8 * reference_peak(join)), 500) == slots
        assert dp.join_steps(k, slots) <= dp.MAX_JOIN_STEPS
    join = _branches(11)
    with pytest.raises(InputError, match="11 branches"):
        solve_join_dp(join, int(0.8 * reference_peak(join)), slots=500)


def test_time_limit_is_honoured_on_ten_branches(tmp_path):
    """--time-limit 1 on a 10-branch join (the DP alone takes about 2 minutes): the fastest heuristic's
    schedule, ``feasible``. In a child, so that the old code (which ignored the limit) fails, not hangs."""
    join = _branches(10)
    path = tmp_path / "join10.json"
    join.save(str(path))
    code = ("import sys; from memsched.experiments.cli import main; "
            f"sys.exit(main(['solve', {str(path)!r}, '--budget', '80%', '--time-limit', '1', '--json']))")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90,
                              env=dict(os.environ))
    except subprocess.TimeoutExpired:
        pytest.fail("memsched solve --time-limit 1 on 10 branches did not answer in 90 s")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == FEASIBLE and data["timed_out"] is True, data["scope"]
    assert "did not finish within the time limit of 1 s" in data["scope"]
    assert data["peak_memory"] <= data["budget"] == int(0.8 * reference_peak(join))


def test_time_limit_without_a_heuristic_schedule_is_a_timeout(monkeypatch):
    from memsched.solvers.join import dp

    join = _branches(8)
    budget = int(0.8 * reference_peak(join))
    res = solve_join_dp(join, budget, slots=60, time_limit=0.05)  # the DP takes seconds
    assert res.status == FEASIBLE and res.details["timed_out"]
    join_replays(join, budget, res)
    monkeypatch.setattr(dp, "fastest_heuristic", lambda *a, **k: None)
    res = solve_join_dp(join, budget, slots=60, time_limit=0.05)
    assert res.status == TIMEOUT and res.schedule is None and "time limit of 0.05 s" in res.message
