"""Rotor is never slower than Revolve at the same budget (`rotor_guard` replays Revolve on a
homogeneous chain): rounding Revolve's checkpoints up to slots used to push its peak over the
S slots, and rotor then returned a recompute-heavy schedule, 2x slower than Revolve on
examples/homogeneous20.json at 7e6 bytes (no periodic count fits there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain import Chain, simulate
from memsched.solvers.chain.revolve import revolve_peak
from memsched.solvers.registry import solve
from memsched.solvers.result import SolveResult

ROOT = Path(__file__).resolve().parents[1]
HOM20 = ROOT / "examples" / "homogeneous20.json"


def hom_chain(L: int, x: int, xbar: int, o_f: int = 0, o_b: int = 0, loss_time: float = 1.0) -> Chain:
    """L identical stages (forward 1, backward 2), activations x bytes, tapes xbar bytes."""
    stage = {"fwd_time": 1.0, "bwd_time": 2.0, "out_size": x, "tape_size": xbar,
             "fwd_overhead": o_f, "bwd_overhead": o_b}
    return Chain.from_stages(x, [dict(stage) for _ in range(L)], {"bwd_time": loss_time, "bwd_overhead": 0},
                             name="hom")


def check_not_slower(chain: Chain, budget: int, **options: object) -> tuple[SolveResult, SolveResult]:
    """rotor's answer replays within `budget` and is no slower than Revolve's; returns both."""
    rev = solve("chain", chain, "revolve", budget)
    rot = solve("chain", chain, "rotor", budget, **options)
    assert rev.status == "feasible"
    assert rot.status in ("optimal", "feasible") and rot.schedule is not None
    sim = simulate(chain, rot.schedule, budget).raise_if_invalid()
    assert sim.peak_memory <= budget and sim.makespan == pytest.approx(rot.objective)
    assert rot.objective <= rev.objective * (1 + 1e-9)
    return rot, rev


@pytest.mark.parametrize("budget", [7_000_000, 8_000_000, 9_000_000])
def test_homogeneous20_rotor_not_slower_than_revolve(budget: int) -> None:
    rot, _ = check_not_slower(Chain.load(str(HOM20)), budget)
    if rot.status == "feasible":  # Revolve's schedule returned: no optimality claim
        assert rot.details["baseline"]["solver"] == "revolve"
        assert "revolve schedule (no optimality claim)" in rot.scope and "slower than revolve" in rot.message


def test_homogeneous20_at_7e6_returns_revolves_schedule_as_feasible() -> None:
    rot, rev = check_not_slower(Chain.load(str(HOM20)), 7_000_000)
    assert rot.status == "feasible" and rot.objective == pytest.approx(rev.objective) == 125
    assert rot.details["first_makespan"] == pytest.approx(250)


def test_hom25_at_revolves_peak_solves_again_with_exact_sizes() -> None:
    chain = hom_chain(25, 999, 2997)
    rot, rev = check_not_slower(chain, 7992)
    assert rev.objective == pytest.approx(170)
    assert rot.status == "optimal" and "exact sizes" in rot.scope  # 8000 slots > 7992 bytes
    assert rot.objective == pytest.approx(solve("chain", chain, "rotor", 7992, slots=0).objective)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_exact_models_not_slower_than_revolve(solver: str) -> None:
    """milp and cpsat are refereed by the fast solvers, Revolve included (already fine)."""
    chain = hom_chain(25, 999, 2997)
    rev = solve("chain", chain, "revolve", 7992)
    res = solve("chain", chain, solver, 7992, time_limit=10)
    assert res.schedule is not None and res.objective <= rev.objective * (1 + 1e-9)
    assert simulate(chain, res.schedule, 7992).raise_if_invalid().peak_memory <= 7992


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 12), st.integers(200, 2000), st.integers(0, 3), st.integers(0, 300), st.integers(0, 300),
       st.integers(1, 12), st.integers(0, 50), st.sampled_from([8, 20, 60, 500]))
def test_rotor_never_slower_than_revolve_on_homogeneous_chains(L: int, x: int, extra: int, o_f: int, o_b: int,
                                                              c: int, slack: int, slots: int) -> None:
    """At Revolve's own peak for c checkpoints (plus a little slack), where slot rounding hurts it most."""
    chain = hom_chain(L, x, x * (1 + extra) // 2 + x, o_f, o_b)
    budget = revolve_peak(chain, min(c, L)) + slack
    check_not_slower(chain, budget, slots=slots)
