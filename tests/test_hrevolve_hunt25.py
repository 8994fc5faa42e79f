"""H-Revolve (hunt 25): overflowing costs are not "no storage slot", 0-slot levels change neither
the orders tried nor the proof, the search over orders shares prefixes and stops at a time limit.

The new names of `solvers.offload.hrevolve` are looked up inside the tests, so that each test
fails on its own on an older tree."""

from __future__ import annotations

import itertools
import math
import random
import warnings

import numpy as np
import pytest
from memsched.solvers.offload import hrevolve as H
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

#: five levels, each cheaper to write and dearer to read than the next: no order is monotone
INCOMPARABLE5 = [(1, 0, 5), (1, 1, 4), (1, 2, 3), (1, 3, 2), (None, 4, 1)]


def _naive_tables(l: int, levels: list[tuple[int | None, float, float]], u_f: float, u_b: float) -> list[list]:
    """E_k(q, m) of the module docstring's recurrence, every entry computed (no shortcut), as lists."""
    out: list[list] = []
    prev: list[float] | None = None  # E_{k-1}(q, c_{k-1}) for q = 0..l
    for c, w, r in levels:
        cap = l if c is None else min(c, l)
        low = [u_b if q == 0 else math.inf for q in range(l + 1)] if prev is None else prev
        E = [[math.inf] * (cap + 1) for _ in range(l + 1)]
        P = [[math.inf] * (cap + 1) for _ in range(l + 1)]
        for m in range(cap + 1):
            E[0][m] = u_b
            P[0][m] = u_b if m else math.inf
        for q in range(1, l + 1):
            E[q][0] = low[q]
        for m in range(1, cap + 1):
            for q in range(1, l + 1):
                split = min(j * u_f + E[q - j][m - 1] + r + P[j - 1][m] for j in range(1, q + 1))
                P[q][m] = min(low[q], split)
                E[q][m] = min(low[q], w + P[q][m])
        out.append(E)
        prev = [E[q][cap] for q in range(l + 1)]
    return out


# --- 1. costs that overflow a float ------------------------------------------------------------


def test_cli_level_costs_are_capped_like_uf(cli):
    for text in ("1,0,1e308", "1,1e16,0", "1,0,-1"):
        res = cli("hrevolve", "3", "--level", text)
        assert res.code == 2, (text, res.code, res.err)
        assert len(res.err.strip().splitlines()) == 1 and "--level" in res.err
        assert "slot" not in res.err and "RuntimeWarning" not in res.err
    assert cli("hrevolve", "3", "--level", "1,0,1e15", "--json").json()["cost"] == 3 * 1e15 + 6 + 4  # 3 reads, 6 F, 4 B


def test_overflow_is_not_reported_as_no_slot():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning either
        with pytest.raises(ValueError, match="overflow") as err:
            H.hrevolve(3, [(1, 0, 1e308)])
        assert "slot" not in str(err.value)
        with pytest.raises(ValueError, match="overflow"):
            H.solve_hrevolve(H.HRevolveInstance(3, ((1, 0, 1e308),)))
    # a real absence of slots is still infeasible, with its own message
    res = H.solve_hrevolve(H.HRevolveInstance(3, ((0, 0, 0), (0, 1, 1))))
    assert res.status == INFEASIBLE and "storage slot" in res.message
    with pytest.raises(ValueError, match="storage slot"):
        H.hrevolve(3, [(0, 0, 0)])
    assert H.hrevolve(0, [(0, 0, 0)], 1, 2) == (2, [H.HOp(H.BWD, 1)])


def test_infinite_step_costs_are_refused():
    for u_f, u_b in ((math.inf, 1.0), (1.0, math.inf), (math.nan, 1.0)):
        with pytest.raises(ValueError, match="finite"):
            H.HRevolveInstance(3, ((1, 0, 0),), u_f=u_f, u_b=u_b)


# --- 2. levels with 0 slots ----------------------------------------------------------------------


def test_zero_slot_levels_do_not_cut_the_orders_tried():
    """6 levels, 4 of them 0-slot: all orders of the 2 usable ones are tried (cost 60, not 61)."""
    two = [(1, 6, 0), (1, 0, 5)]
    six = two + [(0, 9, 0), (0, 0, 9), (0, 9, 0), (0, 0, 9)]
    cost2, _ = H.hrevolve(6, two, 3, 1)
    cost6, ops6 = H.hrevolve(6, six, 3, 1)
    assert cost2 == cost6 == 60
    assert {op.level for op in ops6 if op.level is not None} <= {0, 1}  # numbered as given
    assert H.simulate_hrevolve(6, six, ops6, 3, 1).cost == 60
    proven, orders = H.level_orders(six)
    assert not proven and sorted(orders) == [(0, 1), (1, 0)]


