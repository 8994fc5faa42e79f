"""Graph problem: networks and graph files the executor cannot run as plain training are refused.

- A forward that updates a buffer in place (``self.s.mul_(2.0)``) ran once while fx traced it and never in a
  graph step: the grad check compared against another state (exit 0). Now bad input at export and plan time.
- A graph file run against a network with the same node names at other widths was accepted and predicted
  another network's memory. Now bad input naming the file and the node.
- ``--budget 0%`` with ``--profile-file`` profiled and wrote the file before refusing the budget.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import one_line_refusal, run_cli
from torch import nn

NET = '''
import torch, torch.nn as nn

class M(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.l1 = nn.Linear(w, w); self.l2 = nn.Linear(w, w)
        self.register_buffer("s", torch.ones(w))
    def forward(self, x):
        h1 = torch.tanh(self.l1(x))
        {update}
        return h1 * (self.l2(x) * self.s)

def build(batch=4, width=4, seed=0):
    torch.manual_seed(seed)
    w = {scale} * width
    return nn.Sequential(nn.Linear(width, w), M(w), nn.Linear(w, 2)), torch.randn(batch, width)
'''


def _factory(tmp_path: Path, *, update: str = "pass", scale: int = 1) -> str:
    """Write the network factory (a buffer update line `update`, hidden width `scale` x width); its spec."""
    path = tmp_path / "net.py"
    path.write_text(NET.format(update=update, scale=scale))
    return f"{path}:build"


class _Scaling(nn.Module):
    """Multiplies its buffer by 2 in every forward (plain training: 2.0 after one step)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("s", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.s.mul_(2.0)
        return self.lin(x) * self.s


def test_a_run_of_a_forward_that_updates_a_buffer_in_place_is_refused(tmp_path: Path) -> None:
    spec = _factory(tmp_path, update="self.s.mul_(2.0)")
    res = run_cli("run", spec, "--problem", "graph", "--budget", "100%", "--solver", "checkpoint-all")
    line = one_line_refusal(res, "buffer s")
    assert "in place" in line and "grad check" not in res.out


def test_export_refuses_a_buffer_update_and_writes_nothing(tmp_path: Path) -> None:
    spec = _factory(tmp_path, update="self.s[:2].add_(1.0)")
    out = tmp_path / "g.json"
    one_line_refusal(run_cli("export-graph", spec, "--out", out), "buffer s")
    assert not out.exists()


def test_the_refusal_leaves_the_buffer_as_it_was() -> None:
    from memsched.models.graph.export import export_training_graph
    from memsched.solvers.errors import InputError

    block = _Scaling()
    with pytest.raises(InputError, match="buffer s"):
        export_training_graph([block, nn.Linear(4, 2)], example_input=torch.randn(3, 4), loss_fn=lambda o, t: o.sum())
    assert block.s.tolist() == [1.0] * 4


def test_a_graph_file_run_against_a_network_that_updates_a_buffer_is_refused(tmp_path: Path) -> None:
    """The graph of the same network without the update has the same node names: the plan refuses."""
    spec = _factory(tmp_path)
    graph = tmp_path / "g.json"
    assert run_cli("export-graph", spec, "--out", graph).code == 0
    _factory(tmp_path, update="self.s.mul_(2.0)")
    one_line_refusal(run_cli("run", graph, "--budget", "100%", "--solver", "checkpoint-all"), "buffer s")


@pytest.mark.parametrize("ram", ["output", "tape"])
def test_a_graph_file_of_other_widths_is_refused_naming_the_file_and_node(tmp_path: Path, ram: str) -> None:
    spec = _factory(tmp_path)
    graph = tmp_path / "g.json"
    assert run_cli("export-graph", spec, "--ram", ram, "--out", graph).code == 0
    ok = run_cli("run", graph, "--budget", "90%", "--solver", "checkmate")
    assert ok.code == 0, ok.err
    _factory(tmp_path, scale=2)  # the same node names, hidden widths doubled
    line = one_line_refusal(run_cli("run", graph, "--budget", "90%", "--solver", "checkmate"), "g.json")
    assert "node 0.linear" in line and "output of 64 bytes" in line and "outputs 128 bytes" in line


@pytest.mark.parametrize("budget", ["0%", "0.0%"])
def test_a_zero_share_is_refused_before_profiling(tmp_path: Path, budget: str) -> None:
    spec = _factory(tmp_path)
    profile = tmp_path / "pf.json"
    res = run_cli("run", spec, "--problem", "graph", f"--budget={budget}", "--profile-file", profile)
    one_line_refusal(res, "--budget")
    assert not profile.exists()
