"""experiments/vs_torch_duel.py: which points are dueled, a tiny duel end to end (memsched's plan
at the point's own peak, peaks checked, ratios of the same rounds), and how the duels change
the summary's verdict (vs_torch_report.verdicts)."""

from __future__ import annotations

import csv

import pytest
from conftest import VS_TORCH_ROWS, vs_torch_row
from memsched.experiments.vs_torch_report import DUEL_COLUMNS, contested, read_rows, verdicts

_row = vs_torch_row
ROWS = VS_TORCH_ROWS


def _duel(setting: str, ratio: float, peak_ok: bool = True, granularity: str = "block") -> dict:
    return {
        "model": "gpt2",
        "size": "tiny",
        "tool": "checkpoint_sequential",
        "setting": setting,
        "granularity": granularity,
        "ratio": str(ratio),
        "peak_ok": str(peak_ok),
    }


def test_without_duels_the_duel_verdict_is_absent():
    (v,) = verdicts(ROWS)
    assert v["curve_on_or_below"] is False and v["unmatched"] == "checkpoint_sequential segments=2"
    assert "curve_on_or_below_duel" not in v


@pytest.mark.parametrize(
    ("ratio", "peak_ok", "verdict"), [(1.01, True, True), (1.05, True, False), (1.01, False, False)]
)
def test_a_duel_decides_its_point_and_the_others_keep_their_paired_verdict(ratio, peak_ok, verdict):
    (v,) = verdicts(ROWS, [_duel("segments=2", ratio, peak_ok), _duel("segments=2", 1.30, granularity="layer")])
    assert v["curve_on_or_below_duel"] is verdict  # the better granularity counts; an invalid duel does not
    assert v["unmatched_duel"] == ("" if verdict else "checkpoint_sequential segments=2")


def test_a_duel_can_also_break_a_point_the_paired_times_matched():
    (v,) = verdicts(ROWS, [_duel("segments=3", 1.10)])
    assert v["curve_on_or_below"] is False  # segments=2, undueled: still unmatched
    assert v["unmatched_duel"] == "checkpoint_sequential segments=2; checkpoint_sequential segments=3"


def _bench_csv(tmp_path, rows: list[dict]):
    """`rows` written as bench_vs_torch's CSV in `tmp_path`: its path."""
    src = tmp_path / "vs.csv"
    with src.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ROWS[0]))
        w.writeheader()
        w.writerows(rows)
    return src


def test_tiny_duel_end_to_end(tmp_path):
    pytest.importorskip("torch")
    from memsched.experiments import vs_torch_duel

    src = _bench_csv(tmp_path, ROWS[:2])  # no memsched row: segments=2 is contested
    assert vs_torch_duel.main(["--csv", str(src), "--rounds", "3", "--repeats", "1"]) == 0
    duels = read_rows(tmp_path / "vs_duels.csv")
    assert list(duels[0]) == list(DUEL_COLUMNS)
    assert {(d["setting"], d["granularity"]) for d in duels} == {("segments=2", "block"), ("segments=2", "layer")}
    for d in duels:
        assert d["peak_ok"] == "True" and int(d["memsched_peak"]) <= int(d["their_peak"])
        assert int(d["memsched_budget"]) <= int(d["their_peak"]) and d["rounds"] == "3"
        assert float(d["ratio"]) > 0 and float(d["ratio_ci"]) == 0.0  # fewer than 4 rounds: no interval
        assert float(d["their_time_ms"]) > 0 and float(d["memsched_time_ms"]) > 0
    (v,) = read_rows(tmp_path / "vs_summary.csv")
    assert v["curve_on_or_below_duel"] in ("True", "False")
    assert vs_torch_duel.main(["--csv", str(tmp_path / "missing.csv")]) == 2


def test_every_point_is_dueled_with_all_and_resume_skips_what_is_done(tmp_path):
    pytest.importorskip("torch")
    from memsched.experiments import vs_torch_duel

    src = _bench_csv(tmp_path, ROWS)  # with memsched rows: only segments=2 is contested
    rows = read_rows(src)
    assert [r["setting"] for r in contested(rows, ("gpt2", "tiny"))] == ["segments=2"]
    assert [r["setting"] for r in contested(rows, ("gpt2", "tiny"), every=True)] == ["segments=2", "segments=3"]
    assert vs_torch_duel.main(["--csv", str(src), "--rounds", "2", "--repeats", "1", "--all"]) == 0
    duels = read_rows(tmp_path / "vs_duels.csv")
    assert sorted(d["setting"] for d in duels) == ["segments=2", "segments=2", "segments=3", "segments=3"]
    for d in duels:  # memsched's plan at each point's own peak, not another point's
        assert d["peak_ok"] == "True" and int(d["memsched_budget"]) <= int(d["their_peak"])
    stamp = (tmp_path / "vs_duels.csv").read_text()
    assert vs_torch_duel.main(["--csv", str(src), "--rounds", "2", "--resume"]) == 0
    assert (tmp_path / "vs_duels.csv").read_text() == stamp  # nothing left to duel
    (tmp_path / "vs_duels.png").unlink()
    assert vs_torch_duel.main(["--csv", str(src), "--replot", "--all"]) == 0  # runs nothing, redraws
    assert (tmp_path / "vs_duels.csv").read_text() == stamp and (tmp_path / "vs_duels.png").stat().st_size > 0
    assert vs_torch_duel.main(["--csv", str(src), "--rounds", "0"]) == 2


@pytest.mark.parametrize(
    ("tool", "setting"),
    [("checkpoint-per-block", "{L} blocks"), ("torch.compile(aot_eager, min-cut)", "activation_memory_budget=0.5")],
)
def test_their_point_rebuilds_the_named_tool(tool, setting):
    pytest.importorskip("torch")
    from memsched.experiments.bench_vs_torch import SIZES
    from memsched.experiments.vs_torch_duel import their_points
    from memsched.models.zoo import build_model

    sizes = SIZES["gpt2"]["tiny"]
    model = build_model("gpt2", **sizes)
    setting = setting.format(L=len(model.blocks))
    (point,), ref = their_points(
        {"model": "gpt2", "size": "tiny"},
        model,
        [{"tool": tool, "setting": setting}],
        lambda dtype: build_model("gpt2", dropout=0.0, dtype=dtype, **sizes),
    )
    assert (point.row["tool"], point.row["setting"]) == (tool, setting) and point.row["peak_bytes"] > 0
    assert point.timer() > 0 and ref
