"""Cross-checks that bind: instances where the quantity a solver gets wrong decides the answer.

1. Offloading, per-mode forward overheads (o_fa for F_all, o_fn for F_ck / F_n): `exact-combined` and
   `offload-exact` run *without* the warm start (the exact layer's referee would otherwise hand back
   pofo's schedule and hide a model that charges the wrong overhead) on chains where the per-mode
   charge decides what fits; they equal the optimum of a brute force.
2. `exact-combined` at budgets equal to a compute sequence's floor (the most one op needs on the device):
   the sequence is allowed (``floor <= capacity``), the model proves the optimum itself.
3. Graphs: budgets where the brute-force optimum is finite and strictly above the total compute time
   (some node must be recomputed), for brute force itself (its sequence replays within the budget) and
   for the exact models (cpsat and Checkmate's model, warm start on and off).

Reference of 1-2 (`_no_transfer_optimum`): the least makespan over every phase-form compute sequence
(`phase_sequences`, the class of both exact models) replayed by the offloading simulator without transfers.
On a "dead" link (one size unit takes at least that optimum to move) it is the optimum of the class: a transfer
only helps a compute op that starts after the transfer ends (an Off's release, a Pre's copy), so no earlier
than that optimum.
Sizes are integers (size units), times whole time units (exact ticks).
"""

from __future__ import annotations

import math

import pytest
from conftest import fa_cheap_instance, mode_chain, offload_int_instance, with_workspace
from hypothesis import given, settings
from hypothesis import strategies as st
from memsched.solvers import registry
from memsched.solvers.chain import Chain
from memsched.solvers.chain import reference_peak as store_all_peak
from memsched.solvers.chain.schedule import Bwd, F_all, Loss
from memsched.solvers.graph import Graph, generate, reference_peak, simulate
from memsched.solvers.graph.brute import brute_force, brute_force_checkmate
from memsched.solvers.graph.cpsat import solve_cpsat
from memsched.solvers.graph.milp import solve_checkmate
from memsched.solvers.offload import OffloadInstance, OffloadSchedule
from memsched.solvers.offload import simulate as simulate_offload
from memsched.solvers.offload.exact_combined import phase_sequences, solve_exact_combined
from memsched.solvers.offload.schedule import Off, Pre
from memsched.solvers.result import INFEASIBLE, OPTIMAL, SolveResult

EXACT_OFFLOAD = ("exact-combined", "offload-exact")


# --------------------------------------------------------------------------- offloading: references
def _no_transfer_optimum(inst: OffloadInstance, budget: int) -> float:
    """Least makespan (time units) over the phase-form compute sequences without transfers whose
    simulated peak fits `budget` (size units); inf when none fits."""
    L = inst.chain.length
    best = math.inf
    for seq in phase_sequences(L):
        sim = simulate_offload(inst, OffloadSchedule(list(seq), L), budget)
        if sim.valid:
            best = min(best, sim.makespan)
    return best


def _dead_link(chain: Chain, budget: int) -> tuple[OffloadInstance, float]:
    """`chain` on a link where moving one size unit takes the no-transfer optimum at `budget` (time
    units; so no transfer can pay), and that optimum, which is then the class's (module docstring)."""
    best = _no_transfer_optimum(OffloadInstance(chain, 1e9), budget)
    assert math.isfinite(best) and best == int(best), best
    inst = OffloadInstance(chain, chain.time_units_per_second() / best)
    assert inst.transfer_time(1) >= best * (1 - 1e-9)
    return inst, best


def _model_proved(res: SolveResult, expected: float) -> None:
    """`res` is the model's own optimum `expected` (not a warm start's schedule kept by the referee)."""
    assert res.status == OPTIMAL, (res.solver, res.status, res.message)
    assert "solution_from" not in res.details and "model_status" not in res.details, res.details
    assert res.objective == pytest.approx(expected, abs=1e-9), (res.solver, res.objective, expected)
    assert res.details.get("model_makespan") == pytest.approx(expected, abs=1e-9)


# --------------------------------------------------------------------------- 1. per-mode forward overheads
@pytest.mark.parametrize("warm_start", [False, True])
@pytest.mark.parametrize("name", EXACT_OFFLOAD)
def test_exact_models_fit_store_all_by_the_per_mode_overhead(name: str, warm_start: bool) -> None:
    """`fa_cheap_instance`: o_fa = 0, o_fn = 40; the budget is store-all's per-mode peak, which store-all (every
    forward an F_all) fits only when F_all is charged o_fa, not max(o_fa, o_fn): the model itself is optimal
    at the total compute time (10), with or without the warm start."""
    inst, budget = fa_cheap_instance()
    res = registry.solve("offload", inst, name, budget, slots=0, time_limit=20, workers=1, warm_start=warm_start)
    _model_proved(res, inst.chain.total_time())


