"""Seeded random offloading instances: a random chain (`solvers.chain.generate`) plus a host link.

The link's bandwidth (bytes/s) is, unless given, chosen so that moving the mean tape abar
takes `transfer_ratio` times the mean forward time u_f: transfers and compute then overlap
partially, the regime where offloading decisions matter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..chain.generate import random_chain
from .instance import OffloadInstance


def random_offload(L: int, seed: int = 0, *, bandwidth: float | None = None, latency: float = 0.0,
                   transfer_ratio: float = 1.0, **chain_options: Any) -> OffloadInstance:
    """A random chain of L stages (`random_chain(L, seed, **chain_options)`) with a host link of
    `bandwidth` bytes/s (derived from `transfer_ratio` when None) and `latency` seconds."""
    chain = random_chain(L, seed, **chain_options)
    if bandwidth is None:
        mean_tape = float(np.mean(chain.xbar[1 : L + 1]))
        mean_fwd = float(np.mean(chain.u_f[:L])) / chain.time_units_per_second()  # seconds
        bandwidth = mean_tape / (transfer_ratio * mean_fwd)
    return OffloadInstance(chain, float(bandwidth), float(latency))
