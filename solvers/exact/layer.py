"""The one path every exact solver goes through: `exact_solver(problem, name, fast)`.

1. **Options and deadline.** Keyword options are read into `ExactOptions` (``time_limit``,
   ``workers``, ``seed``, ``verbose``, ``warm_start``, ``slots``; old spellings mapped) and a
   wall-clock `Deadline` starts: the time limit covers everything below.
2. **Warm start.** The problem's fast solvers (`fast`, in the problem's order: the graph
   solvers' cheapest first, so a slow one cannot starve them) run first, each replayed by the
   simulator at the real budget and exact sizes; the best schedule (smallest objective) is
   handed to the model as ``seed`` (CP-SAT hint, MIP start) and named in
   ``SolveResult.seeded_by``; it is the first entry of ``SolveResult.log`` (a schedule in hand
   from then on). The warm start gets `WARM_START_SHARE` (half) of the limit, whether or not a
   schedule is known, so that the model always has the rest (a warm start killed only at the
   limit while nothing fitted left a 1-stage join's A* search, which proves infeasibility in
   1 ms, no time: `timeout` at 5 s). The first always runs, the others while time allows
   (`run_fast`): the guarantee below is about the fast solvers that ran (``details["fast"]``
   lists those with a schedule, ``details["fast_not_run"]`` those not started or killed unfinished
   at the end of the share: a short limit on a loaded machine may leave a slow one out). A problem's
   ``reseed`` (offload: pofo at exact sizes) may then hand a faster seed, the referee's too. The first
   runs in this process; the others run in a forked child that is killed at the end of the share,
   as a fast solver cannot be interrupted (dtr-orders took 10 s quietly and 23-40 s under load on
   a 189-node graph).
3. **Model.** ``fn(instance, budget, *, options, deadline, seed, **rest)`` builds and solves;
   building calls ``deadline.check()``, and a build that runs out of time ends with status
   ``timeout`` (keeping the seed's schedule, if any; `build_timeout_result`). A model that had
   already proven a lower bound (the chain's root LP with tape cuts) raises `BuildTimeout`: the
   answer keeps that bound with the model's scope, as the finished model would report it.
   A Ctrl-C inside `interrupt.answer_on_interrupt` (the command line's and `memsched.solve`'s
   single solves) ends the solve with what it has: the backend's incumbent and bound
   (`interrupt.stop_on_interrupt`), or the seed when the interrupt came outside the backend; the
   result says ``details["interrupted"]``. Elsewhere it raises. A Ctrl-C during the warm start
   answers likewise with the best seed found before it (the fast solvers that had finished; the
   model is not built: ``details["not_built"]``, the floor as bound); with none yet it raises.
4. **Referee (exact-size guard).** The model's schedule is replayed at the real budget with
   exact sizes. If a fast solver's schedule is better (or the model returned none), that
   schedule is returned as ``feasible`` and the message says so: an exact solver is never worse
   than a fast solver of its problem, and ``infeasible`` is never reported while a schedule is
   known; ``optimal`` instead when the model ran at exact sizes and its bound reaches that
   schedule's makespan (within `REL_TOL`): no schedule of the scope is faster, and the scope says
   so. ``optimal`` is kept only when no fast schedule beats it; with slots the scope says
   "optimal for N slots". The bound is a finite number no larger than the objective, or None.
   When the model's bound exceeds the returned (the seed's) makespan, it held for the model's scope
   only (sizes in N slots, a restricted class): it is dropped, the scope is the seed's schedule's
   (a model's optimum that lost keeps its scope, which says so), ``details["bound_from"]`` names
   the bound that replaced it (`FLOOR_BOUND`, or "" for none) and the log's bounds are the
   answer's (`honest_log`).
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import signal
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..discretize import effective_slots
from ..errors import InputError
from ..processes import release_held_signals, signals_held_during_fork
from ..progress import report
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .interrupt import answering, interrupt_signals, interrupted, note_interrupt
from .options import DEFAULT_TIME_LIMIT, Deadline, DeadlineExceeded, ExactOptions

#: relative tolerance under which two makespans are the same: `same_or_less` allows REL_TOL of the
#: larger of the two, with no absolute floor (times of 1e-12 units compare as finely as times of
#: seconds; two zero makespans are equal, 0 and 1e-12 are not)
REL_TOL = 1e-9
#: slots given to the fast solvers when the exact model runs with exact sizes (their tables
#: grow with the budget; a schedule that fits N slots fits the real budget)
FAST_SLOTS_WITH_EXACT_SIZES = 500
#: below this time limit (s) only the first fast solver (the problem's best) seeds the model:
#: a fast solver cannot be interrupted, and some take a second or two on large instances
MIN_LIMIT_FOR_ALL_FAST = 1.0
#: share of the time limit the warm start may use (`run_fast`): no fast solver starts past it and each
#: one after the first is killed at it; the model has the rest (the first, not interruptible, may overrun)
WARM_START_SHARE = 0.5
#: attribute of a `KeyboardInterrupt` raised during the warm start (`run_fast`): the seeds found before it
SEEDS_SO_FAR = "memsched_seeds_so_far"


def run_fast(problem: str, instance: Any, budget: int | None, names: Sequence[str], deadline: Deadline,
             options: ExactOptions, rest: dict[str, Any], not_run: list[str] | None = None) -> list[SolveResult]:
    """Run the fast solvers `names` (in order) through the referee (`solvers.registry.solve`);
    those that fail, find nothing or have an undefined objective are left out. All of it within
    `WARM_START_SHARE` of the limit (`warm_start_until`), whether or not a schedule is known: the
    first always runs, in this process (not interruptible: it may overrun the share); each one
    after it starts only before the share is spent and runs in a forked child (`solve_in_child`,
    where the platform forks) killed at its end (dtr-orders took 3 s on a 400-node graph where the
    two before it found nothing, and held a 0.1 s solve for 2.8 s; on byte-sized joins where
    nothing fits, the join heuristics' exact-size retries took 1-9 s each and left the A* search,
    which proves infeasibility in 1 ms, no time). Once one has a schedule, the others run only
    with a limit of at least `MIN_LIMIT_FOR_ALL_FAST` seconds and while more time is left than the
    slowest fast solver so far took. Each is given the time to the end of the share as
    ``time_limit``: most fast solvers ignore it, `pofo` leaves out its optional stages past it.
    The names of those not started, or killed unfinished at the end of the share, are appended to
    `not_run` (``details["fast_not_run"]``: the solvers the exact answer was not compared with).
    A `KeyboardInterrupt` (Ctrl-C) is raised on, carrying the schedules found so far as its
    `SEEDS_SO_FAR` attribute; the fast solvers not finished then are appended to `not_run`."""
    from ..registry import solve as registry_solve

    slots = options.slots if options.slots > 0 else FAST_SLOTS_WITH_EXACT_SIZES
    until = warm_start_until(deadline)
    out: list[SolveResult] = []
    longest = 0.0
    done = 0  # the fast solvers dealt with (run, failed or left out): those after them are not run on a Ctrl-C
    try:
        for n, name in enumerate(names):
            left = deadline.left()
            limit = deadline.limit
            if (n and until is not None and deadline.elapsed() >= until) or (  # share spent: the model has the rest
                    out and limit is not None and (limit < MIN_LIMIT_FOR_ALL_FAST or left is None or left <= longest)):
                if not_run is not None:  # (or an optional seed unlikely to finish)
                    not_run.extend(names[n:])
                break
            start = deadline.elapsed()
            kwargs = {**rest, "slots": slots}
            if until is not None:  # a fast solver with optional stages (pofo) leaves them out past this
                kwargs["time_limit"] = max(0.0, until - start)
            try:
                if n and until is not None and can_fork():
                    found = solve_in_child(problem, instance, name, budget, kwargs, until - start)
                    if found is None:
                        if not_run is not None and deadline.elapsed() >= until:  # killed at the share's end
                            not_run.append(name)
                        done = n + 1
                        continue
                    res = found
                else:
                    res = registry_solve(problem, instance, name, budget, **kwargs)
            except (InputError, ValueError, KeyError, ImportError):
                done = n + 1
                continue
            finally:
                longest = max(longest, deadline.elapsed() - start)
            if res.schedule is not None and res.objective is not None and math.isfinite(res.objective):
                out.append(res)
            done = n + 1
    except KeyboardInterrupt as exc:  # the seeds found so far go with it (`exact_solver` may answer with them)
        if not_run is not None:
            not_run.extend(name for name in names[done:] if name not in not_run)
        setattr(exc, SEEDS_SO_FAR, list(out))
        raise
    return out


def warm_start_until(deadline: Deadline) -> float | None:
    """Seconds from the deadline's start at which the warm start ends (`WARM_START_SHARE` of the
    limit), None without a limit."""
    return None if deadline.limit is None else WARM_START_SHARE * deadline.limit


_CAN_FORK = "fork" in multiprocessing.get_all_start_methods()


def can_fork() -> bool:
    """Whether an optional seed may run in a forked child: the platform forks and this process
    may have children (a daemonic process, e.g. a sweep's pool worker, may not: it solves here)."""
    return _CAN_FORK and not multiprocessing.current_process().daemon


def _child(conn: Any, problem: str, instance: Any, name: str, budget: int | None, kwargs: dict[str, Any]) -> None:
    """Body of the forked child of `solve_in_child`: send the referee'd result, or None. SIGINT is
    ignored, from the fork on (`release_held_signals`): a terminal's Ctrl-C reaches the whole
    process group, and the parent answers it (this daemon child is stopped with it); here it was a
    KeyboardInterrupt traceback from multiprocessing or from an at-fork hook."""
    release_held_signals({signal.SIGINT: signal.SIG_IGN})
    from ..registry import solve as registry_solve

    try:
        conn.send(registry_solve(problem, instance, name, budget, **kwargs))
    except Exception:  # noqa: BLE001 - any failure means "no seed from this solver"
        conn.send(None)
    finally:
        conn.close()


def solve_in_child(problem: str, instance: Any, name: str, budget: int | None, kwargs: dict[str, Any],
                   seconds: float) -> SolveResult | None:
    """`registry.solve` in a forked child given `seconds` of wall-clock time; None when it
    fails or is still running then (it is killed)."""
    if seconds <= 0:
        return None
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, problem, instance, name, budget, kwargs), daemon=True)
    res = None
    try:
        with signals_held_during_fork(interrupt_signals()):  # a Ctrl-C during the fork is raised after it
            proc.start()
        send.close()
        if recv.poll(seconds):
            res = recv.recv()
    except (EOFError, OSError):
        res = None
    finally:
        send.close()
        recv.close()
        if proc.pid is not None:  # started: killed if still running (also on a KeyboardInterrupt)
            if proc.is_alive():
                proc.join(0.05)
            if proc.is_alive():
                proc.kill()
            proc.join()
    return res if isinstance(res, SolveResult) else None


