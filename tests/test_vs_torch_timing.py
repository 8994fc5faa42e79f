"""bench_vs_torch's step times: interleaved rounds in a shuffled order, the least time and the
median kept, and the verdicts judged on both (experiments/vs_torch_report.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from memsched.experiments import bench_vs_torch, vs_torch_report  # noqa: E402


def test_time_rounds_keep_least_and_median_in_shuffled_order():
    calls: list[str] = []

    def timer(name: str, times: list[float]):
        it = iter(times)

        def one() -> float:
            calls.append(name)
            return next(it)
        return one

    a = bench_vs_torch.Point({"tool": "a"}, timer("a", [5.0, 3.0, 9.0, 4.0, 8.0]))
    b = bench_vs_torch.Point({"tool": "b"}, timer("b", [1.0, 1.0, 1.0, 2.0, 7.0]))
    untimed = bench_vs_torch.Point({"tool": "failed"})
    bench_vs_torch.time_rounds([a, b, untimed], rounds=5)
    assert a.row["time_ms"] == 3.0 and a.row["time_median_ms"] == 5.0 and a.row["rounds"] == 5
    assert b.row["time_ms"] == 1.0 and b.row["time_median_ms"] == 1.0
    assert "time_ms" not in untimed.row
    rounds = [tuple(calls[i:i + 2]) for i in range(0, 10, 2)]
    assert all(sorted(r) == ["a", "b"] for r in rounds)  # every point once per round
    assert len(set(rounds)) == 2  # the order changes between rounds (seed 0)


def _row(tool: str, peak: int, overhead: float, median: float | None = None) -> dict:
    row = {"model": "m", "size": "small", "tool": tool, "setting": f"{peak}", "status": "ok",
           "peak_bytes": str(peak), "time_ms": str(100 * (1 + overhead)), "overhead": str(overhead), "load": "1"}
    if median is not None:
        row.update(time_median_ms=str(100 * (1 + median)), overhead_median=str(median))
    return row


def test_verdicts_on_least_and_median_times():
    rows = [_row("torch", 500, 0.0, 0.0), _row("checkpoint-per-block", 100, 0.5, 0.5),
            _row("memsched-block", 90, 0.45, 0.6), _row("memsched-block", 300, 0.1, 0.1)]
    (v,) = vs_torch_report.verdicts(rows)
    assert v["curve_on_or_below"] is True and v["unmatched"] == ""
    assert v["curve_on_or_below_median"] is False and v["unmatched_median"] == "checkpoint-per-block 100"
    assert v["smallest_at_most_per_block"] is True
    lines = vs_torch_report.summary(rows)
    assert any("(median times): checkpoint-per-block 100" in line for line in lines)
    # an older CSV without medians: that verdict is unknown, not a pass
    old = [{k: r[k] for k in r if not k.endswith("median") and k != "overhead_median"} for r in rows]
    (v,) = vs_torch_report.verdicts(old)
    assert v["curve_on_or_below"] is True and v["curve_on_or_below_median"] is None
