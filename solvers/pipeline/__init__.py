"""Problem 4: pipelined model parallelism (memory-aware partitioning of a chain on P devices).

The instance is `Pipeline` (instance.py, loaded from a chain file or a PipeDream graph.txt),
a schedule is a `Partition` (schedule.py); simulator.py defines the period and memory model.
Solvers take ``fn(instance, budget, *, devices=P, schedule="1f1b", micro_batches=None,
time_limit=None, **options)`` where ``budget`` is the memory per device in bytes (None: no memory
limit, taken by every solver, the exact ones included: `registry.NO_LIMIT_PROBLEMS`), and return a
`SolveResult` whose objective is the period in the instance's time unit (ms for PipeDream
profiles and chain files by default).
"""

from __future__ import annotations

from typing import Any

from ..chain.schedule import fields_under
from ..errors import InputError
from ..jsonio import check_holds_schedule
from ..problem import Problem, Replay
from .instance import DEFAULT_WEIGHT_FACTOR, Pipeline, from_chain, from_graph_txt
from .schedule import SCHEDULES, Partition, Stage
from .simulator import Evaluation, memory_profile, simulate, simulate_batch

__all__ = ["Pipeline", "Partition", "Stage", "SCHEDULES", "DEFAULT_WEIGHT_FACTOR", "Evaluation", "simulate",
           "simulate_batch", "from_chain", "from_graph_txt", "load", "replay", "reference_peak", "schedule_from_json",
           "memory_profile", "SOLVERS", "DEFAULT_SOLVER", "PROBLEM"]

DEFAULT_SOLVER = "madpipe"

SOLVERS: dict[str, tuple[str, str]] = {
    "madpipe": (".pipeline.dp:solve_madpipe",
                "memory-aware DP (1F1B/GPipe in-flight counts), optimal among contiguous partitions"),
    "pipedream": (".pipeline.dp:solve_pipedream",
                  "PipeDream's DP (period only; --option replication=true), then checked against the memory"),
    "balance-time": (".pipeline.baselines:solve_balance_time",
                     "torchgpipe balance_by_time: P stages of balanced time, memory ignored"),
    "cpsat": (".pipeline.cpsat:solve_cpsat", "exact CP-SAT model of contiguous memory-limited partitioning"),
    "milp": (".pipeline.milp:solve_milp", "exact MILP (SCIP; --option backend=highs|cbc) of contiguous partitioning"),
    "dag": (".pipeline.dag_dp:solve_dag",
            "memory-aware DP over antichain splits of the layer DAG (stages may end inside a block)"),
    "dag-pipedream": (".pipeline.dag_dp:solve_dag_pipedream",
                      "PipeDream's planner (antichain DP, period only), then checked against the memory"),
    "dag-cpsat": (".pipeline.dag_cpsat:solve_dag_cpsat", "exact CP-SAT model of memory-limited DAG partitioning"),
    "dag-milp": (".pipeline.milp:solve_dag_milp", "exact MILP (SCIP; --option backend=highs|cbc) of DAG partitioning"),
    "interleave": (".pipeline.interleave:solve_interleave",
                   "MadPipe-style interleaved allocation (several stages per device), heuristic"),
    "interleave-v": (".pipeline.interleave:solve_interleave_v",
                     "DP over V-shaped allocations (device k: stages k and 2P-1-k) and straight pipelines"),
    "interleave-dp": (".pipeline.interleave_dp:solve_interleave_dp",
                      "MadPipe-style DP over interleaved allocations (any device map), exact up to a state cap"),
    "interleave-cpsat": (".pipeline.interleave:solve_interleave_cpsat",
                         "exact CP-SAT model of interleaved (non-contiguous) allocation"),
}


def load(path: str) -> Pipeline:
    """A chain file (memsched.chain/1) or a PipeDream graph.txt profile."""
    from .instance import load as _load

    return _load(path)


def replay(inst: Pipeline, partition: Partition, budget: int | None = None) -> Replay:
    """The simulator's period (time unit) and peak memory per device (bytes) for `partition`."""
    ev = simulate(inst, partition, budget)
    return Replay(ev.period, ev.peak_memory, ev.violation)


def schedule_from_json(data: Any, inst: Pipeline, *, path: str = "<partition>") -> Partition:
    """A partition from its JSON (`Partition.to_json`, or a `memsched partition --json` output).

    A result object without a schedule (``schedule: null``: an infeasible or timed-out solve or
    partition, whose ``stages`` list is empty or absent) is an `InputError` naming ``schedule`` that
    says so, as the other problems' `schedule_from_json` and ``memsched simulate`` say it. An error
    in the partition such an output holds names ``schedule.FIELD`` (``schedule.stages[1].replicas``)."""
    check_holds_schedule(data, path, "stages")
    prefix = ""
    if isinstance(data, dict) and isinstance(data.get("schedule"), dict):
        data, prefix = data["schedule"], "schedule."
    with fields_under(prefix):
        part = Partition.from_json(data, path=path)
        if part.stages[-1].last >= inst.length:
            raise InputError(f"the partition reaches layer {part.stages[-1].last}, the instance has {inst.length}",
                             path=path, field="stages")
    return part


def reference_peak(inst: Pipeline) -> int:
    """Memory of the whole chain on one device (one stage, one micro-batch in flight): what
    "X%" memory limits refer to."""
    part = Partition.from_bounds([(0, inst.length - 1)])
    return simulate(inst, part).peak_memory


PROBLEM = Problem(
    name="pipeline", summary="pipelined model parallelism: memory-aware partitioning on P devices",
    objective="period", load=load, replay=replay, reference_peak=reference_peak, memory_profile=memory_profile,
    schedule_from_json=schedule_from_json, solvers=SOLVERS, default_solver=DEFAULT_SOLVER,
)
