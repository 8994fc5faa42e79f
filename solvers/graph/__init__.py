"""Problem 2: rematerialization on a general graph (the Checkmate / Moccasin model).

Budgets are absolute, in ``cost_ram`` units; "X%" budgets refer to `reference_peak` (the peak
of computing each node once in the file's order). See `instance` (the graph file), `schedule`
(a sequence of node computations), `simulator` (the referee), `milp` and `cpsat` (exact
models), `baselines` and `lp_bounds`.
"""

from __future__ import annotations

from typing import Any

from ..problem import Problem, Replay
from .instance import Graph
from .schedule import SCHEDULE_FORMAT, GraphSchedule
from .simulator import GraphSimulation, memory_profile, simulate

__all__ = ["Graph", "GraphSchedule", "GraphSimulation", "SCHEDULE_FORMAT", "simulate", "schedule_from_json",
           "memory_profile", "load", "load_schedule", "replay", "reference_peak", "SOLVERS", "DEFAULT_SOLVER",
           "PROBLEM"]

DEFAULT_SOLVER = "checkmate"

SOLVERS: dict[str, tuple[str, str]] = {
    "checkmate": (".graph.milp:solve_checkmate",
                  "Checkmate MILP (Jain et al. 2020), optimal among frontier-advancing schedules in file order; "
                  "takes memory_gb"),
    "cpsat": (".graph.cpsat:solve_cpsat",
              "CP-SAT interval model after Moccasin (Bartan et al. 2023), at most C computations per node"),
    "checkmate-approx": (".graph.lp_bounds:solve_checkmate_approx",
                         "Checkmate LP relaxation + rounding of S + feasibility repair (no proof); takes memory_gb"),
    "checkpoint-all": (".graph.baselines:solve_checkpoint_all", "each node once, in the file's order"),
    "dtr": (".graph.baselines:solve_dtr",
            "greedy evict-and-recompute in the file's order (DTR-like heuristic)"),
    "dtr-orders": (".graph.orders:solve_dtr_orders",
                   "memory-aware topological orders (greedy + local search), DTR-like recomputation, pruned"),
    "sqrt": (".graph.baselines:solve_sqrt",
             "Chen et al.: ~sqrt(n) checkpoints on the forward articulation points"),
    "greedy": (".graph.baselines:solve_greedy",
               "Chen et al.'s greedy segmenting of the forward articulation points"),
    "griewank": (".graph.baselines:solve_griewank",
                 "binomial (Revolve-like) checkpointing of the forward spine of a training graph that is a chain"),
}


def load(path: str) -> Graph:
    """The graph in the node-link JSON file at `path`."""
    return Graph.load(path)


def load_schedule(path: str) -> GraphSchedule:
    """The graph schedule in the JSON file at `path`."""
    return GraphSchedule.load(path)


def schedule_from_json(data: Any, graph: Graph, *, path: str = "<schedule>") -> GraphSchedule:
    """A graph schedule from its JSON (or a `memsched solve --json` output holding one), every step
    naming a node of `graph` (`GraphSchedule.read`)."""
    return GraphSchedule.read(data, graph, path=path)


def replay(graph: Graph, schedule: GraphSchedule | list[int], budget: int | None = None) -> Replay:
    """The simulator's makespan (sum of ``cost_cpu``) and peak memory of `schedule`."""
    sim = simulate(graph, schedule, budget)
    return Replay(sim.makespan, sim.peak_memory, sim.violation)


def reference_peak(graph: Graph) -> int:
    """Peak memory of computing each node once in the file's order (what "X%" budgets mean)."""
    return simulate(graph, list(range(graph.n))).peak_memory


PROBLEM = Problem(
    name="graph", summary="rematerialization on a general graph (Checkmate / Moccasin model)", objective="makespan",
    load=load, replay=replay, reference_peak=reference_peak, memory_profile=memory_profile,
    schedule_from_json=schedule_from_json, solvers=SOLVERS, default_solver=DEFAULT_SOLVER,
)