#: `details["bound_from"]` of an answer whose lower bound is the problem's floor (`exact_solver`'s `least`)
FLOOR_BOUND = "every operation once"

#: the message of an answer whose model was still being built at the time limit
BUILD_TIMEOUT_MESSAGE = "the time limit came while the model was being built"


class BuildTimeout(DeadlineExceeded):
    """`DeadlineExceeded` from a model that had proven `lower_bound` (objective unit) before its
    build ran out of time: a bound of the optimum of `scope` (the model's own scope, as its
    finished answer would state it: exact sizes or N slots), from `source` (e.g. "root LP with
    tape cuts"); `details` are the model's details so far (its `SolveResult.details` entries)."""

    def __init__(self, lower_bound: float, scope: str, source: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"time limit reached while the model was being built (bound {lower_bound:g} from {source})")
        self.lower_bound = float(lower_bound)
        self.scope = scope
        self.source = source
        self.details = dict(details or {})


#: attribute of a `KeyboardInterrupt` raised during a build after a bound was proven: its `BuildTimeout`
BOUND_SO_FAR = "memsched_bound_so_far"


def build_timeout_result(problem: str, name: str, exc: DeadlineExceeded) -> SolveResult:
    """The model's answer when its build ran out of time (`exc`): status ``timeout`` and no schedule
    (the referee adds the seed's); with a `BuildTimeout`, its bound as ``lower_bound`` and its scope,
    ``details["bound_from"]`` naming the bound's source. A plain `DeadlineExceeded` proved nothing:
    no bound, no scope (the referee then states the seed's schedule's scope)."""
    res = SolveResult(problem=problem, solver=name, status=TIMEOUT, message=BUILD_TIMEOUT_MESSAGE)
    if isinstance(exc, BuildTimeout) and with_bound_so_far(res, exc):
        res.message += f" (the lower bound is the {exc.source})"
    return res


