"""experiments/bench_executor_overhead.py: a row per chain length with consistent columns; bad
arguments exit 2 with one line and write nothing."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("torch")

from memsched.experiments import bench_executor_overhead as bench  # noqa: E402


def test_rows_per_length(tmp_path):
    out = tmp_path / "o.csv"
    assert bench.main(["--stages", "1,3", "--repeats", "3", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [int(r["stages"]) for r in rows] == [1, 3]
    for r in rows:
        assert float(r["plain_us"]) > 0 and float(r["executor_us"]) > 0
        assert float(r["overhead_us"]) == pytest.approx(float(r["executor_us"]) - float(r["plain_us"]), abs=0.11)
        assert float(r["per_stage_us"]) == pytest.approx(float(r["overhead_us"]) / int(r["stages"]), abs=0.11)


@pytest.mark.parametrize("args", [["--stages", "0"], ["--stages", "a,b"], ["--repeats", "0"]])
def test_bad_arguments_exit_2(tmp_path, capsys, args):
    out = tmp_path / "o.csv"
    assert bench.main([*args, "--out", str(out)]) == 2
    assert not out.exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
