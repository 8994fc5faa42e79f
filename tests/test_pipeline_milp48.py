"""The pipeline's MILP solvers (`milp`, `dag-milp`, solvers/pipeline/milp.py): the path model of
`cpsat` / `dag-cpsat` stated as a backend-neutral `LinearModel` and solved by SCIP (default), HiGHS
or CBC. On random small instances `milp` equals `cpsat`, `madpipe` and a brute force over contiguous
partitions, its partition replays in the simulator to the reported period, an infeasible budget is
`infeasible` with `madpipe`'s `min_budget`, and statuses and bounds are sane; `dag-milp` equals
`dag-cpsat` on small DAGs; both are registered, documented, and accepted by `memsched partition`."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.pipeline import SOLVERS, Partition, simulate
from memsched.solvers.pipeline.generate import parallel_branches, random_pipeline
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

import memsched

PIPELINE = str(memsched.data_path("pipeline", "mlp7.chain.json"))
TB = 10**12


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def solve(inst, solver: str, budget: int | None, P: int, **kw):
    """`registry.solve` of a pipeline solver; the exact ones on one worker, 20 s."""
    if solver in ("cpsat", "milp", "dag-cpsat", "dag-milp"):
        kw = {"time_limit": 20, "workers": 1, **kw}
    return registry.solve("pipeline", inst, solver, budget, devices=P, **kw)


def brute_force(inst, P: int, budget: int | None) -> float | None:
    """The smallest simulated period over every contiguous straight partition into at most P stages
    that fits `budget` (None: none fits)."""
    best = math.inf
    L = inst.length
    for S in range(1, min(P, L) + 1):
        for cuts in itertools.combinations(range(1, L), S - 1):
            edges = (0, *cuts, L)
            part = Partition.from_bounds([(edges[k], edges[k + 1] - 1) for k in range(S)], devices=P)
            ev = simulate(inst, part, budget)
            if ev.violation is None:
                best = min(best, ev.period)
    return None if best == math.inf else best


def assert_sane(res, inst, budget: int | None) -> None:
    """An answer with a partition: it replays to the reported period within the budget, and its bound
    (None only for `feasible`: the seed returned at the limit) lies at or below the period; `optimal`
    means the bound reaches it."""
    assert res.status in (OPTIMAL, FEASIBLE), (res.status, res.message)
    ev = simulate(inst, res.schedule, budget)
    assert ev.violation is None
    assert close(ev.period, res.objective), (ev.period, res.objective)
    assert res.lower_bound is not None or res.status == FEASIBLE
    assert res.lower_bound is None or res.lower_bound <= res.objective * (1 + 1e-12)
    if res.status == OPTIMAL:
        assert close(res.lower_bound, res.objective)


instances = st.builds(lambda seed, L, bw: random_pipeline(np.random.default_rng(seed), L, bandwidth=bw),
                      st.integers(0, 10**6), st.integers(1, 8), st.sampled_from([None, 20.0]))


@settings(max_examples=40, deadline=None)
@given(inst=instances, P=st.integers(1, 3), frac=st.sampled_from([None, -0.01, 0.0, 0.3, 1.0]),
       warm=st.booleans(), backend=st.sampled_from([None, "scip", "highs", "cbc"]))
def test_milp_equals_cpsat_madpipe_and_the_brute_force(inst, P, frac, warm, backend):
    least = solve(inst, "madpipe", 1, P).min_budget
    budget = None if frac is None else max(0, int(least * (1 + frac)) - (1 if frac < 0 else 0))
    kw = {} if backend is None else {"backend": backend}
    got = solve(inst, "milp", budget, P, warm_start=warm, **kw)
    ref = solve(inst, "cpsat", budget, P, warm_start=False, hint=False)
    dp = solve(inst, "madpipe", budget, P)
    brute = brute_force(inst, P, budget)
    assert got.solver == "milp" and got.scope == ref.scope
    if brute is None:
        assert got.status == ref.status == dp.status == INFEASIBLE, (got.status, got.message)
        assert got.schedule is None and got.min_budget == dp.min_budget == least
        return
    assert got.status == ref.status == OPTIMAL, (got.status, got.message, got.details)
    assert close(got.objective, ref.objective) and close(got.objective, dp.objective)
    assert close(got.objective, brute), (got.objective, brute)
    assert_sane(got, inst, budget)
    assert got.details["backend"] == (backend or "scip")
    assert len(got.schedule.stages) <= P and all(s.replicas == 1 for s in got.schedule.stages)


@settings(max_examples=12, deadline=None)
@given(k=st.integers(2, 3), b=st.integers(1, 2), seed=st.integers(0, 10**6), P=st.integers(2, 3),
       tight=st.sampled_from([None, 0.99, 1.0, 1.1]), warm=st.booleans(), states=st.sampled_from([None, 6]))
def test_dag_milp_equals_dag_cpsat(k, b, seed, P, tight, warm, states):
    inst = parallel_branches(k, b, seed=seed)
    least = solve(inst, "dag", 1, P, max_states=states).min_budget
    budget = TB if tight is None else int(tight * least)
    got = solve(inst, "dag-milp", budget, P, warm_start=warm, max_states=states)
    ref = solve(inst, "dag-cpsat", budget, P, warm_start=False, max_states=states)
    assert got.solver == "dag-milp" and got.scope == ref.scope
    assert got.status == ref.status, (got.status, ref.status, got.message)
    if ref.status == INFEASIBLE:
        assert got.schedule is None and got.min_budget == ref.min_budget
        return
    assert got.status == OPTIMAL
    assert close(got.objective, ref.objective), (got.objective, ref.objective)
    assert_sane(got, inst, budget)


def test_the_mip_start_is_the_seed_and_a_short_limit_keeps_an_honest_bound():
    """A 60-layer chain on 8 devices: the seed's partition is the MIP start (madpipe seeds it); with
    CBC at a 2 s limit the answer is `optimal` or `feasible` with a bound at most the period, never
    worse than madpipe."""
    inst = random_pipeline(np.random.default_rng(0), 60)
    budget = int(1.05 * solve(inst, "madpipe", 1, 8).min_budget)
    dp = solve(inst, "madpipe", budget, 8)
    for backend, limit in (("scip", 20), ("cbc", 2)):
        res = solve(inst, "milp", budget, 8, backend=backend, time_limit=limit)
        assert res.seeded_by == "madpipe"
        assert res.objective <= dp.objective * (1 + 1e-9)
        assert_sane(res, inst, budget)


def test_milp_solvers_are_registered_and_documented():
    assert {"milp", "dag-milp"} <= set(SOLVERS)
    for name in ("milp", "dag-milp"):
        fn = registry.get_solver("pipeline", name)
        assert getattr(fn, "exact_layer", False), name
        assert "memory_gb" in getattr(fn, "options_not_taken", ()), name
    doc = (memsched.data_path("pipeline", "mlp7.chain.json").parents[3] / "docs" / "pipeline.md")
    if doc.exists():  # a source tree (the installed package carries no docs)
        text = doc.read_text(encoding="utf-8")
        assert "| `milp` | exact MILP" in text and "| `dag-milp` | exact MILP" in text
        assert "### The same paths as a MILP" in text


def test_bad_backend_and_memory_gb_are_refused():
    inst = random_pipeline(np.random.default_rng(1), 4)
    with pytest.raises(memsched.InputError, match="unknown MILP backend") as err:
        solve(inst, "milp", None, 2, backend="glpk")
    assert err.value.field.endswith("backend")
    with pytest.raises(memsched.InputError, match="not taken by"):
        solve(inst, "dag-milp", None, 2, memory_gb=1.0)


@pytest.mark.parametrize("solver", ["milp", "dag-milp"])
def test_partition_command_takes_the_milp_solvers(solver):
    res = run_cli("partition", PIPELINE, "--memory", "60%", "--devices", "3", "--solver", solver,
                  "--time-limit", "10", "--json")
    assert res.code == 0, res.err
    out = res.json()
    assert out["status"] == OPTIMAL and out["solver"] == solver
    ref = run_cli("partition", PIPELINE, "--memory", "60%", "--devices", "3", "--solver",
                  solver.replace("milp", "cpsat"), "--time-limit", "10", "--json").json()
    assert close(out["period"], ref["period"])
    refused = run_cli("partition", PIPELINE, "--memory", "60%", "--devices", "3", "--solver", solver,
                      "--replication")
    assert refused.code == 2 and "--replication" in refused.err
