"""Fix 46 (benchcsv): the CSVs a bench reads back (experiments/benchtable.py and the bench scripts).

1. A partial file edited by hand (text where a number was written, a column added, a byte that is not UTF-8) is
   damage, as a cut row is: the edited row's cell runs again (a note on stderr), or the file is not resumed; the
   table is written, never a traceback.
2. ``--out x.png`` (or .pdf) would have the bench's figure replace its own table: refused before any work (exit 2,
   one line naming --out; `benchtable.figure_beside`).
3. and 4. A CSV a bench reads back (--append, --reestimate, --resume, --merge, --replot) with a surplus field, a
   missing column or bytes that are not UTF-8: one line naming the file, exit 2, before any work
   (`benchtable.read_table`).
5. bench_chain_dp checks every (L, slots) table size before any work and suggests a slot count that fits.
6. A folder where a bench's partial file goes: refused by `check_out` before any work.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import call_main, interrupt_at, partial_of

ROOT = Path(__file__).resolve().parents[1]
DP_ARGS = ["--lengths", "10", "11", "12", "--slots", "50", "--repeat", "1"]


def _table(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _one_error(code: Any, err: str, *words: str) -> None:
    """Exit 2 and one line on stderr holding every word of `words`, no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), err


# ------------------------------------------------------------------ 1. an edited partial file
def _dp_partial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    """bench_chain_dp interrupted at its third cell: its table's path (the partial file holds two rows)."""
    from memsched.experiments import bench_chain_dp as bench

    out = tmp_path / "dp.csv"
    with monkeypatch.context() as patch:
        patch.setattr(bench, "run_one", interrupt_at(3, bench.run_one))
        code, _, err = call_main(bench.main, [*DP_ARGS, "--out", str(out)], capsys)
    assert code == 130 and partial_of(out).is_file(), err
    return out


def _edit(path: Path, row: int, column: str, value: bytes) -> None:
    """Set `column` of the `row`-th record (0-based, after the settings line and the header) of the partial file."""
    lines = path.read_bytes().split(b"\n")
    header = lines[1].decode().split(",")
    cells = lines[2 + row].split(b",")
    cells[header.index(column)] = value
    lines[2 + row] = b",".join(cells)
    path.write_bytes(b"\n".join(lines))


