"""Review of the session's changes: figure (g) whose every execution failed names them (it said "no run
found a schedule"); `gpu_check --replot` refuses a document lacking what its figure reads (a traceback)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from memsched.experiments.figures import render


def test_figure_g_with_only_failed_executions_names_them(tmp_path: Path) -> None:
    rows = pd.DataFrame([{"sweep": "fig_g_measured", "instance": "resnet", "problem": "chain", "solver": "rotor",
                          "budget_spec": "90%", "budget": 100, "status": "error",
                          "message": "execution failed: RuntimeError: boom; rotor answered optimal, objective 12.5"}])
    paths, note = render("g", rows, tmp_path / "g")
    assert paths == []
    assert note is not None and "found a schedule" not in note
    assert "resnet (rotor, 90%): execution failed: RuntimeError: boom" in note


@pytest.mark.parametrize("doc", [
    {"format": "memsched.gpu_check/2"},
    {"format": "memsched.gpu_check/2", "rows": "x", "device": "cpu", "torch": "2", "date": "2026-12-07"},
    {"format": "memsched.gpu_check/2", "rows": [3], "device": "cpu", "torch": "2", "date": "2026-12-07"},
    {"format": "memsched.gpu_check/2", "rows": [{"measured_peak": 1}], "device": "cpu", "torch": "2",
     "date": "2026-12-07"},
    {"format": "memsched.gpu_check/2", "rows": [{"measured_peak": 1, "model": "m", "problem": "chain",
                                                 "solver": "rotor", "budget_fraction": "half",
                                                 "memory_method": "tracker"}],
     "device": "cpu", "torch": "2", "date": "2026-12-07"},
])
def test_gpu_check_replot_refuses_what_it_cannot_draw(tmp_path: Path, doc: dict) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    run = subprocess.run([sys.executable, "-m", "memsched.experiments.gpu_check", "--replot", "--out", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0] and "Traceback" not in run.stderr
    assert not (tmp_path / "g.png").exists()
