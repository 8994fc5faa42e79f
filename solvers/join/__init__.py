"""Join networks (Siamese, cross-modal): k chains in the rotor model joined at the loss.

Model, file format and simulator: `instance.py`, `schedule.py`, `simulator.py` and
docs/join.md. Solvers: the join DP of Beaumont, Herrmann, Pallez and Shilova (optimal
among join-persistent schedules, `dp.py`), the heuristics it is compared with and store-all
(`baselines.py`), a phase model that contains the DP's class, solved by CP-SAT (`cpsat.py`) and by
the MILP backends (`milp.py`, the same rows as a `LinearModel`), and an exact A* search over all
schedules for tiny instances (`astar.py`).
"""

from __future__ import annotations

from typing import Any

from ..problem import Problem, Replay
from .instance import FORMAT, Join
from .schedule import JoinSchedule, JOp, store_all_schedule
from .simulator import Simulation, memory_profile, simulate

__all__ = ["FORMAT", "Join", "JOp", "JoinSchedule", "Simulation", "simulate", "load", "replay",
           "reference_peak", "schedule_from_json", "memory_profile", "store_all_schedule", "SOLVERS",
           "DEFAULT_SOLVER", "PROBLEM"]

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
    "store-all": (".join.baselines:solve_store_all", "no recomputation (largest memory)"),
    "cpsat": (".join.cpsat:solve_cpsat",
              "exact CP-SAT join phase model (branches back-propagated one after another, best order; "
              "non-persistent schedules allowed)"),
    "milp": (".join.milp:solve_milp",
             "exact MILP of the join phase model (the cpsat model's rows; SCIP by default, --option backend=); "
             "takes memory_gb (SCIP, portfolio)"),
    "exact": (".join.astar:solve_exact",
              "exact A* search over all schedules of the join simulator (tiny instances)"),
}


def load(path: str) -> Join:
    """The join file (``memsched.join/1``) at `path`."""
    return Join.load(path)


def replay(join: Join, schedule: JoinSchedule, budget: int | None = None) -> Replay:
    """The simulator's makespan (time unit) and peak memory (bytes) of `schedule`."""
    sim = simulate(join, schedule, budget)
    return Replay(sim.makespan, sim.peak_memory, None if sim.valid else str(sim.violation))


def reference_peak(join: Join) -> int:
    """The store-all peak, what "X%" budgets refer to."""
    return simulate(join, store_all_schedule(join)).peak_memory


def schedule_from_json(data: Any, join: Join, *, path: str = "<schedule>") -> JoinSchedule:
    """A join schedule from its JSON (or a `memsched solve --json` output holding one)."""
    return JoinSchedule.from_json(data, join.lengths, path=path)


PROBLEM = Problem(
    name="join", summary="rematerialization on join networks (k chains joined at the loss)", objective="makespan",
    load=load, replay=replay, reference_peak=reference_peak, memory_profile=memory_profile,
    schedule_from_json=schedule_from_json, solvers=SOLVERS, default_solver=DEFAULT_SOLVER,
)
