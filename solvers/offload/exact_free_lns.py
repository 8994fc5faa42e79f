"""Primal phase of `offload-exact` (`solvers.offload.exact_free`): neighbourhood search over the
compute sequence before the proof.

On the hard L = 10 cells the full model's bound climbs quickly and then stalls until the search
finds the optimal schedule: the missing piece is the primal side. This phase improves the warm
start (stage 1: the seed's compute sequence, transfers and timing free) by large-neighbourhood
search in the model itself: each step keeps the phase model's Booleans ``x`` (which forward each
slot runs; docs/chain.md's ``FA``, ``FC``, ``FN`` and the state ``SA``, ``ST``) fixed to the
incumbent outside a window, leaves the window's Booleans, every start time and every transfer
free, and asks CP-SAT, for a short time, for a schedule strictly faster than the incumbent
(``end <= incumbent - 1`` tick). Windows are runs of consecutive phases k (the recomputations
between two backward ops) and runs of consecutive stages j (a stage's forwards in every phase),
of growing width. Every accepted solution is a solution of the full model, so the incumbent it
hands on (as a hint of every variable) is the model's own; nothing here claims optimality: the
proof is the full model's (`exact_free._solve`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..exact.cpsat_runner import run_cpsat
from ..exact.options import Deadline, ExactOptions
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL

if TYPE_CHECKING:
    from .exact_free import FreeOrderModel

#: share of the time left (after stage 1) that the neighbourhood search may take: 0.15 since the
#: full model runs with the link-capacity rows at linearization level 2 and finds the last
#: improvements itself (docs/offload.md, *Warm start*); it was 0.3 before them
LNS_SHARE = 0.15
#: CP-SAT deterministic time of one neighbourhood step (load-independent, unlike wall-clock time)
STEP_DTIME = 1.0
#: wall-clock seconds of one neighbourhood step at most (a guard on a loaded machine)
STEP_LIMIT = 10.0
#: widths of the windows tried, in this order (phases, then stages)
WIDTHS = (2, 3)
#: width of the stage windows that also free the states of the window's values (axis ``"J"``)
STATE_WIDTH = 3


def windows(model: FreeOrderModel) -> list[tuple[str, int, int]]:
    """The neighbourhoods in the order tried: (axis, first, last) windows of consecutive stages
    (``"j"``) of each width in `WIDTHS`, then stage windows of `STATE_WIDTH` that also free the
    states of their values (``"J"``, see `in_window`), then windows of consecutive phases (``"k"``).
    On the hardest L = 10 cell (seed 0, 0.05 ms/byte, 100%) this order went 65.0 -> 64.5 (j1-2)
    -> 63.35 (j2-3) -> 63.0 (J1-3, the optimum); with the ``"J"`` windows alone it stopped at 63.85."""
    L = model.L
    out: list[tuple[str, int, int]] = []
    for w in WIDTHS:  # stage windows first: on the L = 10 cells they found the improvements
        out += [("j", j0, j0 + w - 1) for j0 in range(0, L + 1 - w)]
        if w == WIDTHS[0]:
            out += [("J", j0, j0 + STATE_WIDTH - 1) for j0 in range(0, L + 1 - STATE_WIDTH)]
    for w in WIDTHS:
        out += [("k", k0, k0 + w - 1) for k0 in range(0, L + 2 - w)]
    return out


def in_window(key: tuple[str, int, int], axis: str, lo: int, hi: int) -> bool:
    """Whether the phase-model Boolean `key` (kind, phase k, stage j or value index i) is free in
    the window (`axis`, `lo`, `hi`). Axis ``"k"``: every Boolean of phases lo..hi. Axis ``"j"``:
    the forwards ``FA``/``FC``/``FN`` of stages lo..hi and the states ``SA``/``ST`` (k, i) of
    values i in lo..hi. Axis ``"J"``: the same forwards, and the states of the values the
    window's stages read and make, i in lo..hi + 1 (value i is made by stage i - 1): with the
    states of value hi + 1 fixed at the incumbent, the window cannot change what its last stage
    leaves resident. On the hardest L = 10 cell the optimum (63.0) differs from the 63.35
    incumbent in the forwards of stages 1-3 and the states of values 2-4: inside J1-3, outside
    every ``"j"`` window."""
    kind, k, pos = key
    if axis == "k":
        return lo <= k <= hi
    if axis == "J" and kind in ("SA", "ST"):
        return lo <= pos <= hi + 1
    return lo <= pos <= hi


def overlaps(a: tuple[str, int, int], b: tuple[str, int, int]) -> bool:
    """Whether windows `a` and `b` free Booleans of a common stage (axes ``"j"``, ``"J"``) or of
    a common phase (axis ``"k"``)."""
    return (a[0] == "k") == (b[0] == "k") and a[1] <= b[2] and b[1] <= a[2]


def improve(
    model: FreeOrderModel,
    values: list[int],
    objective: int,
    deadline: Deadline,
    options: ExactOptions,
    scale: float,
    extra: dict[str, Any],
    floor: int = 0,
) -> tuple[list[int], int, Any, dict[str, Any]]:
    """Neighbourhood search from the full-model solution `values` (one integer per variable of
    `model.cp`, in proto order) of makespan `objective` (ticks), for at most `LNS_SHARE` of the
    time left. A window that improved is tried again at once (unless CP-SAT proved it optimal
    there), then the windows that overlap it, smallest first, then the rest in their order; one
    proven to hold nothing faster (infeasible) is skipped, with every window inside it, until the
    incumbent moves; the search stops after a whole pass over the windows without an
    improvement, or when the makespan reaches `floor` (ticks, a lower bound on every schedule:
    sum u_fa + sum u_b).
    Returns the best solution, its makespan (ticks), the CP-SAT solver that found it (None: no
    step improved) and notes (steps, improvements, windows closed, the improvements' trace)."""
    left = deadline.left()
    sub = Deadline(None if left is None else LNS_SHARE * left)
    keys = model.pm.keys
    x_index = [x.index for x in model.x]
    todo = windows(model)
    free = {win: frozenset(i for i, key in enumerate(keys) if in_window(key, *win)) for win in todo}
    queue = list(todo)  # the windows in the order they come next
    notes: dict[str, Any] = {"steps": 0, "improved": 0, "closed": 0}
    best_solver = None
    closed: set[tuple[str, int, int]] = set()
    since = 0  # windows tried (or skipped as closed) since the last improvement
    while queue and since < len(todo) and objective > floor and not sub.expired():
        win = queue.pop(0)
        queue.append(win)
        since += 1
        if any(free[win] <= free[c] for c in closed):
            continue  # a window containing this one holds nothing faster
        axis, lo, hi = win
        stage = model.cp.clone()
        stage.clear_hints()
        for i, val in enumerate(values):
            stage.add_hint(stage.get_int_var_from_proto_index(i), val)
        for key, idx in zip(keys, x_index):
            if not in_window(key, axis, lo, hi):
                stage.add(stage.get_bool_var_from_proto_index(idx) == values[idx])
        # the last slot, B(0), always runs: end = s[P-1] + d[P-1]
        stage.add(stage.get_int_var_from_proto_index(model.s[-1].index) <= objective - 1 - model.d[-1])
        step_left = sub.left()
        run = run_cpsat(
            stage,
            Deadline(min(STEP_LIMIT, step_left if step_left is not None else STEP_LIMIT)),
            options,
            scale=1.0,
            progress=False,
            extra={**extra, "max_deterministic_time": STEP_DTIME},
        )
        notes["steps"] += 1
        if run.status in (OPTIMAL, FEASIBLE) and run.solver is not None and run.objective is not None:
            values = [int(v) for v in run.solver.response_proto.solution]
            objective = int(round(run.objective))
            notes["improved"] += 1
            best_solver = run.solver
            # the windows that overlap this one next, the smallest first (the change is likely
            # local; small windows are the cheapest steps); this one again first unless CP-SAT
            # proved it holds nothing faster than the new incumbent
            near = sorted((w for w in todo if w != win and overlaps(w, win)), key=lambda w: len(free[w]))
            queue = ([] if run.status == OPTIMAL else [win]) + near + [w for w in queue if w != win and w not in near]
            queue += [] if run.status != OPTIMAL else [win]
            since = 0
            closed.clear()  # the incumbent moved: every window may improve again
            if run.status == OPTIMAL:
                closed.add(win)
            notes.setdefault("trace", []).append((round(deadline.elapsed(), 2), objective / scale, f"{axis}{lo}-{hi}"))
        elif run.status == INFEASIBLE:
            closed.add(win)
            notes["closed"] += 1
    return values, objective, best_solver, notes