#: (solver, L, seed, fa_larger, budget) of `mode_chain` (times and sizes whole, sizes 1..8) where the optimum
#: recomputes (above the total compute time) and F_ck / F_n's overhead is below F_all's (exact-combined proves
#: only the first quickly without a warm start: seconds to minutes for the others)
MODE_CASES = [("exact-combined", 2, 4, False, 51), ("offload-exact", 2, 4, False, 51),
              ("offload-exact", 2, 4, False, 54), ("offload-exact", 3, 0, False, 30)]


@pytest.mark.parametrize("name, L, seed, fa_larger, budget", MODE_CASES)
def test_exact_models_equal_the_brute_force_on_mode_chains(name: str, L: int, seed: int, fa_larger: bool,
                                                           budget: int) -> None:
    """No warm start, a dead link: the model's optimum is the brute force's (recomputations charged
    per mode)."""
    chain = mode_chain(L, seed, fa_larger=fa_larger, times=seed % 2 == 1, integer_times=True, size_range=(1, 8))
    assert chain.has_mode_overheads()
    inst, best = _dead_link(chain, budget)
    assert best > chain.total_time()  # something is recomputed
    res = registry.solve("offload", inst, name, budget, slots=0, time_limit=30, workers=1, warm_start=False)
    _model_proved(res, best)


# --------------------------------------------------------------------------- 2. exact-combined at a sequence's floor
#: one-stage chains (L, x, extra, u_f, u_b, o_f, o_b of `offload_int_instance`) solved at their store-all peak, where
#: the store-all sequence's floor equals the budget
FLOOR_CHAINS = [
    (1, [1, 1, 3, 2, 3], [2, 1, 0, 1, 3], [3, 2, 3, 3, 2], [3, 2, 3, 2, 1], [0, 2, 3, 2, 3], [3, 1, 1, 1, 1]),
    (1, [3, 2, 5, 3, 4], [2, 2, 3, 2, 1], [2, 3, 2, 3, 3], [1, 2, 3, 1, 1], [0, 0, 0, 2, 1], [0, 1, 2, 1, 1]),
    (1, [4, 3, 4, 3, 4], [3, 2, 2, 0, 1], [3, 3, 1, 2, 3], [2, 3, 1, 2, 2], [3, 1, 0, 0, 3], [1, 3, 1, 0, 3]),
]


@pytest.mark.parametrize("case", range(len(FLOOR_CHAINS)))
def test_exact_combined_keeps_sequences_at_the_budget(case: int) -> None:
    """At the store-all peak of a one-stage chain (a dead link) the optimum is store-all's makespan;
    exact-combined's model proves it (no warm start), as the brute force finds it."""
    L, x, extra, u_f, u_b, o_f, o_b = FLOOR_CHAINS[case]
    chain = offload_int_instance(L, x, extra, u_f, u_b, o_f, o_b, 1.0).chain
    budget = store_all_peak(chain)
    inst, best = _dead_link(chain, budget)
    res = solve_exact_combined(inst, budget, slots=0, time_limit=20, workers=1, warm_start=False)
    _model_proved(res, best)


#: (instance of `offload_int_instance`, budget, a schedule with transfers: ops and their not_before times,
#: its makespan):
#: the optimum of exact-combined (found by its model, replayed here), strictly better than pofo's
WITNESSES = [
    (((2, [5, 4, 4, 5, 3], [0, 0, 0, 3, 0], [3, 2, 2, 1, 3], [2, 3, 1, 1, 3], [1, 1, 1, 3, 0], [0, 2, 3, 0, 2],
       2.0), 18), [0.0, 0.0, 8.0, 10.0, 11.0, 14.0, 24.0], 26.0),
    (((2, [3, 1, 4, 2, 1], [2, 1, 0, 2, 3], [2, 2, 2, 1, 1], [3, 2, 2, 2, 2], [0, 3, 0, 3, 3], [0, 2, 2, 1, 1],
       2.0), 13), [0.0, 0.0, 4.0, 6.0, 8.0, 10.0, 16.0], 19.0),
]


@pytest.mark.parametrize("case", range(len(WITNESSES)))
def test_exact_combined_reaches_a_known_schedule(case: int) -> None:
    """The schedule F_all(0) Off(a_0) F_all(1) Loss B(1) Pre(a_0) B(0) at the given times replays within the
    budget at the given makespan, below pofo's: exact-combined without the warm start finds a schedule
    at least as fast and proves it optimal (a model that drops sequences it should keep reports a slower
    "optimum" or none)."""
    (args, budget), times, makespan = WITNESSES[case]
    inst = offload_int_instance(*args)
    ops = [F_all(0), Off("a", 0), F_all(1), Loss(2), Bwd(1), Pre("a", 0), Bwd(0)]
    witness = OffloadSchedule(ops, 2, list(times))
    sim = simulate_offload(inst, witness, budget)
    assert sim.valid and sim.makespan == pytest.approx(makespan), sim.violation
    pofo = registry.solve("offload", inst, "pofo", budget, slots=0)
    assert pofo.objective is None or pofo.objective > makespan
    res = solve_exact_combined(inst, budget, slots=0, time_limit=30, workers=1, warm_start=False)
    _model_proved(res, makespan)


