"""`memsched hrevolve`: the number of storage levels is bounded (each keeps its own tables, so
L alone does not bound the memory) and the printed schedule is cut between operations."""
from __future__ import annotations

import re

from conftest import run_cli


def test_too_many_levels_is_bad_input() -> None:
    levels = [arg for _ in range(17) for arg in ("--level", "inf,0,0")]
    proc = run_cli("hrevolve", "4", *levels)
    assert proc.code == 2
    assert proc.out == ""
    lines = proc.err.strip().splitlines()
    assert len(lines) == 1 and "--level" in lines[0] and "16" in lines[0]


def test_sixteen_levels_solve() -> None:
    levels = [arg for k in range(16) for arg in ("--level", f"1,{k},{k}")]
    proc = run_cli("hrevolve", "4", *levels, "--json")
    assert proc.code == 0, proc.err


def test_long_schedule_is_cut_between_operations() -> None:
    proc = run_cli("hrevolve", "40", "--level", "inf,0,0")
    assert proc.code == 0, proc.err
    line = next(text for text in proc.out.splitlines() if text.startswith("schedule"))
    shown = line.split(None, 1)[1]
    assert shown.endswith(" ...") and len(shown) <= 404
    for op in shown[:-4].split(" "):  # every op shown is whole (`HOp.__str__`)
        assert re.fullmatch(r"F\d+|Fbar\d+|[WRD]\^\d+\(x\d+\)", op), op
