"""The smallest feasible budget of a solver that reported ``infeasible`` without one.

`find_min_budget` completes a `SolveResult` whose ``min_budget`` is None by running the
solver itself at other budgets: first at the smallest budget a fast solver of the problem
reports (`_FLOOR_SOLVERS`), else at the store-all peak (doubled up to `MAX_FACTOR` times),
then one unit below the first budget that works, then by bisection. Each run gets the search's time
left as its ``time_limit`` (an exact solver at most `PROBE_SECONDS`: a schedule found in that time
answers the question, and none starts with less than `MIN_PROBE_SECONDS` left; a heuristic at most
the ``time_limit`` of `options`). No run starts once `SEARCH_SECONDS` have passed, nor when the time
left is shorter than the quickest run so far took (it would likely not end in time), but a run that
started is not cut short, and not every solver ends at its limit (pofo's first DP, an exact solver's
first seed): the search can take longer than `SEARCH_SECONDS`, and its notes then give the seconds it
took (`_Probe.time_note`). A heuristic's ``infeasible`` that left stages out for a limit the search set
(pofo's ``details["skipped"]``) is no verdict: the solver as asked might have found a schedule.

Bisection assumes that a solver which fails at B fails at every budget below B: true for the exact
solvers (a schedule of their model at B fits any larger budget; ``exact_layer``) and the heuristics
that declare it (`registry.monotone_in_budget`: the join share baselines), whose ``min_budget`` = N
means a schedule at N and N - 1 proven infeasible (budgets are in the instance's memory unit,
`memory_unit`: bytes unless its file says otherwise; the notes name that unit). The other
heuristics (`monotone` is False) can fail at B and succeed below it (rotor-offload at 20 slots on
``random_offload(4, 20, transfer_ratio=0.3, integer_times=True)``: a schedule at 33 bytes, none at
34): for them the budget bisection finds is only an upper bound, and ``min_budget`` = N is set only
when every budget from 0 to N - 1 was tried (at most `MAX_SCAN` runs, within the time), else the
note gives N as an upper bound.
When `SEARCH_SECONDS` run out first (or the solver fails even at `MAX_FACTOR` times the
store-all peak), ``details["min_budget_note"]`` says so, with what is known. A solver that refuses
the instance's structure (``details["not_applicable"]``: sqrt on a graph that is not a training
graph, say) is not searched: no budget would do, and its message says why. A Ctrl-C during the
search ends it as its time running out would, with what is known (the note says it was
interrupted), and `find_min_budget` returns True: the command prints its answer, then exits 130.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.result import INFEASIBLE, SolveResult
from memsched.solvers.units import memory_unit

#: wall-clock seconds spent searching for the smallest budget
SEARCH_SECONDS = 10.0
#: time limit of one exact solve in the search (a feasibility question: the first schedule will do)
PROBE_SECONDS = 1.0
#: the least time limit of an exact solve in the search (seconds): with less time left, none starts (it
#: would give no verdict)
MIN_PROBE_SECONDS = 0.5
#: per problem, fast solvers whose infeasible answers carry their own smallest budget
_FLOOR_SOLVERS = {"chain": ("rotor",), "offload": ("remat-only",),
                  "graph": ("checkpoint-all", "sqrt", "greedy", "griewank"), "join": ("store-all",),
                  "pipeline": ("madpipe",)}
#: the search goes up to this many times the store-all peak (heuristics may need more)
MAX_FACTOR = 64
#: the most budgets tried one by one below the one found, for a solver that is not `monotone`
MAX_SCAN = 200
#: ``SolveResult.details`` key a solver sets (True) when it refuses the instance's structure, whatever
#: the budget (`solvers.graph.baselines.NOT_APPLICABLE`)
NOT_APPLICABLE = "not_applicable"
#: how a note ends when a Ctrl-C stopped the search
INTERRUPTED = "the search was interrupted"


def monotone(problem: str, solver: str) -> bool:
    """Whether `solver`'s success is monotone in the budget (a schedule at B implies one at every
    budget above B): `registry.monotone_in_budget` (the exact solvers and the heuristics that declare it)."""
    return registry.monotone_in_budget(registry.get_solver(problem, solver))


@dataclass
class _Probe:
    """Runs the solver at other budgets (in the instance's memory unit) until `deadline`
    (``time.perf_counter()``, seconds): each run gets the time left as its ``time_limit`` (`limit`),
    and none starts when less is left than the quickest run so far took (`shortest`)."""

    problem: str
    instance: Any
    solver: str
    options: dict[str, Any]
    deadline: float
    exact: bool
    failed: set[int] = field(default_factory=set)  # budgets where the solver proved it has no schedule
    interrupted: bool = False  # a Ctrl-C stopped the search: no verdict after it
    started: float = field(default_factory=time.perf_counter)  # when the search began (perf_counter, s)
    shortest: float | None = None  # seconds of the quickest run so far (None before the first)
    runs: int = 0  # the runs started
    declined: str = ""  # why a run was not started (the time left could not hold it); "" while all started
    last_budget: int | None = None  # the budget of the last verdict asked for
    last_limit: float | None = None  # the time_limit (s) of the last run

    def limit(self) -> float | None:
        """The ``time_limit`` (seconds) of the next run, or None (and `declined` set) when none should
        start: no time left, less than the quickest run so far took (`shortest`), or for an exact
        solver less than `MIN_PROBE_SECONDS`. An exact run gets at most `PROBE_SECONDS`, a heuristic's at
        most the ``time_limit`` of `options` (None there: no limit of its own)."""
        left = self.deadline - time.perf_counter()
        cap = PROBE_SECONDS if self.exact else self.options.get("time_limit")
        limit = left if cap is None else min(left, float(cap))
        if left <= 0:
            self.declined = f"its {SEARCH_SECONDS:g} s had passed"
        elif self.shortest is not None and left < self.shortest:
            self.declined = f"the {left:.1f} s left were less than the quickest run's {self.shortest:.1f} s"
        elif self.exact and limit < MIN_PROBE_SECONDS:
            self.declined = f"the {left:.2f} s left were less than an exact run's least {MIN_PROBE_SECONDS:g} s"
        else:
            return limit
        return None

    def finds(self, budget: int) -> bool | None:
        """True: a schedule at `budget`; False: proven infeasible; None: no verdict in time (or interrupted)."""
        if budget in self.failed:
            return False
        self.last_budget = budget
        if self.interrupted:
            return None
        limit = self.limit()
        if limit is None:
            return None
        self.last_limit, self.runs, start = limit, self.runs + 1, time.perf_counter()
        try:
            opts = {**self.options, "time_limit": limit}
            res = registry.solve(self.problem, self.instance, self.solver, budget, **opts)
        except InputError:
            return None
        except KeyboardInterrupt:  # the solve is stopped (an exact backend first stops its search)
            self.interrupted = True
            return None
        finally:
            took = time.perf_counter() - start
            self.shortest = took if self.shortest is None else min(self.shortest, took)
        if res.found:
            return True
        if res.status == INFEASIBLE and not self._cut_short(res, limit):
            self.failed.add(budget)
            return False
        return None

    def _cut_short(self, res: SolveResult, limit: float) -> bool:
        """Whether `res` (``infeasible``) left stages out for the `limit` this search set, below the
        ``time_limit`` of `options` (pofo's ``details["skipped"]``): no proof about the solver as run."""
        cap = self.options.get("time_limit")
        return bool(res.details.get("skipped")) and (cap is None or limit < float(cap))

    def why_stopped(self, budget: int) -> str:
        """Why the verdict at `budget` is missing: a Ctrl-C, the search's time, or one run's."""
        if self.interrupted:
            return INTERRUPTED
        if self.declined or time.perf_counter() >= self.deadline:
            return self.time_note()
        limit = f"{self.last_limit:.3g}" if self.last_limit is not None else f"{PROBE_SECONDS:g}"
        return f"no verdict at {_size(budget, self.instance)} within a probe's {limit} s"

    def time_note(self) -> str:
        """How long the search took (wall clock, seconds) and why it stopped then: "search stopped after
        19.3 s (...)", past `SEARCH_SECONDS` when a run that started ran on."""
        spent = time.perf_counter() - self.started
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if spent > SEARCH_SECONDS:
            why = f"a run started within its {SEARCH_SECONDS:g} s ran past them (a run is not cut short)"
        else:
            why = self.declined or f"its {SEARCH_SECONDS:g} s had passed"
        return f"search stopped after {spent:.1f} s and {runs}: {why}"


def find_min_budget(problem: str, instance: Any, result: SolveResult, options: dict[str, Any]) -> bool:
    """Fill ``result.min_budget`` (or ``result.details["min_budget_note"]``) in place; nothing for a
    result that is not ``infeasible``, has its smallest budget, or is a structural refusal
    (`NOT_APPLICABLE`). True when a Ctrl-C (`KeyboardInterrupt`) stopped the search: the note then
    says so, with what was known by then."""
    if result.status != INFEASIBLE or result.min_budget is not None or result.budget is None \
            or result.details.get(NOT_APPLICABLE):
        return False
    solver, budget = result.solver, int(result.budget)
    exact = bool(getattr(registry.get_solver(problem, solver), "exact_layer", False))
    now = time.perf_counter()
    probe = _Probe(problem, instance, solver, options, now + SEARCH_SECONDS, exact, {budget}, started=now)
    try:
        _search(probe, result, budget)
    except KeyboardInterrupt:  # outside a probe (the fast solvers' first guess, the reference peak)
        probe.interrupted = True
    if probe.interrupted and result.min_budget is None and "min_budget_note" not in result.details:
        result.details["min_budget_note"] = f"{solver} finds no schedule at {_size(budget, instance)}; {INTERRUPTED}"
    return probe.interrupted


def _search(probe: _Probe, result: SolveResult, budget: int) -> None:
    """`find_min_budget`'s search, from `budget` (no schedule there) up."""
    problem, instance, solver = probe.problem, probe.instance, probe.solver
    sure = monotone(problem, solver)
    reference = int(registry.get_problem(problem).reference_peak(instance))
    low, high = _bracket(probe, budget, reference, _floor(problem, instance, budget, probe.options))
    if high is None:
        result.details["min_budget_note"] = (
            f"{solver} finds no schedule up to {_size(low, instance)}" if sure
            else f"{solver} finds no schedule at the budgets tried up to {_size(low, instance)}")
        result.details["min_budget_note"] += (f" ({MAX_FACTOR} x the store-all peak)" if low == reference * MAX_FACTOR
                                              else f"; {INTERRUPTED}" if probe.interrupted
                                              else f"; {probe.why_stopped(probe.last_budget)}"
                                              if probe.last_budget is not None else f"; {probe.time_note()}")
        return
    need = min(necessary(problem, instance), high)
    low, high, stopped = _bisect(probe, max(low, need - 1), high)  # nothing below `need` fits: no run tells more
    if sure:
        if stopped is not None:
            result.details["min_budget_note"] = (f"the smallest feasible budget of {solver} is between "
                                                 f"{low + 1} and {_size(high, instance)} ({stopped})")
            return
        result.min_budget = high
        result.details["min_budget_method"] = (f"checked: a schedule at {_size(high, instance)}, "
                                               + (_none_below(high) if high == need else f"none at {high - 1}"))
        return
    _settle(probe, result, budget, high, stopped, need)


def necessary(problem: str, instance: Any) -> int:
    """A budget below which no schedule of `instance` exists, whatever the solver (in its memory unit):
    a graph's `Graph.necessary_budget` (every schedule holds some node, its workspace and all its inputs
    at once; docs/graph.md, "Budget semantics"), 0 for the other problems."""
    return int(instance.necessary_budget()) if problem == "graph" else 0


def _none_below(need: int) -> str:
    """How ``min_budget_method`` says that nothing below `need` (`necessary`) fits."""
    return f"none below it (every schedule holds some node and its inputs at once: {need} at exact sizes)"


def _bracket(probe: _Probe, low: int, reference: int, guess: int | None) -> tuple[int, int | None]:
    """(last budget without a schedule, first budget with one or None) among the first guess and
    `reference` * 1, 2, 4 ... `MAX_FACTOR` above `low` (stopping at the first missing verdict)."""
    for candidate in (guess, *(reference * 2**k for k in range(MAX_FACTOR.bit_length()))):
        if candidate is not None and candidate > low:
            verdict = probe.finds(candidate)
            if verdict is True:
                return low, candidate
            if verdict is None:
                break
            low = candidate
    return low, None


def _bisect(probe: _Probe, low: int, high: int) -> tuple[int, int, str | None]:
    """Narrow a schedule at `high`, none at `low` (< `high`) down to adjacent budgets, trying
    `high` - 1 first (the fast solver's need is usually the answer); (low, high, None), or with
    why the search stopped before."""
    budget = high - 1
    while high - low > 1:
        verdict = probe.finds(budget)
        if verdict is None:
            return low, high, probe.why_stopped(budget)
        low, high = (low, budget) if verdict else (budget, high)
        budget = (low + high) // 2
    return low, high, None


def _settle(probe: _Probe, result: SolveResult, budget: int, high: int, stopped: str | None, need: int = 0) -> None:
    """For a solver that is not `monotone`, with a schedule at `high`: try every budget below it down
    to `need` (`necessary`: none below it fits), `budget` + 1 up first, then `need` up to `budget` (at
    most `MAX_SCAN` runs). ``min_budget`` is the first with a schedule when all below it were tried
    (`high` itself when it is `need`), else the note gives the least budget found as an upper bound
    only (never as the smallest), counting the budgets untried from `need`."""
    solver = result.solver
    why = f"{solver}'s success is not monotone in the budget"
    untried = high - need - sum(need <= b < high for b in probe.failed)
    if stopped is None and untried > MAX_SCAN:
        stopped = f"{untried} budgets below it untried, more than the {MAX_SCAN} the search tries one by one"
    for part in (range(max(budget + 1, need), high), range(need, budget)) if stopped is None else ():
        for b in part:
            verdict = probe.finds(b)
            if verdict is None:
                stopped = probe.why_stopped(b)
                break
            if verdict:
                high = b
                break
        if stopped is not None:
            break
    if stopped is not None:
        smaller = "a smaller budget" + (f" down to {_size(need, probe.instance)}" if need else "") + " may work"
        result.details["min_budget_note"] = (f"{solver} finds a schedule at {_size(high, probe.instance)}, an upper "
                                             f"bound only ({why}, so {smaller}; {stopped})")
        return
    result.min_budget = high
    found = f"checked: a schedule at {_size(high, probe.instance)}, "
    if high == need:
        result.details["min_budget_method"] = found + _none_below(need)
        return
    tried = f"{need}..{high - 1} (each tried: {why}; {_none_below(need)})" if need else \
        f"0..{high - 1} (each tried: {why})"
    result.details["min_budget_method"] = f"{found}none at {tried}"


def _size(n: int, instance: Any) -> str:
    """`n` with the instance's memory unit, as `memsched solve` names it on stderr ("16 MB",
    "2000 KiB"; "16 bytes" for a file without ``meta.units.memory``)."""
    return f"{n} {memory_unit(instance) or 'bytes'}"


def _floor(problem: str, instance: Any, budget: int, options: dict[str, Any]) -> int | None:
    """The smallest budget the fast solvers of `problem` report (a first guess), or None."""
    found = []
    for name in _FLOOR_SOLVERS.get(problem, ()):
        try:
            res = registry.solve(problem, instance, name, budget, **options)
        except InputError:
            continue
        if res.min_budget is not None:
            found.append(int(res.min_budget))
    return min(found, default=None)
