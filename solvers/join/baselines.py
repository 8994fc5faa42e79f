"""The heuristics the join DP is compared with (Beaumont, Herrmann, Pallez, Shilova, 2020).

All three produce join-persistent schedules (forward sweeps, loss, branches back-propagated one
after another; `solvers.join.dp`), so the DP is never worse at the same discretisation.

- ``equal``: branch b runs alone, as a chain, in a fixed share of the memory: its input
  x^b[0] plus 1/k of the free memory M - X_0 - loss_overhead (X_0 = sum_b x^b[0]); the rotor DP
  of that chain at its share M_b gives its schedule; the parts before its loss
  are run first (branch after branch), then the shared loss, then the parts after it. Each
  branch stays inside its share all the time, so the schedule fits M.
- ``proportional``: the same with the free memory split in proportion to what each branch's
  store-all schedule holds beyond its input (its store-all peak minus x^b[0]).
- ``sequential``: branches are processed one after the other: every branch but the first one
  back-propagated keeps only its output a_{L_b} in its forward sweep (F_ck(0) F_n(1..L_b-1))
  and later recomputes from its input with all the memory left, C(m, 0, L_b - 1); the first
  one runs the rotor DP with what the others leave. Best over the backward orders (all of them
  for k <= 6).

Each works in slots (every size rounded up, `dp.discretise`); when that rounding leaves it no
schedule, it tries once more with exact sizes or finer slots (`with_finer_retry`), so
``infeasible`` means its schedule does not fit at the finer rounding either. The branches' rotor
tables are read at a few memory values only: beyond `lazy_table.DENSE_CELLS` entries they are
evaluated where read (`lazy_table.heuristic_table`, the dense table's values and choices bit for
bit), so a retry at exact byte sizes costs what the recursion reaches, not 10^7 memory values a
row; ``details["table_cells"]`` gives the most entries one table evaluated.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from itertools import permutations
from typing import Any

import numpy as np

from ..chain.baselines import store_all_schedule as chain_store_all
from ..chain.dp import RotorTable, table_cells
from ..chain.instance import Chain
from ..chain.schedule import LOSS
from ..chain.simulator import simulate as simulate_chain
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, SolveResult
from ..units import memory_unit
from .dp import discretise, effective_slots, scope_text, spine_mmin, value_tolerance
from .instance import Join
from .lazy_table import cells_of, heuristic_table
from .schedule import LOSS_OP, JoinSchedule, JOp, store_all_schedule
from .simulator import simulate

#: largest total of the branches' rotor tables (entries) a heuristic's finer-slot retry may span: it
#: picks the retry's slot count (exact sizes of a 1.6 MB budget over two short branches need 9.4e6);
#: the tables are evaluated where read (`lazy_table`), densely (about 1 s and 240 MB per set) only
#: when the recursion reaches too many entries (`lazy_table.heuristic_table`)
RETRY_CELLS = 30_000_000


def _split_at_loss(chain_ops: list[Any], b: int) -> tuple[list[JOp], list[JOp]]:
    """A chain schedule of branch b as (ops before its loss, ops after it)."""
    k = next(n for n, op in enumerate(chain_ops) if op.kind == LOSS)
    conv = [JOp(op.kind, b, op.index) for op in chain_ops]
    return conv[:k], conv[k + 1 :]


def _with_loss_overhead(chain: Chain, overhead: int) -> Chain:
    o_b = chain.o_b.copy()
    o_b[-1] = overhead
    return Chain(chain.u_f, chain.u_b, chain.x, chain.xbar, chain.o_f, o_b, name=chain.name,
                 stage_names=list(chain.stage_names), o_fa=chain.o_fa, o_fn=chain.o_fn, u_fa=chain.u_fa,
                 u_fn=chain.u_fn)


def share_unit(join: Join, budget: int, slots: int) -> str:
    """The unit of the sizes `discretise(join, budget, slots)` works in, as messages name it:
    "slots" when the sizes are rounded up to slots, else the file's memory unit (bytes by default)."""
    return "slots" if effective_slots(budget, slots) else (memory_unit(join) or "bytes")


