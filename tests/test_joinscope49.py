"""The join `dp`'s last fallback (the least-memory schedule of the class, when a slot rounding left no
schedule and exact sizes were not tried) names the limit that kept it from exact sizes: the tables'
cells (`MAX_CELLS`) or the join level's steps (`MAX_JOIN_STEPS`); it named the cells always, with a false
inequality ("6.34e+05 table cells, more than 1.2e+07") when the steps were the limit."""

from __future__ import annotations

import re

import pytest
from conftest import join_replays
from memsched.solvers.join import dp as join_dp_module
from memsched.solvers.join import reference_peak
from memsched.solvers.join.dp import solve_join_dp
from memsched.solvers.join.generate import random_join


def least_memory_answers(monkeypatch: pytest.MonkeyPatch, limit: str, value: int) -> list[str]:
    """Scope and message of every least-memory fallback on small joins at 5 slots, with `limit` lowered."""
    monkeypatch.setattr(join_dp_module, limit, value)
    texts = []
    for seed in range(12):
        join = random_join([2, 1], seed, size_range=(1, 40), integer_times=True, loss_overhead=1)
        top = reference_peak(join)
        for budget in range(top // 3, top, max(1, top // 25)):
            res = solve_join_dp(join, budget, slots=5)
            join_replays(join, budget, res)
            if "least-memory schedule of the class, not time-optimal" in res.scope:
                texts.append(res.scope + " | " + res.message)
    return texts


def numbers_hold(text: str) -> bool:
    """Each "N ..., more than M" in `text` says N > M."""
    pairs = re.findall(r"([\d.e+]+) (?:table cells|join-level steps), more than ([\d.e+]+)", text)
    return bool(pairs) and all(float(n) > float(m) for n, m in pairs)


def test_the_steps_limit_is_named_when_it_kept_exact_sizes_out(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = least_memory_answers(monkeypatch, "MAX_JOIN_STEPS", join_dp_module.join_steps(2, 10))  # 5 slots pass
    assert texts, "no least-memory fallback on these joins"
    for text in texts:
        assert "join-level steps, more than" in text and "table cells" not in text
        assert numbers_hold(text)


def test_the_cells_limit_is_named_when_the_tables_were_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = least_memory_answers(monkeypatch, "MAX_CELLS", 2 * 5 * 12**2)
    assert texts, "no least-memory fallback on these joins"
    for text in texts:
        assert "table cells, more than" in text and numbers_hold(text)
