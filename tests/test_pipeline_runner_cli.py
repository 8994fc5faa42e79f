"""The pipeline runner's documented command line (``python -m memsched.models.pipeline.runner``)
runs a 2-stage pipeline on gloo and prints predicted against measured as JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")


@pytest.mark.torch
@pytest.mark.slow
def test_runner_module_command_runs_two_stages(tmp_path):
    # run as ``-m``, the rank worker is defined on __main__, which the spawned ranks do not import
    cmd = [sys.executable, "-m", "memsched.models.pipeline.runner", "--devices", "2", "--layers", "4",
           "--width", "32", "--batch", "8", "--micro-batches", "2", "--steps", "1", "--device", "cpu"]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["grad_check"] is True and out["device"] == "cpu"
    assert len(out["measured"]["saved_activations_peak"]) == 2 == len(out["predicted"]["stash"])
    assert out["measured"]["step_time_s"] > 0
