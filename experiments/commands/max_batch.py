"""`memsched max-batch MODEL --memory 16GB [--problem chain|graph] [--max-overhead 1.2|forward] [--solver S]`:
the largest batch (or image side, ``--vary image-size``) with which a zoo network trains within a
memory at a bounded overhead: Checkmate's maximum-batch-size experiment (Jain et al. MLSys 2020,
Fig. 6).

Each probe builds the network at one size on fake tensors and turns it into an instance
shape-exactly (times from ``--cost``: counted FLOP or a roofline):

- ``--problem chain`` (default): the chain of blocks (`models.chain.profiler`), solved by a chain
  solver (rotor, store-all, ...) at the activation budget
  ``B = memory - state_factor x parameter bytes`` (weights and gradients: state_factor 2). Its sizes
  are the fake-tensor profile's (tensor outputs only: kernel scratch buffers, CPU convolution
  workspaces, are not in them), so the answer ends with a note (JSON ``note``, `chain_note`) that
  executing it may need more than B, and the ``memsched run`` command that checks it;
- ``--problem graph``: the op-level training graph (`models.graph.export`, Checkmate's
  dependencies, cost_ram = outputs), solved by a graph solver (checkmate, cpsat, dtr, greedy,
  checkpoint-all, ...) at ``B = memory - state_factor x parameter bytes - input bytes`` (the
  graph does not count the input batch, which stays resident). Its sizes are Checkmate's model:
  neither what autograd saves beyond the outputs nor a node's temporaries are in them, so the answer
  ends with a note (JSON ``note``) that executing its graph (``memsched run``) may need more than B.

A size fits when the solver's status is optimal or feasible (its schedule, replayed by the
simulator, is within B) and its makespan is at most the bound: ``max_overhead`` x the store-all
makespan (chain: sum of u_f, u_b and the loss; graph: each node once), or with
``--max-overhead forward`` Checkmate's bound, the store-all makespan plus one more forward pass
(sum of the forward costs). Sizes are searched by doubling from 1 until one does not fit, then
by bisection: this assumes that a size that fits implies that every smaller one fits
(activations grow with the batch; an exact solver stopped by its time limit can break this).
The sizes the network refuses are skipped (`search_accepted`), with a ``refused`` row (JSON
``refused``): an image side too small for it, a batch it cannot train at (BatchNorm at batch 1 on a
1x1 feature map), a side that is no multiple of what the network's levels divide by. The answer is
the largest accepted size that fits: when every doubled size is refused (sides that must be 3 steps
apart), the sizes near them and then every size from the first up are tried; inside the doubling
and the bisection the accepted size nearest to a refused one within the bracket is tried instead,
and where none is near (accepted sizes more than 2 x `MAX_NEAR` apart) the sizes skipped are scanned
afterwards, never counted as not fitting. A search asks at most `max_probes` sizes (916 for the 256
sides of the default --step and --limit), its scans at most `MAX_SCAN`: when they leave sizes where
a larger answer may lie, the answer is a lower bound and says which (JSON ``untried``; for exit 1, the
sizes below the smallest accepted one found). No batch accepted among 1, 2 and 4
(`MAX_REFUSED_BATCH`: a network failing at all three is broken) or no side up to --limit is bad input
naming ``MODEL`` (batches) or ``--vary image-size`` (sides, with --step), the sizes tried, whether
they were all the multiples of --step up to --limit or which were left, and why. Your own function
(``FILE.py:FUNCTION``) that takes no argument for the size varied (``batch``, ``image_size``;
``**kwargs`` takes both) is bad input naming the function and the argument before any size is
built (`_check_vary`), as is ``--vary image-size`` on a zoo network without images.
A --slots whose rotor table is too large (`check_rotor_table`) is refused at the first probe
that needs a table (store-all does not fit), before any row when that is the first size: the budget
does not grow with the size, the stage count does not change and the input grows. Bad input that
only a larger size shows stops the search: the largest size that fit so far is printed as a lower
bound (JSON ``stopped``), then the error (exit 2).
A probe whose solve ended in ``timeout`` (no schedule before --time-limit: not proven
infeasible) does not fit either: when a size above the answer timed out, the answer is only a lower
bound, and its line says so (``largest batch: 6 (at least; batch 7 timed out; ...)``, JSON
``timed_out``: the sizes above the answer that timed out).
``--journal FILE`` records each finished probe (append-only JSON lines, keyed by everything that
determines the probe, `probe_key`) and a rerun reuses the probes of the same key (`ProbeJournal`); a
new FILE is created with its first probe (a search that records none leaves none), a FILE in a missing
folder is bad input, and a line that is no probe max-batch wrote is reported and ignored.
An interrupt (Ctrl-C, SIGTERM, SIGHUP) keeps what the probes so far found: one line on stderr with the
largest size that fit and the smallest above it that did not (with --json, first the usual object,
``status`` ``interrupted``), exit 130.
Exit 0 with the largest size, 1 when even the smallest does not fit (``infeasible: ...``; when its
schedule fits the memory but not the overhead bound, the line says so with both overheads) or its
solve timed out without a schedule (``timeout: ...``: not proven infeasible, a larger --time-limit
may find one), 2 on bad input (a solver that refuses the instance's structure,
``details["not_applicable"]``, too: no size would fit, and its message says why; bad input found
mid-search too, after the rows and the largest size so far).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsched.solvers.errors import InputError, first_line
from memsched.solvers.result import TIMEOUT

from ._checks import MAX_BATCH, check_not_empty, check_output_file, count, seconds
from ._common import set_help
from ._infeasible import NOT_APPLICABLE
from .profile import (
    MODEL_HELP,
    _import_models,
    add_cost_option,
    add_model_options,
    check_model,
    counted_sizes,
    refuse_timing,
)

if TYPE_CHECKING:
    from ..sweep.store import Journal

#: default largest batch and image side (px) searched
DEFAULT_BATCH_LIMIT, DEFAULT_SIDE_LIMIT = 65536, 8192
#: the largest --step accepted (beyond, the networks' sizes overflow torch's); the largest --limit is
#: `_checks.MAX_BATCH`, the largest --batch of profile, run and export-graph: an answer is a batch they take
MAX_SIDE = 2**16
#: the largest --state-factor (resident bytes per parameter byte): far above any optimizer's state
#: (mixed-precision Adam keeps about 8 per 2-byte weight); beyond, K x parameter bytes can overflow
MAX_STATE_FACTOR = 100.0
#: the largest --tolerance (a fraction of the size): at 1 the bisection stops as soon as doubling fails
MAX_TOLERANCE = 1.0
VARY = ("batch", "image-size")
PROBLEMS = ("chain", "graph")
#: default solver per problem
DEFAULT_SOLVER = {"chain": "rotor", "graph": "checkmate"}
#: --max-overhead word for Checkmate's bound (store-all plus one forward pass)
FORWARD = "forward"
#: what a --problem graph answer leaves out (the output's last line and the JSON's "note")
GRAPH_NOTE = ("the graph's sizes are Checkmate's model (cost_ram = node outputs, no temporaries: what autograd "
              "saves, parameter gradients before they are accumulated, kernel buffers are not in them), so "
              "executing that {vary}'s graph may need more than the activation budget ({budget} bytes); "
              "`memsched run {model} --problem graph --{vary} {size} --budget {budget}` (and the same sizing "
              "options) executes it with measured sizes and temporaries")


#: what a --problem chain answer on a fake-tensor profile leaves out (the note's first part)
CHAIN_SCRATCH_NOTE = ("the chain's sizes are a fake-tensor profile's ({method}: tensor outputs only), so the kernel "
                      "scratch buffers a real run allocates (CPU convolution workspaces, a reduction's temporaries) "
                      "are not in them, and executing that {vary}'s schedule may need more than the activation "
                      "budget ({budget} bytes); ")
#: the note's last part: the command that checks a chain answer (profiled with measured sizes, executed)
CHAIN_RUN = ("`memsched run {model} --{vary} {size} --budget {budget}` (and the same sizing options) profiles it with "
             "measured sizes, kernel scratch buffers included on the CPU, and executes it")


class SolverBugError(Exception):
    """A solver's schedule was rejected by the simulator (or it claimed another objective): a bug,
    reported as such (exit 3) rather than counted as a size that does not fit."""


class NotApplicableError(InputError):
    """The solver refuses the structure of the network's instance (``details["not_applicable"]``:
    griewank on a graph whose forward nodes are no chain, say): no size and no budget would give a
    schedule, so it is bad input naming ``--solver`` (exit 2), never a size that does not fit."""


#: the largest batch a network may refuse before one is accepted (BatchNorm refuses batch 1 on a 1x1
#: feature map; batch 2 then runs): a network failing at 1, 2 and 4 is broken, not too small, and is
#: not built again at doubling batches up to --limit (real inputs of 65536 samples with --cost measured)
MAX_REFUSED_BATCH = 2
#: the most sizes tried on each side of a size the network refuses inside the search, for the nearest one
#: it accepts (`_nearest_accepted`): sides that must be multiples of up to 2 x 16 (unet at 5 levels with
#: --step 1) are reached so, sparser ones by the scans (`MAX_SCAN`); each refused size costs one build that
#: fails (no solve)
MAX_NEAR = 16
#: the most sizes the scans of `search_accepted` ask in one search (each refused one costs a build that fails): the
#: sizes its bisection skipped as refused, or below the smallest accepted size found when that one does not fit
MAX_SCAN = 256


class SearchStopped(Exception):
    """A probe above the first raised bad input that no smaller size showed (a solver option the
    instance of that size cannot take, say): the search stops there, at `size` (a batch, or an image
    side in px), keeping the largest size that fit so far (a lower bound)."""

    def __init__(self, size: int, error: InputError):
        super().__init__(str(error))
        self.size, self.error = size, error

    def reported(self, vary: str, best: int) -> InputError:
        """The bad input for the error line (exit 2): its message, where the search stopped, and the
        largest size that fit before it (0: none)."""
        so_far = (f"{vary} {best} fits (a lower bound, above)" if best else f"no {vary} tried fits")
        return InputError(f"{self.error.message} (at {vary} {self.size}, where the search stopped; {so_far})",
                          path=self.error.path, field=self.error.field)


@dataclass
class Probe:
    """One size tried: the instance's numbers (bytes, the cost model's time unit) and the verdict.
    `bound` is the largest makespan / store-all makespan allowed at this size (the number given,
    or 1 + forward / store-all time with ``--max-overhead forward``); `nodes`: chain stages L+1 or
    graph nodes; `solve_time_s`: the solver's seconds (wall clock, this machine)."""

    size: int
    fits: bool
    status: str
    budget: int
    parameter_bytes: int
    store_all_peak: int
    store_all_time: float
    makespan: float | None
    overhead: float | None
    peak_memory: int | None
    bound: float | None = None
    nodes: int | None = None
    solve_time_s: float | None = None


