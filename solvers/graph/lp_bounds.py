"""The LP relaxation of Checkmate's MILP: a lower bound, and Checkmate's LP-rounding heuristic.

`lp_bound` solves the relaxation (HiGHS through highspy, held to the wall clock) and returns its
value: a lower bound on the optimum of Checkmate's model (frontier-advancing schedules in the
given order), at least sum_v C_v. A relaxation too large for the machine's memory
(`solvers.exact.memory`) is not built.

`solve_checkmate_approx` is Checkmate's two-step approximation: round the relaxed
checkpoint matrix S* (deterministically at several thresholds, and by randomized rounding
S ~ Bernoulli(S*)), then compute the cheapest R that makes each rounded S valid (stage t
computes t, every checkpoint S[t+1,i] not already kept, and, backwards, every input of a
computed node that is not kept) and keep the cheapest schedule that fits the budget in the
simulator. No proof of optimality; the LP value is reported as the lower bound when the LP was
solved to optimality (else sum_v C_v).
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InputError, option_field
from ..exact.memory import ModelTooLarge, too_big
from ..exact.options import MAX_SEED, Deadline, DeadlineExceeded
from ..result import FEASIBLE, INFEASIBLE, TIMEOUT, SolveResult
from .baselines import below_necessary
from .instance import Graph
from .linmodel import solve_milp
from .milp import CheckmateModel, checkmate_size
from .schedule import GraphSchedule
from .simulator import simulate


def lp_relaxation(graph: Graph, budget: int, *, slots: int = 0, time_limit: float | None = None,
                  deadline: Deadline | None = None, memory_gb: float | None = None
                  ) -> tuple[float | None, CheckmateModel | None, list[float] | None, str]:
    """(LP value, model, values, status) of Checkmate's relaxation at `budget`, with exact sizes
    (`slots` is accepted for a uniform signature and ignored: rounding sizes up would not give a
    valid bound for the real sizes). `time_limit` (or a running `deadline`, which replaces it)
    covers building the model too: when it comes first the answer is (None, None, None, "timeout").
    Raises `ModelTooLarge` instead of building a model that would not fit in memory
    (`memory.too_big`; `memory_gb` as there)."""
    why = too_big(checkmate_size(graph), "lp", memory_gb)
    if why is not None:
        raise ModelTooLarge(why)
    # exact sizes, scaled so that the budget is 1000 (a rounded-up discretisation would not
    # give a valid bound for the real sizes)
    scale = 1000.0 / max(int(budget), 1)
    deadline = deadline or Deadline(time_limit)
    try:
        cm = CheckmateModel(graph, graph.cost_ram * scale, 1000.0, deadline=deadline, W=graph.workspace * scale)
        # HiGHS (highspy): 7.8 s on MobileNet's relaxation (94k columns; CLP about 10 s, GLOP did
        # not finish in 200 s), 82 s on ResNet-50's (350k), and it stops at the wall-clock limit,
        # where CLP ran 121 s past a 346 s limit on RL500's (1.06M columns) and returned a
        # primal point that bounds nothing (quiet machine)
        sol = solve_milp(cm.model, "scip", relax=True, deadline=deadline, lp_solver="HIGHS")
    except DeadlineExceeded:
        return None, None, None, "timeout"
    return sol.objective, cm, sol.values, sol.status


def lp_bound(graph: Graph, budget: int, *, slots: int = 500, time_limit: float | None = None) -> float | None:
    """Lower bound on Checkmate's optimum at `budget` (None when the LP is infeasible, timed
    out or too large for the memory; infeasible LP means no Checkmate schedule fits)."""
    try:
        value, _, _, status = lp_relaxation(graph, budget, slots=slots, time_limit=time_limit)
    except ModelTooLarge:
        return None
    if value is None:
        return None
    return max(float(value), graph.total_cpu()) if status == "optimal" else None


def r_given_s(graph: Graph, S: np.ndarray) -> np.ndarray:
    """Cheapest R valid for the checkpoint matrix S (Checkmate's "solve R given S")."""
    n = graph.n
    R = np.zeros((n, n), bool)
    S = S.copy()
    for t in range(n):
        R[t, t] = True
        if t + 1 < n:
            for i in range(t + 1):
                if S[t + 1, i] and not (i < t and S[t, i]):
                    R[t, i] = True
        for k in range(t, -1, -1):
            if R[t, k]:
                for i in graph.preds[k]:
                    if not S[t, i]:
                        R[t, i] = True
    return R


def _sequence(R: np.ndarray) -> list[int]:
    n = R.shape[0]
    return [k for t in range(n) for k in range(t + 1) if R[t, k]]


#: the thresholds of the deterministic roundings (S = S* > threshold), tried before the random ones
THRESHOLDS = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9)


