"""torch.compile(aot_eager, min-cut) in experiments/bench_vs_torch.py: the rows run on a tiny model,
their gradients match plain autograd's, the tracker sees the compiled step (its peak is the
allocator's), ``--only-compile --update`` replaces only those rows, and the verdicts treat them
like any other tool's (failed and not-run rows left out, times compared as overheads)."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

from memsched.experiments import bench_vs_torch, vs_torch_compile  # noqa: E402

TOOL = vs_torch_compile.TOOLS["aot"]


def test_only_compile_update_runs_the_partitioner_and_keeps_other_rows(tmp_path):
    """GPT-2 (tiny) at budget 0: the row runs compiled (the tracker sees what the allocator sees),
    its gradients are checked on a dropout-free copy (compiled dropout draws other random
    numbers) and pass, timing does not recompile, and only torch.compile rows are replaced."""
    from memsched.models.zoo import build_model

    sizes = bench_vs_torch.SIZES["gpt2"]["tiny"]
    assert vs_torch_compile.has_dropout(build_model("gpt2", **sizes).blocks)
    assert not vs_torch_compile.has_dropout(build_model("gpt2", dropout=0.0, **sizes).blocks)
    out = tmp_path / "vs.csv"
    old = {"model": "gpt2", "size": "tiny", "setting": "x", "status": "ok", "peak_bytes": "1000",
           "time_ms": "10.0", "overhead": "0.5"}
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=bench_vs_torch.COLUMNS)
        w.writeheader()
        w.writerow({**old, "tool": "checkpoint-per-block"})  # kept: not a torch.compile row
        w.writerow({**old, "tool": "memsched-block", "peak_bytes": "900", "overhead": "0.1"})  # kept
        w.writerow({**old, "tool": TOOL})  # replaced by the run
    assert bench_vs_torch.main(["--models", "gpt2", "--sizes", "tiny", "--only-compile", "--compile", "aot",
                                "--compile-budgets", "0.0", "--repeats", "2", "--rounds", "2", "--update",
                                "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["tool"] for r in rows][:2] == ["checkpoint-per-block", "memsched-block"]
    assert not any(r["tool"] == "torch" for r in rows)  # the time reference is not written
    (r,) = [r for r in rows if r["tool"] == TOOL]
    assert r["setting"] == "activation_memory_budget=0.0"
    assert r["status"] == "ok (gradients checked on a dropout-free copy)", r  # "failed: recompiled" otherwise
    assert r["grad_ok"] == "True", r
    assert float(r["plan_s"]) > 0 and float(r["time_ms"]) > 0 and r["overhead"] != ""
    # the tracker runs the compiled graphs (not eager): it sees what the allocator sees, up to
    # kernel scratch and small temporaries
    assert 0.8 * int(r["alloc_peak"]) <= int(r["peak_bytes"]) <= 1.2 * int(r["alloc_peak"]), r
    assert next(r for r in rows if r["tool"] == "torch.compile(inductor)")["status"].startswith("not run")
    (v,) = csv.DictReader(out.with_name("vs_summary.csv").open())
    assert v["model"] == "gpt2" and v["curve_on_or_below"] in ("True", "False")


def test_twin_check_in_float64():
    """The float64 fallback check: a dropout-free GPT-2 (tiny) compiled at b = 0.5 gives eager
    autograd's gradients within 1e-9 in float64 (a wrong partition would not)."""
    import torch
    from memsched.models.zoo import build_model

    model = build_model("gpt2", dropout=0.0, dtype=torch.float64, **bench_vs_torch.SIZES["gpt2"]["tiny"])
    assert vs_torch_compile.twin_check(model, vs_torch_compile.BACKENDS["aot"], 0.5, vs_torch_compile.CompiledTracker,
                                       vs_torch_compile.GRAD_RTOL_64)


def test_close_normwise():
    import torch

    g = [torch.ones(4), None]
    assert vs_torch_compile.close_normwise(g, [torch.ones(4) * (1 + 1e-6), None])
    assert not vs_torch_compile.close_normwise(g, [torch.ones(4) * 1.01, None])
    assert not vs_torch_compile.close_normwise(g, [torch.ones(4), torch.ones(1)])
    assert not vs_torch_compile.close_normwise(g, g[:1])


def _row(tool, peak, overhead, alloc="", status="ok", setting="s"):
    return {"model": "m", "size": "small", "tool": tool, "setting": setting, "status": status,
            "peak_bytes": "" if peak is None else str(peak), "alloc_peak": alloc, "time_ms": str(100 * (1 + overhead)),
            "overhead": str(overhead), "load": "1"}


def test_verdicts_treat_compile_rows_like_other_tools():
    rows = [_row("torch", 500, 0.0),
            _row("checkpoint-per-block", 100, 0.5),
            _row("memsched-block", 90, 0.4),
            _row("memsched-block", 200, 0.1),
            _row(TOOL, 150, 0.05, setting="b=0.6"),  # lower time than every memsched point at <= 150: unmatched
            _row(TOOL, 250, 0.1, setting="b=1.0"),  # matched by memsched 200 at +10%
            _row(TOOL, 80, 0.1, status="failed: recompiled during timing", setting="b=0.0"),  # left out
            _row("torch.compile(inductor)", None, 0.0, status="not run (...)")]
    (v,) = bench_vs_torch.verdicts(rows)
    assert v["curve_on_or_below"] is False
    assert v["unmatched"] == f"{TOOL} b=0.6"
    assert v["smallest_at_most_per_block"] is True and v["memsched_smallest_peak"] == 90
    # an overhead 2% above is time noise; times of another run (another load) compare as overheads
    rows[4] = _row(TOOL, 210, 0.09, setting="b=0.6")  # memsched 200 at +10%: within 2% of its time
    rows[4]["time_ms"] = "50"  # a quieter run: its absolute time is not compared
    assert bench_vs_torch.verdicts(rows)[0]["curve_on_or_below"] is True
    # an inductor point compares on the allocator's peak
    rows.append(_row("torch.compile(inductor)", None, 0.0, alloc="100", setting="b=0.2"))
    assert bench_vs_torch.verdicts(rows)[0]["unmatched"] == "torch.compile(inductor) b=0.2"
    assert any("torch.compile(aot_eager, min-cut)" in line for line in bench_vs_torch.summary(rows))
