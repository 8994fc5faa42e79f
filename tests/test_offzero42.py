"""offload-exact on chains whose values (some or all) have size 0.

A memory row of `FreeOrderModel` with no variable (every size in it 0) is a Python bool, which CP-SAT states as a
``bool_or``; `fit_linear` read its ``linear`` field and so turned it into an empty linear row, always false: the
model answered "infeasible" (and ``details.backend_status`` INFEASIBLE with a warm start) although store-all fits.
The model must find the optimum of its class (here every op once: sum of the forward and backward times), agree
with `exact-combined` and never claim infeasibility where a schedule of its class fits."""

from __future__ import annotations

import pytest
from conftest import brute_force
from memsched.solvers.chain import Chain
from memsched.solvers.chain.exact_model import discretise
from memsched.solvers.exact.options import Deadline
from memsched.solvers.offload import OffloadInstance, simulate
from memsched.solvers.offload.exact_combined import solve_exact_combined
from memsched.solvers.offload.exact_free import FreeOrderModel, solve_offload_exact
from ortools.sat.python import cp_model


def _instance(outs: list[int], tapes: list[int], *, input_size: int = 0, fwd_overhead: int = 0,
              bwd_overhead: int = 0, loss_overhead: int = 0) -> OffloadInstance:
    """Stage j: forward 1 + j, backward 2, output `outs[j]` and tape `tapes[j]` bytes; loss 0.5; link 2000 B/s."""
    stages = [{"name": f"s{j}", "fwd_time": 1 + j, "bwd_time": 2, "out_size": o, "tape_size": t,
               "fwd_overhead": fwd_overhead, "bwd_overhead": bwd_overhead} for j, (o, t) in enumerate(zip(outs, tapes))]
    data = {"format": "memsched.chain/1", "input_size": input_size, "stages": stages,
            "loss": {"bwd_time": 0.5, "bwd_overhead": loss_overhead}}
    return OffloadInstance(Chain.from_dict(data), 2000.0)


def _every_op_once(inst: OffloadInstance) -> float:
    """Store-all's makespan (time units): each forward and backward once, no wait."""
    c = inst.chain
    return float(sum(c.u_fa[: c.length]) + sum(c.u_b[: c.length + 1]))


def _check_answer(inst: OffloadInstance, res, budget: int) -> None:
    """The answer replays within `budget` with its makespan, and its details never say that nothing fits."""
    assert res.schedule is not None, res.message
    sim = simulate(inst, res.schedule, budget)
    assert sim.valid, sim.violation
    assert res.objective == pytest.approx(sim.makespan, abs=1e-9)
    assert res.details.get("backend_status") != "INFEASIBLE"
    assert "fits" not in (res.message or "") and "infeasible" not in (res.message or "").lower()


@pytest.mark.parametrize("L", [1, 2, 3])
def test_the_model_itself_is_optimal_on_an_all_zero_chain(L):
    """CP-SAT on the bare model (no warm start, no fast solver): optimal, the every-op-once makespan in ticks, and
    no memory row left as an empty (always false) linear constraint."""
    inst = _instance([0] * L, [0] * L)
    dchain, M = discretise(inst.chain, 100, 0)
    model = FreeOrderModel(inst, dchain, M, 10.0, Deadline(30.0), link_rows=True)
    assert model.infeasible == ""
    for ct in model.cp.proto.constraints:
        assert not (ct.has_linear() and len(ct.linear.vars) == 0 and len(ct.linear.domain) == 0)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(model.cp) == cp_model.OPTIMAL
    assert solver.objective_value == pytest.approx(10 * _every_op_once(inst))
    sim = simulate(inst, model.schedule(solver), 100)
    assert sim.valid, sim.violation
    assert sim.makespan == pytest.approx(_every_op_once(inst))


@pytest.mark.parametrize("warm_start", [False, True])
@pytest.mark.parametrize("budget", [0, 1, 100])
@pytest.mark.parametrize("L", [1, 2, 3])
def test_all_zero_chains_are_optimal_and_agree_with_the_enumeration(L, budget, warm_start):
    inst = _instance([0] * L, [0] * L)
    res = solve_offload_exact(inst, budget, slots=0, time_limit=20, warm_start=warm_start)
    assert res.status == "optimal", res.message
    assert res.objective == pytest.approx(_every_op_once(inst))
    assert res.peak_memory == 0
    _check_answer(inst, res, budget)
    truth = solve_exact_combined(inst, budget, slots=0, time_limit=20, workers=1, warm_start=warm_start)
    assert truth.status == "optimal"
    assert res.objective == pytest.approx(truth.objective, abs=1e-9)


