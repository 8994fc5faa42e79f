"""pofo's ``details["dp_estimate"]`` is its own DP's value (the PofoTable of the kept DP run), also
when rotor-offload's, offload-prefix's or rotor's schedule is returned instead, and is left out
when no DP schedule fits the budget."""

from __future__ import annotations

import pytest
from memsched.solvers.chain import reference_peak as store_all_peak
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.offload import OffloadInstance
from memsched.solvers.offload import dp as pofo_dp
from memsched.solvers.offload.dp import PofoTable, _extra, _run_dp, solve_pofo
from memsched.solvers.offload.generate import random_offload


def _table_value(inst: OffloadInstance, budget: int, factor: float | None = None) -> float:
    """The DP's value at `budget` bytes with exact sizes (slots = 0), planned on a link `factor`
    times faster when given (``details["dp_link_factor"]``): P_1(budget - x[0], 0, L)."""
    chain = inst.chain
    plan = inst if factor is None else OffloadInstance(chain, inst.bandwidth * factor, inst.latency / factor)
    m_top = budget - int(chain.x[0])
    return PofoTable(chain, plan, m_top + _extra(chain)).value(m_top)


def test_estimate_is_the_dp_value_when_rotor_offload_wins():
    inst = random_offload(5, 3, integer_times=True)
    res = solve_pofo(inst, 32, slots=0)
    assert res.details["solution_from"] == "rotor-offload"
    assert res.objective == pytest.approx(27.0)
    assert "dp_link_factor" not in res.details
    assert res.details["dp_estimate"] == pytest.approx(_table_value(inst, 32), rel=1e-12)
    assert res.details["dp_estimate"] == pytest.approx(28.538461538461537, rel=1e-9)


def test_estimate_matches_the_table_on_random_chains():
    """Every answer's ``dp_estimate`` is the table value of the DP run it names (the real link,
    or the faster planning link); absent only when the real link's DP schedule does not fit."""
    outside = absent = 0
    for L in (3, 4, 5):
        for seed in range(3):
            for ratio in (0.5, 1.0, 3.0):
                inst = random_offload(L, seed, transfer_ratio=ratio, integer_times=True)
                chain = inst.chain
                low, high = rotor_min_budget(chain), store_all_peak(chain)
                for budget in (int(low * 0.7), int(low * 0.85), low, (low + high) // 2):
                    if budget >= high:
                        continue  # store-all fits: the DP is not run
                    res = solve_pofo(inst, budget, slots=0)
                    details = res.details
                    if "dp_estimate" not in details:
                        absent += 1
                        assert _run_dp(inst, chain, budget, budget, {}) is None
                        continue
                    want = _table_value(inst, budget, details.get("dp_link_factor"))
                    assert details["dp_estimate"] == pytest.approx(want, rel=1e-12), (L, seed, ratio, budget)
                    outside += "solution_from" in details
    assert outside >= 2 and absent >= 1  # both branches were met


def test_estimate_left_out_when_no_dp_schedule_fits(monkeypatch):
    """With no DP schedule (forced here), the remat-only or outside schedule returned does not
    pass its makespan off as the DP's value."""
    inst = random_offload(5, 3, integer_times=True)
    budget = rotor_min_budget(inst.chain)
    monkeypatch.setattr(pofo_dp, "_run_dp", lambda *a, **k: None)
    res = solve_pofo(inst, budget, slots=0)
    assert res.status == "feasible" and res.schedule is not None
    assert "dp_estimate" not in res.details
