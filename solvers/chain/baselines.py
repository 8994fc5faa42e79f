"""Baseline schedules on chains: store-all, recompute-all, periodic segments, Chen's sqrt(L).

Each ``*_schedule`` function builds a `Schedule`; each ``solve_*`` function is a registered
solver: it replays its schedule and answers ``feasible`` when it fits the budget and
``infeasible`` (for this baseline) otherwise, with the budget it would need in ``min_budget``.
None of them claims optimality.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..errors import InputError, option_field
from ..result import FEASIBLE, INFEASIBLE, SolveResult
from .instance import Chain
from .schedule import Bwd, F_all, F_ck, F_n, Loss, Op, Schedule
from .simulator import simulate


def store_all_schedule(L: int) -> Schedule:
    """F_all(0) ... F_all(L-1), Loss, B(L-1) ... B(0): no recomputation, the largest peak."""
    return Schedule([F_all(i) for i in range(L)] + [Loss(L)] + [Bwd(i) for i in reversed(range(L))], L)


def _advance(start: int, stop: int) -> list[Op]:
    """From a resident a_start, store a_stop while keeping a_start: F_ck(start), F_n(start+1..stop-1)."""
    if stop <= start:
        return []
    return [F_ck(start)] + [F_n(k) for k in range(start + 1, stop)]


def recompute_all_schedule(L: int) -> Schedule:
    """Keep only a_0; recompute from it before each backward (Theta(L^2) forwards, least memory
    among schedules that store no intermediate checkpoint)."""
    ops = _advance(0, L) + [Loss(L)]
    for i in reversed(range(L)):
        ops += _advance(0, i) + [F_all(i), Bwd(i)]
    return Schedule(ops, L)


def segment_bounds(L: int, segments: int) -> list[tuple[int, int]]:
    """Stage ranges [start, end] as torch.utils.checkpoint.checkpoint_sequential cuts them:
    segments-1 checkpointed segments of L // segments stages, the rest in the last one."""
    if not 1 <= segments <= L:
        raise ValueError(f"segments must be in 1..{L}, got {segments}")
    size = L // segments
    bounds = [(s, s + size - 1) for s in range(0, size * (segments - 1), size)]
    bounds.append((size * (segments - 1), L - 1))
    return bounds


def periodic_schedule(L: int, segments: int) -> Schedule:
    """checkpoint_sequential(segments): the first segments-1 segments run without autograd
    keeping only their inputs; the last runs with autograd; each checkpointed segment is
    recomputed with autograd just before its backward."""
    bounds = segment_bounds(L, segments)
    *checked, (last_start, _) = bounds
    ops: list[Op] = []
    for start, end in checked:
        ops += _advance(start, end + 1)
    ops += [F_all(i) for i in range(last_start, L)] + [Loss(L)]
    ops += [Bwd(i) for i in reversed(range(last_start, L))]
    for start, end in reversed(checked):
        ops += [F_all(i) for i in range(start, end + 1)] + [Bwd(i) for i in reversed(range(start, end + 1))]
    return Schedule(ops, L)


def chen_segments(L: int) -> int:
    """Chen et al. (2016): about sqrt(L) segments."""
    return max(1, min(L, round(math.sqrt(L))))


def _answer(name: str, chain: Chain, schedule: Schedule, budget: int, t0: float, *, min_budget: int | None = None,
            **details: Any) -> SolveResult:
    """Replay `schedule` at `budget` (bytes): ``feasible`` when its peak fits, else ``infeasible``.
    ``min_budget`` is `min_budget` when given (a solver with other schedules to choose from: the least
    peak among them), else this schedule's peak (a solver with this one schedule only)."""
    sim = simulate(chain, schedule)
    sim.raise_if_invalid()
    fits = sim.peak_memory <= budget
    return SolveResult(
        problem="chain", solver=name, status=FEASIBLE if fits else INFEASIBLE,
        objective=sim.makespan if fits else None, peak_memory=sim.peak_memory if fits else None,
        schedule=schedule if fits else None, min_budget=sim.peak_memory if min_budget is None else min_budget,
        budget=budget,
        solve_time_s=time.perf_counter() - t0, scope=f"{name} baseline (no optimality claim)",
        message="" if fits else f"{name} needs {sim.peak_memory} > budget {budget}", details=details,
    )


def solve_store_all(chain: Chain, budget: int, **_: Any) -> SolveResult:
    """Store-all (every forward F_all, no recomputation): optimal when it fits `budget` (bytes), else infeasible
    with its peak as `min_budget`."""
    t0 = time.perf_counter()
    return _answer("store-all", chain, store_all_schedule(chain.length), budget, t0)


