"""A network refused for its blocks names the argument as the command line spells it (``MODEL``),
``model`` in Python (the messages said ``model`` on the command line too)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

FACTORY = """
import torch
import torch.nn as nn


def build(batch=2):
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 1)), torch.randn(batch, 4)


def empty(batch=2):
    return nn.Sequential(), torch.randn(batch, 4)
"""


@pytest.mark.torch
@pytest.mark.parametrize("func, text", [("build", "block 1 (ReLU) modifies its input in place"),
                                        ("empty", "the model has no blocks")])
def test_the_command_line_names_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, func: str, text: str) -> None:
    (tmp_path / "net.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    res = run_cli("profile", f"net.py:{func}", "-o", "p.json")
    assert res.code == 2, res.out + res.err
    line = res.err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("memsched profile: error: MODEL: ") and text in line, line
    assert not (tmp_path / "p.json").exists()


@pytest.mark.torch
def test_python_names_model() -> None:
    import torch
    import torch.nn as nn

    import memsched

    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 1))
    with pytest.raises(memsched.InputError) as info:
        memsched.profile((net, torch.randn(2, 4)))
    assert info.value.field == "model"
