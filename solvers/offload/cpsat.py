"""Exact CP-SAT model of offloading without recomputation (the Euro-Par 2020 setting).

The compute operations run in the store-all order c_0..c_{2L} = F_all(0) .. F_all(L-1), Loss,
B(L-1) .. B(0); for every tape abar_j (j = 1..L-1; the last one is used at once) the model
decides whether it travels (o_j), and when the offload and the prefetch run. In ticks of
1/`scale` time units, with durations rounded up (d_k for compute, T_j for transfers; a compute op
lasts at least one tick, even one of no time, and so does a transfer, `duration_ticks`):

    e_k = s_k + d_k,                  s_k >= e_{k-1}                        (compute stream)
    so_j >= e(F_all(j-1)),  so_j >= s(F_all(j))                             (tape complete; issued after its reader)
    r_j = max(so_j + T_j, e(F_all(j)))                                      (device copy released)
    sp_j >= max(so_j + T_j, r_j),     s(B(j)) >= sp_j + T_j                  (prefetch before B(j) reads a_j)
    NoOverlap(Off_j, Pre_j over j with o_j)                                 (transfer stream)
    Cumulative(capacity M - x[0]):  overheads o_fa (F_all)/o_b on [s_k, e_k); tape abar_j on
        [s(F_all(j-1)), e(B(j-1))) if not o_j, else on [s(F_all(j-1)), r_j) and [sp_j, e(B(j-1)));
        gradient delta_j on [s(producer), e(B(j-1)))
    minimise e(B(0)).

Before CP-SAT runs, `forced_memory` (the memory every solution holds during some op, whatever is offloaded)
answers ``infeasible`` at once when it exceeds the capacity: exact for the model, and instant where CP-SAT can
take minutes to prove it at a fine tick.

Intervals are half-open, as the simulator releases before it allocates at equal times. The
solution is turned into an offloading schedule whose ops carry ``not_before`` = their start,
so the simulator replays exactly this timing (with true durations, never later). Memory is in
`slots` slots of budget/slots bytes, sizes rounded up (``slots=0``: exact bytes).

Status "optimal" is claimed for this model (fixed compute order, each tape offloaded at most
once, memory in slots when the scope says so) only when every duration is a whole number of
ticks (rounded durations make it "feasible"). The model's bound (``details["model_bound"]``)
bounds this scope only: a schedule that recomputes can be faster, so the reported
``lower_bound`` is the problem's own (every operation once, from the exact layer). The exact
layer referees the answer against pofo, offload-prefix, vdnn and none: when one of them is
faster (pofo recomputes, outside this scope) its schedule is returned, ``feasible``. With exact sizes
(``slots=0``) the fast solvers run at 500 slots, and pofo also at exact sizes, within the time limit
(`exact_free_hint.exact_size_seed`): the answer is never slower than pofo at exact sizes when that ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ortools.sat.python import cp_model

from ..chain import Chain
from ..chain.schedule import Bwd, F_all, Loss, Op
from ..discretize import capacity as discretize_capacity
from ..discretize import effective_slots, scope_text, size_in_slots, tick_scale, to_ticks
from ..errors import InputError, option_field
from ..exact.cpsat_runner import check_first, run_cpsat
from ..exact.interrupt import interrupted
from ..exact.layer import exact_solver
from ..exact.options import CPSAT_MEMORY, Deadline, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .exact_free_hint import exact_size_seed
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import simulate

#: the fast solvers that seed and referee this model, best first: pofo (which also tries
#: remat-only and rotor-offload) recomputes, outside this model's scope, so a faster schedule of
#: it is returned (`feasible`): the exact solver is never worse than a fast solver of its problem
FAST = ("pofo", "offload-prefix", "vdnn", "none")
#: the most ticks the durations of an instance (every operation once, every value sent once) may
#: come to with a `scale` given as an option: CP-SAT's domains must add up within 64 bits, and
#: 10^12 ticks is far finer than any timing needs
MAX_TICKS = 10**12
#: the most ticks the same durations may come to with the *default* scale: a finer default is made coarser (a power
#: of ten, `fit_scale`), so that the horizons of the models (which add transfers per phase or per idle gap), times
#: their variables, stay within CP-SAT's 64-bit domains on any accepted link (1e-20 bytes/s makes 1e23 ms transfers);
#: far above the ticks of any ordinary instance (about 10^4 per operation), whose scale it leaves alone
MAX_DEFAULT_TICKS = 10**9


def forced_memory(chain: Chain, size: Callable[[int], int], fixed: set[int]) -> tuple[int, str]:
    """The most memory (in `size` units: slots, or the chain's memory unit with ``slots=0``; the input x[0] not
    counted, as the Cumulative's capacity is the budget less it) that *every* solution of the model of the module
    docstring holds during one compute op, and that op's name: a necessary condition, cheap to check before CP-SAT.

    During an op (at least one tick long, every op is) the Cumulative holds each interval that contains it in all
    solutions, whatever is offloaded and whenever transfers run:

    * F_all(i): its overhead o_fa[i]; the tape abar_{i+1} it makes (born at its start); abar_i (i >= 1), held at
      least until e(F_all(i)), as an offloaded tape's device copy is released no earlier (r_i >= e(F_all(i)));
    * Loss: o_b[L], delta_L, abar_L (never offloaded);
    * B(k): o_b[k]; abar_{k+1} (its tape: prefetched before B(k+1) when offloaded, so resident through B(k));
      abar_k (k >= 1: a_k, read by B(k), prefetched before it); delta_{k+1} (read) and delta_k (made);
    * and the other tapes in `fixed` (that cannot travel: zero transfer ticks) alive then: abar_j for j < i at
      F_all(i), j < k at B(k), j < L at the loss (born before, used up by a later backward).

    So when the largest of these exceeds the capacity, the model has no solution: ``infeasible`` for this model is
    exact, as CP-SAT would answer with time enough (it can take minutes to prove it at a fine tick: the
    offload-only instance random_offload(2, 0, transfer_ratio=3.0, integer_times=True) at budget 28 holds x0 +
    abar1 + abar2 + delta2 + delta1 = 36 during B(1)). A coarser tick is no shortcut: durations are rounded up, so
    a coarser model restricts the timing (not a relaxation), and its infeasibility would prove nothing."""
    L = chain.length
    x, xbar = chain.x, chain.xbar

    def tapes(alive: range) -> int:
        return sum(size(int(xbar[j])) for j in alive if j in fixed)

    best = (-1, "")
    for i in range(L):
        held = size(int(chain.o_fa[i])) + size(int(xbar[i + 1])) + (size(int(xbar[i])) if i else 0) \
            + tapes(range(1, i))
        best = max(best, (held, f"F_all({i})"))
    held = size(int(chain.o_b[L])) + size(int(x[L])) + size(int(xbar[L])) + tapes(range(1, L))
    best = max(best, (held, "Loss"))
    for k in range(L):
        held = size(int(chain.o_b[k])) + size(int(xbar[k + 1])) + size(int(x[k + 1])) + size(int(x[k])) \
            + ((size(int(xbar[k])) + tapes(range(1, k))) if k else 0)
        best = max(best, (held, f"B({k})"))
    return best


def durations_total(inst: OffloadInstance) -> float:
    """Every operation once and every value sent once (time unit): the measure of `MAX_TICKS`; InputError naming
    host_link.bandwidth when the link makes it overflow (not finite)."""
    chain = inst.chain
    total = chain.total_time() + sum(inst.transfer_time(int(b)) for b in (*chain.x, *chain.xbar[1:]))
    if not math.isfinite(total * 4 * (chain.length + 1)):
        raise InputError(f"bandwidth {inst.bandwidth!r} bytes/s makes the transfer times overflow: give a larger "
                         "bandwidth", field="host_link.bandwidth")
    return total


def fit_scale(inst: OffloadInstance, scale: float) -> float:
    """The default `scale` (ticks per time unit), or the largest power of ten with which `durations_total` comes to
    at most `MAX_DEFAULT_TICKS` ticks when it would come to more (then durations are rounded up: not exact)."""
    total = durations_total(inst)
    if total * scale <= MAX_DEFAULT_TICKS:
        return scale
    return 10.0 ** math.floor(math.log10(MAX_DEFAULT_TICKS / total))


def duration_ticks(value: float, scale: float, *, least: int = 0) -> int:
    """Ticks of a duration of `value` time units: rounded up (`discretize.to_ticks`), at least one tick when it is
    positive (however short: a zero-tick op or transfer would let the replay run later than the model's pinned
    starts, or hide its memory from a Cumulative), and at least `least`."""
    ticks = to_ticks(value, scale)
    return max(ticks, least, 1 if value > 0 else 0)


def ticks_exact(value: float, scale: float, ticks: int) -> bool:
    """Whether `ticks` is `value` time units exactly (up to float noise), at `scale` ticks per time unit."""
    return abs(value * scale - ticks) < 1e-9


def check_scale_value(scale: Any) -> None:
    """The part of `check_scale` that needs no instance: None or a positive finite number (ticks
    per time unit); else `InputError` naming the option."""
    if scale is None:
        return
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"must be a positive finite number of ticks per time unit, got {scale!r}",
                         field=option_field("scale"))


def check_scale(inst: OffloadInstance, *, scale: Any = None, **_: Any) -> None:
    """The ``scale`` option of the offload CP-SAT solvers (cpsat, exact-combined, offload-exact):
    None (the default: chosen from the durations) or a positive finite number of ticks per time
    unit with which the instance's durations come to at most `MAX_TICKS` ticks; else `InputError`."""
    if scale is None:
        return
    check_scale_value(scale)
    field = option_field("scale")
    total = durations_total(inst)
    if total * scale > MAX_TICKS:
        raise InputError(f"{scale:g} ticks per time unit make the durations {total * scale:.3g} ticks, more than "
                         f"{MAX_TICKS:.0e}: give a smaller scale", field=field)


def store_all_order_setup(inst: OffloadInstance, budget: int, options: ExactOptions, scale: float | None
                          ) -> tuple[float, int, Callable[[int], int], int, str]:
    """What the offload-only models of the store-all order (`cpsat`, `milp`) share: (ticks per time unit,
    `scale` or `fit_scale` of `tick_scale` over every op and transfer duration; the slots in effect; the
    size-in-slots function; the capacity left beside a_0, in slots; the scope)."""
    chain = inst.chain
    L = chain.length
    times = [float(t) for t in (*chain.u_fa, *chain.u_b)] + [inst.transfer_time(int(b)) for b in chain.xbar[1:L]]
    if scale is None:
        scale = fit_scale(inst, tick_scale(times)[0])
    slots = effective_slots(budget, options.slots)
    size = size_in_slots(budget, slots)
    capacity = discretize_capacity(budget, slots) - size(int(chain.x[0]))
    scope = (f"offload-only (store-all order): no recomputation, each tape offloaded at most once, "
             f"times in ticks of 1/{scale:g}, " + scope_text(slots))
    return scale, slots, size, capacity, scope


@refuses("the offloading cpsat", "memory_gb", why=CPSAT_MEMORY)
@check_first(check_scale)
@exact_solver("offload", "cpsat", FAST, time_limit=30.0, workers=2, least=lambda inst: inst.chain.total_time(),
              reseed=exact_size_seed)
def solve_cpsat(inst: OffloadInstance, budget: int, *, options: ExactOptions, deadline: Deadline,
                seed: SolveResult | None = None, scale: float | None = None, **_: Any) -> SolveResult:
    """The model of the module docstring (time limit default 30 s, 2 workers). `scale`: ticks per
    time unit (default `solvers.discretize.tick_scale`: exact when every duration allows it; given,
    a positive number with which the durations come to at most `MAX_TICKS` ticks, `check_scale`)."""
    chain = inst.chain
    L = chain.length
    scale, slots, size, capacity, scope = store_all_order_setup(inst, budget, options, scale)
    T = {j: duration_ticks(inst.transfer_time(int(chain.xbar[j])), scale) for j in range(1, L)}
    forced, at = forced_memory(chain, size, {j for j, t in T.items() if t == 0})
    if 0 <= capacity < forced:  # a necessary condition of the model (`forced_memory`): exact, and instant
        unit = " slots" if slots else ""  # else the chain's memory unit
        return SolveResult(problem="offload", solver="cpsat", status=INFEASIBLE, budget=budget, scope=scope,
                           message=f"proven infeasible for this model: {at} must hold {forced}{unit} "
                                   f"besides the input, more than the {capacity}{unit} left")

    ops: list[Op] = [F_all(i) for i in range(L)] + [Loss(L)] + [Bwd(i) for i in reversed(range(L))]
    F = {i: i for i in range(L)}
    LOSS_K = L
    Bk = {i: 2 * L - i for i in range(L)}
    durations = [float(chain.u_fa[i]) for i in range(L)] + [float(chain.u_b[L])] + \
                [float(chain.u_b[i]) for i in reversed(range(L))]
    # every compute op lasts at least one tick, even one of no time: the Cumulative charges no zero-length interval
    # (while the simulator charges an op of no time its output, overhead and inputs); paid transfers too
    d = [duration_ticks(t, scale, least=1) for t in durations]
    horizon = sum(d) + 2 * sum(T.values()) + 1

    m = cp_model.CpModel()
    s = [m.new_int_var(0, horizon, f"s{k}") for k in range(len(ops))]
    e = [m.new_int_var(0, horizon, f"e{k}") for k in range(len(ops))]
    for k in range(len(ops)):
        m.add(e[k] == s[k] + d[k])
        if k:
            m.add(s[k] >= e[k - 1])
    intervals, demands = [], []

    def hold(start, end, demand: int, name: str, present=None) -> None:
        if demand <= 0:
            return
        length = m.new_int_var(0, horizon, f"len_{name}")
        if present is None:
            iv = m.new_interval_var(start, length, end, name)
        else:
            iv = m.new_optional_interval_var(start, length, end, present, name)
        intervals.append(iv)
        demands.append(demand)

    for k, op in enumerate(ops):
        over = int(chain.o_b[op.index] if op.kind != "F_all" else chain.o_fa[op.index])  # F_all: o_fa
        hold(s[k], e[k], size(over), f"over{k}")
    # gradients delta_j, from their producer's start to the end of B(j-1); delta_0 to the end
    hold(s[LOSS_K], e[Bk[L - 1]], size(int(chain.x[L])), "delta_L")
    for j in range(1, L):
        hold(s[Bk[j]], e[Bk[j - 1]], size(int(chain.x[j])), f"delta{j}")
    hold(s[Bk[0]], e[Bk[0]], size(int(chain.x[0])), "delta0")

    offload, transfer_ivs, so, sp, release = {}, [], {}, {}, {}
    for j in range(1, L + 1):
        tape = size(int(chain.xbar[j]))
        born, dies = s[F[j - 1]], e[Bk[j - 1]]
        if j == L or T[j] == 0 or tape == 0:
            hold(born, dies, tape, f"tape{j}")
            continue
        o = m.new_bool_var(f"o{j}")
        offload[j] = o
        hold(born, dies, tape, f"tape{j}", o.negated())
        so[j] = m.new_int_var(0, horizon, f"so{j}")
        sp[j] = m.new_int_var(0, horizon, f"sp{j}")
        release[j] = m.new_int_var(0, horizon, f"r{j}")
        off_end = m.new_int_var(0, horizon, f"oe{j}")
        m.add(off_end == so[j] + T[j])
        m.add_max_equality(release[j], [off_end, e[F[j]]])
        m.add(so[j] >= e[F[j - 1]]).only_enforce_if(o)
        m.add(so[j] >= s[F[j]]).only_enforce_if(o)
        m.add(sp[j] >= release[j]).only_enforce_if(o)
        m.add(s[Bk[j]] >= sp[j] + T[j]).only_enforce_if(o)
        m.add(so[j] == 0).only_enforce_if(o.negated())
        m.add(sp[j] == 0).only_enforce_if(o.negated())
        transfer_ivs.append(m.new_optional_fixed_size_interval_var(so[j], T[j], o, f"off{j}"))
        transfer_ivs.append(m.new_optional_fixed_size_interval_var(sp[j], T[j], o, f"pre{j}"))
        hold(born, release[j], tape, f"tapeA{j}", o)
        hold(sp[j], dies, tape, f"tapeB{j}", o)
    m.add_no_overlap(transfer_ivs)
    if capacity < 0:
        return SolveResult(problem="offload", solver="cpsat", status=INFEASIBLE, budget=budget, scope=scope,
                           message="the input alone exceeds the budget")
    m.add_cumulative(intervals, demands, capacity)
    m.minimize(e[-1])

    if options.warm_start and offload and seed is not None:
        # the seed's tapes: vdnn offloads every tape, offload-prefix the first k, none no tape
        k_off: int | None = {"vdnn": L, "none": 0}.get(seed.solver, seed.details.get("offloaded_stages"))
        if k_off is not None:
            for j, o in offload.items():
                m.add_hint(o, 1 if j - 1 < k_off else 0)

    run = run_cpsat(m, deadline, options, scale=scale)
    if run.status == INFEASIBLE:
        return SolveResult(problem="offload", solver="cpsat", status=INFEASIBLE, budget=budget, scope=scope,
                           log=run.log, message="proven infeasible for this model")
    if run.status not in (OPTIMAL, FEASIBLE):
        return SolveResult(problem="offload", solver="cpsat", status=TIMEOUT, budget=budget, scope=scope,
                           log=run.log, message="no solution before the interrupt" if interrupted()
                           else "no solution within the time limit")
    solver = run.solver
    timed: list[tuple[int, int, Op | Transfer]] = [(solver.value(s[k]), 0, op) for k, op in enumerate(ops)]
    for j, o in offload.items():
        if solver.value(o):
            timed.append((solver.value(so[j]), 1, Off("abar", j)))
            timed.append((solver.value(sp[j]), 2, Pre("abar", j)))
    timed.sort(key=lambda item: (item[0], item[1]))
    schedule = OffloadSchedule([op for _, _, op in timed], L, [t / scale for t, _, _ in timed])
    sim = simulate(inst, schedule)
    whole_ticks = all(ticks_exact(t, scale, dk) for t, dk in zip(durations, d)) and all(
        ticks_exact(inst.transfer_time(int(chain.xbar[j])), scale, T[j]) for j in T)
    # the model's bound holds for its scope only (store-all order, no recomputation): a schedule
    # that recomputes can be faster, so it is kept in details and never reported as lower_bound;
    # the exact layer reports the problem's own bound (every operation once, `least`)
    model_bound = run.bound if whole_ticks and slots == 0 else None
    # with durations rounded up to ticks the model's optimum proves nothing about the real
    # durations: "optimal" (for the scope, which names any slots) only when every tick is whole
    status = run.status if whole_ticks or run.status != OPTIMAL else FEASIBLE
    return SolveResult(
        problem="offload", solver="cpsat", status=status,
        objective=sim.makespan, peak_memory=sim.peak_memory, lower_bound=None, schedule=schedule, budget=budget,
        scope=scope, log=run.log,
        details={"model_makespan": run.objective, "model_bound": model_bound, "transfers": len(schedule.transfers()),
                 "host_peak": sim.host_peak},
    )
