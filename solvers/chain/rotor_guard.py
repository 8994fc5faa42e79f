"""Rotor never loses to the chain baselines at exact sizes.

The rotor DP (`dp.solve_rotor`) rounds every size up to whole slots of budget/S bytes. Its
answer is optimal among the persistent schedules *of the rounded chain*; a baseline schedule
(periodic = checkpoint_sequential with the best segment count, Chen's sqrt(L), and on a
homogeneous chain Revolve with the most checkpoints that fit) is persistent too, but after
rounding its peak can exceed the S slots although it fits the budget at exact sizes (each of
the k objects it holds gains up to one slot). Then rotor at S slots replays slower than that
baseline (about 1% on GPT-2 medium at 45% with S = 500 against periodic; 2x on
examples/homogeneous20.json at 7e6 bytes against Revolve, where no periodic count fits).

`never_worse` compares the DP's replayed makespan with the best baseline that fits the budget
at exact sizes, and when the baseline is faster:

1. solves again with REFINE_FACTOR times more slots, while the table has at most
   `REFINE_CELLS` entries (a finer rounding loses fewer schedules; status ``optimal`` then
   means optimal for *that* slot count, stated in the scope and ``details["slots"]``);
2. else with exact sizes when that table is small (`dp.EXACT_RETRY_CELLS`): optimal among
   persistent schedules, which contain the baselines, so never worse;
3. else returns the baseline's schedule with status ``feasible`` (no optimality claim).

``details`` record the baseline compared with (``baseline``), the slot counts tried
(``slots_tried``) and the first DP's makespan (``first_makespan``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..result import FEASIBLE, OPTIMAL, SolveResult
from .baselines import solve_chen, solve_periodic
from .instance import Chain
from .revolve import revolve_schedule, solve_revolve
from .simulator import simulate

#: factor between the slot counts of successive retries
REFINE_FACTOR = 4
#: largest table (entries) a finer-slot retry may fill
REFINE_CELLS = 8_000_000
#: relative tolerance of the makespan comparison (sums of the same floats in another order)
REL_TOL = 1e-9


def revolve_baseline(chain: Chain, budget: int, beat: float | None = None) -> SolveResult | None:
    """Revolve's answer (`solve_revolve`) when `chain` is homogeneous (Revolve's precondition)
    and it fits `budget` bytes at exact sizes, else None. With `beat` (a makespan), also None when
    Revolve cannot be faster: its makespan L u_fa + p(L, c) u_fn + L u_b + u_b[L] does not grow
    with the checkpoint count c (p(L, c) does not), so its schedule with c = L, replayed once
    (O(L) ops), bounds it from below and spares the check of every c."""
    if not chain.is_homogeneous():
        return None
    if beat is not None:
        fastest = simulate(chain, revolve_schedule(chain.length, chain.length)).makespan
        if beat <= fastest * (1 + REL_TOL):  # never_worse keeps `beat` then
            return None
    result = solve_revolve(chain, budget)
    return result if result.status == FEASIBLE and result.objective is not None else None


def best_baseline(chain: Chain, budget: int, beat: float | None = None) -> SolveResult | None:
    """The fastest of periodic (best segment count), sqrt(L) and, on a homogeneous chain,
    Revolve (`revolve_baseline`) that fits `budget` bytes at exact sizes (store-all is handled
    by the DP itself), or None. With `beat` (a makespan), Revolve is skipped when it cannot be
    faster than `beat`."""
    tried = (solve_periodic(chain, budget), solve_chen(chain, budget), revolve_baseline(chain, budget, beat))
    fits = [r for r in tried if r is not None and r.status == FEASIBLE and r.objective is not None]
    return min(fits, key=lambda r: float(r.objective or 0.0)) if fits else None


def never_worse(chain: Chain, budget: int, result: SolveResult, slots: int,
                solve_with: Callable[[int], SolveResult], slot_cells: Callable[[int], int],
                exact_size_cells: int, exact_cells: int) -> SolveResult:
    """`result` (the DP at `slots` slots) when no baseline beats it at exact sizes; else the DP
    at finer slots or exact sizes (`solve_with(slots)`, 0 = exact), else the baseline's
    schedule. `slot_cells(s)`: the cells of the DP's tables at s slots (tried while at most
    `REFINE_CELLS`); `exact_size_cells`: those at exact sizes, tried when at most `exact_cells`.
    A `result` without a schedule is returned as it is: the callers handle a rounding that left
    no schedule themselves (rotor's exact-size retry in `dp._solve_rotor_slots`, the join DP's
    `rounding_retry`, which runs rotor on a one-branch join's branch)."""
    if slots == 0 or result.status not in (OPTIMAL, FEASIBLE) or result.objective is None:
        return result
    first = float(result.objective)
    base = best_baseline(chain, budget, beat=first)
    if base is None or base.objective is None:
        return result
    target = float(base.objective)
    seen: dict[str, Any] = {"solver": base.solver, "makespan": target, **(base.details or {})}
    result.details["baseline"] = seen
    if first <= target * (1 + REL_TOL):
        return result
    tried = [slots]

    def done(answer: SolveResult, how: str) -> SolveResult:
        answer.details.update(baseline=seen, slots_tried=tried, first_makespan=first)
        answer.message = (f"the {slots}-slot DP's schedule replays at {first:.6g}, slower than {base.solver} "
                          f"({target:.6g}) at exact sizes; {how}")
        return answer

    s = slots * REFINE_FACTOR
    while slot_cells(s) <= REFINE_CELLS:
        again = solve_with(s)
        tried.append(s)
        if again.status in (OPTIMAL, FEASIBLE) and again.objective is not None \
                and float(again.objective) <= target * (1 + REL_TOL):
            return done(again, f"solved again with {s} slots")
        s *= REFINE_FACTOR
    if exact_size_cells <= exact_cells:
        tried.append(0)
        return done(solve_with(0), "solved again with exact sizes")
    fallback = SolveResult(problem="chain", solver="rotor", status=FEASIBLE, objective=base.objective,
                           schedule=base.schedule, peak_memory=base.peak_memory, budget=budget,
                           min_budget=result.min_budget, scope=f"{base.solver} schedule (no optimality claim); "
                           f"rotor's {'/'.join(map(str, tried))}-slot tables were slower at exact sizes",
                           solve_time_s=result.solve_time_s, details=dict(result.details))
    return done(fallback, f"returned {base.solver}'s schedule (finer tables too large)")