def _add_column(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[1:] = [line + (b",zzz" if k == 0 else b",1") for k, line in enumerate(lines[1:]) if line]
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.parametrize("edit, reruns", [
    (lambda p: _edit(p, 0, "table_s", b"abc"), 2),  # text in a number column: the first cell reruns
    (lambda p: _edit(p, 1, "kernel", b"c\xff"), 2),  # a byte that is not UTF-8: the second cell reruns
    (lambda p: _edit(p, 0, "recomputations", b""), 2),  # a value gone where every row had one
    (_add_column, 3),  # a column added: the file is not resumed
], ids=["text-in-number", "not-utf8", "emptied", "extra-column"])
def test_an_edited_partial_file_is_damage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str], edit: Any, reruns: int) -> None:
    from memsched.experiments import bench_chain_dp as bench

    out = _dp_partial(tmp_path, monkeypatch, capsys)
    edit(partial_of(out))
    calls: list[int] = []
    monkeypatch.setattr(bench, "run_one", interrupt_at(None, bench.run_one, calls))
    code, _, err = call_main(bench.main, [*DP_ARGS, "--out", str(out)], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert len(calls) == reruns, err
    assert str(partial_of(out)) in err and ("damaged" in err or "not resumed" in err), err
    rows = _table(out)
    assert [(r["L"], r["slots"]) for r in rows] == [("10", "50"), ("11", "50"), ("12", "50")]
    assert all(float(r["table_s"]) >= 0 and r["kernel"] and r["recomputations"] for r in rows)
    assert not partial_of(out).exists()


def test_an_unedited_partial_file_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The kinds check refuses nothing the bench wrote itself: only the cell never reached runs."""
    from memsched.experiments import bench_chain_dp as bench

    out = _dp_partial(tmp_path, monkeypatch, capsys)
    calls: list[int] = []
    monkeypatch.setattr(bench, "run_one", interrupt_at(None, bench.run_one, calls))
    code, _, err = call_main(bench.main, [*DP_ARGS, "--out", str(out)], capsys)
    assert code == 0 and len(calls) == 1 and "damaged" not in err, err


def test_resumable_keeps_mixed_kinds_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A column the bench filled with a number in one row and text, None or nothing in others comes back as written;
    the same text in a column that held numbers only is damage."""
    from memsched.experiments.benchtable import resumable

    out = tmp_path / "t.csv"
    rows = [{"k": 1, "v": 2.5, "s": "x"}, {"k": 2, "v": "n/a", "s": None}, {"k": 3, "v": None}]
    with pytest.raises(KeyboardInterrupt), resumable(out, ["k", "v", "s"], {"a": 1}, ["k"]) as table:
        for row in rows:
            table.add(dict(row))
        raise KeyboardInterrupt
    with resumable(out, ["k", "v", "s"], {"a": 1}, ["k"]) as table:
        assert [table.kept(k) for k in (1, 2, 3)] == [[row] for row in rows]
    text = partial_of(out)
    assert not text.exists()
    with pytest.raises(KeyboardInterrupt), resumable(out, ["k", "v", "s"], {"a": 1}, ["k"]) as table:
        table.add({"k": 1, "v": 2.5, "s": "x"}, {"k": 1, "v": 3.5, "s": "y"})
        table.add({"k": 2, "v": 1.0, "s": "z"})
        raise KeyboardInterrupt
    data = text.read_text().replace("3.5", "n/a")
    text.write_text(data)
    capsys.readouterr()
    with resumable(out, ["k", "v", "s"], {"a": 1}, ["k"]) as table:
        assert table.kept(1) is None and table.kept(2) == [{"k": 2, "v": 1.0, "s": "z"}]
    assert "2 damaged rows" in capsys.readouterr().err


# ------------------------------------------------------------------ 2. --out that is the figure's path
@pytest.mark.parametrize("module, argv", [
    ("bench_join", ["--quick", "--figure"]),
    ("bench_papers_graphs", ["--merge", str(ROOT / "results" / "bench_papers_graphs_small.csv")]),
    ("bench_pipeline_pipedream", ["--quick"]),
])
def test_out_named_as_the_figure_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], module: str,
                                            argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    bench = importlib.import_module(f"memsched.experiments.{module}")
    out = tmp_path / "sub" / "x.png"
    monkeypatch.setattr(bench, "figure", lambda *a, **k: pytest.fail("drew a figure"))
    code, _, err = call_main(bench.main, [*argv, "--out", str(out)], capsys)
    _one_error(code, err, "--out", str(out))
    assert not (tmp_path / "sub").exists()


def test_offload_out_named_as_its_pdf_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import bench_offload as bench

    out = tmp_path / "x.pdf"
    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("ran the grid"))
    code, _, err = call_main(bench.main, ["--quick", "--chains", str(ROOT / "examples" / "tiny.json"), "--out",
                                          str(out)], capsys)
    _one_error(code, err, "--out", str(out))
    assert not out.exists()


# ------------------------------------------------------------------ 3. and 4. CSVs read back
def test_chain_exact_append_to_a_row_with_a_surplus_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import bench_chain_exact as bench

    out = tmp_path / "ce.csv"
    out.write_text("L,seed,solver\n5,0,cpsat,extra\n")
    monkeypatch.setattr(bench, "solve", lambda *a, **k: pytest.fail("ran a solver"))
    code, _, err = call_main(bench.main, ["--lengths", "5", "--fractions", "0.5", "--solvers", "cpsat",
                                          "--append", "--out", str(out)], capsys)
    _one_error(code, err, "--out", str(out))
    assert out.read_text() == "L,seed,solver\n5,0,cpsat,extra\n"


def _model_memory_csv(tmp_path: Path, *, surplus: bool = False) -> Path:
    from memsched.experiments.bench_model_memory import FIELDS

    path = tmp_path / "mm.csv"
    row = ",".join("1" for _ in FIELDS) + (",9" if surplus else "")
    path.write_text(",".join(FIELDS) + "\n" + row + "\n")
    return path


@pytest.mark.parametrize("flag", ["--reestimate", "--resume"])
@pytest.mark.parametrize("damage", ["surplus", "not-utf8"])
def test_model_memory_reads_back_a_damaged_csv_as_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            flag: str, damage: str) -> None:
    from memsched.experiments import bench_model_memory as bench

    path = _model_memory_csv(tmp_path, surplus=damage == "surplus")
    if damage == "not-utf8":
        path.write_bytes(path.read_bytes().replace(b"\n1,", b"\n\xff,", 1))
    before = path.read_bytes()
    code, _, err = call_main(bench.main, [flag, "--sizes", "5", "--out", str(path)], capsys)
    _one_error(code, err, str(path))
    assert path.read_bytes() == before


