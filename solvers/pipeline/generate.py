"""Seeded random pipelines shared by tests and benchmarks, and longer chains built from a profile.

Times in ms (``time_unit = 1e-3``), sizes in bytes (small integers for the random ones, so that
exact comparisons in tests are meaningful).
"""

from __future__ import annotations

import numpy as np

from .instance import Pipeline


def random_pipeline(rng: np.random.Generator, L: int, *, bandwidth: float | None = None,
                    weight_factor: float = 4.0) -> Pipeline:
    """A random chain of L layers with small integer sizes (for property tests)."""
    return Pipeline(fwd=rng.uniform(0.5, 3.0, L).round(3), bwd=rng.uniform(1.0, 6.0, L).round(3),
                    act=rng.integers(1, 60, L), params=rng.integers(0, 40, L), input_size=int(rng.integers(1, 60)),
                    name=f"random-{L}", bandwidth=bandwidth, weight_factor=weight_factor)


def scaled(base: Pipeline, L: int, rng: np.random.Generator | None = None) -> Pipeline:
    """A chain of L layers built by repeating (and jittering) `base`'s layers (for timings)."""
    rng = rng or np.random.default_rng(0)
    idx = np.arange(L) % base.length
    jitter = rng.uniform(0.8, 1.2, L)
    return Pipeline(fwd=base.fwd[idx] * jitter, bwd=base.bwd[idx] * jitter, act=base.act[idx],
                    params=base.params[idx], input_size=base.input_size, name=f"{base.name}-x{L}",
                    time_unit=base.time_unit)


def parallel_branches(k: int, b: int, seed: int = 0) -> Pipeline:
    """A layer DAG: a source feeding `k` parallel branches of `b` layers each, joined by one sink
    (k b + 2 layers, (b + 1)^k + 2 ideals: a wide lattice for the DAG partitioners)."""
    rng = np.random.default_rng(seed)
    L = k * b + 2
    succ: list[list[int]] = [[] for _ in range(L)]
    for branch in range(k):
        first = 1 + branch * b
        succ[0].append(first)
        for j in range(b - 1):
            succ[first + j].append(first + j + 1)
        succ[first + b - 1].append(L - 1)
    return Pipeline(fwd=rng.uniform(1, 10, L), bwd=rng.uniform(1, 20, L), act=rng.integers(1, 100, L) * 1000,
                    params=rng.integers(0, 50, L) * 1000, input_size=5000, succ=succ, name=f"branches{k}x{b}")
