"""The papers' graph benchmark script on a small stand-in file (Moccasin's files are not committed)."""

from __future__ import annotations

import csv

from memsched.experiments import bench_papers_graphs as bench
from memsched.solvers.graph import generate


def test_bench_runs_every_solver_and_exact_is_never_worse(tmp_path):
    generate.random_layered(12, 2).save(tmp_path / "random_layered_n100_stand-in.json")
    out = tmp_path / "out.csv"
    assert bench.main(["--graphs", str(tmp_path), "--instances", "RL100", "--fractions", "0.8",
                       "--time-limit", "1", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert {r["solver"] for r in rows} == set(bench.EXACT + bench.FAST)
    assert all(r["load"] != "" and 0 <= float(r["first_schedule_s"]) <= float(r["time_s"]) for r in rows)
    good, total, bad = bench.exact_vs_fast([{**r, "fraction": float(r["fraction"]),
                                              "makespan": float(r["makespan"]) if r["makespan"] else None}
                                             for r in rows])
    assert total == 1 and good == 1 and not bad
    assert out.with_suffix(".png").exists()


def test_exact_vs_fast_names_the_cells_where_a_fast_solver_wins():
    rows = [{"instance": "A", "fraction": 0.9, "solver": "cpsat", "makespan": 10.0},
            {"instance": "A", "fraction": 0.9, "solver": "dtr", "makespan": 9.0},
            {"instance": "B", "fraction": 0.9, "solver": "checkmate", "makespan": None},
            {"instance": "B", "fraction": 0.9, "solver": "greedy", "makespan": None}]
    assert bench.exact_vs_fast(rows) == (1, 2, ["A 90%"])


def test_not_a_folder_is_exit_2(tmp_path):
    assert bench.main(["--graphs", str(tmp_path / "missing")]) == 2
