"""Run a `LinearModel` on an OR-Tools MILP backend (pywraplp: SCIP, CBC, HiGHS; GLOP for the LP
relaxation; HiGHS through highspy when it is installed, `highs_runner`) under a wall-clock
`Deadline`, and map the answer once:

- status ``optimal`` (proven with relative gap <= 1e-9; a backend that stops at its own
  default gap is ``feasible``), ``feasible`` (a solution, no proof), ``infeasible`` (proven),
  ``timeout`` (no solution: the limit came first). A backend ``INFEASIBLE`` is *not* a proof
  when a feasible hint was given or the time limit was reached: it is reported ``timeout``;
- the bound is a finite real number or None (backends report +-1e20 or inf for "none");
- the objective reaches every backend scaled by a power of two (`objective_scale`) so that its
  largest |coefficient| is in a normal range, and the absolute gaps are 0 where a backend takes
  one: the backends' absolute tolerances (HiGHS's ``mip_abs_gap`` of 1e-6 and its dual
  feasibility tolerance, SCIP's epsilons) are not scale-free, and Checkmate's model of a graph
  timed in seconds (costs near 1e-6) was "proved" optimal 3% above its optimum. Objective,
  bound and log come back in the model's units (the scale is undone exactly);
- the backend gets what is left of the deadline after the model is emitted; emission checks
  the deadline every few thousand rows and raises `DeadlineExceeded` when it is spent, and a
  watchdog interrupts backends that support it if they overrun;
- CBC runs as a child process (`cbc_cmd`: wall-clock ``-timeMode elapsed``, killed at the
  deadline, the hint as its MIP start): OR-Tools' in-process CBC counts CPU seconds and cannot
  be interrupted, so under load it overran a 30 s limit by minutes. Without a CBC program the
  in-process CBC is used (CPU-time limit);
- a backend that *fails* (``BackendRun.failed``: it ended with no values and no proof, neither at
  its time limit nor at a Ctrl-C: HiGHS's "Solve error" after its rerun without presolve, the CBC
  program dying without its solution file, as it did on ``std::bad_alloc``, pywraplp's ABNORMAL or
  MODEL_INVALID) is followed, while time is left, by another backend (`FALLBACK_BACKEND`: SCIP for
  HiGHS and CBC, HiGHS for SCIP) in the time left (`after_failure`), whose proof or plan is the
  answer (the caller checks a plan as it checks any backend's); ``backend_status`` names both.
  Before, such a run was reported ``timeout`` after 0.2 s of a 20 s limit, and no other backend
  was tried. ``timeout`` then means that the deadline passed, or that both backends failed (the
  status says so);
- ``options.memory_gb`` (GB) reaches SCIP only (``limits/memory``, `scip_settings`): HiGHS, CBC and GLOP
  get no memory limit, so a solver that runs them alone refuses the option (chain ``milp``,
  `solvers.chain.milp.check_memory`) or uses it to size its model before building it (graph ``checkmate``).

OR-Tools' native library is loaded when this module is imported, before anything here can import
PuLP (`cbc_cmd.cbc_program` also loads it first): PuLP's ``__init__`` loads highspy's extension, a
second HiGHS (1.16; OR-Tools bundles 1.12), with ``RTLD_GLOBAL``, and an OR-Tools loaded after it
binds its HiGHS symbols to highspy's: pywraplp's HiGHS (used when highspy cannot be imported) then
crashed the process (segmentation fault in ``HighsSolveProto``) in its first solve.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..progress import report
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, gap_closed
from . import highs_runner, memory
from .cbc_cmd import cbc_program, column_name, model_to_mps, solve_mps
from .interrupt import in_charge, interrupted, stop_on_interrupt
from .linear import LinearModel
from .options import Deadline, DeadlineExceeded, ExactOptions
from .stdio import stdout_to_stderr

MILP_BACKENDS = {"scip": "SCIP", "cbc": "CBC", "highs": "HIGHS", "glop": "GLOP"}
REL_GAP = 1e-9
#: |bound| at or above this is a backend's way of saying "no bound"
NO_BOUND = 1e19
try:  # OR-Tools' HiGHS bound to its own symbols before PuLP can bring highspy's (module docstring)
    from ortools.linear_solver import pywraplp as _pywraplp  # noqa: F401
except ImportError:  # checked where a backend is asked for
    pass


@dataclass
class BackendRun:
    """What a backend returned, mapped: status, values (indexed like the model's variables),
    objective and bound (model units, offset included), log of (s, objective, bound)."""

    status: str
    values: list[float] | None = None
    objective: float | None = None
    bound: float | None = None
    log: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    wall: float = 0.0
    backend_status: str = ""
    build_s: float = 0.0
    solver: Any = None
    #: the backend ended with no values and no proof, neither at its time limit nor at a Ctrl-C: an error or a
    #: crash (`after_failure` then asks another backend)
    failed: bool = False
    #: the failed backend's account ("cbc failed (...)") when this is another backend's answer after it
    failure: str = ""
    #: the backend whose answer this is when it is not the one asked (`after_failure`), else ""
    answered_by: str = ""

    @property
    def found(self) -> bool:
        """True when the backend returned variable values (a solution)."""
        return self.values is not None


def check_backend_name(backend: Any, backends: tuple[str, ...]) -> None:
    """A solver's ``backend`` option: None (its default) or one of `backends`, in any case; else `InputError`
    naming ``--option backend``."""
    from ..errors import InputError, option_field

    if backend is not None and (not isinstance(backend, str) or backend.lower() not in backends):
        raise InputError(f"unknown MILP backend {backend!r} (one of {', '.join(backends)})",
                         field=option_field("backend"))


def finite_bound(value: Any) -> float | None:
    """A backend's bound as a finite float, or None when it is missing, infinite or +-1e20."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and abs(v) < NO_BOUND else None


def settle(run: BackendRun, values: list[float], objective: float, bound: float | None, proven: bool) -> BackendRun:
    """Fill `run` with a solution: ``optimal`` when its bound (with `proven`, the backend's claim,
    the objective when it gives none) is within 1e-6 relative of the objective (a backend stopped
    at a gap of its own proves nothing; one stopped by the clock with its bound at its incumbent,
    as the CBC program once was on a two-variable model under load, has proven it), else
    ``feasible``; the bound is capped at the objective."""
    status = FEASIBLE
    if proven and bound is None:
        bound = objective
    if gap_closed(objective, bound):
        status = OPTIMAL
    if bound is not None:
        bound = min(bound, objective)
    run.status, run.values, run.objective, run.bound = status, values, objective, bound
    run.log = [(run.wall, objective, bound)]
    return run


#: rows whose largest |coefficient| exceeds this are scaled down (`row_scale`)
ROW_SCALE_ABOVE = 2.0 ** 20


def row_scale(coef: list[float]) -> float:
    """The power of two that brings a row's largest |coefficient| into [2^19, 2^20) when it is at or
    above `ROW_SCALE_ABOVE` (else 1.0: rows of times and 0-1 logic stay as they are). Multiplying a
    row (coefficients and bounds) by a power of two is exact in floating point (normal numbers), so
    the model is unchanged; but SCIP given the chain phase model's memory rows in bytes (coefficients and budget
    near 1e10) proved a wrong optimum (30.03 where 29.29 is feasible in the same model, and HiGHS,
    CBC and CP-SAT find it): its tolerances are not scale-free at that magnitude. The largest
    coefficient is kept near 1e6, not 1, so that a row's small coefficients stay well above SCIP's
    zero tolerance (1e-9)."""
    top = max((abs(c) for c in coef), default=0.0)
    if not math.isfinite(top) or top < ROW_SCALE_ABOVE:
        return 1.0
    return math.ldexp(1.0, 20 - math.frexp(top)[1])


#: an objective whose largest |coefficient| lies in [1, OBJ_SCALE_ABOVE] goes to the backends as it is
OBJ_SCALE_ABOVE = 1e4


def objective_scale(model: LinearModel) -> float:
    """The power of two by which `model`'s objective (coefficients and offset) is multiplied before
    it reaches a backend: 1.0 when its largest |coefficient| lies in [1, `OBJ_SCALE_ABOVE`] (or the
    objective is empty), else the one that brings it into [2^9, 2^10). A power of two is exact in
    floating point (normal numbers): the scaled model has the same solutions, and the objective
    value and bound are undone exactly (`run_milp`)."""
    top = max((abs(c) for c in model.objective.values()), default=0.0)
    if top == 0.0 or not math.isfinite(top) or 1.0 <= top <= OBJ_SCALE_ABOVE:
        return 1.0
    return math.ldexp(1.0, min(1000, max(-1000, 10 - math.frexp(top)[1])))  # no overflow on subnormal costs


def scaled_objective(model: LinearModel, scale: float) -> LinearModel:
    """`model` with its objective and offset multiplied by `scale` (variables and rows shared)."""
    if scale == 1.0:
        return model
    return replace(model, objective={i: c * scale for i, c in model.objective.items()}, offset=model.offset * scale)


def unscaled(run: BackendRun, model: LinearModel, scale: float) -> BackendRun:
    """`run` of the model scaled by `scale` (`scaled_objective`) in `model`'s units: its objective
    is `model`'s value of its solution, its bound and log are divided by `scale` (exact)."""
    if scale == 1.0:
        return run
    inv = 1.0 / scale
    if run.objective is not None:
        run.objective = model.value(run.values) if run.values is not None else run.objective * inv
    if run.bound is not None:
        run.bound = run.bound * inv
        if run.objective is not None:
            run.bound = min(run.bound, run.objective)
    run.log = [(t, None if o is None else o * inv, None if b is None else b * inv) for t, o, b in run.log]
    return run


def infeasible(run: BackendRun, *, left: float | None, solve_s: float, hint_feasible: bool) -> BackendRun:
    """`run` after a backend's "infeasible": ``infeasible`` only when that is a proof, i.e. no
    feasible start is known and the backend stopped before 90% of the time it was given."""
    at_limit = left is not None and solve_s >= 0.9 * left
    if not (hint_feasible or at_limit):
        run.status = INFEASIBLE
    run.log = [(run.wall, None, None)]
    return run


def run_milp(model: LinearModel, backend: str, deadline: Deadline, options: ExactOptions | None = None, *,
             hint: list[float] | None = None, hint_feasible: bool = False, relax: bool = False,
             feasibility_only: bool = False, rel_gap: float = REL_GAP, lp_solver: str = "GLOP",
             watched: bool = False, fallback: bool = True) -> BackendRun:
    """Solve `model` with `backend` (one of MILP_BACKENDS; ``relax`` solves the LP relaxation
    with `lp_solver`: "GLOP", "CLP" (much faster than GLOP on Checkmate's large relaxations; falls
    back to GLOP where this build has no CLP) or "HIGHS" (highspy: held to the wall clock, which
    CLP is not; falls back to CLP without highspy). `hint` is a complete assignment (SCIP uses it,
    the CBC program takes it as its MIP start; HiGHS crashes on hints in pywraplp, so it gets
    none); `hint_feasible` says it satisfies the model. `watched`: the model is the whole problem
    and its objective the problem's, so its solution and bound go to the progress watcher
    (`solvers.progress`; the stage is reported in any case). With ``options.verbose`` the
    backend's log goes to standard error (`stdio.stdout_to_stderr`), never to standard output.
    The backend gets the objective scaled by `objective_scale` and no absolute gap; the answer is in
    `model`'s units. `fallback`: a MILP backend that fails (``BackendRun.failed``) is followed by another
    in the time left (`after_failure`; off where another backend already runs beside it, as in a race)."""
    report(f"LP relaxation ({lp_solver.lower()})" if relax else f"search ({backend})")
    scale = 1.0 if feasibility_only else objective_scale(model)
    with stdout_to_stderr(bool(options is not None and options.verbose)):  # the backends' C-level log (`stdio`)
        scaled = scaled_objective(model, scale)
        kw: dict[str, Any] = {"hint": hint, "hint_feasible": hint_feasible, "relax": relax,
                              "feasibility_only": feasibility_only, "rel_gap": rel_gap, "lp_solver": lp_solver}
        run = _run_milp(scaled, backend, deadline, options, **kw)
        if fallback and not relax:
            run = after_failure(run, backend, deadline, options,
                                lambda other: _run_milp(scaled, other, deadline, options, **kw))
    run = unscaled(run, model, scale)
    if watched and not relax and not feasibility_only and run.values is not None:
        report(best=run.objective, bound=run.bound)
    return run


#: the backend that runs in the time left after a backend fails (`after_failure`)
FALLBACK_BACKEND = {"highs": "scip", "cbc": "scip", "scip": "highs"}


def fallback_backend(backend: str, options: ExactOptions | None) -> str | None:
    """The backend asked after `backend` fails (`FALLBACK_BACKEND`), or None: none after GLOP, and HiGHS only
    through highspy and without ``options.memory_gb`` (SCIP's memory limit, which HiGHS would not hold)."""
    other = FALLBACK_BACKEND.get(backend)
    if other == "highs" and (not highs_runner.available() or (options is not None and options.memory_gb is not None)):
        return None
    return other


def after_failure(run: BackendRun, backend: str, deadline: Deadline, options: ExactOptions | None,
                  solve: Callable[[str], BackendRun]) -> BackendRun:
    """`run` of `backend`, or, when it failed (``run.failed``: no values, no proof, not its time limit nor a
    Ctrl-C) with time left, the answer of ``solve(other)`` (`fallback_backend`) in that time when it has a plan
    or a proof of infeasibility. ``backend_status`` names both runs; the answer is still ``failed`` when the
    other backend failed too. No other backend starts past the deadline or after a Ctrl-C (`not_started`),
    and a run that fails at the deadline is left as it is: it is then the limit's ``timeout``."""
    other = fallback_backend(backend, options)
    if not run.failed or run.values is not None or run.status == INFEASIBLE or not_started(deadline) is not None:
        return run
    first = f"{backend} failed ({run.backend_status})"
    if other is None:
        run.backend_status = f"{first}; no other backend to ask"
        return run
    report(f"search ({other}, after {backend} failed)")
    try:
        alt = solve(other)
    except DeadlineExceeded:  # the time ran out while the other backend's model was emitted
        alt = BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status="time limit reached while emitting the model")
    except RuntimeError as exc:  # e.g. a backend missing from this build
        alt = BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status=f"failed: {exc}", failed=True)
    alt.backend_status = f"{first}; then {other}: {alt.backend_status}"
    alt.failure = first
    alt.answered_by = other
    alt.build_s += run.build_s
    if alt.values is None and alt.status != INFEASIBLE and run.bound is not None:
        alt.bound = run.bound if alt.bound is None else max(alt.bound, run.bound)
    return alt


