"""Benchmarks interrupted and run again (experiments/benchtable.py, `resumable`).

1. A Ctrl-C never replaces a complete table by a part of one: the finished rows go to
   ``<out stem>.partial.csv`` (the message says where), the table stays as it was.
2. The same command run again resumes: the per-cell function is not called for the finished cells,
   the complete table is written and the partial file removed; other settings do not resume.
3. bench_graph keeps the old CSV's rows of the pairs not rerun whatever happens.
4. bench_graph_executor keeps each network's graph file with the rows it belongs to.
5. Tables and figures are written atomically (a failure while writing leaves the old file).
6. Long benches show progress on stderr; short ones whose rows depend on each other keep nothing.

The benches run in-process with a KeyboardInterrupt raised by a monkeypatched per-cell function
(no signals), on tiny options.
"""

from __future__ import annotations

import csv
import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from conftest import call_main


def bench(name: str) -> ModuleType:
    """The module ``memsched.experiments.<name>``."""
    return importlib.import_module(f"memsched.experiments.{name}")



class Cells:
    """A per-cell function stand-in: counts its calls and raises KeyboardInterrupt on call `stop`
    (1-based; None: never)."""

    def __init__(self, make: Callable[..., Any], stop: int | None = None) -> None:
        self.make, self.stop, self.calls = make, stop, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.stop is not None and self.calls >= self.stop:
            raise KeyboardInterrupt
        return self.make(*args, **kwargs)


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def partial_of(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".csv") + ".partial.csv")


OLD = "a complete table of an earlier run\n"


# ------------------------------------------------------------------ 1, 2. bench_chain_exact
def _chain_result(*args: Any, **kwargs: Any) -> SimpleNamespace:
    return SimpleNamespace(status="optimal", objective=10.0, lower_bound=10.0, gap=0.0,
                           details={"variables": 1, "constraints": 1})


def chain_solve(mod: ModuleType, cells: Cells) -> Callable[..., Any]:
    """`mod.solve` with the exact solver's runs (the cells) through `cells`; the rotor reference as it is."""
    real = mod.solve

    def solve(problem: str, chain: Any, solver: str, *args: Any, **kwargs: Any) -> Any:
        return real(problem, chain, solver, *args, **kwargs) if solver == "rotor" else cells()

    return solve


CHAIN_ARGS = ["--lengths", "4", "5", "--fractions", "0.5", "--solvers", "cpsat", "--time-limit", "1"]


def test_chain_exact_interrupt_keeps_the_old_csv_and_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    mod = bench("bench_chain_exact")
    out = tmp_path / "ce.csv"
    out.write_text(OLD)
    first = Cells(_chain_result, stop=2)
    monkeypatch.setattr(mod, "solve", chain_solve(mod, first))
    code, _, err = call_main(mod.main, [*CHAIN_ARGS, "--out", str(out)], capsys)
    assert code == 130, err
    assert out.read_text() == OLD  # never replaced by a part of a table
    partial = partial_of(out)
    assert str(partial) in err and "Traceback" not in err, err
    kept = rows_of_partial(partial)
    assert [r["L"] for r in kept] == [4]

    again = Cells(_chain_result)
    monkeypatch.setattr(mod, "solve", chain_solve(mod, again))
    code, _, err = call_main(mod.main, [*CHAIN_ARGS, "--out", str(out)], capsys)
    assert code == 0, err
    assert again.calls == 1  # only the unfinished cell (L = 5) is solved
    rows = rows_of(out)
    assert [r["L"] for r in rows] == ["4", "5"] and len({r["L"] for r in rows}) == 2
    assert not partial.exists()


