"""Run a `LinearModel` on HiGHS through its own Python interface (highspy), which reports the
MIP's dual bound (OR-Tools' pywraplp HiGHS reports the incumbent's value as its "best bound").

Same mapping as `milp_runner.run_milp`: status ``optimal`` only with a bound within the relative
gap, ``feasible`` with a solution and no proof, ``infeasible`` only when proven before the time
limit, ``timeout`` without a solution; objective and bound in the model's units (offset included;
the bound is moved by the difference between the model's value of the returned solution and
HiGHS's own objective, as for CBC). HiGHS's "Infeasible" is a proof only when a second run without
presolve says it too (`rerun_without_presolve`: its presolve called feasible models infeasible); a
"Solve error" gets that run as well; when it finds a solution, the answer is that run's.

No MIP start is given: HiGHS 1.16 evaluates a start in its presolved space without the objective
offset of the columns presolve removed (e.g. the variables fixed by reduced costs) and prunes on
that value. On the phase model of ``random_chain(50, 0)`` at M = 248 (100 slots) it reported as
optimal 345.76 a start whose value is 347.81 after 2.7 s; without a start it finds 347.81 itself
and proves it. The exact layer's referee still returns the best fast solver's schedule when it
is faster than HiGHS's.
"""

from __future__ import annotations

import math
import os
import sys
import threading

import numpy as np

from ..result import TIMEOUT
from .interrupt import stop_on_interrupt
from .linear import LinearModel
from .options import Deadline, ExactOptions


def available() -> bool:
    """Whether highspy can be imported here."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def _quiet_highs(highspy):  # noqa: ANN001, ANN202 (the module, a highspy.Highs)
    """A `highspy.Highs` built with file descriptor 1 on /dev/null: its constructor writes a
    banner to the process's stdout (C level, whatever ``output_flag`` says), which would corrupt
    `memsched solve --json`."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


#: seconds past the time limit after which a HiGHS run that has not returned is cancelled (`run_until`)
CANCEL_AFTER_S = 0.5


def run_until(h, left: float | None, cancel_after: float = CANCEL_AFTER_S) -> None:  # noqa: ANN001 (a highspy.Highs)
    """``h.run()`` within `left` seconds (None: no limit): HiGHS's own time limit, a watchdog that cancels
    the run `cancel_after` seconds past it (HiGHS checks its clock only now and then), and a Ctrl-C that
    cancels it (`stop_on_interrupt`), the run then returning with HiGHS's status so far."""
    if left is not None:
        h.setOptionValue("time_limit", max(0.1, left))
    watchdog = None
    if left is not None and hasattr(h, "cancelSolve"):
        watchdog = threading.Timer(max(0.0, left) + cancel_after, h.cancelSolve)
        watchdog.daemon = True
        watchdog.start()
    if hasattr(h, "HandleUserInterrupt"):
        h.HandleUserInterrupt = True  # else cancelSolve does nothing: HiGHS polls it through its interrupt callbacks
    try:
        with stop_on_interrupt(h.cancelSolve, repeat=True):
            h.run()
    finally:
        if watchdog is not None:
            watchdog.cancel()


def rerun_without_presolve(h, deadline: Deadline) -> str:  # noqa: ANN001 (a highspy.Highs)
    """Solve `h`'s model again, from scratch and without presolve, in what is left of `deadline`, after
    HiGHS answered "Infeasible" or "Solve error" with presolve; `h`'s status is then this run's, and
    its text is returned.

    HiGHS 1.16's MIP presolve answers "Infeasible" on some feasible models: Checkmate's model of a
    5-node graph (``tests/test_highsinf49.py``) without its objective (the feasibility-only first phase
    of `solvers.graph.milp`), about 1 in 40 budgets of random 5-6-node graphs, its log warning that the
    solutions it found "have untransformed violations" once postsolved (HiGHS issues #2204, #3296);
    with presolve off it finds the schedule. On an infeasible 5-node one it reduced the model to
    nothing, and the postsolved point broke a row: "Solve error" (no answer), "Infeasible" without
    presolve. So "Infeasible" is believed only when this run says it too. An infeasible model costs a
    second search, without presolve's reductions (Checkmate's model of ``random_layered(30, 1)`` at
    budgets 32 and 34: 24 s and 26 s after 16 s and 24 s with presolve, one thread), at most the time
    left (then "Time limit reached": no proof). No run starts when the deadline has passed or a Ctrl-C
    stopped the solve (`milp_runner.not_started`): the status is then "not run", no proof."""
    from .milp_runner import not_started

    h.clearSolver()  # from scratch; and the model status is no longer "Infeasible"
    if not_started(deadline) is not None:
        return "not run"
    h.setOptionValue("presolve", "off")
    run_until(h, deadline.left())
    return str(h.modelStatusToString(h.getModelStatus()))


def failed(status, deadline: Deadline) -> bool:  # noqa: ANN001 (a highspy.HighsModelStatus)
    """Whether HiGHS's final model `status` is an error (load, model, presolve, solve, postsolve, or "Unknown")
    while `deadline` has time left and no Ctrl-C stopped the solve (`milp_runner.not_started`): a failure, not a
    limit. On a 2-stage chain at exact sizes (tests/test_backendfail49.py) HiGHS 1.16 answered "Infeasible",
    then "Solve error" without presolve, after 0.1 s of 20."""
    import highspy

    from .milp_runner import not_started

    s = highspy.HighsModelStatus
    errors = (s.kLoadError, s.kModelError, s.kPresolveError, s.kSolveError, s.kPostsolveError, s.kUnknown)
    return status in errors and not_started(deadline) is None