def share_schedule(work: Join, shares: list[int], built: list[RotorTable] | None = None, *, unit: str = "slots"
                   ) -> tuple[JoinSchedule | None, float, str]:
    """Each branch in its share (in `work`'s sizes, a_0^b included; `unit` names them in the
    message, `share_unit`): (schedule, value, message). The branches' rotor tables
    (`lazy_table.heuristic_table`) are appended to `built` when given."""
    pre: list[JOp] = []
    post: list[JOp] = []
    value = work.loss_time
    for b, (chain, share) in enumerate(zip(work.branches, shares)):
        m = int(share) - int(chain.x[0])
        if m < 0:
            return None, math.inf, (f"branch {b}'s share of {share} {unit} is below its input size "
                                    f"{int(chain.x[0])} {unit}")
        table = heuristic_table(chain, m)
        if built is not None:
            built.append(table)
        v = table.value(m)
        if not math.isfinite(v):
            return None, math.inf, f"no persistent schedule of branch {b} fits its share of {share} {unit}"
        before, after = _split_at_loss(table.schedule(m).ops, b)
        pre += before
        post += after
        value += v
    return JoinSchedule(pre + [LOSS_OP] + post, work.lengths), value, ""


def _loss_misfit(work: Join, M: int) -> str | None:
    """Why no schedule fits `M` (slots) at all, when the loss cannot run: every input $a_0^b$ stays resident and the
    loss holds its transient `loss_overhead` beside them, so $X_0 + $ `loss_overhead` $> M$ leaves no schedule; else
    None (the shares of `_shares_of` then start from a free memory of at least 0)."""
    if work.input_total() + work.loss_overhead > M:
        return "the inputs and the loss's overhead exceed the budget"
    return None


def _shares_of(work: Join, M: int, weights: list[float]) -> list[int]:
    """x^b[0] + floor(free * weight_b / sum weights), free = M - X_0 - loss_overhead (slots; >= 0 where
    `_loss_misfit` says nothing)."""
    free = max(0, M - work.input_total() - work.loss_overhead)
    s = float(sum(weights)) or 1.0
    return [int(c.x[0]) + int(math.floor(free * w / s)) for c, w in zip(work.branches, weights)]


def largest_table(tables: list[RotorTable]) -> int:
    """The most entries one of `tables` evaluated (`lazy_table.cells_of`; 0 for none): ``details["table_cells"]``."""
    return max((cells_of(t) for t in tables), default=0)


def _answer(name: str, join: Join, budget: int, slots: int, schedule: JoinSchedule | None, value: float,
            message: str, t0: float, **details: Any) -> SolveResult:
    slots = effective_slots(budget, slots)
    scope = f"{name} heuristic (no optimality claim), {scope_text(slots)}"
    if schedule is None:
        return SolveResult(problem="join", solver=name, status=INFEASIBLE, budget=budget, scope=scope,
                           message=message, solve_time_s=time.perf_counter() - t0, details={"slots": slots, **details})
    sim = simulate(join, schedule).raise_if_invalid()
    # the rotor tables' values drift from the replay when small times sit beside a large u_fn (value_tolerance)
    drift = max(1e-9, value_tolerance(join, sim.makespan, schedule))
    if not math.isclose(sim.makespan, value, rel_tol=1e-9, abs_tol=drift) or sim.peak_memory > budget:
        raise RuntimeError(f"{name}: value {value} / replay {sim.makespan}, peak {sim.peak_memory} vs {budget}")
    return SolveResult(problem="join", solver=name, status=FEASIBLE, objective=sim.makespan,
                       peak_memory=sim.peak_memory, schedule=schedule, budget=budget, scope=scope,
                       solve_time_s=time.perf_counter() - t0, details={"slots": slots, **details})


