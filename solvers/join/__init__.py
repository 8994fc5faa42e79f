"""Join networks (Siamese, cross-modal): k chains in the rotor model joined at the loss.

Model, file format and simulator: `instance.py`, `simulator.py` and docs/join_format.md.
Solvers: the join DP of Beaumont, Herrmann, Pallez and Shilova (optimal among join-persistent
schedules, `dp.py`), the heuristics it is compared with (`baselines.py`), a CP-SAT phase model
that contains the DP's class (`cpsat.py`) and an exact search over all schedules for tiny
instances (`astar.py`).
"""

from __future__ import annotations

from typing import Any

from ..registry import Replay
from .instance import FORMAT, Join
from .simulator import JoinSchedule, JOp, Simulation, simulate

__all__ = ["FORMAT", "Join", "JOp", "JoinSchedule", "Simulation", "simulate", "load", "replay",
           "reference_peak", "schedule_from_json", "memory_profile", "store_all_schedule", "SOLVERS",
           "DEFAULT_SOLVER"]

DEFAULT_SOLVER = "dp"

SOLVERS: dict[str, tuple[str, str]] = {
    "dp": (".join.dp:solve_join_dp",
           "join DP (Beaumont et al. 2020): optimal among join-persistent schedules (branches back-propagated "
           "one after another)"),
    "equal": (".join.baselines:solve_equal", "each branch alone in an equal share of memory (rotor DP)"),
    "proportional": (".join.baselines:solve_proportional",
                     "each branch alone in a share proportional to its store-all peak (rotor DP)"),
    "sequential": (".join.baselines:solve_sequential",
                   "branches one after the other; all but the first keep only their output"),
    "store-all": (".join:solve_store_all", "no recomputation (largest memory)"),
    "cpsat": (".join.cpsat:solve_cpsat",
              "exact CP-SAT join phase model (branches back-propagated one after another, best order; "
              "non-persistent schedules allowed)"),
    "exact": (".join.astar:solve_exact",
              "exact A* search over all schedules of the join simulator (tiny instances)"),
}


def load(path: str) -> Join:
    return Join.load(path)


def replay(join: Join, schedule: JoinSchedule, budget: int | None = None) -> Replay:
    sim = simulate(join, schedule, budget)
    return Replay(sim.makespan, sim.peak_memory, None if sim.valid else str(sim.violation))


def store_all_schedule(join: Join) -> JoinSchedule:
    """F_all of every stage of every branch, the loss, then each branch's backward in turn."""
    ops = [JOp("F_all", b, i) for b, c in enumerate(join.branches) for i in range(c.length)]
    ops.append(JOp("Loss"))
    ops += [JOp("B", b, i) for b, c in enumerate(join.branches) for i in reversed(range(c.length))]
    return JoinSchedule(ops, join.lengths)


def reference_peak(join: Join) -> int:
    """The store-all peak, what "X%" budgets refer to."""
    return simulate(join, store_all_schedule(join)).peak_memory


def schedule_from_json(data: Any, join: Join, *, path: str = "<schedule>") -> JoinSchedule:
    return JoinSchedule.from_json(data, join.lengths, path=path)


def memory_profile(join: Join, schedule: JoinSchedule) -> list[dict]:
    """Per operation: op, start, end, memory while it runs and after it."""
    sim = simulate(join, schedule)
    return [{"op": str(s.op), "start": s.start, "end": s.end, "mem_during": s.mem_during,
             "mem_after": s.mem_after} for s in sim.steps]


def solve_store_all(join: Join, budget: int, **_: Any):
    """The store-all schedule when it fits (optimal then: no recomputation), else infeasible."""
    import time

    from ..result import INFEASIBLE, OPTIMAL, SolveResult

    t0 = time.perf_counter()
    schedule = store_all_schedule(join)
    sim = simulate(join, schedule)
    fits = sim.peak_memory <= int(budget)
    return SolveResult(problem="join", solver="store-all", status=OPTIMAL if fits else INFEASIBLE,
                       objective=sim.makespan if fits else None, peak_memory=sim.peak_memory if fits else None,
                       schedule=schedule if fits else None, min_budget=sim.peak_memory, budget=int(budget),
                       lower_bound=join.total_time(), solve_time_s=time.perf_counter() - t0,
                       scope="store-all (optimal among all schedules when it fits: no recomputation)",
                       message="" if fits else f"store-all needs {sim.peak_memory} > budget {budget}")
