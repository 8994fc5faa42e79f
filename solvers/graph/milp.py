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

On CP-SAT (backend "cpsat") at exact sizes in bytes the memory rows would pass CP-SAT's
coefficient limit (`exact.cpsat_runner.ROW_LIMIT`, a presolve overflow): sizes, budget and
workspaces are then divided by a unit u and rounded down (`cpsat_unit`), a relaxation whose
infeasibility and bound carry over; its plan keeps its proof only when it replays within the
exact budget, else the start's schedule is kept (``feasible``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..discretize import effective_slots, scope_text
from ..exact.cpsat_runner import ROW_LIMIT, check_first
from ..exact.layer import exact_solver, retry_rounded_infeasible
from ..exact.memory import ModelSize, too_big
from ..exact.milp_runner import BackendRun
from ..exact.options import Deadline, DeadlineExceeded, ExactOptions
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .instance import Graph
from .linmodel import BACKENDS, LinearModel, solve_cpsat_linear, solve_milp
from .simulator import replay_into, seed_at_least, simulate

#: the graph's fast solvers: they seed and referee the exact graph models
FAST = ("checkpoint-all", "dtr", "dtr-orders", "greedy", "sqrt", "griewank")
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
    first (a third of the time left) and its solution starts the optimisation. Before building,
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
    unit = cpsat_unit(M, B, W) if backend == "cpsat" else 1
    if unit > 1:  # CP-SAT's coefficient limit: a relaxation, sizes rounded down to units of `unit`
        M, B, W = M // unit, B // unit, W // unit
        scope += f", sizes rounded down to units of {unit} for CP-SAT (a plan is checked at exact sizes)"
        result.scope, result.details["cpsat_unit"] = scope, unit
    cm = CheckmateModel(graph, M, B, integer_memory=(backend == "cpsat"), deadline=deadline, W=W)
    hint = None
    if options.warm_start:
        hint = _seed_hint(graph, cm, seed) if seed is not None else None
        if hint is None:
            hint = _heuristic_hint(graph, cm, budget)
        result.details["warm_start"] = hint is not None
    hint_ok = hint is not None

    def run(dl: Deadline, feasibility: bool, h: list[float] | None):
        if backend == "cpsat":
            return solve_cpsat_linear(cm.model, hint=h, threads=options.workers, feasibility_only=feasibility,
                                      deadline=dl, hint_feasible=h is not None, watched=True)
        return solve_milp(cm.model, backend, hint=h, threads=options.workers, feasibility_only=feasibility,
                          deadline=dl, hint_feasible=h is not None, watched=True, isolate=True,
                          memory_gb=options.memory_gb)

    if hint is None and two_phase:
        try:
            phase1 = run(deadline.share(1 / 3), True, None)
        except DeadlineExceeded:  # its third of the time went into emitting the model
            phase1 = BackendRun("timeout")
        result.details["phase1"] = phase1.status
        if phase1.status == "infeasible":
            result.status = INFEASIBLE
            result.log = [(deadline.elapsed(), None, None)]
            return result
        if phase1.values is not None:
            hint = phase1.values
            hint_ok = not cm.model.violated(hint)
    sol = run(deadline, False, hint if hint_ok else None)
    result.log = [(t, o, b) for t, o, b in sol.log]
    result.details["backend_status"] = sol.backend_status
    values = sol.values
    if values is None and hint_ok:  # the limit came first: keep the start's schedule
        values = hint
    if sol.status == "infeasible" and values is None:
        result.status = INFEASIBLE
        return result
    if values is None:
        result.status = TIMEOUT
        return result
    seq = cm.sequence(values)
    proven = sol.status == "optimal" and sol.values is not None
    if unit > 1 and not simulate(graph, seq, int(budget)).valid:  # the relaxation's plan breaks exact sizes
        proven, seq = False, cm.sequence(hint) if hint_ok and hint is not None and values is not hint else []
        if not seq or not simulate(graph, seq, int(budget)).valid:
            result.status, result.lower_bound = TIMEOUT, _relaxed_bound(graph, sol)
            result.message = f"the plan of sizes rounded to units of {unit} breaks the exact sizes"
            return result
    sim = replay_into(result, graph, seq, budget, "checkmate")
    result.status = OPTIMAL if proven else FEASIBLE
    # every node is computed at least once: sum_v C_v bounds every schedule
    result.lower_bound = min(_relaxed_bound(graph, sol), sim.makespan)
    if result.status == OPTIMAL:
        result.lower_bound = sim.makespan
    if not result.log or result.log[-1][1] != sim.makespan:
        result.log.append((deadline.elapsed(), sim.makespan, result.lower_bound))
    return result


def cpsat_unit(M: np.ndarray, B: int, W: np.ndarray) -> int:
    """1 when Checkmate's rows in sizes `M`, budget `B` and workspaces `W` stay within CP-SAT's
    coefficient limit (`cpsat_runner.ROW_LIMIT`, CP-SAT 9.15's presolve overflow); else the smallest
    unit u (size units) that brings them there once sizes, budget and workspaces are divided by u
    and rounded down (a relaxation: every schedule within B fits). A memory row holds at most every
    M_i once, a workspace and two U's of domain [0, B]."""
    activity = int(np.sum(M)) + int(np.max(W, initial=0)) + 2 * int(B) + len(M)
    return 1 if activity <= ROW_LIMIT else -(-activity // (ROW_LIMIT - len(M)))


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


def _heuristic_hint(graph: Graph, cm: CheckmateModel, budget: int) -> list[float] | None:
    """A complete, feasible assignment from the best heuristic schedule that fits, or None."""
    from .baselines import heuristic_sequences

    for seq in heuristic_sequences(graph, budget, cm.M, cm.B, given_order_only=True):
        mats = stages_of(graph, seq)
        if mats is None:
            continue
        vals, peak = cm.assignment(*mats)
        if peak <= cm.B:
            return vals
    return None
