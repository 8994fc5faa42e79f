"""Fix 47 (bench_vs_torch and its report): 1. an empty ``--models``/``--sizes`` is one line and exit 2, --out
untouched (it was wiped to its header, then a traceback); 2. ``--only-compile --update`` drops only torch.compile's
duels (it dropped every duel of the model and size); 3. a value that is not a number in the CSV or the duels is an
`InputError` naming the file, the row and the column, and ``--replot`` leaves --out as it is (it rewrote it, then
a traceback); 4. ``--no-probe`` reaches torch.compile's rows (the allocator probe ran there regardless), and an
inductor row then says it has no peak; 5. each tool has one (colour, marker) pair in every panel of the figure, none
shared (every curve was "o-", colours by drawing order per panel)."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import call_main
from memsched.experiments import bench_vs_torch, vs_torch_report
from memsched.experiments.vs_torch_report import DUEL_COLUMNS
from memsched.solvers.errors import InputError

AOT = "torch.compile(aot_eager, min-cut)"


def _row(tool: str, setting: str, peak: int, overhead: float, model: str = "gpt2", size: str = "tiny") -> dict:
    """A measured row of the bench's CSV (bytes, paired and unpaired overheads)."""
    return {"model": model, "size": size, "tool": tool, "setting": setting, "status": "ok", "peak_bytes": peak,
            "alloc_peak": peak + 10, "time_ms": 10 * (1 + overhead), "overhead": overhead,
            "overhead_unpaired": overhead, "grad_ok": "True", "load": 1.0, "rounds": 3}


def _write(path: Path, rows: list[dict], columns: tuple[str, ...] = bench_vs_torch.COLUMNS) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, restval="")
        w.writeheader()
        w.writerows(rows)
    return path


def _duel(tool: str, setting: str) -> dict:
    return {"model": "gpt2", "size": "tiny", "tool": tool, "setting": setting, "granularity": "block",
            "their_peak": 100, "memsched_peak": 90, "peak_ok": "True", "memsched_budget": 100, "ratio": 0.9,
            "ratio_ci": 0.01, "ratio_of_least": 0.9, "their_time_ms": 10.0, "memsched_time_ms": 9.0, "rounds": 5,
            "load": 1.0}