def not_started(deadline: Deadline) -> BackendRun | None:
    """The answer of a backend run that must not start: the deadline has passed, or a Ctrl-C already
    stopped a backend of this solve (inside `interrupt.answer_on_interrupt`: the solve answers with
    what it has, so a later phase, retry, or step of a loop of runs starts no new search). None
    when the run may start."""
    if deadline.expired():
        return BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status="not started")
    if interrupted():
        return BackendRun(TIMEOUT, wall=deadline.elapsed(), backend_status="not started: interrupted")
    return None


def _run_milp(model: LinearModel, backend: str, deadline: Deadline, options: ExactOptions | None, *,
              hint: list[float] | None, hint_feasible: bool, relax: bool, feasibility_only: bool, rel_gap: float,
              lp_solver: str) -> BackendRun:
    """`run_milp` without the progress reports."""
    from ortools.linear_solver import pywraplp

    options = options or ExactOptions()
    if (skipped := not_started(deadline)) is not None:
        return skipped
    if relax and lp_solver == "HIGHS" and highs_runner.available():
        # highspy's LP keeps a wall-clock limit and can be cancelled (CLP in pywraplp ran 121 s
        # past a 346 s limit on an RL500 relaxation, and InterruptSolve does not stop it)
        return highs_runner.run_highspy(model, deadline, options, rel_gap=rel_gap, relax=True)
    if backend == "highs" and not relax and highs_runner.available():
        # highspy reports the dual bound (pywraplp's HiGHS does not); no MIP start (highs_runner)
        return highs_runner.run_highspy(model, deadline, options, rel_gap=rel_gap, feasibility_only=feasibility_only,
                                        hint_feasible=hint_feasible)
    t_build = deadline.elapsed()
    if backend == "cbc" and not relax and cbc_program() is not None:  # the model goes to the program as MPS text
        return _run_cbc_program(model, deadline, options, t_build, hint=hint, hint_feasible=hint_feasible,
                                feasibility_only=feasibility_only, rel_gap=rel_gap)
    name = ("CLP" if lp_solver == "HIGHS" else lp_solver) if relax else MILP_BACKENDS[backend]
    solver = pywraplp.Solver.CreateSolver(name)
    if solver is None and relax and name != "GLOP":
        name, solver = "GLOP", pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        raise RuntimeError(f"OR-Tools backend {name} is not available in this build")
    if options.verbose:
        solver.EnableOutput()
    inf = solver.infinity()
    xs = [solver.Var(lo, hi, (integer and not relax), "") for lo, hi, integer in
          zip(model.lb, model.ub, model.integer)]
    for n, (idx, coef, lo, hi) in enumerate(model.rows):
        if n % 4096 == 0:
            deadline.check()
        scale = row_scale(coef)
        ct = solver.Constraint(-inf if lo == -math.inf else lo * scale, inf if hi == math.inf else hi * scale)
        for i, c in zip(idx, coef):
            ct.SetCoefficient(xs[i], c * scale)
    obj = solver.Objective()
    if not feasibility_only:
        for i, c in model.objective.items():
            obj.SetCoefficient(xs[i], c)
        obj.SetOffset(model.offset)
    obj.SetMinimization()
    use_hint = hint is not None and not relax and backend == "scip"
    if use_hint and hint is not None:
        solver.SetHint(xs, [float(v) for v in hint])
    threads, note = backend_threads(backend, options.workers)
    if threads > 1 and not relax and backend != "cbc":  # this CBC build has no threads
        solver.SetNumThreads(threads)
    if backend == "highs" and not relax:
        # pywraplp's HiGHS ignores RELATIVE_MIP_GAP; the option string works (the call returns False)
        solver.SetSolverSpecificParametersAsString(f"mip_rel_gap={rel_gap}\nmip_abs_gap=0\n")
    params = pywraplp.MPSolverParameters()
    if not relax:
        params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, rel_gap)
    build_s = deadline.elapsed() - t_build
    deadline.check()
    left = deadline.left()
    if left is not None:
        # the backend copies the model before its clock starts (seconds for 10^5 rows): that copy
        # is charged as long as emitting it took
        solver.SetTimeLimit(max(1, int(1000 * (left - build_s))))
    if backend == "scip" and not relax:
        solver.SetSolverSpecificParametersAsString(scip_settings(options))
    watchdog = _watchdog(left, solver.InterruptSolve)
    try:
        with stop_on_interrupt(solver.InterruptSolve, repeat=True):
            code = solver.Solve(params)
    finally:
        if watchdog is not None:
            watchdog.cancel()
    wall = deadline.elapsed()
    names = {pywraplp.Solver.OPTIMAL: "OPTIMAL", pywraplp.Solver.FEASIBLE: "FEASIBLE",
             pywraplp.Solver.INFEASIBLE: "INFEASIBLE", pywraplp.Solver.UNBOUNDED: "UNBOUNDED",
             pywraplp.Solver.ABNORMAL: "ABNORMAL", pywraplp.Solver.NOT_SOLVED: "NOT_SOLVED"}
    status_name = names.get(code, str(code)) + ("" if relax else note)
    # SCIP stopped at its memory limit (``memory_gb``) answers ABNORMAL too: that is a limit, not a failure
    failed = code in (pywraplp.Solver.ABNORMAL, pywraplp.Solver.MODEL_INVALID) and not relax \
        and not (backend == "scip" and options.memory_gb is not None) and not_started(deadline) is None
    run = BackendRun(TIMEOUT, wall=wall, backend_status=status_name, build_s=build_s, failed=failed)
    if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        values = [x.solution_value() for x in xs]
        objective = model.value(values)
        bound = None
        if not feasibility_only and not relax:
            bound = finite_bound(obj.BestBound())
            if backend == "highs" and code != pywraplp.Solver.OPTIMAL:
                bound = None  # pywraplp's HiGHS reports the incumbent's value as its "best bound"
        return settle(run, values, objective, bound, code == pywraplp.Solver.OPTIMAL and not feasibility_only)
    if code == pywraplp.Solver.INFEASIBLE:
        return infeasible(run, left=left, solve_s=wall - t_build - build_s, hint_feasible=hint_feasible)
    run.log = [(wall, None, None)]
    return run


