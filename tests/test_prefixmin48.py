"""`offload-prefix` tries every prefix k, lookahead d and input choice: its `min_budget` is the least peak over all of
them, whether or not the budget given fits one (before: a feasible answer gave its chosen schedule's peak, 37% above
the smallest budget it can meet on examples/random10.json at 2 GB/s)."""

from __future__ import annotations

from pathlib import Path

from memsched.solvers.offload import load

from memsched.api import solve

ROOT = Path(__file__).resolve().parents[1]


def test_min_budget_is_the_least_peak_over_every_prefix() -> None:
    inst = load(str(ROOT / "examples" / "random10.json"), bandwidth=2e9)
    loose = solve(inst, "70%", "offload-prefix")
    assert loose.status == "feasible" and loose.min_budget is not None
    assert loose.min_budget < loose.peak_memory  # a smaller prefix fits less memory
    at_least = solve(inst, loose.min_budget, "offload-prefix")
    assert at_least.status == "feasible" and at_least.peak_memory <= loose.min_budget
    below = solve(inst, loose.min_budget - 1, "offload-prefix")
    assert below.status == "infeasible" and below.min_budget == loose.min_budget