def _one_error(code: Any, err: str, *words: str) -> None:
    """Exit 2, one line on stderr holding every word of `words`, no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), err


# ------------------------------------------------------------------ 1. no model or size at all
@pytest.mark.parametrize("argv", [["--models", ""], ["--models", ","], ["--sizes", ""]],
                         ids=["empty", "comma", "sizes"])
def test_no_model_or_size_is_refused_before_anything_is_written(tmp_path: Path, argv: list[str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = _write(tmp_path / "vs.csv", [_row("checkpoint-per-block", "4 blocks", 100, 0.5)])
    before = out.read_bytes()
    code, _, err = call_main(bench_vs_torch.main, [*argv, "--out", str(out)], capsys)
    _one_error(code, err, "bench_vs_torch", "no model and size")
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vs.csv"]


# ------------------------------------------------------------------ 2. --only-compile --update and the duels
def test_only_compile_update_drops_only_torch_compiles_duels(tmp_path: Path) -> None:
    out = _write(tmp_path / "vs.csv", [_row("checkpoint-per-block", "4 blocks", 100, 0.5),
                                       _row(AOT, "activation_memory_budget=1.0", 120, 0.9)])
    duels = [_duel("checkpoint-per-block", "4 blocks"), _duel(AOT, "activation_memory_budget=1.0"),
             {**_duel(AOT, "activation_memory_budget=1.0"), "size": "small"}]
    columns = (*DUEL_COLUMNS, "note")  # a column a later vs_torch_duel may add after the report's: kept
    dpath = _write(vs_torch_report.duels_path(out), [{**d, "note": "x"} for d in duels], columns)
    new = [_row(AOT, "activation_memory_budget=1.0", 110, 0.8)]
    args = argparse.Namespace(update=True, replot=False, only_compile=True)
    kept = bench_vs_torch._write_rows(new, out, [("gpt2", "tiny")], args)
    assert [(d["tool"], d["size"]) for d in kept] == [("checkpoint-per-block", "tiny"), (AOT, "small")]
    assert [(d["tool"], d["size"]) for d in vs_torch_report.read_rows(dpath)] == [("checkpoint-per-block", "tiny"),
                                                                                  (AOT, "small")]
    assert dpath.read_text().splitlines()[0] == ",".join(columns)
    rows = vs_torch_report.read_rows(out)
    assert [(r["tool"], r["peak_bytes"]) for r in rows] == [("checkpoint-per-block", "100"), (AOT, "110")]
    # a whole run of the model and size replaces every point: all its duels go
    full = argparse.Namespace(update=True, replot=False, only_compile=False)
    assert [d["size"] for d in bench_vs_torch._write_rows(new, out, [("gpt2", "tiny")], full)] == ["small"]


# ------------------------------------------------------------------ 3. numbers in the CSV, --replot
@pytest.mark.parametrize(("column", "value"), [("peak_bytes", "abc"), ("overhead", "abc"), ("alloc_peak", "1.5"),
                                               ("time_ms", "nan")])
def test_read_rows_names_a_value_that_is_not_a_number(tmp_path: Path, column: str, value: str) -> None:
    rows = [_row("torch", "no checkpointing", 90, 0.0), {**_row("checkpoint-per-block", "4 blocks", 100, 0.5),
                                                         column: value}]
    path = _write(tmp_path / "vs.csv", rows)
    with pytest.raises(InputError) as info:
        vs_torch_report.read_rows(path)
    message = str(info.value)
    assert str(path) in message and "row 2" in message and column in message and repr(value) in message
    assert "\n" not in message


def test_read_rows_checks_the_duels_numbers_and_keeps_empty_values(tmp_path: Path) -> None:
    ok = _write(tmp_path / "ok.csv", [{**_row("torch", "plain", 90, 0.0), "alloc_peak": "", "overhead_ci": ""}])
    assert vs_torch_report.read_rows(ok)[0]["alloc_peak"] == ""
    bad = _write(tmp_path / "d.csv", [_duel("checkpoint-per-block", "4 blocks") | {"ratio": "fast"}], DUEL_COLUMNS)
    with pytest.raises(InputError, match="ratio 'fast'"):
        vs_torch_report.read_rows(bad)


@pytest.mark.parametrize("case", ["peak", "overhead", "duel", "header-only"])
def test_replot_of_a_bad_csv_is_one_line_and_leaves_it(tmp_path: Path, case: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    good = [_row("checkpoint-per-block", "4 blocks", 100, 0.5), _row("memsched-block", "rotor", 90, 0.4)]
    rows = {"peak": [{**good[0], "peak_bytes": "abc"}, good[1]], "overhead": [good[0], {**good[1], "overhead": "x"}],
            "duel": good, "header-only": []}[case]
    out = _write(tmp_path / "vs.csv", rows)
    if case == "duel":
        _write(vs_torch_report.duels_path(out), [_duel("checkpoint-per-block", "4 blocks") | {"their_peak": "?"}],
               DUEL_COLUMNS)
    before = out.read_bytes()
    code, _, err = call_main(bench_vs_torch.main, ["--replot", "--out", str(out)], capsys)
    _one_error(code, err, str(vs_torch_report.duels_path(out) if case == "duel" else out))
    assert out.read_bytes() == before
    assert not out.with_suffix(".png").exists() and not (tmp_path / "vs_summary.csv").exists()


def test_replot_does_not_rewrite_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A CSV of fewer columns (an older run's) stays as it is: only the figure and summary are written."""
    columns = ("model", "size", "tool", "setting", "status", "peak_bytes", "time_ms", "overhead")
    out = _write(tmp_path / "vs.csv", [{c: r[c] for c in columns} for r in (
        _row("checkpoint-per-block", "4 blocks", 100, 0.5), _row("memsched-block", "rotor", 90, 0.4))], columns)
    before = out.read_bytes()
    code, _, err = call_main(bench_vs_torch.main, ["--replot", "--out", str(out)], capsys)
    assert code == 0, err
    assert out.read_bytes() == before
    assert out.with_suffix(".png").exists() and (tmp_path / "vs_summary.csv").exists()


