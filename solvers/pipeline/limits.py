"""How large a pipeline the pipeline DPs solve in minutes: the work limit that ``memsched partition``
(`experiments.commands._checks.check_work`), the sweeps and the pipeline runner
(`models.pipeline.runner`) all apply, kept here, below both, so that models/ needs nothing of experiments/.

The DPs (`pipeline.dp`, `pipeline.dag_dp`) take about layers^2 x min(devices, layers) steps on a
straight pipeline (a stage per device at most, and never more devices than layers:
`pipeline.dp.useful_devices`), and layers^2 x devices^2 with replication (every replica count
r <= d for every d <= devices). Pure arithmetic: imports nothing of numpy, ortools or torch.
"""

from __future__ import annotations

import math

#: the most steps (L^2 x devices; L^2 x devices^2 with replication, where a stage may take any
#: number of replicas) of the pipeline DPs (about 1e-5 s each: 100 s)
MAX_DP_STEPS = 10**7


def dp_steps(layers: int, devices: int, *, replication: bool = False) -> int:
    """The pipeline DPs' steps on `layers` layers and `devices` devices (at least 1):
    layers^2 x min(devices, layers), or layers^2 x devices^2 with `replication`."""
    L, P = int(layers), max(int(devices), 1)
    return L * L * P * P if replication else L * L * min(P, L)


def layer_limit(devices: int, *, replication: bool = False) -> int:
    """The most layers L whose DPs on `devices` devices (at least 1) take at most `MAX_DP_STEPS`
    steps (`dp_steps`): isqrt(MAX_DP_STEPS / devices^2) with `replication`, else found by bisection
    (the steps grow with L). 0 when not even one layer fits."""
    P = max(int(devices), 1)
    if replication:
        return math.isqrt(MAX_DP_STEPS // (P * P))
    low, high = 0, math.isqrt(MAX_DP_STEPS) + 1  # dp_steps(high) >= high^2 > MAX_DP_STEPS
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if dp_steps(mid, P) <= MAX_DP_STEPS else (low, mid - 1)
    return low


__all__ = ["MAX_DP_STEPS", "dp_steps", "layer_limit"]
