"""Seeded random chains shared by tests, benchmarks and examples."""

from __future__ import annotations

import numpy as np

from .instance import Chain


def random_chain(
    L: int,
    seed: int = 0,
    *,
    size_range: tuple[int, int] = (1, 10),
    tape_factor: tuple[float, float] = (1.0, 3.0),
    time_range: tuple[float, float] = (0.5, 3.0),
    bwd_factor: tuple[float, float] = (1.5, 2.5),
    overhead: float = 0.0,
    integer_times: bool = False,
    release: float = 0.0,
    name: str | None = None,
) -> Chain:
    """A heterogeneous chain of L stages.

    Sizes x are integers drawn uniformly in `size_range`; tapes are x[i+1] times a factor in
    `tape_factor` (rounded, so xbar >= x); forward times u_f in `time_range`, backward times
    u_b = u_f times a factor in `bwd_factor`. With `overhead` > 0, o_f and o_b are integers up
    to `overhead` times the output size. `integer_times` rounds times to integers (exact
    comparisons in tests). With `release` > 0, B(i) releases its inputs early (``bwd_overhead_released``):
    o_b[i] is the held overhead o_bh[i] minus up to `release` times x[i+1] + xbar[i+1], never below
    -(x[i+1] + xbar[i+1]) (drawn after everything else: the other arrays do not depend on it).
    The same (L, seed, options) always gives the same chain.
    """
    rng = np.random.default_rng(seed)
    lo, hi = size_range
    x = rng.integers(lo, hi + 1, size=L + 1)
    xbar = np.maximum(x[1:], np.round(x[1:] * rng.uniform(*tape_factor, size=L)).astype(np.int64))
    u_f = rng.uniform(*time_range, size=L)
    u_b = u_f * rng.uniform(*bwd_factor, size=L)
    if integer_times:
        u_f, u_b = np.maximum(1, np.round(u_f)), np.maximum(1, np.round(u_b))
    if overhead > 0:
        o_f = np.floor(rng.uniform(0, overhead, size=L) * x[1:]).astype(np.int64)
        o_b = np.floor(rng.uniform(0, overhead, size=L) * x[1:]).astype(np.int64)
    else:
        o_f = o_b = np.zeros(L, dtype=np.int64)
    loss_time = 1.0 if integer_times else float(rng.uniform(*time_range) / 4)
    o_bh = np.append(o_b, 0)  # B(i) holding its inputs: o_b itself unless it releases them early
    if release > 0:
        freed = x[1:] + xbar
        o_b = np.maximum(-freed, o_b - np.floor(rng.uniform(0, release, size=L) * freed).astype(np.int64))
    return Chain(
        u_f=np.append(u_f, 0.0), u_b=np.append(u_b, loss_time),
        x=np.append(x, 0), xbar=np.concatenate([[0], xbar, [0]]),
        o_f=np.append(o_f, 0), o_b=np.append(o_b, 0), o_bh=o_bh,
        name=name or f"random-L{L}-s{seed}",
        meta={"units": {"time": "ms", "memory": "bytes"},
              "source": f"solvers.chain.generate.random_chain(L={L}, seed={seed})"},
    )
