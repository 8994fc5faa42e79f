"""The referee's tie: a model's makespan within REL_TOL of a fast solver's but above it is not returned; the answer
takes the fast solver's schedule (never worse than a fast solver's, exactly), the model's status standing."""

from __future__ import annotations

import json

import pytest

#: a 6-layer chain whose times differ in the 1e-10 (relative): HiGHS's optimal partition is madpipe's period plus
#: 1.2e-10 relative (stages 0-1, 2-3, 4-5 against madpipe's 0-2, 3-4, 5)
FWD = [0.020000000010000005, 0.020000000006000003, 0.020000000002000005, 0.030000000009, 0.03, 0.03000000003]
BWD = [
    0.020000000004000006, 0.020000000000000004, 0.020000000000000004, 0.020000000000000004, 0.03, 0.030000000005999998,
]
CHAIN = {"format": "memsched.chain/1", "name": "t48", "input_size": 0,
         "stages": [{"name": f"l{i}", "fwd_time": f, "bwd_time": b, "out_size": 1000, "tape_size": 1000,
                     "fwd_overhead": 0, "bwd_overhead": 0} for i, (f, b) in enumerate(zip(FWD, BWD, strict=True))],
         "loss": {"bwd_time": 0, "bwd_overhead": 0}, "meta": {"param_sizes": [0, 1000, 1000, 1000, 1000, 1000]}}


@pytest.mark.parametrize("solver", ["milp", "dag-milp"])
def test_the_answer_is_never_above_a_fast_solvers_period(cli, tmp_path, solver):
    path = tmp_path / "t48.json"
    path.write_text(json.dumps(CHAIN))
    res = cli("partition", path, "--devices", "3", "--memory", "1GB", "--solver", solver, "--option", "backend=highs",
              "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["status"] == "optimal"
    assert all(out["period"] <= fast for fast in out["fast"].values()), (out["period"], out["fast"])
    assert out["lower_bound"] <= out["period"]
    assert out["model_objective"] == pytest.approx(out["period"], rel=1e-9)  # in seconds, as every period
    assert "slower by" in out["message"]
