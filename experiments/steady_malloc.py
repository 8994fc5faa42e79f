"""Run a timing benchmark with glibc's malloc thresholds pinned, so that step times are steady.

glibc serves allocations above its mmap threshold with fresh ``mmap`` pages and, by default,
raises that threshold as large blocks are freed (the dynamic threshold), and trims the heap's
top. A training step's tensors then land on fresh pages in one step and on reused pages in the
next, depending on what earlier steps of *other* tools freed: the first touch of each page is
a page fault, counted in the thread's CPU time. Measured on the GPT medium of
`bench_vs_torch` on a quiet machine (load 1), identical store-all steps of memsched's executor
differed from plain autograd by +4..+11% in one run and -9% in another, and neighbouring
budgets by up to 27 points; with the thresholds pinned (`PINNED`: blocks up to 32 MiB come from
the heap, and the heap is never trimmed) the same run gave -0.8% / -3.5% and monotone curves. It does not
remove every source of noise: a later full run (torch.compile rows on, another benchmark
beside it) measured the store-all steps at +10% / +22% again (docs/chain.md).
Every tool of a run gets the same setting, and the peaks (tracker, torch's allocator probe)
do not depend on it.

`run_with_pinned_malloc` (a benchmark's ``__main__``) runs its main in such a process:
`pin_malloc_and_reexec` sets the variables and re-executes the command once (glibc reads them
at start-up only); with ``MEMSCHED_NO_MALLOC_PIN`` set, or off Linux, it does nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

#: glibc tunables: the largest fixed mmap threshold (32 MiB on 64-bit) and no heap trimming
PINNED = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(2**40)}


def malloc_pinned() -> bool:
    """True when this process started with the `PINNED` thresholds."""
    return all(os.environ.get(k) == v for k, v in PINNED.items())


def pin_malloc_and_reexec(module: str) -> None:
    """Re-execute ``python -m module argv...`` with `PINNED` in the environment, unless it is
    already there, ``MEMSCHED_NO_MALLOC_PIN`` is set or this is not Linux (then return)."""
    if malloc_pinned() or os.environ.get("MEMSCHED_NO_MALLOC_PIN") or not sys.platform.startswith("linux"):
        return
    env = {**os.environ, **PINNED}
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]], env)


def run_with_pinned_malloc(module: str, main: Callable[[], int]) -> int:
    """``main()`` in a process with `PINNED` thresholds (``python -m module`` re-executed once)."""
    pin_malloc_and_reexec(module)
    return main()


def _report() -> int:
    """Print whether this process has the thresholds (the check of tests/test_steady_malloc.py)."""
    print(f"pinned {malloc_pinned()}")
    return 0


if __name__ == "__main__":
    sys.exit(run_with_pinned_malloc("memsched.experiments.steady_malloc", _report))
