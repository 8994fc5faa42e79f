"""One cell of a sweep: solve (and optionally execute) one task; always returns a row."""

from __future__ import annotations

import datetime as _dt
import functools
import math
import os
import platform
import socket
from typing import Any

from memsched.solvers import __version__ as MEMSCHED_VERSION
from memsched.solvers import registry
from memsched.solvers.errors import InputError, first_line

from .grid import Task, canonical
from .instances import LoadedInstance
from .store import UNSUPPORTED


def overhead_of(objective: float, baseline: float) -> float:
    """`objective` over `baseline` (both in the instance's objective unit; `baseline` nonzero), minus 1:
    0.25 is 25% above the no-savings objective. A value within 1e-12 of 0 is exactly 0.0: a solver that
    matches the baseline up to the float rounding of its sums (66.6 against 66.60000000000001) has no
    overhead, not -2e-16 (shown as "-0.000"). The one rule of a sweep file's rows and of
    ``memsched.sweep`` on an instance."""
    overhead = objective / baseline - 1.0
    return 0.0 if abs(overhead) < 1e-12 else overhead


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """Versions of memsched, numpy, ortools, torch (None when absent) and Python, and the host.

    Read from the installed distributions' metadata: nothing is imported (importing torch
    only to read its version costs seconds)."""
    from importlib import metadata

    out: dict[str, str | None] = {"memsched_version": MEMSCHED_VERSION}
    for dist in ("numpy", "ortools", "torch"):
        try:
            out[f"{dist}_version"] = str(metadata.version(dist))
        except metadata.PackageNotFoundError:
            out[f"{dist}_version"] = None
    out["python_version"] = platform.python_version()
    out["host"] = socket.gethostname()
    return out


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        try:
            return _finite(v.item())
        except (AttributeError, ValueError):
            return v
    return v


def base_row(task: Task) -> dict[str, Any]:
    """The parameters of a cell's row (no result yet)."""
    li, s = task.loaded, task.solver
    return {
        "sweep": task.sweep, "key": task.key, "instance": li.label, "problem": li.problem, "source": li.source,
        "instance_hash": li.digest, "size": li.size, "budget_spec": task.budget_spec, "budget": task.budget,
        "reference_peak": li.reference_peak,
        "budget_fraction": (task.budget / li.reference_peak) if li.reference_peak else None,
        "solver": s.name, "solver_label": s.label, "slots": s.slots, "time_limit": s.time_limit,
        "options": canonical(task.solver_options), "repeat": task.repeat, "execute": task.execute,
        "objective_name": registry.get_problem(li.problem).objective,
        "baseline_objective": li.baseline_objective,
    }