def parse_overhead(text: str | float) -> float | str:
    """``--max-overhead``: a finite number >= 1, or ``forward`` (Checkmate's one extra forward pass)."""
    if isinstance(text, str) and text.strip().lower() == FORWARD:
        return FORWARD
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(f"a number >= 1 or {FORWARD!r}, got {text!r}", field="--max-overhead") from None
    if not 1.0 <= value < float("inf"):  # (NaN fails too)
        raise InputError(f"must be a finite number >= 1, got {text}", field="--max-overhead")
    return value


def search_largest(fits: Callable[[int], bool], limit: int, tolerance: float = 0.0, start: int = 1) -> int:
    """The largest k in start..limit with fits(k), assuming fits is monotone (true up to some k, then
    false); 0 when fits(start) is false. Doubling, then bisection: about 2 log2(k) calls. With a
    relative `tolerance`, bisection stops once the bracket is within tolerance x k (the answer
    then fits and is at most that far below the largest)."""
    if not fits(start):
        return 0
    lo, hi = start, None  # fits(lo) is true, fits(hi) false
    while hi is None:
        nxt = min(2 * lo, limit)
        if nxt == lo:
            return lo
        if fits(nxt):
            lo = nxt
        else:
            hi = nxt
    while hi - lo > max(1.0, tolerance * lo):
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def max_probes(limit: int) -> int:
    """The most sizes `search_accepted` asks in a search of 1..`limit` (each once, refused ones included):
    `MAX_SCAN` scanned sizes, and for each of at most 2 x (bit length of `limit` + 1) doubled or bisected
    sizes, itself and up to 2 x `MAX_NEAR` sizes around it (`_nearest_accepted`). limit 256: 916; 65536: 1444."""
    return MAX_SCAN + (2 * MAX_NEAR + 1) * 2 * (limit.bit_length() + 1)


def search_accepted(verdict: Callable[[int], bool | None], limit: int, tolerance: float = 0.0,
                    untried: list[tuple[int, int]] | None = None) -> tuple[int, int]:
    """`search_largest` over the sizes the network accepts: `verdict(k)` is True (fits), False (does
    not fit) or None (the network refuses size k: an image side too small for it, or not a multiple
    of what its layers divide by), assuming fitting is monotone over the accepted sizes. Returns (the
    largest accepted k in 1..`limit` that fits, within `tolerance` as `search_largest`, or 0; the
    smallest accepted k asked, or 0 when none is). Each k is asked once, at most `max_probes(limit)`
    sizes in all.

    1. Doubling from 1 to the first accepted size. When 1, 2, 4, ..., `limit` are all refused (sizes
       that must be multiples of 3), the sizes nearest to each of them (`_nearest_accepted`, at most
       `MAX_NEAR` on each side), then every size from 1 up (the scan, below).
    2. When that size does not fit, bisection down to the smallest accepted size (a refused size is
       replaced by the nearest accepted one; where none is near, the refused sizes are taken as the
       smallest ones: a side too small), then the scan of the sizes below it not yet asked, from 1 up:
       the first accepted one is the smallest (it fits, or none does).
    3. Above the largest size that fits, doubling then bisection, a refused size replaced by the
       nearest accepted one in the bracket (unet at --step 1: side 82 refused, 80 tried). Where none
       is near (accepted sizes more than 2 x `MAX_NEAR` apart, or none above some size), the bracket
       is narrowed as if it did not fit, and afterwards the sizes skipped so are scanned from below:
       the first accepted one fitting restarts the bisection above it, one not fitting ends it.

    The scans ask at most `MAX_SCAN` sizes in all; when that, or `max_probes`, stops the search
    first, the sizes it left, (first, last), are appended to `untried` (the answer is then only the
    largest accepted size found that fits: a larger one, or a smaller accepted one, may lie there)."""
    search = _AcceptedSearch(verdict, limit, tolerance)
    try:
        search.run()
    except _Exhausted:
        search.left_open()
    if untried is not None and search.untried is not None:
        untried.append(search.untried)
    return search.lo, search.k0


class _Exhausted(Exception):
    """`search_accepted` asked `max_probes` sizes: it stops there (`_AcceptedSearch.left_open`)."""


