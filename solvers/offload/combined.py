"""Rematerialization combined with offloading: checkpoint schedules whose idle values travel.

A checkpointing schedule (the rotor DP's, or the best periodic one) at a budget M' above the
real budget M keeps values that sit idle for long: a checkpoint a_i waits on the device while
the sub-chain to its right is processed, a tape abar_{i+1} waits while the rest of the chain
runs. Here every such value is offloaded after a read when the compute time until its next read
is at least twice its transfer time, and prefetched early enough for that read (the compute
ops just before it cover its transfer). The transfers lower the peak below M'; we try a grid of
M' between M and the store-all peak and keep the fastest schedule that fits M, judged by the
two-stream simulator. It follows the idea of Beaumont, Eyraud-Dubois and Shilova (NeurIPS 2021,
POFO: checkpoints that are not needed soon go to the host) but is a heuristic: it claims no
optimality, and its makespan and peak are the simulator's.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..chain import reference_peak as store_all_peak
from ..chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Op
from ..chain.schedule import Schedule as ChainSchedule
from ..chain.simulator import op_cost
from ..errors import option_field
from ..registry import solve as registry_solve
from ..registry import solver_table
from ..result import FEASIBLE, INFEASIBLE, TIMEOUT, SolveResult
from ..units import check_int, memory_unit, size_unit_name
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import simulate

Value = tuple[str, int]


def _reads(schedule: ChainSchedule) -> list[tuple[Value, list[int]]]:
    """Every lifetime of every value (from its creation to the op that frees it) with the
    positions of the ops that read it. a_i is read from its standalone copy when there is one,
    else from the tape abar_i (the chain simulator's rule)."""
    L = schedule.length
    acts, tapes = {0}, set()
    live: dict[Value, list[int]] = {("a", 0): []}
    done: list[tuple[Value, list[int]]] = []

    def free(v: Value) -> None:
        done.append((v, live.pop(v)))

    for pos, (kind, i) in enumerate(schedule.ops):
        i = L if kind == LOSS else i
        live[("a", i) if i in acts else ("abar", i)].append(pos)
        if kind == B:
            live[("abar", i + 1)].append(pos)
        if kind == F_ALL:
            tapes.add(i + 1)
            live[("abar", i + 1)] = []
        elif kind in (F_CK, F_N):
            acts.add(i + 1)
            live[("a", i + 1)] = []
            if kind == F_N and i in acts:
                acts.discard(i)
                free(("a", i))
        elif kind == B:
            tapes.discard(i + 1)
            free(("abar", i + 1))
            if i in acts:
                acts.discard(i)
                free(("a", i))
        elif kind == LOSS and L in acts:
            acts.discard(L)
            free(("a", L))
    return done + list(live.items())


def add_transfers(inst: OffloadInstance, schedule: ChainSchedule, *, min_ratio: float = 2.0) -> OffloadSchedule:
    """Insert Off/Pre pairs around the long idle gaps of `schedule` (see the module docstring)."""
    chain = inst.chain
    ops = schedule.ops
    L = schedule.length
    durations = np.array([op_cost(chain, k, i)[2] for k, i in ops])  # per-mode forward times
    finish = np.cumsum(durations)
    before: dict[int, list[Transfer]] = {}
    after: dict[int, list[Transfer]] = {}
    for (kind, j), positions in _reads(schedule):
        size = int(chain.xbar[j] if kind == "abar" else chain.x[j])
        if size == 0:
            continue
        transfer = inst.transfer_time(size)
        for r0, r1 in zip(positions, positions[1:]):
            gap = finish[r1 - 1] - finish[r0]  # compute time strictly between the two reads
            if r1 - r0 < 2 or gap < min_ratio * transfer:
                continue
            p = r1  # issue the prefetch before op p so that ops p..r1-1 cover the transfer
            covered = 0.0
            while p > r0 + 1 and covered < transfer:
                p -= 1
                covered += durations[p]
            after.setdefault(r0, []).append(Off(kind, j))
            before.setdefault(p, []).append(Pre(kind, j))
    out: list[Op | Transfer] = []
    for pos, op in enumerate(ops):
        out.extend(before.get(pos, []))
        out.append(op)
        out.extend(after.get(pos, []))
    return OffloadSchedule(out, L)


#: the most relaxed budgets (``grid``): one rotor DP and two simulations each, about 0.05 s on the
#: 101-stage LSTM bench chain, so that 500 take about 30 s (`--time-limit` cuts the grid short)
MAX_GRID = 500


def solve_rotor_offload(inst: OffloadInstance, budget: int, *, slots: int = 500, grid: int = 12,
                        min_ratio: float = 2.0, time_limit: float | None = None, **_: Any) -> SolveResult:
    """Best (over a grid of `grid` relaxed budgets M', an integer in 1..`MAX_GRID`, else `InputError`) checkpoint
    schedule with transfers that fits.

    With `time_limit` (seconds, wall clock) the first relaxed budget is always tried, each later one
    only while the time spent plus the longest one so far fits the limit (as `pofo`'s optional
    stages); ``details["grid_tried"]`` then counts those tried, and when none of them fits the status
    is ``timeout`` (saying so), not ``infeasible``.

    When none fits, the answer is ``infeasible`` with ``min_budget`` None: the grid
    ``linspace(budget, top, grid)`` moves with the budget, so the smallest peak among the schedules
    tried (``details["smallest_peak"]``, in the instance's memory unit as `budget`; the message names that
    unit) is not the smallest budget this heuristic meets (a smaller
    one can work, with other relaxed budgets), and success is not even monotone in the budget
    (`random_offload(4, 22, transfer_ratio=0.3, integer_times=True)` at 20 slots meets 45 and 46
    but not 47): no cheap search finds the smallest. `memsched solve` looks for it by running the
    solver again (docs/cli.md, *Infeasible*)."""
    # 0 relaxed budgets would make a false "infeasible"; each costs a rotor DP (`MAX_GRID`)
    grid = check_int(grid, option_field("grid"), low=1, high=MAX_GRID)
    t0 = time.perf_counter()
    names = {n for _, n, _ in solver_table("chain")}
    base = "rotor" if "rotor" in names else "periodic"
    top = max(store_all_peak(inst.chain), budget)
    best: tuple[float, OffloadSchedule, int] | None = None
    smallest = None
    relaxed_budgets = np.unique(np.linspace(budget, top, grid).astype(np.int64))
    tried, longest = 0, 0.0
    for relaxed in relaxed_budgets:
        if tried and time_limit is not None and time.perf_counter() - t0 + longest > time_limit:
            break
        t_point = time.perf_counter()
        inner = registry_solve("chain", inst.chain, base, int(relaxed), slots=slots)
        tried += 1
        if inner.schedule is not None:
            for candidate in (OffloadSchedule.from_chain(inner.schedule),
                              add_transfers(inst, inner.schedule, min_ratio=min_ratio)):
                sim = simulate(inst, candidate)
                if not sim.valid:
                    raise RuntimeError(f"rotor-offload built an invalid schedule: {sim.violation}")
                smallest = sim.peak_memory if smallest is None else min(smallest, sim.peak_memory)
                if sim.peak_memory <= budget and (best is None or sim.makespan < best[0] - 1e-12):
                    best = (sim.makespan, candidate, int(relaxed))
        longest = max(longest, time.perf_counter() - t_point)
    cut = "" if tried == len(relaxed_budgets) else (f"time limit of {time_limit:g} s reached after {tried} of "
                                                     f"{len(relaxed_budgets)} relaxed budgets")
    limited = {"grid_tried": tried} if cut else {}
    scope = f"{base} schedules at relaxed budgets + offloading of idle values (heuristic, no optimality claim)"
    if best is None:
        # sizes, peaks and budgets are in the instance's memory unit (``meta.units.memory``), as min_budget
        seen = "" if smallest is None else (f"; the schedules tried peak at {smallest} "
                                            f"{size_unit_name(memory_unit(inst))} or more (not the smallest budget "
                                            "this heuristic meets: its relaxed budgets move with the budget)")
        message = (f"{cut}; none of the relaxed checkpoint schedules tried fits, even with transfers" if cut
                   else f"no relaxed checkpoint schedule fits, even with transfers{seen}")
        return SolveResult(problem="offload", solver="rotor-offload", status=TIMEOUT if cut else INFEASIBLE,
                           budget=budget, min_budget=None, solve_time_s=time.perf_counter() - t0, scope=scope,
                           message=message, details={"smallest_peak": smallest, "base_solver": base, **limited})
    sim = simulate(inst, best[1])
    return SolveResult(problem="offload", solver="rotor-offload", status=FEASIBLE, objective=sim.makespan,
                       peak_memory=sim.peak_memory, schedule=best[1], budget=budget,
                       solve_time_s=time.perf_counter() - t0, scope=scope, message=cut,
                       details={"relaxed_budget": best[2], "transfers": len(best[1].transfers()),
                                "host_peak": sim.host_peak, "base_solver": base, **limited})
