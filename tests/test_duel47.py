"""experiments/vs_torch_duel.py: names and points that cannot be dueled are one line and exit 2 before any work;
each duel row carries both sides' gradient checks and the duel verdict counts only duels whose checks passed (an
older duels CSV without them keeps its verdict); the figure gives each tool and granularity a fixed style."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import VS_TORCH_ROWS, vs_torch_row

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("model", "size", "tool", "setting", "status", "peak_bytes", "time_ms", "overhead", "overhead_unpaired")


_row = vs_torch_row
ROWS = VS_TORCH_ROWS


def _write(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _no_work(calls: list[str], name: str):
    def record(*args, **kwargs):
        calls.append(name)
        return []
    return record


@pytest.mark.parametrize(
    ("rows", "argv", "named"),
    [
        (ROWS, ["--models", "gpt3"], "gpt3"),
        (ROWS, ["--sizes", "smal"], "smal"),
        (ROWS, ["--models", "gpt2", "--sizes", "large"], "large"),  # a known size --csv has no row of
        ([_row("checkpoint-per-block", "4 blocks", 100, 0.5, model="gpt3")], [], "gpt3/tiny"),
        ([_row("checkpoint_sequential", "segments=9", 100, 0.5)], [], "segments=9"),  # gpt2 tiny: 4 blocks
        ([_row("checkpoint-per-block", "5 blocks", 100, 0.5)], [], "5 blocks"),
    ],
)
def test_what_cannot_be_dueled_is_one_line_and_exit_2_before_any_work(tmp_path, capsys, monkeypatch, rows, argv,
                                                                      named):
    from memsched.experiments import vs_torch_duel

    calls: list[str] = []
    monkeypatch.setattr(vs_torch_duel, "duel", _no_work(calls, "duel"))
    monkeypatch.setattr(vs_torch_duel, "duel_figure", _no_work(calls, "figure"))
    src = _write(tmp_path / "vs.csv", rows)
    assert vs_torch_duel.main(["--csv", str(src), "--rounds", "1", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vs_torch_duel: ") and "\n" not in err and named in err, err
    assert calls == [] and sorted(p.name for p in tmp_path.iterdir()) == ["vs.csv"]


def test_a_duel_row_carries_both_gradient_checks(monkeypatch):
    pytest.importorskip("torch")
    import memsched.models.zoo
    from memsched.experiments import bench_vs_torch, vs_torch_duel
    from memsched.experiments.bench_vs_torch import Point

    theirs = Point({"tool": "checkpoint_sequential", "setting": "segments=2", "peak_bytes": 600, "grad_ok": True},
                   lambda: 2.0)

    def planned(base, name, sizes, granularity, *args, **kwargs):  # the layer chain's plan trains something else
        row = {"budget": 600, "peak_bytes": 590, "grad_ok": granularity == "block"}
        return [Point(row, lambda: 1.0)]

    monkeypatch.setattr(memsched.models.zoo, "build_model", lambda *a, **k: object())
    monkeypatch.setattr(vs_torch_duel, "their_points", lambda *a: ([theirs], []))
    monkeypatch.setattr(bench_vs_torch, "memsched_points", planned)
    out = vs_torch_duel.duel("gpt2", "tiny", [ROWS[1]], rounds=2, repeats=1)
    assert {d["granularity"]: (d["grad_ok"], d["their_grad_ok"]) for d in out} == {
        "block": (True, True), "layer": (False, True)}
    assert all(d["ratio"] == 0.5 for d in out)  # the times are kept; the verdict weighs the checks


def _duel(setting: str, ratio: float, granularity: str, **checks: str) -> dict:
    return {"model": "gpt2", "size": "tiny", "tool": "checkpoint_sequential", "setting": setting,
            "granularity": granularity, "their_peak": "600", "memsched_peak": "590", "peak_ok": "True",
            "memsched_budget": "600", "ratio": str(ratio), "ratio_ci": "0.0", "rounds": "2", **checks}


@pytest.mark.parametrize(
    ("setting", "ratio", "checks", "lost"),
    [
        ("segments=2", 0.9, {"grad_ok": "True", "their_grad_ok": "True"}, ()),  # a passed duel matches it
        ("segments=2", 0.9, {"grad_ok": "False", "their_grad_ok": "True"}, ("segments=2",)),  # no memsched plan
        ("segments=2", 0.9, {}, ()),  # unknown checks (an older duels CSV): taken as passed
        ("segments=3", 1.5, {"grad_ok": "True", "their_grad_ok": "False"}, None),  # no evidence: no duel verdict
        ("segments=3", 1.5, {"grad_ok": "True", "their_grad_ok": "True"}, ("segments=2", "segments=3")),
    ],
)
def test_the_duel_verdict_counts_only_duels_whose_gradient_checks_passed(tmp_path, monkeypatch, setting, ratio,
                                                                         checks, lost):
    from memsched.experiments import vs_torch_duel
    from memsched.experiments.vs_torch_report import read_rows

    def dueled(name, size, rows, rounds, repeats):  # as `duel` returns them: numbers and booleans
        typed = {"ratio": ratio, "ratio_ci": 0.0, "ratio_of_least": ratio, "peak_ok": True}
        return [{**_duel(r["setting"], ratio, g), **typed, **{k: v == "True" for k, v in checks.items()}}
                for r in rows if r["setting"] == setting for g in ("block", "layer")]

    monkeypatch.setattr(vs_torch_duel, "duel", dueled)
    src = _write(tmp_path / "vs.csv", ROWS)
    assert vs_torch_duel.main(["--csv", str(src), "--rounds", "2", "--all"]) == 0
    (v,) = read_rows(tmp_path / "vs_summary.csv")
    assert v["unmatched_duel"] == "; ".join(f"checkpoint_sequential {s}" for s in lost or ())
    assert v["curve_on_or_below_duel"] == ("" if lost is None else str(not lost))  # "": no duel counts
    duels = read_rows(tmp_path / "vs_duels.csv")  # the checks are kept in the CSV, as "True"/"False"
    assert len(duels) == 2 and all(d.get("grad_ok", "") == checks.get("grad_ok", "") for d in duels)
    assert all(d.get("their_grad_ok", "") == checks.get("their_grad_ok", "") for d in duels)


def test_an_older_duels_csv_keeps_its_duels_and_their_check_is_looked_up_in_the_bench_rows():
    from memsched.experiments.vs_torch_duel import checked_duels
    from memsched.experiments.vs_torch_report import duels_path, read_rows

    old = [_duel("segments=2", 0.9, "block"), _duel("segments=3", 0.9, "block")]
    bench = [{**r, "grad_ok": "False" if r["setting"] == "segments=3" else "True"} for r in ROWS]
    assert checked_duels(old, bench) == old[:1]  # segments=3's tool failed its check in the bench
    assert checked_duels(old, []) == old and "grad_ok" not in old[0]  # unknown: kept, the input not changed
    csv_path = ROOT / "results" / "bench_vs_torch.csv"
    committed = read_rows(duels_path(csv_path))
    assert committed and checked_duels(committed, read_rows(csv_path)) == committed


def test_the_figure_gives_each_tool_and_granularity_a_fixed_colour_and_marker(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex
    from memsched.experiments import vs_torch_report
    from memsched.experiments.vs_torch_duel import duel_figure

    figs: list = []
    monkeypatch.setattr(vs_torch_report, "save_png", lambda fig, path: figs.append(fig))
    tools = {"checkpoint_sequential": "segments=2", "checkpoint-per-block": "4 blocks"}
    duels = [{**_duel(setting, 1.0, g, grad_ok="True"), "tool": tool, "size": size}
             for size in ("tiny", "small") for tool, setting in tools.items() for g in ("block", "layer")]
    duels.append({**_duel("segments=3", 1.0, "block", grad_ok="False"), "size": "small"})  # not drawn
    duel_figure(duels, tmp_path / "d.png")
    (fig,) = figs
    styles: dict[str, set] = {}
    drawn = []
    for ax in fig.axes:
        for c in ax.containers:
            line = c.lines[0]
            styles.setdefault(c.get_label(), set()).add((to_hex(line.get_color()), line.get_marker()))
            drawn.append(len(line.get_xdata()))
    assert set(styles) == {f"{t} ({g})" for t in tools for g in ("block", "layer")}
    assert all(len(s) == 1 for s in styles.values())  # the same style in both panels
    pairs = {label: next(iter(s)) for label, s in styles.items()}
    assert len(set(pairs.values())) == 4
    assert {m for label, (_, m) in pairs.items() if "(block)" in label} == {"o"}
    assert {m for label, (_, m) in pairs.items() if "(layer)" in label} == {"s"}
    assert pairs["checkpoint_sequential (block)"][0] == pairs["checkpoint_sequential (layer)"][0]
    assert drawn == [1] * 8  # segments=3 (its plan failed its gradient check) is not drawn
