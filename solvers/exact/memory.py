"""Will a model fit in this machine's memory? An estimate made before the model is built.

A model too large for the machine does not fail cleanly: the process grows until the kernel's
out-of-memory killer ends it, and the solve, the sweep or the benchmark around it is lost with
no answer (Checkmate's MILP on Moccasin's RL1000 graph, 4.6 million variables and 47 million
nonzeros, was killed at 23.5 GB on a 24 GB machine). So a solver that knows its model's size
in advance compares the estimate with the memory available and, when it does not fit, answers
without building it (the exact layer then returns the warm start's schedule, saying why).

The estimate is a fixed part plus a part linear in the model's nonzeros: `FIXED_BYTES` and
`BYTES_PER_NONZERO` hold them for the in-Python `LinearModel` and, separately, for each backend
(its copy of the model, presolve and search), fitted above the peaks measured on Checkmate's model
of random layered graphs by ``python -m memsched.experiments.bench_model_memory``
(results/bench_model_memory.csv; 0.15 to 9.8 million nonzeros). The memory available is the
kernel's ``MemAvailable`` (Linux); where it cannot be read no guard applies.
"""

from __future__ import annotations

from dataclasses import dataclass

#: peak resident bytes per nonzero (results/bench_model_memory.csv, fitted from above): "model" is
#: the `LinearModel` itself, the others a backend on top of it ("lp": the LP relaxation on HiGHS)
BYTES_PER_NONZERO: dict[str, float] = {
    "model": 150.0,
    "scip": 1000.0,
    "cbc": 700.0,
    "highs": 600.0,
    "lp": 750.0,
    "cpsat": 900.0,
}
#: the fixed part of a backend's peak, bytes (SCIP's tables and plugins, HiGHS's and CP-SAT's workers)
FIXED_BYTES: dict[str, float] = {
    "model": 0.0,
    "scip": 1.2e9,
    "cbc": 0.2e9,
    "highs": 0.8e9,
    "lp": 0.1e9,
    "cpsat": 0.2e9,
}
#: share of the available memory a model may take (the rest: the process itself, the page cache
#: the system needs, other work on the machine)
USABLE_SHARE = 0.8
GB = 1e9


@dataclass(frozen=True)
class ModelSize:
    """A linear model's size: columns, rows and nonzero coefficients."""

    variables: int
    rows: int
    nonzeros: int

    def bytes_needed(self, backend: str) -> float:
        """Estimated peak resident bytes of the model plus `backend` solving it."""
        per = BYTES_PER_NONZERO["model"] + BYTES_PER_NONZERO.get(backend, max(BYTES_PER_NONZERO.values()))
        return FIXED_BYTES.get(backend, max(FIXED_BYTES.values())) + per * self.nonzeros


class ModelTooLarge(Exception):
    """Raised instead of building a model that `too_big` says would not fit; the message says why."""


def available_bytes() -> float | None:
    """The kernel's estimate of memory available to new work (``MemAvailable``), None where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        return None
    return None


def _memory_to_plan(memory_gb: float | None) -> float | None:
    """Bytes to plan for: `memory_gb` (GB), else what is available; None when the check is off (0) or unknown."""
    if memory_gb is not None and memory_gb <= 0:
        return None
    return memory_gb * GB if memory_gb is not None else available_bytes()


def too_big(size: ModelSize, backend: str, memory_gb: float | None = None) -> str | None:
    """Why the model would not fit (one sentence), or None when it fits or nothing is known.
    `memory_gb` overrides the machine's available memory (GB = 10^9 bytes); 0 disables the guard."""
    have = _memory_to_plan(memory_gb)
    if have is None:
        return None
    need = size.bytes_needed(backend)
    if need <= USABLE_SHARE * have:
        return None
    return (f"the model ({size.variables:,} variables, {size.rows:,} rows, {size.nonzeros:,} nonzeros) would need "
            f"about {_amount(need)} with {backend}, {_amount(have)} available "
            f"(option memory_gb sets the memory to plan for, 0 turns this check off)")


def _amount(n_bytes: float) -> str:
    """Bytes in GB (MB below 1 GB), for messages."""
    return f"{n_bytes / GB:.1f} GB" if n_bytes >= GB else f"{n_bytes / 1e6:.0f} MB"


def limit_mb(memory_gb: float | None = None) -> int | None:
    """The memory a backend may use while it searches, in MB (SCIP's ``limits/memory``: it stops
    with its incumbent rather than grow past it): `USABLE_SHARE` of `memory_gb` or of what is
    available now; None when the check is off (0) or nothing is known."""
    have = _memory_to_plan(memory_gb)
    return None if have is None else max(64, int(USABLE_SHARE * have / 2**20))


__all__ = ["BYTES_PER_NONZERO", "FIXED_BYTES", "ModelSize", "ModelTooLarge", "available_bytes", "limit_mb", "too_big"]
