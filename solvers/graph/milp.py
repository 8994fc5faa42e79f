"""Checkmate's MILP (Jain et al., MLSys 2020) for rematerialization on a graph.

Nodes 0..n-1 in the graph's topological order; memory M_i = ``cost_ram[i]`` (in slots when
discretised), budget B, cost C_i = ``cost_cpu[i]``. A schedule has n *stages* t = 0..n-1;
stage t computes node t for the first time (the frontier advances by one node per stage) and
may recompute earlier nodes, each at most once, in index order. Binary variables:

- R[t,i] = 1 when node i is (re)computed in stage t (i <= t; R[t,t] = 1);
- S[t,i] = 1 when a copy of node i is kept in memory from stage t-1 into stage t (i < t);
- FREE[t,i,k] = 1 when the copy of i is freed right after computing k in stage t, for
  i in DEPS[k] u {k} (i.e. R[t,k] = 1, S[t+1,i] = 0 and no user j of i with k < j <= t is
  computed in stage t);

and continuous (integer with CP-SAT) U[t,k], the memory right after computing node k in stage
t (before the frees that follow it):

    min  sum_t sum_i C_i R[t,i]
    R[t,k] <= R[t,i] + S[t,i]                    for every edge (i,k), k <= t   (inputs present)
    S[t+1,i] <= R[t,i] + S[t,i]                  (a checkpoint was computed or kept)
    FREE[t,i,k] <= R[t,k],  FREE[t,i,k] <= 1 - S[t+1,i],  FREE[t,i,k] <= 1 - R[t,j]  (j in USERS[i], k < j <= t)
    U[t,0] = sum_{i<t} M_i S[t,i] + M_0 R[t,0]
    U[t,k] = U[t,k-1] - sum_{i in DEPS[k-1] u {k-1}} M_i FREE[t,i,k-1] + M_k R[t,k]
    U[t,k] + W_k R[t,k] <= B                     (W_k = ``workspace[k]``, alive while k computes)

with the paper's tightening (R lower triangular with R[t,t] = 1, S strictly lower triangular,
S[0,.] = 0). The FREE definition is the disaggregated (tighter) form of the paper's
hazard-count linearisation. The schedule is read back as "for t, for k <= t with R[t,k] = 1:
compute k"; the simulator then charges at most U (exactly U unless the solver keeps a useless
copy), and exactly the MILP's objective.

Optimality is for the model's scope: frontier-advancing schedules in the graph's given order,
each node at most once per stage (a schedule outside it may be cheaper; `cpsat` is not
restricted this way).

Memory unit. Sizes, workspaces and the budget are first divided by their gcd (exact), and for
the MILP backends, whose U are continuous, by a power of two 2^k as well when the budget is
still above `MAX_BUDGET_UNITS` units (exact in floating point: no rounding), so that B is at most
2^14 units (`memory_unit`; ``details["memory_unit"]``). In bytes (B ~ 1e9..1e11) the backends
proved wrong optima and wrong infeasibility (SCIP and CBC: 33 and "infeasible" where 30 fits);
row scaling alone (`exact.milp_runner.row_scale`) leaves U's range as it is, and with B near 2^20
units HiGHS still proved 27 where 22 fits (2^17 and below: right). CBC reads the model through
an MPS file written in full precision (`exact.cbc_cmd.model_to_mps`; OR-Tools' export wrote 6
significant digits, and CBC "proved" optima of the rounded model). Every plan is
replayed at exact sizes before it is kept: one over the budget (within the backend's tolerance)
keeps no proof; the model is solved again with the budget `RESTRICT` lower (a restriction) and the
better of its plan and the start's schedule is returned (``feasible``; ``optimal`` only when it
meets the first run's bound, which holds for the exact budget). A MILP
backend's "infeasible" is a proof only when the memory data are small integers (no 2^k was
needed: slots, or a gcd leaving at most `MAX_BUDGET_UNITS` units); otherwise the answer is
``timeout`` with the reason (CP-SAT's is exact arithmetic).

On CP-SAT (backend "cpsat") at exact sizes in bytes the memory rows would pass CP-SAT's
coefficient limit (`exact.cpsat_runner.ROW_LIMIT`, a presolve overflow): sizes, budget and
workspaces are then divided by a unit u and rounded down (`cpsat_unit`), a relaxation whose
infeasibility and bound carry over; its plan keeps its proof only when it replays within the
exact budget, else the start's schedule is kept (``feasible``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..discretize import CPSAT_COST_DIGITS, GAP_TOLERANCE, effective_slots, scope_text
from ..exact.cpsat_runner import ROW_LIMIT, check_first, cost_slack
from ..exact.layer import exact_solver, retry_rounded_infeasible
from ..exact.memory import ModelSize, too_big
from ..exact.milp_runner import BackendRun
from ..exact.options import Deadline, DeadlineExceeded, ExactOptions
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult, gap_closed
from .instance import Graph
from .linmodel import BACKENDS, LinearModel, solve_cpsat_linear, solve_milp
from .simulator import replay_into, seed_at_least, simulate

#: the graph's fast solvers: they seed and referee the exact graph models (`checkmate`, `cpsat`), in the
#: order the warm start runs them (`exact.layer.run_fast`): by expected cost, so that a short share is
#: not spent before the cheap ones ran. On ResNet-50 at batch 448 (349 nodes, one thread): checkpoint-all,
#: sqrt and griewank a few ms, greedy 0.2 s, dtr 0.3 s, dtr-orders 16 s (10-40 s on 189-400 nodes).
#: dtr-orders goes last and gets what is left of the share (run third, it used all of it there: greedy,
#: 14.39e6, never ran and `checkmate` returned dtr's 15.52e6 at a 30 s limit).
FAST = ("checkpoint-all", "greedy", "sqrt", "griewank", "dtr", "dtr-orders")
#: default backend, chosen by measurement (``python -m memsched.experiments.bench_graph --backends``, one
#: thread, gap 0): CBC was fastest or tied on linear-20 at 70%, VGG-16-like at 80%/70% and
#: random layered 30-node graphs at 95%/90% (0.2-5.9 s); HiGHS was close but 10x slower on the
#: linear graph (and crashes on hints, so it gets none); SCIP took about twice CBC's time; CP-SAT
#: on this model failed to prove the linear and random optima within 60 s. CBC ignores hints:
#: the warm start's schedule is still returned if the limit comes first.
DEFAULT_BACKEND = "auto"
#: "auto" uses CBC up to this many variables and SCIP above: on the ResNet-50-like graph
#: (349 nodes, 324k variables, 589k constraints; built in ~2 s) CBC was still running 9 minutes
#: into a 120 s limit, while SCIP returned the warm start after 220-232 s of wall time (handing
#: the model to the backend and its presolve are not held to the limit).
AUTO_CBC_MAX_VARIABLES = 50_000


class CheckmateModel:
    """The MILP above with index maps R[t][k], S[t][i], FREE[(t,i,k)], U[t][k] into `model`."""

    def __init__(self, graph: Graph, M: np.ndarray, B: float, *, integer_memory: bool = False,
                 deadline: Deadline | None = None, W: np.ndarray | None = None):
        self.graph, self.B = graph, B
        self.M = [int(m) for m in M] if integer_memory else [float(m) for m in M]
        W = graph.workspace if W is None else W  # W_k: workspace charged while k computes
        self.W = [int(w) for w in W] if integer_memory else [float(w) for w in W]
        n = graph.n
        lm = self.model = LinearModel()
        self.R = [[lm.var(1 if k == t else 0, 1, True) for k in range(t + 1)] for t in range(n)]
        self.S = [[lm.var(0, 1, True) for i in range(t)] for t in range(n)]
        self.U = [[lm.var(0, self.B, integer_memory) for k in range(t + 1)] for t in range(n)]
        self.FREE: dict[tuple[int, int, int], int] = {}
        R, S, U, Mm = self.R, self.S, self.U, self.M
        for t in range(n):
            if deadline is not None:
                deadline.check()
            for k in range(t + 1):
                for i in graph.preds[k]:
                    lm.add([R[t][k], R[t][i]] + ([S[t][i]] if i < t else []), [1.0, -1.0, -1.0][: 2 + (i < t)], ub=0)
            if t + 1 < n:
                for i in range(t + 1):
                    idx = [S[t + 1][i], R[t][i]] + ([S[t][i]] if i < t else [])
                    lm.add(idx, [1.0, -1.0, -1.0][: len(idx)], ub=0)
            for k in range(t + 1):
                for i in (*graph.preds[k], k):
                    f = lm.var(0, 1, True)
                    self.FREE[(t, i, k)] = f
                    lm.add([f, R[t][k]], [1, -1], ub=0)
                    if t + 1 < n:
                        lm.add([f, S[t + 1][i]], [1, 1], ub=1)
                    for j in graph.succs[i]:
                        if k < j <= t:
                            lm.add([f, R[t][j]], [1, 1], ub=1)
            lm.add([U[t][0]] + [S[t][i] for i in range(t)] + [R[t][0]],
                   [1] + [-Mm[i] for i in range(t)] + [-Mm[0]], 0, 0)
            for k in range(1, t + 1):
                frees = (*graph.preds[k - 1], k - 1)
                lm.add([U[t][k], U[t][k - 1]] + [self.FREE[(t, i, k - 1)] for i in frees] + [R[t][k]],
                       [1, -1] + [Mm[i] for i in frees] + [-Mm[k]], 0, 0)
            for k in range(t + 1):
                lm.objective[R[t][k]] = float(graph.cost_cpu[k])
                if self.W[k]:  # U_{t,k} + W_k R_{t,k} <= B: the workspace exists while k computes
                    lm.add([U[t][k], R[t][k]], [1, self.W[k]], ub=self.B)

    # ------------------------------------------------------------------ solutions <-> schedules
    def sequence(self, values: list[float]) -> list[int]:
        """Checkmate's schedule extraction: stage by stage, the computed nodes in index order."""
        return [k for t in range(self.graph.n) for k in range(t + 1) if values[self.R[t][k]] > 0.5]

    def matrices(self, values: list[float]) -> tuple[np.ndarray, np.ndarray]:
        """The 0/1 matrices R (computations) and S (retained values), stage t by node, of a solution."""
        n = self.graph.n
        Rm, Sm = np.zeros((n, n), bool), np.zeros((n, n), bool)
        for t in range(n):
            for k in range(t + 1):
                Rm[t, k] = values[self.R[t][k]] > 0.5
            for i in range(t):
                Sm[t, i] = values[self.S[t][i]] > 0.5
        return Rm, Sm

    def assignment(self, Rm: np.ndarray, Sm: np.ndarray) -> tuple[list[float], float]:
        """Complete variable values for given R and S (FREE and U by their definitions) and the
        resulting peak U (feasible for the model when <= B and R, S are consistent)."""
        g, n = self.graph, self.graph.n
        vals = [0.0] * self.model.num_vars
        peak = 0.0
        for t in range(n):
            for k in range(t + 1):
                vals[self.R[t][k]] = float(Rm[t, k])
            for i in range(t):
                vals[self.S[t][i]] = float(Sm[t, i])
            mem: float = sum(self.M[i] for i in range(t) if Sm[t, i]) + (self.M[0] if Rm[t, 0] else 0)
            for k in range(t + 1):
                if k:
                    mem += self.M[k] if Rm[t, k] else 0
                vals[self.U[t][k]] = float(mem)
                peak = max(peak, mem + (self.W[k] if Rm[t, k] else 0))
                for i in (*g.preds[k], k):
                    free = bool(Rm[t, k]) and not (t + 1 < n and Sm[t + 1, i]) and not any(
                        Rm[t, j] for j in g.succs[i] if k < j <= t)
                    vals[self.FREE[(t, i, k)]] = float(free)
                    if free:
                        mem -= self.M[i]
        return vals, peak


