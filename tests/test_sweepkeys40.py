"""A resumed sweep takes a stored row only for the same cell (solver name included), and generated
instances of a generator without ``L``, ``n`` or ``lengths`` are held to the size limits once built."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import memsched.solvers
import pytest

EXAMPLES = Path(memsched.solvers.__file__).resolve().parent / "data" / "examples"


def _sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsched", "sweep", *args, "--no-progress"], cwd=cwd,
                          capture_output=True, text=True, timeout=90)


def _generated(solver: str, *, seed: bool = False) -> str:
    return (f'name = "g"\nbudgets = ["50%", "90%"]\n[[instances]]\ngenerate = "chain"\nL = 6\n'
            f'{"seed = 0" if seed else ""}\n[[solvers]]\nname = "{solver}"\nlabel = "baseline"\n')


def _marks(listing: str) -> list[str]:
    return [line.split()[0] for line in listing.splitlines() if line.startswith(("done", "todo"))]


def _solvers(table: Path) -> set[str]:
    with open(table, newline="") as f:
        return {row["solver"] for row in csv.DictReader(f)}


def test_a_label_given_to_another_solver_is_another_cell(tmp_path: Path) -> None:
    """gen1 -> gen2: the same instance bytes (seed=0 is the default) and label, another solver."""
    (tmp_path / "gen1.toml").write_text(_generated("sqrt"))
    (tmp_path / "gen2.toml").write_text(_generated("recompute-all", seed=True))
    assert _sweep(tmp_path, "gen1.toml", "--output", "o").returncode == 0
    assert _solvers(tmp_path / "o" / "g.csv") == {"sqrt"}
    listed = _sweep(tmp_path, "gen2.toml", "--output", "o", "--list")
    assert listed.returncode == 0 and _marks(listed.stdout) == ["todo", "todo"]
    ran = _sweep(tmp_path, "gen2.toml", "--output", "o")
    assert ran.returncode == 0 and "0 resumed" in ran.stdout + ran.stderr
    assert _solvers(tmp_path / "o" / "g.csv") == {"recompute-all"}
    # the supported case: a default argument added to the generator's call, same solver: resumed
    (tmp_path / "gen3.toml").write_text(_generated("recompute-all"))
    assert _marks(_sweep(tmp_path, "gen3.toml", "--output", "o", "--list").stdout) == ["done", "done"]


def test_a_moved_folder_keeps_its_rows_but_not_for_another_solver(tmp_path: Path) -> None:
    """A folder holding the sweep file, an instance file outside the repository and the output is
    moved (supported: its rows are done); a solver renamed under the same label is not."""
    before = tmp_path / "a"
    before.mkdir()
    shutil.copy(EXAMPLES / "random10.json", before / "inst.json")
    text = 'name = "m"\nbudgets = ["50%"]\n[[instances]]\nfile = "inst.json"\n[[solvers]]\nname = "{}"\nlabel = "b"\n'
    (before / "m.toml").write_text(text.format("sqrt"))
    assert _sweep(before, "m.toml", "--output", "o").returncode == 0
    after = tmp_path / "b"
    before.rename(after)
    assert _marks(_sweep(after, "m.toml", "--output", "o", "--list").stdout) == ["done"]
    (after / "m.toml").write_text(text.format("recompute-all"))
    assert _marks(_sweep(after, "m.toml", "--output", "o", "--list").stdout) == ["todo"]
    assert _sweep(after, "m.toml", "--output", "o").returncode == 0
    assert _solvers(after / "o" / "m.csv") == {"recompute-all"}


@pytest.mark.parametrize("entry, solver, said", [
    ('generate = "graph.resnet"\nblocks = [30, 30, 30, 30]', 'name = "checkmate"',
     "2429 graph nodes, more than the 1000"),
    ('generate = "pipeline.parallel_branches"\nk = 40\nb = 40', 'name = "madpipe"\noptions = { devices = 8 }',
     "pipeline layers, more than the"),
])
@pytest.mark.parametrize("listing", [False, True])
def test_a_generated_instance_too_large_is_refused(tmp_path: Path, entry: str, solver: str, said: str,
                                                   listing: bool) -> None:
    """Sized from the built instance (no L, n or lengths): exit 2 naming instances[0].generate, and
    nothing written (no output folder, no stored instance)."""
    (tmp_path / "big.toml").write_text(f'name = "big"\nbudgets = ["50%"]\n[[instances]]\n{entry}\n'
                                       f'[[solvers]]\n{solver}\n')
    res = _sweep(tmp_path, "big.toml", "--output", "o", *(["--list"] if listing else []))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "instances[0].generate" in res.stderr and said in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "o").exists()
