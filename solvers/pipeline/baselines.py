"""Baseline partitions: torchgpipe's balance by time.

torchgpipe (Kim et al., 2020) profiles each layer's time and cuts the sequence into exactly P
non-empty blocks with the smallest largest block time (its ``balance_by_time`` calls a block
partition algorithm). It ignores memory and communication. Here: the smallest achievable
largest block time by bisection over the candidate block sums with a greedy packing (exact for
the min-max block problem), then the blocks are split until there are exactly min(P, L) of
them (splitting never increases the largest block). The partition is then charged by the
simulator; when it does not fit the budget the answer is ``infeasible`` for this baseline with
the memory its partition needs in ``min_budget`` (the smallest memory this baseline meets, as
docs/CONVENTIONS.md states for baselines) and in ``details["needs"]``: not the smallest memory of
any partition, which a memory-aware solver (`madpipe`) may find far below.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..result import FEASIBLE, INFEASIBLE, SolveResult
from .dp import _defaults
from .instance import Pipeline
from .schedule import Partition


def _greedy(times: np.ndarray, cap: float) -> list[tuple[int, int]] | None:
    """Pack layers left to right into blocks of total time <= cap; None if a layer exceeds cap."""
    blocks, start, acc = [], 0, 0.0
    for l, t in enumerate(times):
        if t > cap:
            return None
        if acc + t > cap and l > start:
            blocks.append((start, l - 1))
            start, acc = l, 0.0
        acc += t
    blocks.append((start, len(times) - 1))
    return blocks


def balance_by_time(times: np.ndarray | list[float], parts: int) -> list[tuple[int, int]]:
    """Exactly min(parts, L) contiguous non-empty blocks minimising the largest block sum."""
    times = np.asarray(times, dtype=float)
    L = len(times)
    k = min(int(parts), L)
    pre = np.concatenate([[0.0], np.cumsum(times)])
    candidates = np.unique((pre[None, :] - pre[:, None])[np.triu_indices(L + 1, 1)])
    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        blocks = _greedy(times, candidates[mid] * (1 + 1e-12))
        if blocks is not None and len(blocks) <= k:
            hi = mid
        else:
            lo = mid + 1
    blocks = _greedy(times, candidates[lo] * (1 + 1e-12))
    assert blocks is not None
    while len(blocks) < k:  # split the longest splittable block at its best point
        idx = max((b for b in range(len(blocks)) if blocks[b][1] > blocks[b][0]),
                  key=lambda b: pre[blocks[b][1] + 1] - pre[blocks[b][0]])
        a, z = blocks[idx]
        cut = min(range(a, z), key=lambda c: max(pre[c + 1] - pre[a], pre[z + 1] - pre[c + 1]))
        blocks[idx : idx + 1] = [(a, cut), (cut + 1, z)]
    return blocks


def solve_balance_time(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
                       micro_batches: int | None = None, **_: Any) -> SolveResult:
    """torchgpipe's balance by time on P devices (one stage per device), checked against the budget."""
    start = time.perf_counter()
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    blocks = balance_by_time(inst.fwd + inst.bwd, P)
    part = Partition.from_bounds(blocks, schedule=schedule, micro_batches=m, devices=P).evaluated(inst)
    elapsed = time.perf_counter() - start
    scope = "torchgpipe balance_by_time (time only, exactly min(P, L) stages)"
    assert part.peak_memory is not None  # set by Partition.evaluated
    if budget is not None and part.peak_memory > budget:
        return SolveResult(problem="pipeline", solver="balance-time", status=INFEASIBLE, budget=budget,
                           min_budget=part.peak_memory, solve_time_s=elapsed, scope=scope,
                           message=f"balance-time partition ({part}) needs {part.peak_memory} bytes per device",
                           details={"unconstrained_partition": part.to_json(), "needs": part.peak_memory})
    return SolveResult(problem="pipeline", solver="balance-time", status=FEASIBLE, objective=part.period,
                       peak_memory=part.peak_memory, solve_time_s=elapsed, budget=budget, schedule=part, scope=scope)
