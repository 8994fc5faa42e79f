"""Ctrl-C during the rotor DP's C kernel (`solvers.chain.ckernel.fill_table`): the table is filled in
parts of a few milliseconds (`ckernel.fill_parts`) with Python running between them, so SIGINT raises
`KeyboardInterrupt` within one part, not after the whole table (a 1000-stage chain at 100 slots takes
~15 s). The parts give the same table, bit for bit, as the other kernels and as one part a tile."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import sigint_as_in_a_terminal
from memsched.solvers.chain import ckernel
from memsched.solvers.chain.baselines import store_all_schedule
from memsched.solvers.chain.dp import rotor_table
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.simulator import simulate

needs_c = pytest.mark.skipif(ckernel.library() is None, reason="no C compiler to build the C kernels")

#: Seconds into the fill when SIGINT is sent, and the generous bound on the exit after it (loaded CI).
SIGNAL_AFTER_S = 1.5
EXITED_WITHIN_S = 8.0

#: The child: a 1000-stage chain (the largest accepted) at 100 slots of 30% of its store-all peak.
CHILD = """
from memsched.solvers.chain.baselines import store_all_schedule
from memsched.solvers.chain.dp import rotor_table
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.simulator import simulate

chain = random_chain(1000, 1)
work = chain.discretised(0.3 * simulate(chain, store_all_schedule(1000)).peak_memory / 100)
rotor_table(work, 10, kernel="c")  # builds or loads the C kernels before the timed part
print("filling", flush=True)
rotor_table(work, 100 - int(work.x[0]), kernel="c")
print("done", flush=True)
"""


@needs_c
def test_sigint_stops_the_c_fill_of_a_1000_stage_table_within_seconds():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=sigint_as_in_a_terminal)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "filling\n", proc.stderr.read()
        time.sleep(SIGNAL_AFTER_S)
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        try:
            out, err = proc.communicate(timeout=EXITED_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the fill went on for more than {EXITED_WITHIN_S} s after SIGINT")
        waited = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "done" not in out, "the fill ended before the signal: the test proves nothing"
    assert "KeyboardInterrupt" in err and proc.returncode != 0, (proc.returncode, err[-2000:])
    assert waited < EXITED_WITHIN_S


def _table(chain, frac: float, kernel: str) -> np.ndarray:
    M = int(frac * simulate(chain, store_all_schedule(chain.length)).peak_memory)
    return rotor_table(chain, M, kernel=kernel).C


@needs_c
@pytest.mark.parametrize("seed", range(4))
def test_any_split_into_parts_gives_the_same_table(seed, monkeypatch):
    chain = random_chain([5, 13, 22, 37][seed], seed, overhead=0.3 * (seed % 2), size_range=(1, 12 + 9 * seed))
    for frac in (0.2, 0.5, 1.0):
        whole = _table(chain, frac, "c")  # one part a tile at these sizes
        with monkeypatch.context() as m:
            m.setattr(ckernel, "PART_WORK", 1)  # one row i a part
            rows = _table(chain, frac, "c")
        assert whole.tobytes() == rows.tobytes() == _table(chain, frac, "numpy").tobytes()


@pytest.mark.parametrize(("L", "M", "work"),
                         [(0, 5, 1), (9, 10, 1), (9, 10, 1 << 24), (30, 7, 500), (1000, 99, 1 << 24)])
def test_fill_parts_cover_each_tile_and_row_once_in_the_kernel_order(L, M, work):
    parts = list(ckernel.fill_parts(L, M, 4, work))
    expected = [(l0, i) for l0 in range(0, L + 1, 4) for i in range(min(l0 + 4, L + 1) - 1, -1, -1)]
    assert [(l0, i) for l0, hi, lo in parts for i in range(hi, lo - 1, -1)] == expected
    for l0, hi, lo in parts:  # each part's work bound is within `work` unless it is a single row
        l1 = min(l0 + 4, L + 1)
        assert hi == lo or (hi - lo + 1) * l1 * (l1 - l0) * (M + 1) <= work
