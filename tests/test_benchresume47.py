"""Benchmarks resumed from what an earlier run left (experiments/bench_graph.py, experiments/bench_offload.py).

1. bench_graph keeps the rows of its --out CSV for the pairs not rerun: that file is read through
   `benchtable.read_table` before any solving, so a row with an extra field, a row cut short (fewer fields, or
   the last one without its line end) or bytes that are not UTF-8 are one line naming the file and --out, exit 2,
   with the file left as it was and no partial file (not a traceback after the solving, nor a cut row copied).
2. bench_offload names a point by its chain's name: two --chains files with the same name are refused before
   any work (one line naming --chains and the name, exit 2).
3. bench_offload resumes an interrupted run only with the same chains' contents: a chain file edited between
   the interrupt and the rerun means every point runs again (its budgets are the new chain's); an unchanged one
   still resumes.

The benches run in-process on tiny options; the solvers are stand-ins (no real solving).
"""

from __future__ import annotations

import csv
import importlib
import json
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from conftest import call_main, partial_of

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "solvers" / "data" / "examples" / "tiny.json"
CNN = ROOT / "solvers" / "data" / "examples" / "cnn12.json"


def bench(name: str) -> ModuleType:
    """The module ``memsched.experiments.<name>``."""
    return importlib.import_module(f"memsched.experiments.{name}")


def no_work(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the work started before the input was checked")


def one_error_line(err: str, *words: str) -> None:
    """`err` is one line, no traceback, holding each of `words`."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(word in lines[0] for word in words), err


# ------------------------------------------------------------------ 1. bench_graph's --out read back
def graph_table(mod: ModuleType, path: Path) -> None:
    """A bench_graph CSV of one pair (linear-30, checkpoint-all) at 90% and 80%, as `write_csv` writes it."""
    rows = [{**dict.fromkeys(mod.FIELDS, ""), "graph": "linear-30", "solver": "checkpoint-all", "budget_pct": pct,
             "status": "feasible", "scope": "every node once"} for pct in (90, 80)]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=mod.FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def damaged_extra(data: bytes) -> bytes:
    """One field more on the first row."""
    lines = data.split(b"\r\n")
    lines[1] += b",surplus"
    return b"\r\n".join(lines)


@pytest.mark.parametrize("damage, words", [
    (damaged_extra, "fields"),
    (lambda data: data[:data.rindex(b",")], "fields"),  # the last row cut short: one field fewer
    (lambda data: data[:-4], "cut short"),  # cut inside its last field: every field there, no line end
    (lambda data: data + b"\xff\xfe\r\n", "UTF-8"),
], ids=["extra-field", "fewer-fields", "no-line-end", "not-utf8"])
def test_graph_damaged_out_is_one_line_before_any_solving(tmp_path, monkeypatch, capsys, damage, words):
    mod = bench("bench_graph")
    out = tmp_path / "g.csv"
    graph_table(mod, out)
    out.write_bytes(damage(out.read_bytes()))
    before = out.read_bytes()
    monkeypatch.setattr(mod.registry, "solve", no_work)
    monkeypatch.setattr(mod, "lp_bound", no_work)
    argv = ["--quick", "--graphs", "linear", "--solvers", "sqrt", "--threads", "1", "--out", str(out)]
    code, stdout, err = call_main(mod.main, argv, capsys)
    assert code == 2, (code, err)
    one_error_line(err, str(out), "--out", words)
    assert out.read_bytes() == before and not partial_of(out).exists()
    assert "wrote" not in stdout


def test_graph_whole_out_keeps_its_rows(tmp_path, monkeypatch, capsys):
    mod = bench("bench_graph")
    out = tmp_path / "g.csv"
    graph_table(mod, out)
    monkeypatch.setattr(mod.registry, "solve", lambda *a, **k: SimpleNamespace(
        status="feasible", objective=100.0, gap=None, lower_bound=None, peak_memory=1, scope="test"))
    monkeypatch.setattr(mod, "lp_bound", lambda *a, **k: None)
    argv = ["--quick", "--graphs", "linear", "--solvers", "sqrt", "--threads", "1", "--out", str(out)]
    code, _, err = call_main(mod.main, argv, capsys)
    assert code == 0, err
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["solver"], r["budget_pct"]) for r in rows] == [
        ("checkpoint-all", "90"), ("checkpoint-all", "80"), ("sqrt", "90"), ("sqrt", "80"), ("sqrt", "70")]


# ------------------------------------------------------------------ 2, 3. bench_offload's chains
def chain_copy(source: Path, path: Path, **changes: Any) -> Path:
    """`source`'s chain written to `path` with its top-level fields `changes` and, with ``tape_factor``, each
    stage's tape size multiplied by it."""
    data = json.loads(source.read_text())
    factor = changes.pop("tape_factor", 1)
    data.update(changes)
    for stage in data["stages"]:
        stage["tape_size"] *= factor
    path.write_text(json.dumps(data, indent=1))
    return path


def fake_solve(calls: list[tuple[Any, ...]], stop: int | None = None) -> SimpleNamespace:
    """A registry whose `solve` records (solver, budget) and returns a schedule of makespan 12; a Ctrl-C in
    place of call `stop` (1-based; None: never)."""
    def solve(problem: str, inst: Any, solver: str, budget: int, **kw: Any) -> SimpleNamespace:
        if stop is not None and len(calls) + 1 >= stop:
            raise KeyboardInterrupt
        calls.append((solver, budget))
        return SimpleNamespace(schedule=object(), objective=12.0, solver=solver, status="feasible", peak_memory=1)

    return SimpleNamespace(solve=solve)


def offload_argv(out: Path, *chains: Path) -> list[str]:
    return ["--chains", *map(str, chains), "--quick", "--bandwidths", "1e9", "--slots", "10", "--out", str(out)]


def test_offload_two_chains_of_one_name_are_refused_before_any_work(tmp_path, monkeypatch, capsys):
    mod = bench("bench_offload")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "zoo")
    monkeypatch.setattr(mod, "registry", SimpleNamespace(solve=no_work))
    first = chain_copy(TINY, tmp_path / "d1.json", name="net")
    second = chain_copy(CNN, tmp_path / "d2.json", name="net")
    out = tmp_path / "d.csv"
    code, _, err = call_main(mod.main, offload_argv(out, first, second), capsys)
    assert code == 2, (code, err)
    one_error_line(err, "--chains", "'net'", str(second))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d1.json", "d2.json"]


