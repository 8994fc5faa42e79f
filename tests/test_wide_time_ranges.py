"""Chains whose times span about 1e12 (a no-grad forward time of 1e9 upstream of times of 1e-3).

The rotor kernels charge a sweep F_ck(i) F_n(i+1..j-1) as a difference of prefix sums of u_fn,
which loses the small times beside the large one: the table's value drifts from its schedule's
replay by about 1e-7, more than the referee's 1e-6 relative tolerance on a makespan of 0.016.
rotor (and milp / cpsat, whose seed is rotor's answer) and the join DP stopped with "claims X but
the simulator charges Y" (CLI exit 3). They now report the replay, checked against the table's
value within the drift of its prefix sums (`solvers.chain.dp.value_tolerance`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import persistent_schedules, run_cli
from memsched.solvers.chain import Chain, dp, simulate
from memsched.solvers.chain.dp import rotor_table
from memsched.solvers.chain.schedule import Schedule
from memsched.solvers.join.instance import Join
from memsched.solvers.join.simulator import simulate as join_simulate
from memsched.solvers.registry import get_problem, solve, solver_table

#: the budget (bytes) of `wide_chain(3)` at which the old rotor's claim was 0.015734945762634275
#: against a replay of 0.015735
BUDGET = 13


def wide_chain(L: int = 3, big: float = 1e9) -> Chain:
    """L stages with times of about 1e-3, except stage 0's no-grad forward time `big` (its F_all
    time stays small: a schedule that never recomputes stage 0 never pays it, but the prefix sums
    of u_fn all carry it)."""
    stages = []
    for i in range(L):
        small = 0.00123 + i * 0.000117
        slow = big if i == 0 else small
        stages.append({"fwd_time": slow, "fwd_time_all": small, "fwd_time_nograd": slow,
                       "bwd_time": 0.00321 + i * 0.0001, "out_size": 2, "tape_size": 3,
                       "fwd_overhead": 0, "bwd_overhead": 0})
    return Chain.from_stages(1, stages, {"bwd_time": 0.000417, "bwd_overhead": 0}, name="wide")


def best_persistent(chain: Chain, budget: int) -> float:
    """The least makespan of a persistent schedule within `budget` bytes (brute force, small L)."""
    L = chain.length
    best = math.inf
    for ops in persistent_schedules(L):
        sim = simulate(chain, Schedule(list(ops), L))
        if sim.violation is None and sim.peak_memory <= budget:
            best = min(best, sim.makespan)
    return best


@pytest.mark.parametrize("L", [3, 5])
def test_rotor_answers_every_budget_with_the_replay(L: int) -> None:
    """Every feasible budget: rotor answers (no referee error), its makespan is the replay's and
    the brute force's best persistent schedule's (the DP's choices are right; only its value drifted)."""
    chain = wide_chain(L)
    peak = get_problem("chain").reference_peak(chain)
    answered = 0
    for budget in range(1, peak + 1):
        r = solve("chain", chain, "rotor", budget, slots=0)
        if r.schedule is None:
            continue
        answered += 1
        assert r.objective == simulate(chain, r.schedule).makespan
        best = best_persistent(chain, budget) if L == 3 else r.objective
        assert r.objective == pytest.approx(best, rel=1e-12, abs=1e-9), budget
    assert answered > 0


def test_the_table_value_drifts_within_the_bound() -> None:
    """The drift itself (why the old claim failed) and that `value_tolerance` covers it."""
    chain = wide_chain(3)
    m = BUDGET - int(chain.x[0])
    table = rotor_table(chain, m)
    schedule = table.schedule(m)
    replay = simulate(chain, schedule).makespan
    drift = abs(table.value(m) - replay)
    assert not math.isclose(table.value(m), replay, rel_tol=1e-6, abs_tol=1e-9)  # the old referee's test
    assert drift <= dp.value_tolerance(chain, replay, len(schedule.ops))
    assert dp.replayed_makespan(chain, schedule, table.value(m)) == replay


def test_a_wrong_table_value_is_still_a_bug() -> None:
    """The check keeps catching a real disagreement: a value off by one small op time."""
    chain = wide_chain(3)
    m = BUDGET - int(chain.x[0])
    table = rotor_table(chain, m)
    schedule = table.schedule(m)
    with pytest.raises(RuntimeError, match="differs from its schedule's replay"):
        dp.replayed_makespan(chain, schedule, table.value(m) + 1e-4)


def test_value_tolerance_is_tight_for_times_of_one_magnitude() -> None:
    """Without the large time the bound is a few ulps of the makespan (the check stays strict)."""
    chain = wide_chain(3, big=0.00123)
    assert dp.value_tolerance(chain, 0.016, 10) < 1e-15


def test_cli_solve_answers_instead_of_an_internal_error(tmp_path: Path) -> None:
    """`memsched solve` on the chain file: exit 0 with the replay's makespan (was exit 3)."""
    path = tmp_path / "wide.json"
    wide_chain(3).save(path)
    res = run_cli("solve", str(path), "--budget", str(BUDGET), "--solver", "rotor", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["status"] == "optimal" and out["makespan"] == pytest.approx(0.015735, rel=1e-12)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_exact_solvers_seeded_by_rotor_answer(solver: str) -> None:
    """milp and cpsat run rotor under the referee for their seed: they answer too."""
    if ("chain", solver) not in {(p, s) for p, s, _ in solver_table("chain")}:
        pytest.skip(f"{solver} is not installed")
    chain = wide_chain(3)
    r = solve("chain", chain, solver, BUDGET, slots=0, time_limit=2)
    assert r.schedule is not None and r.objective == simulate(chain, r.schedule).makespan
    assert r.objective <= 0.015735 * (1 + 1e-12)


@pytest.mark.parametrize("budget", range(19, 26))
def test_join_dp_answers_with_the_replay(budget: int) -> None:
    """Two wide branches: the join DP's own value check allowed the same drift (was RuntimeError)."""
    join = Join.from_chains([wide_chain(3), wide_chain(3)], loss_time=0.0004)
    r = solve("join", join, "dp", budget, slots=0)
    assert r.schedule is not None and r.objective == join_simulate(join, r.schedule).makespan


@pytest.mark.parametrize("solver", ["equal", "proportional", "sequential"])
@pytest.mark.parametrize("budget", [26, 27, 30])
def test_join_heuristics_answer_with_the_replay(solver: str, budget: int) -> None:
    """The join heuristics check the rotor tables' value against the replay with the same allowed drift
    (they raised RuntimeError on these branches)."""
    join = Join.from_chains([wide_chain(5), wide_chain(5)], loss_time=0.0004)
    r = solve("join", join, solver, budget, slots=0)
    if r.schedule is not None:
        assert r.objective == join_simulate(join, r.schedule).makespan
