"""Exact CP-SAT model of offloading without recomputation (the Euro-Par 2020 setting).

The compute operations run in the store-all order c_0..c_{2L} = F_all(0) .. F_all(L-1), Loss,
B(L-1) .. B(0); for every tape abar_j (j = 1..L-1; the last one is used at once) the model
decides whether it travels (o_j), and when the offload and the prefetch run. In ticks of
1/`scale` time units, with durations rounded up (d_k for compute, T_j for transfers):

    e_k = s_k + d_k,                  s_k >= e_{k-1}                        (compute stream)
    so_j >= e(F_all(j-1)),  so_j >= s(F_all(j))                             (tape complete; issued after its reader)
    r_j = max(so_j + T_j, e(F_all(j)))                                      (device copy released)
    sp_j >= max(so_j + T_j, r_j),     s(B(j)) >= sp_j + T_j                  (prefetch before B(j) reads a_j)
    NoOverlap(Off_j, Pre_j over j with o_j)                                 (transfer stream)
    Cumulative(capacity M - x[0]):  overheads o_f/o_b on [s_k, e_k); tape abar_j on
        [s(F_all(j-1)), e(B(j-1))) if not o_j, else on [s(F_all(j-1)), r_j) and [sp_j, e(B(j-1)));
        gradient delta_j on [s(producer), e(B(j-1)))
    minimise e(B(0)).

Intervals are half-open, as the simulator releases before it allocates at equal times. The
solution is turned into an offloading schedule whose ops carry ``not_before`` = their start,
so the simulator replays exactly this timing (with true durations, never later). Memory is in
`slots` slots of budget/slots bytes, sizes rounded up (``slots=0``: exact bytes).

Status "optimal" is claimed for this model (fixed compute order, each tape offloaded at most
once, durations rounded up to ticks); a lower bound is reported only when every duration is a
whole number of ticks and sizes are exact, where the model's bound is a bound of the problem.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ortools.sat.python import cp_model

from ..chain.schedule import Bwd, F_all, Loss, Op
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import simulate_offload


def _ticks(value: float, scale: float) -> int:
    """Whole ticks, rounded up; float noise below 1e-9 tick is forgiven (the simulator's sweep
    treats such noise as simultaneity)."""
    return int(math.ceil(value * scale - 1e-9))


def solve_cpsat(inst: OffloadInstance, budget: int, *, slots: int = 500, time_limit: float | None = 30.0,
                scale: float | None = None, workers: int = 2, warm_start: bool = True, **_: Any) -> SolveResult:
    t0 = time.perf_counter()
    chain = inst.chain
    L = chain.length
    if scale is None:
        times = [float(t) for t in (*chain.u_f, *chain.u_b)] + [
            inst.transfer_time(int(b)) for b in chain.xbar[1:L]]
        exact = [10.0**k for k in range(5) if all(abs(t * 10**k - round(t * 10**k)) < 1e-9 for t in times)]
        if exact:
            scale = exact[0]  # the coarsest tick in which every duration is whole: exact
        else:  # about 10^4 ticks for the longest operation
            longest = max(max(times), 1e-12)
            scale = 10 ** math.ceil(math.log10(10_000 / longest))
    unit = budget / slots if slots else 1.0
    size = (lambda b: int(math.ceil(b / unit - 1e-9))) if slots else (lambda b: int(b))
    capacity = (slots if slots else budget) - size(int(chain.x[0]))
    scope = (f"store-all compute order, each tape offloaded at most once, times in ticks of 1/{scale:g}, "
             + (f"memory in {slots} slots" if slots else "exact sizes"))

    ops: list[Op] = [F_all(i) for i in range(L)] + [Loss(L)] + [Bwd(i) for i in reversed(range(L))]
    F = {i: i for i in range(L)}
    LOSS_K = L
    Bk = {i: 2 * L - i for i in range(L)}
    durations = [float(chain.u_f[i]) for i in range(L)] + [float(chain.u_b[L])] + \
                [float(chain.u_b[i]) for i in reversed(range(L))]
    d = [_ticks(t, scale) for t in durations]
    T = {j: _ticks(inst.transfer_time(int(chain.xbar[j])), scale) for j in range(1, L)}
    horizon = sum(d) + 2 * sum(T.values()) + 1

    m = cp_model.CpModel()
    s = [m.NewIntVar(0, horizon, f"s{k}") for k in range(len(ops))]
    e = [m.NewIntVar(0, horizon, f"e{k}") for k in range(len(ops))]
    for k in range(len(ops)):
        m.Add(e[k] == s[k] + d[k])
        if k:
            m.Add(s[k] >= e[k - 1])
    intervals, demands = [], []

    def hold(start, end, demand: int, name: str, present=None) -> None:
        if demand <= 0:
            return
        length = m.NewIntVar(0, horizon, f"len_{name}")
        if present is None:
            iv = m.NewIntervalVar(start, length, end, name)
        else:
            iv = m.NewOptionalIntervalVar(start, length, end, present, name)
        intervals.append(iv)
        demands.append(demand)

    for k, op in enumerate(ops):
        over = int(chain.o_b[op.index] if op.kind != "F_all" else chain.o_f[op.index])
        hold(s[k], e[k], size(over), f"over{k}")
    # gradients delta_j, from their producer's start to the end of B(j-1); delta_0 to the end
    hold(s[LOSS_K], e[Bk[L - 1]], size(int(chain.x[L])), "delta_L")
    for j in range(1, L):
        hold(s[Bk[j]], e[Bk[j - 1]], size(int(chain.x[j])), f"delta{j}")
    hold(s[Bk[0]], e[Bk[0]], size(int(chain.x[0])), "delta0")

    offload, transfer_ivs, so, sp, release = {}, [], {}, {}, {}
    for j in range(1, L + 1):
        tape = size(int(chain.xbar[j]))
        born, dies = s[F[j - 1]], e[Bk[j - 1]]
        if j == L or T[j] == 0 or tape == 0:
            hold(born, dies, tape, f"tape{j}")
            continue
        o = m.NewBoolVar(f"o{j}")
        offload[j] = o
        hold(born, dies, tape, f"tape{j}", o.Not())
        so[j] = m.NewIntVar(0, horizon, f"so{j}")
        sp[j] = m.NewIntVar(0, horizon, f"sp{j}")
        release[j] = m.NewIntVar(0, horizon, f"r{j}")
        off_end = m.NewIntVar(0, horizon, f"oe{j}")
        m.Add(off_end == so[j] + T[j])
        m.AddMaxEquality(release[j], [off_end, e[F[j]]])
        m.Add(so[j] >= e[F[j - 1]]).OnlyEnforceIf(o)
        m.Add(so[j] >= s[F[j]]).OnlyEnforceIf(o)
        m.Add(sp[j] >= release[j]).OnlyEnforceIf(o)
        m.Add(s[Bk[j]] >= sp[j] + T[j]).OnlyEnforceIf(o)
        m.Add(so[j] == 0).OnlyEnforceIf(o.Not())
        m.Add(sp[j] == 0).OnlyEnforceIf(o.Not())
        transfer_ivs.append(m.NewOptionalFixedSizeIntervalVar(so[j], T[j], o, f"off{j}"))
        transfer_ivs.append(m.NewOptionalFixedSizeIntervalVar(sp[j], T[j], o, f"pre{j}"))
        hold(born, release[j], tape, f"tapeA{j}", o)
        hold(sp[j], dies, tape, f"tapeB{j}", o)
    m.AddNoOverlap(transfer_ivs)
    if capacity < 0:
        return SolveResult(problem="offload", solver="cpsat", status=INFEASIBLE, budget=budget, scope=scope,
                           solve_time_s=time.perf_counter() - t0, message="the input alone exceeds the budget")
    m.AddCumulative(intervals, demands, capacity)
    m.Minimize(e[-1])

    if warm_start and offload:
        from .baselines import solve_prefix

        hint = solve_prefix(inst, budget)
        k = hint.details.get("offloaded_stages")
        if k is not None:
            for j, o in offload.items():
                m.AddHint(o, 1 if j - 1 < k else 0)

    solver = cp_model.CpSolver()
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = int(workers)
    log: list[tuple[float, float | None, float | None]] = []

    class _Log(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            log.append((time.perf_counter() - t0, self.ObjectiveValue() / scale, self.BestObjectiveBound() / scale))

    status = solver.Solve(m, _Log())
    elapsed = time.perf_counter() - t0
    if status == cp_model.INFEASIBLE:
        return SolveResult(problem="offload", solver="cpsat", status=INFEASIBLE, budget=budget, scope=scope,
                           solve_time_s=elapsed, log=log, message="proven infeasible for this model")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SolveResult(problem="offload", solver="cpsat", status=TIMEOUT, budget=budget, scope=scope,
                           solve_time_s=elapsed, log=log, message="no solution within the time limit")

    timed: list[tuple[int, int, Op | Transfer]] = [(solver.Value(s[k]), 0, op) for k, op in enumerate(ops)]
    for j, o in offload.items():
        if solver.Value(o):
            timed.append((solver.Value(so[j]), 1, Off("abar", j)))
            timed.append((solver.Value(sp[j]), 2, Pre("abar", j)))
    timed.sort(key=lambda item: (item[0], item[1]))
    schedule = OffloadSchedule([op for _, _, op in timed], L, [t / scale for t, _, _ in timed])
    sim = simulate_offload(inst, schedule)
    exact_ticks = slots == 0 and all(abs(t * scale - round(t * scale)) < 1e-9 for t in durations) and all(
        abs(inst.transfer_time(int(chain.xbar[j])) * scale - T[j]) < 1e-9 for j in T)
    bound = solver.BestObjectiveBound() / scale if exact_ticks else None
    return SolveResult(
        problem="offload", solver="cpsat", status=OPTIMAL if status == cp_model.OPTIMAL else FEASIBLE,
        objective=sim.makespan, peak_memory=sim.peak_memory, lower_bound=bound, schedule=schedule, budget=budget,
        solve_time_s=elapsed, scope=scope, log=log,
        details={"model_makespan": solver.ObjectiveValue() / scale, "transfers": len(schedule.transfers()),
                 "host_peak": sim.host_peak},
    )
