"""Problem 1: rematerialization on a heterogeneous chain (the rotor model, docs/CONVENTIONS.md "Chain notation")."""

from __future__ import annotations

from typing import Any

from ..problem import Problem, Replay
from .instance import FORMAT, Chain
from .schedule import Op, Schedule
from .simulator import Simulation, Violation, memory_profile, simulate

__all__ = ["FORMAT", "Chain", "Op", "Schedule", "Simulation", "Violation", "simulate",
           "load", "replay", "reference_peak", "schedule_from_json", "memory_profile", "SOLVERS",
           "DEFAULT_SOLVER", "PROBLEM"]

DEFAULT_SOLVER = "rotor"

SOLVERS: dict[str, tuple[str, str]] = {
    "store-all": (".chain.baselines:solve_store_all", "no recomputation (largest memory)"),
    "recompute-all": (".chain.baselines:solve_recompute_all", "keep only the input, recompute everything"),
    "periodic": (".chain.baselines:solve_periodic",
                 "checkpoint_sequential segments; best count under the budget, or --option segments=K"),
    "sqrt": (".chain.baselines:solve_chen", "Chen et al.: about sqrt(L) segments"),
    "revolve": (".chain.revolve:solve_revolve",
                "Griewank & Walther binomial checkpointing (homogeneous chains)"),
    "rotor": (".chain.dp:solve_rotor",
              "persistent dynamic program of Beaumont et al. (optimal among persistent schedules)"),
    "milp": (".chain.milp:solve_milp",
             "exact MILP, not restricted to persistent schedules; takes memory_gb (SCIP, portfolio)"),
    "cpsat": (".chain.cpsat:solve_cpsat", "exact CP-SAT model, not restricted to persistent schedules"),
}


def load(path: str) -> Chain:
    """The chain file (``memsched.chain/1``) at `path`."""
    return Chain.load(path)


def replay(chain: Chain, schedule: Schedule, budget: int | None = None) -> Replay:
    """The simulator's makespan (time unit) and peak memory (bytes) of `schedule`."""
    sim = simulate(chain, schedule, budget)
    return Replay(sim.makespan, sim.peak_memory, None if sim.valid else str(sim.violation))


def reference_peak(chain: Chain) -> int:
    """The store-all peak, what "X%" budgets refer to."""
    from .baselines import store_all_schedule

    return simulate(chain, store_all_schedule(chain.length)).peak_memory


def schedule_from_json(data: Any, chain: Chain, *, path: str = "<schedule>") -> Schedule:
    """A chain schedule from its JSON (or a `memsched solve --json` output holding one)."""
    return Schedule.from_json(data, chain.length, path=path)


PROBLEM = Problem(
    name="chain", summary="rematerialization on a heterogeneous chain (rotor model)", objective="makespan",
    load=load, replay=replay, reference_peak=reference_peak, memory_profile=memory_profile,
    schedule_from_json=schedule_from_json, solvers=SOLVERS, default_solver=DEFAULT_SOLVER,
)
