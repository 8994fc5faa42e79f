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
- memory: cumulative over the retention intervals with demands M_v, plus the unit computation
  intervals [s[v,c], s[v,c]+1) with demands W_v (the node's workspace, ``graph.workspace``), and
  capacity B (the memory at time tau is the node computed at tau with its workspace plus the
  copies made before tau still used at or after tau, exactly the simulator's rule);
- present computations fill the times 0..N-1 (N = sum p), a symmetry cut;
- objective: min sum_{v,c} C_v p[v,c].

Unlike Checkmate's MILP the order of first computations is free. Optimality is claimed only
for the capped model ("at most C computations per node"). A node's cap is lowered to its number of
paths to a sink (`useful_caps`), which no schedule needs to exceed, so the optimum is the same and
the model stays within what any schedule can use for a large C (``details["caps_lowered"]``); the
deadline is checked while it is built. Sizes are discretised into slots as in `Graph.discretised`,
and non-integer costs are scaled to integers (``details["cost_scale"]``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from ..discretize import CPSAT_COST_DIGITS, GAP_TOLERANCE, integer_costs, rounding_error, scope_text
from ..errors import InputError, option_field
from ..exact.cpsat_runner import check_first, run_cpsat
from ..exact.layer import exact_solver
from ..exact.options import CPSAT_MEMORY, Deadline, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult, gap_closed
from .instance import Graph
from .milp import FAST, exact_size_retry
from .simulator import replay_into, seed_at_least, simulate

__all__ = ["MoccasinModel", "PRESOLVE_MAX_NODES", "integer_costs", "solve_cpsat"]

#: the deadline is checked once per this many copies (or precedence Booleans) while the model is built
CHECK_EVERY = 256

#: CP-SAT's presolve runs on graphs up to this many nodes: on Checkmate's ResNet-50 graph (353
#: nodes) it took the whole 10-20 s before the (complete, feasible) hint was read
PRESOLVE_MAX_NODES = 150


class MoccasinModel:
    """The CP-SAT model of the module docstring; `caps[v]` computations for node v."""

    def __init__(self, graph: Graph, M: np.ndarray, B: int, caps: list[int], costs: list[int],
                 deadline: Deadline | None = None, W: np.ndarray | None = None):
        self.graph, self.caps = graph, caps
        W = graph.workspace if W is None else W  # W_v: demand during v's computation step
        m = self.model = cp_model.CpModel()
        H = self.H = int(sum(caps))
        n = graph.n
        self.p: list[list[Any]] = []
        self.s: list[list[Any]] = []
        self.e: list[list[Any]] = []
        self.aux: list[list[tuple[Any, Any]]] = []  # (duration, end) of each retention interval
        self.z: dict[tuple[int, int, int, int], Any] = {}  # (u, c, v, c') -> z literal
        keep_intervals, demands, compute_intervals = [], [], []
        count = self.count = m.new_int_var(n, H, "N")
        for v in range(n):
            ps: list[Any] = []  # presence literals p_{v,c} (CP-SAT objects)
            ss: list[Any] = []
            es: list[Any] = []
            aux: list[tuple[Any, Any]] = []
            for c in range(caps[v]):
                if deadline is not None and c % CHECK_EVERY == 0:
                    deadline.check()
                p = m.new_constant(1) if c == 0 else m.new_bool_var(f"p{v}_{c}")
                s = m.new_int_var(0, H - 1, f"s{v}_{c}")
                e = m.new_int_var(0, H - 1, f"e{v}_{c}")
                size = m.new_int_var(1, H, f"d{v}_{c}")
                end = m.new_int_var(1, H, f"t{v}_{c}")
                m.add(end == e + 1)
                aux.append((size, end))
                keep_intervals.append(m.new_optional_interval_var(s, size, end, p, f"keep{v}_{c}"))
                demands.append(int(M[v]))
                run = m.new_optional_fixed_size_interval_var(s, 1, p, f"run{v}_{c}")
                compute_intervals.append(run)
                if int(W[v]):
                    keep_intervals.append(run)
                    demands.append(int(W[v]))
                m.add(s <= count - 1).only_enforce_if(p)
                if not graph.succs[v]:
                    m.add(e == s).only_enforce_if(p)
                if c > 0:
                    m.add_implication(p, ps[-1])
                    m.add(s > es[-1]).only_enforce_if(p)
                    m.add(s == 0).only_enforce_if(p.negated())
                    m.add(e == 0).only_enforce_if(p.negated())
                ps.append(p)
                ss.append(s)
                es.append(e)
            self.p.append(ps)
            self.s.append(ss)
            self.e.append(es)
            self.aux.append(aux)
        m.add(count == sum(p for ps in self.p for p in ps))
        m.add_no_overlap(compute_intervals)
        m.add_cumulative(keep_intervals, demands, int(B))
        built = 0  # precedence Booleans z so far
        for u, v in graph.edges:
            m.add(self.s[u][0] < self.s[v][0])  # redundant: the first copy of u precedes any use
            for c2 in range(caps[v]):
                if deadline is not None and built // CHECK_EVERY != (built + caps[u]) // CHECK_EVERY:
                    deadline.check()
                built += caps[u]
                zs = []
                for c in range(caps[u]):
                    z = m.new_bool_var("")
                    m.add_implication(z, self.p[u][c])
                    m.add(self.s[u][c] < self.s[v][c2]).only_enforce_if(z)
                    m.add(self.e[u][c] >= self.s[v][c2]).only_enforce_if(z)
                    self.z[u, c, v, c2] = z
                    zs.append(z)
                m.add_bool_or(zs).only_enforce_if(self.p[v][c2])
        self.objective = sum(costs[v] * p for v in range(n) for p in self.p[v][1:])
        self.base_cost = sum(costs)
        m.minimize(self.objective)

    def hint(self, sequence: list[int]) -> bool:
        """Hint a schedule, every variable of the model (a complete hint, which CP-SAT checks at
        once); False (nothing hinted) when it computes a node more than its cap."""
        g = self.graph
        sim = simulate(g, sequence)
        copies: list[list[int]] = [[] for _ in range(g.n)]
        for step, v in enumerate(sequence):
            copies[v].append(step)
        if any(len(copies[v]) > self.caps[v] or not copies[v] for v in range(g.n)):
            return False
        m = self.model
        m.clear_hints()
        m.add_hint(self.count, len(sequence))
        for v in range(g.n):
            for c in range(self.caps[v]):
                present = c < len(copies[v])
                s = copies[v][c] if present else 0
                e = sim.retention_end[s] if present else 0
                if c > 0:
                    m.add_hint(self.p[v][c], int(present))
                m.add_hint(self.s[v][c], s)
                m.add_hint(self.e[v][c], e)
                size, end = self.aux[v][c]
                m.add_hint(end, e + 1)
                m.add_hint(size, e + 1 - s if present else 1)
        for (u, c, v, c2), z in self.z.items():
            # the copy of u that feeds computation (v, c2): the latest one made before it
            feeds = False
            if c2 < len(copies[v]) and c < len(copies[u]):
                at = copies[v][c2]
                before = [k for k, step in enumerate(copies[u]) if step < at]
                feeds = bool(before) and before[-1] == c
            m.add_hint(z, int(feeds))
        return True

    def sequence(self, solver: Any) -> list[int]:
        """The schedule of a CP-SAT solution: the present computations (v, c) sorted by start time, as node indices."""
        comps = [(solver.value(self.s[v][c]), v) for v in range(self.graph.n) for c in range(self.caps[v])
                 if solver.value(self.p[v][c])]
        return [v for _, v in sorted(comps)]


#: the range of the option ``max_computations`` (C, computations per node): 0 would leave no computation
MAX_COMPUTATIONS_RANGE = (1, 10**6)


def useful_caps(graph: Graph, C: int) -> list[int]:
    """Per node, C capped at its number of paths to a sink (a sink: 1), computed in reverse index
    order (edges go forward). No schedule needs more computations of v: a copy that feeds no
    computation can be dropped (memory only falls, the cost does not rise), after which each copy
    of u feeds a distinct computation of a successor (one copy of u is resident at a time) and a
    sink is computed once, so copies(u) <= sum over successors w of copies(w) <= paths(u). The
    capped model therefore has the same optimum as with C everywhere, and at most
    ``sum(useful_caps)`` computations."""
    caps = [1] * graph.n
    for v in range(graph.n - 1, -1, -1):
        if graph.succs[v]:
            caps[v] = min(C, sum(caps[w] for w in graph.succs[v]))
    return [min(C, c) for c in caps]


def check_options(graph: Graph, *, max_computations: Any = 2, **_: Any) -> None:
    """The option `max_computations` is an integer in `MAX_COMPUTATIONS_RANGE` (checked before the
    warm start, `check_first`): every node is computed at least once, so C = 0 has no meaning."""
    low, high = MAX_COMPUTATIONS_RANGE
    ok = isinstance(max_computations, int) and not isinstance(max_computations, bool)
    if not ok or not low <= max_computations <= high:
        raise InputError(f"must be an integer in {low}..{high} (computations per node), got {max_computations!r}",
                         field=option_field("max_computations"))


@refuses("the graph's cpsat", "memory_gb", why=CPSAT_MEMORY)
@check_first(check_options)
@exact_solver("graph", "cpsat", FAST, least=lambda graph: graph.total_cpu())
def solve_cpsat(
    graph: Graph,
    budget: int,
    *,
    options: ExactOptions,
    deadline: Deadline,
    seed: SolveResult | None = None,
    max_computations: int = 2,
    raise_caps: bool = True,
    two_phase: bool = True,
    order_phase: bool = True,
    **_: Any,
) -> SolveResult:
    """The capped interval model (module docstring) on CP-SAT. `budget` is absolute (cost_ram
    units); at most `max_computations` computations per node (C). The seed (the best fast
    schedule, when it fits the slots) or else the best heuristic schedule is hinted (with
    `raise_caps`, a node the hint computes more than C times gets that many, and the scope says
    so); with `two_phase` and no hint, a feasibility-only search (a third of the time left) runs
    first and hints the optimisation. With `order_phase`, when no known schedule is free of
    recomputation, the order model (C = 1, feasibility only, a quarter of the time left) runs
    first: an order that fits is optimal among all schedules. CP-SAT's presolve runs only on
    graphs of at most `PRESOLVE_MAX_NODES` nodes (on larger ones it can take the whole limit
    before the hint is even read). `max_computations` is an integer in 1..10^6 (`check_options`); a
    node's cap is lowered to its number of paths to a sink (`useful_caps`: same optimum), and the
    deadline is checked while the model is built.
    `infeasible` is about the real budget (`exact_size_retry`):
    the necessary memory is checked at exact sizes, and when the sizes rounded up to
    ``options.slots`` slots leave no schedule the model is solved again with exact sizes."""
    return exact_size_retry(_solve_cpsat, "cpsat", graph, budget, options=options, deadline=deadline, seed=seed,
                            max_computations=max_computations, raise_caps=raise_caps, two_phase=two_phase,
                            order_phase=order_phase)


def _solve_cpsat(
    graph: Graph,
    budget: int,
    *,
    options: ExactOptions,
    deadline: Deadline,
    seed: SolveResult | None = None,
    max_computations: int = 2,
    raise_caps: bool = True,
    two_phase: bool = True,
    order_phase: bool = True,
    **_: Any,
) -> SolveResult:
    """`solve_cpsat` at ``options.slots`` (0: exact sizes), without the exact-size retry."""
    C = int(max_computations)
    M, B, slot = graph.discretised(int(budget), options.slots)
    ints, scale, exact = integer_costs(graph.cost_cpu, digits=CPSAT_COST_DIGITS)
    scope = f"at most {C} computations per node"
    if slot != 1.0:
        scope += f", {scope_text(options.slots)}"
    if not exact:
        scope += f", costs rounded to {CPSAT_COST_DIGITS} significant digits (the bound allows for it)"
    result = SolveResult(problem="graph", solver="cpsat", status=TIMEOUT, scope=scope,
                         details={"max_computations": C, "slots": options.slots, "cost_scale": scale})
    if graph.necessary_budget(M, graph.workspace_in(slot)) > B:
        result.status = INFEASIBLE
        result.message = "some node and its inputs do not fit the budget together"
        return result
    if seed_at_least(result, graph, seed, budget, "cpsat"):
        return result
    caps = useful_caps(graph, C)
    W = graph.workspace_in(slot)
    hint_seq = _hint_sequence(graph, int(budget), M, B, seed, deadline, W) if options.warm_start else None
    if hint_seq is not None and raise_caps:
        counts = np.bincount(hint_seq, minlength=graph.n)
        raised = int(np.sum(counts > C))
        caps = [max(cap, int(c)) for cap, c in zip(caps, counts)]
        if raised:
            result.scope = result.scope.replace(
                f"at most {C} computations per node",
                f"at most {C} computations per node ({raised} nodes: as many as the warm start, up to {max(caps)})")
            result.details["raised_caps"] = raised
    result.details["caps_lowered"] = sum(cap < C for cap in caps)  # to the node's paths to a sink: same optimum
    known = simulate(graph, hint_seq).makespan if hint_seq is not None else math.inf
    # the warm start is a schedule in hand from now on (the log's first entry)
    hint_log = [(deadline.elapsed(), known, None)] if hint_seq is not None else []
    if order_phase and known > graph.total_cpu() * (1 + 1e-12):
        order = _order_phase(graph, M, B, ints, deadline, options, result, W)
        if order is not None:  # every node once: no schedule is faster (the referee says optimal)
            replay_into(result, graph, order, budget, "cpsat")
            result.status = FEASIBLE
            result.lower_bound = graph.total_cpu()
            result.log = [(deadline.elapsed(), graph.total_cpu(), graph.total_cpu())]
            return result
    presolve = graph.n <= PRESOLVE_MAX_NODES
    mm = MoccasinModel(graph, M, B, caps, ints, deadline=deadline, W=W)
    base = float(mm.base_cost)
    hinted = hint_seq is not None and mm.hint(hint_seq)
    result.details["warm_start"] = hinted

    if not hinted and two_phase:
        mm.model.clear_objective()
        first = run_cpsat(mm.model, deadline.share(1 / 3), options, stop_at_first=True,
                          extra={"cp_model_presolve": presolve})
        result.details["phase1"] = first.backend_status
        if first.status == INFEASIBLE:
            result.status = INFEASIBLE
            return result
        if first.solver is not None and first.status in (OPTIMAL, FEASIBLE):
            hinted = mm.hint(mm.sequence(first.solver))
        mm.model.minimize(mm.objective)
    run = run_cpsat(mm.model, deadline, options, offset=base, scale=scale, hint_feasible=hinted,
                    extra={"cp_model_presolve": presolve}, watched=True)
    result.log = hint_log + [entry for entry in run.log if not hint_log or entry[1] is None or entry[1] < known]
    result.details["cpsat_status"] = run.backend_status
    if run.status == INFEASIBLE:
        result.status = INFEASIBLE
        return result
    # rounded costs: a schedule's model cost is off by at most the error of each computation it may hold
    slack = 0.0 if exact else sum(c * e for c, e in zip(caps, rounding_error(graph.cost_cpu, ints, scale)))
    if slack:
        result.details["cost_rounding_slack"] = slack
    if run.status not in (OPTIMAL, FEASIBLE):
        result.status = TIMEOUT
        result.lower_bound = None if run.bound is None else max(run.bound - slack, graph.total_cpu())
        return result
    seq = mm.sequence(run.solver)
    sim = replay_into(result, graph, seq, budget, "cpsat")
    if run.status == OPTIMAL and exact:
        result.status = OPTIMAL
        result.lower_bound = sim.makespan
        return result
    # optimal for the rounded costs at best: the real optimum is within `slack` of its value
    bound = run.objective if run.status == OPTIMAL else run.bound
    bound = graph.total_cpu() if bound is None else bound - slack
    result.lower_bound = min(max(bound, graph.total_cpu()), sim.makespan)
    close = gap_closed(sim.makespan, result.lower_bound, GAP_TOLERANCE)
    result.status = OPTIMAL if run.status == OPTIMAL and close else FEASIBLE
    if run.status == OPTIMAL and not close:
        result.message = f"optimal for the rounded costs; the bound allows {slack:.6g} for their rounding"
    return result


def _hint_sequence(graph: Graph, budget: int, M: np.ndarray, B: int, seed: SolveResult | None,
                   deadline: Deadline, W: np.ndarray | None = None) -> list[int] | None:
    """The schedule to hint: the seed (the best fast schedule at exact sizes) when it fits the
    slots, else the best heuristic schedule that does (`baselines.heuristic_sequences`, then
    `orders.search_sequences` on the slot sizes); None when none does."""
    if seed is not None and seed.schedule is not None:
        try:
            seq = seed.schedule.indices(graph)
        except Exception:  # not a schedule of this graph
            seq = None
        if seq is not None and simulate(graph, seq).peak_memory <= budget and _fits_slots(graph, seq, M, B, W):
            return seq
    from .baselines import heuristic_sequences
    from .orders import search_sequences

    for seq in heuristic_sequences(graph, budget, M, B):
        deadline.check()
        if _fits_slots(graph, seq, M, B, W):
            return seq
    left = deadline.left()
    for _, seq in search_sequences(graph, budget, M, B, time_budget=None if left is None else left / 4):
        if _fits_slots(graph, seq, M, B, W):
            return seq
    return None


def _order_phase(graph: Graph, M: np.ndarray, B: int, costs: list[int], deadline: Deadline,
                 options: ExactOptions, result: SolveResult, W: np.ndarray | None = None) -> list[int] | None:
    """The order model: `MoccasinModel` with one computation per node and no objective, without
    presolve, hinted with the order of smallest peak (`orders.candidate_orders`), for a quarter of
    the time left; an order that fits B (slots), or None."""
    from .orders import candidate_orders

    mm = MoccasinModel(graph, M, B, [1] * graph.n, costs, deadline=deadline, W=W)
    mm.model.clear_objective()
    ranked = candidate_orders(graph, M, keep=1, moves=40 * graph.n, cap=B, seed=1)
    if ranked and ranked[0][0] <= B and _fits_slots(graph, ranked[0][1], M, B, W):
        result.details["order_phase"] = "heuristic order"
        return ranked[0][1]
    if ranked:
        mm.hint(ranked[0][1])
    run = run_cpsat(mm.model, deadline.share(1 / 4), options, stop_at_first=True,
                    extra={"cp_model_presolve": False})
    result.details["order_phase"] = run.backend_status
    if run.solver is None or run.status not in (OPTIMAL, FEASIBLE):
        return None
    return mm.sequence(run.solver)


def _fits_slots(graph: Graph, seq: list[int], M: np.ndarray, B: int, W: np.ndarray | None = None) -> bool:
    """Does `seq` fit the discretised sizes M (and workspaces W, default none) within B slots?"""
    scaled = Graph(graph.ids, graph.cost_cpu, M, graph.edges, workspace=W)
    return simulate(scaled, seq).peak_memory <= B