def with_bound_so_far(res: SolveResult, known: Any) -> bool:
    """Put `known`'s proven bound (a `BuildTimeout`: bound, scope, source, details) into `res`; False
    (nothing changed) when `known` is not one or its bound is not finite."""
    if not isinstance(known, BuildTimeout) or not math.isfinite(known.lower_bound):
        return False
    res.lower_bound, res.scope = known.lower_bound, known.scope
    res.details.update(known.details)
    res.details["bound_from"] = known.source
    return True


#: ``reseed(instance, budget, seed, deadline, options, not_run)``: a problem's own seed after its fast solvers
Reseed = Callable[[Any, int, SolveResult | None, Deadline, ExactOptions, list[str]], SolveResult | None]


def exact_solver(problem: str, name: str, fast: Sequence[str], *, time_limit: float = DEFAULT_TIME_LIMIT,
                 workers: int = 1, slots: int = 500, least: Callable[[Any], float] | None = None,
                 reseed: Reseed | None = None) -> Callable[[Callable[..., SolveResult]], Callable[..., SolveResult]]:
    """Decorator turning a model function into a solver of the registry (module docstring).
    `time_limit`, `workers` and `slots` are the solver's defaults; `least(instance)` is a lower bound on
    every schedule of the problem (e.g. every op once: sum of the times), used as the bound when
    the model's own is not valid for the returned schedule, and a schedule reaching it is optimal.
    `reseed` (the offloading models: pofo at exact sizes, whose table grows with the budget) runs after
    the fast solvers, with the warm start, and returns the seed the model and the referee use (the
    fast solvers' best, or a faster schedule); it appends what it left out for time to `not_run`.
    The solver takes ``budget=None`` (no memory limit) where its problem does (`registry.check_budget`:
    the pipeline), and hands None on to the fast solvers, the model and the referee; for another problem
    None is an `InputError` naming ``budget``."""
    defaults = ExactOptions(time_limit=time_limit, workers=workers, slots=slots)

    def decorate(fn: Callable[..., SolveResult]) -> Callable[..., SolveResult]:
        @functools.wraps(fn)
        def solver(instance: Any, budget: int | None, **kw: Any) -> SolveResult:
            from ..registry import check_budget

            check_budget(problem, budget)
            bytes_ = None if budget is None else int(budget)
            options, rest = ExactOptions.from_kwargs(defaults, **kw)
            deadline = Deadline(options.time_limit)
            if options.warm_start:
                report(f"{name}: warm start ({', '.join(fast)})")
            not_run: list[str] = []
            seeds: list[SolveResult] = []
            seed: SolveResult | None = None
            seeds_in = False  # run_fast has returned
            try:
                if options.warm_start:
                    seeds = run_fast(problem, instance, bytes_, fast, deadline, options, rest, not_run)
                seeds_in = True
                seed = best_seed(seeds)
                if reseed is not None and options.warm_start and bytes_ is not None:  # (None: refused above)
                    seed = reseed(instance, bytes_, seed, deadline, options, not_run)
            except KeyboardInterrupt as exc:  # during the warm start: answer with its seeds so far if asked to
                if not seeds_in:  # (else the reseed was interrupted: the fast solvers' seeds stand)
                    seeds = getattr(exc, SEEDS_SO_FAR, seeds)
                seed = best_seed(seeds) if seed is None else seed
                if not answering() or seed is None or seed.objective is None:
                    raise
                note_interrupt()
                res = warm_start_interrupted(problem, name, deadline)
                if not_run:
                    res.details["fast_not_run"] = not_run
                floor = None if least is None else float(least(instance))
                return referee(problem, name, instance, bytes_, res, seeds, seed, deadline, options, floor)
            seed_at = deadline.elapsed()
            report(f"{name}: model", best=None if seed is None else seed.objective)
            try:
                res = fn(instance, bytes_, options=options, deadline=deadline, seed=seed, **rest)
            except DeadlineExceeded as exc:
                res = build_timeout_result(problem, name, exc)
            except KeyboardInterrupt as exc:  # outside a backend (building, root LP): answer with the seed if asked to
                if not answering():
                    raise
                note_interrupt()
                res = SolveResult(problem=problem, solver=name, status=TIMEOUT, message="")
                if with_bound_so_far(res, getattr(exc, BOUND_SO_FAR, None)):  # e.g. the root LP's, proven before
                    res.message = f"the lower bound is the {res.details['bound_from']}"
            if interrupted():
                res.details["interrupted"] = True
                note = f"interrupted after {deadline.elapsed():.1f} s"
                res.message = f"{note}; {res.message}" if res.message else note
            if seed is not None and seed.objective is not None:
                res.log = log_from_seed(res.log, seed_at, seed.objective)
            if not_run:
                res.details["fast_not_run"] = not_run
            floor = None if least is None else float(least(instance))
            return referee(problem, name, instance, bytes_, res, seeds, seed, deadline, options, floor)

        solver.exact_layer = True  # type: ignore[attr-defined]
        solver.fast_solvers = tuple(fast)  # type: ignore[attr-defined]
        solver.default_time_limit = time_limit  # type: ignore[attr-defined]
        return solver

    return decorate