# --------------------------------------------------------------------------- 3. graphs that must recompute
#: (n, seed, budget) of `generate.random_dag` where the brute-force optimum is finite and above the total
#: compute time; (5, 14, 10): Checkmate's class is slower (21) than the optimum (18); (5, 42, 8): none fits it
GRAPH_CASES = [(4, 7, 8), (4, 13, 10), (5, 14, 10), (5, 16, 10), (5, 42, 8), (5, 44, 7), (5, 50, 12)]
#: the same with `with_workspace(random_dag(n, seed), seed)`; (4, 11, 18) recomputes two nodes
WORKSPACE_CASES = [(4, 11, 18), (4, 11, 22), (4, 13, 14), (5, 11, 15), (5, 14, 12), (5, 32, 7)]


def _graph(n: int, seed: int, workspace: bool) -> Graph:
    g = generate.random_dag(n, seed)
    return with_workspace(g, seed) if workspace else g


def _must_recompute(g: Graph, budget: int) -> tuple[float, list[int]]:
    """The brute-force optimum at `budget` and its sequence, checked to be finite, to replay within the
    budget at that makespan and to be above the total compute time (a node runs twice)."""
    best, seq = brute_force(g, budget)
    assert seq is not None and math.isfinite(best)
    assert best > g.total_cpu()
    sim = simulate(g, seq, budget)
    assert sim.valid and sim.peak_memory <= budget, sim.violation
    assert sim.makespan == best and len(seq) > g.n
    return best, seq


ALL_GRAPH_CASES = [(*c, False) for c in GRAPH_CASES] + [(*c, True) for c in WORKSPACE_CASES]


@pytest.mark.parametrize("n, seed, budget, workspace", ALL_GRAPH_CASES)
def test_brute_force_recomputes_below_store_all(n: int, seed: int, budget: int, workspace: bool) -> None:
    """Below every recomputation-free order's peak, brute force's optimum replays within the budget."""
    g = _graph(n, seed, workspace)
    assert budget < reference_peak(g)
    _must_recompute(g, budget)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(3, 5), seed=st.integers(0, 10_000), frac=st.floats(0.0, 1.0))
def test_brute_force_optimum_replays_at_tight_budgets(n: int, seed: int, frac: float) -> None:
    """At any budget between the necessary one and store-all's peak, the optimum's sequence fits."""
    g = generate.random_dag(n, seed)
    need, ref = g.necessary_budget(), reference_peak(g)
    budget = int(need + frac * (ref - need))
    best, seq = brute_force(g, budget)
    if seq is None:
        assert best == math.inf
        return
    sim = simulate(g, seq, budget)
    assert sim.valid and sim.makespan == best, sim.violation


@pytest.mark.parametrize("warm_start", [True, False])
@pytest.mark.parametrize("n, seed, budget, workspace", ALL_GRAPH_CASES)
def test_graph_cpsat_recomputes_to_the_optimum(n: int, seed: int, budget: int, workspace: bool,
                                               warm_start: bool) -> None:
    """cpsat with C = n is optimal at the brute force's makespan (recomputations included)."""
    g = _graph(n, seed, workspace)
    best, _ = _must_recompute(g, budget)
    res = solve_cpsat(g, budget, slots=0, max_computations=n, time_limit=20, workers=1, warm_start=warm_start)
    assert res.status == OPTIMAL, (res.status, res.message)
    assert res.objective == best and "solution_from" not in res.details, (res.objective, best, res.details)
    sim = simulate(g, res.schedule, budget)
    assert sim.valid and sim.makespan == res.objective


@pytest.mark.parametrize("warm_start", [True, False])
@pytest.mark.parametrize("n, seed, budget, workspace", ALL_GRAPH_CASES)
def test_graph_checkmate_recomputes_to_its_class_optimum(n: int, seed: int, budget: int, workspace: bool,
                                                         warm_start: bool) -> None:
    """Checkmate's model equals the brute force over its frontier-advancing schedules (never below the
    true optimum); the answer is never slower than the model's and never faster than the optimum."""
    g = _graph(n, seed, workspace)
    best, _ = _must_recompute(g, budget)
    best_cm, _ = brute_force_checkmate(g, budget)
    res = solve_checkmate(g, budget, slots=0, time_limit=20, warm_start=warm_start)
    status = res.details.get("model_status", res.status)
    model = res.details.get("model_objective", res.objective)
    assert status != "not built"  # no fast schedule runs every node once here
    assert (model if status == OPTIMAL else math.inf if status == INFEASIBLE else None) == best_cm
    if res.schedule is not None:
        assert best <= res.objective <= best_cm
        assert simulate(g, res.schedule, budget).valid
    else:
        assert best_cm == math.inf and not warm_start
