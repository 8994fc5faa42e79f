"""`RunResult` (what `memsched.run` returns) answers `in` like the dictionary it wraps (hunt 42: `"grad_message" in
run` raised KeyError: 0, as Python fell back to indexing 0, 1, ... through `__getitem__`)."""

from __future__ import annotations

from memsched.results import RunResult


def test_in_asks_the_items() -> None:
    run = RunResult({"model": "m", "grad_check": True, "predicted": None})
    assert "grad_check" in run and "predicted" in run
    assert "grad_message" not in run and 0 not in run
    assert run["grad_check"] is True and run.model == "m"
