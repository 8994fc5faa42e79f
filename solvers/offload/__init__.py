"""Problem 3: offloading activations to host memory, alone and with rematerialization.

The model (ops, streams, what counts when) is documented in `solvers.offload.simulator`;
the instance (a chain file plus a host link) in `solvers.offload.instance`.
"""

from __future__ import annotations

from ..registry import Replay
from .instance import OffloadInstance
from .schedule import OffloadSchedule, Transfer
from .simulator import OffloadSimulation, simulate_offload

__all__ = ["OffloadInstance", "OffloadSchedule", "Transfer", "OffloadSimulation", "simulate_offload",
           "load", "replay", "reference_peak", "schedule_from_json", "SOLVERS", "DEFAULT_SOLVER"]

DEFAULT_SOLVER = "offload-prefix"
SOLVERS: dict[str, tuple[str, str]] = {
    "none": (".offload.baselines:solve_none", "store-all, no transfer (reference)"),
    "remat-only": (".offload.baselines:solve_remat_only", "checkpointing only (chain DP), no transfer"),
    "vdnn": (".offload.baselines:solve_vdnn", "vDNN: offload every tape, prefetch one step ahead"),
    "offload-prefix": (".offload.baselines:solve_prefix",
                       "offload the first k tapes, best k and lookahead (after Euro-Par 2020)"),
    "cpsat": (".offload.cpsat:solve_cpsat",
              "exact CP-SAT model: which tapes travel and when (store-all compute order)"),
    "pofo": (".offload.dp:solve_pofo",
             "rotor DP + offloading of checkpoints a_i during the right sub-chain (after POFO)"),
    "exact-combined": (".offload.exact_combined:solve_exact_combined",
                       "exact CP-SAT ground truth: rematerialization + offloading (small chains, L <= 4)"),
    "rotor-offload": (".offload.combined:solve_rotor_offload",
                      "checkpointing at a relaxed budget + offloading idle values (after POFO)"),
}


def load(path: str, bandwidth: float | None = None, latency: float | None = None) -> OffloadInstance:
    return OffloadInstance.load(path, bandwidth, latency)


def replay(inst: OffloadInstance, schedule: OffloadSchedule, budget: int | None = None) -> Replay:
    sim = simulate_offload(inst, schedule, budget)
    return Replay(sim.makespan, sim.peak_memory, None if sim.valid else str(sim.violation))


def reference_peak(inst: OffloadInstance) -> int:
    from ..chain import reference_peak as chain_peak

    return chain_peak(inst.chain)


def schedule_from_json(data, inst: OffloadInstance, *, path: str = "<schedule>") -> OffloadSchedule:
    return OffloadSchedule.from_json(data, inst.length, path=path)
