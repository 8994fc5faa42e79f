"""Typed options of every exact solver, with one naming across problems, and the wall-clock
deadline that every exact solve runs under.

Names: ``time_limit`` (seconds of wall-clock time for the *whole* solve: warm start, model
building, presolve and search), ``workers`` (backend threads), ``seed`` (the backend's random
seed), ``verbose`` (backend log), ``warm_start`` (run the problem's fast solvers first and hand
their best schedule to the model), ``slots`` (memory discretisation, 0 = exact sizes),
``memory_gb`` (memory a model may plan for, in GB; None: what the machine has available, 0: no
check; `memory.too_big`). Only the solvers that use ``memory_gb`` take it: graph ``checkmate`` (a
model that would not fit is not built; SCIP's ``limits/memory``) and chain ``milp`` with SCIP (its
``limits/memory``; the portfolio's SCIP side). A solver that has no use for an option of this layer
declares it (`refuses`: CP-SAT's ``max_memory_in_mb`` is not reliably honoured, so every CP-SAT
model refuses ``memory_gb``) and a value given is an `InputError`, never silently ignored.
Older spellings (``num_workers``, ``threads``, ``random_seed``) are accepted and mapped; one option
given in two spellings (``workers`` and ``num_workers``) is an `InputError` (`check_spelled_once`).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InputError, flag, option_field

DEFAULT_TIME_LIMIT = 60.0
#: older spellings of option names, accepted and mapped to the names of `ExactOptions`
ALIASES = {"num_workers": "workers", "threads": "workers", "random_seed": "seed"}


def check_spelled_once(keys: Iterable[str], field: Callable[[str], str] = option_field) -> None:
    """Each option among `keys` is spelt once: two keys that are one option (`ALIASES`: ``workers`` and
    ``num_workers`` or ``threads``, ``seed`` and ``random_seed``) are an `InputError` whose field is
    `field` of the option's name (``--option seed`` on the command line, ``seed`` in Python), worded as
    ``memsched solve --option`` words it, so that no value silently wins over the other."""
    seen: dict[str, str] = {}  # the option's name -> its key as first given
    for key in keys:
        name = ALIASES.get(key, key)
        if name in seen and seen[name] != key:
            raise InputError(f"given twice (as {seen[name]!r} and {key!r}): give each option once", field=field(name))
        seen.setdefault(name, key)


#: why a CP-SAT model refuses ``memory_gb`` (`refuses`): no limit of CP-SAT's holds, and the model is not sized first
CPSAT_MEMORY = ("CP-SAT has no memory limit that holds (its max_memory_in_mb is not reliably honoured) and "
                "this model is not sized before it is built")


def check_not_taken(solver: str, not_taken: Iterable[str], kw: Mapping[str, Any], why: str) -> None:
    """`InputError` naming the first keyword of `kw` that is an option of `not_taken` (names of
    `ExactOptions`; an older spelling, `ALIASES`, counts as its option) given a value other than
    None (None keeps the default, which the solver does not read either): `solver` (e.g. "the
    chain's cpsat") does not take it, for the reason `why`."""
    names = set(not_taken)
    for key, value in kw.items():
        if ALIASES.get(key, key) in names and value is not None:
            raise InputError(f"not taken by {solver}: {why}", field=option_field(key))


def refuses(solver: str, *not_taken: str, why: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator put over `exact_solver`'s (and `check_first`'s): the solver refuses the options
    `not_taken` of this layer (`check_not_taken`, before anything else runs) and lists them as
    ``options_not_taken``, which the option lists read (``--option`` does not list them, and an option
    given to several solvers goes only to those that take it). The solver keeps its signature and
    attributes (``exact_layer``...)."""
    unknown = set(not_taken) - set(ExactOptions.__dataclass_fields__)
    if unknown:
        raise ValueError(f"not options of the exact layer: {sorted(unknown)}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(instance: Any, budget: Any, **kw: Any) -> Any:
            check_not_taken(solver, not_taken, kw, why)
            return fn(instance, budget, **kw)

        run.options_not_taken = (*getattr(fn, "options_not_taken", ()), *not_taken)  # type: ignore[attr-defined]
        return run

    return decorate


class DeadlineExceeded(Exception):
    """Raised by `Deadline.check` when the wall-clock budget is spent (e.g. while building)."""


#: the longest time limit accepted (seconds): a week (longer ones overflow the clocks of the backends)
MAX_SECONDS = 7 * 86400.0
#: the most backend threads (``workers``): CP-SAT's ``num_workers`` takes 0..10000 and rejects the model
#: beyond (SCIP takes at most 64: `milp_runner` gives it 64 and says so in ``backend_status``)
MAX_WORKERS = 10000
#: the largest ``seed``: CP-SAT's ``random_seed`` is a 32-bit signed integer (seeds are 0..MAX_SEED)
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class ExactOptions:
    """Options shared by the exact solvers. ``time_limit`` in seconds (None: no limit)."""

    time_limit: float | None = DEFAULT_TIME_LIMIT
    workers: int = 1
    seed: int = 0
    verbose: bool = False
    warm_start: bool = True
    slots: int = 500
    memory_gb: float | None = None

    @classmethod
    def from_kwargs(cls, defaults: ExactOptions | None = None, **kw: Any) -> tuple[ExactOptions, dict[str, Any]]:
        """(options, the keyword arguments that are not exact-layer options). Aliases are mapped (one
        option given in two spellings, ``workers`` and ``num_workers``, is an `InputError`,
        `check_spelled_once`, whatever the values); a value of None keeps the default; bad values raise
        `InputError` naming the option."""
        check_spelled_once(kw)
        base = defaults or cls()
        mine: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for key, value in kw.items():
            name = ALIASES.get(key, key)
            if name in cls.__dataclass_fields__:
                if value is not None:
                    mine[name] = value
            else:
                rest[key] = value
        opts = replace(base, **mine)
        return opts.validated(), rest

    def validated(self) -> ExactOptions:
        """A copy with fields converted to their types; `InputError` naming the option when one is out of range
        (``--time-limit`` / ``--option workers`` on the command line, ``time_limit`` / ``workers`` in Python):
        ``workers`` in 1..`MAX_WORKERS`, ``seed`` in 0..`MAX_SEED`."""
        limit = None if self.time_limit is None else _number(self.time_limit, float, flag("time_limit"))
        if limit is not None and not 0 < limit <= MAX_SECONDS:  # (NaN fails both)
            raise InputError(f"must be a positive number of seconds, at most a week ({MAX_SECONDS:.0f}; None: no "
                             f"limit), got {self.time_limit!r}", field=flag("time_limit"))
        workers = _number(self.workers, int, option_field("workers"))
        if not 1 <= workers <= MAX_WORKERS:
            raise InputError(f"must be an integer in 1..{MAX_WORKERS}, got {self.workers!r}",
                             field=option_field("workers"))
        seed = _number(self.seed, int, option_field("seed"))
        if not 0 <= seed <= MAX_SEED:
            raise InputError(f"must be an integer in 0..{MAX_SEED}, got {self.seed!r}", field=option_field("seed"))
        slots = _number(self.slots, int, flag("slots"))
        if slots < 0:
            raise InputError(f"must be >= 0, got {self.slots!r}", field=flag("slots"))
        memory = None if self.memory_gb is None else _number(self.memory_gb, float, option_field("memory_gb"))
        if memory is not None and (not memory >= 0 or memory == math.inf):
            raise InputError(f"must be a number of GB >= 0 (0: no check), got {self.memory_gb!r}",
                             field=option_field("memory_gb"))
        return replace(self, time_limit=limit, workers=workers, seed=seed, slots=slots, verbose=bool(self.verbose),
                       warm_start=bool(self.warm_start), memory_gb=memory)


def _number(value: Any, kind: type, field: str) -> Any:
    """`kind(value)` (int or float), or `InputError` naming `field` when it is not a number."""
    if isinstance(value, bool):
        raise InputError(f"must be a number, got {value!r}", field=field)
    try:
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"must be a number, got {value!r}", field=field) from None


class Deadline:
    """A wall-clock budget started at construction: ``limit`` seconds (None: unlimited)."""

    def __init__(self, limit: float | None, start: float | None = None):
        self.limit = None if limit is None else float(limit)
        self.start = time.perf_counter() if start is None else start

    def elapsed(self) -> float:
        """Seconds since the deadline started."""
        return time.perf_counter() - self.start

    def left(self) -> float | None:
        """Seconds left (may be <= 0), None without a limit."""
        return None if self.limit is None else self.limit - self.elapsed()

    def expired(self) -> bool:
        """True when a limit is set and no time is left."""
        left = self.left()
        return left is not None and left <= 0

    def check(self) -> None:
        """Raise `DeadlineExceeded` when the budget is spent (call it inside long loops)."""
        if self.expired():
            raise DeadlineExceeded(f"time limit of {self.limit:g} s reached")

    def share(self, fraction: float) -> Deadline:
        """A sub-deadline for `fraction` of what is left (started now)."""
        left = self.left()
        return Deadline(None if left is None else max(0.0, left * fraction))
