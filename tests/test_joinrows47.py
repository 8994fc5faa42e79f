"""Join `cpsat` with exact sizes in bytes near 1e9..1e12, whose memory rows are rounded for CP-SAT (rows of
more than 2^30, docs/join.md). One byte below the smallest feasible budget the relaxation's plan overflows
the budget, the rows rounded up have no plan, and the order was answered `timeout` ("no schedule before the
time limit") after 0.3 s of 20; as the chain's `cpsat`, each broken plan is now excluded by a no-good row until
the relaxation is proven infeasible (`exact.exact_rows.exact_rows_cpsat`), so the answer is `infeasible`."""

from __future__ import annotations

import random
from typing import Any

import pytest
from memsched.solvers import registry
from memsched.solvers.exact.options import Deadline
from memsched.solvers.join import cpsat as join_cpsat
from memsched.solvers.join.instance import Join

FITS = ("optimal", "feasible")


def _stage(name: str, times: tuple[float, float], out: int, tape: int, fwd_over: int, bwd_over: int
           ) -> dict[str, Any]:
    return {"name": name, "fwd_time": times[0], "bwd_time": times[1], "out_size": out, "tape_size": tape,
            "fwd_overhead": fwd_over, "bwd_overhead": bwd_over}


def _join(branches: list[tuple[int, list[dict[str, Any]]]], loss: tuple[float, int]) -> Join:
    """A join from (input size, stages) per branch and (loss time, loss overhead); sizes in bytes."""
    return Join.from_dict({"format": "memsched.join/1", "name": "r",
                           "branches": [{"name": f"b{b}", "input_size": x0, "stages": stages}
                                        for b, (x0, stages) in enumerate(branches)],
                           "loss": {"bwd_time": loss[0], "bwd_overhead": loss[1]}})


#: (join, its smallest feasible budget in bytes) of the hunt: one branch of ~1e10 bytes, and two of ~1e12
REPROS = [
    (_join([(0, [_stage("s0_0", (1, 4), 0, 0, 0, 0),
                 _stage("s0_1", (3, 3), 3845657712, 7984009679, 1893923721, 0)])], (4, 8951261327)),
     16642576751),
    (_join([(231171247084, [_stage("s0_0", (1, 2), 534439589175, 739820399970, 561423994714, 705979998169),
                            _stage("s0_1", (1, 4), 722026593455, 1514475132168, 148194179472, 418399561389)]),
            (229163414222, [_stage("s1_0", (2, 5), 995759484248, 1731857264954, 166848452803, 849456393508),
                            _stage("s1_1", (2, 2), 446935555864, 1049117912735, 676815177813, 900339133901)])],
           (2, 561661581186)),
     4848246232302),
]


def _solve(join: Join, budget: int, solver: str) -> Any:
    return registry.solve("join", join, solver, budget, time_limit=20.0)


@pytest.mark.parametrize("case", range(len(REPROS)))
def test_one_byte_below_the_least_budget_is_infeasible(case: int) -> None:
    join, least = REPROS[case]
    for solver in ("exact", "dp"):
        assert _solve(join, least - 1, solver).status == "infeasible"
        assert _solve(join, least, solver).status in FITS
    below = _solve(join, least - 1, "cpsat")
    assert below.status == "infeasible", (below.status, below.message)
    at = _solve(join, least, "cpsat")
    assert at.status in FITS and at.schedule is not None
    exact = _solve(join, least, "exact")
    assert at.objective == pytest.approx(exact.objective, rel=1e-9)
    assert at.peak_memory is not None and at.peak_memory <= least


def _random_join(rng: random.Random) -> Join:
    """1 or 2 branches of 1..2 stages, sizes of 1e9..1e10 bytes (some 0), times of 1..5."""
    def size() -> int:
        return 0 if rng.random() < 0.15 else rng.randint(10**9, 10**10)

    branches = []
    for b in range(rng.choice([1, 2])):
        stages = []
        for j in range(rng.choice([1, 2])):
            out = size()
            stages.append(_stage(f"s{b}_{j}", (rng.randint(1, 5), rng.randint(1, 5)), out, out + size(),
                                 size(), size()))
        branches.append((size(), stages))
    return _join(branches, (rng.randint(1, 5), size()))


@pytest.mark.parametrize("seed", range(6))
def test_status_agrees_with_exact_at_the_least_budget_and_below(seed: int) -> None:
    join = _random_join(random.Random(seed))
    least = _solve(join, 1, "dp").min_budget  # the DP's class is inside cpsat's phase model
    assert least is not None
    for budget in (least - 1, least):
        exact = _solve(join, budget, "exact")
        got = _solve(join, budget, "cpsat")
        if exact.status == "infeasible":
            assert got.status == "infeasible", (seed, budget, got.status, got.message)
        if budget == least:  # a DP schedule fits, hence one of the phase model
            assert exact.status == "optimal"
            assert got.status in FITS and got.schedule is not None, (seed, budget, got.status, got.message)
            assert got.objective >= exact.objective - 1e-9 * exact.objective
            assert got.peak_memory is not None and got.peak_memory <= budget


def test_a_timeout_names_the_time_limit_only_when_it_came() -> None:
    open_order = [{"order": [0, 1], "status": "timeout"}, {"order": [1, 0], "status": "infeasible"}]
    why = join_cpsat._no_schedule_why(Deadline(100.0), open_order)
    assert "before the time limit" not in why and "1 of the backward orders" in why
    assert join_cpsat._no_schedule_why(Deadline(0.0), open_order) == "no schedule before the time limit"
