"""experiments/bench_vs_torch.py on tiny models: every tool has its rows, gradients match plain
autograd, memsched's measured peaks are the simulator's predictions, both memory measures are
written, ``--update`` keeps the other models' rows, the CSV and figure exist."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

from memsched.experiments import bench_vs_torch  # noqa: E402


def test_tiny_run_writes_rows_for_every_tool(tmp_path):
    out = tmp_path / "vs.csv"
    kept = {"model": "resnet50", "size": "small", "tool": "torch", "setting": "no checkpointing", "status": "ok",
            "peak_bytes": "1000", "time_ms": "10.0", "overhead": "0.0"}
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=bench_vs_torch.COLUMNS)
        w.writeheader()
        w.writerow({**kept, "model": "gpt2", "size": "tiny"})  # replaced by the run
        w.writerow(kept)  # another model and size: kept with --update
    assert bench_vs_torch.main(["--models", "gpt2", "--sizes", "tiny", "--budgets", "3", "--repeats", "1",
                                "--update", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r for r in rows if r["model"] == "resnet50"] == [{**{c: "" for c in bench_vs_torch.COLUMNS}, **kept}]
    rows = [r for r in rows if r["model"] == "gpt2"]
    tools = {r["tool"] for r in rows}
    assert {"torch", "checkpoint-per-block", "checkpoint_sequential", "memsched-block", "memsched-layer",
            "rockmate"} <= tools
    assert sum(r["tool"] == "torch" for r in rows) == 1
    for r in rows:
        if r["peak_bytes"]:
            assert r["grad_ok"] == "True", r
            assert int(r["peak_bytes"]) > 0 and float(r["time_ms"]) > 0 and int(r["alloc_peak"]) > 0
        if r["tool"].startswith("memsched") and r["peak_bytes"]:
            assert int(r["peak_bytes"]) <= 1.01 * int(r["predicted_peak"]) + 4096
            assert int(r["predicted_peak"]) <= int(r["budget"])
    assert next(r for r in rows if r["tool"] == "rockmate")["status"].startswith("not run")
    assert out.with_suffix(".png").stat().st_size > 0


def test_target_peaks_keep_one_budget_per_bin():
    pts = [bench_vs_torch.Point({"tool": t, "peak_bytes": p})
           for t, p in (("torch", 50), ("a", 100), ("b", 102), ("b", 104), ("c", 110), ("d", None))]
    assert bench_vs_torch.target_peaks(pts) == [100, 104, 110]
