"""Exact MILP of offloading without recomputation: the problem and scope of offload `cpsat`.

The compute operations run in the store-all order c_0..c_{2L} = F_all(0) .. F_all(L-1), Loss, B(L-1) .. B(0);
a tape abar_j is a *candidate* (may travel) when 1 <= j <= L-1, its transfer lasts at least a tick and its size
is positive, as in `solvers.offload.cpsat`. Times are integers in ticks of 1/`scale` time units (cpsat's tick,
durations rounded up, at least one tick: `cpsat.duration_ticks`), so the model has cpsat's solutions and
optimum. Variables (H the horizon, sum of durations plus every transfer twice, plus 1):

* integer starts s_k of the compute ops (e_k = s_k + d_k), and per candidate j: binary o_j (it travels),
  integer offload start so_j, device release r_j, prefetch start sp_j;
* link order binaries y for every pair of transfers of two candidates (Off/Pre of i x Off/Pre of j);
* memory binaries: away_{j,k} (tape j is on the host when c_k starts), A_{j,k} / B_{j,k} (op k has started /
  ended by sp_j), W_{i,j} (tape i is on the host at sp_j), and continuous presences P_{i,j} >= 0.

Rows (M_t = 2H for times; every row with a binary that is "off" is relaxed by M_t):

    s_k >= s_{k-1} + d_{k-1}                                            (compute stream)
    so_j >= e(F_all(j-1)),  so_j >= s(F_all(j)),  r_j >= so_j + T_j,  r_j >= e(F_all(j))
    sp_j >= r_j,  s(B(j)) >= sp_j + T_j                                 (rule 3, rule 4, B(j) reads a_j)
    start_X + T_X <= start_Y + M_t (1 - y) + M_t (2 - o_i - o_j),
    start_Y + T_Y <= start_X + M_t y + M_t (2 - o_i - o_j)              (link: one transfer at a time)
    away_{j,k} <= o_j,  r_j <= s_k + M_t (1 - away_{j,k}),  sp_j >= s_k + 1 - M_t (1 - away_{j,k})
    mem(s_k) = fixed_k + sum_j tape_j (alive_{j,k} - away_{j,k}) <= C                  (every op start)
    A_{j,k} = 0  =>  sp_j <= s_k - 1;     B_{j,k} = 1  =>  sp_j >= e_k
    W_{i,j} = 1  =>  o_i = 1, r_i <= sp_j, sp_i >= sp_j + 1;  P_{i,j} >= A_{j,born_i} - B_{j,dies_i} - W_{i,j}
    mem(sp_j) = sum_{fixed [s_a, e_b)} size (A_{j,a} - B_{j,b}) + tape_j + sum_{i != j} tape_i P_{i,j}
                <= C + (sum of all sizes) (1 - o_j)                                        (every prefetch start)
    minimise e(B(0)) = s_{2L} + d_{2L}

where C = budget - x[0] (in slots), `fixed` are the intervals that do not depend on the transfers (overheads
o_fa / o_b on [s_k, e_k), gradients, the tapes that cannot travel, each [s_a, e_b) with a <= b), and a candidate
tape lives on [s(F_all(j-1)), e(B(j-1))): on the device on [s(F_all(j-1)), r_j) and [sp_j, e(B(j-1))) when it
travels. Device memory only grows when an interval starts (a compute op or a prefetch), so the rows at every
s_k and every sp_j check the whole sweep; intervals are half-open (releases before allocations at equal times,
simulator rule 6). Each binary has only the big-M link that lets it lower the memory (a binary set the other way
only counts more memory), so the rows never undercount; with integer times a strict "later" is "+1 tick".

The solution becomes a schedule with every op pinned (`not_before`) and is replayed by the offload simulator
(`simulate`): its makespan is the objective, and a plan over the budget (a backend's tolerance on big-M rows) is
not kept. Statuses, bound and scope as cpsat's: ``optimal`` for the scope (store-all order, each tape offloaded
at most once, whole ticks) only when every duration is a whole number of ticks; the model's bound stays in
``details["model_bound"]`` and the exact layer reports the problem's bound and referees against the fast solvers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..chain import Chain
from ..chain.schedule import Bwd, F_all, Loss, Op
from ..errors import InputError, option_field
from ..exact.cpsat_runner import check_first
from ..exact.interrupt import interrupted
from ..exact.layer import exact_solver
from ..exact.linear import LinearModel
from ..exact.milp_runner import BackendRun, check_backend_name, run_milp
from ..exact.options import Deadline, ExactOptions
from ..progress import report
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .cpsat import FAST, check_scale, duration_ticks, forced_memory, store_all_order_setup, ticks_exact
from .exact_free_hint import exact_size_seed
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import simulate

#: the MILP backends this model runs on (`milp_runner.MILP_BACKENDS`), SCIP the default
BACKENDS = ("scip", "highs", "cbc")
DEFAULT_BACKEND = "scip"


def check_options(inst: OffloadInstance, *, backend: Any = None, memory_gb: Any = None, **kw: Any) -> None:
    """The ``backend`` option (None or one of `BACKENDS`, any case), ``memory_gb`` only with SCIP (its
    ``limits/memory``; HiGHS and CBC have no limit that holds) and ``scale`` (`cpsat.check_scale`); else an
    `InputError` naming the option."""
    check_backend_name(backend, BACKENDS)
    if memory_gb is not None and backend is not None and backend.lower() != "scip":
        raise InputError(f"not taken with backend {backend.lower()!r}: it is SCIP's memory limit (limits/memory); "
                         f"{backend.lower()} has no memory limit that holds", field=option_field("memory_gb"))
    check_scale(inst, **kw)


@dataclass
class Interval:
    """A device buffer [s(c_a), e(c_b)) fixed by the compute order (compute op indices a <= b), `size` in slots
    (or the chain's memory unit with slots 0)."""

    a: int
    b: int
    size: int


@dataclass
class OffloadMilp:
    """The MILP of the module docstring: `lm` and its variable indices (compute starts `s`; per candidate
    tape j: `o`, `so`, `r`, `sp`), the tick durations `d` (compute) and `T` (transfers), `horizon` (ticks)."""

    lm: LinearModel
    d: list[int]
    T: dict[int, int]
    horizon: int
    s: list[int] = field(default_factory=list)
    o: dict[int, int] = field(default_factory=dict)
    so: dict[int, int] = field(default_factory=dict)
    r: dict[int, int] = field(default_factory=dict)
    sp: dict[int, int] = field(default_factory=dict)
    y: dict[tuple[int, int], int] = field(default_factory=dict)  # (start var a, start var b) -> a before b
    away: dict[tuple[int, int], int] = field(default_factory=dict)  # (j, k)
    A: dict[tuple[int, int], int] = field(default_factory=dict)     # (j, k): op k started by sp_j
    B: dict[tuple[int, int], int] = field(default_factory=dict)     # (j, k): op k ended by sp_j
    W: dict[tuple[int, int], int] = field(default_factory=dict)     # (i, j): tape i on the host at sp_j
    P: dict[tuple[int, int], int] = field(default_factory=dict)     # (i, j): tape i on the device at sp_j
    overfull: str = ""  # non-empty: some compute op overflows whatever travels (the model is infeasible)


def compute_ops(L: int) -> list[Op]:
    """The store-all order c_0..c_{2L}: F_all(0..L-1), Loss, B(L-1..0)."""
    return [F_all(i) for i in range(L)] + [Loss(L)] + [Bwd(i) for i in reversed(range(L))]


def ops_name(chain: Chain, k: int) -> str:
    """The name of compute op c_k of the store-all order (``F_all(0)``, ``Loss``, ``B(3)``)."""
    L = chain.length
    return f"F_all({k})" if k < L else "Loss" if k == L else f"B({2 * L - k})"


def fixed_intervals(chain: Chain, size: Any, candidates: set[int]) -> list[Interval]:
    """The buffers whose life does not depend on the transfers, as cpsat's Cumulative holds them: overheads
    (o_fa for F_all, o_b for the loss and B) on their op, gradients delta_L from the loss and delta_j from B(j)
    to the end of B(j-1) (delta_0 on B(0)), and every tape abar_j that is not a candidate on
    [s(F_all(j-1)), e(B(j-1))). Sizes 0 are left out."""
    L = chain.length
    Bk = {i: 2 * L - i for i in range(L)}
    out = [Interval(k, k, size(int(chain.o_fa[k]))) for k in range(L)]
    out.append(Interval(L, L, size(int(chain.o_b[L]))))
    out += [Interval(Bk[i], Bk[i], size(int(chain.o_b[i]))) for i in range(L)]
    out.append(Interval(L, Bk[L - 1], size(int(chain.x[L]))))
    out += [Interval(Bk[j], Bk[j - 1], size(int(chain.x[j]))) for j in range(1, L)]
    out.append(Interval(Bk[0], Bk[0], size(int(chain.x[0]))))
    out += [Interval(j - 1, Bk[j - 1], size(int(chain.xbar[j]))) for j in range(1, L + 1) if j not in candidates]
    return [iv for iv in out if iv.size > 0]


def build(chain: Chain, d: list[int], T: dict[int, int], size: Any, capacity: int,
          deadline: Deadline | None = None) -> OffloadMilp:
    """The model of the module docstring for `chain` with compute durations `d` and candidate transfers `T`
    (ticks), sizes by `size` and device capacity `capacity` (the budget less x[0], same unit as `size`)."""
    L = chain.length
    n = 2 * L + 1
    Bk = {i: 2 * L - i for i in range(L)}
    horizon = sum(d) + 2 * sum(T.values()) + 1
    big = 2 * horizon
    lm = LinearModel()
    mod = OffloadMilp(lm, d, T, horizon)

    def ge(x: int, y: int, const: float = 0.0, relax: tuple[tuple[int, float], ...] = ()) -> None:
        """x - y + sum(c * z for z, c in relax) >= const."""
        lm.add([x, y, *(z for z, _ in relax)], [1.0, -1.0, *(c for _, c in relax)], lb=const)

    s = mod.s = [lm.var(0, horizon, True, f"s{k}") for k in range(n)]
    for k in range(1, n):
        ge(s[k], s[k - 1], d[k - 1])
    cands = sorted(T)
    for j in cands:
        mod.o[j] = lm.var(0, 1, True, f"o{j}")
        so, r, sp = (lm.var(0, horizon, True, f"{nm}{j}") for nm in ("so", "r", "sp"))
        mod.so[j], mod.r[j], mod.sp[j] = so, r, sp
        ge(so, s[j - 1], d[j - 1])              # (e_k = s_k + d_k) the tape is complete: F_all(j-1) ended
        ge(so, s[j])                              # issued after its reader F_all(j) starts
        o = ((mod.o[j], -big),)                  # the rows of a tape that stays are relaxed
        ge(r, so, T[j] - big, o)                  # released when the copy ends ...
        ge(r, s[j], d[j])                         # ... and its reader F_all(j) ends
        ge(sp, r)                                 # rule 4: prefetch after the device copy is released
        ge(s[Bk[j]], sp, T[j] - big, o)           # B(j) reads a_j (inside abar_j) once it is back
    # the link: one transfer at a time, for every pair of transfers of two candidates that both travel
    for x, i in enumerate(cands):
        for j in cands[x + 1:]:
            off = [(mod.o[i], -big), (mod.o[j], -big)]
            for a, ta in ((mod.so[i], T[i]), (mod.sp[i], T[i])):
                for b, tb in ((mod.so[j], T[j]), (mod.sp[j], T[j])):
                    y = mod.y[(a, b)] = lm.var(0, 1, True, f"y{a}_{b}")
                    # y = 1: a before b: b - a >= ta - big (1 - y) - big (2 - o_i - o_j)
                    ge(b, a, ta - 3 * big, ((y, -big), *off))
                    # y = 0: b before a: a - b >= tb - big y - big (2 - o_i - o_j)
                    ge(a, b, tb - 2 * big, ((y, big), *off))
    if deadline is not None:
        deadline.check()
    fixed = fixed_intervals(chain, size, set(cands))
    tape = {j: size(int(chain.xbar[j])) for j in cands}
    # memory at every compute op's start
    for k in range(n):
        idx: list[int] = []
        coef: list[float] = []
        const = sum(iv.size for iv in fixed if iv.a <= k <= iv.b)
        for j in cands:
            if not (j - 1 <= k <= Bk[j - 1]):
                continue
            const += tape[j]
            if j < k < Bk[j]:  # between its reader F_all(j) and B(j) the tape may be on the host
                away = mod.away[(j, k)] = lm.var(0, 1, True, f"away{j}_{k}")
                lm.add([away, mod.o[j]], [1.0, -1.0], ub=0.0)
                lm.add([s[k], mod.r[j], away], [1.0, -1.0, -big], lb=-big)  # away => r_j <= s_k
                lm.add([mod.sp[j], s[k], away], [1.0, -1.0, -big], lb=1.0 - big)  # away => sp_j >= s_k + 1
                idx.append(away)
                coef.append(-float(tape[j]))
        if const + sum(coef) > capacity:  # even with every candidate away: no plan fits
            mod.overfull = f"{ops_name(chain, k)} must hold {const + sum(coef):g} besides the input"
        if idx:
            lm.add(idx, coef, ub=capacity - const)
    if deadline is not None:
        deadline.check()
    # memory at every prefetch's start
    total = sum(iv.size for iv in fixed) + sum(tape.values())
    for j in cands:
        started = [lm.var(0, 1, True, f"A{j}_{k}") for k in range(n)]  # 0 => sp_j <= s_k - 1
        ended = [lm.var(0, 1, True, f"B{j}_{k}") for k in range(n)]    # 1 => sp_j >= e_k
        for k in range(n):
            mod.A[(j, k)], mod.B[(j, k)] = started[k], ended[k]
            lm.add([mod.sp[j], s[k], started[k]], [1.0, -1.0, -big], ub=-1.0)   # sp_j - s_k <= -1 + big A
            lm.add([mod.sp[j], s[k], ended[k]], [1.0, -1.0, -big], lb=d[k] - big)  # sp_j - s_k >= d_k - big (1-B)
            lm.add([ended[k], started[k]], [1.0, -1.0], ub=0.0)
        idx, coef = [], []
        for iv in fixed:
            idx += [started[iv.a], ended[iv.b]]
            coef += [float(iv.size), -float(iv.size)]
        for i in cands:
            if i == j:
                continue
            w = mod.W[(i, j)] = lm.var(0, 1, True, f"W{i}_{j}")
            lm.add([w, mod.o[i]], [1.0, -1.0], ub=0.0)
            lm.add([mod.sp[j], mod.r[i], w], [1.0, -1.0, -big], lb=-big)          # w => r_i <= sp_j
            lm.add([mod.sp[i], mod.sp[j], w], [1.0, -1.0, -big], lb=1.0 - big)    # w => sp_i >= sp_j + 1
            p = mod.P[(i, j)] = lm.var(0, 1, False, f"P{i}_{j}")
            # p >= A(born_i) - B(dies_i) - w
            lm.add([p, started[i - 1], ended[Bk[i - 1]], w], [1.0, -1.0, 1.0, 1.0], lb=0.0)
            idx.append(p)
            coef.append(float(tape[i]))
        idx.append(mod.o[j])
        coef.append(float(total))
        lm.add(idx, coef, ub=capacity - tape[j] + total)
    lm.objective = {s[n - 1]: 1.0}
    lm.offset = float(d[n - 1])
    floats(lm)
    return mod


def floats(lm: LinearModel) -> None:
    """`lm` normalised in place for the backends: bounds and coefficients as floats, each row's terms `merged`
    (the memory row at a prefetch names a start binary once per buffer that starts with that op)."""
    lm.lb = [float(v) for v in lm.lb]
    lm.ub = [float(v) for v in lm.ub]
    lm.rows = [(*merged(idx, coef), float(lo), float(hi)) for idx, coef, lo, hi in lm.rows]


def merged(idx: list[int], coef: list[float]) -> tuple[list[int], list[float]]:
    """A row's terms with each variable once (coefficients summed, float; zeros dropped): backends take a
    variable once per row (pywraplp keeps its last coefficient, highspy refuses the rows)."""
    total: dict[int, float] = {}
    for i, c in zip(idx, coef):
        total[i] = total.get(i, 0.0) + float(c)
    keep = [(i, c) for i, c in total.items() if c != 0.0]
    return [i for i, _ in keep], [c for _, c in keep]


def schedule_of(mod: OffloadMilp, values: list[float], L: int, scale: float) -> OffloadSchedule:
    """The plan of `values` (a solution of `mod`, times rounded to whole ticks) as an offloading schedule with
    every op pinned at its start (time unit), in the order of the starts (compute before Off before Pre at a
    tie, as cpsat orders them)."""
    tick = [int(round(v)) for v in values]
    timed: list[tuple[int, int, Op | Transfer]] = [(tick[s], 0, op) for s, op in zip(mod.s, compute_ops(L))]
    for j, o in mod.o.items():
        if tick[o] == 1:
            timed.append((tick[mod.so[j]], 1, Off("abar", j)))
            timed.append((tick[mod.sp[j]], 2, Pre("abar", j)))
    timed.sort(key=lambda item: (item[0], item[1]))
    return OffloadSchedule([op for _, _, op in timed], L, [t / scale for t, _, _ in timed])


def assignment(mod: OffloadMilp, starts: list[int], moved: dict[int, tuple[int, int]]) -> list[float]:
    """The complete assignment of `mod` for compute starts `starts` (ticks, c_0..c_{2L}) and the tapes `moved`
    (j -> offload start, prefetch start, ticks): every binary as its definition says (module docstring). It
    satisfies the model when the timing does (checked by the caller, `LinearModel.violated`)."""
    lm, d, T = mod.lm, mod.d, mod.T
    L = (len(starts) - 1) // 2
    v = [0.0] * lm.num_vars
    for var, t in zip(mod.s, starts):
        v[var] = float(t)
    so, r, sp = {}, {}, {}
    for j in mod.o:
        end_reader = starts[j] + d[j]
        if j in moved:
            so[j], sp[j] = moved[j]
            r[j] = max(so[j] + T[j], end_reader)
            v[mod.o[j]] = 1.0
        else:
            so[j] = max(starts[j - 1] + d[j - 1], starts[j])
            r[j] = sp[j] = max(end_reader, so[j])
        v[mod.so[j]], v[mod.r[j]], v[mod.sp[j]] = float(so[j]), float(r[j]), float(sp[j])
    start_of = {mod.so[j]: (so[j], T[j]) for j in mod.o} | {mod.sp[j]: (sp[j], T[j]) for j in mod.o}
    for (a, b), y in mod.y.items():
        v[y] = 1.0 if start_of[a][0] + start_of[a][1] <= start_of[b][0] else 0.0
    for (j, k), var in mod.away.items():
        v[var] = 1.0 if j in moved and r[j] <= starts[k] and sp[j] >= starts[k] + 1 else 0.0
    for (j, k), var in mod.A.items():
        v[var] = 1.0 if sp[j] >= starts[k] else 0.0
    for (j, k), var in mod.B.items():
        v[var] = 1.0 if sp[j] >= starts[k] + d[k] else 0.0
    for (i, j), var in mod.W.items():
        v[var] = 1.0 if i in moved and r[i] <= sp[j] and sp[i] >= sp[j] + 1 else 0.0
    for (i, j), var in mod.P.items():
        v[var] = max(0.0, v[mod.A[(j, i - 1)]] - v[mod.B[(j, 2 * L - (i - 1))]] - v[mod.W[(i, j)]])
    return v


def seed_hint(mod: OffloadMilp, seed: SolveResult | None, inst: OffloadInstance, budget: int,
              scale: float) -> tuple[list[float] | None, bool]:
    """A complete assignment of `mod` from the seed's schedule when it is one of the model's kind (the store-all
    compute order, each candidate tape offloaded and prefetched at most once, no other transfer) and its replay
    fits `budget`, with whether it satisfies the model (starts rounded up to ticks may not); (None, False)
    otherwise."""
    if seed is None or not isinstance(seed.schedule, OffloadSchedule):
        return None, False
    L = inst.chain.length
    sim = simulate(inst, seed.schedule, budget)
    if not sim.valid:
        return None, False
    computes = [t for t in sim.ops if t.stream == "compute"]
    if [str(t.op) for t in computes] != [str(op) for op in compute_ops(L)]:
        return None, False
    moved: dict[int, list[int]] = {}
    for t in sim.ops:
        if t.stream == "compute":
            continue
        op = t.op
        if not isinstance(op, Transfer) or op.value != "abar" or op.index not in mod.o:
            return None, False
        moved.setdefault(op.index, []).append(math.ceil(t.start * scale - 1e-9))
    if any(len(times) != 2 for times in moved.values()):
        return None, False
    starts = [math.ceil(t.start * scale - 1e-9) for t in computes]
    values = assignment(mod, starts, {j: (a, b) for j, (a, b) in moved.items()})
    if any(not (lo <= x <= hi) for x, lo, hi in zip(values, mod.lm.lb, mod.lm.ub)):
        return None, False
    return values, mod.lm.violated(values) == 0


def in_time_units(run: BackendRun, scale: float) -> BackendRun:
    """`run` of the model in ticks (1/`scale` time units) with its objective, bound and log in time units, its
    best and bound reported to the progress watcher in those units (as offload cpsat's are)."""
    inv = 1.0 / scale
    out = replace(run, objective=None if run.objective is None else run.objective * inv,
                  bound=None if run.bound is None else run.bound * inv,
                  log=[(t, None if o is None else o * inv, None if b is None else b * inv) for t, o, b in run.log])
    if out.values is not None:
        report(best=out.objective, bound=out.bound)
    return out


@check_first(check_options)
@exact_solver("offload", "milp", FAST, time_limit=30.0, workers=1, least=lambda inst: inst.chain.total_time(),
              reseed=exact_size_seed)
def solve_milp(inst: OffloadInstance, budget: int, *, options: ExactOptions, deadline: Deadline,
               seed: SolveResult | None = None, scale: float | None = None, backend: str | None = None,
               **_: Any) -> SolveResult:
    """The MILP of the module docstring (time limit default 30 s, 1 worker), solved by `backend` (one of
    `BACKENDS`, default SCIP) through `milp_runner.run_milp`. `scale`: ticks per time unit, as offload cpsat's
    (default `solvers.discretize.tick_scale`, made coarser by `cpsat.fit_scale` when the ticks would be too
    many; given, `cpsat.check_scale`). The seed's schedule is the MIP start when it is one of the model's."""
    chain = inst.chain
    L = chain.length
    backend = (backend or DEFAULT_BACKEND).lower()
    scale, slots, size, capacity, scope = store_all_order_setup(inst, budget, options, scale)
    scope += f"; MILP ({backend})"

    def answer(status: str, **kw: Any) -> SolveResult:
        return SolveResult(problem="offload", solver="milp", status=status, budget=budget, scope=scope,
                           **{"details": {"backend": backend, **kw.pop("details", {})}, **kw})

    if capacity < 0:
        return answer(INFEASIBLE, message="the input alone exceeds the budget")
    T_all = {j: duration_ticks(inst.transfer_time(int(chain.xbar[j])), scale) for j in range(1, L)}
    forced, at = forced_memory(chain, size, {j for j, t in T_all.items() if t == 0})
    unit = " slots" if slots else ""  # else the chain's memory unit
    if forced > capacity:  # a necessary condition of the model (`cpsat.forced_memory`): exact, and instant
        return answer(INFEASIBLE, message=f"proven infeasible for this model: {at} must hold {forced}{unit} "
                                          f"besides the input, more than the {capacity}{unit} left")
    T = {j: t for j, t in T_all.items() if t > 0 and size(int(chain.xbar[j])) > 0}
    durations = [float(chain.u_fa[i]) for i in range(L)] + [float(chain.u_b[L])] + \
        [float(chain.u_b[i]) for i in reversed(range(L))]
    d = [duration_ticks(t, scale, least=1) for t in durations]
    mod = build(chain, d, T, size, capacity, deadline)
    if mod.overfull:
        return answer(INFEASIBLE, message=f"proven infeasible for this model: {mod.overfull}, more than the "
                                          f"{capacity}{unit} left")
    hint, hint_ok = seed_hint(mod, seed, inst, budget, scale) if options.warm_start else (None, False)
    run = in_time_units(run_milp(mod.lm, backend, deadline, options, hint=hint, hint_feasible=hint_ok), scale)
    details: dict[str, Any] = {"backend_status": run.backend_status, "variables": mod.lm.num_vars,
                               "rows": len(mod.lm.rows), "hint": hint is not None, "hint_feasible": hint_ok}
    if run.status == INFEASIBLE:
        return answer(INFEASIBLE, log=run.log, message="proven infeasible for this model", details=details)
    if run.values is None:
        return answer(TIMEOUT, log=run.log, details=details,
                      message="no solution before the interrupt" if interrupted()
                      else "no solution within the time limit")
    schedule = schedule_of(mod, run.values, L, scale)
    sim = simulate(inst, schedule, budget)
    if not sim.valid:  # a backend's tolerance on a big-M row: the plan is not kept, nor its claim
        return answer(TIMEOUT, log=run.log, details={**details, "broken_plan": str(sim.violation)},
                      message=f"the backend's plan breaks the simulator's rules ({sim.violation}): not kept")
    whole_ticks = all(ticks_exact(t, scale, dk) for t, dk in zip(durations, d)) and all(
        ticks_exact(inst.transfer_time(int(chain.xbar[j])), scale, T[j]) for j in T)
    # as cpsat's: the model's bound holds for its scope only (no recomputation), kept in details; the exact layer
    # reports the problem's own bound. "optimal" (for the scope) only when every duration is whole in ticks
    model_bound = run.bound if run.bound is not None and whole_ticks and slots == 0 else None  # time unit
    status = run.status if whole_ticks or run.status != OPTIMAL else FEASIBLE
    return answer(status, objective=sim.makespan, peak_memory=sim.peak_memory, lower_bound=None, schedule=schedule,
                  log=run.log, details={**details, "model_makespan": run.objective, "model_bound": model_bound,
                                        "transfers": len(schedule.transfers()), "host_peak": sim.host_peak})
