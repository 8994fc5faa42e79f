"""experiments/bench_offload_fixed_order.py: the two exact offload-only solvers (``cpsat``, ``milp``) side by side.

1. On a tiny grid (L = 3, one seed, 5 s) it writes the CSV with the documented columns, a row per cell and
   solver (cpsat, milp, pofo, offload-prefix), and cpsat and milp have the same makespan wherever both proved
   optimality (the same model); the summary lines are printed.
2. An ``--out`` under a plain file is refused before any work: one line naming --out, exit 2.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import call_main
from memsched.experiments import bench_offload_fixed_order as bench

COLUMNS = ["L", "seed", "budget", "solver", "status", "makespan", "bound", "time_s", "load_1min"]


def test_tiny_grid_writes_the_columns_and_the_exact_optima_agree(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fixed.csv"
    code, stdout, err = call_main(bench.main, ["--lengths", "3", "--seeds", "1", "--time-limit", "5",
                                               "--out", str(out)], capsys)
    assert code == 0, err
    with out.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        assert reader.fieldnames == COLUMNS
    cells = {(r["L"], r["seed"], r["budget"]) for r in rows}
    assert cells and all(r["L"] == "3" and r["seed"] == "0" for r in rows)
    for cell in cells:
        assert sorted(r["solver"] for r in rows if (r["L"], r["seed"], r["budget"]) == cell) == \
            sorted(["cpsat", "milp", "pofo", "offload-prefix"])
    both = 0
    for cell in cells:
        exact = {r["solver"]: r for r in rows if (r["L"], r["seed"], r["budget"]) == cell
                 and r["solver"] in ("cpsat", "milp")}
        if all(r["status"] == "optimal" for r in exact.values()):
            both += 1
            assert float(exact["cpsat"]["makespan"]) == pytest.approx(float(exact["milp"]["makespan"])), cell
            assert exact["cpsat"]["bound"] != "" and exact["milp"]["bound"] != ""
    assert both > 0  # whole ticks: the tiny chains are proven by both
    assert "cpsat" in stdout and "milp" in stdout and "all agree" in stdout, stdout


def test_unwritable_out_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    def forbidden(*_: object, **__: object) -> None:
        pytest.fail("the grid ran despite a bad --out")

    monkeypatch.setattr(bench, "run_one", forbidden)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    out = blocker / "x.csv"
    code, _, err = call_main(bench.main, ["--lengths", "3", "--seeds", "1", "--out", str(out)], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("bench_offload_fixed_order: error: ") and "--out" in lines[0] and str(out) in lines[0]
    assert blocker.read_text() == "not a folder\n"