#: the most threads SCIP takes (its ``parallel/maxnthreads``: a larger count is refused with
#: C-level errors on stderr and the setting silently dropped)
SCIP_MAX_THREADS = 64


def backend_threads(backend: str, workers: int) -> tuple[int, str]:
    """(threads given to the pywraplp `backend`, a note for ``backend_status``): `workers` (the
    option, at most `options.MAX_WORKERS`), but at most `SCIP_MAX_THREADS` for SCIP, which then
    says so in the note ("" when nothing was lowered)."""
    if backend == "scip" and workers > SCIP_MAX_THREADS:
        return SCIP_MAX_THREADS, f" (SCIP takes at most {SCIP_MAX_THREADS} threads: {SCIP_MAX_THREADS} used, " \
                                 f"not workers={workers})"
    return workers, ""


def scip_settings(options: ExactOptions) -> str:
    """SCIP's parameter file text for `options`: no absolute gap (the proof is relative), the seed
    (``randomization/randomseedshift``; 0 keeps SCIP's default search), Ctrl-C left to us when we
    handle it (`interrupt`: SCIP would swallow it), and the memory limit (a growing tree stops SCIP
    with its incumbent, not the out-of-memory killer)."""
    lines = ["limits/absgap = 0"]
    if options.seed:
        lines.append(f"randomization/randomseedshift = {int(options.seed)}")
    if in_charge():
        lines.append("misc/catchctrlc = FALSE")
    mb = memory.limit_mb(options.memory_gb)
    if mb is not None:
        lines.append(f"limits/memory = {mb}")
    return "\n".join(lines) + "\n"


