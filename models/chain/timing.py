"""Op times measured inside the executors' own steps (CPU profiles, ``timing="in_step"``).

A profile's u_fa[i], u_fn[i], u_b[i] (and a join's loss time) are what the simulator adds up into a
makespan, and a measured step is compared with that sum. Timing a block on its own, or a
hand-written forward/backward loop, misses what the executor does around each op: its run state
(detach, leaf copies, dict updates), the RNG context of a stage (`models.measure.RngStates`, the
join's per-stage seeded generators), the offloading executor's saved-tensor hooks and handles,
and the allocator state a real step leaves behind. Here each op is timed inside whole store-all
steps of the executor that will run the schedules (`models.measure.timing_ops`: every
`StepMeter.op` region, by the step's own clock, CPU thread time or wall), after `warmup` steps;
a value is the median over `repeats` steps (ms). The step is a timed one (no memory watch; the
parameter gradients are created by autograd, as in the executors' timed runs).

`retime_chain` / `retime_join` put those times into a profiled instance (sizes and overheads
unchanged) and record the source in ``meta["timing"]``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
from memsched.models.measure import timing_ops
from memsched.solvers.chain import Chain
from memsched.solvers.join import Join

__all__ = ["op_times", "retime_chain", "retime_join"]


def op_times(step: Callable[[], Any], *, repeats: int, warmup: int) -> dict[str, float]:
    """Median ms of each op label over `repeats` calls of `step` (one executor step whose ops are
    metered by `StepMeter.op`), after `warmup` untimed calls. A label met several times in one
    step (a recomputation) is summed within the step."""
    for _ in range(warmup):
        step()
    samples: dict[str, list[float]] = {}
    for _ in range(max(1, repeats)):
        with timing_ops() as times:
            step()
        per: dict[str, float] = {}
        for label, ms in times:
            per[label] = per.get(label, 0.0) + ms
        for label, ms in per.items():
            samples.setdefault(label, []).append(ms)
    return {label: float(statistics.median(v)) for label, v in samples.items()}


def _chain_times(chain: Chain, times: dict[str, float], prefix: str = "") -> tuple[np.ndarray, ...]:
    """(u_fa, u_fn, u_b) from `times`: F_all's, F_ck's and B's labels (prefix "b," for a join's
    branch b). Without F_ck labels, u_fn keeps the chain's own ratio u_fn / u_fa (capped at 1)."""
    L = chain.length
    u_fa = np.array([times[f"F_all({prefix}{i})"] for i in range(L)] + [0.0])
    u_b = np.array([times[f"B({prefix}{i})"] for i in range(L)] + [times.get("Loss", 0.0) if not prefix else 0.0])
    if all(f"F_ck({prefix}{i})" in times for i in range(L)):
        u_fn = np.array([times[f"F_ck({prefix}{i})"] for i in range(L)] + [0.0])
    else:
        ratio = np.divide(chain.u_fn, chain.u_fa, out=np.ones(L + 1), where=chain.u_fa > 0)
        u_fn = u_fa * np.minimum(ratio, 1.0)
    return u_fa, u_fn, u_b


def retime_chain(chain: Chain, times: dict[str, float], executor: str) -> Chain:
    """`chain` with u_fa[i] = time of F_all(i), u_fn[i] = F_ck(i) (or the chain's ratio u_fn / u_fa
    when `times` has no F_ck), u_b[i] = B(i), u_b[L] = Loss from `times` (`op_times` of a store-all
    step of `executor`, a name for the meta); u_f = max(u_fa, u_fn); sizes and overheads unchanged."""
    u_fa, u_fn, u_b = _chain_times(chain, times)
    meta = {**chain.meta, "timing": f"in_step ({executor}: each op inside whole store-all steps)"}
    return Chain.with_mode_overheads(u_fa, u_b, chain.x.copy(), chain.xbar.copy(), chain.o_fa.copy(),
                                     chain.o_fn.copy(), chain.o_b.copy(), name=chain.name,
                                     stage_names=list(chain.stage_names), meta=meta,
                                     o_bh=chain.o_bh.copy()).with_mode_times(u_fa, u_fn)


def retime_join(join: Join, times: dict[str, float], executor: str) -> Join:
    """`join` with each branch's u_fa, u_fn, u_b from the times of F_all(b,i), F_ck(b,i) (or the
    branch's ratio u_fn / u_fa without them), B(b,i) and the loss time from Loss (`op_times` of
    store-all steps of `executor`); sizes and overheads unchanged."""
    branches = []
    for b, c in enumerate(join.branches):
        u_fa, u_fn, u_b = _chain_times(c, times, prefix=f"{b},")
        branches.append(Chain(np.maximum(u_fa, u_fn), u_b, c.x.copy(), c.xbar.copy(), c.o_f.copy(), c.o_b.copy(),
                              name=c.name, stage_names=list(c.stage_names), meta=dict(c.meta), o_fa=c.o_fa.copy(),
                              o_fn=c.o_fn.copy(), u_fa=u_fa, u_fn=u_fn))
    meta = {**join.meta, "timing": f"in_step ({executor}: each op inside whole store-all steps)"}
    return Join(branches, times["Loss"], join.loss_overhead, name=join.name, meta=meta)
