"""H-Revolve (solvers.offload.hrevolve): the DP against a brute force over all schedules of the
abstract model, against Revolve's and Disk-Revolve's optima, schedules replayed in the
independent simulator, monotonicity, and the solver entry point."""

from __future__ import annotations

import json
import math
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers.chain.revolve import revolve_forwards
from memsched.solvers.offload.hrevolve import (
    BWD,
    DISCARD,
    FWD,
    READ,
    WRITE,
    HOp,
    HRevolveInstance,
    HRevolveViolation,
    costs_monotone,
    hrevolve,
    hrevolve_cost,
    level_orders,
    simulate_hrevolve,
    solve_hrevolve,
)
from memsched.solvers.offload.hrevolve_brute import brute_force_hrevolve
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

FAST = settings(max_examples=25, deadline=None)


@st.composite
def monotone_levels(draw, max_levels: int = 3, max_slots: int = 2, max_cost: int = 4):
    """1..max_levels levels with w_k and r_k non-decreasing in k; slots 0..max_slots or None."""
    K = draw(st.integers(1, max_levels))
    ws = sorted(draw(st.lists(st.integers(0, max_cost), min_size=K, max_size=K)))
    rs = sorted(draw(st.lists(st.integers(0, max_cost), min_size=K, max_size=K)))
    slots = draw(st.lists(st.one_of(st.integers(0, max_slots), st.none()), min_size=K, max_size=K))
    return [(c, w, r) for c, w, r in zip(slots, ws, rs)]


@st.composite
def any_levels(draw, max_levels: int = 3, max_slots: int = 2, max_cost: int = 4):
    K = draw(st.integers(1, max_levels))
    return [(draw(st.one_of(st.integers(0, max_slots), st.none())), draw(st.integers(0, max_cost)),
             draw(st.integers(0, max_cost))) for _ in range(K)]


def replay_cost(l, levels, ops, u_f, u_b) -> float:
    return simulate_hrevolve(l, levels, ops, u_f, u_b).cost


# --- against the brute force ------------------------------------------------------------------


@FAST
@given(l=st.integers(0, 4), levels=monotone_levels(), u_f=st.integers(0, 3), u_b=st.integers(0, 3))
def test_dp_equals_brute_force(l, levels, u_f, u_b):
    dp = hrevolve_cost(l, levels, u_f, u_b)
    assert dp == brute_force_hrevolve(l, levels, u_f, u_b)
    if math.isfinite(dp):
        cost, ops = hrevolve(l, levels, u_f, u_b, reorder=False)
        assert cost == dp == replay_cost(l, levels, ops, u_f, u_b)


@pytest.mark.parametrize("levels,u_f,u_b", [
    ([(1, 0, 0), (None, 2, 2)], 1, 1),       # Disk-Revolve, one memory slot
    ([(2, 0, 0), (1, 1, 3)], 2, 1),
    ([(1, 1, 1), (1, 2, 2), (None, 3, 5)], 1, 0),
    ([(0, 0, 0), (2, 1, 1)], 1, 1),          # no memory: everything through level 1
])
def test_dp_equals_brute_force_length_5(levels, u_f, u_b):
    dp = hrevolve_cost(5, levels, u_f, u_b)
    assert dp == brute_force_hrevolve(5, levels, u_f, u_b)


@FAST
@given(l=st.integers(0, 4), levels=any_levels(max_levels=2), u_f=st.integers(1, 3), u_b=st.integers(0, 3))
def test_unordered_levels(l, levels, u_f, u_b):
    """Any costs: every DP is a schedule (>= the optimum); sorted / best-order DP == optimum
    on these instances (proven only for orderable costs)."""
    bf = brute_force_hrevolve(l, levels, u_f, u_b)
    assert hrevolve_cost(l, levels, u_f, u_b) >= bf
    if math.isfinite(bf):
        cost, ops = hrevolve(l, levels, u_f, u_b)
        assert cost == bf == replay_cost(l, levels, ops, u_f, u_b)


