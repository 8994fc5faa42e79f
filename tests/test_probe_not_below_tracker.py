"""The allocator's overheads are never below the tracker's: a block that multiplies its own
intermediate by a Python scalar (`y.mul_(2)`: the scalar becomes an 8-byte tensor the tracker does
not count in the tape) lowered the probe's o_b by 8 bytes, and a CPU run's allocator peak came out
8 bytes above the allocator prediction on every schedule, store-all included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

NET = '''
import torch, torch.nn as nn

class Inner(nn.Module):
    def __init__(self, d):
        super().__init__(); self.l = nn.Linear(d, d)
    def forward(self, x):
        y = self.l(x); y.mul_(2)
        return torch.tanh(y)

def build(batch=64, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 16), Inner(16), nn.Linear(16, 8)), torch.randn(batch, 16)
'''


def test_probe_overheads_are_at_least_the_trackers_and_the_run_stays_within(tmp_path: Path, cli) -> None:
    (tmp_path / "inner_net.py").write_text(NET)
    spec = f"{tmp_path / 'inner_net.py'}:build"
    out = tmp_path / "inner.json"
    assert cli("profile", spec, "--threads", "1", "--repeats", "1", "-o", out).code == 0
    data = json.loads(out.read_text())
    tracker = data["meta"]["overheads"]["tracker"]
    assert all(s["bwd_overhead"] >= t for s, t in zip(data["stages"], tracker["bwd_overhead"]))
    res = cli("run", spec, "--budget", "100%", "--threads", "1", "--slots", "0", "--repeats", "1", "--json")
    assert res.code == 0, res.err
    run = res.json()
    assert run["measured"]["independent_peak"] <= run["predicted"]["peak_memory"]
