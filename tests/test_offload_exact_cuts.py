"""offload-exact's link-capacity rows (`solvers.offload.exact_free_cuts`) are valid for its class.

They are redundant rows: on random small chains the model's optimum is the same with and
without them, and every row holds at the optimal solution of the model without them (so it cuts
off no schedule of the class, at least none the solver picked); the solution found with them
replays in the simulator with the model's makespan."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from memsched.solvers.chain.dp import rotor_min_budget
from memsched.solvers.chain.exact_model import discretise
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.discretize import tick_scale
from memsched.solvers.exact.options import Deadline
from memsched.solvers.offload import OffloadInstance, simulate
from memsched.solvers.offload.exact_free import FreeOrderModel
from memsched.solvers.offload.exact_free_cuts import add_link_bounds
from ortools.sat.python import cp_model


def _model(inst: OffloadInstance, budget: int, link_rows: bool) -> FreeOrderModel:
    chain, L = inst.chain, inst.chain.length
    times = [float(t) for t in (*chain.u_f[:L], *chain.u_b[: L + 1])] + [
        inst.transfer_time(int(b)) for b in (*chain.x[: L + 1], *chain.xbar[1 : L + 1])
    ]
    scale, exact = tick_scale(times)
    assert exact
    dchain, M = discretise(chain, budget, 0)
    return FreeOrderModel(inst, dchain, M, scale, Deadline(None), link_rows=link_rows)


def _solve(model: FreeOrderModel) -> tuple[int, cp_model.CpSolver]:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 30.0
    code = solver.solve(model.cp)
    assert code in (cp_model.OPTIMAL, cp_model.INFEASIBLE), solver.status_name(code)
    return code, solver


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(
    L=st.integers(2, 3),
    seed=st.integers(0, 40),
    bandwidth=st.sampled_from([250.0, 1000.0, 4000.0]),
    frac=st.sampled_from([0.7, 0.85, 1.0]),
)
def test_link_rows_keep_the_optimum_and_hold_at_it(L, seed, bandwidth, frac):
    inst = OffloadInstance(random_chain(L, seed, integer_times=True, size_range=(1, 8)), bandwidth)
    budget = int(rotor_min_budget(inst.chain) * frac)
    plain = _model(inst, budget, link_rows=False)
    assert plain.link_rows == []
    c0, s0 = _solve(plain)
    cut = _model(inst, budget, link_rows=True)
    c1, s1 = _solve(cut)
    assert c0 == c1
    if c0 != cp_model.OPTIMAL:
        return
    assert s1.objective_value == s0.objective_value
    # the rows, stated on the plain model after its solve, hold at its optimal solution
    rows = add_link_bounds(plain)
    assert len(rows) == len(cut.link_rows) > 0
    for lhs, rhs in rows:
        assert s0.value(lhs) >= s0.value(rhs)
    sim = simulate(inst, cut.schedule(s1), budget)
    assert sim.valid, sim.violation
    assert abs(sim.makespan - s1.objective_value / cut.scale) <= 1e-9 * max(1.0, sim.makespan)


def test_rows_bind_when_memory_forces_transfers():
    """At a budget below rotor's least only offloading helps: the rows must involve transfers
    (they are stated for every away Boolean) and the bound with them is at least the compute sum."""
    inst = OffloadInstance(random_chain(3, 0, integer_times=True, size_range=(1, 8)), 500.0)
    budget = int(rotor_min_budget(inst.chain) * 0.85)
    model = _model(inst, budget, link_rows=True)
    assert model.link_rows
    code, solver = _solve(model)
    if code == cp_model.OPTIMAL:
        assert solver.objective_value / model.scale >= float(inst.chain.total_time()) - 1e-9