def best_seed(seeds: Sequence[SolveResult]) -> SolveResult | None:
    """The seed of smallest objective among `seeds` (each with a schedule), None when there is none."""
    return min(seeds, key=lambda r: math.inf if r.objective is None else r.objective) if seeds else None


def warm_start_interrupted(problem: str, name: str, deadline: Deadline) -> SolveResult:
    """The model's answer when an answered Ctrl-C came during the warm start: status ``timeout``, no
    schedule and no bound (the model was not built; the referee adds the best seed's schedule, its scope
    and the floor bound), ``details["interrupted"]`` and ``details["not_built"]`` saying why."""
    note = f"interrupted after {deadline.elapsed():.1f} s, during the warm start"
    return SolveResult(problem=problem, solver=name, status=TIMEOUT, message=note,
                       details={"interrupted": True, "not_built": "interrupted during the warm start"})


def _slots_used(budget: int | None, slots: int | None) -> int:
    """`effective_slots` of `budget` (bytes), 0 (exact sizes) without one: no limit, nothing to cut into slots."""
    return 0 if budget is None else effective_slots(budget, slots)


def log_from_seed(log: list[tuple[float, float | None, float | None]], at: float, objective: float
                  ) -> list[tuple[float, float | None, float | None]]:
    """`log` (seconds, objective, bound) from the seed on: the seed's `objective` is in hand `at` seconds,
    so it is the first entry; the model's later entries keep their bounds, with their objective the
    best in hand (the seed's, where the model's incumbent was not better)."""
    later = [(t, o if o is None else min(o, objective), b) for t, o, b in log if t > at]
    return [(at, objective, None), *later]