def test_brute_force_is_revolve_on_one_free_level():
    """The referee itself, checked against Griewank's closed form."""
    for l in range(0, 6):
        for c in (1, 2, 3):
            assert brute_force_hrevolve(l, [(c, 0, 0)], 2, 1) == (l + 1) + 2 * revolve_forwards(l + 1, c)


def test_given_order_not_optimal_when_costs_not_monotone():
    levels = [(1, 3, 4), (1, 2, 4)]   # level 1 is cheaper than level 0
    assert not costs_monotone(levels) and level_orders(levels) == (True, [(1, 0)])
    assert hrevolve_cost(5, levels, 3, 2) == 64
    assert brute_force_hrevolve(5, levels, 3, 2) == 63
    cost, ops = hrevolve(5, levels, 3, 2)
    assert cost == 63 == replay_cost(5, levels, ops, 3, 2)


# --- against Revolve and Disk-Revolve ---------------------------------------------------------


@pytest.mark.parametrize("u_f,u_b", [(1, 1), (2, 3)])
def test_one_level_is_revolve(u_f, u_b):
    """Chain of length l = Revolve with l + 1 steps: (l+1) u_b + p(l+1, c) u_f."""
    for l in range(0, 25):
        for c in range(1, 6):
            levels = [(c, 0, 0)]
            expect = (l + 1) * u_b + revolve_forwards(l + 1, c) * u_f
            cost, ops = hrevolve(l, levels, u_f, u_b)
            assert cost == expect, (l, c)
            sim = simulate_hrevolve(l, levels, ops, u_f, u_b)
            assert sim.cost == expect and sim.peak_slots[0] <= c
            assert sim.counts[FWD] == revolve_forwards(l + 1, c)


def disk_revolve(l: int, cm: int, wd: float, rd: float, u_f: float, u_b: float) -> float:
    """Disk-Revolve (Aupy, Herrmann, Hovland, Robert 2016): free memory of cm slots, unlimited
    disk (write wd, read rd). Opt_0 = Revolve; Opt_1D: x_0 on disk, memory only afterwards."""

    def opt0(n: int) -> float:
        if n == 0:
            return u_b
        return (n + 1) * u_b + revolve_forwards(n + 1, cm) * u_f if cm >= 1 else math.inf

    @cache
    def opt1d(n: int) -> float:
        if n == 0:
            return u_b
        return min([opt0(n)] + [j * u_f + opt0(n - j) + rd + opt1d(j - 1) for j in range(1, n + 1)])

    @cache
    def optinf(n: int) -> float:
        if n == 0:
            return u_b
        return min([opt0(n)] + [wd + j * u_f + optinf(n - j) + rd + opt1d(j - 1) for j in range(1, n + 1)])

    return optinf(l)


@pytest.mark.parametrize("cm,wd,rd", [(0, 1, 1), (1, 2, 3), (2, 5, 1), (3, 0.5, 0.5)])
def test_two_levels_is_disk_revolve(cm, wd, rd):
    for l in range(0, 20):
        levels = [(cm, 0, 0), (None, wd, rd)]
        cost, ops = hrevolve(l, levels, 1, 1)
        assert cost == pytest.approx(disk_revolve(l, cm, wd, rd, 1, 1)), l
        assert replay_cost(l, levels, ops, 1, 1) == pytest.approx(cost)


# --- schedules and the simulator --------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(l=st.integers(0, 30), levels=any_levels(max_levels=3, max_slots=4, max_cost=6),
       u_f=st.floats(0, 3), u_b=st.floats(0, 3))
def test_schedules_replay_to_dp_cost(l, levels, u_f, u_b):
    for reorder in (False, True):
        try:
            cost, ops = hrevolve(l, levels, u_f, u_b, reorder=reorder)
        except ValueError:
            assert l >= 1 and all(c == 0 for c, _, _ in levels)
            continue
        sim = simulate_hrevolve(l, levels, ops, u_f, u_b)
        assert sim.cost == pytest.approx(cost, rel=1e-9, abs=1e-9)
        assert sim.counts[BWD] == l + 1
        for (c, _, _), peak in zip(levels, sim.peak_slots):
            assert c is None or peak <= c


