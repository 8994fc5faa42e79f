"""A general DP for interleaved (non-contiguous) allocations, after MadPipe (``interleave-dp``).

The model is the simulator's (`solvers.pipeline.simulator`): the chain is cut into S <= Smax
contiguous stages, each placed on one of P devices (several stages may share a device); under
1F1B stage s keeps n_s = min(S - s, m) micro-batches in flight (its position from the end,
t = S - s, capped by the batch's m micro-batches when m is given: S may reach 2P > m), under
GPipe n_s = m, so its memory M_s = ceil(kappa W_s) + n_s A_s + Q_s is known from its
layers and t. A device's load is the sum of its stages' times tau_s, its memory the sum of
their M_s; the period is max(max_p load_p, max_s c_s) with c_s = 0 when stages s - 1 and s
share a device.

MadPipe (Beaumont, Eyraud-Dubois, Shilova) builds allocations by a dynamic program that places
the layers from the end of the network, so that each stage knows how many micro-batches are in
flight at it, and keeps the load and memory of the devices that receive several stages in its
state. This module does the same over *every* device map: the state after placing the
suffix [i, L) as t stages is

    (i, t, the multiset of (load_p, memory_p) of the devices used, the device of stage S - t),
    valued by the largest link time so far (minimised),

and a transition places the stage [i', i - 1] at position t + 1 on a device already used (one
per distinct (load, memory) pair) or on a fresh one (at most P), adding tau(i', i - 1) to its
load and M(i', i - 1, t + 1) to its memory (<= the limit), and charging the link into stage
[i, ...] unless both stages share a device. Devices are interchangeable, so states that differ
only by a relabelling of devices are merged (the multiset). The answer is the best state at
i = 0. Branch and bound keeps the state space small: an incumbent period U (the better of the
straight memory-aware DP, the V-shaped DP and the `interleave` heuristic, so the answer is never
worse than those) prunes every state with a load or link time >= U, or whose devices cannot
absorb the remaining work sum_{l < i'} (f_l + b_l) below U or, with a memory limit, the
weights kappa sum_{l < i'} W_l of the remaining layers plus n_min A(0, i' - 1) within it (the
stages before all hold n >= n_min = min(t + 2, m) micro-batches under 1F1B, m under GPipe, and the
stashes of any cut of [0, i') sum to at least the stash A(0, i' - 1) of the whole). A state is
dropped when another of its level dominates it (same t and number of devices, the last stage's
device and the others, matched in sorted order, no more loaded nor fuller, link time no larger;
`_undominated`). The DP is exact (status ``optimal`` among interleaved allocations of <= Smax
stages) unless a level holds more than ``max_states`` states that still have two or more stages
to place (states with Smax - 1 stages have a single completion and are never cut), in which
case only the ``max_states`` with the smallest largest load are expanded (a beam; status
``feasible``, the scope says so). A ``time_limit`` stops the DP (checked once per level, every
`STATES_PER_CHECK` states, every `CHECK_EVERY` transitions and inside the dominance filter) with
the best of the seeds and of the DP so far (``feasible``).
Worst case exponential (the problem is NP-hard); the tests check it against `interleave-cpsat`
and a brute force on small chains.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, flag
from ..exact.options import Deadline, DeadlineExceeded
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .dp import _defaults, _prefix, stage_arrays
from .instance import Pipeline
from .schedule import Partition

#: default cap on the states of one level (layer i) before the DP turns into a beam
DEFAULT_MAX_STATES = 20000


@dataclass
class _State:
    """One DP state: per device (load, memory, label); the label of the device of the last
    placed stage (-1 before any); the largest link time so far; the stages placed, from the
    end, as (first, last, label)."""

    devices: tuple[tuple[float, int, int], ...]
    last: int
    linkmax: float
    path: tuple[tuple[int, int, int], ...]

    def key(self) -> tuple[Any, ...]:
        """The state up to a relabelling of devices."""
        rest = sorted((ld, mem) for ld, mem, lab in self.devices if lab != self.last)
        last = next(((ld, mem) for ld, mem, lab in self.devices if lab == self.last), None)
        return (len(self.path), tuple(rest), last)


#: largest group of states compared pairwise by `_undominated`
DOMINANCE_GROUP = 3000
#: the DP checks its deadline once every this many transitions, `_undominated` once every this many
#: states it lists and every `CHECK_EVERY // 64` it compares (each comparison is one numpy step over its group)
CHECK_EVERY = 4096


def _tick(deadline: Deadline | None, step: int, every: int = CHECK_EVERY) -> None:
    """``deadline.check()`` (`DeadlineExceeded` when spent) at every `every`-th `step`, step 0
    included; nothing without a deadline."""
    if deadline is not None and step % every == 0:
        deadline.check()


def _undominated(states: list[_State], deadline: Deadline | None = None) -> list[_State]:
    """The states not dominated by another of the same level: same number of stages placed and
    of devices used, the device of the last stage no more loaded nor fuller, the other devices
    (matched in sorted order) no more loaded nor fuller, and a link time no larger: every
    completion of the dominated state completes the other one with no larger period (groups
    above `DOMINANCE_GROUP` states are kept whole). Seconds on tens of thousands of states:
    `DeadlineExceeded` once `deadline` is spent (checked as it goes, `_tick`)."""
    groups: dict[tuple[int, int], list[_State]] = {}
    for count, st in enumerate(states):
        _tick(deadline, count)
        groups.setdefault((len(st.path), len(st.devices)), []).append(st)
    out: list[_State] = []
    for group in groups.values():
        n = len(group)
        if n < 2 or n > DOMINANCE_GROUP:
            out += group
            continue
        rows = []
        for count, st in enumerate(group):
            _tick(deadline, count)
            rest = sorted((ld, mem) for ld, mem, lab in st.devices if lab != st.last)
            last = next(((ld, mem) for ld, mem, lab in st.devices if lab == st.last), (0.0, 0))
            rows.append([st.linkmax, *last, *(x for pair in rest for x in pair)])
        width = max(len(r) for r in rows)
        arr = np.array([r + [0.0] * (width - len(r)) for r in rows])  # the last's label is absent once
        keep = np.ones(n, dtype=bool)
        for k in range(n):
            _tick(deadline, k, CHECK_EVERY // 64)
            le = (arr <= arr[k]).all(axis=1) & keep
            le[k] = False
            # dominated: another kept state no worse anywhere, better somewhere or earlier
            better = le & ((arr < arr[k]).any(axis=1) | (np.arange(n) < k))
            if better.any():
                keep[k] = False
        out += [st for st, k in zip(group, keep) if k]
    return out


def in_flight(position: int, schedule: str, m: int | None) -> int:
    """The micro-batches in flight at the stage at `position` (1 = the last stage) from the end: under
    1F1B the position, capped by the batch's `m` micro-batches when `m` is given (> 0), as the simulator
    charges (`simulator.in_flight_counts`); under GPipe `m`."""
    if schedule != "1f1b":
        return int(m or 0)
    return min(position, int(m)) if m else position


Found = tuple[float, list[tuple[int, int]], list[int]]  # (period, stage bounds, device of each stage)

#: the DP checks its deadline once per level and once every this many states of a level
STATES_PER_CHECK = 64


def interleave_dp(inst: Pipeline, P: int, budget: int | None, *, schedule: str = "1f1b",
                  micro_batches: int | None = None, max_stages: int | None = None,
                  upper: float = math.inf, max_states: int = DEFAULT_MAX_STATES,
                  deadline: Deadline | None = None) -> tuple[Found | None, bool]:
    """The DP of the module docstring: ((period, stage bounds, device of each stage) of the
    best allocation strictly better than ``upper``, or None when there is none; exact), where
    ``exact`` is False when a level was cut to ``max_states`` states or `deadline` was spent
    (then the best found so far, and None proves nothing)."""
    found, exact, stopped = _interleave_dp(inst, P, budget, schedule=schedule, micro_batches=micro_batches,
                                           max_stages=max_stages, upper=upper, max_states=max_states,
                                           deadline=deadline)
    return found, exact and not stopped


def _spent(deadline: Deadline | None) -> bool:
    """Whether `deadline` is given and spent."""
    return deadline is not None and deadline.expired()


def _interleave_dp(inst: Pipeline, P: int, budget: int | None, *, schedule: str, micro_batches: int | None,
                   max_stages: int | None, upper: float, max_states: int, deadline: Deadline | None
                   ) -> tuple[Found | None, bool, bool]:
    """`interleave_dp`, saying apart why it is not exact: (found, exact: no level was cut to the
    beam, stopped: `deadline` was spent before the last level, the answer is the best so far)."""
    L = inst.length
    smax = min(L, int(max_stages or 2 * P))
    m = int(micro_batches or 0)
    pre = _prefix(inst)
    arrs = [stage_arrays(inst, pre, i) for i in range(L)]
    link = [inst.comm_time(2.0 * inst.input_of(i), 2 * inst.messages_into(i)) if i > 0 else 0.0 for i in range(L)]
    limit = math.inf if budget is None else float(budget)
    # stash(0, i - 1): the stashes of stages cutting [0, i) sum to at least it (a tensor consumed
    # inside [0, i) is stashed by some stage: the one consuming it or the one it crosses into)
    rest_stash = [0] + [int(arrs[0]["stash"][i - 1]) for i in range(1, L + 1)]
    bounded = budget is not None
    cap = upper * (1.0 - 1e-12) if math.isfinite(upper) else math.inf  # keep strictly better states only
    levels: list[dict[tuple[Any, ...], _State]] = [{} for _ in range(L + 1)]
    levels[L][(0, (), None)] = _State((), -1, 0.0, ())
    exact = True
    best: _State | None = None
    best_val = math.inf
    stopped = False
    steps = 0  # transitions tried: the deadline is checked every CHECK_EVERY of them
    try:
        for i in range(L, 0, -1):
            if _spent(deadline):
                stopped = True
                break
            # states with smax - 1 stages have one completion each (the stage [0, i - 1]): cheap,
            # never compared nor cut; the others are cut to the beam past max_states
            closing = [st for st in levels[i].values() if len(st.path) == smax - 1]
            states = _undominated([st for st in levels[i].values() if len(st.path) < smax - 1], deadline)
            levels[i] = {}
            if len(states) > max_states:
                exact = False
                states.sort(key=lambda s: (max((d[0] for d in s.devices), default=0.0), s.linkmax))
                states = states[:max_states]
            states += closing
            for count, st in enumerate(states):
                if count % STATES_PER_CHECK == STATES_PER_CHECK - 1 and _spent(deadline):
                    stopped = True
                    break
                t = len(st.path)
                if t >= smax:
                    continue
                n = in_flight(t + 1, schedule, m)
                used = len(st.devices)
                # a stage that does not start at layer 0 needs another stage before it
                for first in (range(i - 1, -1, -1) if t + 1 < smax else (0,)):
                    k = i - 1 - first
                    arr = arrs[first]
                    tau = float(arr["fb"][k])
                    if tau >= cap:
                        break  # longer stages only take more time
                    mem = int(arr["wmem"][k]) + n * int(arr["stash"][k]) + int(arr["buffers"][k])
                    if mem > limit:
                        continue
                    if not bounded:
                        mem = 0  # without a limit memory does not matter: states differ by their loads only
                    rest_work = float(pre.fb[first])
                    rest_weights = inst.weight_factor * float(pre.w[first]) * (1.0 - 1e-9) - 1.0
                    if first > 0:  # the stages before hold >= n_min micro-batches of stash(0, first - 1)
                        n_min = in_flight(t + 2, schedule, m)
                        rest_weights += n_min * rest_stash[first]
                    seen: set[tuple[float, int, bool]] = set()
                    options = [(d, lab == st.last) for d, (_, _, lab) in enumerate(st.devices)]
                    if used < P:
                        options.append((-1, False))
                    for d, same in options:
                        steps += 1
                        _tick(deadline, steps)
                        load0, mem0, lab = st.devices[d] if d >= 0 else (0.0, 0, used)
                        sig = (load0, mem0, same)
                        if sig in seen:
                            continue  # an equivalent device: the same state up to relabelling
                        seen.add(sig)
                        load, held = load0 + tau, mem0 + mem
                        if load >= cap or held > limit:
                            continue
                        lk = st.linkmax if (same or i == L) else max(st.linkmax, link[i])
                        if lk >= cap:
                            continue
                        devs = list(st.devices)
                        if d >= 0:
                            devs[d] = (load, held, lab)
                        else:
                            devs.append((load, held, lab))
                        if first > 0 and math.isfinite(cap):
                            room = sum(cap - x[0] for x in devs) + (P - len(devs)) * cap
                            if room <= rest_work:
                                continue  # the remaining layers cannot fit below the incumbent
                        if first > 0 and bounded:
                            free = sum(limit - x[1] for x in devs) + (P - len(devs)) * limit
                            if free < rest_weights:
                                continue  # nor can the weights of the remaining layers fit in memory
                        new = _State(tuple(devs), lab, lk, st.path + ((first, i - 1, lab),))
                        if first == 0:
                            val = max(max(x[0] for x in devs), lk)
                            if val < best_val:
                                best, best_val = new, val
                                cap = min(cap, val * (1.0 - 1e-12))
                            continue
                        key = new.key()
                        old = levels[first].get(key)
                        if old is None or lk < old.linkmax:
                            levels[first][key] = new
            if stopped:
                break
    except DeadlineExceeded:  # inside a level (the dominance filter, the transitions): the best so far stands
        stopped = True
    if best is None:
        return None, exact, stopped
    stages = list(reversed(best.path))
    return (best_val, [(a, b) for a, b, _ in stages], [lab for _, _, lab in stages]), exact, stopped


def solve_interleave_dp(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
                        micro_batches: int | None = None, max_stages: int | None = None,
                        max_states: int | None = None, time_limit: float | None = None, **_: Any) -> SolveResult:
    """`interleave_dp` seeded with the best of `interleave` (straight DP and heuristic) and, at
    most `interleave.MAX_V_LAYERS` layers, `interleave-v`; every answer replayed by the simulator.
    `time_limit` (s, wall clock, None: none) covers the seeds and the DP: `interleave` always runs,
    `interleave-v` only while time is left, and the DP stops at the limit (checked once per level
    and every `STATES_PER_CHECK` states), answering the best of the seeds and of the DP so far as
    ``feasible`` (``timeout`` when there is none), the message saying so."""
    from .interleave import MAX_V_LAYERS, positive_count, solve_interleave, solve_interleave_v, stage_cap

    start = time.perf_counter()
    deadline = Deadline(_seconds(time_limit), start)
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    smax = stage_cap(inst.length, P, max_stages)
    states = positive_count(max_states, "max_states")
    seeds = [solve_interleave(inst, budget, devices=P, schedule=schedule, micro_batches=m, max_stages=smax)]
    if inst.length <= MAX_V_LAYERS and 2 * P <= smax and not deadline.expired():
        left = deadline.left()
        v = solve_interleave_v(inst, budget, devices=P, schedule=schedule, micro_batches=m, max_stages=smax,
                               time_limit=None if left is None else max(0.0, left))
        if v.status == OPTIMAL:  # a V-shaped DP cut by the limit gives no seed (its straight pipeline is interleave's)
            seeds.append(v)
    found = [s for s in seeds if s.schedule is not None and s.objective is not None
             and len(s.schedule.stages) <= smax]  # only seeds in the DP's scope
    incumbent = min(found, key=lambda s: float(s.objective or math.inf)) if found else None
    upper = float(incumbent.objective) if incumbent is not None and incumbent.objective is not None else math.inf
    got, exact, stopped = _interleave_dp(inst, P, budget, schedule=schedule, micro_batches=m, max_stages=smax,
                                         upper=upper, max_states=states if states is not None else DEFAULT_MAX_STATES,
                                         deadline=deadline)
    best: Partition | None = incumbent.schedule if incumbent is not None else None
    if got is not None:
        part = Partition.from_bounds(got[1], schedule=schedule, micro_batches=m, devices=P)
        part.device_of = got[2]
        part.evaluated(inst)
        if best is None or (part.period or math.inf) < (best.period or math.inf):
            best = part
    scope = (f"interleaved allocations of <= {smax} contiguous stages on <= {P} devices"
             + ("" if exact else f" (beam: levels cut to {int(max_states or DEFAULT_MAX_STATES)} states)"))
    stop = f"the time limit of {deadline.limit:g} s came before the DP ended" if stopped else ""
    proven = exact and not stopped
    elapsed = time.perf_counter() - start
    if best is None:
        if stopped:
            return SolveResult(problem="pipeline", solver="interleave-dp", status=TIMEOUT, budget=budget,
                               min_budget=None, solve_time_s=elapsed, scope=scope,
                               message=f"{stop}; none found by then")
        # a beam that found nothing proves nothing: `infeasible` for this heuristic search only, as `interleave`
        return SolveResult(problem="pipeline", solver="interleave-dp", status=INFEASIBLE, budget=budget,
                           min_budget=None, solve_time_s=elapsed, scope=scope,
                           details={} if exact else {"heuristic": True},
                           message=f"no interleaved allocation fits {budget} bytes per device"
                           + ("" if exact else " found by the beam, which is no proof that none does "
                              "(a larger max_states searches more)"))
    assert best.period is not None
    note = f"{stop}: the best of the seeds and of the DP so far (not proven optimal)" if stopped else ""
    return SolveResult(problem="pipeline", solver="interleave-dp", status=OPTIMAL if proven else FEASIBLE,
                       objective=best.period, peak_memory=best.peak_memory,
                       lower_bound=best.period if proven else None, solve_time_s=elapsed, budget=budget,
                       schedule=best, scope=scope, message=note)


def _seconds(time_limit: Any) -> float | None:
    """`time_limit` as seconds >= 0 (None: no limit; 0: the DP does not run); `InputError` naming it
    otherwise."""
    if time_limit is None:
        return None
    seconds = float(time_limit) if isinstance(time_limit, numbers.Real) and not isinstance(time_limit, bool) \
        else math.nan
    if not seconds >= 0:  # NaN fails too
        raise InputError(f"must be a number of seconds >= 0 (None: no limit), got {time_limit!r}",
                         field=flag("time_limit"))
    return seconds


__all__ = ["DEFAULT_MAX_STATES", "in_flight", "interleave_dp", "solve_interleave_dp"]