def rows_of_partial(path: Path) -> list[dict[str, str]]:
    """The rows of a partial file (its first line: the settings), values read back (JSON, else text)."""
    import json

    def value(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError:
            return text

    lines = path.read_text().splitlines(keepends=True)
    assert lines[0].startswith("#")
    return [{k: value(v) for k, v in r.items() if v} for r in csv.DictReader(lines[1:])]


def test_chain_exact_other_settings_do_not_resume(tmp_path, monkeypatch, capsys):
    mod = bench("bench_chain_exact")
    out = tmp_path / "ce.csv"
    monkeypatch.setattr(mod, "solve", chain_solve(mod, Cells(_chain_result, stop=2)))
    code, _, err = call_main(mod.main, [*CHAIN_ARGS, "--out", str(out)], capsys)
    assert code == 130 and partial_of(out).exists(), err
    again = Cells(_chain_result)
    monkeypatch.setattr(mod, "solve", chain_solve(mod, again))
    code, _, err = call_main(mod.main, [*CHAIN_ARGS[:-1], "2", "--out", str(out)], capsys)  # another time limit
    assert code == 0, err
    assert again.calls == 2
    assert [float(r["time_limit_s"]) for r in rows_of(out)] == [2.0, 2.0]


def test_chain_exact_interrupt_before_any_row_keeps_everything(tmp_path, monkeypatch, capsys):
    mod = bench("bench_chain_exact")
    out = tmp_path / "ce.csv"
    out.write_text(OLD)
    monkeypatch.setattr(mod, "solve", chain_solve(mod, Cells(_chain_result, stop=1)))
    code, _, err = call_main(mod.main, [*CHAIN_ARGS, "--out", str(out)], capsys)
    assert code == 130, err
    assert out.read_text() == OLD and not partial_of(out).exists()


# ------------------------------------------------------------------ 1, 2, 6. bench_offload_pofo
def _pofo_rows(L: int, seed: int, exact: bool, time_limit: float) -> list[dict[str, Any]]:
    return [{"L": L, "seed": seed, "bandwidth": bw, "budget": 10, "pofo": 5.0, "pofo-dp": 5.0, "from": "dp",
             "rotor-offload": 6.0} for bw in (500.0, 2000.0)]


def test_offload_pofo_resumes_with_progress(tmp_path, monkeypatch, capsys):
    mod = bench("bench_offload_pofo")
    out = tmp_path / "pofo.csv"
    out.write_text(OLD)
    argv = ["--seeds", "2", "--lengths", "3", "--exact-lengths", "--out", str(out)]
    monkeypatch.setattr(mod, "rows_for", Cells(_pofo_rows, stop=2))
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 130, err
    assert out.read_text() == OLD
    assert [(r["L"], r["seed"]) for r in rows_of_partial(partial_of(out))] == [(3, 0), (3, 0)]
    again = Cells(_pofo_rows)
    monkeypatch.setattr(mod, "rows_for", again)
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 0, err
    assert again.calls == 1
    assert [(r["L"], r["seed"]) for r in rows_of(out)] == [("3", "0"), ("3", "0"), ("3", "1"), ("3", "1")]
    assert not partial_of(out).exists()
    assert "bench_offload_pofo" in err  # the progress bar, on stderr


# ------------------------------------------------------------------ 3. bench_graph
def _graph_result(*args: Any, **kwargs: Any) -> SimpleNamespace:
    return SimpleNamespace(status="feasible", objective=100.0, gap=None, lower_bound=None, peak_memory=1,
                           scope="test")


def test_graph_interrupt_keeps_the_other_pairs_rows(tmp_path, monkeypatch, capsys):
    mod = bench("bench_graph")
    out = tmp_path / "bgq.csv"
    fields = mod.FIELDS
    old = [{**dict.fromkeys(fields, ""), "graph": "other", "solver": "greedy", "budget_pct": 90},
           {**dict.fromkeys(fields, ""), "graph": "linear-30", "solver": "sqrt", "budget_pct": 90}]
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(old)
    before = out.read_bytes()
    monkeypatch.setattr(mod, "lp_bound", lambda *a, **k: None)
    first = Cells(_graph_result, stop=3)
    monkeypatch.setattr(mod.registry, "solve", first)
    argv = ["--quick", "--graphs", "linear", "--solvers", "sqrt", "--threads", "1", "--out", str(out)]
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 130, err
    assert out.read_bytes() == before  # the old rows all still there (the sqrt one too)
    again = Cells(_graph_result)
    monkeypatch.setattr(mod.registry, "solve", again)
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 0, err
    assert again.calls == 1  # 90% and 80% were finished; 70% is left
    rows = rows_of(out)
    assert [(r["graph"], r["solver"], r["budget_pct"]) for r in rows] == [  # the rerun pair's old row replaced
        ("other", "greedy", "90"), ("linear-30", "sqrt", "90"), ("linear-30", "sqrt", "80"),
        ("linear-30", "sqrt", "70")]
    assert rows[1]["status"] == "feasible"


# ------------------------------------------------------------------ 4. bench_graph_executor
def test_graph_executor_graph_files_go_with_their_rows(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    mod = bench("bench_graph_executor")
    out = tmp_path / "acc.csv"
    out.write_text(OLD)
    stores = {m: out.with_suffix(f".{m}.json") for m in ("resnet18", "gpt2")}
    for m, path in stores.items():
        path.write_text(f"old {m}\n")

    def evaluate(label: str, name: str, sizes: Any, *, store: Path, **kw: Any) -> list[dict[str, Any]]:
        store.write_text(f"new {label}\n")  # as the real one: the graph saved before any row
        return [{"model": label, "solver": "checkpoint-all", "budget_fraction": 1.0, "status": "optimal"}]

    argv = ["--size", "tiny", "--models", "resnet18,gpt2", "--solvers", "checkpoint-all", "--out", str(out)]
    first = Cells(evaluate, stop=None)

    def second_stops(*a: Any, **k: Any) -> Any:
        if first.calls == 1:
            k["store"].write_text("half-profiled\n")
            raise KeyboardInterrupt
        return first(*a, **k)

    monkeypatch.setattr(mod, "evaluate", second_stops)
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 130, err
    assert out.read_text() == OLD
    assert {m: p.read_text() for m, p in stores.items()} == {"resnet18": "old resnet18\n", "gpt2": "old gpt2\n"}
    again = Cells(evaluate)
    monkeypatch.setattr(mod, "evaluate", again)
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 0, err
    assert again.calls == 1  # gpt2 only: resnet18's rows and graph were kept
    assert [r["model"] for r in rows_of(out)] == ["resnet18", "gpt2"]
    assert {m: p.read_text() for m, p in stores.items()} == {"resnet18": "new resnet18\n", "gpt2": "new gpt2\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, *(p.name for p in stores.values())])


# ------------------------------------------------------------------ 5. atomic writes
class BrokenFrame:
    """A DataFrame stand-in whose CSV breaks halfway through writing."""

    def to_string(self, **kw: Any) -> str:
        return "a table"

    def to_csv(self, path: Any, **kw: Any) -> None:
        Path(path).write_text("half a ta")
        raise OSError("disk full")


def test_print_and_write_frame_failure_leaves_the_old_file(tmp_path, capsys):
    from memsched.experiments import benchtable

    out = tmp_path / "t.csv"
    out.write_text(OLD)
    with pytest.raises(Exception, match="disk full"):
        benchtable.print_and_write_frame(BrokenFrame(), out, str)
    assert out.read_text() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_figures_are_saved_atomically(tmp_path, monkeypatch, capsys):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.figure

    mod = bench("bench_join")
    rows = [{"group": "small", "instance": "2x3", "solver": "dp", "budget_frac": 1.0, "makespan": "5"}]
    png = tmp_path / "bj.png"
    png.write_bytes(b"old png")

    def broken(self: Any, fname: Any, *a: Any, **k: Any) -> None:
        if isinstance(fname, (str, Path)):
            Path(fname).write_bytes(b"half")
        else:
            fname.write(b"half")
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken)
    with pytest.raises(RuntimeError):
        mod.figure(rows, png)
    assert png.read_bytes() == b"old png"
    monkeypatch.undo()
    mod.figure(rows, png)
    assert png.read_bytes().startswith(b"\x89PNG")


# ------------------------------------------------------------------ 6. short benches keep nothing
def test_sweep_rotor_interrupt_keeps_the_old_csv(tmp_path, monkeypatch, capsys):
    mod = bench("bench_sweep_rotor")
    out = tmp_path / "sr.csv"
    out.write_text(OLD)
    monkeypatch.setattr(mod, "_sweep", Cells(lambda *a: None, stop=1))
    argv = ["--length", "10", "--budgets", "2", "--slots", "50", "--output", str(out)]
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 130, err
    assert out.read_text() == OLD and "nothing kept" in err
    assert [p.name for p in tmp_path.iterdir()] == ["sr.csv"]


def _interrupted_run(out: Path, visit: list[tuple[str, Any]]) -> str:
    """Run cells through `benchtable.resumable` (key ``cell``): ("kept", c) asks for c's kept rows, ("run", c) adds
    a row for c, ("none", c) runs c and leaves no row (a crash), then a Ctrl-C; the `Interrupted` message."""
    from memsched.experiments.benchtable import Interrupted, resumable

    with pytest.raises(Interrupted) as info:
        with resumable(out, ["cell", "value"], {"n": 1}, ["cell"]) as table:
            for what, cell in visit:
                if what == "kept":
                    assert table.kept(cell) is not None
                elif what == "run":
                    table.add({"cell": cell, "value": 1})
            raise KeyboardInterrupt
    return str(info.value)


def test_an_interrupted_resume_keeps_the_cells_it_did_not_reach(tmp_path):
    """Run 1 finishes a and c (b left no row); run 2 reuses a, reruns b, is interrupted: c stays finished (review of
    session 42: the partial file then held a and b only)."""
    from conftest import partial_table

    out = tmp_path / "t.csv"
    _interrupted_run(out, [("run", "a"), ("none", "b"), ("run", "c")])
    message = _interrupted_run(out, [("kept", "a"), ("run", "b")])
    assert sorted(row["cell"] for row in partial_table(out)[1]) == ["a", "b", "c"]
    assert "3 finished rows kept" in message


def test_a_second_ctrl_c_while_the_partial_file_is_written_waits(tmp_path, monkeypatch):
    """A second Ctrl-C right after the first (here: while the progress bar closes) must not lose the finished rows
    (review of session 42: the deferral began after the bar's close and a lazy import)."""
    import os
    import signal

    from conftest import partial_table
    from memsched.experiments import benchtable

    class Bar:
        def update(self) -> None:
            pass

        def close(self) -> None:
            if not closed:
                closed.append(1)
                os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C

    closed: list[int] = []
    monkeypatch.setattr(benchtable, "progress", lambda **kw: Bar())
    out = tmp_path / "t.csv"
    with pytest.raises(benchtable.Interrupted):
        with benchtable.resumable(out, ["cell", "value"], {"n": 1}, ["cell"], bar="cells") as table:
            table.add({"cell": "a", "value": 1})
            raise KeyboardInterrupt
    assert closed and [row["cell"] for row in partial_table(out)[1]] == ["a"]
