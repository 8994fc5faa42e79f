"""Time-limit defects of offloading's exact solvers (no timed assertions: the work is counted instead).

* `offload-exact` (`exact_free.FreeOrderModel`): its canonical idle-slot rows scanned all of ``w`` once per
  idle slot (quadratic: minutes for a 52-stage chain) with no deadline check, so a 15 s run could end after
  two minutes. The build's work is counted in executed lines of `exact_free` (``sys.settrace``).
* `exact-combined` (`exact_combined.phase_sequences`): the enumeration was a recursive closure, a reference
  cycle that kept the millions of sequences alive after the solve until the interpreter's teardown
  (seconds after the answer). Counted in live objects, with the collector off.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from memsched.solvers.chain import reference_peak
from memsched.solvers.chain.exact_model import discretise
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.schedule import Op
from memsched.solvers.exact.options import Deadline, DeadlineExceeded
from memsched.solvers.offload import OffloadInstance, exact_free
from memsched.solvers.offload.exact_combined import phase_sequences, solve_exact_combined


class _LineClock:
    """Executed lines of `exact_free` (its frames only) while active: the build's work, free of timing."""

    def __init__(self) -> None:
        self.lines = 0

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines += 1
        return self._local

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        return self._local if frame.f_code.co_filename == exact_free.__file__ else None

    @contextmanager
    def running(self) -> Iterator[None]:
        previous = sys.gettrace()
        sys.settrace(self._global)
        try:
            yield
        finally:
            sys.settrace(previous)


class _WatchedDeadline(Deadline):
    """No limit; records the line count of `clock` at every `check`."""

    def __init__(self, clock: _LineClock) -> None:
        super().__init__(None)
        self.clock = clock
        self.marks: list[int] = []

    def check(self) -> None:
        self.marks.append(self.clock.lines)


def _build(L: int) -> tuple[Any, _WatchedDeadline, int]:
    """offload-exact's model of a random L-stage chain at 60% of its store-all peak, exact sizes:
    (model, its deadline's marks, lines the build ran)."""
    chain = random_chain(L, 3, integer_times=True)
    inst = OffloadInstance(chain, 20.0)
    dchain, M = discretise(chain, int(0.6 * reference_peak(chain)), 0)
    clock = _LineClock()
    deadline = _WatchedDeadline(clock)
    with clock.running():
        model = exact_free.FreeOrderModel(inst, dchain, M, 1.0, deadline, link_rows=True)
    return model, deadline, clock.lines


def test_offload_exact_build_checks_its_deadline_throughout():
    """No stretch of the build runs a quarter of its lines without a deadline check (the idle-slot rows
    ran two thirds of them unchecked at L = 12): a limit that comes during the build is seen soon."""
    model, deadline, lines = _build(12)
    assert len(model.w) > 1000  # a model with many away pieces
    marks = [*deadline.marks, lines]
    longest = max(b - a for a, b in zip(marks, marks[1:]))
    assert longest <= 0.25 * lines, (longest, lines)


def test_offload_exact_build_grows_with_its_model_not_quadratically():
    """Lines per away variable do not grow with the chain: the idle-slot rows read each slot's own away
    variables (they scanned all of them per idle slot: 172 lines each at L = 8, 266 at L = 12)."""
    per_w = []
    for L in (8, 12):
        model, _, lines = _build(L)
        per_w.append(lines / len(model.w))
    assert per_w[1] <= 1.2 * per_w[0], per_w


@contextmanager
def _collector_off() -> Iterator[None]:
    """The cyclic collector off (as between two of its runs): what stays alive is what a reference holds."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _alive_ops() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is Op)


def test_phase_sequences_dropped_are_freed_at_once():
    """The enumeration holds nothing once its list is dropped: returned, or cut short by the deadline."""
    with _collector_off():
        before = len(gc.get_objects())
        seqs = phase_sequences(5)
        assert len(seqs) == 84152
        del seqs
        assert len(gc.get_objects()) - before < 100

    class AfterChecks(Deadline):
        def __init__(self, n: int) -> None:
            super().__init__(None)
            self.n = n

        def check(self) -> None:
            self.n -= 1
            if self.n < 0:
                raise DeadlineExceeded("cut short")

    with _collector_off():
        before = len(gc.get_objects())
        with pytest.raises(DeadlineExceeded):
            phase_sequences(6, AfterChecks(200))  # ~200k calls: tens of thousands of sequences so far
        assert len(gc.get_objects()) - before < 100


def test_exact_combined_keeps_no_sequence_after_its_answer():
    """After exact-combined answers, the only compute ops alive are its schedule's (the 2 248 enumerated
    sequences of L = 4 kept some 10 000 more until a full collection)."""
    chain = random_chain(4, 1, integer_times=True)
    inst = OffloadInstance(chain, 1e3)
    with _collector_off():
        before = _alive_ops()
        res = solve_exact_combined(inst, int(0.7 * reference_peak(chain)), time_limit=60)
        assert res.schedule is not None and res.details["sequences"] == 2248
        assert _alive_ops() - before <= len(res.schedule.ops)
