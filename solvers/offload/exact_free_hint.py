"""Warm start of `offload-exact` (`solvers.offload.exact_free`): hints from the seed's schedule.

`hint` encodes the seed's compute sequence in the phase model's Booleans, its start times and
the pieces its transfers keep a value on the host; `complete_hint` (stage 1) solves the model
with that compute sequence fixed and hints every variable of the full model with the solution.
`pofo_at_exact_sizes` makes pofo at exact sizes the seed when it is faster than the exact
layer's (which ran at the model's slots; the layer's ``reseed`` of every offloading model asked for
exact sizes, `exact_size_seed`, and of offload-exact at any slots, `any_size_seed`), and
`seed_answer` returns the seed's schedule when the model has nothing faster: the answer never
loses to pofo at exact sizes when that ran within the time limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..chain.dp import table_cells
from ..chain.schedule import Schedule as ChainSchedule
from ..discretize import effective_slots, to_ticks
from ..exact.cpsat_runner import run_cpsat
from ..exact.layer import can_fork, solve_in_child, warm_start_until
from ..exact.options import Deadline, ExactOptions
from ..result import FEASIBLE, OPTIMAL, SolveResult
from .schedule import Transfer
from .simulator import simulate

if TYPE_CHECKING:
    from .exact_free import FreeOrderModel, Value
    from .instance import OffloadInstance


def hint(model: FreeOrderModel, seed: SolveResult | None) -> bool:
    """Hint the seed's compute sequence (phase-model Booleans), its start times and, for each
    value it moves, the pieces that lie between the end of its Off and the start of its Pre
    (away); True when the seed's compute sequence has the phase form."""
    if seed is None or seed.schedule is None:
        return False
    ops = [op for op in seed.schedule.ops if not isinstance(op, Transfer)]
    values = model.pm.encode(ChainSchedule(ops, model.L))
    if values is None:
        return False
    model.seed_x = [bool(val > 0.5) for val in values]
    for x, val in zip(model.x, model.seed_x):
        model.cp.add_hint(x, val)
    sim = simulate(model.inst, seed.schedule)
    timed = [(to_ticks(t.start, model.scale), to_ticks(t.end, model.scale))
             for t in sim.ops if t.stream == "compute"]
    q = 0
    end = 0
    start_of, end_of = [], []
    for p, sl in enumerate(model.slots):
        runs = sl.j is None or any(values[model.pm.index[(kind, sl.k, sl.j)]] > 0.5
                                   for kind in ("FA", "FC", "FN") if (kind, sl.k, sl.j) in model.pm.index)
        start = end
        if runs and q < len(timed):
            start, end = max(end, timed[q][0]), max(end, timed[q][1])
            q += 1
        start_of.append(start)
        end_of.append(end)
        model.cp.add_hint(model.s[p], min(start, model.horizon))
    windows: dict[Value, list[tuple[int, int]]] = {}  # value -> (Off end, Pre start) in ticks
    pending: dict[Value, int] = {}
    for t in sim.ops:
        if isinstance(t.op, Transfer):
            v = (t.op.value, t.op.index)
            if t.op.kind == "Off":
                pending[v] = to_ticks(t.end, model.scale)
            elif v in pending:
                windows.setdefault(v, []).append((pending.pop(v), int(t.start * model.scale)))
    for (v, piece), wv in model.w.items():
        p = piece // 2
        a, b = (end_of[p - 1], start_of[p]) if piece % 2 == 0 else (start_of[p], end_of[p])
        away = any(lo <= a and b <= hi for lo, hi in windows.get(v, []))
        model.cp.add_hint(wv, away)
    return True


