"""Four defects a review of session 40's changes found: an offloading schedule inside a result
named its fields ``schedule.schedule.FIELD``; ``bench_offload --out a.b.csv`` wrote its figure as
``a.png`` (so a quick table named ``offload_tradeoff.quick.csv`` replaced the committed figure);
``memory_gb=None`` (the default) was refused by the solvers that take no ``memory_gb``; and
``memsched partition`` refused ``--option memory_gb`` without naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from memsched.solvers.errors import InputError

import memsched

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "examples" / "tiny.json")


def _memsched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsched", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def test_an_offloading_result_names_schedule_fields_once(tmp_path: Path) -> None:
    solved = _memsched("solve", TINY, "--bandwidth", "1GB/s", "--budget", "90%", "--solver", "pofo", "--json")
    assert solved.returncode == 0, solved.stderr
    data = json.loads(solved.stdout)
    data["schedule"]["format"] = "memsched.schedule/9"
    path = tmp_path / "off.json"
    path.write_text(json.dumps(data))
    instance = memsched.load(TINY, bandwidth="1GB/s")
    with pytest.raises(InputError) as err:
        memsched.simulate(instance, str(path))
    assert err.value.field == "schedule.format", str(err.value)
    proc = _memsched("simulate", TINY, str(path), "--bandwidth", "1GB/s")
    assert proc.returncode == 2 and ": schedule.format: " in proc.stderr and "schedule.schedule" not in proc.stderr


def test_bench_offload_writes_its_figure_beside_a_dotted_out(tmp_path: Path) -> None:
    out = tmp_path / "offload_tradeoff.quick.csv"
    proc = subprocess.run([sys.executable, "-m", "memsched.experiments.bench_offload", "--quick", "--chains", TINY,
                           "--bandwidths", "1e10", "--out", str(out)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "offload_tradeoff.quick.csv", "offload_tradeoff.quick.pdf", "offload_tradeoff.quick.png"]


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_memory_gb_none_keeps_the_default(solver: str) -> None:
    res = memsched.solve(TINY, "90%", solver=solver, memory_gb=None, time_limit=5)
    assert res.status == "optimal"


def test_partition_names_memory_gb_when_a_cpsat_model_refuses_it() -> None:
    proc = _memsched("partition", "examples/cnn12.json", "--devices", "2", "--memory", "10GB", "--solver", "cpsat",
                     "--option", "memory_gb=1")
    assert proc.returncode == 2
    assert "error: --option memory_gb: " in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
