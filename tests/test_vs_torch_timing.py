"""bench_vs_torch's step times: rounds in a shuffled order, every step paired with a plain step
just before it, and the verdicts judged on the paired and unpaired overheads
(experiments/vs_torch_report.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from memsched.experiments import bench_vs_torch, vs_torch_report  # noqa: E402


def test_time_rounds_pair_every_step_with_a_plain_one_in_shuffled_order():
    calls: list[str] = []

    def timer(name: str, times: list[float]):
        it = iter(times)

        def one() -> float:
            calls.append(name)
            return next(it)
        return one

    # plain torch drifts from 10 to 20 ms; "a" is always 1.5x the plain step before it
    plain_times = [10.0, 10.0, 12.0, 12.0, 14.0, 14.0, 16.0, 16.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0]
    ref = bench_vs_torch.Point({"tool": "torch"}, timer("torch", plain_times))
    a = bench_vs_torch.Point({"tool": "a"}, timer("a", [15.0, 18.0, 21.0, 24.0, 30.0]))
    b = bench_vs_torch.Point({"tool": "b"}, timer("b", [10.0, 12.0, 14.0, 16.0, 20.0]))
    untimed = bench_vs_torch.Point({"tool": "failed"})
    bench_vs_torch.time_rounds([a, b, untimed], rounds=5, reference=ref)
    assert calls[0::2] == ["torch"] * 10  # every timed step right after a plain one
    assert a.row["overhead"] == pytest.approx(0.5) and b.row["overhead"] == pytest.approx(0.0)
    assert a.row["time_ms"] == 21.0 and a.row["time_min_ms"] == 15.0 and a.row["rounds"] == 5
    assert "time_ms" not in untimed.row
    rounds = [tuple(calls[i + 1:i + 4:2]) for i in range(0, 20, 4)]
    assert all(sorted(r) == ["a", "b"] for r in rounds)  # every point once per round
    assert len(set(rounds)) == 2  # the order changes between rounds (seed 0)


def _row(tool: str, peak: int, overhead: float, unpaired: float | None = None) -> dict:
    row = {"model": "m", "size": "small", "tool": tool, "setting": f"{peak}", "status": "ok",
           "peak_bytes": str(peak), "time_ms": str(100 * (1 + overhead)), "overhead": str(overhead), "load": "1"}
    if unpaired is not None:
        row.update(overhead_unpaired=str(unpaired))
    return row


def test_verdicts_on_paired_and_unpaired_overheads():
    rows = [_row("torch", 500, 0.0, 0.0), _row("checkpoint-per-block", 100, 0.5, 0.5),
            _row("memsched-block", 90, 0.45, 0.6), _row("memsched-block", 300, 0.1, 0.1)]
    (v,) = vs_torch_report.verdicts(rows)
    assert v["curve_on_or_below"] is True and v["unmatched"] == ""
    assert v["curve_on_or_below_unpaired"] is False and v["unmatched_unpaired"] == "checkpoint-per-block 100"
    assert v["smallest_at_most_per_block"] is True
    lines = vs_torch_report.summary(rows)
    assert any("(unpaired times): checkpoint-per-block 100" in line for line in lines)
    # an older CSV without the unpaired column: that verdict is unknown, not a pass
    old = [{k: r[k] for k in r if k != "overhead_unpaired"} for r in rows]
    (v,) = vs_torch_report.verdicts(old)
    assert v["curve_on_or_below"] is True and v["curve_on_or_below_unpaired"] is None


def test_median_ci_and_the_verdict_within_noise():
    assert bench_vs_torch.median_ci([1.0, 1.0, 1.0]) == 0.0
    assert bench_vs_torch.median_ci([1.0] * 9) == 0.0
    wide = bench_vs_torch.median_ci([0.8, 0.9, 1.0, 1.1, 1.2, 1.0, 0.95, 1.05, 1.0])
    assert wide > 0 and bench_vs_torch.median_ci([1.0, 1.01, 0.99, 1.0] * 4) < wide

    def row(tool, peak, overhead, ci):
        return {**_row(tool, peak, overhead, overhead), "overhead_ci": str(ci)}

    rows = [row("torch", 500, 0.0, 0.01), row("checkpoint-per-block", 100, 0.40, 0.02),
            row("memsched-block", 90, 0.45, 0.04), row("memsched-block", 300, 0.1, 0.01)]
    (v,) = vs_torch_report.verdicts(rows)
    assert v["curve_on_or_below"] is False  # 5 points slower: beyond the 2% allowance ...
    assert v["curve_within_noise"] is True  # ... but within the intervals (0.42 vs 0.41)
    rows[2] = row("memsched-block", 90, 0.50, 0.02)  # 0.48 > 0.42: beyond the noise
    (v,) = vs_torch_report.verdicts(rows)
    assert v["curve_within_noise"] is False and v["unmatched_beyond_noise"] == "checkpoint-per-block 100"
    assert any("beyond the 95% intervals: checkpoint-per-block 100" in line for line in vs_torch_report.summary(rows))
    del rows[1]["overhead_ci"]  # an older CSV: no verdict within noise
    assert vs_torch_report.verdicts(rows)[0]["curve_within_noise"] is None