#: CP-SAT parameters of every stage (stage 1, the neighbourhood search, the full model; ``--parameters``
#: text overrides them for the full model). Probing at level 1 skips the presolve's repeated full
#: probing passes, which took most of the presolve of the L = 10 model and fixed almost nothing after
#: the first (CPU to prove L = 10, seed 0, 0.01 ms/byte at rotor's least budget, measured once each
#: under load: 18.1 s at the default level 2, 12.4 s at level 1). Linearization level 2 puts the
#: link-capacity rows (`exact_free_cuts`) and the link's NoOverlap into the LP: on the three L = 10
#: cells at 0.05 ms/byte left open at 60 s (docs/offload.md), from the same warm start, one run each at
#: load 1.7-2.2, the full model proved them in 22-28 s of CPU with both, 19-49 s with the rows alone,
#: and in none within 60 s without either
CPSAT_EXTRA: dict[str, Any] = {"cp_model_probing_level": 1, "linearization_level": 2}

#: share of the time left that the first stage of the warm start may take
SEED_STAGE_SHARE = 0.25


def complete_hint(model: FreeOrderModel, deadline: Deadline, options: ExactOptions, scale: float,
                  floor: int = 0) -> tuple[float | None, Any]:
    """Warm start, stage 1: the model with the seed's compute sequence fixed (the transfers and
    timing free) is solved for at most `SEED_STAGE_SHARE` of the time left; stage 2: from that
    solution (never slower than the seed's replay, whose transfers it may re-time), the
    neighbourhood search of `exact_free_lns` looks for faster compute sequences. The best solution
    becomes a hint of every variable of the full model. Returns its makespan (time unit) and the
    solver that found it (whose values are read with the full model's variables: the clones keep
    their indices), or (None, None); notes go to ``model.warm_notes``. `floor`: a lower bound on
    every schedule (ticks; the search stops there)."""
    from .exact_free_lns import improve

    left = deadline.left()
    stage = model.cp.clone()
    for x, val in zip(model.x, model.seed_x):
        stage.add(stage.get_bool_var_from_proto_index(x.index) == int(val))
    sub = Deadline(None if left is None else max(0.05, SEED_STAGE_SHARE * left))
    run = run_cpsat(stage, sub, options, scale=scale, progress=False, extra=CPSAT_EXTRA)
    if run.solver is None or run.status not in (OPTIMAL, FEASIBLE) or run.objective is None:
        return None, None
    model.warm_notes["seed_sequence_makespan"] = run.objective
    values = [int(v) for v in run.solver.response_proto.solution]
    objective, solver = run.objective, run.solver
    if LNS and not deadline.expired() and int(round(objective * scale)) > floor:
        values, ticks, better, notes = improve(model, values, int(round(objective * scale)), deadline, options,
                                               scale, CPSAT_EXTRA, floor)
        model.warm_notes["lns"] = notes
        if better is not None:
            objective, solver = ticks / scale, better
    model.cp.clear_hints()
    for i, value in enumerate(values):
        model.cp.add_hint(model.cp.get_int_var_from_proto_index(i), value)
    return objective, solver


#: run the neighbourhood search (`exact_free_lns`) after stage 1
LNS = True


#: pofo's table at exact sizes has (L+1)(L+2)/2 rows of budget+1 entries: run it below this many
POFO_EXACT_CELLS = 5_000_000
#: seconds per table cell and stage of pofo's DP at exact sizes, for the estimate that decides whether
#: it fits the time allowed where it cannot run in a child killed at its end (measured 0.11-0.16 us
#: at L = 6..30, load 3: 0.1 s at L = 6, 9.5 s at L = 30; with a margin)
POFO_EXACT_S_PER_CELL_STAGE = 2e-7
#: once the warm start's share of the limit is spent, pofo at exact sizes may still take this share
#: of the time left (a small table takes milliseconds; a large one is killed or skipped)
POFO_EXACT_LATE_SHARE = 0.1
#: the name in ``details["fast_not_run"]`` when pofo at exact sizes did not fit the time allowed
POFO_EXACT_NAME = "pofo (exact sizes)"