def _run_cbc_program(model: LinearModel, deadline: Deadline, options: ExactOptions, t_build: float, *,
                     hint: list[float] | None, hint_feasible: bool, feasibility_only: bool,
                     rel_gap: float) -> BackendRun:
    """`run_milp` for CBC through `cbc_cmd.solve_mps` (wall-clock limit, killed at the deadline)."""
    mps = model_to_mps(model, feasibility_only=feasibility_only, check=deadline.check)
    build_s = deadline.elapsed() - t_build
    deadline.check()
    left = deadline.left()
    names = [column_name(i) for i in range(model.num_vars)]
    ans = solve_mps(mps, model.num_vars, left, rel_gap=rel_gap, threads=options.workers, hint=hint, names=names,
                    verbose=options.verbose, seed=options.seed)
    wall = deadline.elapsed()
    run = BackendRun(TIMEOUT, wall=wall, backend_status=f"CBC program: {ans.ended}", build_s=build_s,
                     failed=ans.failed)
    run.log = [(wall, None, None)]
    if ans.status == INFEASIBLE:
        return infeasible(run, left=left, solve_s=wall - t_build - build_s, hint_feasible=hint_feasible)
    if ans.values is None:
        return run
    objective = model.value(ans.values)
    bound = None
    if not feasibility_only and ans.bound is not None and ans.objective is not None:
        bound = finite_bound(ans.bound + (objective - ans.objective))  # CBC's units -> the model's (offset)
    return settle(run, ans.values, objective, bound, ans.status == OPTIMAL and not feasibility_only)


def _watchdog(left: float | None, interrupt: Any) -> threading.Timer | None:
    """Interrupt a backend still running when the deadline is spent (+0.2 s of grace)."""
    if left is None:
        return None
    timer = threading.Timer(max(0.0, left) + 0.2, interrupt)
    timer.daemon = True
    timer.start()
    return timer


__all__ = ["BackendRun", "DeadlineExceeded", "FALLBACK_BACKEND", "MILP_BACKENDS", "after_failure", "finite_bound",
           "objective_scale", "run_milp"]