def retry_slots(join: Join, budget: int, slots: int) -> int | None:
    """The slot count for a heuristic's second try after `slots` slots (effective, > 0) left it no
    schedule: 0 (exact sizes) when the branches' rotor tables at exact sizes have at most
    `RETRY_CELLS` entries, else the most slots within that; None when that is not finer."""
    rows = sum(table_cells(c.length, 0) for c in join.branches)  # entries per memory value
    if rows * (budget + 1) <= RETRY_CELLS:
        return 0
    finest = effective_slots(budget, RETRY_CELLS // rows - 1)
    return finest if finest > slots else None


def with_finer_retry(solve_at: Callable[[Join, int, int], SolveResult], join: Join, budget: int,
                     slots: int) -> SolveResult:
    """`solve_at(join, budget, slots)`, and when the rounding of every size up to whole slots
    left the heuristic no schedule, once more with finer slots (`retry_slots`): a schedule of
    the heuristic that fits the budget at exact sizes can need more than `slots` rounded slots.
    ``details["slots_tried"]`` then lists both counts (0: exact sizes) and ``details["table_cells"]``
    the most entries one rotor table of either try evaluated."""
    first = solve_at(join, budget, slots)
    n = int(first.details["slots"])
    finer = retry_slots(join, budget, n) if first.status == INFEASIBLE and n else None
    if finer is None:
        return first
    again = solve_at(join, budget, finer)
    again.details["slots_tried"] = [n, int(again.details["slots"])]
    again.details["table_cells"] = max(int(d.get("table_cells", 0)) for d in (first.details, again.details))
    again.scope += f" (the {n}-slot rounding left no schedule)"
    if again.status == INFEASIBLE and finer:
        again.message += (f" (sizes rounded up to {finer} slots of the budget: at exact sizes its schedule may fit "
                          "a budget a few slots smaller)")
    again.solve_time_s += first.solve_time_s
    return again


def solve_equal(join: Join, budget: int, *, slots: int = 500, **_: Any) -> SolveResult:
    """Equal shares of (M - loss_overhead), the rotor DP per branch."""
    return with_finer_retry(_equal_at, join, int(budget), slots)


def _equal_at(join: Join, budget: int, slots: int) -> SolveResult:
    t0 = time.perf_counter()
    work, M = discretise(join, budget, slots)
    misfit = _loss_misfit(work, M)
    if misfit is not None:
        return _answer("equal", join, int(budget), slots, None, math.inf, misfit, t0)
    shares = _shares_of(work, M, [1.0] * work.k)
    built: list[RotorTable] = []
    schedule, value, msg = share_schedule(work, shares, built, unit=share_unit(join, budget, slots))
    return _answer("equal", join, int(budget), slots, schedule, value, msg, t0, shares=shares,
                   table_cells=largest_table(built))


def solve_proportional(join: Join, budget: int, *, slots: int = 500, **_: Any) -> SolveResult:
    """Shares of (M - loss_overhead) proportional to each branch's store-all peak."""
    return with_finer_retry(_proportional_at, join, int(budget), slots)


def _proportional_at(join: Join, budget: int, slots: int) -> SolveResult:
    t0 = time.perf_counter()
    work, M = discretise(join, budget, slots)
    misfit = _loss_misfit(work, M)
    if misfit is not None:
        return _answer("proportional", join, int(budget), slots, None, math.inf, misfit, t0)
    weights = [float(simulate_chain(c, chain_store_all(c.length)).peak_memory - c.x[0]) for c in work.branches]
    shares = _shares_of(work, M, weights)
    built: list[RotorTable] = []
    schedule, value, msg = share_schedule(work, shares, built, unit=share_unit(join, budget, slots))
    return _answer("proportional", join, int(budget), slots, schedule, value, msg, t0, shares=shares,
                   table_cells=largest_table(built))


def solve_sequential(join: Join, budget: int, *, slots: int = 500, **_: Any) -> SolveResult:
    """Branches one after the other; all but the first keep only their output a_L."""
    return with_finer_retry(_sequential_at, join, int(budget), slots)


def _sequential_at(join: Join, budget: int, slots: int) -> SolveResult:
    t0 = time.perf_counter()
    work, M = discretise(join, budget, slots)
    k = work.k
    X0 = work.input_total()
    x0 = [int(c.x[0]) for c in work.branches]
    xl = [int(c.x[c.length]) for c in work.branches]
    if X0 > M:
        return _answer("sequential", join, int(budget), slots, None, math.inf, "the inputs alone exceed the budget",
                       t0)
    tables = [heuristic_table(c, M) for c in work.branches]
    mmin = [int(spine_mmin(c)[0]) for c in work.branches]
    best: tuple[float, list[int]] | None = None
    firsts: dict[int, tuple[float, Any]] = {}
    for f in range(k):
        others = sum(xl[q] for q in range(k) if q != f)
        m1 = M - (X0 - x0[f]) - others - x0[f]
        if m1 < 0:
            continue
        chain = _with_loss_overhead(work.branches[f], work.loss_overhead + others)
        table = heuristic_table(chain, m1)
        firsts[f] = (table.value(m1), table)
    for f, (v1, _) in firsts.items():
        if not math.isfinite(v1):
            continue
        rest = [q for q in range(k) if q != f]
        orders = permutations(rest) if k <= 6 else [tuple(sorted(rest, key=lambda q: -work.branches[q].length))]
        for perm in orders:
            order = [f, *perm]
            total = v1 + work.loss_time
            for p in range(1, k):
                b = order[p]
                m = M - X0 - sum(xl[q] for q in order[p + 1 :])
                c = work.branches[b]
                if m < mmin[b] or m > tables[b].M:
                    total = math.inf
                    break
                total += float(np.sum(c.u_fn)) + tables[b].value(m, 0, c.length - 1)  # F_ck F_n sweep: no grad
            if math.isfinite(total) and (best is None or total < best[0]):
                best = (total, order)
    if best is None:
        return _answer("sequential", join, int(budget), slots, None, math.inf,
                       "no order fits: the budget is too small for this heuristic", t0,
                       table_cells=largest_table(tables + [t for _, t in firsts.values()]))
    value, order = best
    f = order[0]
    first_pre, first_post = _split_at_loss(firsts[f][1].schedule(int(firsts[f][1].M)).ops, f)
    pre: list[JOp] = []
    post: list[JOp] = []
    for p in range(k - 1, 0, -1):
        b = order[p]
        L = work.branches[b].length
        pre += [JOp("F_ck", b, 0)] + [JOp("F_n", b, i) for i in range(1, L)]
    pre += first_pre
    post += first_post
    for p in range(1, k):
        b = order[p]
        m = M - X0 - sum(xl[q] for q in order[p + 1 :])
        sub = tables[b].schedule(m, 0, work.branches[b].length - 1)
        post += [JOp(op.kind, b, op.index) for op in sub.ops]
    schedule = JoinSchedule(pre + [LOSS_OP] + post, work.lengths)
    return _answer("sequential", join, int(budget), slots, schedule, value, "", t0, order=order,
                   table_cells=largest_table(tables + [t for _, t in firsts.values()]))


# The share baselines run the rotor DP in shares that grow with the budget (sizes rounded up to slots of
# budget / slots only shrink): a schedule at B implies one at every larger budget (`registry.monotone_in_budget`).
for _share_baseline in (solve_equal, solve_proportional, solve_sequential):
    _share_baseline.monotone_in_budget = True  # type: ignore[attr-defined]


def solve_store_all(join: Join, budget: int, **_: Any) -> SolveResult:
    """The store-all schedule when it fits (optimal then: no recomputation), else infeasible."""
    t0 = time.perf_counter()
    schedule = store_all_schedule(join)
    sim = simulate(join, schedule)
    fits = sim.peak_memory <= int(budget)
    return SolveResult(problem="join", solver="store-all", status=OPTIMAL if fits else INFEASIBLE,
                       objective=sim.makespan if fits else None, peak_memory=sim.peak_memory if fits else None,
                       schedule=schedule if fits else None, min_budget=sim.peak_memory, budget=int(budget),
                       lower_bound=join.total_time(), solve_time_s=time.perf_counter() - t0,
                       scope="store-all (optimal among all schedules when it fits: no recomputation)",
                       message="" if fits else f"store-all needs {sim.peak_memory} > budget {budget}")
