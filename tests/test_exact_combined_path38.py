"""An offloading chain too long for exact-combined is refused before any work with one line naming the
file and its ``stages``, as every other input error names its file (was ``stages: ...`` alone)."""
from __future__ import annotations

import csv
from pathlib import Path

from conftest import run_cli, sweep_toml
from memsched.solvers.offload.exact_combined import MAX_LENGTH
from memsched.solvers.offload.generate import random_offload


def test_too_long_for_exact_combined_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "r7.json"
    random_offload(MAX_LENGTH + 1, 1).save(str(path))
    res = run_cli("solve", path, "--budget", "70%", "--solver", "exact-combined")
    assert res.code == 2, res.out + res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and f"{path}: stages: the chain has {MAX_LENGTH + 1} stages" in lines[0], res.err
    assert "Traceback" not in res.err and res.out == ""


def test_exact_combined_takes_its_longest_chain(tmp_path: Path) -> None:
    path = tmp_path / "r3.json"
    random_offload(3, 1).save(str(path))
    res = run_cli("solve", path, "--budget", "100%", "--solver", "exact-combined", "--time-limit", "20")
    assert res.code == 0, res.out + res.err


def test_a_sweep_keeps_an_unsupported_row_for_a_chain_too_long(tmp_path: Path) -> None:
    """The limit is `memsched solve`'s check, not a sweep's: one cell of a sweep that exact-combined cannot
    take is its `unsupported` row, the rest of the sweep runs (e60e522 refused the whole sweep file)."""
    cfg = tmp_path / "ec.toml"
    cfg.write_text(sweep_toml("ec", budgets=["60%"], defaults={"time_limit": 5},
                              instances=[{"example": "random10", "problem": "offload", "bandwidth": "12GB/s"}],
                              solvers=["pofo", "exact-combined"]))
    res = run_cli("sweep", cfg, "--output", tmp_path / "out", "--no-progress")
    assert res.code == 0, res.out + res.err
    rows = {r["solver"]: r for r in csv.DictReader((tmp_path / "out" / "ec.csv").open())}
    assert rows["exact-combined"]["status"] == "unsupported" and "L <= 6" in rows["exact-combined"]["message"]
    assert rows["pofo"]["status"] in ("optimal", "feasible")