def referee(problem: str, name: str, instance: Any, budget: int | None, res: SolveResult, seeds: list[SolveResult],
            seed: SolveResult | None, deadline: Deadline, options: ExactOptions,
            least: float | None = None) -> SolveResult:
    """Step 4 of the module docstring; returns `res`, corrected. `budget` None: no memory limit (no slots)."""
    res.problem, res.solver, res.budget = problem, name, budget
    res.details.setdefault("fast", {r.solver: r.objective for r in seeds})
    if seed is not None:
        res.seeded_by = seed.solver
    objective = None
    if res.schedule is not None:
        replay = _replay(problem)(instance, res.schedule, budget)
        if replay.violation is not None:
            raise RuntimeError(f"{name}: the simulator rejects the model's schedule: {replay.violation}")
        objective = float(replay.objective)
        if not math.isfinite(objective):
            raise InputError(f"the objective of {name}'s schedule is undefined ({objective}): check the "
                             "instance's times (latency, bandwidth, durations)", field="objective")
        res.objective, res.peak_memory = objective, int(replay.peak_memory)
    if seed is not None and seed.objective is not None and (
            objective is None or not same_or_less(objective, seed.objective)):
        model_status, model_objective = res.status, objective
        res.details["model_status"] = model_status
        if model_objective is not None:
            res.details["model_objective"] = model_objective
        res.schedule, res.objective, res.peak_memory = seed.schedule, seed.objective, seed.peak_memory
        res.details["solution_from"] = seed.solver
        why = {OPTIMAL: "is optimal only for its scope", FEASIBLE: "is slower",
               INFEASIBLE: "found no schedule in its scope", TIMEOUT: "found no schedule in time"}.get(model_status, "")
        note = f"the model {why}; returned {seed.solver}'s schedule (replayed at exact sizes)"
        if res.details.get("not_built"):  # e.g. too large for the machine's memory: the message says so
            note = f"returned {seed.solver}'s schedule (replayed at exact sizes)"
        res.message = f"{res.message}; {note}" if res.message else note
        if model_status == OPTIMAL:
            res.scope += "; the model's optimum lost to a fast solver at exact sizes"
        elif not res.scope or res.details.get("not_built"):  # no model ran: the schedule's own scope
            res.scope = f"{seed.solver}'s schedule ({seed.scope})" if seed.scope else f"{seed.solver}'s schedule"
        res.status = FEASIBLE
        objective = seed.objective
    elif seed is not None and seed.objective is not None and objective is not None and seed.objective < objective:
        # the model's makespan is the seed's within REL_TOL, but above it: the answer is never worse than a fast
        # solver's, so it takes the seed's schedule; the model's status stands (its proof has that tolerance)
        res.details["model_objective"] = objective
        res.schedule, res.objective, res.peak_memory = seed.schedule, seed.objective, seed.peak_memory
        res.details["solution_from"] = seed.solver
        slower = (objective - seed.objective) / objective if objective else math.inf  # relative: no unit to name
        note = f"returned {seed.solver}'s schedule; the model's is slower by {slower:.1e} of its makespan"
        res.message = f"{res.message}; {note}" if res.message else note
        objective = seed.objective
    if res.schedule is not None and res.status == TIMEOUT:
        res.status = FEASIBLE
    if res.status == OPTIMAL:
        n = _slots_used(budget, options.slots)
        # a model that ran with exact sizes (retried, or chosen) proved more than "for N slots"
        if n and "slot" in res.scope and "exact sizes" not in res.scope and f"optimal for {n} slots" not in res.scope:
            res.scope += f"; optimal for {n} slots"
    model_bound = _honest_bound(res.lower_bound, None)
    res.lower_bound = _honest_bound(res.lower_bound, objective)
    # a bound above the returned makespan holds for the model's scope only (N slots, a restricted class), and
    # the returned schedule (the seed's) lies outside it: the answer states the seed's scope instead
    scope_lost = model_bound is not None and res.lower_bound is None
    if (scope_lost and seed is not None and res.details.get("solution_from") == seed.solver
            and res.details.get("model_status") != OPTIMAL):  # (an optimum that lost already says so)
        res.scope = f"{seed.solver}'s schedule ({seed.scope})" if seed.scope else f"{seed.solver}'s schedule"
    if (seed is not None and res.details.get("solution_from") == seed.solver and res.status == FEASIBLE
            and _bound_reaches(res.lower_bound, objective) and not _slots_used(budget, options.slots)):
        # the model's bound (exact sizes) proves that no schedule of its scope beats the seed's
        res.status = OPTIMAL
        res.scope += (f"; the model's bound reaches {seed.solver}'s makespan: no schedule of the scope is faster "
                      "(the schedule itself may lie outside it)")
    if least is not None and objective is not None:
        floor = _honest_bound(least, objective)
        if floor is not None and (res.lower_bound is None or floor > res.lower_bound):
            res.lower_bound = floor
            if "bound_from" in res.details:  # the model named its bound's source: it is this one now
                res.details["bound_from"] = FLOOR_BOUND
        if res.status == FEASIBLE and same_or_less(objective, least):
            res.status = OPTIMAL  # nothing is faster than every op once
            res.scope += "; optimal among all schedules: the makespan is the least possible (every operation once)"
    if res.status == OPTIMAL and res.lower_bound is None:
        res.lower_bound = objective
    if res.lower_bound is None and res.details.get("bound_from"):  # the model's was dropped, none replaced it
        res.details["bound_from"] = ""
    res.log = honest_log(res.log, objective, res.lower_bound, every=scope_lost)
    res.solve_time_s = deadline.elapsed()
    return res


