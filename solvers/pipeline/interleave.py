"""Interleaved (non-contiguous) allocation, after MadPipe: the chain is cut into S contiguous
stages and several stages may share a device (``Partition.device_of``), so that a device can
pair a heavy early stage (many micro-batches in flight) with a light late one.

Model (`solvers.pipeline.simulator`): stage s keeps n_s = min(S - s, m) micro-batches in flight
under 1F1B (S - s when m is not given; m under GPipe), so its memory
M_s = ceil(kappa W_s) + n_s A_s + Q_s is known once its layers and its position from the end
t = S - s are; a device's memory is the sum of M_s over its
stages, its load the sum of the stage times tau_s; the period is the largest load or link time
(no transfer between consecutive stages on the same device).

- ``interleave`` (fast, `solve_interleave`): the memory-aware contiguous DP's straight
  partition (at most min(P, ``max_stages``) stages), and for S = P + 1 .. ``max_stages``
  (default 2P) the time-balanced contiguous cut into at most S stages whose stages are placed
  largest-time first on the least-loaded device where they fit; the best replayed allocation.
  ``feasible`` (a heuristic: the problem is NP-hard), never worse than ``madpipe`` (with
  ``max_stages`` >= P). When none of its allocations fits: ``infeasible`` for this heuristic only
  (no ``min_budget``; the message says it found nothing, which is no proof: ``interleave-dp`` may
  find one).
- ``interleave-v`` (DP, `solve_interleave_v`): optimal among straight pipelines and V-shaped
  allocations (2P stages, device k holding stages k and 2P-1-k: the first stage, with the most
  micro-batches in flight, shares its device with the last, which holds one), by the
  outside-in recurrence of `v_shape_dp` (O(L^4 P); at most MAX_V_LAYERS layers); with
  ``max_stages`` below 2P, straight pipelines of at most ``max_stages`` stages only. A
  ``time_limit`` stops the V-shaped DP (checked once per state): the straight pipeline, ``feasible``.
- ``interleave-cpsat`` (exact, `solve_interleave_cpsat`): one Boolean x[i, j, t] per candidate
  stage (layers i..j at position t, t <= max_stages) with the path constraints of
  `solvers.pipeline.cpsat`, one Boolean z[t, p] per position and device (exactly one device per
  used position; devices p < min(P, T) only: an allocation of at most T stages uses at most T
  devices, and the devices are interchangeable, so relabelling them 0.. loses nothing); device
  loads and memories are sums of per-position integers enforced by z;
  the link time of position t counts unless positions t + 1 and t share a device. Times are
  integers after `solvers.discretize.integer_costs` (6 significant digits; the scope says when
  that rounds). Optimal among interleaved allocations with at most ``max_stages`` stages; its seeds
  (`FAST`) honour ``max_stages``, and the build checks the deadline (`cpsat.tick`). No row of the
  model has Boolean coefficients summing past `ROW_LIMIT` (a CP-SAT bug; `fit_times`, `fit_memory`):
  memory is counted in units of the sizes' gcd (exact); where that is not enough, in a coarser
  unit rounded down (a relaxation, whose plan is kept when it fits in bytes), else rounded up
  (``feasible``); times are coarsened the same way; the scope says when either rounds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence
from functools import reduce
from typing import Any

import numpy as np

from ..discretize import integer_costs
from ..errors import InputError, option_field
from ..exact.cpsat_runner import ROW_LIMIT, run_cpsat
from ..exact.layer import exact_solver
from ..exact.options import CPSAT_MEMORY, Deadline, DeadlineExceeded, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .cpsat import straight_only, tick
from .dp import _defaults, _prefix, partition_dp, stage_arrays, stopped_answer
from .instance import Pipeline
from .interleave_dp import _seconds, in_flight
from .schedule import Partition
from .simulator import simulate


def _stage_values(inst: Pipeline, bounds: list[tuple[int, int]], schedule: str, m: int | None
                  ) -> tuple[list[float], list[int]]:
    """(tau_s, M_s) of contiguous stages `bounds` with n_s = min(S - s, m) (1F1B) or m (`in_flight`)."""
    pre = _prefix(inst)
    S = len(bounds)
    taus, mems = [], []
    for k, (i, j) in enumerate(bounds):
        arr = stage_arrays(inst, pre, i)
        n = in_flight(S - k, schedule, m)
        taus.append(float(arr["fb"][j - i]))
        mems.append(int(arr["wmem"][j - i]) + n * int(arr["stash"][j - i]) + int(arr["buffers"][j - i]))
    return taus, mems


def place(taus: list[float], mems: list[int], P: int, budget: int | None) -> list[int] | None:
    """Largest-time-first placement of stages on the least-loaded device where they fit."""
    load, held = [0.0] * P, [0] * P
    dev = [-1] * len(taus)
    for k in sorted(range(len(taus)), key=lambda k: -taus[k]):
        fits = [p for p in range(P) if budget is None or held[p] + mems[k] <= budget]
        if not fits:
            return None
        p = min(fits, key=lambda p: (load[p], p))
        dev[k] = p
        load[p] += taus[k]
        held[p] += mems[k]
    return dev


def positive_count(value: Any, key: str) -> int | None:
    """Solver option `key` (``max_stages``, ``max_states``) as an int >= 1, or None when not given
    (the solver's default); `InputError` naming the option otherwise (0 is not "the default")."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise InputError(f"must be an integer >= 1, got {value!r}", field=option_field(key))
    return int(value)


def stage_cap(length: int, devices: int, max_stages: Any) -> int:
    """The most stages an interleaved allocation of `length` layers may have: ``max_stages``
    (default 2 x `devices`), at most `length`."""
    given = positive_count(max_stages, "max_stages")
    return min(length, given if given is not None else 2 * devices)


def solve_interleave(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
                     micro_batches: int | None = None, max_stages: int | None = None, **_: Any) -> SolveResult:
    """The heuristic of the module docstring."""
    start = time.perf_counter()
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    L = inst.length
    smax = stage_cap(L, P, max_stages)
    scope = (f"interleaved allocations of <= {smax} contiguous stages on <= {P} devices "
             "(heuristic, no optimality claim)")
    best: Partition | None = None
    # the straight pipeline has at most min(P, smax) stages: never more than max_stages
    straight = partition_dp(inst, min(P, smax), budget, schedule=schedule, micro_batches=m)
    if straight is not None:
        best = Partition.from_bounds([(a, b) for a, b, _ in straight[1]], schedule=schedule, micro_batches=m,
                                     devices=P)
        best.device_of = list(range(len(best.stages)))
        best.evaluated(inst)
    for S in range(P + 1, smax + 1):
        cut = partition_dp(inst, S, None, schedule=schedule, micro_batches=m)
        if cut is None:
            continue
        bounds = [(a, b) for a, b, _ in cut[1]]
        taus, mems = _stage_values(inst, bounds, schedule, m)
        dev = place(taus, mems, P, budget)
        if dev is None:
            continue
        part = Partition.from_bounds(bounds, schedule=schedule, micro_batches=m, devices=P)
        part.device_of = dev
        ev = simulate(inst, part, budget, devices=P)
        if ev.violation is None and (best is None or ev.period < (best.period or math.inf)):
            best = part.evaluated(inst)
    elapsed = time.perf_counter() - start
    if best is None:
        return _heuristic_found_nothing(budget, scope, elapsed)
    lower = max(inst.total_time() / P, float(np.max(inst.fwd + inst.bwd)))
    assert best.period is not None
    return SolveResult(problem="pipeline", solver="interleave", status=FEASIBLE, objective=best.period,
                       peak_memory=best.peak_memory, lower_bound=min(lower, best.period), solve_time_s=elapsed,
                       budget=budget, schedule=best, scope=scope)


def _heuristic_found_nothing(budget: int, scope: str, elapsed: float) -> SolveResult:
    """`solve_interleave`'s answer when none of its allocations fits `budget` (bytes per device):
    ``infeasible`` for this heuristic only, as for the other heuristics (docs/CONVENTIONS.md,
    *Status words*; exit 1): no ``min_budget``, ``details["heuristic"]``, and a message saying
    that the heuristic found nothing, which proves nothing about the scope (`elapsed`: seconds)."""
    return SolveResult(problem="pipeline", solver="interleave", status=INFEASIBLE, budget=budget,
                       min_budget=None, solve_time_s=elapsed, scope=scope, details={"heuristic": True},
                       message=("the interleave heuristic found nothing that fits, which is no proof that no "
                                "allocation does (interleave-dp and interleave-cpsat search the whole scope)"))


# ROW_LIMIT (`exact.cpsat_runner`): the largest sum of the Boolean coefficients of one row, below
# CP-SAT 9.15's presolve overflow (or-tools #5293); here it made the memory row of a position charge
# every device: the model proved 124.3 ms optimal on VGG-16, P = 4, where 88.8 ms fits.


def row_sum(values: Sequence[int], rows: Sequence[Hashable]) -> int:
    """The largest sum of |values| over one row (`rows`: the row of each value, e.g. its position)."""
    sums: dict[Hashable, int] = {}
    for v, r in zip(values, rows):
        sums[r] = sums.get(r, 0) + abs(int(v))
    return max(sums.values(), default=0)


def fit_memory(mems: Sequence[int], positions: Sequence[int], cap: int, limit: int = ROW_LIMIT, *,
               up: bool = True) -> tuple[list[int], int, int, bool]:
    """Memories (bytes, >= 0) and capacity in units small enough for CP-SAT: ``(units, capacity,
    unit, exact)``. The unit is the gcd of the memories (exact: a sum of multiples of g fits `cap`
    iff it fits g * floor(cap / g)), a multiple of it when a position's sum would pass `limit`;
    then, with `up`, memories rounded up and the capacity down (a plan that fits in units fits in
    bytes), else memories down and the capacity up (a relaxation: every plan that fits in bytes
    fits in units); ``exact`` when every memory is a multiple of the unit. The capacity is at most
    the sum over positions of their largest memory (no device holds more): a huge budget stays small."""
    g = reduce(math.gcd, (int(m) for m in mems), 0) or 1
    need = row_sum(mems, positions)
    unit = g if need <= g * limit else g * -(-need // (g * limit))
    units = [-(-int(m) // unit) if up else int(m) // unit for m in mems]
    exact = all(int(m) % unit == 0 for m in mems)
    largest: dict[int, int] = {}
    for u, t in zip(units, positions):
        largest[t] = max(largest.get(t, 0), u)
    room = int(cap) // unit if up or exact else -(-int(cap) // unit)
    return units, min(room, sum(largest.values())), unit, exact


def fit_times(ints: Sequence[int], rows: Sequence[Hashable], scale: float, limit: int = ROW_LIMIT
              ) -> tuple[list[int], float, bool]:
    """Integer times (`integer_costs`'s, ``scale`` ticks per unit) coarsened by the least integer
    factor f that keeps every row's sum within `limit`: ``(ints / f rounded, scale / f, exact)``;
    f = 1 (unchanged, exact) in the usual case. `rows`: the row of each value."""
    need = row_sum(ints, rows)
    if need <= limit:
        return list(ints), scale, True
    f = -(-need // limit)
    return [int(round(v / f)) for v in ints], scale / f, all(int(v) % f == 0 for v in ints)


#: the seeds of `solve_interleave_cpsat`: both honour ``max_stages`` (the exact layer adopts a better
#: seed, so a seed outside the model's scope would be returned as its answer); `madpipe` is not one:
#: it ignores ``max_stages``, and `interleave` starts from the same straight DP
FAST = ("interleave", "interleave-v")


@refuses("interleave-cpsat", "memory_gb", why=CPSAT_MEMORY)
@straight_only
@exact_solver("pipeline", "interleave-cpsat", FAST)
def solve_interleave_cpsat(inst: Pipeline, budget: int, *, options: ExactOptions, deadline: Deadline,
                           seed: SolveResult | None = None, devices: int | None = None, schedule: str = "1f1b",
                           micro_batches: int | None = None, max_stages: int | None = None,
                           **_: Any) -> SolveResult:
    """The CP-SAT model of the module docstring."""
    start = time.perf_counter()
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    L = inst.length
    T = stage_cap(L, P, max_stages)
    pre = _prefix(inst)
    cand: list[tuple[int, int, int, float, float, int]] = []  # i, j, t, tau, link, memory
    for i in range(L):
        deadline.check()
        arr = stage_arrays(inst, pre, i)
        link = inst.comm_time(2.0 * inst.input_of(i), 2 * inst.messages_into(i)) if i > 0 else 0.0
        for t in range(1, T + 1):
            if i + t > L:
                break
            n = in_flight(t, schedule, m)
            for k in range(L - i):
                j = i + k
                if (t == 1) != (j == L - 1) or j + t - 1 > L - 1:
                    continue
                mem = int(arr["wmem"][k]) + n * int(arr["stash"][k]) + int(arr["buffers"][k])
                if budget is not None and mem > budget:
                    continue
                cand.append((i, j, t, float(arr["fb"][k]), link, mem))
    ints, scale, times_exact = integer_costs([c[3] for c in cand] + [c[4] for c in cand])
    # times and memories small enough that no row's Boolean coefficients pass ROW_LIMIT (CP-SAT bug)
    rows = [("tau", c[2]) for c in cand] + [("link", c[2]) for c in cand]  # the rows w_t = tau_t, T >= c_t
    ints, scale, coarse_exact = fit_times(ints, rows, scale)
    times_exact = times_exact and coarse_exact
    scope = (f"interleaved allocations of <= {T} contiguous stages on <= {P} devices"
             + ("" if times_exact else ", times rounded to 6 significant digits" if coarse_exact
                else ", times rounded (coarsened for CP-SAT)"))
    if not any(c[0] == 0 for c in cand) or not any(c[2] == 1 for c in cand):
        return _none(inst, budget, P, schedule, m, start, scope)
    mems, positions = [c[5] for c in cand], [c[2] for c in cand]
    cap0 = int(budget) if budget is not None else sum(mems)
    # memory rounded down, capacity up (exact when every size is a multiple of the unit): a relaxation
    mem_u, cap, unit, _whole = fit_memory(mems, positions, cap0, up=False)
    Pm = model_devices(P, T)
    run, part = _solve_model(inst, cand, ints, scale, mem_u, cap, Pm, T, schedule, m, deadline, options, P)
    if run.status == INFEASIBLE:  # no plan fits the relaxation: none fits the budget
        return _none(inst, budget, P, schedule, m, start, scope)
    bound = run.bound if times_exact else None  # the relaxation's bound holds for the problem
    status = run.status if times_exact else FEASIBLE
    if part is not None and budget is not None and simulate(inst, part, budget, devices=P).violation is not None:
        # the relaxed plan overflows by a few units: memory rounded up, capacity down (every plan fits)
        mem_u, cap, unit, _whole = fit_memory(mems, positions, cap0, up=True)
        scope += f", memory in units of {unit} bytes rounded up"
        run, part = _solve_model(inst, cand, ints, scale, mem_u, cap, Pm, T, schedule, m, deadline, options, P)
        status = FEASIBLE
    elapsed = time.perf_counter() - start
    if part is None:
        why = (f"no allocation with memory rounded up to units of {unit} bytes (exact sizes may fit)"
               if run.status == INFEASIBLE else f"CP-SAT: {run.backend_status}")
        return SolveResult(problem="pipeline", solver="interleave-cpsat", status=TIMEOUT, budget=budget,
                           solve_time_s=elapsed, scope=scope, message=why, lower_bound=bound)
    part.evaluated(inst)
    assert part.period is not None
    return SolveResult(problem="pipeline", solver="interleave-cpsat", status=status, objective=part.period,
                       peak_memory=part.peak_memory,
                       lower_bound=None if bound is None else min(bound, part.period), solve_time_s=elapsed,
                       budget=budget, schedule=part, scope=scope,
                       details={"variables": len(cand) + 3 * Pm * T, "memory_unit": unit})


def model_devices(devices: int, positions: int) -> int:
    """The devices `interleave-cpsat` models for `devices` (P) and at most `positions` (T) stages:
    min(P, T). Each stage sits on one device, so an allocation uses at most T of them, and the
    devices are interchangeable (same memory, no topology): relabelling the used ones 0, 1, ..
    keeps every load, memory and link, so the optimum over min(P, T) devices is the optimum over P."""
    return max(1, min(int(devices), int(positions)))


def _solve_model(inst: Pipeline, cand: list[tuple[int, int, int, float, float, int]], ints: list[int],
                 scale: float, mem_u: list[int], cap: int, P: int, T: int, schedule: str, m: int | None,
                 deadline: Deadline, options: ExactOptions, devices: int | None = None) -> tuple[Any, Partition | None]:
    """Build and solve the model of the module docstring for candidates `cand` (i, j, t, tau, link,
    bytes) with integer times `ints` (taus then links, `scale` ticks per unit) and memories `mem_u`
    against `cap` (the same unit), on `P` modelled devices (`model_devices`) of the `devices` given
    (None: P), which the plan's partition names. Returns (the backend run, its plan or None)."""
    from ortools.sat.python import cp_model

    L = inst.length
    tau_i, link_i = ints[: len(cand)], ints[len(cand):]
    model = cp_model.CpModel()
    x = []
    for n in range(len(cand)):
        tick(deadline, n)
        x.append(model.new_bool_var(""))
    top = sum(tau_i) + max(link_i, default=0) + 1
    period = model.new_int_var(0, top, "period")
    starts: dict[tuple[int, int], list[Any]] = {}
    ends: dict[tuple[int, int], list[Any]] = {}
    at_position: dict[int, list[tuple[Any, int]]] = {}  # t -> (Boolean, index in cand) of its candidates
    for n, (var, c) in enumerate(zip(x, cand)):
        tick(deadline, n)
        starts.setdefault((c[0], c[2]), []).append(var)
        ends.setdefault((c[1], c[2]), []).append(var)
        at_position.setdefault(c[2], []).append((var, n))
    model.add_exactly_one([var for var, c in zip(x, cand) if c[0] == 0])
    model.add_exactly_one(ends.get((L - 1, 1), []))
    for l in range(1, L):
        deadline.check()
        for t in range(1, T):
            into, out = ends.get((l - 1, t + 1), []), starts.get((l, t), [])
            if into or out:
                model.add(sum(into) == sum(out))
    z = [[model.new_bool_var("") for _ in range(P)] for _ in range(T + 1)]
    load: list[list[Any]] = [[] for _ in range(P)]  # per device: its time in each round (CP-SAT vars)
    held: list[list[Any]] = [[] for _ in range(P)]  # per device: its memory in each round
    for t in range(1, T + 1):
        deadline.check()
        at = at_position.get(t, [])
        used = sum(var for var, _ in at)
        model.add(sum(z[t]) == used)
        tau_t = sum(tau_i[k] * var for var, k in at)
        mem_t = sum(mem_u[k] * var for var, k in at)
        for p in range(P):
            w = model.new_int_var(0, top, "")
            model.add(w == tau_t).only_enforce_if(z[t][p])
            model.add(w == 0).only_enforce_if(z[t][p].Not())
            load[p].append(w)
            h = model.new_int_var(0, cap, "")
            model.add(h == mem_t).only_enforce_if(z[t][p])
            model.add(h == 0).only_enforce_if(z[t][p].Not())
            held[p].append(h)
        if t < T:  # the input of position t comes from position t + 1: free on the same device
            same = [model.new_bool_var("") for _ in range(P)]
            for p in range(P):
                model.add_implication(same[p], z[t][p])
                model.add_implication(same[p], z[t + 1][p])
            link_t = sum(link_i[k] * var for var, k in at)
            model.add(period >= link_t).only_enforce_if([s.Not() for s in same])
    for p in range(P):
        model.add(period >= sum(load[p]))
        model.add(sum(held[p]) <= cap)
    model.add(z[1][0] == 1)  # the last stage on device 0 (devices are interchangeable)
    model.minimize(period)
    run = run_cpsat(model, deadline, options, scale=scale)
    if run.status not in (OPTIMAL, FEASIBLE):
        return run, None
    solver = run.solver
    chosen = sorted((c for var, c in zip(x, cand) if solver.value(var)), key=lambda c: c[0])
    dev = [next(p for p in range(P) if solver.value(z[c[2]][p])) for c in chosen]
    part = Partition.from_bounds([(c[0], c[1]) for c in chosen], schedule=schedule, micro_batches=m,
                                 devices=P if devices is None else int(devices))
    part.device_of = dev
    return run, part


def _none(inst: Pipeline, budget: int | None, P: int, schedule: str, m: int | None, start: float,
          scope: str) -> SolveResult:
    return SolveResult(problem="pipeline", solver="interleave-cpsat", status=INFEASIBLE, budget=budget,
                       min_budget=None, solve_time_s=time.perf_counter() - start, scope=scope,
                       message=f"no interleaved allocation fits {budget} bytes per device")


# ---------------------------------------------------------------------------- V-shaped allocations
#: the V-shaped DP's tables grow as L^4 P: refused beyond this many layers
MAX_V_LAYERS = 80


def check_v_length(layers: int, path: str | None = None) -> None:
    """`InputError` on ``layers`` (with the instance's file `path` when known: the command line checks
    it before solving, `_checks.check_work`) for more than `MAX_V_LAYERS` layers (`solve_interleave_v`)."""
    if layers > MAX_V_LAYERS:
        raise InputError(f"the V-shaped DP handles at most {MAX_V_LAYERS} layers (its tables grow as L^4 P), "
                         f"the instance has {layers}", path=path, field="layers")


def v_shape_dp(inst: Pipeline, P: int, budget: int | None, *, schedule: str = "1f1b",
               micro_batches: int | None = None, deadline: Deadline | None = None
               ) -> tuple[float, list[tuple[int, int]]] | None:
    """Best V-shaped allocation: 2P contiguous stages, device k holding stages k and 2P-1-k
    (the first stage, with min(2P, m) micro-batches in flight under 1F1B, shares a device with the
    last, which holds one). Outside-in over the middle part [i, j] left after k pairs:

        V(k, i, j) = min_{a < b} max( tau(i, a) + tau(b, j), c(i) [k > 0], c(b) [k < P - 1],
                                      V(k + 1, a + 1, b - 1) )   s.t.  M(i, a, 2P - k) + M(b, j, k + 1) <= budget
        V(P - 1, i, j) = min_a max( tau(i, a) + tau(a + 1, j), c(i) )   (the two stages meet on device P - 1)

    with the simulator's tau, c and M, M(i, j, t) charging `in_flight` (t) micro-batches: min(t, m) under
    1F1B (t when m is not given), m under GPipe. Returns (period, stage bounds) or None.
    `deadline` (None: none) is checked once per state computed, before its O(L^2) pairs (a few ms
    at 80 layers; ~L^2 P / 2 states, one check ~0.2 us each): `DeadlineExceeded` once it is spent."""
    L = inst.length
    if 2 * P > L:
        return None
    pre = _prefix(inst)
    m = int(micro_batches or 0)
    arrs = [stage_arrays(inst, pre, i) for i in range(L)]
    link = [inst.comm_time(2.0 * inst.input_of(i), 2 * inst.messages_into(i)) if i > 0 else 0.0 for i in range(L)]
    limit = math.inf if budget is None else float(budget)

    def mem(i: int, j: int, n: int) -> float:
        a = arrs[i]
        return float(a["wmem"][j - i] + n * a["stash"][j - i] + a["buffers"][j - i])

    def tau(i: int, j: int) -> float:
        return float(arrs[i]["fb"][j - i])

    memo: dict[tuple[int, int, int], tuple[float, tuple[int, int] | None]] = {}

    def V(k: int, i: int, j: int) -> float:
        key = (k, i, j)
        if key in memo:
            return memo[key][0]
        if deadline is not None:
            deadline.check()
        n_front, n_back = in_flight(2 * P - k, schedule, m), in_flight(k + 1, schedule, m)
        best, arg = math.inf, None
        if k == P - 1:
            for a in range(i, j):
                if mem(i, a, n_front) + mem(a + 1, j, n_back) > limit:
                    continue
                v = max(tau(i, a) + tau(a + 1, j), link[i] if k > 0 else 0.0)
                if v < best:
                    best, arg = v, (a, a + 1)
        else:
            need = 2 * (P - k - 1)  # layers the inner pairs need
            for a in range(i, j + 1):
                for b in range(a + 1 + need, j + 1):
                    if mem(i, a, n_front) + mem(b, j, n_back) > limit:
                        continue
                    v = max(tau(i, a) + tau(b, j), link[i] if k > 0 else 0.0, link[b])
                    if v >= best:
                        continue
                    v = max(v, V(k + 1, a + 1, b - 1))
                    if v < best:
                        best, arg = v, (a, b)
        memo[key] = (best, arg)
        return best

    value = V(0, 0, L - 1)
    if not math.isfinite(value):
        return None
    fronts, backs, k, i, j = [], [], 0, 0, L - 1
    while True:
        a, b = memo[(k, i, j)][1]  # type: ignore[misc]
        fronts.append((i, a))
        backs.append((b, j))
        if k == P - 1:
            break
        k, i, j = k + 1, a + 1, b - 1
    return value, fronts + backs[::-1]


def solve_interleave_v(inst: Pipeline, budget: int, *, devices: int | None = None, schedule: str = "1f1b",
                       micro_batches: int | None = None, max_stages: int | None = None,
                       time_limit: float | None = None, **_: Any) -> SolveResult:
    """The better of the straight memory-aware DP (`madpipe`) and `v_shape_dp`: optimal among
    straight pipelines and V-shaped allocations on P devices. Never more than ``max_stages``
    stages (default 2P): straight pipelines of at most that many, and no V shape below 2P.
    `time_limit` (s, wall clock, None: none; 0: the V-shaped DP stops at once) bounds the V-shaped
    DP (the straight DP, ~10 ms, always runs); past it the answer is the straight pipeline as
    ``feasible`` (``timeout`` when none fits), the message saying so."""
    start = time.perf_counter()
    deadline = Deadline(_seconds(time_limit), start)
    P, schedule, m = _defaults(devices, schedule, micro_batches)
    given = positive_count(max_stages, "max_stages")
    check_v_length(inst.length)
    with_v = given is None or given >= 2 * P
    smax = stage_cap(inst.length, P, given)
    scope = (f"straight pipelines and V-shaped allocations (device k: stages k and 2P-1-k) on <= {P} devices"
             if with_v else f"straight pipelines of <= {min(P, smax)} stages on <= {P} devices "
             f"(max_stages {given} < 2P: no V shape)")
    cands: list[Partition] = []
    straight = partition_dp(inst, min(P, smax), budget, schedule=schedule, micro_batches=m)
    if straight is not None:
        part = Partition.from_bounds([(a, b) for a, b, _ in straight[1]], schedule=schedule, micro_batches=m,
                                     devices=P)
        part.device_of = list(range(len(part.stages)))
        cands.append(part.evaluated(inst))
    try:
        v = v_shape_dp(inst, P, budget, schedule=schedule, micro_batches=m, deadline=deadline) if with_v else None
    except DeadlineExceeded:
        return _v_stopped(cands, budget, P, deadline)
    if v is not None:
        part = Partition.from_bounds(v[1], schedule=schedule, micro_batches=m, devices=P)
        part.device_of = [min(s, 2 * P - 1 - s) for s in range(2 * P)]
        cands.append(part.evaluated(inst))
    elapsed = time.perf_counter() - start
    if not cands:
        return SolveResult(problem="pipeline", solver="interleave-v", status=INFEASIBLE, budget=budget,
                           solve_time_s=elapsed, scope=scope, message=f"nothing fits {budget} bytes per device")
    best = min(cands, key=lambda p: p.period or math.inf)
    assert best.period is not None
    return SolveResult(problem="pipeline", solver="interleave-v", status=OPTIMAL, objective=best.period,
                       peak_memory=best.peak_memory, lower_bound=best.period, solve_time_s=elapsed, budget=budget,
                       schedule=best, scope=scope)


def _v_stopped(straight: list[Partition], budget: int | None, P: int, deadline: Deadline) -> SolveResult:
    """`solve_interleave_v`'s answer when `deadline` came before the V-shaped DP ended: the straight
    pipeline (`straight`: the memory-aware DP's, evaluated, or empty) as ``feasible``, not proven
    optimal among V shapes and no lower bound; ``timeout`` when no straight pipeline fits."""
    return stopped_answer("interleave-v", straight[0] if straight else None, budget, deadline.elapsed(),
                          stop=f"the time limit of {deadline.limit:g} s came before the V-shaped DP ended",
                          scope=f"straight pipelines on <= {P} devices (the V-shaped DP did not end)",
                          fallback="the straight pipeline",
                          none_fits=f"no straight pipeline fits {budget} bytes per device")


__all__ = ["FAST", "MAX_V_LAYERS", "ROW_LIMIT", "check_v_length", "fit_memory", "fit_times", "model_devices", "place",
           "row_sum", "solve_interleave", "solve_interleave_cpsat", "solve_interleave_v", "v_shape_dp"]