def pofo_at_exact_sizes(inst: OffloadInstance, budget: int, seed: SolveResult | None, deadline: Deadline,
                        not_run: list[str] | None = None) -> SolveResult | None:
    """The seed, or pofo at exact sizes when its table is small (`POFO_EXACT_CELLS`) and it is faster:
    the exact layer runs the fast solvers at the model's slots (500 when the model has exact sizes),
    and the answer must not lose to pofo at exact sizes. Within `deadline`: it gets the time to the
    end of the warm start's share of the limit (at least `POFO_EXACT_LATE_SHARE` of the time left),
    in a forked child killed then, or in this process when its estimated time fits; else it is left
    out and named in `not_run`. A faster result has ``details["slots"] = 0`` and
    ``details["fast_best_at_slots"]``: the seed's makespan (None without one)."""
    L = inst.length
    cells = table_cells(L, int(budget))
    if seed is not None and seed.details.get("slots") == 0 or cells > POFO_EXACT_CELLS:
        return seed
    exact = _pofo_exact_within(inst, int(budget), deadline, cells * L * POFO_EXACT_S_PER_CELL_STAGE)
    if exact is None:
        if not_run is not None:
            not_run.append(POFO_EXACT_NAME)
        return seed
    if exact.schedule is None or exact.objective is None:
        return seed
    if seed is None or seed.objective is None or exact.objective < seed.objective:
        exact.details["slots"] = 0
        exact.details["fast_best_at_slots"] = None if seed is None else seed.objective
        return exact
    return seed


def _pofo_exact_within(inst: OffloadInstance, budget: int, deadline: Deadline, estimate: float
                       ) -> SolveResult | None:
    """pofo at exact sizes (`registry.solve`, refereed) within the time `pofo_at_exact_sizes` allows,
    given its `estimate` (s); None when it did not run or did not finish (no schedule: its result)."""
    from .dp import solve_pofo

    left = deadline.left()
    if left is None:
        return solve_pofo(inst, budget, slots=0)
    until = warm_start_until(deadline)
    seconds = min(left, max(0.0 if until is None else until - deadline.elapsed(), POFO_EXACT_LATE_SHARE * left))
    if seconds <= 0:
        return None
    if can_fork():  # its first DP cannot be interrupted: a child is killed at the end of its time
        return solve_in_child("offload", inst, "pofo", budget, {"slots": 0, "time_limit": seconds}, seconds)
    if estimate > seconds:
        return None
    return solve_pofo(inst, budget, slots=0, time_limit=seconds)


def exact_size_seed(inst: OffloadInstance, budget: int, seed: SolveResult | None, deadline: Deadline,
                    options: ExactOptions, not_run: list[str]) -> SolveResult | None:
    """The exact layer's ``reseed`` for the offloading models asked for exact sizes (cpsat, exact-combined
    with ``slots=0`` or a budget of at most `slots` units): `pofo_at_exact_sizes`, so that an exact
    solver is never slower than pofo at the same budget and exact sizes. At N slots: the seed."""
    if effective_slots(int(budget), options.slots):
        return seed
    return pofo_at_exact_sizes(inst, budget, seed, deadline, not_run)


def any_size_seed(inst: OffloadInstance, budget: int, seed: SolveResult | None, deadline: Deadline,
                  options: ExactOptions, not_run: list[str]) -> SolveResult | None:
    """offload-exact's ``reseed``: `pofo_at_exact_sizes` at any slots (at N slots, a faster pofo at exact
    sizes makes the model run with exact sizes, `exact_free_retry`)."""
    return pofo_at_exact_sizes(inst, budget, seed, deadline, not_run)


def seed_answer(seed: SolveResult | None, details: dict[str, Any], common: dict[str, Any], run: Any
                 ) -> SolveResult | None:
    """The seed's schedule as the answer (``feasible``) when the model has nothing better; None without a seed."""
    if seed is None or seed.schedule is None or seed.objective is None:
        return None
    details["solution_from"] = f"{seed.solver} (exact sizes)" if seed.details.get("slots") == 0 else seed.solver
    return SolveResult(status=FEASIBLE, objective=seed.objective, peak_memory=seed.peak_memory, lower_bound=None,
                       schedule=seed.schedule, details=details, log=run.log,
                       message=f"the model found nothing faster than {details['solution_from']}'s schedule", **common)
