"""The GPU accuracy check also runs on CPU with tiny models."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from memsched.models import gpu_check  # noqa: E402

torch.set_num_threads(1)


def test_gpu_check_runs_on_cpu_tiny(tmp_path):
    out = tmp_path / "check.json"
    code = gpu_check.main(["--device", "cpu", "--tiny", "--out", str(out), "--repeats", "1", "--time-repeats", "1"])
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "memsched.gpu_check/1" and doc["size"] == "tiny"
    assert doc["summary"]["grad_check"] is True
    models = {r["model"] for r in doc["rows"]}
    assert models == {"resnet18", "gpt2"}
    solvers = {r["solver"] for r in doc["rows"] if "measured_peak" in r}
    assert {"store-all", "periodic"} <= solvers
    for r in doc["rows"]:
        if "measured_peak" in r:
            assert r["measured_peak"] <= 1.01 * r["predicted_peak"] + 4096
            assert r["measured_ms"] > 0 and r["predicted_ms"] > 0
