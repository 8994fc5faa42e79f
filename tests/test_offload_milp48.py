"""The offloading MILP (`milp`, solvers/offload/milp.py): offload `cpsat`'s problem and scope (offload-only, the
store-all compute order fixed) stated as a `LinearModel` and solved by SCIP (default), HiGHS or CBC. On random small
chains with a host link its optimum equals cpsat's, its schedule replays in the offload simulator to the reported
makespan within the budget, statuses, bounds and scope are honest, the warm start's schedule is the MIP start, the
exact layer keeps it never worse than a fast solver, and it is registered, documented and reachable from
`memsched solve --solver milp`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.offload import SOLVERS, reference_peak, simulate
from memsched.solvers.offload.generate import random_offload
from memsched.solvers.result import FEASIBLE, INFEASIBLE, OPTIMAL

DOCS = Path(__file__).resolve().parents[1] / "docs" / "offload.md"


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def whole_tick_instance(L: int, seed: int, k: float, overhead: float):
    """A random chain with integer times and a link moving one byte in `k` ms (ms, bytes): every duration is a
    whole number of cpsat's ticks, so both models claim ``optimal`` when they prove it."""
    return random_offload(L, seed, bandwidth=1000.0 / k, integer_times=True, overhead=overhead)


def replays(inst, res, budget: int) -> None:
    """`res`'s schedule replays in the offload simulator to its objective, within `budget`."""
    sim = simulate(inst, res.schedule, budget)
    assert sim.valid, sim.violation
    assert close(sim.makespan, res.objective)
    assert sim.peak_memory <= budget
    assert res.peak_memory == sim.peak_memory


