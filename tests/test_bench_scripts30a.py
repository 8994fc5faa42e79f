"""The benchmark scripts bench_papers_graphs, bench_graph, bench_chain_exact and bench_offload_pofo as
commands: arguments refused up front (one line, exit 2) without touching --out, Ctrl-C as one line and
exit 130 with --out as it was and the finished rows kept beside it in ``<out stem>.partial.csv`` (the same
command resumes from them), reruns that keep the rows they do not redo, and --out honoured.
Every run writes under tmp_path (tiny instances, fast solvers or monkeypatched ones)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import partial_of, partial_table, shown_lines
from memsched.experiments import bench_chain_exact, bench_graph, bench_offload_pofo
from memsched.experiments import bench_papers_graphs as papers
from memsched.solvers.errors import InputError
from memsched.solvers.graph import generate


def _rc(main: Callable[[list[str]], int], argv: list[str]) -> Any:
    """`main(argv)`'s exit status, argparse's SystemExit included (a Ctrl-C that escapes: a string saying so)."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code
    except KeyboardInterrupt:
        return "KeyboardInterrupt escaped"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines stderr leaves on a terminal (a progress bar that erased itself is not one)."""
    return shown_lines(capsys.readouterr().err)


def _interrupted_line(capsys: pytest.CaptureFixture[str], name: str, out: Path) -> str:
    """The one line stderr shows after a Ctrl-C with finished rows: it names the partial file and says --out is
    unchanged."""
    err = _err_lines(capsys)
    assert len(err) == 1, err
    assert err[0].startswith(f"{name}: interrupted: ") and f"kept in {partial_of(out)} " in err[0], err
    assert f"({out} is unchanged)" in err[0] and "the same command resumes" in err[0], err
    return err[0]


def _no_solving(*a: Any, **k: Any) -> Any:
    raise AssertionError("solved although the arguments are bad")


# ------------------------------------------------------------------ bench_papers_graphs
@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    """A folder holding a small stand-in for Moccasin's RL100 file."""
    folder = tmp_path / "graphs"
    folder.mkdir()
    generate.random_layered(12, 2).save(folder / "random_layered_n100_stand-in.json")
    return folder


def _papers_args(folder: Path, out: Path, *solvers: str) -> list[str]:
    return ["--graphs", str(folder), "--instances", "RL100", "--fractions", "0.8", "--time-limit", "1",
            "--out", str(out), "--solvers", *solvers]


