"""A solver's refusal of an instance field names the file, as the loader's errors do: the join
DP's branch-count limit (field ``branches``) on the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memsched.solvers.join.generate import homogeneous_join


def test_the_join_dp_names_the_file_when_it_refuses_too_many_branches(tmp_path: Path) -> None:
    path = tmp_path / "h12.json"
    homogeneous_join([3] * 12, x=1, xbar=2, name="H12").save(str(path))
    out = tmp_path / "schedule.json"
    proc = subprocess.run([sys.executable, "-m", "memsched", "solve", str(path), "--budget", "70%", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith(f"memsched solve: error: {path}: branches: join 'H12' has 12 branches"), lines[0]
    assert not out.exists()


def test_an_option_refused_by_a_solver_is_not_given_the_file(tmp_path: Path) -> None:
    """``--slots`` beyond the join DP's tables is the option's error, not the file's."""
    path = tmp_path / "h10.json"
    homogeneous_join([3] * 10, x=1000, xbar=2000, name="H10").save(str(path))
    proc = subprocess.run([sys.executable, "-m", "memsched", "solve", str(path), "--budget", "70%", "--slots", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr  # the tables at exact sizes are too large
    assert proc.stderr.strip().splitlines()[-1].startswith("memsched solve: error: --slots: "), proc.stderr