def honest_log(log: list[tuple[float, float | None, float | None]], objective: float | None,
               bound: float | None, every: bool = False) -> list[tuple[float, float | None, float | None]]:
    """`log` (seconds, objective, bound) with no bound above the returned `objective` (nor above its own
    triple's objective): such a bound is the model's for its scope only (e.g. sizes in N slots, which a
    schedule at exact sizes beat), not a bound of the problem. Each is replaced by `bound`, the answer's
    final honest bound (the problem's floor, every operation once, valid from the start; or None), not
    clamped to the objective, which would claim a proof at that time. With `every` (the model's final
    bound was dropped: its bounds are of a scope the returned schedule lies outside of) every bound of
    the log is replaced so."""
    out = []
    for t, o, b in log:
        if b is not None:
            cap = o if objective is None else objective if o is None else min(o, objective)
            b = _honest_bound(b, cap)  # (float noise above `cap` is taken as `cap`)
            if every or b is None:
                b = None if bound is None or (cap is not None and bound > cap) else bound
        out.append((t, o, b))
    return out


def _replay(problem: str) -> Callable[..., Any]:
    """The problem's simulator (its descriptor's ``replay``, else the package's function)."""
    from .. import registry

    getter = getattr(registry, "get_problem", None)
    if getter is not None:
        try:
            return getter(problem).replay
        except (AttributeError, ImportError):
            pass
    return registry.problem_module(problem).replay