class _AcceptedSearch:
    """The state of one `search_accepted`: `lo` the largest accepted size known to fit (0: none), `hi`
    the smallest known not to (`limit` + 1: none), `k0` the smallest accepted size asked (0: none);
    every size asked strictly between `lo` and `hi` is refused. `untried`: the sizes left unasked where
    a larger answer (or, when nothing fits, a smaller accepted size) may lie, None when none is."""

    def __init__(self, verdict: Callable[[int], bool | None], limit: int, tolerance: float) -> None:
        self.verdict, self.limit, self.tolerance = verdict, limit, tolerance
        self.seen: dict[int, bool | None] = {}
        self.cap, self.scan_left = max_probes(limit), MAX_SCAN
        self.lo, self.hi, self.k0 = 0, limit + 1, 0
        self.untried: tuple[int, int] | None = None

    def ask(self, k: int) -> bool | None:
        """`verdict(k)`, asked once (then remembered), moving `lo`, `hi`, `k0`; `_Exhausted` past `max_probes`."""
        if k not in self.seen:
            if len(self.seen) >= self.cap:
                raise _Exhausted
            fits = self.seen[k] = self.verdict(k)
            if fits is not None:
                self.k0 = min(self.k0 or k, k)
                if self.lo < k < self.hi:  # (outside the bracket only for a non-monotone verdict: ignored)
                    self.lo, self.hi = (k, self.hi) if fits else (self.lo, k)
        return self.seen[k]

    def near(self, target: int, low: int, high: int) -> int | None:
        """`target` when accepted, else the accepted size nearest to it in (low, high) (`_nearest_accepted`)."""
        return target if self.ask(target) is not None else _nearest_accepted(self.ask, target, low, high)

    def scan(self, first: int, last: int) -> None:
        """Ask the sizes first..last not yet asked, from below, up to the first accepted one (which moves
        `lo` or `hi`); past `MAX_SCAN` scanned sizes in the search, the rest is `untried`."""
        for k in range(first, last + 1):
            if k in self.seen:
                continue
            if self.scan_left <= 0:
                self.untried = (k, last)
                return
            self.scan_left -= 1
            if self.ask(k) is not None:
                return

    def left_open(self) -> None:
        """After `max_probes` sizes: what a larger answer (or a smaller accepted size) may still be."""
        first, last = (self.lo + 1, self.hi - 1) if self.lo else (1, (self.k0 or self.limit + 1) - 1)
        if any(k not in self.seen for k in range(first, last + 1)):
            self.untried = (first, last)

    def run(self) -> None:
        """Steps 1 to 3 of `search_accepted`."""
        limit, targets = self.limit, []
        k = 1
        while self.ask(k) is None:  # 1. doubling to an accepted size
            targets.append(k)
            if k >= limit:
                break
            k = min(2 * k, limit)
        if not self.k0:
            ends = [0, *targets, limit + 1]
            for i, target in enumerate(targets):  # near each doubled size, then all of them
                if _nearest_accepted(self.ask, target, ends[i], ends[i + 2]) is not None:
                    break
            else:
                self.scan(1, limit)
        if not self.k0:
            return
        if not self.lo:  # 2. the smallest accepted size asked does not fit: a smaller one may
            below = max((t for t in targets if t < self.hi), default=0)  # sizes up to it taken as refused
            while self.hi - below > 1 and not self.lo:
                mid = (below + self.hi) // 2
                if self.near(mid, below, self.hi) is None:
                    below = mid
            if not self.lo:
                self.scan(1, self.hi - 1)
            if not self.lo:
                return
        self.up()

    def up(self) -> None:
        """3. From `lo` (fits) up: `top` <= `hi` bounds the bisection, the sizes in [top, hi) being assumed
        refused until scanned."""
        top = self.hi
        while top == self.limit + 1 and self.lo < self.limit:  # doubling
            nxt = min(2 * self.lo, self.limit)
            if self.near(nxt, self.lo, top) is None:
                top = nxt
            top = min(top, self.hi)
        while True:
            while top - self.lo > max(1.0, self.tolerance * self.lo):  # bisection
                mid = (self.lo + top) // 2
                if self.near(mid, self.lo, top) is None:
                    top = mid
                top = min(top, self.hi)
            if top >= self.hi:
                return
            fitting = self.lo
            self.scan(top, self.hi - 1)
            if self.lo == fitting:  # none accepted there, the first one did not fit, or the scans are spent
                return
            top = self.hi


def _nearest_accepted(ask: Callable[[int], bool | None], target: int, low: int, high: int) -> int | None:
    """The size nearest to `target` (refused) strictly between `low` and `high` that `ask` does not
    refuse (the smaller one first at equal distance), trying at most `MAX_NEAR` sizes on each side;
    None when none of them is accepted."""
    for d in range(1, MAX_NEAR + 1):
        below, above = target - d, target + d
        if below <= low and above >= high:
            return None
        for j in (below, above):
            if low < j < high and ask(j) is not None:
                return j
    return None


def probe_size(
    model: str,
    sizes: dict[str, Any],
    *,
    memory: int,
    max_overhead: float | str,
    solver: str,
    cost: str,
    state_factor: float,
    slots: int,
    time_limit: float | None,
    size: int,
    problem: str = "chain",
    overheads: dict[str, Any] | None = None,
) -> Probe:
    """Build `model` at `sizes` shape-exactly as a chain or a training graph (`problem`) and solve it
    at the activation budget (see the module docstring). `overheads`, when given, receives the
    chain profile's ``meta["overheads"]`` (who measured its sizes: `chain_note` reads it)."""
    from memsched.solvers import registry

    if problem == "graph":
        from memsched.models.graph.export import export_training_graph
        from memsched.solvers.graph import reference_peak as graph_peak

        trial = {k: v for k, v in sizes.items() if k != "granularity"}
        graph = export_training_graph(model, cost=cost, granularity="op", deps="checkmate", ram="output", **trial)
        params = int(graph.meta.get("parameter_bytes", 0))
        resident = state_factor * params + int(graph.meta.get("input_size", 0))
        instance: Any = graph
        peak, total, nodes = int(graph_peak(graph)), graph.total_cpu(), graph.n
        forward = float(sum(c for c, b in zip(graph.cost_cpu, graph.backward) if not b))
    else:
        from memsched.models.chain.profiler import profile_model
        from memsched.solvers.chain import reference_peak

        chain, _ = profile_model(model, cost=cost, **sizes)
        params = int(chain.meta.get("parameter_bytes", 0))
        resident = state_factor * params
        if overheads is not None:
            overheads.update(chain.meta.get("overheads") or {})
        instance = chain
        peak, total, nodes = int(reference_peak(chain)), float(chain.total_time()), len(chain.u_f)
        forward = float(sum(chain.u_f))
    budget = int(memory - resident)
    if problem != "graph" and solver == "rotor" and 0 < budget < peak:  # rotor tabulates only when store-all
        check_rotor_table(instance, budget, slots)                        # does not fit
    bound = (1.0 + forward / total if total > 0 else 1.0) if max_overhead == FORWARD else float(max_overhead)
    base = dict(
        size=size,
        budget=budget,
        parameter_bytes=params,
        store_all_peak=peak,
        store_all_time=total,
        bound=bound,
        nodes=nodes,
    )
    if budget <= 0:
        return Probe(fits=False, status="infeasible", makespan=None, overhead=None, peak_memory=None, **base)
    try:
        result = registry.solve(problem, instance, solver, budget, slots=slots, time_limit=time_limit)
    except RuntimeError as err:  # the referee rejected a schedule: a solver bug, never "does not fit"
        raise SolverBugError(f"{solver} at {problem} size {size}: {err}") from err
    if result.details.get(NOT_APPLICABLE):
        raise NotApplicableError(f"{solver} does not apply to the {problem} of {model}: {result.message} (memsched "
                                 "solvers lists the others)", field="--solver")
    spent = float(result.solve_time_s) if result.solve_time_s else None
    if result.objective is None or result.status not in ("optimal", "feasible"):
        return Probe(
            fits=False, status=result.status, makespan=None, overhead=None, peak_memory=None, solve_time_s=spent, **base
        )
    overhead = float(result.objective) / total if total > 0 else 1.0
    return Probe(
        fits=overhead <= bound + 1e-9,
        status=result.status,
        makespan=float(result.objective),
        overhead=overhead,
        peak_memory=None if result.peak_memory is None else int(result.peak_memory),  # a whole number in the journal
        solve_time_s=spent,
        **base,
    )


