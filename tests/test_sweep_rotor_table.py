"""One rotor table for the many budgets of a sweep (shared_table = true): one DP, not one per budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memsched.experiments.sweep import run_sweep
from memsched.solvers import registry
from memsched.solvers.chain import dp, shared_table
from memsched.solvers.chain.generate import random_chain

BUDGETS = ["45%", "55%", "65%", "75%", "85%", "95%", "100%"]


def config(tmp_path: Path, shared: bool, slots: int = 100) -> Path:
    """A sweep of rotor on random_chain(25, 7) (store-all peak 285 units): with 100 slots every
    budget (45% = 128 units and up) is above the slot count, so the slots are used."""
    path = tmp_path / f"r{int(shared)}-{slots}.toml"
    budgets = ", ".join(f'"{b}"' for b in BUDGETS)
    path.write_text(f"""
name = "rt"
budgets = [{budgets}]
[[instances]]
generate = "chain"
L = 25
seed = 7
[[solvers]]
name = "rotor"
slots = {slots}
shared_table = {str(shared).lower()}
""")
    return path


@pytest.fixture
def count_tables(monkeypatch):
    """Count the rotor DP tables built (dp.rotor_table calls) in this process."""
    calls = []
    real = dp.rotor_table

    def counted(chain, M, **kw):
        calls.append(M)
        return real(chain, M, **kw)

    monkeypatch.setattr(dp, "rotor_table", counted)
    shared_table._CACHE.clear()
    return calls


def test_shared_table_builds_one_table_for_all_budgets(tmp_path, count_tables):
    outcome = run_sweep(config(tmp_path, True), output=tmp_path / "s", workers=1, progress=False, isolate=False)
    rows = outcome.rows
    assert len(rows) == len(BUDGETS) and all(r["status"] == "optimal" for r in rows)
    assert all(r["peak_memory"] <= r["budget"] for r in rows)  # each schedule replayed by the referee
    below = [r for r in rows if r["budget"] < r["reference_peak"]]
    top = max(r["budget"] for r in below)
    assert len(count_tables) == 1  # one DP for the six budgets below the store-all peak
    for r in below:
        assert json.loads(r["options"]) == {"table_budget": top}
        assert "shared table" in r["scope"]

    # without sharing: one table per budget below the peak; the largest budget's answer is the same
    count_tables.clear()
    alone = run_sweep(config(tmp_path, False), output=tmp_path / "u", workers=1, progress=False, isolate=False)
    assert len(count_tables) == len(below)
    by_budget = {r["budget"]: r for r in alone.rows}
    same = [r for r in rows if r["budget"] == top][0]
    assert same["objective"] == by_budget[top]["objective"]


def test_budgets_within_the_slots_keep_exact_sizes_in_a_shared_sweep(tmp_path, count_tables):
    """With 200 slots the budgets of at most 200 units are solved at exact sizes (one small table
    each, as `solve_rotor` alone), the larger ones read the shared 200-slot table."""
    rows = run_sweep(config(tmp_path, True, slots=200), output=tmp_path / "s", workers=1, progress=False,
                     isolate=False).rows
    below = [r for r in rows if r["budget"] < r["reference_peak"]]
    exact = [r for r in below if r["budget"] <= 200]
    assert exact and len(exact) < len(below)
    assert len(count_tables) == len(exact) + 1
    for r in below:
        alone = registry.solve("chain", random_chain(25, 7), "rotor", r["budget"], slots=0 if r in exact else 200)
        if r in exact:
            assert "exact sizes" in r["scope"] and r["objective"] == pytest.approx(alone.objective, rel=1e-12)
        else:
            assert "shared table" in r["scope"] and r["objective"] >= alone.objective - 1e-9


def test_shared_answers_match_solving_at_the_table_slot():
    """Reading budget b from the table of B equals a DP at b with B's slot size (floor(b N / B) slots)."""
    chain = random_chain(18, seed=2)
    peak = registry.get_problem("chain").reference_peak(chain)
    B, N = int(0.9 * peak), 60  # B = 180 units in 60 slots of 3
    for frac in (0.5, 0.6, 0.75):
        b = int(frac * peak)
        r = registry.solve("chain", chain, "rotor", b, slots=N, table_budget=B)
        m = shared_table.slots_within(b, B, N)
        work = chain.discretised(B / N)
        direct = dp.rotor_table(work, m - int(work.x[0])).value(m - int(work.x[0]))
        assert r.status == "optimal" and r.objective == pytest.approx(direct, rel=1e-12)
        assert r.details["table_slots"] == m and r.peak_memory <= b


def test_a_table_budget_within_the_slots_is_one_exact_table(count_tables):
    """B at most N units: one exact-size table answers every b <= B, as `solve_rotor` at b with exact sizes."""
    chain = random_chain(18, seed=2)
    B, budgets = 180, (100, 120, 150, 180)
    exact = [registry.solve("chain", chain, "rotor", b, slots=0).objective for b in budgets]
    count_tables.clear()
    for b, want in zip(budgets, exact):
        r = registry.solve("chain", chain, "rotor", b, slots=500, table_budget=B)
        assert r.objective == pytest.approx(want, rel=1e-12)
        assert "exact sizes" in r.scope and r.details["table_slots"] == b
    assert len(count_tables) == 1


def test_shared_table_must_be_a_boolean(tmp_path, cli):
    path = config(tmp_path, True)
    path.write_text(path.read_text().replace("shared_table = true", 'shared_table = "yes"'))
    r = cli("sweep", path, "--output", tmp_path / "o", "--no-progress")
    assert r.code == 2 and "solvers[0].shared_table" in r.err
