"""The chain file: round trips and every validation error, each naming file, stage and field."""

from __future__ import annotations

import json

import numpy as np
import pytest
from memsched.solvers.chain import Chain
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.errors import InputError


def test_round_trip(tmp_path, examples):
    for path in examples.glob("*.json"):
        chain = Chain.load(path)
        chain.save(tmp_path / "c.json")
        again = Chain.load(tmp_path / "c.json")
        for attr in ("u_f", "u_b", "x", "xbar", "o_f", "o_b"):
            assert np.array_equal(getattr(chain, attr), getattr(again, attr)), attr
        assert again.name == chain.name and again.stage_names == chain.stage_names


def test_indexing_convention(examples):
    chain = Chain.load(examples / "tiny.json")
    assert chain.length == 4
    assert list(chain.x) == [4, 4, 2, 2, 1, 0]
    assert list(chain.xbar) == [0, 8, 6, 4, 2, 0]
    assert chain.u_f[4] == 0.0 and chain.u_b[4] == 0.5  # the loss is stage L


def test_generator_is_seeded():
    a, b, c = random_chain(12, seed=3), random_chain(12, seed=3), random_chain(12, seed=4)
    assert np.array_equal(a.x, b.x) and np.allclose(a.u_f, b.u_f)
    assert not np.array_equal(a.x, c.x)
    assert np.all(a.xbar[1:-1] >= a.x[1:-1])


def _write(tmp_path, data) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def _good() -> dict:
    return Chain.homogeneous(3).to_dict()


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda d: d.pop("format"), ["format"]),
        (lambda d: d.update(format="memsched.chain/9"), ["format"]),
        (lambda d: d["stages"][1].pop("fwd_time"), ["stages[1]", "fwd_time", "missing"]),
        (lambda d: d["stages"][2].update(out_size=-5), ["stages[2]", "out_size", "non-negative"]),
        (lambda d: d["stages"][0].update(tape_size=0, out_size=3), ["stages[0]", "tape_size", "out_size"]),
        (lambda d: d["stages"][0].update(bwd_time="fast"), ["stages[0]", "bwd_time", "number"]),
        (lambda d: d["stages"][0].update(out_size=1.5), ["stages[0]", "out_size", "integer"]),
        (lambda d: d.pop("loss"), ["loss"]),
        (lambda d: d["loss"].pop("bwd_time"), ["loss.bwd_time"]),
        (lambda d: d.pop("input_size"), ["input_size"]),
        (lambda d: d.update(stages=[]), ["stages"]),
    ],
)
def test_bad_files_name_file_stage_and_field(tmp_path, mutate, words):
    data = _good()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as err:
        Chain.load(path)
    message = str(err.value)
    assert path in message and "\n" not in message
    for word in words:
        assert word in message


def test_missing_file_and_invalid_json(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        Chain.load(tmp_path / "nope.json")
    with pytest.raises(InputError, match="invalid JSON at line 1"):
        Chain.load(_write(tmp_path, "{not json"))