@settings(max_examples=36, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(L=st.integers(1, 5), seed=st.integers(0, 10**6), k=st.sampled_from([0.25, 0.5, 1.0, 2.0]),
       overhead=st.sampled_from([0.0, 0.5]), frac=st.floats(0.7, 1.0))
def test_milp_equals_cpsat_on_small_chains(L, seed, k, overhead, frac):
    """Without the warm start (the models alone): the same status and model optimum as cpsat, and the MILP's
    schedule replays to its objective within the budget."""
    inst = whole_tick_instance(L, seed, k, overhead)
    budget = max(1, int(reference_peak(inst) * frac))
    kw = {"slots": 0, "warm_start": False, "time_limit": 30, "workers": 1}
    c = registry.solve("offload", inst, "cpsat", budget, **kw)
    m = registry.solve("offload", inst, "milp", budget, **kw)
    if c.status not in (OPTIMAL, INFEASIBLE):  # cpsat not proven in its limit: nothing to compare with
        assert m.status in (OPTIMAL, FEASIBLE, INFEASIBLE)
        return
    assert m.status == c.status, (m.status, m.message, c.status, c.message)
    if m.status == OPTIMAL:
        assert close(m.details["model_makespan"], c.details["model_makespan"])
        assert close(m.objective, c.objective)
        assert close(m.details["model_bound"], m.details["model_makespan"])
        replays(inst, m, budget)


@pytest.mark.parametrize("backend", ["scip", "highs", "cbc"])
def test_backends_agree(backend):
    """A chain where one tape must travel (28.0 needs abar_1 on the host during the backward): every backend of
    the MILP proves cpsat's optimum, and the plan offloads."""
    from memsched.solvers.exact import highs_runner
    from memsched.solvers.exact.cbc_cmd import cbc_program

    if backend == "highs" and not highs_runner.available():
        pytest.skip("highspy not installed")
    if backend == "cbc" and cbc_program() is None:
        pytest.skip("no CBC program")
    inst = random_offload(4, 0, integer_times=True, transfer_ratio=1.0)
    budget = int(reference_peak(inst) * 0.9)
    kw = {"slots": 0, "warm_start": False, "time_limit": 30}
    c = registry.solve("offload", inst, "cpsat", budget, **kw)
    m = registry.solve("offload", inst, "milp", budget, backend=backend, **kw)
    assert c.status == m.status == OPTIMAL
    assert close(m.objective, c.objective) and close(m.objective, 28.0)
    assert m.details["transfers"] >= 2 and m.details["backend"] == backend
    replays(inst, m, budget)


@pytest.mark.parametrize("L,seed,frac", [(3, 1, 0.95), (4, 2, 0.8), (5, 3, 0.8), (5, 2, 0.88)])
def test_warm_start_and_referee(L, seed, frac):
    """With the warm start (the default): the seed's store-all schedule is the MIP start when it is one of the
    model's, the answer is never slower than the fast solvers, its bound is the problem's (at most the
    objective), and the scope names the restricted class as cpsat's does."""
    inst = random_offload(L, seed, integer_times=True, transfer_ratio=2.0)
    budget = int(reference_peak(inst) * frac)
    m = registry.solve("offload", inst, "milp", budget, slots=0, time_limit=30)
    assert m.status in (OPTIMAL, FEASIBLE)
    replays(inst, m, budget)
    for fast in ("offload-prefix", "vdnn", "none"):
        f = registry.solve("offload", inst, fast, budget)
        if f.objective is not None:
            assert m.objective <= f.objective * (1 + 1e-9)
    assert m.lower_bound is None or m.lower_bound <= m.objective * (1 + 1e-9)
    assert m.details.get("model_bound") is None or m.details["model_bound"] <= m.details["model_makespan"] + 1e-9
    if m.details.get("hint"):  # the seed was one of the model's schedules: a MIP start that satisfies the model
        assert m.details["hint_feasible"]
    if "model_makespan" in m.details and close(m.objective, m.details["model_makespan"]):
        assert "offload-only (store-all order)" in m.scope and "MILP (scip)" in m.scope


def test_hint_from_seed_is_feasible():
    """vDNN's schedule (store-all order, abar_1..abar_{L-1} offloaded) becomes a complete assignment that
    satisfies the MILP, whose objective is its makespan; a schedule with a transfer outside the model (offload-prefix
    sending the input a_0 here) gives no hint."""
    from memsched.solvers.offload import milp
    from memsched.solvers.offload.cpsat import duration_ticks

    inst = random_offload(4, 2, integer_times=True, bandwidth=1000.0)
    budget = reference_peak(inst)
    seed = registry.solve("offload", inst, "vdnn", budget)
    assert seed.schedule is not None and len(seed.schedule.transfers()) == 6
    chain, L, scale = inst.chain, 4, 100.0
    d = [duration_ticks(t, scale, least=1) for t in (*chain.u_fa[:L], chain.u_b[L], *reversed(chain.u_b[:L]))]
    T = {j: duration_ticks(inst.transfer_time(int(chain.xbar[j])), scale) for j in range(1, L)}
    mod = milp.build(chain, d, T, lambda v: v, budget - int(chain.x[0]))
    values, ok = milp.seed_hint(mod, seed, inst, budget, scale)
    assert values is not None and ok
    assert mod.lm.violated(values) == 0
    assert math.isclose(mod.lm.value(values) / scale, simulate(inst, seed.schedule).makespan, rel_tol=1e-9)
    prefix = registry.solve("offload", inst, "offload-prefix", int(budget * 0.8))
    assert "Off(a_0)" in [str(op) for op in prefix.schedule.transfers()]
    assert milp.seed_hint(mod, prefix, inst, int(budget * 0.8), scale) == (None, False)


def test_infeasible_budget():
    """A budget below what some backward must hold is `infeasible` for the model, and the exact layer keeps it so
    when no fast solver has a schedule (pofo recomputes: it may still find one, then `feasible`)."""
    inst = random_offload(3, 0, integer_times=True, transfer_ratio=1.0)
    budget = int(reference_peak(inst) * 0.6)
    c = registry.solve("offload", inst, "cpsat", budget, slots=0, warm_start=False, time_limit=10)
    m = registry.solve("offload", inst, "milp", budget, slots=0, warm_start=False, time_limit=10)
    assert c.status == m.status == INFEASIBLE
    assert m.schedule is None


def test_options_refused():
    """An unknown backend, memory_gb with a backend other than SCIP and a bad scale are one-line InputErrors
    naming the option."""
    inst = random_offload(2, 0, integer_times=True)
    with pytest.raises(InputError, match="backend"):
        registry.solve("offload", inst, "milp", 100, backend="gurobi")
    with pytest.raises(InputError, match="memory_gb"):
        registry.solve("offload", inst, "milp", 100, backend="highs", memory_gb=1.0)
    with pytest.raises(InputError, match="scale"):
        registry.solve("offload", inst, "milp", 100, scale=-1.0)


def test_registered_and_documented():
    """`milp` is an offload solver of the exact layer, listed in docs/offload.md's solver and option tables, with
    its rows written out."""
    assert "milp" in SOLVERS
    assert getattr(registry.get_solver("offload", "milp"), "exact_layer", False)
    text = DOCS.read_text()
    assert "| `milp` | exact MILP" in text
    assert "### Offloading without recomputation, as a MILP (`milp`" in text


def test_cli_solve_milp(offload):
    """`memsched solve FILE --bandwidth ... --solver milp` answers (it was refused), with a schedule that replays."""
    res = run_cli("solve", str(offload), "--budget", "90%", "--bandwidth", "12GB/s", "--solver", "milp",
                  "--slots", "0", "--time-limit", "10", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["solver"] == "milp" and out["status"] in (OPTIMAL, FEASIBLE, INFEASIBLE)
