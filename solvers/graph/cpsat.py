"""A CP-SAT interval model of rematerialization on graphs, in the spirit of Moccasin (Bartan et
al., ICML 2023).

Each node v has up to C computations c = 0..C-1 (C = ``max_computations``); computation (v, c)
is present when p[v,c] = 1 (p[v,0] = 1: every node is computed at least once). Time is the
position in the sequence, 0..H-1 with H = sum of the caps. Computation (v, c) happens at time
s[v,c] (a unit interval; computations do not overlap) and its copy is retained over the
*retention interval* [s[v,c], e[v,c]] (e = its last use):

- copies of a node are ordered and do not overlap: p[v,c+1] => p[v,c] and e[v,c] < s[v,c+1]
  (keeping two copies of the same output is never useful);
- precedence: for each edge (u, v) and present (v, c'), some present copy (u, c) satisfies
  s[u,c] < s[v,c'] <= e[u,c] (a Boolean z[u,c,v,c'] chooses it);
- memory: cumulative over the retention intervals with demands M_v and capacity B (the memory
  at time tau is the node computed at tau plus the copies made before tau still used at or
  after tau, exactly the simulator's rule);
- present computations fill the times 0..N-1 (N = sum p), a symmetry cut;
- objective: min sum_{v,c} C_v p[v,c].

Unlike Checkmate's MILP the order of first computations is free. Optimality is claimed only
for the capped model ("at most C computations per node"); sizes are discretised into slots as
in `Graph.discretised`, and non-integer costs are scaled to integers (``details["cost_scale"]``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .instance import Graph
from .simulator import GraphSchedule, simulate


def integer_costs(costs: np.ndarray, digits: int = 6) -> tuple[list[int], float, bool]:
    """Costs as integers: unchanged when they already are, else scaled so that the largest has
    about `digits` significant digits. Returns (ints, scale, exact)."""
    if np.all(np.abs(costs - np.round(costs)) < 1e-9):
        return [int(round(c)) for c in costs], 1.0, True
    top = float(np.max(costs)) or 1.0
    scale = 10.0 ** (digits - math.ceil(math.log10(top)))
    return [int(round(c * scale)) for c in costs], scale, False


class MoccasinModel:
    """The CP-SAT model of the module docstring; `caps[v]` computations for node v."""

    def __init__(self, graph: Graph, M: np.ndarray, B: int, caps: list[int], costs: list[int]):
        self.graph, self.caps = graph, caps
        m = self.model = cp_model.CpModel()
        H = self.H = int(sum(caps))
        n = graph.n
        self.p: list[list[Any]] = []
        self.s: list[list[Any]] = []
        self.e: list[list[Any]] = []
        keep_intervals, demands, compute_intervals = [], [], []
        count = m.NewIntVar(n, H, "N")
        for v in range(n):
            ps, ss, es = [], [], []
            for c in range(caps[v]):
                p = m.NewConstant(1) if c == 0 else m.NewBoolVar(f"p{v}_{c}")
                s = m.NewIntVar(0, H - 1, f"s{v}_{c}")
                e = m.NewIntVar(0, H - 1, f"e{v}_{c}")
                size = m.NewIntVar(1, H, f"d{v}_{c}")
                end = m.NewIntVar(1, H, f"t{v}_{c}")
                m.Add(end == e + 1)
                keep_intervals.append(m.NewOptionalIntervalVar(s, size, end, p, f"keep{v}_{c}"))
                demands.append(int(M[v]))
                compute_intervals.append(m.NewOptionalFixedSizeIntervalVar(s, 1, p, f"run{v}_{c}"))
                m.Add(s <= count - 1).OnlyEnforceIf(p)
                if not graph.succs[v]:
                    m.Add(e == s).OnlyEnforceIf(p)
                if c > 0:
                    m.AddImplication(p, ps[-1])
                    m.Add(s > es[-1]).OnlyEnforceIf(p)
                    m.Add(s == 0).OnlyEnforceIf(p.Not())
                    m.Add(e == 0).OnlyEnforceIf(p.Not())
                ps.append(p)
                ss.append(s)
                es.append(e)
            self.p.append(ps)
            self.s.append(ss)
            self.e.append(es)
        m.Add(count == sum(p for ps in self.p for p in ps))
        m.AddNoOverlap(compute_intervals)
        m.AddCumulative(keep_intervals, demands, int(B))
        for u, v in graph.edges:
            m.Add(self.s[u][0] < self.s[v][0])  # redundant: the first copy of u precedes any use
            for c2 in range(caps[v]):
                zs = []
                for c in range(caps[u]):
                    z = m.NewBoolVar("")
                    m.AddImplication(z, self.p[u][c])
                    m.Add(self.s[u][c] < self.s[v][c2]).OnlyEnforceIf(z)
                    m.Add(self.e[u][c] >= self.s[v][c2]).OnlyEnforceIf(z)
                    zs.append(z)
                m.AddBoolOr(zs).OnlyEnforceIf(self.p[v][c2])
        self.objective = sum(costs[v] * p for v in range(n) for p in self.p[v][1:])
        self.base_cost = sum(costs)
        m.Minimize(self.objective)

    def hint(self, sequence: list[int]) -> bool:
        """Hint a schedule; False (nothing hinted) when it computes a node more than its cap."""
        g = self.graph
        sim = simulate(g, sequence)
        copies: list[list[int]] = [[] for _ in range(g.n)]
        for step, v in enumerate(sequence):
            copies[v].append(step)
        if any(len(copies[v]) > self.caps[v] or not copies[v] for v in range(g.n)):
            return False
        m = self.model
        m.ClearHints()
        for v in range(g.n):
            for c in range(self.caps[v]):
                present = c < len(copies[v])
                if c > 0:
                    m.AddHint(self.p[v][c], int(present))
                m.AddHint(self.s[v][c], copies[v][c] if present else 0)
                m.AddHint(self.e[v][c], sim.retention_end[copies[v][c]] if present else 0)
        return True

    def sequence(self, solver: cp_model.CpSolver) -> list[int]:
        comps = [(solver.Value(self.s[v][c]), v) for v in range(self.graph.n) for c in range(self.caps[v])
                 if solver.Value(self.p[v][c])]
        return [v for _, v in sorted(comps)]


class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, start: float, scale: float, base: float, stop_at_first: bool = False):
        super().__init__()
        self.start, self.scale, self.base, self.stop_at_first = start, scale, base, stop_at_first
        self.log: list[tuple[float, float | None, float | None]] = []

    def on_solution_callback(self) -> None:
        if not self.stop_at_first:
            self.log.append((time.perf_counter() - self.start, (self.ObjectiveValue() + self.base) / self.scale,
                             (self.BestObjectiveBound() + self.base) / self.scale))
        else:
            self.StopSearch()


def solve_cpsat(
    graph: Graph,
    budget: int,
    *,
    slots: int = 500,
    time_limit: float | None = None,
    warm_start: bool = True,
    max_computations: int = 2,
    raise_caps: bool = True,
    two_phase: bool = True,
    threads: int = 1,
    **_: Any,
) -> SolveResult:
    """The capped interval model (module docstring) on CP-SAT. `budget` is absolute (cost_ram
    units); at most `max_computations` computations per node (C); with `warm_start` the best
    heuristic schedule that fits is hinted (with `raise_caps`, a node the hint computes more
    than C times gets that many, and the scope says so); with `two_phase` and no such schedule, a
    feasibility-only search (a third of the time) runs first and hints the optimisation."""
    start = time.perf_counter()
    C = max(1, int(max_computations))
    M, B, slot = graph.discretised(int(budget), slots)
    ints, scale, exact = integer_costs(graph.cost_cpu)
    scope = f"at most {C} computations per node"
    if slot != 1.0:
        scope += f", sizes rounded up to {slots} slots of the budget"
    if not exact:
        scope += ", costs rounded to 6 significant digits"
    result = SolveResult(problem="graph", solver="cpsat", status=TIMEOUT, scope=scope,
                         details={"max_computations": C, "slots": slots, "cost_scale": scale})
    if max(int(M[v]) + sum(int(M[u]) for u in graph.preds[v]) for v in range(graph.n)) > B:
        result.status = INFEASIBLE
        result.message = "some node and its inputs do not fit the budget together"
        result.solve_time_s = time.perf_counter() - start
        return result
    caps = [C] * graph.n
    hint_seq = None
    if warm_start:
        from .baselines import heuristic_sequences

        for seq in heuristic_sequences(graph, int(budget), M, B):
            if simulate(graph, seq).peak_memory <= budget and _fits_slots(graph, seq, M, B):
                hint_seq = seq
                break
        if hint_seq is not None and raise_caps:
            counts = np.bincount(hint_seq, minlength=graph.n)
            raised = int(np.sum(counts > C))
            caps = [max(C, int(c)) for c in counts]
            if raised:
                result.scope = result.scope.replace(
                    f"at most {C} computations per node",
                    f"at most {C} computations per node ({raised} nodes: as many as the warm start, up to {max(caps)})")
                result.details["raised_caps"] = raised
    mm = MoccasinModel(graph, M, B, caps, ints)
    base = float(mm.base_cost)
    hinted = hint_seq is not None and mm.hint(hint_seq)
    result.details["warm_start"] = hinted

    def remaining() -> float | None:
        return None if time_limit is None else max(0.1, time_limit - (time.perf_counter() - start))

    def make_solver(limit: float | None) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        if limit is not None:
            solver.parameters.max_time_in_seconds = float(limit)
        solver.parameters.num_workers = max(1, threads)
        return solver

    if not hinted and two_phase:
        mm.model.ClearObjective()
        solver = make_solver(None if time_limit is None else remaining() / 3)
        code = solver.Solve(mm.model, _Progress(start, scale, base, stop_at_first=True))
        result.details["phase1"] = solver.StatusName(code)
        if code == cp_model.INFEASIBLE:
            result.status = INFEASIBLE
            result.solve_time_s = time.perf_counter() - start
            return result
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            hinted = mm.hint(mm.sequence(solver))
        mm.model.Minimize(mm.objective)
    solver = make_solver(remaining())
    progress = _Progress(start, scale, base)
    code = solver.Solve(mm.model, progress)
    result.solve_time_s = time.perf_counter() - start
    result.log = progress.log
    result.details["cpsat_status"] = solver.StatusName(code)
    if code == cp_model.INFEASIBLE:
        result.status = INFEASIBLE
        return result
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        result.status = TIMEOUT
        return result
    seq = mm.sequence(solver)
    sim = simulate(graph, seq, int(budget))
    if not sim.valid:
        raise RuntimeError(f"cpsat: extracted schedule is invalid: {sim.violation}")
    result.schedule = GraphSchedule.from_indices(graph, seq)
    result.objective = sim.makespan
    result.peak_memory = sim.peak_memory
    bound = (solver.BestObjectiveBound() + base) / scale
    if code == cp_model.OPTIMAL:
        result.status = OPTIMAL
        result.lower_bound = sim.makespan
    else:
        result.status = FEASIBLE
        bound = bound if exact else bound * (1 - 1e-6)
        result.lower_bound = min(max(bound, graph.total_cpu()), sim.makespan)
    return result


def _fits_slots(graph: Graph, seq: list[int], M: np.ndarray, B: int) -> bool:
    """Does `seq` fit the discretised sizes M within B slots?"""
    scaled = Graph(graph.ids, graph.cost_cpu, M, graph.edges)
    return simulate(scaled, seq).peak_memory <= B
