"""`memsched simulate` and `memsched plot` name the schedule file when it holds no schedule (a result
of an infeasible run), before reading the instance: on an offloading result the instance check used
to ask for a host bandwidth first, naming the (correct) instance file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.parametrize("command", ["simulate", "plot"])
def test_a_result_without_schedule_is_blamed_on_its_file(cli, examples: Path, tmp_path: Path, command: str) -> None:
    res = cli("solve", examples / "cnn12.json", "--bandwidth", "12GB/s", "--budget", "1%", "--json")
    assert res.code == 1
    data = json.loads(res.out)
    assert data["problem"] == "offload" and data["schedule"] is None
    sched = tmp_path / "oi.json"
    sched.write_text(res.out)
    extra = ["-o", str(tmp_path / "oi.png")] if command == "plot" else []
    out = cli(command, examples / "cnn12.json", sched, *extra)
    assert out.code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1
    assert f"{sched}: schedule: holds no schedule (status 'infeasible')" in lines[0]
    assert not (tmp_path / "oi.png").exists()