@pytest.mark.parametrize("slots", [100, 500])
@pytest.mark.parametrize("budget", [1, 100])
def test_all_zero_chain_with_memory_slots(slots, budget):
    inst = _instance([0, 0], [0, 0])
    res = solve_offload_exact(inst, budget, slots=slots, time_limit=20, warm_start=False)
    assert res.status == "optimal", res.message
    assert res.objective == pytest.approx(_every_op_once(inst))
    _check_answer(inst, res, budget)


# (outs, tapes, input, forward overhead, backward overhead): some sizes 0, or only the overheads nonzero
PARTLY_ZERO = [
    ([0, 3], [0, 4], 0, 0, 0),
    ([0, 0], [0, 0], 2, 0, 0),
    ([2, 0, 0], [3, 0, 0], 0, 0, 0),
    ([0, 0, 5], [0, 6, 5], 0, 0, 0),
    ([0, 0], [0, 0], 0, 0, 1),
    ([0, 0, 0], [0, 0, 0], 0, 1, 1),
]


@pytest.mark.parametrize("warm_start", [False, True])
@pytest.mark.parametrize("budget", [0, 1, 100])
@pytest.mark.parametrize("outs, tapes, input_size, fwd_overhead, bwd_overhead", PARTLY_ZERO)
def test_partly_zero_chains_agree_with_the_enumeration_and_the_brute_force(outs, tapes, input_size, fwd_overhead,
                                                                           bwd_overhead, budget, warm_start):
    inst = _instance(outs, tapes, input_size=input_size, fwd_overhead=fwd_overhead, bwd_overhead=bwd_overhead)
    res = solve_offload_exact(inst, budget, slots=0, time_limit=20, warm_start=warm_start)
    truth = solve_exact_combined(inst, budget, slots=0, time_limit=20, workers=1, warm_start=warm_start)
    assert truth.status in ("optimal", "infeasible")
    # phase-form recomputation without transfers: a subclass of offload-exact's class
    remat, _ = brute_force(inst.chain, budget, phase=True)
    if truth.status == "infeasible":
        assert res.status == "infeasible" and remat is None
        return
    assert res.status == "optimal", res.message
    assert res.objective == pytest.approx(truth.objective, abs=1e-9)
    assert remat is None or res.objective <= remat + 1e-9
    _check_answer(inst, res, budget)


def test_an_overhead_alone_over_the_budget_is_infeasible():
    """All sizes 0 but the loss needs 1 byte of overhead: budget 0 fits nothing, budget 1 fits store-all."""
    inst = _instance([0, 0], [0, 0], loss_overhead=1)
    res = solve_offload_exact(inst, 0, slots=0, time_limit=20, warm_start=False)
    assert res.status == "infeasible" and res.schedule is None
    assert solve_exact_combined(inst, 0, slots=0, time_limit=20, workers=1).status == "infeasible"
    res = solve_offload_exact(inst, 1, slots=0, time_limit=20, warm_start=False)
    assert res.status == "optimal", res.message
    assert res.objective == pytest.approx(_every_op_once(inst))
    _check_answer(inst, res, 1)


def test_a_memory_row_without_variables_is_checked_not_posted():
    """A row with no variable (a Python int) is no CP-SAT row: within the budget it adds nothing, over it the
    model is infeasible (named in ``infeasible``, and CP-SAT agrees)."""
    inst = _instance([0], [0])
    dchain, M = discretise(inst.chain, 100, 0)
    model = FreeOrderModel(inst, dchain, M, 10.0, Deadline(30.0))
    rows = len(model.memory_rows)
    model._memory_row(M, "a full row")
    assert len(model.memory_rows) == rows and model.infeasible == ""
    model._memory_row(M + 1, "an overfull row")
    assert "an overfull row" in model.infeasible
    assert cp_model.CpSolver().solve(model.cp) == cp_model.INFEASIBLE
