"""`memsched.run`: solve, then execute the schedule for real (PyTorch), as ``memsched run`` does.

The work is `memsched.models.run.run`, the end-to-end run behind the ``run`` command: build
the zoo network, take its costs (profile it, or a given chain / join / graph instance), solve
under the budget through the solver registry (the simulator's replay is the prediction),
execute the schedule and the store-all schedule, and compare measured time and peak memory
with the prediction and the gradients with plain autograd. This module only maps the
facade's keyword arguments onto it, so the facade and the command line never disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError

#: Keyword sizes of the zoo networks (`models.zoo.build_model`).
SIZE_KEYS = ("batch", "image_size", "seq_len", "width", "depth", "vocab", "classes", "dropout", "device", "seed",
             "dtype")
#: Join networks of the zoo (run as the join problem).
JOIN_NAMES = ("siamese", "triplet", "clip")


def run_model(model: str, budget: int | float | str, solver: str | None = None, *, problem: str | None = None,
              instance: Any = None, bandwidth: str | float | None = None, latency: float = 0.0, slots: int = 500,
              time_limit: float | None = None, time_repeats: int = 3, repeats: int = 3, seed: int = 0,
              timing: str | None = None, options: dict[str, Any] | None = None, **sizes: Any) -> dict[str, Any]:
    """The ``memsched run MODEL --json`` object for these arguments (see `memsched.api.run`).

    `problem` defaults to "join" for siamese / triplet / clip, "offload" when a bandwidth is
    given, the problem of `instance` when one is given, else "chain". An infeasible budget
    gives status "infeasible" with ``message`` and ``min_budget``; bad input raises
    `InputError`."""
    from memsched.models.run import run

    unknown = sorted(set(sizes) - set(SIZE_KEYS))
    if unknown:
        raise InputError(f"unknown option {unknown[0]!r} (sizes: {', '.join(SIZE_KEYS)})", field=unknown[0])
    if isinstance(instance, Path):
        instance = str(instance)
    if problem is None:
        if str(model) in JOIN_NAMES:
            problem = "join"
        elif bandwidth is not None:
            problem = "offload"
        elif instance is not None and not isinstance(instance, str):
            from .api import problem_of

            problem = problem_of(instance)
            if problem == "offload":
                bandwidth, latency, instance = instance.bandwidth, instance.latency, instance.chain
        else:
            problem = "chain"
    if bandwidth is not None:
        from memsched.solvers.units import parse_bandwidth

        bandwidth = parse_bandwidth(bandwidth, field="bandwidth")
    if isinstance(budget, float) and budget.is_integer():
        budget = int(budget)
    return run(model, budget, problem=problem, solver=solver, instance=instance, sizes=dict(sizes, seed=seed),
               slots=slots, time_limit=time_limit, options=options, seed=seed, time_repeats=time_repeats,
               profile_repeats=repeats, timing=timing, bandwidth=bandwidth, latency=latency)


__all__ = ["run_model", "SIZE_KEYS", "JOIN_NAMES"]
