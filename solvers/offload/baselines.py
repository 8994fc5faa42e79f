"""Offloading strategies without recomputation, and the no-offload references.

- ``none``: store-all, nothing moves (the reference).
- ``remat-only``: checkpointing without transfers (the chain's rotor DP when available,
  else the best periodic schedule).
- ``vdnn``: offload every tape as soon as it is produced, except the last stage's, and
  prefetch each one backward step ahead (Rhu et al., vDNN, 2016).
- ``offload-prefix``: offload the tapes of the first k stages (those needed last, which
  have the most time to come back), prefetch with a lookahead of d backward steps; the best
  (k, d) whose peak fits. In the spirit of Beaumont, Eyraud-Dubois and Shilova (Euro-Par
  2020); a heuristic, it claims no optimality.
"""

from __future__ import annotations

import numbers
import time
from typing import Any

from ..chain.baselines import store_all_schedule
from ..chain.schedule import Bwd, F_all, Loss, Op
from ..errors import InputError, option_field
from ..registry import solve as solve_chain_problem
from ..result import FEASIBLE, INFEASIBLE, SolveResult
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import simulate


def offload_schedule(L: int, offloaded: set[int], lookahead: int = 1, input_too: bool = False) -> OffloadSchedule:
    """Store-all order with the tapes abar_{i+1} of the stages i in `offloaded` moved to the
    host once issued F_all(i+1) has read a_{i+1} from it, and brought back `lookahead`
    backward steps before they are needed. The last stage's tape is never offloaded: the loss
    and B(L-1) use it at once. `input_too`: the input a_0 travels as well (after F_all(0),
    back for B(0)), as in POFO's offloaded inputs.

    Backward step s is the loss for s = L, else B(s); it needs abar_{s+1} (its tape) and a_s,
    which lives in abar_s when stage s-1 kept a tape.
    """
    if L - 1 in offloaded:
        raise ValueError("the last stage's tape cannot be offloaded")
    ops: list[Op | Transfer] = []
    for i in range(L):
        ops.append(F_all(i))
        if i == 0 and input_too:
            ops.append(Off("a", 0))
        if i - 1 in offloaded:
            ops.append(Off("abar", i))

    def needs(s: int) -> list[tuple[str, int]]:  # the travelling values step s needs
        if s == L:
            return []  # the loss reads a_L before abar_L is ever sent away
        tapes = [s + 1, s] if s >= 1 else [s + 1]
        out = [("abar", j) for j in tapes if (j - 1) in offloaded]
        return out + ([("a", 0)] if s == 0 and input_too else [])

    pending: list[tuple[int, tuple[str, int]]] = []  # (step that first needs it, value)
    seen: set[tuple[str, int]] = set()
    for s in range(L, -1, -1):
        for v in needs(s):
            if v not in seen:
                seen.add(v)
                pending.append((s, v))
    for s in range(L, -1, -1):
        while pending and pending[0][0] >= s - lookahead + 1:
            ops.append(Pre(*pending.pop(0)[1]))
        ops.append(Loss(L) if s == L else Bwd(s))
    return OffloadSchedule(ops, L)


def _answer(name: str, inst: OffloadInstance, schedule: OffloadSchedule, budget: int, t0: float,
            scope: str, *, min_budget: int | None = None, **details: Any) -> SolveResult:
    """The answer of a heuristic that chose `schedule`: ``feasible`` when its replay fits `budget`, else
    ``infeasible``. `min_budget` (bytes): the smallest budget the solver can meet, when it tried several
    schedules; None: `schedule`'s own peak (a solver with one schedule)."""
    sim = simulate(inst, schedule)
    if sim.violation is not None:
        raise RuntimeError(f"{name} built an invalid schedule: {sim.violation}")
    fits = sim.peak_memory <= budget
    return SolveResult(
        problem="offload", solver=name, status=FEASIBLE if fits else INFEASIBLE,
        objective=sim.makespan if fits else None, peak_memory=sim.peak_memory if fits else None,
        schedule=schedule if fits else None, min_budget=sim.peak_memory if min_budget is None else min_budget,
        budget=budget,
        solve_time_s=time.perf_counter() - t0, scope=scope,
        message="" if fits else f"{name} needs {sim.peak_memory} > budget {budget}",
        details={"host_peak": sim.host_peak, "transfers": len(schedule.transfers()), **details},
    )


