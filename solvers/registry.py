"""Problems and their solvers, and the one entry point that runs a solver under the referee.

Each problem is a subpackage ``memsched.solvers.<problem>`` that defines ``PROBLEM``, a
`solvers.problem.Problem` descriptor (load, replay, reference_peak, memory_profile, the
objective's name, the schedule reader and the solver table). This module reads only those
descriptors.

A solver is ``fn(instance, budget, *, slots=500, time_limit=None, **options) -> SolveResult``
with ``budget`` in the instance's size unit (bytes). ``budget=None`` means no memory limit for the
problems of `NO_LIMIT_PROBLEMS` (the pipeline: every one of its solvers, the exact ones included, takes it);
for the others it is an `InputError` naming ``budget`` (`check_budget`). Solvers whose module cannot be
imported (an optional dependency missing) are not listed.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .errors import InputError, article
from .problem import Problem, Replay
from .result import FEASIBLE, OPTIMAL, TIMEOUT, SolveResult

__all__ = ["PROBLEMS", "Problem", "Replay", "get_problem", "problem_module", "available_problems", "solver_table",
           "get_solver", "monotone_in_budget", "NO_LIMIT_PROBLEMS", "check_budget", "solve"]

PROBLEMS = ("chain", "graph", "join", "offload", "pipeline")
#: the problems whose solvers read ``budget=None`` as "no memory limit": the pipeline (its period-only
#: planners and benchmarks partition unlimited, and every one of its models and simulators takes None).
#: The others' solvers and simulators need a number of bytes, so None there is refused (`check_budget`)
NO_LIMIT_PROBLEMS = frozenset({"pipeline"})


def problem_module(problem: str) -> ModuleType:
    """The package ``memsched.solvers.<problem>`` (`InputError` for an unknown problem name)."""
    if problem not in PROBLEMS:
        raise InputError(f"unknown problem {problem!r} (one of {', '.join(PROBLEMS)})")
    return importlib.import_module(f".{problem}", __package__)


def get_problem(problem: str) -> Problem:
    """The descriptor ``PROBLEM`` of `problem` (`InputError` for an unknown problem name)."""
    descriptor = problem_module(problem).PROBLEM
    assert isinstance(descriptor, Problem)
    return descriptor


def available_problems() -> list[str]:
    """The problems whose package imports here."""
    out = []
    for p in PROBLEMS:
        try:
            get_problem(p)
        except ImportError:
            continue
        out.append(p)
    return out


def solver_table(problem: str | None = None) -> list[tuple[str, str, str]]:
    """(problem, solver, summary) for every importable solver."""
    rows = []
    for p in [problem] if problem else available_problems():
        desc = get_problem(p)
        available = set(desc.available_solvers())
        rows += [(p, name, summary) for name, (_, summary) in desc.solvers.items() if name in available]
    return rows


def monotone_in_budget(solver: Callable[..., SolveResult]) -> bool:
    """Whether `solver` finding a schedule at budget B implies one at every budget above B, so that
    bisection proves its smallest budget: the exact solvers (``exact_layer``: a schedule of their
    model at B fits any larger budget) and the heuristics that declare it (``monotone_in_budget =
    True``, with the reason beside the declaration: the join share baselines). Not declared: those
    seen to fail at some budget and succeed one byte below (rotor-offload; the graph's dtr,
    dtr-orders and checkmate-approx), pofo (its answers include rotor-offload's), and any heuristic
    that does not say."""
    return bool(getattr(solver, "exact_layer", False) or getattr(solver, "monotone_in_budget", False))


def get_solver(problem: str, name: str, *, host_link: bool = False) -> Callable[..., SolveResult]:
    """The solver function `name` of `problem` (`InputError` on ``--solver`` when unknown; for an
    offloading solver named on a chain, one that says what makes it an offloading instance:
    `_offloading_solver_on_chain`). `host_link`: the chain being solved (its file) has a host link,
    dropped because the chain problem was named."""
    try:
        return get_problem(problem).solver(name)
    except InputError as err:
        if problem == "chain" and name in get_problem("offload").solvers:
            raise InputError(_offloading_solver_on_chain(name, host_link), field=err.field) from None
        if problem == "chain" and name in get_problem("pipeline").solvers:  # a chain is a pipeline's input too
            raise InputError(f"{name!r} is a pipeline partitioner, not a {problem} solver: "
                             f"memsched partition FILE --devices P --memory M --solver {name} "
                             "(problem='pipeline' in Python); "
                             f"chain solvers: {', '.join(get_problem(problem).available_solvers())}",
                             field=err.field) from None
        raise


def _offloading_solver_on_chain(name: str, host_link: bool = False) -> str:
    """The message for offloading solver `name` named on the chain problem: with a `host_link` (the
    instance or its file has one) the chain problem named explicitly is what hides it; else the
    chain needs a link (a bandwidth, or a ``host_link`` in its file)."""
    if host_link:
        return (f"{name!r} is an offloading solver and the chain problem was named, which sets this chain's "
                "host link aside: drop --problem chain or give --problem offload (problem='offload' in Python)")
    return (f"{name!r} is an offloading solver and this chain has no host link: give its bandwidth "
            "(--bandwidth, or bandwidth=... in Python) or a host_link in the chain file")


def check_budget(problem: str, budget: int | None) -> None:
    """`InputError` naming ``budget`` when `budget` is None and `problem` has no "no limit" (not in
    `NO_LIMIT_PROBLEMS`): its solvers need a memory budget (bytes)."""
    if budget is None and problem not in NO_LIMIT_PROBLEMS:
        takes = " or ".join(article(p) for p in sorted(NO_LIMIT_PROBLEMS))
        raise InputError(f"the solvers of {article(problem)} need a memory budget in bytes, got None (None means no "
                         f"limit for {takes} only)", field="budget")


def solve(problem: str, instance: Any, solver: str, budget: int | None, **options: Any) -> SolveResult:
    """Run `solver` and referee its answer: the schedule is replayed by the simulator and the
    returned objective and peak are the replay's. A solver whose claim differs from the replay
    is a bug and raises `RuntimeError`. `budget` None: no memory limit, for the problems of
    `NO_LIMIT_PROBLEMS` only (`check_budget`: an `InputError` naming ``budget`` for the others)."""
    fn = get_solver(problem, solver)
    check_budget(problem, budget)
    start = time.perf_counter()
    result = fn(instance, budget, **options)
    elapsed = time.perf_counter() - start
    if not result.solve_time_s:
        result.solve_time_s = elapsed
    result.budget = budget
    if result.schedule is not None:
        replay = get_problem(problem).replay(instance, result.schedule, budget)
        if replay.violation is not None:
            raise RuntimeError(f"solver {solver} returned a schedule the simulator rejects: {replay.violation}")
        claimed = result.objective
        if claimed is not None and not math.isclose(claimed, replay.objective, rel_tol=1e-6, abs_tol=1e-9):
            raise RuntimeError(f"solver {solver} claims {claimed} but the simulator charges {replay.objective}")
        result.objective, result.peak_memory = replay.objective, replay.peak_memory
        if result.status == TIMEOUT:
            result.status = FEASIBLE
    elif result.status in (OPTIMAL, FEASIBLE):
        raise RuntimeError(f"solver {solver} reports {result.status} without a schedule")
    return result