def roundings(Sstar: np.ndarray, samples: int, seed: int) -> Iterator[np.ndarray]:
    """The rounded checkpoint matrices of S*, one at a time: S* > t for each of `THRESHOLDS`, then
    `samples` random roundings S ~ Bernoulli(S*) (`seed`). Each is drawn when the caller asks for
    it, so memory does not grow with `samples` (one n x n matrix at a time, where a list of all of
    them took samples x n^2 bytes: 10^6 samples of a 1000-node graph, 1 TB) and a time limit stops
    the drawing too; the k-th matrix is the same as when all were drawn up front (one stream of
    the generator, in the same order)."""
    for threshold in THRESHOLDS:
        yield Sstar > threshold
    rng = np.random.default_rng(seed)
    for _ in range(samples):
        yield rng.random(Sstar.shape) < Sstar


def solve_checkmate_approx(graph: Graph, budget: int, *, slots: int = 500, time_limit: float | None = None,
                           samples: int = 20, seed: int = 0, memory_gb: float | None = None, **_: Any) -> SolveResult:
    """Checkmate's LP rounding (module docstring). `time_limit` (s, wall clock) covers the LP and
    the roundings: those not tried by then are skipped (``details["roundings_tried"]``), and when
    none of the tried ones fits the status is ``timeout``, not ``infeasible``. An LP that would not
    fit in memory (`memory.too_big`, `memory_gb` as there) is not built: ``timeout``, saying why.
    `seed` (of the random roundings) is an integer in 0..`MAX_SEED` (else `InputError`)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"must be an integer in 0..{MAX_SEED} (the seed of the random roundings), got {seed!r}",
                         field=option_field("seed"))
    start = time.perf_counter()
    deadline = Deadline(time_limit, start)
    scope = "Checkmate LP rounding (lower bound: the LP relaxation of Checkmate's model)"
    # below the necessary budget the LP may still be feasible (fractional recomputations), and no
    # rounding can fit: the proof every solver gives, before the LP (and not a `timeout` at a short limit)
    proof = below_necessary(graph, "checkmate-approx", budget, scope, start)
    if proof is not None:
        return proof
    res = SolveResult(problem="graph", solver="checkmate-approx", status=TIMEOUT, scope=scope)
    try:
        value, cm, values, status = lp_relaxation(graph, budget, slots=slots, deadline=deadline, memory_gb=memory_gb)
    except ModelTooLarge as exc:
        res.details["not_built"] = str(exc)
        res.message = f"the LP was not built: {exc}"
        res.solve_time_s = time.perf_counter() - start
        return res
    if status == "infeasible":
        res.status = INFEASIBLE
        res.message = "the LP relaxation is infeasible: no Checkmate schedule fits"
        res.solve_time_s = time.perf_counter() - start
        return res
    if values is None or value is None or cm is None:
        res.solve_time_s = time.perf_counter() - start
        return res
    n = graph.n
    Sstar = np.zeros((n, n))
    for t in range(n):
        for i in range(t):
            Sstar[t, i] = values[cm.S[t][i]]
    total = len(THRESHOLDS) + samples
    best, smallest, tried = None, None, 0
    for S in roundings(Sstar, samples, seed):
        if deadline.expired():
            break
        tried += 1
        seq = _sequence(r_given_s(graph, S))
        sim = simulate(graph, seq)
        if sim.violation is not None:
            continue
        if sim.peak_memory <= budget and (best is None or sim.makespan < best[0]):
            best = (sim.makespan, seq)
        if smallest is None or sim.peak_memory < smallest:
            smallest = sim.peak_memory
    # an LP stopped at the time limit has a value that bounds nothing: then only sum_v C_v
    res.lower_bound = max(float(value), graph.total_cpu()) if status == "optimal" else graph.total_cpu()
    res.details["lp_value"] = float(value)
    res.details["lp_status"] = status
    res.details["roundings_tried"] = f"{tried} of {total}"
    if best is None and tried < total:
        res.message = f"time limit reached after {tried} of {total} roundings, none fits the budget"
    elif best is None:
        res.status = INFEASIBLE
        _note_least_peak(res, smallest)
    else:
        res.status = FEASIBLE
        res.schedule = GraphSchedule.from_indices(graph, best[1])
        res.objective = best[0]
        res.peak_memory = simulate(graph, best[1]).peak_memory
        res.lower_bound = min(res.lower_bound, best[0])
    res.solve_time_s = time.perf_counter() - start
    return res


def _note_least_peak(res: SolveResult, smallest: int | None) -> None:
    """Record, for an infeasible answer, the least simulated peak (the graph's memory units) among
    this budget's valid roundings as ``details["least_rounding_peak"]``; never as ``min_budget``:
    the roundings depend on the budget's LP, so a budget of that size may round to other schedules
    that do not fit (the smallest feasible budget is left to a search that runs the solver at it,
    `memsched solve`'s), nor in the message."""
    res.message = "no rounding fits the budget"
    if smallest is not None:
        res.details["least_rounding_peak"] = int(smallest)
