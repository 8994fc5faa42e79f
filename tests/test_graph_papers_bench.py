"""The papers' graph benchmark script on a small stand-in file (Moccasin's files are not committed)."""

from __future__ import annotations

import csv

from conftest import partial_of, partial_table, shown_lines
from memsched.experiments import bench_papers_graphs as bench
from memsched.solvers.graph import generate


def test_bench_runs_every_solver_and_exact_is_never_worse(tmp_path):
    generate.random_layered(12, 2).save(tmp_path / "random_layered_n100_stand-in.json")
    out = tmp_path / "out.csv"
    assert (
        bench.main(
            [
                "--graphs",
                str(tmp_path),
                "--instances",
                "RL100",
                "--fractions",
                "0.8",
                "--time-limit",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(out.open()))
    assert {r["solver"] for r in rows} == set(bench.EXACT + bench.FAST)
    assert all(r["load"] != "" and 0 <= float(r["first_schedule_s"]) <= float(r["time_s"]) for r in rows)
    good, total, bad = bench.exact_vs_fast(
        [
            {**r, "fraction": float(r["fraction"]), "makespan": float(r["makespan"]) if r["makespan"] else None}
            for r in rows
        ]
    )
    assert total == 1 and good == 1 and not bad
    assert out.with_suffix(".png").exists()


def test_exact_vs_fast_names_the_cells_where_a_fast_solver_wins():
    rows = [
        {"instance": "A", "fraction": 0.9, "solver": "cpsat", "makespan": 10.0},
        {"instance": "A", "fraction": 0.9, "solver": "dtr", "makespan": 9.0},
        {"instance": "B", "fraction": 0.9, "solver": "checkmate", "makespan": None},
        {"instance": "B", "fraction": 0.9, "solver": "greedy", "makespan": None},
    ]
    assert bench.exact_vs_fast(rows) == (1, 2, ["A 90%"])


def test_not_a_folder_is_exit_2(tmp_path):
    assert bench.main(["--graphs", str(tmp_path / "missing")]) == 2


def test_cells_state_feasibility_and_merge_rebuilds_the_table(tmp_path, capsys):
    generate.random_layered(12, 2).save(tmp_path / "random_layered_n100_stand-in.json")
    out = tmp_path / "out.csv"
    pub = tmp_path / "pub.csv"
    pub.write_text("instance,fraction,source,overhead,time_limit_s,note\nRL100,0.8,Moccasin,,180,settings only\n")
    args = ["--graphs", str(tmp_path), "--instances", "RL100", "--fractions", "0.8", "--time-limit", "1"]
    assert bench.main([*args, "--solvers", "dtr-orders", "checkpoint-all", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len({r["cell"] for r in rows}) == 1
    assert rows[0]["cell"].startswith(("feasible: peak", "open:", "infeasible:"))
    for r in rows:
        assert int(r["budget"]) == bench.math.ceil(int(r["ref_peak"]) * 0.8)  # Moccasin's B
        assert int(r["min_peak_lb"]) <= int(r["ref_peak"])
        if r["makespan"]:
            assert int(r["peak"]) <= int(r["budget"])
    merged = tmp_path / "merged.csv"
    capsys.readouterr()
    assert bench.main(["--merge", str(out), str(out), "--published", str(pub), "--out", str(merged)]) == 0
    text = capsys.readouterr().out
    assert "Moccasin: none published (their limit 180 s)" in text
    assert len(list(csv.DictReader(merged.open()))) == len(rows)  # one row per run: the later file wins
    assert merged.with_suffix(".png").exists()
    assert bench.main(["--merge", str(tmp_path / "missing.csv")]) == 2


def test_cell_feasibility_words():
    row = {"makespan": 5.0, "peak": 90, "solver": "dtr"}
    assert bench.cell_feasibility([row, {**row, "peak": 80, "solver": "cpsat"}], 100, 50) == (
        "feasible: peak 80 <= B 100 (cpsat, replayed)"
    )
    none = {"makespan": None, "peak": None, "solver": "dtr"}
    assert bench.cell_feasibility([none], 40, 50).startswith("infeasible: B 40 < lower bound 50")
    assert bench.cell_feasibility([none], 60, 50).startswith("open:")


def test_resume_keeps_finished_cells_and_runs_the_rest(tmp_path, monkeypatch):
    generate.random_layered(12, 2).save(tmp_path / "random_layered_n100_stand-in.json")
    out = tmp_path / "out.csv"
    args = ["--graphs", str(tmp_path), "--instances", "RL100", "--time-limit", "1", "--out", str(out),
            "--solvers", "dtr", "checkpoint-all"]
    assert bench.main([*args, "--fractions", "0.9"]) == 0
    first = list(csv.DictReader(out.open()))
    assert {(r["fraction"], r["solver"]) for r in first} == {("0.9", "dtr"), ("0.9", "checkpoint-all")}
    calls = []
    real = bench.solve
    monkeypatch.setattr(bench, "solve", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    assert bench.main([*args, "--fractions", "0.9", "0.8", "--resume"]) == 0
    assert calls == ["dtr", "checkpoint-all"]  # only the 80% cell ran
    rows = list(csv.DictReader(out.open()))
    assert [r for r in rows if r["fraction"] == "0.9"] == first  # kept as they were
    assert {r["solver"] for r in rows if r["fraction"] == "0.8"} == {"dtr", "checkpoint-all"}
    calls.clear()
    assert bench.main([*args, "--fractions", "0.9", "0.8", "--resume"]) == 0
    assert calls == [] and list(csv.DictReader(out.open())) == rows


def test_interrupt_keeps_the_finished_cells_and_exits_130(tmp_path, monkeypatch, capsys):
    generate.random_layered(12, 2).save(tmp_path / "random_layered_n100_stand-in.json")
    out = tmp_path / "out.csv"
    real = bench.solve

    def stop_in_second_cell(problem, graph, solver, budget, **kw):
        if budget != bench.moccasin_budget(graph, 0.9):
            raise KeyboardInterrupt
        return real(problem, graph, solver, budget, **kw)

    monkeypatch.setattr(bench, "solve", stop_in_second_cell)
    args = ["--graphs", str(tmp_path), "--instances", "RL100", "--fractions", "0.9", "0.8", "--time-limit", "1",
            "--out", str(out), "--solvers", "dtr"]
    assert bench.main(args) == 130
    err = shown_lines(capsys.readouterr().err)
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0] == (f"bench_papers_graphs: interrupted: 1 finished rows kept in {partial_of(out)} ({out} is "
                      "unchanged); the same command resumes from them"), err
    assert not out.exists()  # --out is only ever a complete table
    _, kept = partial_table(out)
    assert [(r["fraction"], r["solver"]) for r in kept] == [(0.9, "dtr")]

    calls = []
    monkeypatch.setattr(bench, "solve", lambda *a, **k: calls.append(a[3] == bench.moccasin_budget(a[1], 0.8))
                        or real(*a, **k))
    assert bench.main(args) == 0  # the same command resumes: the 80% cell only
    assert calls == [True]
    assert [(r["fraction"], r["solver"]) for r in csv.DictReader(out.open())] == [("0.9", "dtr"), ("0.8", "dtr")]
    assert not partial_of(out).exists()
