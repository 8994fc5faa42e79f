"""A tiny solver-independent linear model, emitted to OR-Tools' MILP backends or to CP-SAT.

The Checkmate MILP is built once as a `LinearModel` and then handed to pywraplp (SCIP, CBC,
HiGHS, or GLOP for its LP relaxation) or to CP-SAT (all its variables are integers there).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

MILP_BACKENDS = {"scip": "SCIP", "cbc": "CBC", "highs": "HIGHS"}
BACKENDS = (*MILP_BACKENDS, "cpsat")


@dataclass
class LinearModel:
    """Variables with bounds and integrality, constraints lb <= sum coef * var <= ub, a
    minimised objective. Coefficients are stored as parallel lists."""

    lb: list[float] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    rows: list[tuple[list[int], list[float], float, float]] = field(default_factory=list)
    objective: dict[int, float] = field(default_factory=dict)

    def var(self, lb: float, ub: float, integer: bool, name: str = "") -> int:
        self.lb.append(lb)
        self.ub.append(ub)
        self.integer.append(integer)
        self.names.append(name)
        return len(self.lb) - 1

    def add(self, idx: list[int], coef: list[float], lb: float = -math.inf, ub: float = math.inf) -> None:
        self.rows.append((idx, coef, lb, ub))

    @property
    def num_vars(self) -> int:
        return len(self.lb)


@dataclass
class LinearSolution:
    status: str  # optimal | feasible | infeasible | timeout | unknown
    values: list[float] | None
    objective: float | None
    bound: float | None
    log: list[tuple[float, float | None, float | None]]
    wall: float


def solve_milp(model: LinearModel, backend: str, *, time_limit: float | None = None, hint: list[float] | None = None,
               relax: bool = False, threads: int = 1, feasibility_only: bool = False) -> LinearSolution:
    """Solve with a pywraplp backend ("scip", "cbc", "highs", or "glop" with ``relax``)."""
    start = time.perf_counter()
    name = "GLOP" if relax else MILP_BACKENDS[backend]
    solver = pywraplp.Solver.CreateSolver(name)
    if solver is None:
        raise RuntimeError(f"OR-Tools backend {name} is not available")
    inf = solver.infinity()
    xs = [solver.Var(lo, hi, (integer and not relax), "") for lo, hi, integer in
          zip(model.lb, model.ub, model.integer)]
    for idx, coef, lo, hi in model.rows:
        ct = solver.Constraint(-inf if lo == -math.inf else lo, inf if hi == math.inf else hi)
        for i, c in zip(idx, coef):
            ct.SetCoefficient(xs[i], c)
    obj = solver.Objective()
    if not feasibility_only:
        for i, c in model.objective.items():
            obj.SetCoefficient(xs[i], c)
    obj.SetMinimization()
    if time_limit is not None:
        solver.SetTimeLimit(max(1, int(time_limit * 1000)))
    if threads > 1 and not relax and backend != "cbc":  # this CBC build has no threads
        solver.SetNumThreads(threads)
    if hint is not None and not relax and backend in ("scip",):  # CBC ignores hints; HiGHS crashes on them
        solver.SetHint(xs, [float(v) for v in hint])
    if backend == "highs" and not relax:
        solver.SetSolverSpecificParametersAsString("mip_rel_gap = 0\nmip_abs_gap = 0\n")
    params = pywraplp.MPSolverParameters()
    if not relax:
        # "optimal" means proven: no relative gap tolerance (the backends default to ~1e-4)
        params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, 1e-9)
    code = solver.Solve(params)
    wall = time.perf_counter() - start
    if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        values = [x.solution_value() for x in xs]
        objective = sum(model.objective.get(i, 0.0) * v for i, v in enumerate(values))
        if code == pywraplp.Solver.OPTIMAL:
            bound = objective if (relax or feasibility_only) else max(obj.BestBound(), -math.inf)
            if not relax and not feasibility_only and not math.isfinite(bound):
                bound = objective
            status = "optimal"
        else:
            bound = obj.BestBound() if not feasibility_only else None
            status = "feasible"
        if bound is not None and not math.isfinite(bound):
            bound = None
        return LinearSolution(status, values, objective, bound, [(wall, objective, bound)], wall)
    if code == pywraplp.Solver.INFEASIBLE:
        return LinearSolution("infeasible", None, None, None, [(wall, None, None)], wall)
    if code == pywraplp.Solver.NOT_SOLVED or (time_limit is not None and wall >= 0.95 * time_limit):
        return LinearSolution("timeout", None, None, None, [(wall, None, None)], wall)
    return LinearSolution("unknown", None, None, None, [(wall, None, None)], wall)


class _Logger(cp_model.CpSolverSolutionCallback):
    def __init__(self, start: float, log: list, scale: float = 1.0, stop_at_first: bool = False):
        super().__init__()
        self.start, self.log, self.scale, self.stop_at_first = start, log, scale, stop_at_first
        self.lock = threading.Lock()

    def on_solution_callback(self) -> None:
        with self.lock:
            self.log.append((time.perf_counter() - self.start, self.ObjectiveValue() / self.scale,
                             self.BestObjectiveBound() / self.scale))
        if self.stop_at_first:
            self.StopSearch()


def solve_cpsat_linear(model: LinearModel, *, time_limit: float | None = None, hint: list[float] | None = None,
                       threads: int = 1, feasibility_only: bool = False, log_start: float | None = None
                       ) -> LinearSolution:
    """The same linear model on CP-SAT (every variable must be integer with integer bounds;
    constraint coefficients must be integers; the objective may have float coefficients)."""
    start = time.perf_counter()
    m = cp_model.CpModel()
    xs = []
    for lo, hi in zip(model.lb, model.ub):
        xs.append(m.NewIntVar(int(math.ceil(lo)), int(math.floor(hi)), ""))
    for idx, coef, lo, hi in model.rows:
        expr = sum(int(c) * xs[i] for i, c in zip(idx, coef))
        if lo == hi:
            m.Add(expr == int(lo))
        else:
            if lo != -math.inf:
                m.Add(expr >= int(math.ceil(lo)))
            if hi != math.inf:
                m.Add(expr <= int(math.floor(hi)))
    scale = 1.0
    if not feasibility_only and model.objective:
        from .cpsat import integer_costs

        keys = list(model.objective)
        ints, scale, _ = integer_costs(np.array([model.objective[i] for i in keys]))
        m.Minimize(sum(c * xs[i] for i, c in zip(keys, ints)))
    if hint is not None:
        for x, v in zip(xs, hint):
            m.AddHint(x, int(round(v)))
    solver = cp_model.CpSolver()
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = max(1, threads)
    log: list = []
    cb = _Logger(log_start if log_start is not None else start, log, scale, stop_at_first=feasibility_only)
    code = solver.Solve(m, cb)
    wall = time.perf_counter() - start
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        values = [solver.Value(x) for x in xs]
        objective = sum(model.objective.get(i, 0.0) * v for i, v in enumerate(values))
        bound = None if feasibility_only else solver.BestObjectiveBound() / scale
        status = "optimal" if code == cp_model.OPTIMAL and not feasibility_only else "feasible"
        return LinearSolution(status, values, objective, bound, log, wall)
    if code == cp_model.INFEASIBLE:
        return LinearSolution("infeasible", None, None, None, log, wall)
    return LinearSolution("timeout", None, None, None, log, wall)
