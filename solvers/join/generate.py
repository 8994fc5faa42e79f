"""Seeded random join networks shared by tests, benchmarks and examples."""

from __future__ import annotations

import numpy as np

from ..chain.generate import random_chain
from ..chain.instance import Chain
from .instance import Join


def random_join(
    lengths: list[int],
    seed: int = 0,
    *,
    size_range: tuple[int, int] = (1, 10),
    tape_factor: tuple[float, float] = (1.0, 3.0),
    overhead: float = 0.0,
    integer_times: bool = False,
    loss_time: float = 1.0,
    loss_overhead: int = 0,
    name: str | None = None,
    mode_overheads: bool = False,
    mode_times: bool = False,
) -> Join:
    """k = len(lengths) heterogeneous branches (`solvers.chain.generate.random_chain`, seeds
    seed*100 + b), joined by a loss of time `loss_time` and overhead `loss_overhead`.
    With `mode_overheads` (and `overhead` > 0) each branch gets distinct per-mode forward
    overheads: o_fa is the chain's o_f and o_fn an independent draw, integers up to `overhead`
    times the output size (o_f becomes their max). With `mode_times` each branch gets no-grad
    forward times u_fn drawn at or below F_all's u_fa = its u_f (whole numbers with `integer_times`).
    The same arguments always give the same join."""
    chains = [random_chain(L, seed * 100 + b, size_range=size_range, tape_factor=tape_factor, overhead=overhead,
                           integer_times=integer_times, name=f"branch{b}")
              for b, L in enumerate(lengths)]
    if mode_overheads and overhead > 0:
        chains = [_with_modes(c, overhead, seed * 100 + b) for b, c in enumerate(chains)]
    if mode_times:
        chains = [_with_mode_times(c, seed * 100 + b, integer_times) for b, c in enumerate(chains)]
    join = Join.from_chains(chains, loss_time=loss_time, loss_overhead=loss_overhead,
                            name=name or f"join-{'-'.join(map(str, lengths))}-s{seed}")
    join.meta = {"units": {"time": "ms", "memory": "bytes"},
                 "source": f"solvers.join.generate.random_join(lengths={lengths}, seed={seed})"}
    return join


def homogeneous_join(lengths: list[int], *, u_f: float = 1.0, u_b: float = 2.0, x: int = 1, xbar: int | None = None,
                     loss_time: float = 0.0, name: str | None = None) -> Join:
    """Branches of identical stages (the paper's homogeneous setting), lengths L_b."""
    from ..chain.instance import Chain

    chains = [Chain.homogeneous(L, u_f=u_f, u_b=u_b, x=x, xbar=xbar, name=f"branch{b}") for b, L in enumerate(lengths)]
    return Join.from_chains(chains, loss_time=loss_time, name=name or f"homogeneous-join-{'-'.join(map(str, lengths))}")


def _with_modes(c: Chain, overhead: float, seed: int) -> Chain:
    """`c` with o_fa = its o_f and o_fn drawn anew (seeded), both up to `overhead` * x[i+1]."""
    rng = np.random.default_rng(seed + 7_919)
    o_fn = np.floor(rng.uniform(0, overhead, size=c.length) * c.x[1:-1]).astype(np.int64)
    return Chain.with_mode_overheads(c.u_f, c.u_b, c.x, c.xbar, c.o_f, np.append(o_fn, 0), c.o_b, name=c.name,
                                     stage_names=list(c.stage_names), meta=dict(c.meta))


def _with_mode_times(c: Chain, seed: int, integer: bool) -> Chain:
    """`c` with u_fa = its u_f and u_fn a seeded fraction of it (floored to whole numbers if `integer`)."""
    rng = np.random.default_rng(seed + 104_729)
    u_fn = rng.uniform(0.0, 1.0, size=c.length) * c.u_f[: c.length]
    return c.with_mode_times(c.u_f.copy(), np.append(np.floor(u_fn) if integer else u_fn, 0.0))