def test_simulator_rejects_bad_schedules():
    levels = [(1, 0, 0)]
    ok = [HOp(WRITE, 0, 0), HOp(FWD, 1), HOp(BWD, 2), HOp(READ, 0, 0), HOp(BWD, 1), HOp(DISCARD, 0, 0)]
    assert simulate_hrevolve(1, levels, ok).cost == 3
    bad = {
        "full": [HOp(WRITE, 0, 0), HOp(FWD, 1), HOp(WRITE, 1, 0)],
        "not stored": [HOp(FWD, 1), HOp(BWD, 2), HOp(READ, 0, 0)],
        "buffer": [HOp(FWD, 2)],
        "out of order": [HOp(BWD, 1)],
        "backward input": [HOp(WRITE, 0, 0), HOp(BWD, 2)],
        "twice": ok + [HOp(BWD, 1)],
        "ends before": ok[:3],
        "no level": [HOp(WRITE, 0, 1)],
    }
    for name, ops in bad.items():
        with pytest.raises(HRevolveViolation):
            simulate_hrevolve(1, levels, ops)
        assert name


def test_brute_force_edges():
    assert brute_force_hrevolve(0, [(0, 0, 0)], 1, 2) == 2
    assert brute_force_hrevolve(2, [(0, 0, 0)], 1, 1) == math.inf
    assert hrevolve_cost(2, [(0, 0, 0), (0, 1, 1)]) == math.inf
    with pytest.raises(ValueError):
        hrevolve(2, [(0, 0, 0)])


# --- monotonicity -----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(l=st.integers(0, 20), levels=monotone_levels(max_slots=4, max_cost=6), k=st.integers(0, 2),
       data=st.data())
def test_more_slots_or_cheaper_levels_never_hurt(l, levels, k, data):
    k = min(k, len(levels) - 1)
    base = hrevolve_cost(l, levels, 1, 1)
    c, w, r = levels[k]
    more = list(levels)
    more[k] = (None if c is None else c + data.draw(st.integers(1, 3)), w, r)
    assert hrevolve_cost(l, more, 1, 1) <= base
    cheaper = list(levels)
    cheaper[k] = (c, max(0, w - data.draw(st.integers(0, 2))), max(0, r - data.draw(st.integers(0, 2))))
    assert hrevolve_cost(l, cheaper, 1, 1) <= base


def test_unlimited_is_store_all():
    """Free unlimited memory: store every value once, l forwards, l + 1 backwards."""
    assert hrevolve_cost(10, [(None, 0, 0)], 2, 3) == 10 * 2 + 11 * 3


# --- the solver entry point -------------------------------------------------------------------


def test_solve_hrevolve():
    inst = HRevolveInstance(12, ((2, 0, 0), (None, 3, 2)), u_f=1, u_b=2)
    res = solve_hrevolve(inst)
    assert res.status == OPTIMAL and res.problem == "offload" and res.solver == "hrevolve"
    assert "H-Revolve abstract model" in res.scope
    assert res.objective == hrevolve_cost(12, inst.levels, 1, 2) == res.lower_bound
    assert len(res.schedule) == len(res.schedule.ops) > 0
    out = json.loads(json.dumps(res.to_json()))
    assert out["schedule"]["format"] == "memsched.hrevolve/1"
    assert out["makespan"] == res.objective
    # budget = slots of level 0
    res1 = solve_hrevolve(inst, budget=1)
    assert res1.objective == hrevolve_cost(12, [(1, 0, 0), (None, 3, 2)], 1, 2) >= res.objective
    assert solve_hrevolve(HRevolveInstance(3, ((0, 0, 0),))).status == INFEASIBLE
    assert solve_hrevolve(HRevolveInstance(3, ((1, 0, 3), (1, 3, 0)))).status == FEASIBLE
