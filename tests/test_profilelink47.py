"""`memsched run MODEL --problem offload --bandwidth B --profile-file F` saves the offloading instance it ran,
with its host link, so that `memsched run F` solves the same problem (it was saved as a bare chain, which runs
as the chain problem); the chain problem's file stays a plain chain."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

pytest.importorskip("torch")

SIZES = ["--batch", "2", "--image-size", "32", "--width", "4", "--threads", "1", "--repeats", "1",
         "--time-repeats", "1"]


def test_offload_profile_keeps_its_link_and_runs_as_offload(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    res = run_cli("run", "resnet18", "--problem", "offload", "--bandwidth", "1GB/s", "--latency", "0.001",
                  "--budget", "100%", *SIZES, "--profile-file", str(path), "--json")
    assert res.code == 0, res.err
    assert json.loads(path.read_text())["host_link"] == {"bandwidth": 1e9, "latency": 0.001}
    again = run_cli("run", str(path), "--budget", "100%", "--threads", "1", "--time-repeats", "1", "--json")
    assert again.code == 0, again.err
    assert again.json()["problem"] == "offload"


def test_chain_profile_has_no_link(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    res = run_cli("run", "resnet18", "--budget", "100%", *SIZES, "--profile-file", str(path))
    assert res.code == 0, res.err
    assert "host_link" not in json.loads(path.read_text())
