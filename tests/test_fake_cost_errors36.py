"""A factory whose block fails under a counted cost model (fake tensors) is bad input with one
line on stderr: torch's fake-tensor log of the failing op (a 19-line traceback) is silenced."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

FACTORY = """
import torch
from torch import nn


def fails():
    return nn.Sequential(nn.Linear(8, 8), nn.Linear(9, 2)), torch.randn(4, 8)
"""


@pytest.mark.parametrize("command", [["profile", "--cost", "flops"], ["export-graph"]])
def test_failing_block_under_fake_tensors_is_one_line(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "facs.py").write_text(FACTORY)
    out = tmp_path / "x.json"
    proc = subprocess.run([sys.executable, "-m", "memsched.experiments.cli", command[0], "facs.py:fails",
                           *command[1:], "-o", str(out)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "block 1" in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()


def test_the_fake_tensor_logger_is_put_back() -> None:
    import logging

    from memsched.models.costs import shape_exact_model

    logger = logging.getLogger("torch._subclasses.fake_tensor")
    before = logger.level
    with shape_exact_model():
        assert logger.getEffectiveLevel() > logging.CRITICAL
    assert logger.level == before