def test_papers_graphs_merge_of_a_file_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import bench_papers_graphs as bench

    src = tmp_path / "in.csv"
    src.write_bytes((ROOT / "results" / "bench_papers_graphs_small.csv").read_bytes().replace(b"\n", b"\n\xff", 1))
    out = tmp_path / "out.csv"
    code, _, err = call_main(bench.main, ["--merge", str(src), "--out", str(out)], capsys)
    _one_error(code, err, "--merge", str(src))
    assert not out.exists()


@pytest.mark.parametrize("data", [b"a,b\n1,2\n", b"model,size,tool\n\xff,small,x\n", b"model,size,tool\ngpt2,s\n"],
                         ids=["other-columns", "not-utf8", "short-row"])
def test_vs_torch_replot_of_a_bad_csv(tmp_path: Path, data: bytes) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "vt.csv"
    out.write_bytes(data)
    res = subprocess.run([sys.executable, "-m", "memsched.experiments.bench_vs_torch", "--replot", "--out", str(out)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    _one_error(res.returncode, res.stderr, "--out", str(out))
    assert out.read_bytes() == data and not out.with_suffix(".png").exists()


def test_read_table_checks(tmp_path: Path) -> None:
    from memsched.experiments.benchtable import read_table
    from memsched.solvers.errors import InputError

    path = tmp_path / "t.csv"
    path.write_text('a,b\n1,"x\ny"\n\n3,4\n')
    assert read_table(path, required=("a",), known=("a", "b")) == (["a", "b"], [{"a": "1", "b": "x\ny"},
                                                                               {"a": "3", "b": "4"}])
    for data, words in [(b"a,b\n1\n", "line 2"), (b"a,b\n1,2\n", "no column c"), (b"a,b,c\n", "'c'"),
                        (b"a,\xfe\n", "UTF-8"), (b'a\n"1\n', "not CSV")]:
        path.write_bytes(data)
        with pytest.raises(InputError, match=words) as info:
            read_table(path, field="--x", required=("a", "c") if words == "no column c" else ("a",), known=("a", "b"))
        assert "--x" in str(info.value) and str(path) in str(info.value)


# ------------------------------------------------------------------ 5. every table size checked first
def test_chain_dp_checks_every_table_size_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import bench_chain_dp as bench
    from memsched.solvers.chain import dp

    out = tmp_path / "c8" / "x.csv"
    monkeypatch.setattr(bench, "run_one", lambda *a, **k: pytest.fail("ran a row"))
    code, _, err = call_main(bench.main, ["--lengths", "50", "800", "--slots", "500", "--out", str(out)], capsys)
    _one_error(code, err, "--slots", "L=800")
    assert not (tmp_path / "c8").exists()
    suggested = int(err.split("--slots ")[-1].split()[0])
    assert dp.table_cells(800, suggested) <= dp.MAX_CELLS < dp.table_cells(800, 500)
    code, _, err = call_main(bench.main, ["--lengths", "20000", "--slots", "5", "--out", str(out)], capsys)
    _one_error(code, err, "--lengths")


# ------------------------------------------------------------------ 6. a folder where the partial file goes
def test_a_folder_in_place_of_the_partial_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from memsched.experiments import bench_chain_dp as bench

    out = tmp_path / "d1" / "x.csv"
    partial_of(out).mkdir(parents=True)
    monkeypatch.setattr(bench, "run_one", lambda *a, **k: pytest.fail("ran a row"))
    code, _, err = call_main(bench.main, ["--lengths", "10", "--slots", "50", "--out", str(out)], capsys)
    _one_error(code, err, "--out", str(partial_of(out)))
    assert not out.exists()


def test_vs_torch_duel_names_csv_for_its_table(tmp_path):
    """vs_torch_duel reads its --csv table through the shared reader: a bad one is named as --csv (it has an --out)."""
    import subprocess
    import sys

    bad = tmp_path / "nocol.csv"
    bad.write_text("foo,bar\n1,2\n")
    res = subprocess.run([sys.executable, "-m", "memsched.experiments.vs_torch_duel", "--csv", str(bad)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 2 and f"{bad}: --csv: no column model, size" in res.stderr, res.stderr