def test_offload_chains_of_distinct_names_run(tmp_path, monkeypatch, capsys):
    mod = bench("bench_offload")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "zoo")
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(mod, "registry", fake_solve(calls))
    first = chain_copy(TINY, tmp_path / "d1.json", name="net-a")
    second = chain_copy(CNN, tmp_path / "d2.json", name="net-b")
    out = tmp_path / "d.csv"
    code, _, err = call_main(mod.main, offload_argv(out, first, second), capsys)
    assert code == 0, err
    with out.open(newline="") as fh:
        models = [r["model"] for r in csv.DictReader(fh)]
    assert models == ["net-a"] * 9 + ["net-b"] * 9  # 3 budgets x 3 strategies each


def interrupted_once(mod: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: Any, chain: Path, out: Path) -> None:
    """Run bench_offload on `chain` into `out` and Ctrl-C it once its first point (5 solver runs) is solved."""
    monkeypatch.setattr(mod, "registry", fake_solve([], stop=6))
    code, _, err = call_main(mod.main, offload_argv(out, chain), capsys)
    assert code == 130 and partial_of(out).exists(), err


@pytest.mark.parametrize("edited", [False, True], ids=["same-chain-resumes", "edited-chain-runs-again"])
def test_offload_resumes_only_the_same_chain_contents(tmp_path, monkeypatch, capsys, edited):
    mod = bench("bench_offload")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "zoo")
    chain = chain_copy(TINY, tmp_path / "c.json")
    out = tmp_path / "s.csv"
    interrupted_once(mod, monkeypatch, capsys, chain, out)
    if edited:
        chain_copy(TINY, chain, tape_factor=4)  # the same path and name, other sizes: other budgets
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(mod, "registry", fake_solve(calls))
    code, _, err = call_main(mod.main, offload_argv(out, chain), capsys)
    assert code == 0, err
    assert len(calls) == 5 * (3 if edited else 2), err  # every point again, or the two not finished
    peak = mod.reference_peak(mod.Chain.load(chain))
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["budget"]) for r in rows] == [int(peak * f) for f in mod.QUICK_FRACTIONS for _ in range(3)]
    assert not partial_of(out).exists()
