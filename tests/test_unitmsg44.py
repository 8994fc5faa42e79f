"""Sizes named in the instance's memory unit (``meta.units.memory``), not as bytes: rotor-offload's infeasible
message names the unit of its smallest peak, rotor's ``table_budget`` is a budget in that unit (its range, 1 PiB,
converted into it, and its message naming it), and the slot size detail is ``slot_size`` in that unit (it was
``slot_bytes``). Each case is a file in MB or kB against its twin in bytes (the same sizes, in bytes)."""

from __future__ import annotations

import pytest
from conftest import one_line_refusal, run_cli, write_file
from memsched.solvers.units import MAX_BYTES

import memsched

# (fwd_time, bwd_time, out_size, tape_size, fwd_overhead, bwd_overhead) per stage; sizes in a unit scaled below
_STAGES = [(1.0, 2.0, 4, 8, 0, 0), (2.0, 4.0, 2, 6, 1, 1), (1.5, 3.0, 3, 7, 0, 1), (0.5, 1.0, 2, 5, 1, 0)]


def _chain_file(tmp_path, name: str, unit: str, scale: int, *, link: bool = False):
    """A 4-stage chain file whose sizes are the sizes above x `scale`, in memory unit `unit`; with `link`
    an offloading instance (a 2 GB/s host link)."""
    stages = [{"name": f"s{i}", "fwd_time": f, "bwd_time": b, "out_size": o * scale, "tape_size": t * scale,
               "fwd_overhead": fo * scale, "bwd_overhead": bo * scale}
              for i, (f, b, o, t, fo, bo) in enumerate(_STAGES)]
    data = {"format": "memsched.chain/1", "name": "c", "input_size": 4 * scale, "stages": stages,
            "loss": {"bwd_time": 0.5, "bwd_overhead": 0}, "meta": {"units": {"time": "ms", "memory": unit}}}
    if link:
        data["host_link"] = {"bandwidth": 2e9, "latency": 1e-5}
    return write_file(tmp_path, name, data)


# --------------------------------------------------------------------------- 1. rotor-offload's message
def test_rotor_offload_infeasible_message_names_the_memory_unit(tmp_path):
    mb = _chain_file(tmp_path, "off_MB.json", "MB", 1, link=True)
    twin = _chain_file(tmp_path, "off_B.json", "bytes", 10**6, link=True)
    res = run_cli("solve", mb, "--budget", "15", "--solver", "rotor-offload", "--json")
    assert res.code == 1, res.err
    out = res.json()
    peak = out["smallest_peak"]
    assert out["status"] == "infeasible" and peak == 21
    assert f"peak at {peak} MB or more" in out["message"] and "bytes" not in out["message"], out["message"]
    assert f"smallest feasible budget: {out['min_budget']} MB" in res.err
    # the twin in bytes: the same peak, in bytes
    r = memsched.solve(twin, "15MB", "rotor-offload")
    assert r.raw.details["smallest_peak"] == peak * 10**6
    assert f"peak at {peak * 10**6} bytes or more" in r.raw.message


# --------------------------------------------------------------------------- 2. table_budget in the memory unit
def test_table_budget_is_in_the_memory_unit_like_a_plain_budget(tmp_path):
    kb = _chain_file(tmp_path, "c_kB.json", "kB", 1000)
    twin = _chain_file(tmp_path, "c_B.json", "bytes", 10**6)
    r_kb = memsched.solve(kb, 24000, "rotor", table_budget=30000)  # 24 MB, the table's 30 MB
    r_b = memsched.solve(twin, 24 * 10**6, "rotor", table_budget=30 * 10**6)
    assert r_kb.raw.details["table_budget"] == 30000 and r_b.raw.details["table_budget"] == 30 * 10**6
    assert r_kb.raw.details["table_slots"] == r_b.raw.details["table_slots"] == 400
    assert r_kb.raw.objective == pytest.approx(r_b.raw.objective)


def test_table_budget_range_is_1_pib_in_the_memory_unit(tmp_path):
    kb = _chain_file(tmp_path, "c_kB.json", "kB", 1000)
    twin = _chain_file(tmp_path, "c_B.json", "bytes", 10**6)
    high = MAX_BYTES // 1000  # 1 PiB in kB, rounded down
    with pytest.raises(memsched.InputError) as err:
        memsched.solve(kb, 24000, "rotor", table_budget=high + 1)
    text = str(err.value)
    assert text.startswith("table_budget: ") and "kB" in text and f"1..{high}" in text, text
    assert "number of bytes" not in text, text
    res = run_cli("solve", kb, "--budget", "24000", "--option", f"table_budget={high + 1}")
    line = one_line_refusal(res, "--option table_budget")
    assert "kB" in line and f"1..{high}" in line, line
    # the same number in bytes is within 1 PiB, and the top of the kB range is accepted
    assert memsched.solve(twin, 24 * 10**6, "rotor", table_budget=high + 1).found
    assert memsched.solve(kb, 24000, "rotor", table_budget=high).found
    # a file in bytes keeps the command line's words and range
    with pytest.raises(memsched.InputError, match=f"must be a number of bytes, an integer in 1..{MAX_BYTES}"):
        memsched.solve(twin, 24 * 10**6, "rotor", table_budget=MAX_BYTES + 1)


# --------------------------------------------------------------------------- 3. slot_size
@pytest.mark.parametrize("table", [False, True])
def test_rotor_slot_size_is_in_the_memory_unit(tmp_path, table):
    kb = _chain_file(tmp_path, "c_kB.json", "kB", 1000)
    twin = _chain_file(tmp_path, "c_B.json", "bytes", 10**6)
    extra = {"table_budget": 30000} if table else {}
    d_kb = memsched.solve(kb, 24000, "rotor", **extra).raw.details
    d_b = memsched.solve(twin, 24 * 10**6, "rotor", **{k: v * 1000 for k, v in extra.items()}).raw.details
    top = 30000 if table else 24000
    assert d_kb["slot_size"] == pytest.approx(top / 500) and d_b["slot_size"] == pytest.approx(top * 1000 / 500)
    assert "slot_bytes" not in d_kb and "slot_bytes" not in d_b


def test_pofo_slot_size_is_in_the_memory_unit(tmp_path):
    kb = _chain_file(tmp_path, "off_kB.json", "kB", 1000, link=True)
    res = run_cli("solve", kb, "--budget", "24MB", "--solver", "pofo", "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert out["budget"] == 24000 and out["slot_size"] == pytest.approx(48.0) and "slot_bytes" not in out
