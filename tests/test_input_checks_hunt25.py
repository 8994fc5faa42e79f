"""Input checks of chains built in Python, numpy solver options and the offload link's size unit (hunt 25)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memsched.experiments.commands import _checks
from memsched.solvers.chain import Chain
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.errors import InputError
from memsched.solvers.offload.instance import OffloadInstance


def _arrays(chain: Chain) -> dict[str, Any]:
    return {k: getattr(chain, k).copy() for k in ("u_f", "u_b", "x", "xbar", "o_f", "o_b")}


def _big_tapes() -> Chain:
    """A small chain whose tapes are larger than the outputs (xbar[i] = 2 x[i])."""
    return Chain.homogeneous(5, u_f=1.0, u_b=2.0, x=10)


# --------------------------------------------------------------------------- 1. Chain(...) checks its arrays
@pytest.mark.parametrize(("array", "index", "value", "field"), [
    ("x", 3, -1, "x[3]"),
    ("u_b", 2, -1.0, "u_b[2]"),
    ("u_f", 2, math.nan, "u_f[2]"),
    ("u_f", 2, math.inf, "u_f[2]"),
    ("u_b", 5, math.inf, "u_b[5]"),
    ("xbar", 3, 1, "xbar[3]"),
    ("o_f", 1, -3, "o_f[1]"),
    ("o_b", 5, -1, "o_b[5]"),
    ("x", 2, 2.5, "x[2]"),
    ("xbar", 2, math.nan, "xbar[2]"),
])
def test_chain_built_in_python_refuses_bad_values_naming_the_entry(array: str, index: int, value: float,
                                                                   field: str) -> None:
    kw = _arrays(_big_tapes())
    arr = kw[array].astype(float) if isinstance(value, float) else kw[array]
    arr[index] = value
    kw[array] = arr
    with pytest.raises(InputError) as err:
        Chain(**kw)
    assert err.value.field == field, str(err.value)
    assert "\n" not in str(err.value)


def test_chain_refuses_wrong_lengths_as_input_error() -> None:
    kw = _arrays(_big_tapes())
    kw["xbar"] = kw["xbar"][:-1]
    with pytest.raises(InputError) as err:
        Chain(**kw)
    assert err.value.field == "xbar" and "length 7" in str(err.value)


def test_file_and_python_refuse_the_same_value() -> None:
    chain = _big_tapes()
    data = chain.to_dict()
    data["stages"][2]["bwd_time"] = -1.0
    with pytest.raises(InputError, match=r"stages\[2\].*bwd_time"):
        Chain.from_dict(data, path="c.json")
    kw = _arrays(chain)
    kw["u_b"][2] = -1.0
    with pytest.raises(InputError, match=r"u_b\[2\]: must be a non-negative finite time"):
        Chain(**kw)


def test_internally_built_chains_stay_valid() -> None:
    chain = random_chain(12, 3)
    assert chain.discretised(7.5).length == 12
    assert chain.with_mode_times(chain.u_f, chain.u_f * 0.5).has_mode_times()
    assert chain.held() is chain
    floats = {k: np.asarray(v, dtype=float) for k, v in _arrays(chain).items()}  # whole floats are sizes too
    again = Chain(**floats)
    assert again.x.dtype == np.int64 and np.array_equal(again.x, chain.x)
    same = Chain(**_arrays(chain))
    assert same.o_fa is same.o_f and same.o_bh is same.o_b  # one array without per-mode values


def test_chain_check_catches_an_edit_in_place() -> None:
    chain = _big_tapes()
    chain.check()
    chain.u_f[2] = math.nan
    with pytest.raises(InputError, match=r"u_f\[2\]"):
        chain.check()
    chain = _big_tapes()
    chain.o_b[3] = -5  # o_b is o_bh here (no early release): a negative held overhead
    with pytest.raises(InputError, match=r"o_b\[3\]"):
        chain.check()


def test_offload_instance_refuses_a_chain_edited_in_place() -> None:
    chain = _big_tapes()
    chain.x[3] = -1
    with pytest.raises(InputError, match=r"x\[3\]"):
        OffloadInstance(chain, 1e9)


# --------------------------------------------------------------------------- 2. numpy numbers as options
@pytest.mark.parametrize(("kind", "key", "value"), [
    ("int", "segments", np.int64(3)),
    ("int", "workers", np.int32(2)),
    ("int", "table_budget", np.int64(10**6)),
    ("float", "scale", np.float32(0.5)),
    ("float", "scale", np.int64(2)),
    ("float", "scale", np.float64(1.5)),
])
def test_option_checks_accept_numpy_numbers(kind: str, key: str, value: Any) -> None:
    assert _checks.option_type_error(kind, key, value) is None
    plain = _checks.plain_option(kind, value)
    assert type(plain) is (int if kind == "int" else float) and plain == value


@pytest.mark.parametrize(("kind", "value"), [("int", True), ("int", np.float64(3.0)), ("int", np.int64(0)),
                                             ("float", False), ("float", np.float64(math.nan)),
                                             ("float", np.float64(-1.0))])
def test_option_checks_still_refuse_bools_and_out_of_range(kind: str, value: Any) -> None:
    assert _checks.option_type_error(kind, "segments", value) is not None


def test_check_options_hands_the_solver_plain_numbers() -> None:
    options: dict[str, Any] = {"segments": np.int64(3)}
    _checks.check_options("chain", "periodic", options)
    assert type(options["segments"]) is int and options["segments"] == 3


# --------------------------------------------------------------------------- 3. offload sizes in the chain's unit
def _tiny(memory: str | None) -> Chain:
    chain = Chain.homogeneous(3, x=4)
    if memory is not None:
        chain.meta = {"units": {"time": "ms", "memory": memory}}
    return chain


def test_transfer_time_scales_by_the_memory_unit() -> None:
    in_bytes = OffloadInstance(_tiny("bytes"), 1e9)
    in_kib = OffloadInstance(_tiny("KiB"), 1e9)
    in_mb = OffloadInstance(_tiny("MB"), 1e9)
    default = OffloadInstance(_tiny(None), 1e9)
    assert in_bytes.transfer_time(1) == pytest.approx(1e-9 * 1e3)
    assert default.transfer_time(1) == in_bytes.transfer_time(1)
    assert in_kib.transfer_time(1) == pytest.approx(1024 * 1e-9 * 1e3)
    assert in_mb.transfer_time(3) == pytest.approx(3e6 * 1e-9 * 1e3)


def test_offload_refuses_a_memory_unit_that_is_no_byte_unit() -> None:
    with pytest.raises(InputError) as err:
        OffloadInstance(_tiny("floats"), 1e9)
    assert err.value.field == "meta.units.memory"


def test_offload_file_in_kib_times_transfers_in_bytes(tmp_path: Path) -> None:
    data = _tiny("KiB").to_dict()
    data["host_link"] = {"bandwidth": 1024.0, "latency": 0.0}
    path = tmp_path / "kib.json"
    path.write_text(json.dumps(data))
    inst = OffloadInstance.load(path)
    assert inst.transfer_time(1) == pytest.approx(1e3)  # 1 KiB at 1 KiB/s: one second, in ms
    data["meta"]["units"]["memory"] = "words"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="meta.units.memory") as err:
        OffloadInstance.load(path)
    assert str(path) in str(err.value)