def _stamp(row: dict[str, Any]) -> dict[str, Any]:
    """Add versions, host, pid and time; non-finite floats become None."""
    row.update(versions())
    row["pid"] = os.getpid()
    row["timestamp"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return {k: _finite(v) for k, v in row.items()}


def failed_row(task: Task, message: str) -> dict[str, Any]:
    """The ``error`` row of a cell that gave no result (its worker process died)."""
    return _stamp({**base_row(task), "status": "error", "message": message[:500]})


def run_task(task: Task) -> dict[str, Any]:
    """Solve one cell (and execute its schedule when asked); always returns a row.

    Solver errors do not stop the sweep: they give a row with status ``error`` and the message;
    a solver that rejects the instance (`InputError`: outside its model) gives ``unsupported``.
    """
    li, s = task.loaded, task.solver
    row = base_row(task)
    result = None
    try:
        result = registry.solve(li.problem, li.instance, s.name, task.budget, slots=s.slots,
                                time_limit=s.time_limit, **task.solver_options)
    except InputError as err:  # the solver does not apply to this instance (e.g. Revolve, heterogeneous)
        row.update(status=UNSUPPORTED, message=str(err)[:500])
    except Exception as err:  # noqa: BLE001  (recorded in the row; the sweep goes on)
        row.update(status="error", message=f"{type(err).__name__}: {err}"[:500])
    if result is not None:
        row.update(status=result.status, objective=result.objective, lower_bound=result.lower_bound,
                   gap=result.gap, peak_memory=result.peak_memory, min_budget=result.min_budget,
                   solve_time_s=result.solve_time_s, scope=result.scope, message=result.message[:500])
        if result.objective is not None and li.baseline_objective:
            row["overhead"] = overhead_of(result.objective, li.baseline_objective)
        if task.execute and result.schedule is not None:
            try:
                row.update(_execute(li, result.schedule, task.measure))
            except Exception as err:  # noqa: BLE001  (recorded in the row; the sweep goes on)
                row = execution_failed(row, err)
    return _stamp(row)


#: the solver's answer in a row (`run_task`): none of it stays in the ``error`` row of a failed execution
_ANSWER_COLUMNS = ("objective", "overhead", "lower_bound", "gap", "peak_memory", "min_budget")


def execution_failed(row: dict[str, Any], err: BaseException) -> dict[str, Any]:
    """The ``error`` row of a cell whose schedule was found but failed to execute (`err`): an error
    row as any other (counted in the sweep's errors, kept as it is by a resume), whose message keeps
    the solver's answer (``execution failed: RuntimeError: boom; rotor answered optimal, objective 12``,
    the objective in the instance's unit, then the solver's own message), at most 500 characters.
    The answer's numbers leave their columns: an error row holds no objective (`verify`)."""
    answer = f"{row['solver']} answered {row.get('status')}"
    if row.get("objective") is not None:
        answer += f", objective {row['objective']:.6g}"
    if row.get("message"):
        answer += f" ({row['message']})"
    failure = f"execution failed: {type(err).__name__}: {first_line(err) or 'no message'}"[:300]
    out = {k: v for k, v in row.items() if k not in _ANSWER_COLUMNS}
    out.update(status="error", message=f"{failure}; {answer}"[:500])
    return out


#: The prepared network of the last executed instance in this process: (instance hash, problem, target).
_TARGET: dict[str, Any] = {}


def _target(li: LoadedInstance) -> Any:
    """`models.run.prepare` on the zoo network of `li` with its stored costs, kept for the next cell."""
    from memsched.models.run import default_clock, prepare

    assert li.model is not None
    ident = (li.digest, li.problem, li.label)
    if _TARGET.get("ident") != ident:
        inst, link = li.instance, {}
        if li.problem == "offload":
            inst, link = li.instance.chain, {"bandwidth": li.instance.bandwidth, "latency": li.instance.latency}
        _TARGET.clear()
        _TARGET.update(ident=ident, target=prepare(li.problem, li.model["name"], instance=inst,
                                                   sizes=li.model["sizes"], clock=default_clock(), **link))
    return _TARGET["target"]


def _execute(li: LoadedInstance, schedule: Any, measure: dict[str, int] | None) -> dict[str, Any]:
    """Run `schedule` for real on the zoo network of `li` (`models.run.prepare` / `execute_schedule`).

    Measuring (`measure`, `config.MEASURE_DEFAULTS`): torch CPU threads pinned to ``threads``;
    ``warmup`` unwatched runs; one run watched by the tracker, one under the independent
    allocator probe (CPU) and the gradient check; then ``time_repeats`` unwatched timed runs.
    Row: measured_time_ms (median, ms), time_ms_min / _q1 / _q3 / _max and time_ratio_min /
    _max (measured / predicted time of the fastest and slowest run), the tracker and independent
    peaks (bytes) with their ratios to the simulator's, the settings (threads, the clock:
    `models.run.default_clock`, thread CPU time with one thread, as the profile's) and the
    1-minute load average. The caller's torch thread count is put back on return, error or not
    (`instances.pinned_threads`: ``memsched.sweep`` in a notebook, isolate=False, keeps its threads).
    """
    from .config import MEASURE_DEFAULTS
    from .instances import pinned_threads

    m = {**MEASURE_DEFAULTS, **(measure or {})}
    with pinned_threads(m["threads"]):
        return _measure(li, schedule, m)


def _measure(li: LoadedInstance, schedule: Any, m: dict[str, int]) -> dict[str, Any]:
    """`_execute` with torch's threads already pinned to ``m["threads"]``; `m`: the full measure settings."""
    import numpy as np
    import torch
    from memsched.models.run import default_clock, predicted_ms

    target = _target(li)
    for _ in range(m["warmup"]):
        target.step(schedule, measure_memory=False, time_repeats=1, independent=False)
    step, row = execute_schedule_once(target, schedule)
    times = [target.step(schedule, measure_memory=False, time_repeats=1, independent=False).time_ms
             for _ in range(m["time_repeats"])]
    q = np.percentile(np.asarray(times, dtype=float), [0, 25, 50, 75, 100])
    # in ms (None for counted work); offload on CPU: the sequential replay's
    pred = predicted_ms(target.time_unit, step.comparisons()["time"].predicted)
    row.update(measured_time_ms=float(q[2]), time_ms_min=float(q[0]), time_ms_q1=float(q[1]),
               time_ms_q3=float(q[3]), time_ms_max=float(q[4]),
               time_ratio=float(q[2]) / pred if pred else None,
               time_ratio_min=float(q[0]) / pred if pred else None,
               time_ratio_max=float(q[4]) / pred if pred else None,
               time_repeats=m["time_repeats"], warmup=m["warmup"], threads=torch.get_num_threads(),
               clock=default_clock(),
               load_1min=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
               independent_method=step.independent_method)
    return row


def execute_schedule_once(target: Any, schedule: Any) -> tuple[Any, dict[str, Any]]:
    """Memory (tracker and independent probe) and gradient check of one execution
    (`models.run.execute_schedule`, one timed run that the repeats replace)."""
    from memsched.models.run import execute_schedule

    return execute_schedule(target, schedule, time_repeats=1)
