"""Problem 3: offloading activations to host memory, alone and with rematerialization.

The model (ops, streams, what counts when) is documented in `solvers.offload.simulator`;
the instance (a chain file plus a host link) in `solvers.offload.instance`, schedules (chain
operations and transfers Off / Pre) in `solvers.offload.schedule`. Solvers: `baselines`,
`combined` (rotor-offload), the POFO-style DP (`dp`), exact CP-SAT models (`cpsat`,
`exact_combined`, `exact_free`), the exact MILP of cpsat's model (`milp`); H-Revolve (`hrevolve`) is a
separate model (`memsched hrevolve`).
"""

from __future__ import annotations

from typing import Any

from ..problem import Problem, Replay
from .instance import OffloadInstance
from .schedule import OffloadSchedule, Transfer
from .simulator import OffloadSimulation, memory_profile, simulate

__all__ = ["OffloadInstance", "OffloadSchedule", "Transfer", "OffloadSimulation", "simulate",
           "load", "replay", "reference_peak", "schedule_from_json", "memory_profile", "SOLVERS", "DEFAULT_SOLVER",
           "PROBLEM"]

DEFAULT_SOLVER = "offload-prefix"
SOLVERS: dict[str, tuple[str, str]] = {
    "none": (".offload.baselines:solve_none", "store-all, no transfer (reference)"),
    "remat-only": (".offload.baselines:solve_remat_only", "checkpointing only (chain DP), no transfer"),
    "vdnn": (".offload.baselines:solve_vdnn", "vDNN: offload every tape, prefetch one step ahead"),
    "offload-prefix": (".offload.baselines:solve_prefix",
                       "offload the first k tapes, best k and lookahead (after Euro-Par 2020)"),
    "cpsat": (".offload.cpsat:solve_cpsat",
              "exact CP-SAT, offload-only (store-all order): which tapes travel and when, no recomputation"),
    "milp": (".offload.milp:solve_milp",
             "exact MILP (SCIP; --option backend=highs|cbc), the model of cpsat: offload-only (store-all order), "
             "no recomputation; takes memory_gb (SCIP)"),
    "pofo": (".offload.dp:solve_pofo",
             "rotor DP + offloading of checkpoints a_i during the right sub-chain (after POFO)"),
    "exact-combined": (".offload.exact_combined:solve_exact_combined",
                       "exact CP-SAT over phase-form sequences: rematerialization + offloading (small chains, L <= 6)"),
    "offload-exact": (".offload.exact_free:solve_offload_exact",
                      "exact CP-SAT, rematerialization + offloading with a free compute order (phase model, "
                      "values travel for whole compute slots)"),
    "rotor-offload": (".offload.combined:solve_rotor_offload",
                      "checkpointing at a relaxed budget + offloading idle values (after POFO)"),
}


def load(path: str, bandwidth: float | None = None, latency: float | None = None) -> OffloadInstance:
    """A chain file with a ``host_link`` (or with `bandwidth` in bytes/s and `latency` in
    seconds per transfer given here)."""
    return OffloadInstance.load(path, bandwidth, latency)


def replay(inst: OffloadInstance, schedule: OffloadSchedule, budget: int | None = None) -> Replay:
    """The two-stream simulator's makespan (time unit) and peak device memory (bytes)."""
    sim = simulate(inst, schedule, budget)
    return Replay(sim.makespan, sim.peak_memory, None if sim.valid else str(sim.violation))


def reference_peak(inst: OffloadInstance) -> int:
    """The store-all peak of the chain, what "X%" budgets refer to."""
    from ..chain import reference_peak as chain_peak

    return chain_peak(inst.chain)


def schedule_from_json(data: Any, inst: OffloadInstance, *, path: str = "<schedule>") -> OffloadSchedule:
    """An offloading schedule from its JSON (or a `memsched solve --json` output holding one)."""
    return OffloadSchedule.from_json(data, inst.length, path=path)


PROBLEM = Problem(
    name="offload", summary="offloading activations to host memory, with or without rematerialization",
    objective="makespan", load=load, replay=replay, reference_peak=reference_peak, memory_profile=memory_profile,
    schedule_from_json=schedule_from_json, solvers=SOLVERS, default_solver=DEFAULT_SOLVER,
)