def solve_recompute_all(chain: Chain, budget: int, **_: Any) -> SolveResult:
    """Recompute-all: keep only the input a_0 and recompute each prefix before each backward (least memory,
    quadratic time)."""
    t0 = time.perf_counter()
    return _answer("recompute-all", chain, recompute_all_schedule(chain.length), budget, t0)


def solve_chen(chain: Chain, budget: int, **_: Any) -> SolveResult:
    """Chen et al.'s sqrt(L) checkpointing: about sqrt(L) equal segments, each re-run before its backward."""
    t0 = time.perf_counter()
    k = chen_segments(chain.length)
    return _answer("sqrt", chain, periodic_schedule(chain.length, k), budget, t0, segments=k)


def _least_periodic_peak(chain: Chain, held: dict[int, int], peaks: dict[int, int]) -> int:
    """The least peak (bytes) of `periodic_schedule` over every segment count K in `held`. `held[K]` is a
    lower bound of K's peak (bytes resident before the loss); `peaks` holds the counts already replayed
    (and gains those replayed here). Counts are taken by increasing `held` and the search stops at the
    first whose bound reaches the least peak so far, so few are replayed."""
    least = math.inf
    for k in sorted(held, key=lambda k: (held[k], k)):
        if held[k] >= least:
            break
        if k not in peaks:
            peaks[k] = simulate(chain, periodic_schedule(chain.length, k)).peak_memory
        least = min(least, peaks[k])
    return int(least)


def solve_periodic(chain: Chain, budget: int, *, segments: int | None = None, **_: Any) -> SolveResult:
    """With `segments`, that segment count; without, the fastest count whose peak fits. ``min_budget``
    (bytes) is the smallest budget the solver meets: with `segments`, that count's peak; without, the
    least peak over all counts (`_least_periodic_peak`), whether or not one fits `budget`.

    The makespan of K segments is sum u_fa + sum u_b + u_b[L] + sum_{i < s_K} u_fn[i] with s_K the
    first stage of the last (taped) segment: every stage before s_K runs forward twice (once
    without autograd, once with). So the
    counts are tried by increasing s_K, replaying only until a group of equal s_K has one that
    fits, and skipping a count whose segment inputs and last segment's tapes (all resident
    just before the loss) exceed the budget; for ``min_budget`` the other counts are replayed by
    increasing bound until the bound reaches the least peak found."""
    t0 = time.perf_counter()
    L = chain.length
    if segments is not None:
        if isinstance(segments, bool) or not isinstance(segments, int) or not 1 <= segments <= L:
            raise InputError(f"must be an integer in 1..{L} (the chain's stages), got {segments!r}",
                             field=option_field("segments"))
        return _answer("periodic", chain, periodic_schedule(L, int(segments)), budget, t0, segments=int(segments))
    groups: dict[int, list[int]] = {}
    held: dict[int, int] = {}  # K -> bytes resident before the loss: segment inputs, last segment's tapes
    for k in range(1, L + 1):
        bounds = segment_bounds(L, k)
        groups.setdefault(bounds[-1][0], []).append(k)
        held[k] = sum(int(chain.x[start]) for start, _ in bounds) + int(chain.xbar[bounds[-1][0] + 1:L + 1].sum())
    best: tuple[float, int, Schedule] | None = None
    peaks: dict[int, int] = {}  # K -> replayed peak (bytes), for those replayed
    for last_start in sorted(groups):
        for k in groups[last_start]:
            if held[k] > budget:  # a lower bound of its peak
                continue
            schedule = periodic_schedule(L, k)
            sim = simulate(chain, schedule)
            peaks[k] = sim.peak_memory
            if sim.peak_memory <= budget and (best is None or sim.makespan < best[0]):
                best = (sim.makespan, k, schedule)
        if best is not None:
            break
    smallest_peak = _least_periodic_peak(chain, held, peaks)
    if best is None:
        return SolveResult(problem="chain", solver="periodic", status=INFEASIBLE, budget=budget,
                           min_budget=smallest_peak, solve_time_s=time.perf_counter() - t0,
                           scope="periodic baseline, best segment count",
                           message=f"no segment count fits; the smallest periodic peak is {smallest_peak}")
    # the smallest budget this solver meets is the least peak over all counts, not the chosen one's
    result = _answer("periodic", chain, best[2], budget, t0, min_budget=smallest_peak, segments=best[1])
    result.scope = "periodic baseline, best segment count (no optimality claim)"
    return result