def test_papers_resume_with_other_solvers_keeps_the_rows_of_those_not_asked(stand_in, tmp_path, monkeypatch):
    out = tmp_path / "out.csv"
    assert papers.main(_papers_args(stand_in, out, "checkpoint-all")) == 0
    first = _rows(out)
    calls: list[str] = []
    real = papers.solve
    monkeypatch.setattr(papers, "solve", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    assert papers.main([*_papers_args(stand_in, out, "dtr"), "--resume"]) == 0
    assert calls == ["dtr"]  # only the asked solver the cell lacked
    rows = _rows(out)
    assert [r["solver"] for r in rows] == ["checkpoint-all", "dtr"]
    keep = [k for k in papers.FIELDS if k != "cell"]  # the cell's feasibility is restated from both rows
    assert {k: rows[0][k] for k in keep} == {k: first[0][k] for k in keep}
    assert rows[0]["cell"] == rows[1]["cell"]
    calls.clear()
    assert papers.main([*_papers_args(stand_in, out, "dtr", "checkpoint-all"), "--resume"]) == 0
    assert calls == [] and _rows(out) == rows


def test_papers_folder_without_the_files_is_exit_2_and_keeps_out(stand_in, tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert papers.main(_papers_args(stand_in, out, "checkpoint-all")) == 0
    before = out.read_bytes()
    empty = tmp_path / "empty"
    empty.mkdir()
    capsys.readouterr()
    assert _rc(papers.main, _papers_args(empty, out, "checkpoint-all")) == 2
    err = _err_lines(capsys)
    assert any("--graphs" in line and "error" in line for line in err) and "Traceback" not in "\n".join(err)
    assert out.read_bytes() == before


def test_papers_merge_keeps_one_row_per_run_and_the_later_file_wins(stand_in, tmp_path):
    a = tmp_path / "a.csv"
    assert papers.main(_papers_args(stand_in, a, "checkpoint-all", "dtr")) == 0
    rows = _rows(a)
    rerun = [{**r, "makespan": "12345.0", "time_s": "9.5"} for r in rows if r["solver"] == "dtr"]
    b = tmp_path / "b.csv"
    papers.write_csv(rerun, b, papers.FIELDS)
    merged = tmp_path / "m.csv"
    assert papers.main(["--merge", str(a), str(a), "--out", str(merged)]) == 0
    assert [r["solver"] for r in _rows(merged)] == ["checkpoint-all", "dtr"]
    assert papers.main(["--merge", str(a), str(b), "--out", str(merged)]) == 0
    got = {r["solver"]: r for r in _rows(merged)}
    assert len(_rows(merged)) == 2 and float(got["dtr"]["makespan"]) == 12345.0
    assert papers.main(["--merge", str(b), str(a), "--out", str(merged)]) == 0
    got = {r["solver"]: r for r in _rows(merged)}
    assert got["dtr"]["makespan"] == next(r["makespan"] for r in rows if r["solver"] == "dtr")


@pytest.mark.parametrize("bad", [["--solvers", "nosuch"], ["--time-limit", "-1"], ["--fractions", "-0.5"],
                                 ["--published", "MISSING"], ["--out", "FOLDER"]])
def test_papers_bad_arguments_are_refused_before_any_solving(stand_in, tmp_path, monkeypatch, capsys, bad):
    monkeypatch.setattr(papers, "solve", _no_solving)
    out = tmp_path / "out.csv"
    bad = [str(tmp_path / "missing.csv") if b == "MISSING" else str(tmp_path) if b == "FOLDER" else b for b in bad]
    argv = [*_papers_args(stand_in, out, "dtr"), *bad]
    assert _rc(papers.main, argv) == 2
    assert not out.exists()
    err = _err_lines(capsys)
    assert "Traceback" not in "\n".join(err) and len([line for line in err if "error" in line]) == 1


def test_papers_bad_input_from_a_solver_is_one_line_and_exit_2(stand_in, tmp_path, monkeypatch, capsys):
    def refuse(*a: Any, **k: Any) -> Any:
        raise InputError("refused", field="--slots")

    monkeypatch.setattr(papers, "solve", refuse)
    assert _rc(papers.main, _papers_args(stand_in, tmp_path / "out.csv", "dtr")) == 2
    assert _err_lines(capsys)[-1] == "bench_papers_graphs: error: --slots: refused"


# ------------------------------------------------------------------ bench_graph
@pytest.fixture
def fast_graph(monkeypatch):
    """bench_graph without Checkmate's LP column (a reference value only): the runs are the fast solvers'."""
    monkeypatch.setattr(bench_graph, "lp_bound", lambda *a, **k: None)


@pytest.mark.parametrize("bad", [["--solvers", "nosuch"], ["--graphs", "nosuch"], ["--solvers", ","],
                                 ["--threads", "0"]])
def test_graph_unknown_names_are_exit_2_and_nothing_is_written(tmp_path, monkeypatch, capsys, bad):
    monkeypatch.setattr(bench_graph.registry, "solve", _no_solving)
    out = tmp_path / "a.csv"
    assert _rc(bench_graph.main, ["--quick", "--graphs", "linear", "--solvers", "dtr", "--out", str(out), *bad]) == 2
    captured = capsys.readouterr()
    assert not [line for line in captured.out.splitlines() if line.startswith("wrote")] and not out.exists()
    assert len([line for line in captured.err.splitlines() if "error" in line]) == 1
    assert "Traceback" not in captured.err


def test_graph_rerunning_one_solver_keeps_the_other_solvers_rows(tmp_path, fast_graph):
    out = tmp_path / "a.csv"
    args = ["--quick", "--graphs", "linear", "--out", str(out)]
    assert bench_graph.main([*args, "--solvers", "greedy,dtr"]) == 0
    before = _rows(out)
    assert {r["solver"] for r in before} == {"greedy", "dtr"}
    assert bench_graph.main([*args, "--solvers", "checkpoint-all,dtr"]) == 0
    after = _rows(out)
    assert [r for r in after if r["solver"] == "greedy"] == [r for r in before if r["solver"] == "greedy"]
    assert len([r for r in after if r["solver"] == "dtr"]) == len([r for r in before if r["solver"] == "dtr"])
    assert {r["solver"] for r in after} == {"greedy", "dtr", "checkpoint-all"}


def test_graph_says_wrote_only_after_a_write(tmp_path, fast_graph, monkeypatch, capsys):
    def crash(*a: Any, **k: Any) -> Any:
        raise RuntimeError("solver crashed")

    monkeypatch.setattr(bench_graph.registry, "solve", crash)
    out = tmp_path / "a.csv"
    assert bench_graph.main(["--quick", "--graphs", "linear", "--solvers", "dtr", "--out", str(out)]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote")]
    assert not out.exists()


def test_graph_ctrl_c_is_exit_130_with_the_finished_rows(tmp_path, fast_graph, monkeypatch, capsys):
    real = bench_graph.registry.solve
    calls: list[int] = []
    stop = [True]

    def stop_second(*a: Any, **k: Any) -> Any:
        calls.append(a[3])  # the budget
        if stop[0] and len(calls) > 1:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(bench_graph.registry, "solve", stop_second)
    out = tmp_path / "a.csv"
    argv = ["--quick", "--graphs", "linear", "--solvers", "dtr", "--out", str(out)]
    assert _rc(bench_graph.main, argv) == 130
    _interrupted_line(capsys, "bench_graph", out)
    assert not out.exists()  # none before: none after
    _, kept = partial_table(out)
    assert [(r["solver"], r["budget"]) for r in kept] == [("dtr", calls[0])] and kept[0]["makespan"] > 0
    stop[0], first = False, calls[0]
    calls.clear()
    assert _rc(bench_graph.main, argv) == 0  # the same command resumes: the finished budget is not solved again
    rows = _rows(out)
    assert first not in calls and len(calls) == len(rows) - 1 >= 1
    assert rows[0]["budget"] == str(first) and not partial_of(out).exists()


def test_graph_a_folder_as_out_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_graph.registry, "solve", _no_solving)
    assert _rc(bench_graph.main, ["--quick", "--graphs", "linear", "--solvers", "dtr", "--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err


# ------------------------------------------------------------------ bench_chain_exact
def _chain_args(out: Path, *extra: str) -> list[str]:
    return ["--lengths", "4", "--seeds", "0", "--fractions", "0.5", "--solvers", "cpsat", "--time-limit", "2",
            "--out", str(out), *extra]


@pytest.fixture
def old_csv(tmp_path: Path) -> Path:
    out = tmp_path / "old.csv"
    out.write_text("L,seed,solver\n99,0,earlier\n")
    return out


@pytest.mark.parametrize("bad", [["--time-limit", "-1"], ["--solvers", "nosuch"], ["--fractions", "-0.1"],
                                 ["--fractions", "1.5"], ["--lengths", "0"]])
def test_chain_exact_bad_arguments_leave_the_csv_as_it_was(old_csv, monkeypatch, capsys, bad):
    monkeypatch.setattr(bench_chain_exact, "solve", _no_solving)
    before = old_csv.read_bytes()
    assert _rc(bench_chain_exact.main, _chain_args(old_csv, *bad)) == 2
    assert old_csv.read_bytes() == before
    assert "Traceback" not in capsys.readouterr().err


def test_chain_exact_ctrl_c_before_a_row_leaves_the_csv_as_it_was(old_csv, monkeypatch, capsys):
    def stop(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_chain_exact, "solve", stop)
    before = old_csv.read_bytes()
    assert _rc(bench_chain_exact.main, _chain_args(old_csv)) == 130
    assert old_csv.read_bytes() == before
    err = _err_lines(capsys)
    assert len(err) == 1 and "interrupted" in err[0]


@pytest.mark.parametrize("append", [False, True])
def test_chain_exact_ctrl_c_keeps_the_finished_rows(old_csv, monkeypatch, capsys, append):
    real = bench_chain_exact.solve
    calls: list[str] = []

    def stop_second(*a: Any, **k: Any) -> Any:  # the rotor DP's reference runs go through too
        if a[2] == "cpsat":
            calls.append(a[2])
            if len(calls) > 1:
                raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(bench_chain_exact, "solve", stop_second)
    argv = _chain_args(old_csv, "--fractions", "0.5", "0.9", *(["--append"] if append else []))
    before = old_csv.read_bytes()
    assert _rc(bench_chain_exact.main, argv) == 130
    _interrupted_line(capsys, "bench_chain_exact", old_csv)
    assert old_csv.read_bytes() == before  # never replaced by a part of a table
    _, kept = partial_table(old_csv)
    assert [(r["solver"], r["status"], r["fraction"]) for r in kept] == [("cpsat", "optimal", 0.5)]

    def count(*a: Any, **k: Any) -> Any:
        if a[2] == "cpsat":
            calls.append(a[2])
        return real(*a, **k)

    monkeypatch.setattr(bench_chain_exact, "solve", count)
    calls.clear()
    assert _rc(bench_chain_exact.main, argv) == 0  # the same command resumes: only fraction 0.9 is solved
    assert calls == ["cpsat"] and not partial_of(old_csv).exists()
    rows = _rows(old_csv)
    assert [r["solver"] for r in rows] == (["earlier", "cpsat", "cpsat"] if append else ["cpsat", "cpsat"])
    assert [r["fraction"] for r in rows[-2:]] == ["0.5", "0.9"] and rows[-2]["status"] == "optimal"
    if append:
        assert rows[0]["L"] == "99" and rows[0]["status"] == ""  # the old row, under the widened header
    assert b"\r\n" not in old_csv.read_bytes()  # the committed CSV's line ends


def test_chain_exact_append_adds_to_the_rows(tmp_path):
    out = tmp_path / "b.csv"
    assert bench_chain_exact.main(_chain_args(out)) == 0
    assert bench_chain_exact.main(_chain_args(out, "--append")) == 0
    rows = _rows(out)
    assert len(rows) == 2 and list(rows[0]) == list(bench_chain_exact.FIELDS)
    assert bench_chain_exact.main(_chain_args(out)) == 0
    assert len(_rows(out)) == 1


# ------------------------------------------------------------------ bench_offload_pofo
@pytest.fixture
def fake_results(tmp_path: Path, monkeypatch) -> Path:
    """bench_offload_pofo's default results folder pointed into tmp_path."""
    results = tmp_path / "fake" / "results" / "offload"
    monkeypatch.setattr(bench_offload_pofo, "RESULTS", results)
    return results


def test_pofo_port_writes_out(tmp_path, fake_results):
    out = tmp_path / "o" / "port.csv"
    assert bench_offload_pofo.main(["--port", "1", "--out", str(out)]) == 0
    assert len(_rows(out)) == 2 and not list((tmp_path / "fake").rglob("*.csv"))


def test_pofo_port_default_out_is_its_results_file(tmp_path, fake_results):
    assert bench_offload_pofo.main(["--port", "1"]) == 0
    assert (fake_results.parent / "bench_offload_pofo.csv").is_file()


@pytest.mark.parametrize("bad", [["--time-limit", "-1"], ["--seeds", "0"], ["--lengths", "-2"], ["--port", "-1"],
                                 ["--out", "FOLDER"]])
def test_pofo_bad_arguments_are_refused_before_any_solving(tmp_path, fake_results, monkeypatch, capsys, bad):
    monkeypatch.setattr(bench_offload_pofo, "rows_for", _no_solving)
    bad = [str(tmp_path) if b == "FOLDER" else b for b in bad]
    assert _rc(bench_offload_pofo.main, ["--seeds", "1", "--lengths", "2", "--exact-lengths", *bad]) == 2
    assert "Traceback" not in capsys.readouterr().err and not (tmp_path / "fake").exists()


def test_pofo_ctrl_c_is_exit_130_with_the_finished_chains(tmp_path, fake_results, monkeypatch, capsys):
    real = bench_offload_pofo.rows_for
    calls: list[int] = []

    def stop_second(*a: Any, **k: Any) -> Any:
        calls.append(a[1])
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(bench_offload_pofo, "rows_for", stop_second)
    out = tmp_path / "p.csv"
    argv = ["--seeds", "2", "--lengths", "2", "--exact-lengths", "--out", str(out)]
    assert _rc(bench_offload_pofo.main, argv) == 130
    _interrupted_line(capsys, "bench_offload_pofo", out)
    assert not out.exists()
    _, kept = partial_table(out)
    assert kept and {r["seed"] for r in kept} == {0}
    calls.clear()
    monkeypatch.setattr(bench_offload_pofo, "rows_for", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    assert _rc(bench_offload_pofo.main, argv) == 0  # the same command resumes: seed 1 only
    assert calls == [1] and not partial_of(out).exists()
    rows = _rows(out)
    assert [r["seed"] for r in rows] == ["0"] * len(kept) + ["1"] * (len(rows) - len(kept)) and len(rows) > len(kept)