def solve_none(inst: OffloadInstance, budget: int, **_: Any) -> SolveResult:
    """Store-all without any transfer (the reference): fits only when the store-all peak does."""
    t0 = time.perf_counter()
    schedule = OffloadSchedule.from_chain(store_all_schedule(inst.length))
    return _answer("none", inst, schedule, budget, t0, "store-all, no transfer (reference)")


def _at_least_one(value: Any, option: str) -> int:
    """A lookahead option: an integer >= 1 (1: each prefetch is issued just before the backward step
    that needs it; 0 would issue it after that step); else `InputError` on ``--option <option>``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"must be an integer >= 1 (backward steps ahead), got {value!r}", field=option_field(option))
    return int(value)


def solve_vdnn(inst: OffloadInstance, budget: int, *, lookahead: int = 1, **_: Any) -> SolveResult:
    """vDNN: offload every tape but the last after its forward, prefetch it `lookahead` backward
    steps ahead (an integer >= 1; 1: issued just before the step that needs it; `InputError` else)."""
    lookahead = _at_least_one(lookahead, "lookahead")
    t0 = time.perf_counter()
    L = inst.length
    schedule = offload_schedule(L, set(range(L - 1)), lookahead)
    return _answer("vdnn", inst, schedule, budget, t0, "vDNN: offload all tapes but the last (heuristic)",
                   lookahead=lookahead)


def solve_prefix(inst: OffloadInstance, budget: int, *, max_lookahead: int = 3, **_: Any) -> SolveResult:
    """Offload the first k tapes (best k in 0..L-1 and lookahead in 1..`max_lookahead`) that fits `budget` with the
    smallest makespan. `max_lookahead`: an integer >= 1 (else `InputError`); a value above L + 1 is
    silently taken as L + 1, as every lookahead from L + 1 on gives the same schedule (all prefetches
    before the loss) and each one tried costs 2L simulations."""
    max_lookahead = _at_least_one(max_lookahead, "max_lookahead")
    t0 = time.perf_counter()
    L = inst.length
    best: tuple[float, int, int, OffloadSchedule, bool] | None = None
    smallest = None
    for first in (False, True):
        for k in range(0, L):
            for d in range(1, min(max_lookahead, L + 1) + 1):
                schedule = offload_schedule(L, set(range(k)), d, input_too=first)
                sim = simulate(inst, schedule)
                smallest = sim.peak_memory if smallest is None else min(smallest, sim.peak_memory)
                if sim.peak_memory <= budget and (best is None or sim.makespan < best[0] - 1e-12):
                    best = (sim.makespan, k, d, schedule, first)
    scope = ("offload the first k tapes (and maybe the input a_0), best k and lookahead "
             "(heuristic, no optimality claim)")
    if best is None:
        return SolveResult(problem="offload", solver="offload-prefix", status=INFEASIBLE, budget=budget,
                           min_budget=smallest, solve_time_s=time.perf_counter() - t0, scope=scope,
                           message=f"no prefix fits; the smallest peak is {smallest}")
    return _answer("offload-prefix", inst, best[3], budget, t0, scope, min_budget=smallest, offloaded_stages=best[1],
                   lookahead=best[2], input_offloaded=best[4])


def solve_remat_only(inst: OffloadInstance, budget: int, *, slots: int = 500, **options: Any) -> SolveResult:
    """The chain problem's best checkpointing schedule, no transfers."""
    from ..registry import solver_table

    names = {n for _, n, _ in solver_table("chain")}
    solver = "rotor" if "rotor" in names else "periodic"
    t0 = time.perf_counter()
    inner = solve_chain_problem("chain", inst.chain, solver, budget, slots=slots, **options)
    schedule = OffloadSchedule.from_chain(inner.schedule) if inner.schedule is not None else None
    return SolveResult(problem="offload", solver="remat-only", status=inner.status, objective=inner.objective,
                       peak_memory=inner.peak_memory, schedule=schedule, min_budget=inner.min_budget, budget=budget,
                       solve_time_s=time.perf_counter() - t0, scope=f"checkpointing only ({solver}: {inner.scope})",
                       message=inner.message)