def check_rotor_table(chain: Any, budget: int, slots: int) -> None:
    """Refuse, before the solve, the rotor table this probe's `chain` could need at `budget` bytes and
    `slots` (0: exact sizes) when it exceeds `dp.MAX_CELLS`: the same `InputError` naming ``--slots``
    that `dp.rotor_table` raises (it checks its size before allocating anything). The table has
    memory values 0..M - x_0 (M: the slot count, or the budget in bytes at exact sizes; x_0: the
    input's size in those units) and L stages; the solve needs it only when store-all does not fit
    (checked by the caller then). Across a search the budget (memory less the weights: they do not
    grow with the batch) and L do not change while x_0 grows with the size, so the first probe that
    needs a table has the largest: when that is the first probe, a hopeless --slots is refused before
    any row is printed; later, the search stops there with the largest size so far (`SearchStopped`)."""
    from memsched.solvers.chain.dp import MAX_CELLS, rotor_table, table_cells
    from memsched.solvers.discretize import effective_slots

    n = effective_slots(budget, slots)
    if table_cells(chain.length, n or budget) <= MAX_CELLS:  # the bound without x_0: nothing to discretise
        return
    work = chain.discretised(budget / n) if n else chain
    m_top = (n or budget) - int(work.x[0])
    if m_top >= 0 and table_cells(work.length, m_top) > MAX_CELLS:
        rotor_table(work, m_top)  # raises its InputError (--slots) before allocating the table


#: the description of ``memsched max-batch --help``: what a user needs to run it (the rules in full: docs/cli.md;
#: the implementation: this module's docstring). Lines of at most 79 characters, kept as they are.
DESCRIPTION = """\
The largest batch (or image side, --vary image-size) with which MODEL trains
within --memory at a bounded overhead: Checkmate's maximum-batch-size
experiment. Each size is built on fake tensors and solved as a chain of blocks
(--problem chain) or an op-level graph (--problem graph) at the budget
M - K x parameter bytes (K: --state-factor; a graph also leaves the input out).
It fits when its schedule is within the budget and at most --max-overhead x
the store-all makespan. Sizes are searched by doubling, then bisection.
Exit: 0 the largest size; 1 even the smallest does not fit, or its solve timed
out; 2 bad input; 130 interrupted (after the largest size that fit so far).
Details: docs/cli.md, "memsched max-batch".
"""