def same_or_less(value: float, other: float) -> bool:
    """Whether makespan `value` is at most `other` (same time units) up to `REL_TOL` of the larger
    magnitude: purely relative, so exact when both are 0 and as fine for makespans of 1e-12
    units as for makespans of seconds. An infinite one (no schedule, an open cap) compares plainly:
    inf is at most inf only, and no finite value is within a tolerance of it."""
    if math.isinf(value) or math.isinf(other):
        return value <= other
    return value <= other + REL_TOL * max(abs(value), abs(other))


def _bound_reaches(bound: float | None, objective: float | None) -> bool:
    """True when `bound` proves `objective` optimal: at most `REL_TOL` (relative, `same_or_less`) below it."""
    return bound is not None and objective is not None and same_or_less(objective, bound)


def _honest_bound(bound: float | None, objective: float | None) -> float | None:
    """A finite bound no larger than the objective, else None (a bound above the objective by at most
    1e-6 of the larger, relative with no absolute floor, is taken as the objective: float noise)."""
    if bound is None:
        return None
    b = float(bound)
    if not math.isfinite(b) or abs(b) >= 1e19:
        return None
    if objective is not None and b > objective:
        return objective if b - objective <= 1e-6 * max(abs(b), abs(objective)) else None
    return b


def retry_rounded_infeasible(solve_fn: Any, instance: Any, budget: int, *, options: ExactOptions,
                             deadline: Deadline, **kw: Any) -> SolveResult:
    """``solve_fn(instance, budget, options=..., deadline=..., **kw)``; when the sizes rounded up to
    `options.slots` (N effective slots) make the model infeasible, `solve_fn` again with exact
    sizes (slots=0) in the time left, its ``details["retried_exact_sizes"]`` saying why, so that
    ``infeasible`` is about the real budget. With no time left for that retry the first answer is
    returned with status ``timeout`` (the limit came before a schedule: nothing was proven about
    the real budget) and a message naming the N slots. Any problem whose model takes
    ``options.slots``."""
    res = solve_fn(instance, budget, options=options, deadline=deadline, **kw)
    n = effective_slots(budget, options.slots)
    if res.status == INFEASIBLE and n:
        if deadline.expired():
            res.status = TIMEOUT
            res.message += f" (with sizes in {n} slots; no time left to retry with exact sizes)"
            return res
        exact = solve_fn(instance, budget, options=replace(options, slots=0), deadline=deadline, **kw)
        exact.details["retried_exact_sizes"] = f"infeasible with sizes in {n} slots"
        return exact
    return res
