"""`memsched run` on a chain timed in counted work (``--cost flops``: MFLOP): the text and the
JSON give the predicted makespan in MFLOP, and no time ratio (no clock measures MFLOP); on a
chain in another time unit the ratio converts the makespan to ms."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from memsched.models.run import time_ratio  # noqa: E402


def test_time_ratio_converts_the_instance_unit_to_ms():
    assert time_ratio("ms", 10.0, 5.0) == pytest.approx(2.0)
    assert time_ratio("s", 10.0, 0.005) == pytest.approx(2.0)
    assert time_ratio("us", 10.0, 5000.0) == pytest.approx(2.0)
    assert time_ratio("MFLOP", 10.0, 5.0) is None
    assert time_ratio("ms", None, 5.0) is None


def test_run_of_a_flops_chain_reports_mflop(cli, tmp_path):
    import json

    chain = tmp_path / "lstm_flops.json"
    sizes = ["--batch", "2", "--seq-len", "4", "--width", "8"]
    assert cli("profile", "lstm", *sizes, "--cost", "flops", "-o", chain).code == 0
    res = cli("run", "lstm", "--chain", chain, *sizes, "--budget", "80%", "--time-repeats", "1",
              "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["units"]["time"] == "MFLOP" and out["ratio"]["time"] is None
    text = cli("run", "lstm", "--chain", chain, *sizes, "--budget", "80%", "--time-repeats", "1")
    assert "MFLOP" in text.out.splitlines()[1]  # "predicted: makespan ... MFLOP, peak ..."