def register(subparsers: Any) -> None:
    """Add the ``max-batch`` subcommand (largest batch or image side that trains within --memory)."""
    p = subparsers.add_parser(
        "max-batch",
        help="largest batch (or image side) that trains within a memory",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--memory", required=True, metavar="M", help='device memory ("16GB", "32GiB", bytes)')
    p.add_argument(
        "--problem",
        choices=PROBLEMS,
        default="chain",
        help="what is solved at each size: the chain of blocks, or the op-level training graph",
    )
    p.add_argument(
        "--max-overhead",
        default="1.2",
        metavar="X",
        help="largest allowed makespan / store-all makespan (default 1.2), or 'forward': store-all "
        "plus one forward pass (Checkmate's bound)",
    )
    p.add_argument(
        "--solver",
        default=None,
        help="solver of --problem (default rotor for chains, checkmate for graphs; store-all or "
        "checkpoint-all for no recomputation)",
    )
    p.add_argument("--vary", choices=VARY, default="batch", help="what grows: the batch, or the image side")
    p.add_argument("--step", type=count(1, MAX_SIDE), default=32, metavar="PX",
                   help="image sides searched: multiples of PX (32)")
    p.add_argument(
        "--limit",
        type=count(1, MAX_BATCH),
        default=None,
        metavar="N",
        help="largest size tried (default: batch 65536, image side 8192 px; with --vary image-size at least --step)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.01,
        metavar="R",
        help="stop the bisection within R x the size, R in 0..1 (default 0.01; 0 for the exact largest)",
    )
    p.add_argument(
        "--state-factor",
        type=float,
        default=2.0,
        metavar="K",
        help="resident bytes per parameter byte, 0..100: weights and gradients 2 (default), 4 with Adam",
    )
    p.add_argument("--slots", type=count(0, 10**9), default=500, metavar="N",
                   help="memory slots for the solver (0: exact)")
    p.add_argument("--time-limit", type=seconds, default=None, metavar="S", help="seconds per solve (exact solvers)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--journal", default=None, metavar="FILE",
                   help="record each finished probe in FILE (JSON lines, append-only) and reuse the probes of the "
                        "same settings found there: a rerun resumes an interrupted search")
    add_model_options(p)
    add_cost_option(p, "flops")
    # max-batch takes only the counted cost models, which trace fake CPU tensors (`counted_sizes`)
    set_help(p, "--device", "cpu only (the counted cost models trace fake CPU tensors): leave it out or give cpu")
    set_help(p, "--cost", "counted cost model: flops (counted MFLOP, the default) or roofline:v100|a100|h100 (ms of "
                          "a roofline model), on fake tensors (exact sizes, nothing allocated); measured is refused")
    for flag in ("--repeats", "--timing"):  # nothing is timed: refused when given (`_refuse_timing`)
        set_help(p, flag, "refused: the counted cost models time nothing")
    p.set_defaults(func=main, repeats=None, timing=None)


def main(args: argparse.Namespace) -> int:
    """Search the largest batch (or image side) whose schedule fits in --memory bytes with the weights; exit 0
    (a lower bound when a larger size timed out), 1 if none fits (infeasible, or the smallest size's solve timed out
    without a schedule), 2 bad input."""
    _import_models()
    from memsched.models.costs import parse_cost
    from memsched.solvers.units import format_bytes, parse_size

    check_model(args.model)
    refuse_timing(args, "max-batch")  # its cost models all count (--cost measured is refused below)
    if parse_cost(args.cost).measured:
        raise InputError(
            "max-batch profiles shape-exactly: use a counted cost model (flops, roofline:<device>)", field="--cost"
        )
    memory = parse_size(args.memory, field="--memory")
    if memory <= 0:
        raise InputError(f"must be positive, got {args.memory!r}", field="--memory")
    args.max_overhead = parse_overhead(args.max_overhead)
    check_not_empty(args.solver, "--solver", "a solver name (memsched solvers lists them)", name=True)  # no default
    check_output_file(args.journal, "--journal")  # not empty (read as "."), no folder, in an existing writable one
    args.solver = args.solver or DEFAULT_SOLVER[args.problem]
    _check_ranges(args)
    _check_solver(args.problem, args.solver)
    sizes = counted_sizes(args, "max-batch")
    vary_batch = args.vary == "batch"
    if vary_batch and args.batch is not None:
        raise InputError("--batch is what max-batch searches; leave it out (or use --vary image-size)", field="--batch")
    if not vary_batch and args.image_size is not None:
        raise InputError("--image-size is what is searched with --vary image-size; leave it out", field="--image-size")
    _check_vary(args.model, args.vary)
    limit = _search_limit(args.limit, args.step, vary_batch)
    probes: list[Probe] = []
    methods: dict[int, dict[str, Any]] = {}  # size -> the chain profile's meta["overheads"]
    header = (f"{args.model}: largest {args.vary} within {format_bytes(memory)}, overhead <= "
              f"{_bound_text(args.max_overhead)}, {args.problem} solver {args.solver}, cost {args.cost}")

    refusals: list[tuple[int, str]] = []  # (size: batch or side in px, why) of the sizes the network refuses
    held: list[str] = []  # the rows of refused sizes before the header (printed with it, or never)
    settings = probe_settings(args, memory)  # what determines a probe besides its sizes (the journal's key)
    # an existing journal is read before any probe; a new one is created with its first row (bad sizing options
    # found at the first size leave no empty file)
    journal = ProbeJournal(args.journal) if args.journal is not None else None
    counts = {"resumed": 0, "run": 0}  # probes (refused sizes included) taken from the journal, run now

    def show(row: str, probe: bool) -> None:
        """Print a row; the header comes with the first probe's (bad sizes fail before any output)."""
        if args.json:
            return
        if not probe and not probes:
            held.append(row)
            return
        if len(probes) == 1 and probe:
            for line in (header, *held):
                print(line)
        print(row, flush=True)

    def refuse(size: int, why: str) -> None:
        refusals.append((size, why))
        if vary_batch and not probes and size > MAX_REFUSED_BATCH:  # a network failing at every batch
            raise _none_accepted_error(args.model, args.vary, args.step, size, refusals) from None
        show(f"  {size:>6}  refused  {why}", probe=False)

    def taken(size: int, probe: Probe, overheads: dict[str, Any]) -> bool:
        methods[size] = overheads
        probes.append(probe)
        show(_row(probe, format_bytes), probe=True)
        return probe.fits

    def fits(k: int) -> bool | None:
        size = k if vary_batch else k * args.step
        trial = {**sizes, ("batch" if vary_batch else "image_size"): size}
        key = probe_key(settings, trial)
        row = journal.done.get(key) if journal is not None else None
        if row is not None:  # a finished probe of these very settings: reused, neither built nor solved again
            counts["resumed"] += 1
            if row["refused"] is not None:
                refuse(size, str(row["refused"]))
                return None
            return taken(size, Probe(**row["probe"]), dict(row.get("overheads") or {}))
        overheads: dict[str, Any] = {}
        try:
            probe = probe_size(
                args.model,
                trial,
                memory=memory,
                max_overhead=args.max_overhead,
                solver=args.solver,
                cost=args.cost,
                state_factor=args.state_factor,
                slots=args.slots,
                time_limit=args.time_limit,
                size=size,
                problem=args.problem,
                overheads=overheads,
            )
        except (InputError, ValueError, RuntimeError) as err:
            if isinstance(err, NotApplicableError) or not _refuses_size(err, vary_batch):
                if isinstance(err, InputError) and probes:  # bad input only this size shows: rows were printed
                    raise SearchStopped(size, err) from err
                raise
            counts["run"] += 1
            if journal is not None:
                journal.record(key, settings, trial, size, refused=_reason(err))
            refuse(size, _reason(err))
            return None  # a size the network refuses (a side too small, BatchNorm at batch 1): skipped
        counts["run"] += 1
        if journal is not None:
            journal.record(key, settings, trial, size, probe=probe, overheads=overheads)
        return taken(size, probe, overheads)

    unit = 1 if vary_batch else args.step  # size = k x unit
    stopped: SearchStopped | None = None
    interrupted = False
    left: list[tuple[int, int]] = []  # (first, last) k that the search left untried where the answer may lie
    try:
        try:
            best, smallest = search_accepted(fits, limit, args.tolerance, left)
        except SearchStopped as stop:  # the largest size that fit so far (sizes that fit are assumed monotone)
            stopped = stop
            best = max((p.size for p in probes if p.fits), default=0) // unit
            smallest = min(p.size for p in probes) // unit
        except KeyboardInterrupt:  # what the probes so far bracket (exit 130)
            interrupted = True
            best = max((p.size for p in probes if p.fits), default=0) // unit
            smallest = min((p.size for p in probes), default=0) // unit
    finally:
        if journal is not None:
            journal.close()
    untried = (left[0][0] * unit, left[0][1] * unit) if left else None  # sizes (batches or px)
    if not smallest and not interrupted:
        raise _none_accepted_error(args.model, args.vary, args.step, limit * unit, refusals, untried)
    best_size = best * unit
    above = min((p.size for p in probes if not p.fits and p.size > best_size), default=None)
    chosen = next((p for p in probes if p.size == best_size), None)
    note = _note(args.model, args.problem, args.vary, chosen, methods.get(best_size))
    timed_out = _timed_out(probes, best_size)
    journaled = (f"journal {args.journal}: {counts['resumed']} sizes resumed from the journal, {counts['run']} run "
                 "now") if journal is not None else None
    if interrupted:
        return _interrupted(args, memory, sizes, probes, refusals, best_size, above, timed_out,
                            counts if journal is not None else None, note)
    if args.json:
        json.dump(
            _answer(args, memory, sizes, "stopped" if stopped else "complete", probes, refusals, best_size, above,
                    chosen,
                    timed_out, counts if journal is not None else None,
                    stopped={"size": stopped.size, "error": str(stopped.error)} if stopped else None, note=note,
                    untried=untried),
            sys.stdout,
        )
        print()
    elif journaled:
        print(journaled)
    if not best and stopped is None:
        first = smallest * unit
        noun = "batch" if vary_batch else "side"
        where = f"{args.vary} {first}{'' if smallest == 1 else f' (the smallest {noun} it runs at)'}"
        if untried is not None:  # the scan below it stopped: a smaller accepted size may fit
            where = (f"{args.vary} {first} (the smallest {noun} found that it runs at; "
                     f"{_untried_text(args.vary, untried)})")
        slow = next((p for p in probes if p.size == first and p.overhead is not None), None)
        if first in timed_out:  # no schedule before the limit: not proven infeasible
            limit_text = f"--time-limit {args.time_limit:g} s" if args.time_limit is not None else "its search stopped"
            print(f"memsched max-batch: timeout: {args.solver} found no schedule for {args.model} within "
                  f"{format_bytes(memory)} at {where} before {limit_text} (not proven infeasible: a larger "
                  "--time-limit may find one)", file=sys.stderr)
        elif slow is not None:  # a schedule within the budget, slower than the bound: the overhead failed
            print(f"memsched max-batch: infeasible: {args.solver}'s schedule of {args.model} at {where} fits within "
                  f"{format_bytes(memory)} (peak {format_bytes(slow.peak_memory or 0)} of activations, budget "
                  f"{format_bytes(max(slow.budget, 0))}) but its overhead x{slow.overhead:.3f} is above the bound "
                  f"x{slow.bound or 0:.3f} (--max-overhead {_overhead_arg(args.max_overhead)}): no {noun} trains "
                  "within that overhead", file=sys.stderr)
        else:
            print(f"memsched max-batch: infeasible: {args.model} does not train within {format_bytes(memory)} even "
                  f"at {where}", file=sys.stderr)
        return 1
    if best and not args.json and chosen is not None:
        state = format_bytes(args.state_factor * chosen.parameter_bytes)
        bound = f"at least; {_sizes_text(args.vary, timed_out)} timed out; " if timed_out else ""
        if untried is not None:
            bound += f"{'' if bound else 'at least; '}{_untried_text(args.vary, untried)}; "
        if stopped is not None:
            bound = f"at least; the search stopped at {args.vary} {stopped.size}: bad input there; "
        print(
            f"largest {args.vary}: {best_size} ({bound}overhead x{chosen.overhead:.3f}, peak "
            f"{format_bytes(chosen.peak_memory or 0)} of activations + {state} of weights and gradients)"
        )
        if note:
            print(f"note: {note}")
    if stopped is not None:  # after the answer so far: bad input, exit 2
        raise stopped.reported(args.vary, best_size)
    return 0


def _answer(args: argparse.Namespace, memory: int, sizes: dict[str, Any], status: str, probes: list[Probe],
            refusals: list[tuple[int, str]], best_size: int, above: int | None, chosen: Probe | None,
            timed_out: list[int], journal: dict[str, int] | None, *, stopped: dict[str, Any] | None = None,
            note: str | None = None, untried: tuple[int, int] | None = None) -> dict[str, Any]:
    """The ``--json`` object, which records every setting a rerun needs besides the search's own (--tolerance,
    --limit, --step are keys or probe sizes): the solver's `slots` and `time_limit` (s, None: none) and `sizes`,
    the network's keyword arguments but the varied one (`fixed_sizes`); `status` ``complete``, ``stopped`` (bad
    input mid-search) or ``interrupted``
    (Ctrl-C: `largest` and `smallest_not_fitting` bracket the answer as far as the probes went);
    `journal`: the ``resumed`` and ``run`` probe counts with ``--journal`` (None without); `untried`: the
    sizes (first, last) that the search left untried where a larger answer (or, when none fits, a smaller
    accepted size) may lie (`search_accepted`), None when it left none."""
    return {
        "model": args.model,
        "vary": args.vary,
        "memory": memory,
        "max_overhead": args.max_overhead,
        "problem": args.problem,
        "tolerance": args.tolerance,
        "solver": args.solver,
        "cost": args.cost,
        "state_factor": args.state_factor,
        "slots": args.slots,
        "time_limit": args.time_limit,
        "sizes": fixed_sizes(sizes, args.vary),
        "status": status,
        "largest": best_size or None,
        "smallest_not_fitting": above,
        "result": asdict(chosen) if chosen else None,
        "probes": [asdict(p) for p in probes],
        "timed_out": timed_out,
        "refused": [{"size": size, "reason": why} for size, why in refusals],
        "stopped": stopped,
        "journal": None if journal is None else {"path": args.journal, **journal},
        "note": note,
        "untried": None if untried is None else {"from": untried[0], "to": untried[1]},
    }


def _interrupted(args: argparse.Namespace, memory: int, sizes: dict[str, Any], probes: list[Probe],
                 refusals: list[tuple[int, str]],
                 best_size: int, above: int | None, timed_out: list[int], counts: dict[str, int] | None,
                 note: str | None = None) -> int:
    """Exit 130 after a Ctrl-C (or SIGTERM, SIGHUP) in the search: what the probes so far bracket, the
    largest size that fit (`best_size`, 0: none) and the smallest above it that did not (`above`), as one
    line on stderr (with ``--json``, first the usual object, ``status`` ``interrupted``, whose `note` is the
    one a finished answer at `best_size` has: `_note`, None only when no size fits); the journal's probe
    `counts` (None: no ``--journal``) and how to resume. A second interrupt while this is written is ignored."""
    from ..cli import interrupts_deferred

    fit = f"{args.vary} {best_size} fits" if best_size else f"no {args.vary} tried fits"
    no = f", {args.vary} {above} does not" if above is not None else ""
    where = (f" (the largest is at least {best_size}, below {above})" if best_size and above is not None else "")
    resume = (f"; {counts['resumed'] + counts['run']} sizes kept in {args.journal}; rerun to resume" if counts
              else "; --journal FILE keeps the probes for a rerun")
    with contextlib.suppress(KeyboardInterrupt), interrupts_deferred():
        if args.json:
            chosen = next((p for p in probes if p.size == best_size), None)
            json.dump(_answer(args, memory, sizes, "interrupted", probes, refusals, best_size, above, chosen,
                              timed_out, counts, note=note), sys.stdout)
            print(flush=True)
        print(f"memsched max-batch: interrupted after {len(probes)} probes: {fit}{no}{where}{resume}",
              file=sys.stderr, flush=True)
    return 130


#: what a journal line records besides the probe: the command, so that another tool's JSON lines are no probes
JOURNAL_COMMAND = "max-batch"
#: how the journal is named in messages
JOURNAL_WHAT = "max-batch's journal of probes"


def fixed_sizes(sizes: dict[str, Any], vary: str) -> dict[str, Any]:
    """The network's keyword arguments (`counted_sizes`) without the size varied (``batch`` or ``image_size``,
    from `vary`, the ``--vary`` value), as JSON values (a device or dtype by its name): what a rerun passes."""
    varied = "batch" if vary == "batch" else "image_size"
    return {key: value if value is None or isinstance(value, (bool, int, float, str, list, tuple)) else str(value)
            for key, value in sizes.items() if key != varied}


def probe_settings(args: argparse.Namespace, memory: int) -> dict[str, Any]:
    """Everything that determines a probe but its sizes (`probe_key` adds those: the varied size, the
    other sizing options, device, dtype, seed): the network (and the SHA-1 of its file for
    ``FILE.py:FUNCTION``, so that an edited file is probed again), the problem, solver, memory (bytes),
    overhead bound, cost model, state factor, slots and time limit. Not --tolerance, --limit, --step:
    they choose which sizes are probed, not what a probe finds."""
    from memsched.models.network import factory_file, is_factory_spec

    head = str(args.model).rpartition(":")[0]
    digest = None
    if is_factory_spec(args.model) and head.endswith(".py"):
        digest = hashlib.sha1(factory_file(head).read_bytes()).hexdigest()
    return {"command": JOURNAL_COMMAND, "model": args.model, "model_hash": digest, "problem": args.problem,
            "solver": args.solver, "memory": memory, "max_overhead": args.max_overhead, "cost": args.cost,
            "state_factor": args.state_factor, "slots": args.slots, "time_limit": args.time_limit}


def probe_key(settings: dict[str, Any], sizes: dict[str, Any]) -> str:
    """A stable id of one probe (as the sweep's row keys, `sweep.grid.row_key`): the SHA-1 of the
    canonical JSON of its `settings` (`probe_settings`) and `sizes` (the network's keyword arguments,
    the varied size included), 16 hex digits. It changes exactly when something the probe depends on does."""
    ident = {**settings, "sizes": sizes}
    return hashlib.sha1(json.dumps(ident, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()[:16]


class ProbeJournal:
    """``--journal FILE``: the finished probes of max-batch searches, one JSON line each (``key``:
    `probe_key`; ``size``; ``refused``: why the network refused that size, or ``probe``: the `Probe`'s
    numbers, with ``overheads``: the chain profile's ``meta["overheads"]``; ``settings`` and ``sizes``:
    what the key hashes), kept by the sweep's append-only `sweep.store.Journal`: each line is one
    write, fsync'ed, with interrupts held back while it is written, so a Ctrl-C never leaves half a line;
    opening it repairs the end left by a killed run; an unreadable line elsewhere (not JSON, or not a row
    `_valid_probe_row` accepts) is reported and ignored (that probe runs again). `done`: the rows by key, a
    later row of a key winning. One journal may hold the probes of many searches: a rerun reuses only the
    rows of its own settings and sizes. A journal that cannot be read or written (a folder, no permission,
    a full disk) is an `InputError` naming it and ``--journal`` (exit 2); its folder must exist (`main`
    checks it before any work, `check_output_file`, as the other commands' ``-o``: none is made).

    An existing journal is opened (its end repaired) and read before any probe, so that one that cannot
    be written fails before the work; a new one is created only with its first row (`record`), so that a
    search that records nothing (bad sizing options found at the first size) leaves no empty file."""

    def __init__(self, path: str) -> None:
        from ..sweep.store import read_journal

        self.path = Path(path)
        self._journal: Journal | None = None
        self.done: dict[str, dict[str, Any]] = {}
        try:
            exists = self.path.exists()
        except OSError:  # a path the system cannot look at: opening it names the error
            exists = True
        if not exists:
            return
        journal = self._open()
        try:
            self.done = read_journal(self.path, _valid_probe_row)
        except OSError as err:  # unreadable after it could be opened for appending (no read permission)
            journal.close()
            raise journal.error_for(err) from None

    def _open(self) -> Journal:
        """The append-only file, opened (created if missing, its end repaired) on first use."""
        if self._journal is None:
            from ..sweep.store import Journal

            self._journal = Journal(self.path, what=JOURNAL_WHAT, field="--journal", valid=_valid_probe_row)
        return self._journal

    def record(self, key: str, settings: dict[str, Any], sizes: dict[str, Any], size: int, *,
               probe: Probe | None = None, refused: str | None = None,
               overheads: dict[str, Any] | None = None) -> None:
        """Append one finished probe (`probe`, or the size `refused` and why) as one line, fsync'ed."""
        from ..cli import interrupts_deferred

        row = {"key": key, "command": JOURNAL_COMMAND, "size": size, "settings": settings, "sizes": sizes,
               "refused": refused, "probe": asdict(probe) if probe is not None else None,
               "overheads": overheads or {}}
        with interrupts_deferred():
            self._open().append(row)
        self.done[key] = row

    def close(self) -> None:
        """Close the file (if it was opened: a new journal no row was recorded in was never created)."""
        if self._journal is not None:
            with contextlib.suppress(InputError):
                self._journal.close()


#: the largest whole number of a journal row's probe (bytes, stage or node counts): torch's int64 sizes.
#: Above, the row is damage (`format_bytes` would overflow a float printing it)
MAX_JOURNAL_INT = 2**63 - 1


def _whole(value: Any, low: int = 0, high: int = MAX_JOURNAL_INT) -> bool:
    """`value` is an int (not a bool: JSON ``true`` is no number) in `low`..`high`."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _finite(value: Any) -> bool:
    """`value` is a finite number >= 0, not a bool: a time (the cost model's unit, seconds) or a ratio.
    NaN and Infinity (JSON's extensions) and an int too large for a float are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int of over 308 digits
        return False


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """`check`, or None (a field a probe without a schedule, or an older row, leaves empty)."""
    return lambda value: value is None or check(value)


#: what each field of a journal row's ``probe`` must hold (`Probe`'s types, in the ranges `probe_size` gives
#: them): sizes 1..`MAX_BATCH` (a batch, or an image side up to --limit), bytes and counts whole numbers
#: (the budget, memory less the weights, may be negative), times and ratios finite numbers >= 0
PROBE_FIELDS: dict[str, Callable[[Any], bool]] = {
    "size": lambda v: _whole(v, 1, MAX_BATCH),
    "fits": lambda v: isinstance(v, bool),
    "status": lambda v: isinstance(v, str) and bool(v),
    "budget": lambda v: _whole(v, -MAX_JOURNAL_INT),
    "parameter_bytes": _whole,
    "store_all_peak": _whole,
    "store_all_time": _finite,
    "makespan": _optional(_finite),
    "overhead": _optional(_finite),
    "peak_memory": _optional(_whole),
    "bound": _optional(_finite),
    "nodes": _optional(_whole),
    "solve_time_s": _optional(_finite),
}
#: the `Probe` fields without a default: a row's probe must have them (the others may be left out)
REQUIRED_PROBE_FIELDS = frozenset(f.name for f in fields(Probe) if f.default is MISSING)


def _valid_probe_row(row: Any) -> bool:
    """Whether a journal row is a complete max-batch probe as `ProbeJournal.record` writes it (else damage
    or a hand edit, reported and ignored by `read_journal`, so that the probe runs again): another command's
    rows are not; its ``settings`` and ``sizes`` hash to its ``key`` (`probe_key`) and its ``size`` is the
    size varied among them (`_filed_under_key`); then a refused size with its reason, or a ``probe`` whose
    numbers are a `Probe`'s (`_valid_probe`) of that size, with ``overheads`` a dict."""
    if not (isinstance(row, dict) and isinstance(row.get("key"), str) and row.get("command") == JOURNAL_COMMAND):
        return False
    if not _filed_under_key(row):
        return False
    if isinstance(row.get("refused"), str):
        return True
    return _valid_probe(row.get("probe"), row["size"]) and isinstance(row.get("overheads", {}), dict)


def _filed_under_key(row: dict[str, Any]) -> bool:
    """`row`'s ``size`` (a batch or image side) is whole, the ``batch`` or ``image_size`` of its ``sizes``, and
    its ``settings`` and ``sizes`` are what its ``key`` hashes: the row answers the probe it is looked up for."""
    settings, sizes, size = row.get("settings"), row.get("sizes"), row.get("size")
    if not (isinstance(settings, dict) and isinstance(sizes, dict) and _whole(size, 1, MAX_BATCH)):
        return False
    if size not in (sizes.get("batch"), sizes.get("image_size")):
        return False
    try:
        return probe_key(settings, sizes) == row["key"]
    except (ValueError, RecursionError):  # nesting too deep to write back
        return False


def _valid_probe(probe: Any, size: int) -> bool:
    """`probe` (a journal row's) has exactly `Probe`'s fields, each as `PROBE_FIELDS` says, its ``size`` is
    the row's `size`, and one that fits has a schedule (a makespan and an overhead: the answer prints them)."""
    if not isinstance(probe, dict) or not REQUIRED_PROBE_FIELDS <= probe.keys() <= PROBE_FIELDS.keys():
        return False
    if not all(PROBE_FIELDS[name](value) for name, value in probe.items()) or probe["size"] != size:
        return False
    return not probe["fits"] or (probe["makespan"] is not None and probe["overhead"] is not None)


def _overhead_arg(max_overhead: float | str) -> str:
    """--max-overhead as given: a number (``1.2``) or ``forward``."""
    return FORWARD if max_overhead == FORWARD else f"{float(max_overhead):g}"


def _timed_out(probes: list[Probe], best_size: int) -> list[int]:
    """The sizes above the answer `best_size` (0: none fits) whose solve ended in ``timeout`` (no
    schedule before the time limit, not proven infeasible), ascending: when there are any, the
    answer is only a lower bound (a larger --time-limit may fit a larger size)."""
    return sorted({p.size for p in probes if p.status == TIMEOUT and p.size > best_size})


def _untried_text(vary: str, untried: tuple[int, int]) -> str:
    """``batches 337 to 2000 were not all tried (...)``: the sizes (batches or px) that the search left
    (`search_accepted`: its scans are bounded)."""
    noun = "batches" if vary == "batch" else "image sizes"
    return (f"{noun} {untried[0]} to {untried[1]} were not all tried (the network refused the sizes around them; "
            f"the search scans at most {MAX_SCAN})")


def _sizes_text(vary: str, sizes: list[int]) -> str:
    """``batch 7`` or ``batches 7, 8`` (``image size 256`` or ``image sizes 256, 288``): `sizes`, non-empty."""
    noun = "batch" if vary == "batch" else "image size"
    plural = ("batches" if vary == "batch" else "image sizes") if len(sizes) > 1 else noun
    return f"{plural} {', '.join(str(k) for k in sizes)}"


def _note(model: str, problem: str, vary: str, chosen: Probe | None,
          overheads: dict[str, Any] | None = None) -> str | None:
    """What the answer `chosen` (None: no size fits, and no note) leaves out, and the `memsched run`
    command that checks it: for ``--problem graph``, that its graph counts node outputs only
    (Checkmate's model, `GRAPH_NOTE`: tapes and temporaries are not in it); for a chain, what its
    profile's sizes miss (`chain_note`, from the profile's ``meta["overheads"]``). Either way the
    schedule executed may need more than the probe's budget (bytes)."""
    if chosen is None:
        return None
    if problem != "graph":
        return chain_note(model, vary, chosen.size, chosen.budget, overheads or {})
    return GRAPH_NOTE.format(model=model, vary=vary, size=chosen.size, budget=chosen.budget)


def chain_note(model: str, vary: str, size: int, budget: int, overheads: dict[str, Any]) -> str:
    """The note of a chain answer at `size` and activation `budget` (bytes): when the profile's
    ``meta["overheads"]`` says its sizes are a fake-tensor profile's (the method names fake tensors,
    `models.chain.profiler`: tensor outputs only), that kernel scratch buffers are not in them
    (`CHAIN_SCRATCH_NOTE`); else what its method is. Both end with the `memsched run` command that
    profiles the network with measured sizes and executes that size's schedule at the budget."""
    method = str(overheads.get("method") or "")
    check = CHAIN_RUN.format(model=model, vary=vary, size=size, budget=budget)
    if "fake tensors" in method:
        return CHAIN_SCRATCH_NOTE.format(vary=vary, budget=budget, method=method) + check
    what = f" (overheads: {method})" if method else ""
    return (f"the chain's sizes are its counted profile's{what}, so executing that {vary}'s schedule may need more "
            f"than the activation budget ({budget} bytes); " + check)


def _refuses_size(err: Exception, vary_batch: bool) -> bool:
    """Whether `err` (raised by a probe) is the network refusing the size tried: the zoo's check of
    the size (bad input naming ``--batch`` or ``--image-size``), the network failing at that size
    (``MODEL``, `models.network.diagnosed`; ``model``, a factory's network failing its dry run:
    BatchNorm at batch 1) or any failure that is not bad input. Bad input naming another option
    (``--depth`` for a network with fixed layers, ``--slots``) is no size's fault."""
    from memsched.models.network import model_field

    sized = ("--batch", "batch") if vary_batch else ("--image-size", "image_size")
    return not isinstance(err, InputError) or err.field in (*sized, model_field(), "model")


def _reason(err: Exception) -> str:
    """Why a side is refused, in one line: a bad input's message without its field (``--image-size``,
    which max-batch never took with --vary image-size), else the error's first line."""
    return err.message if isinstance(err, InputError) else first_line(err)


def _none_accepted_error(model: str, vary: str, step: int, limit: int, refusals: list[tuple[int, str]],
                         untried: tuple[int, int] | None = None) -> InputError:
    """The bad input when `model` refuses every size tried (`refusals`: (size, why), in the order tried):
    batches 1, 2, 4 (above `MAX_REFUSED_BATCH`) or up to --limit (naming ``MODEL``), or image sides, multiples of
    --step up to `limit` px (naming ``--vary image-size``): every one of them, or with `untried` (the sizes from
    first to last that `search_accepted` left: its scans are bounded) the ones tried, and that those were not all
    tried. The sizes are listed ascending (the first and last ones of a long list); the reason is the last
    refusal's."""
    from memsched.models.network import model_field

    sizes = sorted({size for size, _ in refusals})
    tried = ", ".join(str(size) for size in sizes)
    if len(sizes) > 12:
        tried = (f"{len(sizes)} {'batches' if vary == 'batch' else 'sides'}: "
                 f"{', '.join(str(k) for k in sizes[:6])}, ..., {', '.join(str(k) for k in sizes[-3:])}")
    why = f": {refusals[-1][1]}" if refusals else ""
    left = "" if untried is None else f"; {_untried_text(vary, untried)}"
    if vary == "batch":
        return InputError(f"{model} runs at none of the batches tried ({tried}){why}{left}", field=model_field())
    if untried is None:
        return InputError(f"{model} runs at none of the image sides tried ({tried} px: every multiple of --step {step} "
                          f"up to {limit} px){why}; raise --limit or change --step", field="--vary image-size")
    return InputError(f"{model} runs at none of the image sides tried ({tried} px: multiples of --step {step} up to "
                      f"{limit} px){why}{left}: change --step or --limit", field="--vary image-size")


def _check_solver(problem: str, solver: str) -> None:
    """`solver` is a solver of `problem` (`registry.get_solver`). An offloading solver that is no
    solver of `problem` (pofo, vdnn, ...) is an `InputError` naming ``--solver`` that says max-batch
    solves chains and graphs (it has no host link to offload over), not the registry's hint to give
    a bandwidth, a flag max-batch does not take."""
    from memsched.solvers import registry

    if solver not in registry.get_problem(problem).solvers and solver in registry.get_problem("offload").solvers:
        raise InputError(f"{solver!r} is an offloading solver: max-batch supports chain and graph solvers only "
                         "(memsched solvers lists them)", field="--solver")
    registry.get_solver(problem, solver)


def _check_ranges(args: argparse.Namespace) -> None:
    """The float options in range, finite (inf and NaN are bad input, never an overflow in a probe):
    --state-factor in 0..`MAX_STATE_FACTOR`, --tolerance in 0..`MAX_TOLERANCE`. (--step and --limit
    are checked by their argparse types, --max-overhead by `parse_overhead`, --time-limit by `seconds`.)"""
    for name, value, low, high in (
        ("--state-factor", args.state_factor, 0.0, MAX_STATE_FACTOR),
        ("--tolerance", args.tolerance, 0.0, MAX_TOLERANCE),
    ):
        if not (math.isfinite(value) and low <= value <= high):  # (NaN fails too)
            raise InputError(f"must be a finite number in {low:g}..{high:g}, got {value}", field=name)


def _search_limit(limit: int | None, step: int, vary_batch: bool) -> int:
    """The largest k searched (`search_largest`): the batch itself, or with ``--vary image-size`` the
    number of --step multiples, floor(limit / step), so that every side tried (k x step px) is at most
    --limit. A --limit below --step leaves no side to try: an `InputError` naming --limit."""
    if vary_batch:
        return limit or DEFAULT_BATCH_LIMIT
    if limit is None:
        return max(1, DEFAULT_SIDE_LIMIT // step)
    if limit < step:
        raise InputError(f"{limit} px is below --step {step}: image sides are multiples of the step, so no side "
                         f"fits; use a --limit of at least {step} or a smaller --step", field="--limit")
    return limit // step


def _check_vary(model: str, vary: str) -> None:
    """What ``--vary`` grows is an argument of the network: ``--vary image-size`` needs a zoo network with
    images (`models.zoo.MODELS`: its defaults have an image size), and your own function
    (``FILE.py:FUNCTION``) must take the argument varied, ``batch`` or ``image_size`` (or ``**kwargs``:
    `models.network.refused_sizes` reads its signature, importing its file). `InputError` naming
    ``--vary image-size`` (or MODEL, for the batch) otherwise, before anything is printed or built:
    no size tried would run."""
    from memsched.models.network import is_factory_spec, model_field, refused_sizes
    from memsched.models.zoo.registry import MODELS

    if vary == "image-size" and model in MODELS and "image_size" not in MODELS[model]:
        kind = MODELS[model]["kind"]
        raise InputError(f"{model} takes no image size (a {kind} model): vary its batch (--vary batch)",
                         field="--vary image-size")
    argument = "batch" if vary == "batch" else "image_size"
    if model not in MODELS and is_factory_spec(model) and argument in refused_sizes(model):
        if vary == "batch":
            raise InputError(f"{model} takes no argument 'batch', the size max-batch varies: add a batch "
                             "parameter to the function (or --vary image-size if it takes image_size)",
                             field=model_field())
        raise InputError(f"{model} takes no argument 'image_size', the size --vary image-size varies: add an "
                         "image_size parameter to the function (or vary its batch: --vary batch)",
                         field="--vary image-size")


def _row(p: Probe, fmt: Callable[[float], str]) -> str:
    over = f"x{p.overhead:.3f}" if p.overhead is not None else "-"
    bound = f" (<= x{p.bound:.3f})" if p.bound is not None else ""
    return (
        f"  {p.size:>6}  {'fits' if p.fits else 'no':<4}  {p.status:<10} overhead {over:<7}{bound} "
        f"budget {fmt(max(p.budget, 0))}  store-all peak {fmt(p.store_all_peak)}"
    )


def _bound_text(max_overhead: float | str) -> str:
    """The overhead bound in words, for the header line."""
    return "store-all + one forward" if max_overhead == FORWARD else f"x{float(max_overhead):g}"