# ------------------------------------------------------------------ 4. --no-probe and torch.compile
def test_torch_points_passes_the_probe_setting_to_torch_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from memsched.experiments import vs_torch_compile

    seen: list[Any] = []

    def fake(*args: Any, **kwargs: Any) -> list:
        seen.append(kwargs.get("probe", args[10] if len(args) > 10 else "not passed"))
        return []

    monkeypatch.setattr(vs_torch_compile, "compile_points", fake)
    model = SimpleNamespace(blocks=[torch.nn.Linear(4, 4)], loss_fn=lambda y, t: y.sum(),
                            example_input=torch.ones(2, 4), target=None)
    for probe in (False, True):
        points, _ = bench_vs_torch.torch_points({}, model, probe, ["aot"], compile_budgets=(1.0,), only_compile=True)
        assert [p.row["tool"] for p in points] == ["torch"]
    assert seen == [False, True]


@pytest.mark.parametrize("kind", ["aot", "inductor"])
def test_compile_points_measures_without_the_probe(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    torch = pytest.importorskip("torch")
    from memsched.experiments import vs_torch_compile

    probes: list[bool] = []

    def memory(step: Any, x: Any, params: Any, probe: bool, seed: int = 0, tracker: Any = None) -> tuple:
        probes.append(probe)
        return 64, (80 if probe else None), []

    monkeypatch.setattr(vs_torch_compile, "compile_step", lambda *a: ((lambda a: a.sum()), 0.5, ["graph"]))
    monkeypatch.setattr(bench_vs_torch, "memory", memory)
    seq = torch.nn.Sequential(torch.nn.Linear(2, 2))
    (point,) = vs_torch_compile.compile_points({}, seq, None, torch.ones(1, 2), None, [], [], [kind], (1.0,),
                                               probe=False)
    assert probes == [False]
    row = point.row
    assert row["alloc_peak"] is None and row["status"].startswith("ok")
    if kind == "inductor":
        assert row["peak_bytes"] is None and "no peak" in row["status"] and "--no-probe" in row["status"]
        assert vs_torch_report._peak(row) is None
    else:
        assert row["peak_bytes"] == 64 and "no peak" not in row["status"]


# ------------------------------------------------------------------ 5. the figure's styles
def test_each_tool_has_one_colour_and_marker_in_every_panel(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    figs: list[Any] = []
    monkeypatch.setattr(vs_torch_report, "save_png", lambda fig, path: figs.append(fig))
    tools = ["checkpoint_sequential", AOT, "memsched-block", "memsched-layer", "checkpoint-per-block"]
    rows = []
    for size, order in (("tiny", tools), ("small", tools[::-1])):  # drawn in another order in each panel
        for i, tool in enumerate(order):
            rows += [_row(tool, f"s{k}", 100 + 10 * i + k, 0.1 * i + 0.01 * k, size=size) for k in range(2)]
    rows = [{k: str(v) for k, v in r.items()} for r in rows]
    vs_torch_report.figure(rows, tmp_path / "f.png")
    (fig,) = figs
    styles: dict[str, set] = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            styles.setdefault(line.get_label(), set()).add((line.get_color(), line.get_marker()))
    assert sorted(styles) == sorted(tools)
    assert all(len(s) == 1 for s in styles.values()), styles  # the same pair in every panel
    pairs = [next(iter(s)) for s in styles.values()]
    assert len({c for c, _ in pairs}) == len(tools) and len({m for _, m in pairs}) == len(tools), styles
