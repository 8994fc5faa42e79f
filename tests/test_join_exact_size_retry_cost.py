"""The join heuristics' exact-size / finer-slot retries (and `dp`, which re-runs them in
`heuristics_never_worse`) no longer fill dense rotor tables of about 10^7 memory values on
byte-sized joins: a 1-2 stage branch's table is evaluated where the heuristic reads it
(`solvers/join/lazy_table.py`), with the same values, choices and schedules.

Before, a 1-stage join (sizes ~1e10 bytes) one byte below its least budget took 0.4-9 s per
heuristic and a 2-stage one at ``slots=50`` 5-8 s in `dp`, each retry filling 3e7-entry tables.
The answers below were recorded on the tree before the change; the structural test counts the
entries of every dense rotor table built (no timing)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from memsched.solvers import registry
from memsched.solvers.chain import dp as chain_dp
from memsched.solvers.join import Join
from memsched.solvers.join import baselines as join_baselines
from memsched.solvers.join import dp as join_dp
from memsched.solvers.join.generate import random_join
from memsched.solvers.join.simulator import simulate

SOLVERS = ("dp", "equal", "proportional", "sequential")

#: the join hunt's onestage.json: 1 branch, 1 stage, least budget 36294046265
ONESTAGE = {"format": "memsched.join/1", "name": "t", "branches": [{"name": "b0", "input_size": 9572460850, "stages": [
    {"fwd_time": 3, "bwd_time": 1, "out_size": 6225516708, "tape_size": 10923607856, "fwd_overhead": 0,
     "bwd_overhead": 1}]}], "loss": {"bwd_time": 0, "bwd_overhead": 1}}
#: the join hunt's twostage.json: 1 branch, 2 stages, least budget 26288813141
TWOSTAGE = {"format": "memsched.join/1", "name": "t", "branches": [{"name": "b0", "input_size": 1124077025, "stages": [
    {"fwd_time": 1, "bwd_time": 0, "out_size": 5996024490, "tape_size": 6281704667, "fwd_overhead": 1,
     "bwd_overhead": 2},
    {"fwd_time": 1, "bwd_time": 4, "out_size": 3286348377, "tape_size": 9886338759, "fwd_overhead": 1,
     "bwd_overhead": 0}]}], "loss": {"bwd_time": 0, "bwd_overhead": 2}}


def make(key) -> Join:
    """The join of a case: one of the two files, or (lengths, seed) of a byte-sized random join."""
    if key == "one":
        return Join.from_dict(ONESTAGE)
    if key == "two":
        return Join.from_dict(TWOSTAGE)
    lengths, seed = key
    return random_join(list(lengths), seed, size_range=(10**9, 10**10), overhead=0.5, integer_times=True)


INF_ = ("infeasible", None, None, None)
#: (join, budget, slots, {solver: (status, makespan, peak memory, min_budget)}), recorded on the old tree
CASES = [
    ("one", 36294046264, 500, {"dp": ("infeasible", None, None, 36294046265), "equal": INF_, "proportional": INF_,
                               "sequential": INF_}),
    ("one", 36294046265, 50, {"dp": ("optimal", 4.0, 36294046265, None), "equal": INF_, "proportional": INF_,
                              "sequential": INF_}),
    ("one", 36295046265, 500, {s: ("optimal" if s == "dp" else "feasible", 4.0, 36294046265, None) for s in SOLVERS}),
    ("two", 26288813141, 50, {"dp": ("feasible", 7.0, 26288813141, 26288813141), "equal": INF_, "proportional": INF_,
                              "sequential": INF_}),
    ("two", 26288813140, 500, {"dp": ("infeasible", None, None, 26288813141), "equal": INF_, "proportional": INF_,
                               "sequential": INF_}),
    ("two", 26288913141, 50, {"dp": ("feasible", 7.0, 26288813141, 26288813141),
                              **{s: ("feasible", 7.0, 26288813141, None) for s in SOLVERS[1:]}}),
    (((2,), 2), 30916884772, 50, {"dp": ("optimal", 12.0, 30916884772, None), "equal": INF_, "proportional": INF_,
                                  "sequential": INF_}),
    (((2,), 2), 30917884772, 500, {s: ("optimal" if s == "dp" else "feasible", 12.0, 30916884772, None)
                                   for s in SOLVERS}),
    (((1, 1), 3), 36783187946, 500, {"dp": ("optimal", 16.0, 36782187946, None), "equal": INF_, "proportional": INF_,
                                     "sequential": ("feasible", 16.0, 36782187946, None)}),
    (((2, 1), 4), 49323456467, 500, {"dp": ("optimal", 22.0, 49322456467, None), "equal": INF_, "proportional": INF_,
                                     "sequential": ("feasible", 23.0, 49322456467, None)}),
]


@pytest.fixture
def dense_tables(monkeypatch) -> list[int]:
    """Entries of every dense rotor table (`chain.dp.rotor_table`) built while the test runs, wherever
    the solvers import it from."""
    built: list[int] = []
    fill = chain_dp.rotor_table

    def spy(chain, M, **kw):
        table = fill(chain, M, **kw)
        built.append(int(table.C.size))
        return table

    modules = [chain_dp, join_baselines, join_dp]
    try:
        from memsched.solvers.join import lazy_table
        modules.append(lazy_table)
    except ImportError:  # the tree before the change has no lazy tables
        pass
    for module in modules:
        monkeypatch.setattr(module, "rotor_table", spy, raising=False)
    return built


@pytest.mark.parametrize("key,budget,slots,expected", CASES)
def test_answers_are_unchanged_on_byte_sized_joins(key, budget, slots, expected):
    join = make(key)
    for name in SOLVERS:
        res = registry.solve("join", join, name, budget, slots=slots)
        status, makespan, peak, min_budget = expected[name]
        assert (res.status, res.peak_memory, res.min_budget) == (status, peak, min_budget), name
        if makespan is None:
            assert res.objective is None and res.schedule is None, name
            continue
        assert res.objective == pytest.approx(makespan, rel=1e-12), name
        sim = simulate(join, res.schedule)
        sim.raise_if_invalid()
        assert sim.peak_memory <= budget and sim.makespan == pytest.approx(res.objective, rel=1e-12), name


#: (join, budget, slots): one byte below the least budget, and the 2-stage join at slots=50 where `dp` re-ran
#: the heuristics' retries (about 10^7 memory values a table)
RETRIES = [("one", 36294046264, 500), ("two", 26288813141, 50), ("two", 26288913141, 50)]


@pytest.mark.parametrize("key,budget,slots", RETRIES)
@pytest.mark.parametrize("name", SOLVERS)
def test_retries_evaluate_only_what_they_read(dense_tables, name, key, budget, slots):
    """Every retry ran (10^7 memory values at least), and no table built or evaluated has more than
    100,000 entries (before: 3e7 and 1.5e7 entries, one dense table per retry)."""
    join = make(key)
    res = registry.solve("join", join, name, budget, slots=slots)
    if name != "dp" and res.status == "infeasible":
        assert res.details["slots_tried"][0] == slots and res.details["slots_tried"][1] >= 4_999_999
    assert max(dense_tables, default=0) <= 100_000, dense_tables
    if name != "dp":
        assert 0 < res.details["table_cells"] <= 100_000


def test_lazy_table_is_the_dense_table_bit_for_bit():
    """Values (every row, every m), choices and schedules of `LazyRotorTable` equal the dense kernel's,
    float times and per-mode overheads and times included, also after its fallback to the dense table."""
    from memsched.solvers.join.lazy_table import LazyRotorTable

    for seed in range(40):
        rng = np.random.default_rng(seed)
        L = int(rng.integers(1, 6))
        chain = random_join([L], seed, size_range=(1, int(rng.choice([5, 40]))), overhead=float(rng.choice([0, 2])),
                            mode_overheads=bool(seed % 2), mode_times=bool(seed % 3),
                            loss_overhead=int(rng.integers(0, 4))).branches[0]
        M = int(chain.x.sum() + chain.xbar.sum()) + 5
        dense = chain_dp.rotor_table(chain, M)
        lazy, tiny = LazyRotorTable(chain, M, max_states=10**9), LazyRotorTable(chain, M, max_states=3)
        for i in range(L + 1):
            for l in range(i, L + 1):
                for m in range(M + 1):
                    want = dense.value(m, i, l)
                    assert lazy.value(m, i, l) == want and tiny.value(m, i, l) == want, (seed, i, l, m)
                    if math.isfinite(want):
                        assert lazy.choice(m, i, l) == dense.choice(m, i, l), (seed, i, l, m)
        for m in range(M + 1):
            if math.isfinite(dense.value(m)):
                assert lazy.schedule(m).ops == dense.schedule(m).ops == tiny.schedule(m).ops
        assert tiny.dense is not None and tiny.cells == dense.C.size  # it fell back
        assert lazy.dense is None and 0 < lazy.cells
