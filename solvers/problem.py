"""One descriptor per problem: everything the registry, the command line, sweeps and plots need.

Each problem package ``memsched.solvers.<name>`` defines ``PROBLEM = Problem(...)``. Its solver
table maps a solver name to ``("module:function", summary)`` with the module relative to
``memsched.solvers`` (``".chain.dp:solve_rotor"``); the function is imported only when the solver
is used (`Problem.solver`), so importing a problem package loads neither the exact models nor
their libraries.

Units: budgets and memory in the instance's size unit (bytes); objectives in its time unit.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError, flag
from .jsonio import read_json
from .result import SolveResult

OBJECTIVES = ("makespan", "period")


@dataclass(frozen=True)
class Replay:
    """The simulator's verdict on a schedule: ``objective`` (makespan or period, time unit of
    the instance), ``peak_memory`` (bytes) and the first ``violation`` (None when valid)."""

    objective: float
    peak_memory: int
    violation: str | None = None


MemoryProfile = list[dict[str, Any]]
"""Rows of a memory profile: each has ``mem_during`` (bytes held while the row lasts) and, for
the timed problems, ``start`` and ``end`` (time unit); the largest ``mem_during`` is the replay's
peak memory."""


@dataclass(frozen=True)
class Problem:
    """What one problem is: how to read its instances and schedules, replay a schedule, and solve.

    - ``load(path) -> instance`` raises `InputError` naming the file and field;
    - ``replay(instance, schedule, budget) -> Replay`` is the problem's simulator (the referee);
    - ``reference_peak(instance) -> int`` is what "X%" budgets are a percentage of (bytes);
    - ``memory_profile(instance, schedule) -> MemoryProfile``: max ``mem_during`` = replay's peak;
    - ``schedule_from_json(data, instance, *, path) -> schedule`` reads a schedule (or a
      ``memsched solve --json`` output holding one);
    - ``objective``: "makespan" or "period";
    - ``solvers``: name -> ("module:function", one-line summary), resolved on use.
    """

    name: str
    summary: str
    objective: str
    load: Callable[..., Any]
    replay: Callable[[Any, Any, int | None], Replay]
    reference_peak: Callable[[Any], int]
    memory_profile: Callable[[Any, Any], MemoryProfile]
    schedule_from_json: Callable[..., Any]
    solvers: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    default_solver: str = ""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.default_solver and self.default_solver not in self.solvers:
            raise ValueError(f"default solver {self.default_solver!r} is not in the solver table")

    def solver(self, name: str) -> Callable[..., SolveResult]:
        """The solver function ``fn(instance, budget, **options) -> SolveResult`` named `name`
        (`InputError` on field ``--solver`` when unknown or not importable here)."""
        if name not in self.solvers:
            names = ", ".join(self.available_solvers())
            raise InputError(f"unknown solver {name!r} for {self.name} (available: {names})", field=flag("solver"))
        try:
            return resolve(self.solvers[name][0])
        except ImportError as err:
            if _by_interrupt(err):  # Ctrl-C during the import: an interrupt, not a missing solver
                raise KeyboardInterrupt from err
            raise InputError(f"solver {name!r} is not available here ({err})", field=flag("solver")) from None

    def available_solvers(self) -> list[str]:
        """Names of the solvers whose module imports here (an optional dependency may be missing)."""
        out = []
        for name, (target, _) in self.solvers.items():
            try:
                resolve(target)
            except ImportError:
                continue
            out.append(name)
        return out

    def load_schedule(self, path: str | Path, instance: Any) -> Any:
        """The schedule in the JSON file at `path`, for `instance` (`InputError` when malformed)."""
        return self.schedule_from_json(read_json(path), instance, path=str(path))


def _by_interrupt(err: BaseException) -> bool:
    """Whether `err` comes of a KeyboardInterrupt (in its chain of causes and contexts): a Ctrl-C
    while a native module initialises (OR-Tools, pybind11) surfaces as ``ImportError("initialization
    failed")`` caused by the interrupt."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def resolve(target: str) -> Callable[..., Any]:
    """The function named by ``"module:function"``; a module starting with "." is relative to
    ``memsched.solvers`` (`ImportError` when the module or the function is missing)."""
    module, _, attr = target.partition(":")
    fn = getattr(importlib.import_module(module, __package__), attr, None)
    if fn is None:
        raise ImportError(f"{module} has no {attr}")
    return fn
