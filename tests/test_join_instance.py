"""The join file format memsched.join/1: loading, round trip, and rejections naming file/branch/stage/field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from memsched.solvers.errors import InputError
from memsched.solvers.formats import detect_problem, load_instance
from memsched.solvers.join import Join, load, reference_peak
from memsched.solvers.join.generate import homogeneous_join, random_join

JOIN_DIR = Path(__file__).resolve().parent.parent / "solvers" / "data" / "join"


def test_examples_load_and_are_detected():
    for path in sorted(JOIN_DIR.glob("*.json")):
        assert detect_problem(path) == "join"
        problem, join = load_instance(path)
        assert problem == "join" and isinstance(join, Join) and join.k >= 2
        assert reference_peak(join) > join.input_total()


def test_tiny_fields():
    join = load(str(JOIN_DIR / "tiny.json"))
    assert join.lengths == [2, 3]
    assert join.input_total() == 5
    assert join.loss_time == 1.0 and join.loss_overhead == 1
    left, right = join.branches
    assert list(left.x) == [2, 2, 1, 0] and list(left.xbar) == [0, 4, 2, 0]
    assert list(right.o_b) == [0, 1, 0, 0]  # the branch's own loss entries are zero
    assert left.u_b[-1] == 0.0


def test_round_trip(tmp_path):
    join = random_join([3, 5, 2], seed=4, overhead=0.5, loss_overhead=3)
    path = tmp_path / "j.json"
    join.save(path)
    again = Join.load(path)
    assert again.to_dict() == join.to_dict()
    assert json.loads(path.read_text())["format"] == "memsched.join/1"
    hom = homogeneous_join([4, 4])
    assert Join.from_dict(hom.to_dict()).lengths == [4, 4]


def _write(tmp_path, data) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def good() -> dict:
    return json.loads((JOIN_DIR / "tiny.json").read_text())


@pytest.mark.parametrize("mutate, expect", [
    (lambda d: d["branches"][1]["stages"][2].pop("fwd_time"), ["branches[1] (right).stages[2] (r3).fwd_time",
                                                             "missing"]),
    (lambda d: d["branches"][0]["stages"][1].update(out_size=-1), ["branches[0] (left).stages[1] (l2).out_size",
                                                                 "non-negative"]),
    (lambda d: d["branches"][1]["stages"][0].update(tape_size=1), ["branches[1] (right).stages[0] (r1).tape_size",
                                                                 "tape_size 1 < out_size 2"]),
    (lambda d: d["branches"][0]["stages"][0].update(out_size=1.5), ["stages[0] (l1).out_size", "integer"]),
    (lambda d: d["branches"][1].pop("input_size"), ["branches[1] (right).input_size", "missing"]),
    (lambda d: d["branches"][0].update(stages=[]), ["branches[0] (left).stages", "non-empty"]),
    (lambda d: d.update(branches=[]), ["branches", "non-empty"]),
    (lambda d: d["loss"].pop("bwd_time"), ["loss.bwd_time", "missing"]),
    (lambda d: d.pop("loss"), ["loss"]),
    (lambda d: d["branches"][0]["stages"][0].update(bwd_time="fast"), ["l1).bwd_time", "must be a number"]),
    (lambda d: d["branches"][1]["stages"][0].update(fwd_overhead_all=3), ["(r1).fwd_overhead",
                                                                        "must be the larger of"]),
    (lambda d: d["branches"][1]["stages"][0].update(fwd_overhead_nograd=-1), ["(r1).fwd_overhead_nograd",
                                                                            "non-negative"]),
])
def test_bad_files_name_file_branch_stage_field(tmp_path, good, mutate, expect):
    data = copy.deepcopy(good)
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as err:
        load(path)
    msg = str(err.value)
    assert msg.startswith(path)
    for part in expect:
        assert part in msg


def test_wrong_format_tag(tmp_path, good):
    good["format"] = "memsched.join/9"
    path = _write(tmp_path, good)
    with pytest.raises(InputError, match="format"):
        load(path)


def test_missing_file_and_bad_json(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load(str(tmp_path / "nope.json"))
    bad = tmp_path / "b.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="invalid JSON"):
        load(str(bad))


def test_discretised_rounds_up():
    join = random_join([2, 2], seed=1, loss_overhead=5)
    d = join.discretised(3.0)
    for a, b in zip(join.branches, d.branches):
        assert all(int(v) * 3 >= int(u) for u, v in zip(a.x, b.x))
    assert d.loss_overhead == 2


def _saved_and_loaded(join: Join, path) -> Join:
    """`join` written to `path` and read back; the file round trip keeps every field."""
    join.save(path)
    again = Join.load(path)
    assert again.to_dict() == join.to_dict()
    return again


def test_per_mode_overheads_round_trip_and_old_files(tmp_path):
    join = random_join([3, 2], seed=6, size_range=(1, 9), overhead=1.5, mode_overheads=True, loss_overhead=2)
    assert any(c.has_mode_overheads() for c in join.branches)
    path = tmp_path / "modes.json"
    again = _saved_and_loaded(join, path)
    for a, b in zip(join.branches, again.branches):
        assert list(a.o_fa) == list(b.o_fa) and list(a.o_fn) == list(b.o_fn)
        d = b.discretised(2.0)  # discretising keeps the modes (rounded up)
        assert all(int(v) * 2 >= int(u) for u, v in zip(b.o_fn, d.o_fn))
    stages = json.loads(path.read_text())["branches"][0]["stages"]
    assert any("fwd_overhead_all" in st for st in stages) or not join.branches[0].has_mode_overheads()
    old = load(str(JOIN_DIR / "tiny.json"))  # a file without the optional fields: o_fa = o_fn = o_f
    for c in old.branches:
        assert not c.has_mode_overheads() and list(c.o_fa) == list(c.o_f)
        assert all("fwd_overhead_all" not in st for br in old.to_dict()["branches"] for st in br["stages"])


def test_per_mode_times_round_trip_and_old_files(tmp_path):
    join = random_join([3, 2], seed=7, size_range=(1, 9), mode_times=True)
    assert all(c.has_mode_times() for c in join.branches)
    path = tmp_path / "times.json"
    again = _saved_and_loaded(join, path)
    for a, b in zip(join.branches, again.branches):
        assert list(a.u_fa) == list(b.u_fa) and list(a.u_fn) == list(b.u_fn)
        assert list(b.discretised(2.0).u_fn) == list(b.u_fn)  # times are not discretised
    assert all("fwd_time_nograd" in st for st in json.loads(path.read_text())["branches"][1]["stages"])
    old = load(str(JOIN_DIR / "tiny.json"))
    assert not any(c.has_mode_times() for c in old.branches)
    assert all("fwd_time_all" not in st for br in old.to_dict()["branches"] for st in br["stages"])
    data = join.to_dict()  # fwd_time must be the larger of the two: one-line error naming the branch stage
    data["branches"][1]["stages"][0]["fwd_time"] += 1.0
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"branches\[1\].*stages\[0\].*fwd_time"):
        Join.load(path)