def run_highspy(model: LinearModel, deadline: Deadline, options: ExactOptions, *, rel_gap: float,
                feasibility_only: bool = False, hint_feasible: bool = False,
                relax: bool = False):  # noqa: ANN201 (a BackendRun)
    """Solve `model` (a MIP; with `relax` its LP relaxation) with highspy within what is left of
    `deadline` (wall clock: HiGHS's own limit, and a cancel half a second after it); a `BackendRun`.
    `hint_feasible`: a feasible schedule is known, so an "infeasible" answer is no proof (``timeout``).
    Otherwise an "infeasible" answer (and any "Solve error") is followed by a run without presolve
    (`rerun_without_presolve`, in the time left; ``backend_status`` gives both runs' statuses), and the
    answer is that run's: ``infeasible`` only when it agrees, its solution when it finds one, else ``timeout``,
    ``failed`` (`failed`) when HiGHS ended in an error with time left (``run_milp`` then asks another backend).
    An LP stopped by the limit keeps its values (status ``feasible``) with no bound.

    The objective is taken as it is: `milp_runner.run_milp` has scaled it by a power of two into a
    normal range (`milp_runner.objective_scale`; HiGHS's dual simplex failed on Checkmate's FCN-8
    times near 1e12, "excessive dual values", and its absolute tolerances swallowed costs near 1e-6).
    No absolute MIP gap (``mip_abs_gap`` 0)."""
    import highspy

    from .milp_runner import BackendRun, finite_bound, infeasible, settle

    t_build = deadline.elapsed()
    h = _quiet_highs(highspy) if not options.verbose else highspy.Highs()
    h.setOptionValue("output_flag", bool(options.verbose))
    h.setOptionValue("mip_rel_gap", float(rel_gap))
    h.setOptionValue("mip_abs_gap", 0.0)  # the proof is relative; HiGHS's default 1e-6 is absolute
    h.setOptionValue("random_seed", int(options.seed))
    # as the other backends' `num_workers`, but at most one per CPU: HiGHS starts every thread it is given
    # (chain milp with workers=10000 took 48 s on a 10 s limit; with 1 worker 0.6 s)
    h.setOptionValue("threads", max(1, min(int(options.workers), os.cpu_count() or 1)))
    n = len(model.lb)
    cost = np.zeros(n)
    if not feasibility_only:
        for i, c in model.objective.items():
            cost[i] += c
    empty_i, empty_f = np.zeros(0, dtype=np.int32), np.zeros(0)
    h.addCols(n, cost, np.asarray(model.lb, dtype=float), np.asarray(model.ub, dtype=float), 0,
              empty_i, empty_i, empty_f)
    if not relax:
        h.changeColsIntegrality(n, np.arange(n, dtype=np.int32),
                                np.array([highspy.HighsVarType.kInteger if b else highspy.HighsVarType.kContinuous
                                          for b in model.integer]))
    if not feasibility_only:
        h.changeObjectiveOffset(float(model.offset))
    inf = highspy.kHighsInf
    lower, upper, starts, index, value = [], [], [0], [], []
    for r, (idx, coef, lo, hi) in enumerate(model.rows):
        if r % 4096 == 0:
            deadline.check()
        lower.append(-inf if lo == -math.inf else lo)
        upper.append(inf if hi == math.inf else hi)
        index.extend(idx)
        value.extend(coef)
        starts.append(len(index))
    if model.rows:
        h.addRows(len(model.rows), np.array(lower), np.array(upper), len(index),
                  np.array(starts[:-1], dtype=np.int32), np.array(index, dtype=np.int32), np.array(value))
    build_s = deadline.elapsed() - t_build
    deadline.check()
    left = deadline.left()
    t_run = deadline.elapsed()
    run_until(h, left)
    status_text = h.modelStatusToString(h.getModelStatus())
    at_limit = left is not None and deadline.elapsed() - t_run >= 0.9 * left
    # an "Infeasible" that `infeasible` would report as a proof, or presolve's postsolved point broke the model
    if (h.getModelStatus() == highspy.HighsModelStatus.kInfeasible and not (hint_feasible or at_limit)) \
            or h.getModelStatus() == highspy.HighsModelStatus.kSolveError:
        t_run, left = deadline.elapsed(), deadline.left()
        status_text += f"; presolve off: {rerun_without_presolve(h, deadline)}"
    wall = deadline.elapsed()
    run = BackendRun(TIMEOUT, wall=wall, backend_status=f"highspy: {status_text}", build_s=build_s)
    run.log = [(wall, None, None)]
    info = h.getInfo()
    if h.getModelStatus() == highspy.HighsModelStatus.kInfeasible:
        return infeasible(run, left=left, solve_s=wall - t_run, hint_feasible=hint_feasible)
    if info.primal_solution_status != 2:  # no feasible solution
        run.failed = failed(h.getModelStatus(), deadline)
        return run
    values = list(h.getSolution().col_value)
    if relax:
        proven = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
        objective = model.value([float(v) for v in values])
        return settle(run, [float(v) for v in values], objective, objective if proven else None, proven)
    values = [float(round(v)) if model.integer[i] else float(v) for i, v in enumerate(values)]
    objective = model.value(values)
    bound = None
    if not feasibility_only:
        raw = finite_bound(info.mip_dual_bound)
        if raw is not None:
            bound = finite_bound(raw + (objective - info.objective_function_value))
    proven = h.getModelStatus() == highspy.HighsModelStatus.kOptimal and not feasibility_only
    return settle(run, values, objective, bound, proven)


__all__ = ["available", "failed", "rerun_without_presolve", "run_highspy"]