def test_zero_slot_levels_found_by_random_search_match():
    zeros = [(0, 9, 0), (0, 0, 9), (0, 9, 0), (0, 0, 9)]
    for l, two, u_f, cost in ((8, [(2, 1, 5), (1, 4, 2)], 1, 57), (8, [(1, 1, 6), (1, 2, 5)], 2, 91)):  # the hunt's
        assert H.hrevolve(l, two + zeros, u_f, 1)[0] == H.hrevolve(l, two, u_f, 1)[0] == cost
    rnd = random.Random(0)
    for _ in range(40):
        l = rnd.randint(2, 7)
        a = (rnd.randint(1, 3), rnd.randint(0, 6), rnd.randint(0, 6))
        b = (rnd.choice([1, 2, None]), rnd.randint(0, 6), rnd.randint(0, 6))
        assert H.hrevolve(l, [a, b] + zeros, 2, 1)[0] == H.hrevolve(l, [a, b], 2, 1)[0]
        assert H.hrevolve(l, zeros[:2] + [a] + zeros[2:] + [b], 2, 1)[0] == H.hrevolve(l, [a, b], 2, 1)[0]


def test_zero_slot_level_keeps_the_proof():
    base = H.solve_hrevolve(H.HRevolveInstance(6, ((1, 0, 0), (None, 1, 1))))
    res = H.solve_hrevolve(H.HRevolveInstance(6, ((1, 0, 0), (0, 5, 0), (None, 1, 1))))
    assert base.status == res.status == OPTIMAL
    assert res.objective == res.lower_bound == base.objective == 20
    assert {op.level for op in res.schedule.ops if op.level is not None} <= {0, 2}
    assert H.level_orders([(1, 0, 0), (0, 5, 0), (None, 1, 1)]) == (True, [(0, 2)])


def test_more_than_five_usable_incomparable_levels_claim_no_proof():
    levels = tuple((1, float(k), float(6 - k)) for k in range(6))  # 6 usable, pairwise incomparable
    proven, orders = H.level_orders(levels)
    assert not proven and len(orders) == 1
    res = H.solve_hrevolve(H.HRevolveInstance(7, levels, 1.0, 1.0))
    assert res.status == FEASIBLE and res.lower_bound is None
    assert "order by write + read cost only, no proof" in res.scope
    assert res.details["orders"] == res.details["orders_tried"] == 1
    assert "K <= 5" in H.hrevolve.__doc__ and "K > 5" in H.hrevolve.__doc__
    # five usable ones (plus a 0-slot level): every order, said so
    res5 = H.solve_hrevolve(H.HRevolveInstance(5, (*INCOMPARABLE5, (0, 1, 1))))
    assert res5.status == FEASIBLE and res5.details["orders"] == res5.details["orders_tried"] == 120
    assert "all 120 level orders" in res5.scope


# --- 3. the search over orders -------------------------------------------------------------------


def test_shared_prefix_search_equals_separate_dps():
    rnd = random.Random(3)
    for _ in range(12):
        K = rnd.randint(2, 4)
        levels = [(rnd.choice([None, 1, 2]), rnd.randint(0, 5), rnd.randint(0, 5)) for _ in range(K)]
        l, u_f, u_b = rnd.randint(0, 9), rnd.choice([1, 2, 3]), rnd.choice([0, 1, 2])
        orders = list(itertools.permutations(range(K)))
        found = H.best_order(l, levels, orders, u_f, u_b)
        each = [H.hrevolve_cost(l, [levels[k] for k in o], u_f, u_b) for o in orders]
        assert found.tried == found.total == len(orders)
        assert found.tables.optimum == min(each) == each[orders.index(found.order)]


def test_tables_equal_the_plain_recurrence():
    rnd = random.Random(5)
    for _ in range(15):
        K = rnd.randint(1, 3)
        levels = [(rnd.choice([None, 0, 1, 3]), rnd.choice([0, 1, 2.5]), rnd.choice([0, 1, 3.5])) for _ in range(K)]
        l, u_f, u_b = rnd.randint(0, 9), rnd.choice([0, 1, 2.5]), rnd.choice([0, 1, 2])
        tabs = H.hrevolve_tables(l, levels, u_f, u_b)
        for k, E in enumerate(_naive_tables(l, levels, u_f, u_b)):
            np.testing.assert_allclose(tabs.E[k], np.array(E), rtol=1e-12, err_msg=str((l, levels, k)))


def test_time_limit_stops_the_order_search():
    inst = H.HRevolveInstance(6, tuple(INCOMPARABLE5))
    res = H.solve_hrevolve(inst, time_limit=1e-9)
    assert res.status == FEASIBLE and res.lower_bound is None
    assert res.details["orders_tried"] == 1 and res.details["orders"] == 120
    assert "1 (time limit) of the 120" in res.scope
    first = H.level_orders(INCOMPARABLE5)[1][0]
    assert res.objective == H.hrevolve_cost(6, [INCOMPARABLE5[k] for k in first])
    full = H.solve_hrevolve(inst)
    assert full.details["orders_tried"] == 120 and full.objective <= res.objective


def test_cli_time_limit(cli):
    args = ["hrevolve", "6"] + [x for lev in INCOMPARABLE5 for x in ("--level", ",".join(
        "inf" if v is None else str(v) for v in lev))]
    quick = cli(*args, "--time-limit", "1e-9", "--json")
    assert quick.code == 0 and quick.json()["orders_tried"] == 1
    assert cli(*args, "--json").json()["orders_tried"] == 120
    assert cli(*args, "--time-limit", "0").code == 2