def checkmate_size(graph: Graph, W: np.ndarray | None = None) -> ModelSize:
    """Variables, rows and nonzeros of `CheckmateModel` on `graph` (workspaces `W`, default the
    graph's), counted without building it: O(n + sum over nodes of in-degree x out-degree).
    With P_k = |DEPS[k]| and T_k = n - k the stages in which node k may be computed:
    R, U: n(n+1)/2 each, S: n(n-1)/2, FREE: sum_k (P_k + 1) T_k."""
    n = graph.n
    W = graph.workspace if W is None else W
    P = np.array([len(p) for p in graph.preds], dtype=np.int64)
    T = n - np.arange(n, dtype=np.int64)
    tri = n * (n + 1) // 2
    free = int(((P + 1) * T).sum())
    variables = 2 * tri + n * (n - 1) // 2 + free
    # inputs present: one row of 3 per edge (i, k) and stage t >= k
    rows, nnz = int((P * T).sum()), 3 * int((P * T).sum())
    # checkpoints: S[t+1,i] <= R[t,i] + S[t,i] for t < n-1, i <= t (no S[t,t])
    rows += n * (n - 1) // 2
    nnz += 2 * (n * (n - 1) // 2) + (n - 1) * (n - 2) // 2
    # FREE[t,i,k] <= R[t,k]; <= 1 - S[t+1,i] (t < n-1); <= 1 - R[t,j] for users k < j <= t
    users = sum(n - j for k in range(n) for i in (*graph.preds[k], k) for j in graph.succs[i] if j > k)
    free_rows = free + int(((P + 1) * (T - 1)).sum()) + users
    rows, nnz = rows + free_rows, nnz + 2 * free_rows
    # memory: U[t,0] (t + 2 terms), U[t,k] for k >= 1 (P_{k-1} + 4 terms)
    rows += tri
    nnz += int((np.arange(n) + 2).sum()) + int(((P[:-1] + 4) * T[1:]).sum())
    # workspace: U[t,k] + W_k R[t,k] <= B where W_k != 0
    ws = int(T[np.asarray(W) != 0].sum())
    rows, nnz = rows + ws, nnz + 2 * ws
    return ModelSize(variables, rows, nnz)


def stages_of(graph: Graph, sequence: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """R and S matrices of a sequence whose first computations follow the index order (None
    otherwise). Stage t runs from after the first computation of t-1 to the first of t."""
    n = graph.n
    first = [-1] * n
    for s, v in enumerate(sequence):
        if first[v] < 0:
            first[v] = s
    if any(f < 0 for f in first) or any(first[v] >= first[v + 1] for v in range(n - 1)):
        return None
    sim = simulate(graph, sequence)
    Rm, Sm = np.zeros((n, n), bool), np.zeros((n, n), bool)
    stage_of_step = np.searchsorted(np.asarray(first), np.arange(len(sequence)))
    for s, v in enumerate(sequence):
        t = int(stage_of_step[s])
        Rm[t, v] = True
        # the copy made at s is resident at the start of every later stage it is still used in
        last = sim.retention_end[s]
        for t2 in range(t + 1, n):
            if first[t2 - 1] + 1 > last:
                break
            Sm[t2, v] = True
    return Rm, Sm


def _necessary_budget(graph: Graph, M: np.ndarray, W: np.ndarray | None = None) -> int:
    """Every schedule holds a node, its workspace and all its inputs at once:
    max_v M_v + W_v + sum_{u in DEPS[v]} M_u (`Graph.necessary_budget`; W defaults to the graph's)."""
    return graph.necessary_budget(M, W)


def exact_size_retry(solve_fn: Any, solver: str, graph: Graph, budget: int, *, options: ExactOptions,
                     deadline: Deadline, **kw: Any) -> SolveResult:
    """``solve_fn(graph, budget, options=..., deadline=..., **kw)`` (a graph model at ``options.slots``
    slots, named `solver`) with ``infeasible`` about the real budget: ``infeasible`` at once when some
    node, its workspace and its inputs exceed `budget` at exact sizes (`Graph.necessary_budget`);
    when the sizes rounded up to the slots leave no schedule (their necessary memory, or the model)
    `solve_fn` runs again with exact sizes in the time left and the scope says "exact sizes" and
    why; with no time left for that the answer is ``timeout`` with a message naming the slots
    (`exact.layer.retry_rounded_infeasible`, as the chain and join models)."""
    need = graph.necessary_budget()
    if need > int(budget):
        return SolveResult(problem="graph", solver=solver, status=INFEASIBLE, scope=scope_text(0),
                           message=f"some node and its inputs do not fit the budget together (they need {need} "
                                   "at exact sizes)", details={"slots": options.slots, "necessary_budget": need})
    n = effective_slots(int(budget), options.slots)
    res = retry_rounded_infeasible(solve_fn, graph, int(budget), options=options, deadline=deadline, **kw)
    if "retried_exact_sizes" in res.details:
        res.scope += f", exact sizes (sizes rounded up to {n} slots left no schedule)"
    return res


def check_backend(backend: str) -> None:
    """The ``backend`` option of `solve_checkmate`: one of BACKENDS or 'auto'; else `InputError`
    naming the option."""
    from ..errors import InputError, option_field

    if backend not in (*BACKENDS, "auto"):
        raise InputError(f"must be one of {BACKENDS} or 'auto', got {backend!r}", field=option_field("backend"))


@check_first(lambda _graph, *, backend=DEFAULT_BACKEND, **_: check_backend(backend))
@exact_solver("graph", "checkmate", FAST, least=lambda graph: graph.total_cpu())
def solve_checkmate(graph: Graph, budget: int, *, options: ExactOptions, deadline: Deadline,
                    seed: SolveResult | None = None, backend: str = DEFAULT_BACKEND, two_phase: bool = True,
                    **_: Any) -> SolveResult:
    """Checkmate's MILP (module docstring; options: `_solve_checkmate`). ``infeasible`` is about
    the real budget: the necessary memory is checked at exact sizes, and when the sizes rounded up
    to ``options.slots`` slots leave no schedule the model is solved again with exact sizes in the
    time left (`exact_size_retry`; ``timeout`` naming the slots when no time is left)."""
    return exact_size_retry(_solve_checkmate, "checkmate", graph, budget, options=options, deadline=deadline,
                            seed=seed, backend=backend, two_phase=two_phase)


def _solve_checkmate(
    graph: Graph,
    budget: int,
    *,
    options: ExactOptions,
    deadline: Deadline,
    seed: SolveResult | None = None,
    backend: str = DEFAULT_BACKEND,
    two_phase: bool = True,
    **_: Any,
) -> SolveResult:
    """Checkmate's MILP (module docstring) on an OR-Tools backend: "scip", "cbc", "highs",
    "cpsat" (CP-SAT on the same model, memory variables integer) or "auto" (CBC for small
    models, SCIP for large ones; see `DEFAULT_BACKEND`). `budget` is absolute (cost_ram units);
    sizes are discretised into ``options.slots`` slots (0: exact). The seed (the best fast
    schedule, when its first computations follow the file's order) or else a given-order
    heuristic is the MIP start; with `two_phase` and no start, a feasibility-only solve runs
    first (a third of the time left) and its solution starts the optimisation (not with "highs",
    which takes no MIP start). Before building,
    the model's size (`checkmate_size`) is checked against the memory available
    (`memory.too_big`, option ``memory_gb``): a model that would not fit is not built and the
    answer (the seed's schedule, through the exact layer) says why in ``details["not_built"]``.
    The MILP backends run in a child process killed just after the limit (`portfolio.run_isolated`;
    for CBC with the program it started)."""
    M, B, slot = graph.discretised(int(budget), options.slots)
    scope = "frontier-advancing schedules in the file's order (Checkmate), each node at most once per stage"
    if slot != 1.0:
        scope += f", {scope_text(options.slots)}"
    result = SolveResult(problem="graph", solver="checkmate", status=TIMEOUT, scope=scope,
                         details={"backend": backend, "slots": options.slots})
    need = graph.necessary_budget(M, graph.workspace_in(slot))
    if need > B:
        result.status = INFEASIBLE
        result.message = "some node and its inputs do not fit the budget together"
        return result
    if seed_at_least(result, graph, seed, budget, "checkmate"):
        return result
    size = checkmate_size(graph, graph.workspace_in(slot))
    if backend == "auto":
        backend = "cbc" if size.variables <= AUTO_CBC_MAX_VARIABLES else "scip"
        result.details["backend"] = backend
    result.details["variables"], result.details["constraints"] = size.variables, size.rows
    why = too_big(size, backend, options.memory_gb)
    if why is not None:  # building it would end in the out-of-memory killer, with no answer at all
        result.details["not_built"] = why
        result.message = f"Checkmate's model was not built: {why}"
        return result
    W = graph.workspace_in(slot)
    M_slots, B_slots = M, B
    mu = memory_unit(M, B, W, shift=backend != "cpsat")
    M, W, B_model = mu.scaled(M), mu.scaled(W), mu.scaled_budget(B)
    if mu.gcd > 1 or mu.shift:
        result.details["memory_unit"] = mu.describe()
    unit = cpsat_unit(M, int(B_model), W) if backend == "cpsat" else 1
    if unit > 1:  # CP-SAT's coefficient limit: a relaxation, sizes rounded down to units of `unit`
        M, B_model, W = M // unit, int(B_model) // unit, W // unit
        scope += f", sizes rounded down to units of {unit * mu.gcd} for CP-SAT (a plan is checked at exact sizes)"
        result.scope, result.details["cpsat_unit"] = scope, unit * mu.gcd
    cm = CheckmateModel(graph, M, B_model, integer_memory=(backend == "cpsat"), deadline=deadline, W=W)
    hint = None
    if options.warm_start:
        hint = _seed_hint(graph, cm, seed) if seed is not None else None
        if hint is None:
            hint = _heuristic_hint(graph, cm, budget, M_slots, B_slots)
        result.details["warm_start"] = hint is not None
    hint_ok = hint is not None
    # a MILP backend's "infeasible" is a proof only on small integer memory data (`memory_unit`)
    safe_infeasible = backend == "cpsat" or mu.shift == 0

    def run(dl: Deadline, feasibility: bool, h: list[float] | None):
        if backend == "cpsat":
            return solve_cpsat_linear(cm.model, hint=h, threads=options.workers, seed=options.seed,
                                      verbose=options.verbose, feasibility_only=feasibility,
                                      deadline=dl, hint_feasible=h is not None, watched=True)
        return solve_milp(cm.model, backend, hint=h, threads=options.workers, seed=options.seed,
                          verbose=options.verbose, feasibility_only=feasibility,
                          deadline=dl, hint_feasible=h is not None, watched=True, isolate=True,
                          memory_gb=options.memory_gb)

    # the first phase's solution is the second's MIP start (and its fallback); HiGHS takes no start
    # (`highs_runner`) and answers its own incumbent at the limit, so its optimising run gets the whole time
    if hint is None and two_phase and backend != "highs":
        try:
            phase1 = run(deadline.share(1 / 3), True, None)
        except DeadlineExceeded:  # its third of the time went into emitting the model
            phase1 = BackendRun("timeout")
        result.details["phase1"] = phase1.status
        if phase1.status == "infeasible":
            result.log = [(deadline.elapsed(), None, None)]
            return _no_schedule(result, safe_infeasible, mu)
        if phase1.values is not None:
            hint = phase1.values
            hint_ok = not cm.model.violated(hint)
    sol = run(deadline, False, hint if hint_ok else None)
    slack = _cost_slack(cm, backend, result)
    if slack and sol.bound is not None:  # CP-SAT minimised rounded costs (`linear_to_cpsat`)
        sol.bound -= slack
    result.log = [(t, o, b) for t, o, b in sol.log]
    result.details["backend_status"] = sol.backend_status
    values = sol.values
    if values is None and hint_ok:  # the limit came first: keep the start's schedule
        values = hint
    if sol.status == "infeasible" and values is None:
        return _no_schedule(result, safe_infeasible, mu)
    if values is None:
        result.status = TIMEOUT
        return result
    seq = cm.sequence(values)
    # on rounded costs (CP-SAT) the proof holds within the backends' relative gap, `GAP_TOLERANCE`
    proven = sol.status == "optimal" and sol.values is not None and (
        not slack or (sol.objective is not None and sol.bound is not None
                      and gap_closed(sol.objective, sol.bound, GAP_TOLERANCE)))
    if not simulate(graph, seq, int(budget)).valid:
        # CP-SAT's rounded sizes (a relaxation), or a backend's feasibility tolerance, let the plan
        # pass the exact budget: no proof; the plan of a restricted budget, or the start's schedule
        why = (f"sizes rounded to units of {unit * mu.gcd}" if unit > 1
               else f"the {backend} backend (within its tolerance)")
        result.details["plan_over_budget"] = True
        start = cm.sequence(hint) if hint_ok and hint is not None and values is not hint else []
        start = start if start and simulate(graph, start, int(budget)).valid else []
        restricted = None
        if unit == 1 and backend != "cpsat" and not deadline.expired():
            restricted = _restricted_sequence(graph, int(budget), M, B_model, W, hint if hint_ok else None,
                                              lambda model, dl, h: solve_milp(
                                                  model, backend, hint=h, threads=options.workers, deadline=dl,
                                                  seed=options.seed, verbose=options.verbose,
                                                  hint_feasible=h is not None, isolate=True,
                                                  memory_gb=options.memory_gb), deadline)
        proven, seq = False, start
        if restricted is not None and (not start or _makespan(graph, restricted) < _makespan(graph, start)):
            seq = restricted
            result.details["restricted_budget"] = True
            # the first run's bound holds for the exact budget (its model, within tolerance, is a relaxation)
            proven = gap_closed(_makespan(graph, seq), sol.bound, 1e-9)
        if not seq:
            result.status, result.lower_bound = TIMEOUT, _relaxed_bound(graph, sol)
            result.message = f"the plan of {why} breaks the exact budget"
            return result
        result.message = f"the plan of {why} breaks the exact budget; " + (
            f"returned the plan of a budget {RESTRICT:g} lower" if seq is restricted
            else "returned the warm start's schedule")
    sim = replay_into(result, graph, seq, budget, "checkmate")
    result.status = OPTIMAL if proven else FEASIBLE
    # every node is computed at least once: sum_v C_v bounds every schedule
    result.lower_bound = min(_relaxed_bound(graph, sol), sim.makespan)
    if result.status == OPTIMAL:
        result.lower_bound = sim.makespan
    if not result.log or result.log[-1][1] != sim.makespan:
        result.log.append((deadline.elapsed(), sim.makespan, result.lower_bound))
    return result


#: a plan over the exact budget (the backend's tolerance) is solved again with the budget lowered by
#: this fraction: above the backends' feasibility tolerances (1e-6)
RESTRICT = 1e-5


def _makespan(graph: Graph, seq: list[int]) -> float:
    return float(simulate(graph, seq).makespan)


def _restricted_sequence(graph: Graph, budget: int, M: np.ndarray, B: float, W: np.ndarray,
                         hint: list[float] | None, solve: Any, deadline: Deadline) -> list[int] | None:
    """The plan of Checkmate's model with the budget `B` (model units) lowered by `RESTRICT` (a
    restriction: its plan fits the exact `budget` despite the backend's tolerance) solved by
    ``solve(model, deadline, hint)`` in the time left, when it replays within `budget`; else None."""
    cm = CheckmateModel(graph, M, B - RESTRICT * max(1.0, float(B)), deadline=deadline, W=W)
    start = hint if hint is not None and not cm.model.violated(hint) else None
    try:
        run = solve(cm.model, deadline, start)
    except DeadlineExceeded:
        return None
    if run.values is None:
        return None
    seq = cm.sequence(run.values)
    return seq if simulate(graph, seq, budget).valid else None


#: the MILP backends (continuous U) get the budget in at most this many memory units (`memory_unit`)
MAX_BUDGET_UNITS = 2**14


@dataclass(frozen=True)
class MemoryUnit:
    """The unit of Checkmate's memory data: sizes, workspaces and budget are divided by `gcd` (an
    integer dividing all of them: exact) and then by 2^`shift` (exact in floating point for values
    below 2^53 units of `gcd`). One unit is ``gcd * 2**shift`` size units (bytes)."""

    gcd: int = 1
    shift: int = 0

    def scaled(self, values: np.ndarray) -> np.ndarray:
        """`values` (integers, multiples of `gcd`) in this unit: int64 without shift, else float64."""
        ints = np.asarray(values, dtype=np.int64) // self.gcd
        return ints if not self.shift else np.ldexp(ints.astype(np.float64), -self.shift)

    def scaled_budget(self, budget: int) -> int | float:
        """The budget in this unit: an int without shift, else a float."""
        b = int(budget) // self.gcd
        return b if not self.shift else math.ldexp(float(b), -self.shift)

    def describe(self) -> str:
        """The unit in words, for ``details["memory_unit"]``."""
        return f"{self.gcd} x 2^{self.shift}" if self.shift else str(self.gcd)


def memory_unit(M: np.ndarray, B: int, W: np.ndarray, *, shift: bool = True) -> MemoryUnit:
    """The unit for Checkmate's memory rows in sizes `M`, budget `B` and workspaces `W` (integers):
    their gcd, and with `shift` (MILP backends: U continuous) the power of two that then brings the
    budget into (2^13, 2^14] units when it is above `MAX_BUDGET_UNITS` (the same model, well scaled;
    at ~1e10 bytes SCIP and CBC returned wrong optima and "infeasible", HiGHS at 2^20 units too)."""
    g = math.gcd(int(B), *(int(v) for v in np.asarray(M).ravel()), *(int(v) for v in np.asarray(W).ravel()))
    g = max(g, 1)
    units = int(B) // g
    k = units.bit_length() - MAX_BUDGET_UNITS.bit_length() + 1 if shift and units > MAX_BUDGET_UNITS else 0
    return MemoryUnit(g, max(k, 0))


#: `details["class_only"]` of checkmate's proven ``infeasible``: a proof about its class, not the budget.
CLASS_ONLY = ("of Checkmate's class: no frontier-advancing schedule in the file's order fits; "
              "a schedule in another order may (cpsat, dtr-orders)")


def _no_schedule(result: SolveResult, safe: bool, mu: MemoryUnit) -> SolveResult:
    """`result` after the backend's "infeasible": ``infeasible`` when that is a proof (`safe`), a proof
    about Checkmate's class only (the budget is at least the necessary one, so a schedule in another order
    may fit: ``details["class_only"]`` says so, and `memsched solve`'s line), else ``timeout`` saying why
    (a MILP backend's verdict on fractional memory data, `memory_unit`)."""
    if safe:
        result.status = INFEASIBLE
        result.details["class_only"] = CLASS_ONLY
        result.message = result.message or f"infeasible {CLASS_ONLY}"
        return result
    result.status = TIMEOUT
    why = f"memory in fractions of units of {mu.describe()} bytes, floating-point tolerances"
    result.message = f"the backend found no schedule; not a proof ({why})"
    return result


def cpsat_unit(M: np.ndarray, B: int, W: np.ndarray) -> int:
    """1 when Checkmate's rows in sizes `M`, budget `B` and workspaces `W` stay within CP-SAT's
    coefficient limit (`cpsat_runner.ROW_LIMIT`, CP-SAT 9.15's presolve overflow); else the smallest
    unit u (size units) that brings them there once sizes, budget and workspaces are divided by u
    and rounded down (a relaxation: every schedule within B fits). A memory row holds at most every
    M_i once, a workspace and two U's of domain [0, B]."""
    activity = int(np.sum(M)) + int(np.max(W, initial=0)) + 2 * int(B) + len(M)
    return 1 if activity <= ROW_LIMIT else -(-activity // (ROW_LIMIT - len(M)))


def _cost_slack(cm: CheckmateModel, backend: str, result: SolveResult) -> float:
    """On CP-SAT, costs that `integer_costs` must round (as `exact.cpsat_runner.linear_to_cpsat` does):
    the most a schedule's model cost can differ from its real cost (each R[t,k] counted once, time
    units), named in the scope; else 0."""
    if backend != "cpsat":
        return 0.0
    slack = cost_slack(cm.model)
    if slack == 0.0:
        return 0.0
    result.scope += f", costs rounded to {CPSAT_COST_DIGITS} significant digits for CP-SAT (the bound allows for it)"
    result.details["cost_rounding_slack"] = slack
    return slack


def _relaxed_bound(graph: Graph, sol: BackendRun) -> float:
    """The backend's bound, never below sum_v C_v (every node is computed at least once)."""
    return graph.total_cpu() if sol.bound is None else max(float(sol.bound), graph.total_cpu())


def _seed_hint(graph: Graph, cm: CheckmateModel, seed: SolveResult) -> list[float] | None:
    """The seed's schedule as a complete assignment, when Checkmate can express it and it fits the slots."""
    try:
        seq = seed.schedule.indices(graph)
    except Exception:  # not a graph schedule of this graph: no start
        return None
    mats = stages_of(graph, seq) if seq else None
    if mats is None:
        return None
    vals, peak = cm.assignment(*mats)
    return vals if peak <= cm.B else None


def _heuristic_hint(graph: Graph, cm: CheckmateModel, budget: int, M: np.ndarray, B: int) -> list[float] | None:
    """A complete, feasible assignment from the best heuristic schedule that fits, or None; the
    greedy runs in sizes `M`, budget `B` (slots, or bytes), the assignment is checked in the model's."""
    from .baselines import heuristic_sequences

    for seq in heuristic_sequences(graph, budget, M, B, given_order_only=True):
        mats = stages_of(graph, seq)
        if mats is None:
            continue
        vals, peak = cm.assignment(*mats)
        if peak <= cm.B:
            return vals
    return None
