"""`memsched max-batch` when a probe's solve ends in ``timeout`` (no schedule before --time-limit, not
proven infeasible): at the smallest size it is a timeout, not "does not train" (exit 1, the time limit's
message); above the answer, the answer is only a lower bound (its line says "at least", JSON
``timed_out``). The solver's status is forced by wrapping `registry.solve` (the real solver,
checkpoint-all, answers the other sizes), so the outcomes do not depend on the machine's speed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402

TINY = ("--image-size", "64", "--width", "8", "--depth", "1", "--tolerance", "0", "--problem", "graph")
COMMON = ("max-batch", "resnet18", "--solver", "checkpoint-all", "--time-limit", "0.001", *TINY)


@pytest.fixture
def time_out_at(monkeypatch):
    """Make every solve of a graph whose batch is in the given set end in ``timeout`` with no schedule."""
    from memsched.solvers import registry
    from memsched.solvers.result import TIMEOUT, SolveResult

    real = registry.solve

    def install(batches: set[int]) -> None:
        def solve(problem, instance, solver, budget, **options):
            if int(instance.meta["batch"]) in batches:
                return SolveResult(problem, solver, TIMEOUT, budget=budget, message="time limit reached")
            return real(problem, instance, solver, budget, **options)

        monkeypatch.setattr(registry, "solve", solve)

    return install


def test_smallest_batch_timed_out_is_a_timeout_not_infeasible(time_out_at):
    time_out_at({1})
    r = run_cli(*COMMON, "--memory", "16MB", "--limit", "4", "--json")
    assert r.code == 1, r.err  # exit 1: "a time limit passed before any schedule" (docs/cli.md's exit codes)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err
    assert lines[0].startswith("memsched max-batch: timeout: "), lines[0]
    assert "not proven infeasible" in lines[0] and "--time-limit 0.001 s" in lines[0] and "batch 1" in lines[0]
    assert "does not train" not in lines[0]
    out = json.loads(r.out)
    assert out["largest"] is None and out["result"] is None
    assert [(p["size"], p["status"]) for p in out["probes"]] == [(1, "timeout")]
    assert out["timed_out"] == [1]


def test_smallest_batch_infeasible_still_says_infeasible(time_out_at):
    time_out_at(set())
    r = run_cli(*COMMON, "--memory", "1", "--limit", "4", "--json")  # below the weights: budget <= 0
    assert r.code == 1, r.err
    assert r.err.startswith("memsched max-batch: infeasible: resnet18 does not train within"), r.err
    out = json.loads(r.out)
    assert out["probes"][0]["status"] == "infeasible" and out["timed_out"] == []


def test_timeout_above_the_answer_makes_it_a_lower_bound(time_out_at):
    time_out_at({3, 4})
    r = run_cli(*COMMON, "--memory", "16MB", "--limit", "4", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["largest"] == 2 and out["result"]["size"] == 2 and out["result"]["fits"]
    assert {p["size"]: p["status"] for p in out["probes"] if not p["fits"]} == {3: "timeout", 4: "timeout"}
    assert out["timed_out"] == [3, 4]

    human = run_cli(*COMMON, "--memory", "16MB", "--limit", "4")
    assert human.code == 0, human.err
    last = [line for line in human.out.splitlines() if line.startswith("largest batch:")]
    assert len(last) == 1 and last[0].startswith("largest batch: 2 (at least; batches 3, 4 timed out; "), last


def test_answer_without_timeouts_is_exact(time_out_at):
    time_out_at(set())
    r = run_cli(*COMMON, "--memory", "16MB", "--limit", "2", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["largest"] == 2 and out["timed_out"] == []
    human = run_cli(*COMMON, "--memory", "16MB", "--limit", "2")
    assert "largest batch: 2 (overhead x" in human.out and "at least" not in human.out
