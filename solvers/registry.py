"""Problems and their solvers, and the one entry point that runs a solver under the referee.

Each problem is a subpackage ``memsched.solvers.<problem>`` exposing:

- ``load(path) -> instance`` (raises `InputError` naming file and field),
- ``replay(instance, schedule, budget) -> Replay`` (the simulator: objective, peak, violation),
- ``reference_peak(instance) -> int`` (what "X%" budgets are a percentage of),
- ``SOLVERS: dict[name, (\"module:function\", summary)]``.

A solver is ``fn(instance, budget, *, slots=500, time_limit=None, **options) -> SolveResult``
with ``budget`` in the instance's size unit (bytes). Solvers whose module cannot be imported
(an optional dependency missing, or not written yet) are simply not listed.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import InputError
from .result import FEASIBLE, OPTIMAL, TIMEOUT, SolveResult

PROBLEMS = ("chain", "graph", "join", "offload", "pipeline")


@dataclass(frozen=True)
class Replay:
    """The simulator's verdict on a schedule: objective (makespan or period), peak memory."""

    objective: float
    peak_memory: int
    violation: str | None = None


def problem_module(problem: str):
    if problem not in PROBLEMS:
        raise InputError(f"unknown problem {problem!r} (one of {', '.join(PROBLEMS)})")
    return importlib.import_module(f".{problem}", __package__)


def available_problems() -> list[str]:
    out = []
    for p in PROBLEMS:
        try:
            module = problem_module(p)
        except ImportError:
            continue
        if hasattr(module, "SOLVERS"):  # a package still being written is skipped
            out.append(p)
    return out


def solver_table(problem: str | None = None) -> list[tuple[str, str, str]]:
    """(problem, solver, summary) for every importable solver."""
    rows = []
    for p in [problem] if problem else available_problems():
        for name, (target, summary) in problem_module(p).SOLVERS.items():
            try:
                _resolve(target)
            except ImportError:
                continue
            rows.append((p, name, summary))
    return rows


def get_solver(problem: str, name: str) -> Callable[..., SolveResult]:
    table = problem_module(problem).SOLVERS
    if name not in table:
        names = ", ".join(n for _, n, _ in solver_table(problem))
        raise InputError(f"unknown solver {name!r} for {problem} (available: {names})", field="--solver")
    try:
        return _resolve(table[name][0])
    except ImportError as err:
        raise InputError(f"solver {name!r} is not available here ({err})", field="--solver") from None


def solve(problem: str, instance: Any, solver: str, budget: int, **options: Any) -> SolveResult:
    """Run `solver` and referee its answer: the schedule is replayed by the simulator and the
    returned objective and peak are the replay's. A solver whose claim differs from the replay
    is a bug and raises `RuntimeError`."""
    fn = get_solver(problem, solver)
    start = time.perf_counter()
    result = fn(instance, budget, **options)
    elapsed = time.perf_counter() - start
    if not result.solve_time_s:
        result.solve_time_s = elapsed
    result.budget = budget
    if result.schedule is not None:
        replay = problem_module(problem).replay(instance, result.schedule, budget)
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


def _resolve(target: str) -> Callable[..., Any]:
    """``".chain.dp:solve_rotor"`` (relative to this package) or ``"pkg.module:function"``."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module, __package__), attr)
