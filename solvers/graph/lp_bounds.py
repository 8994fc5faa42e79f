"""The LP relaxation of Checkmate's MILP: a lower bound, and Checkmate's LP-rounding heuristic.

`lp_bound` solves the relaxation (HiGHS through highspy, held to the wall clock) and returns its
proven value: a lower bound on the optimum of Checkmate's model (frontier-advancing schedules in the
given order), at least sum_v C_v. A relaxation too large for the machine's memory
(`solvers.exact.memory`) is not built.

`solve_checkmate_approx` is Checkmate's two-step approximation: round the relaxed
checkpoint matrix S* (deterministically at several thresholds, and by randomized rounding
S ~ Bernoulli(S*)), then compute the cheapest R that makes each rounded S valid (stage t
computes t, every checkpoint S[t+1,i] not already kept, and, backwards, every input of a
computed node that is not kept) and keep the cheapest schedule that fits the budget in the
simulator. No proof of optimality; the lower bound is the LP's value as proven by its duals when
HiGHS solved it to optimality (weak duality recomputed on the exact model with rounding error
bounds, `dual_bound`; HiGHS's primal value alone can lie above the relaxation's optimum), else
sum_v C_v.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InputError, option_field
from ..exact.highs_runner import _quiet_highs, run_until
from ..exact.memory import ModelTooLarge, too_big
from ..exact.milp_runner import objective_scale
from ..exact.options import MAX_SEED, Deadline, DeadlineExceeded
from ..progress import report
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .baselines import below_necessary
from .instance import Graph
from .milp import CheckmateModel, checkmate_size
from .schedule import GraphSchedule
from .simulator import simulate


def lp_relaxation(graph: Graph, budget: int, *, slots: int = 0, time_limit: float | None = None,
                  deadline: Deadline | None = None, memory_gb: float | None = None
                  ) -> tuple[float | None, CheckmateModel | None, list[float] | None, str]:
    """(value, model, values, status) of Checkmate's relaxation at `budget`, with exact sizes
    (`slots` is accepted for a uniform signature and ignored: rounding sizes up would not give a
    valid bound for the real sizes). `model` is at exact sizes (bytes, B = `budget`) and `values`
    (one per column of it, U in bytes) are HiGHS's primal point.

    With status ``optimal`` the value is a proven lower bound on the relaxation's optimum, hence on
    Checkmate's: weak duality from HiGHS's row duals, recomputed on the exact model with rounding
    error bounds (`dual_bound`), never the primal point's value (at 1-byte sizes under a 10^12
    budget and costs from 10^-3 to 10^9, HiGHS's "optimal" point was worth 1000000006.002 where a
    Checkmate schedule of 1000000005.002 fits). Otherwise (``feasible``: stopped by the limit) the
    value is that of HiGHS's last primal point, which bounds nothing. `time_limit` (or a running
    `deadline`, which replaces it) covers building the model too: when it comes first the answer
    is (None, None, None, "timeout"). Raises `ModelTooLarge` instead of building a model that would
    not fit in memory (`memory.too_big`; `memory_gb` as there)."""
    why = too_big(checkmate_size(graph), "lp", memory_gb)
    if why is not None:
        raise ModelTooLarge(why)
    deadline = deadline or Deadline(time_limit)
    try:
        # exact sizes (a rounded-up discretisation would not give a valid bound for the real sizes)
        cm = CheckmateModel(graph, graph.cost_ram.astype(float), float(budget), deadline=deadline,
                            W=graph.workspace.astype(float))
        lp = Relaxation(cm, budget, deadline)
        # HiGHS (highspy): 7.8 s on MobileNet's relaxation (94k columns; CLP about 10 s, GLOP did
        # not finish in 200 s), 82 s on ResNet-50's (350k), and it stops at the wall-clock limit,
        # where CLP ran 121 s past a 346 s limit on RL500's (1.06M columns) and returned a
        # primal point that bounds nothing (quiet machine)
        status, values, duals = lp.solve(deadline)
    except DeadlineExceeded:
        return None, None, None, "timeout"
    if values is None:
        return None, None, None, status
    value = cm.model.value(values)
    if status == OPTIMAL:
        bound = dual_bound(lp, duals) if duals is not None else None
        if bound is None:  # no certificate: the LP's point proves nothing
            status = FEASIBLE
        else:
            value = bound
    return value, cm, values, status


class Relaxation:
    """Checkmate's relaxation as sparse rows (CSR over the model's rows, exact sizes in bytes), and
    the copy HiGHS solves: sizes scaled so that the budget is 1000 (in bytes, B ~ 1e9..1e12, the
    backends' tolerances misjudge memory rows; `milp` module docstring) and the objective scaled
    by a power of two (`milp_runner.objective_scale`; HiGHS's dual simplex failed on times near
    1e12, "excessive dual values"). A memory row (one with a U column) is the exact row times
    s = 1000 / budget with U' = s U, so its dual is the exact row's divided by s."""

    def __init__(self, cm: CheckmateModel, budget: int, deadline: Deadline):
        lm = self.model = cm.model
        n = lm.num_vars
        self.cost = np.zeros(n)
        for i, c in lm.objective.items():
            self.cost[i] += c
        self.lb, self.ub = np.asarray(lm.lb, dtype=float), np.asarray(lm.ub, dtype=float)
        starts, index, value, lower, upper = [0], [], [], [], []
        for r, (idx, coef, lo, hi) in enumerate(lm.rows):
            if r % 4096 == 0:
                deadline.check()
            index.extend(idx)
            value.extend(coef)
            starts.append(len(index))
            lower.append(lo)
            upper.append(hi)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.index = np.asarray(index, dtype=np.int32)
        self.value = np.asarray(value, dtype=float)
        self.lower, self.upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
        self.row_of = np.repeat(np.arange(len(lower), dtype=np.int64), np.diff(self.starts))
        is_u = np.zeros(n, dtype=bool)
        is_u[[u for row in cm.U for u in row]] = True
        self.is_u = is_u
        memory_row = np.zeros(len(lower), dtype=bool)
        memory_row[self.row_of[is_u[self.index]]] = True
        self.s = 1000.0 / max(int(budget), 1)
        # the row multipliers of HiGHS's copy: s on memory rows (U enters as U' = s U, coefficient 1)
        self.row_scale = np.where(memory_row, self.s, 1.0)
        self.obj_scale = objective_scale(lm)

    def solve(self, deadline: Deadline) -> tuple[str, list[float] | None, np.ndarray | None]:
        """(status, primal values in exact units, row duals of the exact rows in the objective's
        units) of HiGHS on the scaled copy within `deadline`: ``optimal``, ``feasible`` (a primal
        point, stopped by the limit), ``infeasible`` (proven before 90% of the time) or ``timeout``.
        HiGHS's "infeasible" is checked once more without presolve and with a primal tolerance of
        1e-9 before it is believed: its presolve called a feasible relaxation infeasible (a graph with
        a 1e12 workspace: 1 of about 870 random small graphs), and no certificate of it is read here."""
        import highspy

        report("LP relaxation (highs)")
        t0, left = deadline.elapsed(), deadline.left()
        h = self._run(highspy, deadline, careful=False)
        if h.getModelStatus() == highspy.HighsModelStatus.kInfeasible:
            h = self._run(highspy, deadline, careful=True)
        model_status = h.getModelStatus()
        if model_status == highspy.HighsModelStatus.kInfeasible:
            at_limit = left is not None and deadline.elapsed() - t0 >= 0.9 * left
            return (TIMEOUT if at_limit else INFEASIBLE), None, None
        if h.getInfo().primal_solution_status != 2:  # no feasible point
            return TIMEOUT, None, None
        sol = h.getSolution()
        values = np.asarray(sol.col_value, dtype=float) / np.where(self.is_u, self.s, 1.0)
        if model_status != highspy.HighsModelStatus.kOptimal:
            return FEASIBLE, values.tolist(), None
        duals = np.asarray(sol.row_dual, dtype=float) * self.row_scale / self.obj_scale
        return OPTIMAL, values.tolist(), duals

    def _run(self, highspy: Any, deadline: Deadline, *, careful: bool) -> Any:
        """A `highspy.Highs` that has run the scaled copy within `deadline` (one thread, seed 0);
        `careful`: without presolve and with a primal feasibility tolerance of 1e-9."""
        h = _quiet_highs(highspy)
        h.setOptionValue("output_flag", False)
        h.setOptionValue("random_seed", 0)
        h.setOptionValue("threads", 1)
        if careful:
            h.setOptionValue("presolve", "off")
            h.setOptionValue("primal_feasibility_tolerance", 1e-9)
        col_scale = np.where(self.is_u, self.s, 1.0)  # U' = s U
        inf = highspy.kHighsInf
        rs = self.row_scale
        h.addCols(len(self.cost), self.cost * self.obj_scale, self.lb * col_scale, self.ub * col_scale, 0,
                  np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
        if len(self.lower):
            # a U column's coefficient is +-1 in both: (s a) U = a U'
            scaled = self.value * np.where(self.is_u[self.index], 1.0, rs[self.row_of])
            lo = np.where(np.isfinite(self.lower), self.lower * rs, -inf)
            hi = np.where(np.isfinite(self.upper), self.upper * rs, inf)
            h.addRows(len(lo), lo, hi, len(self.index), self.starts[:-1].astype(np.int32), self.index, scaled)
        deadline.check()
        run_until(h, deadline.left())
        return h


#: the unit roundoff of IEEE doubles (round to nearest)
_U = 2.0 ** -53
#: the smallest positive subnormal double: the absolute error of one rounding near zero is at most half of it
_ETA = 2.0 ** -1074


def dual_bound(lp: Relaxation, duals: np.ndarray) -> float | None:
    """A lower bound on the optimum of `lp`'s model (exact sizes) proven by the row multipliers
    `duals` (any values: weak duality). For every point x within the column bounds [l, u] whose
    rows lie in [lo, hi], c.x = y.Ax + d.x with d = c - A^T y, so
    c.x >= sum_i (y_i lo_i if y_i > 0 else y_i hi_i) + sum_j min(d_j l_j, d_j u_j), once a
    multiplier whose side is infinite (a wrong sign for its row) is set to 0. Computed in floating
    point with Higham's bounds on the rounding errors of the dot products (|fl(d_j) - d_j| <=
    gamma_(m+3) (|c_j| + sum |a_ij y_i|), m the column's nonzeros) and of the final sums, and
    rounded down: so HiGHS's tolerances (absolute ones, on a model spanning 1..1e12 bytes and
    1e-3..1e9 time units) cannot make it exceed the relaxation's optimum. None when it is not finite."""
    y = np.nan_to_num(np.asarray(duals, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
    y = np.where((y > 0) & np.isfinite(lp.lower) | (y < 0) & np.isfinite(lp.upper), y, 0.0)
    side = np.where(y > 0, lp.lower, np.where(y < 0, lp.upper, 0.0))
    row_terms = y * side
    n = len(lp.cost)
    prod = lp.value * y[lp.row_of]
    aty = np.bincount(lp.index, weights=prod, minlength=n)
    size = np.abs(lp.cost) + np.bincount(lp.index, weights=np.abs(prod), minlength=n)
    count = np.bincount(lp.index, minlength=n) + 3
    d = lp.cost - aty
    # gamma_k <= 1.01 k u while k u <= 1e-3; the computed `size` is low by at most the same factor
    err = 1.02 * count * _U * (size + np.abs(d)) + count * _ETA
    dlo = np.nextafter(d - err, -np.inf)
    dhi = np.nextafter(d + err, np.inf)
    col_terms = np.minimum(np.minimum(dlo * lp.lb, dlo * lp.ub), np.minimum(dhi * lp.lb, dhi * lp.ub))
    terms = np.concatenate([row_terms, col_terms, [lp.model.offset]])
    if not np.all(np.isfinite(terms)) or count.max(initial=0) * _U > 1e-3:
        return None
    # each term is one rounding off (<= u |t|, or eta/2 near zero), math.fsum is correctly rounded
    z = math.fsum(terms.tolist()) - 3.0 * _U * math.fsum(np.abs(terms).tolist()) - len(terms) * _ETA
    z = math.nextafter(z, -math.inf)
    return z if math.isfinite(z) else None


def lp_bound(graph: Graph, budget: int, *, slots: int = 500, time_limit: float | None = None) -> float | None:
    """Lower bound on Checkmate's optimum at `budget` (None when the LP is infeasible, timed
    out or too large for the memory; infeasible LP means no Checkmate schedule fits): the
    relaxation's proven bound (`lp_relaxation`), at least sum_v C_v."""
    try:
        value, _, _, status = lp_relaxation(graph, budget, slots=slots, time_limit=time_limit)
    except ModelTooLarge:
        return None
    if value is None:
        return None
    return max(float(value), graph.total_cpu()) if status == OPTIMAL else None


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
