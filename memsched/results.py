"""What the facade returns: `Result` (one solver run or replay), `Comparison` (several solvers
at one budget), `SweepResult` (a grid of rows) and `RunResult` (a real execution).

Each has ``.to_pandas()`` (a DataFrame), ``.plot()`` (a matplotlib figure made without pyplot,
shown inline by Jupyter) and ``_repr_html_`` (Jupyter's rich display: status, makespan,
peak, bound, and the memory timeline inline as a PNG). Sizes and times are in the instance's
units: bytes (unless its ``meta["units"]["memory"]`` says e.g. KiB; the rich display converts) and
ms for profiled chains; the makespan of a pipeline is its period (time per
micro-batch in steady state, in its file's unit). The rich display names the time unit as the command line
does ("0.0195 s"; a pipeline's period in seconds, then in its file's unit). pandas and matplotlib are
imported on use.
"""

from __future__ import annotations

import base64
import html
import io
import math
import numbers
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from memsched.solvers.errors import InputError
from memsched.solvers.units import MEMORY_UNIT_BYTES, memory_unit

#: Columns of `Result.row` (and of the facade's sweep rows), in table order.
ROW_COLUMNS = ("instance", "problem", "solver", "status", "objective", "objective_name", "peak_memory", "budget",
               "lower_bound", "gap", "min_budget", "solve_time_s", "scope", "message")
#: Columns that hold numbers (or nothing) by definition: those of `ROW_COLUMNS`, `Comparison`'s ratio and the sweeps'
#: (the facade's and the sweep engine's). `to_pandas` reads them as floats when a value is missing (NaN, never an
#: object column of None); a column of text in them (rows read back from a table) is left as it is.
_NUMBER_COLUMNS = ("objective", "peak_memory", "budget", "lower_bound", "gap", "min_budget", "solve_time_s",
                  "ratio_to_best", "reference_peak", "budget_fraction", "baseline_objective", "overhead", "devices",
                  "measured_peak", "measured_time_ms")


def _gb(n: float | None) -> str:
    """A byte count in binary units (for tables): three significant digits ("40.5 KiB", "949 MiB"), in
    fixed point where that would need an exponent ("1000 MiB", "1021.6 MiB", never "1.02e+03 MiB")."""
    if n is None:
        return "–"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{fixed_point(n / scale)} {unit}"
    return f"{int(n)} B"


def fixed_point(value: float) -> str:
    """`value` with three significant digits (``:.3g``), but never in scientific notation: a value that
    would need an exponent (999.5 and above, or below 1e-4) is written in fixed point instead, with at
    most one decimal from 1 up ("1000", "1021.6", "1048576") and six below ("0.000032")."""
    text = f"{value:.3g}"
    if "e" not in text:
        return text
    text = f"{value:.1f}" if abs(value) >= 1 else f"{value:.6f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _size(n: float | None, unit: str | None, *, raw: bool = True) -> str:
    """A size `n` in the instance's memory `unit` (None: bytes) for tables: in binary units, as the
    figure scales it, then (`raw`) the number as the instance states it ("40.5 KiB (41503 B)" for bytes;
    "39.8 MiB (40768 KiB)" for a file in KiB). A unit that is not a byte unit is shown as is."""
    if n is None:
        return "–"
    base = MEMORY_UNIT_BYTES.get(unit.strip().lower()) if unit else 1
    if base is None:
        return f"{_num(n)} {unit}"
    text = _gb(n * base)
    if not raw:
        return text
    return f"{text} ({n} {'B' if base == 1 else unit})"


def _num(v: float | None, digits: int = 6) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:.{digits}g}"


def _time(value: float | None, problem: str, instance: Any) -> str:
    """A time of a result (its makespan or period, its lower bound: in the instance's time unit) for the rich
    display, as the command line prints it: `memsched solve`'s text (6 significant digits, then the unit of
    `units.time_unit`: "0.0195 s", "184.444 ms"; the bare number for a graph that names no unit); a pipeline's
    period as `memsched partition` gives it, in seconds, then in the file's unit (`memsched simulate`'s
    "0.0082 s  per micro-batch (8200 us in the file's time unit)": ``time_unit`` seconds each). "–" for none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    from memsched.experiments.commands._common import time_text
    from memsched.solvers.units import time_unit

    if problem == "pipeline" and isinstance(getattr(instance, "time_unit", None), (int, float)):
        from memsched.experiments.commands.simulate import pipeline_period_text

        return pipeline_period_text(value * instance.time_unit, value, problem, instance)
    return time_text(value, time_unit(problem, instance))


def _png(fig: Any, dpi: int = 72) -> str:
    """An <img> tag holding `fig` as a base64 PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" style="max-width:100%"/>'


def _figure_or_note(draw: Callable[[], Any]) -> str:
    """The <img> of the figure `draw()` makes, or, when it cannot be drawn (an `InputError`, e.g. a
    replicated pipeline stage), a one-line note saying why: the rich display never raises."""
    try:
        return _png(draw())
    except InputError as e:
        return f"<p><i>no figure: {html.escape(str(e))}</i></p>"


def _table(pairs: Sequence[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                    f"{html.escape(v)}</td></tr>" for k, v in pairs)
    return f"<table>{cells}</table>"


#: the largest figure side accepted (inches): 200 in at 100 dpi is 20000 pixels, within Agg's 2^16 limit
MAX_FIGURE_INCHES = 200.0


def check_figsize(figsize: Any) -> None:
    """None, or (width, height) in inches: two numbers in (0, `MAX_FIGURE_INCHES`]; `InputError`
    naming ``figsize`` otherwise (matplotlib's own errors would come from deep in the drawing)."""
    if figsize is None:
        return
    ok = isinstance(figsize, (tuple, list)) and len(figsize) == 2 and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) and 0 < v <= MAX_FIGURE_INCHES for v in figsize)
    if not ok:
        raise InputError(f"must be (width, height) in inches, two numbers in (0, {MAX_FIGURE_INCHES:g}], got "
                         f"{figsize!r}"[:200], field="figsize")


def check_title(title: Any) -> None:
    """None or a str (`InputError` naming ``title``)."""
    if title is not None and not isinstance(title, str):
        raise InputError(f"must be a str (or None), got {title!r}"[:200], field="title")


def no_options(unknown: dict[str, Any], what: str, accepted: Sequence[str]) -> None:
    """`InputError` naming the first of `unknown` (keyword arguments that `what` does not take,
    gathered by its ``**unknown``): a misspelt argument is not ignored, nor a bare TypeError."""
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(f"{what} takes no argument {key!r} (it takes {', '.join(accepted)})", field=key)


def _check_plot(what: str, accepted: Sequence[str], unknown: dict[str, Any], title: Any, figsize: Any) -> None:
    no_options(unknown, what, accepted)
    check_title(title)
    check_figsize(figsize)


class _MissingKey(InputError, KeyError):
    """A solver name that a `Comparison` does not hold: an `InputError` (bad input, as the
    facade's contract says) that is also a `KeyError`, so that code written for the mapping
    protocol (``except KeyError``) keeps working. Its message is the one-line `InputError`
    text, not KeyError's quoted repr."""

    __str__ = InputError.__str__


class _MissingIndex(InputError, IndexError):
    """A position out of a `Comparison`'s range: an `InputError` that is also an `IndexError`
    (so that code catching IndexError, and the old sequence protocol, keep working)."""


def _figure(figsize: tuple[float, float]) -> Any:
    """A pyplot-free figure that Jupyter shows inline (the schedule figures' class)."""
    from memsched.experiments.plotting.draw import ScheduleFigure

    return ScheduleFigure(figsize=figsize, layout="constrained")


class Result:
    """One solver run (or replay) of `instance`, refereed by the simulator.

    ``status``: optimal (proven, for the model in ``scope``), feasible, infeasible, timeout;
    "valid" / "invalid" for a replay (`memsched.simulate`); "unsupported" in a `Comparison` for a
    solver that refused the instance (``message`` says why). ``makespan`` (``period`` for
    pipelines) and ``peak_memory`` are the simulator's; ``lower_bound`` a proven bound when the
    solver has one; ``min_budget`` the smallest budget the solver needs when it finds none (from the
    solver, else from the search `memsched.solve` runs as ``memsched solve`` does; ``details`` then say
    how it was found, ``min_budget_method``, or why it is unknown, ``min_budget_note``).

    ``details``: what the solver (and the facade) recorded about the run, a mapping from
    names to JSON values (the solver's own dict, which `json.dumps` takes), e.g. rotor's ``slots_tried``
    and ``first_makespan``, ``min_budget_method``, ``interrupted``; empty when there is nothing to say.
    ``raw`` is the registry's ``SolveResult`` these attributes read."""

    def __init__(self, problem: str, instance: Any, raw: Any) -> None:
        self.problem = problem
        self.instance = instance
        self.raw = raw  # the registry's SolveResult

    # the SolveResult's fields (RAW_FIELDS) are read-only attributes, set below the class

    @property
    def details(self) -> dict[str, Any]:
        """The solver's details of this run: the registry result's ``details`` dict itself (JSON values;
        the attribute cannot be rebound)."""
        return self.raw.details

    @property
    def objective_name(self) -> str:
        """What the objective is for this problem: "makespan" or "period" (its descriptor's)."""
        from memsched.solvers.registry import get_problem

        return get_problem(self.problem).objective

    @property
    def makespan(self) -> float | None:
        """Makespan (time unit); for a pipeline, its period."""
        return self.raw.objective

    @property
    def period(self) -> float | None:
        """The pipeline period of the replayed schedule (time per micro-batch in steady state, in the
        instance's time unit, not seconds: ms for profiled chains; a pipeline's ``time_unit`` is that unit in
        seconds; `to_json` gives the period in seconds, as ``memsched partition --json``), or None: for a result
        of another problem than "pipeline" (whose objective is a makespan), or when no schedule was found."""
        return self.raw.objective if self.problem == "pipeline" else None

    @property
    def found(self) -> bool:
        """A schedule exists (and, for a replay, is valid)."""
        return self.schedule is not None and self.status not in ("infeasible", "invalid")

    @property
    def violation(self) -> str | None:
        """For a replay: the simulator's reason when the schedule breaks a rule."""
        return self.message if self.status == "invalid" else None

    @property
    def name(self) -> str:
        """The instance's name, else the problem's name."""
        return str(getattr(self.instance, "name", "") or self.problem)

    def row(self) -> dict[str, Any]:
        """This run as one flat row (`ROW_COLUMNS`)."""
        return {"instance": self.name, "problem": self.problem, "solver": self.solver, "status": self.status,
                "objective": self.objective if self.found else None, "objective_name": self.objective_name,
                "peak_memory": self.peak_memory if self.found else None, "budget": self.budget,
                "lower_bound": self.lower_bound, "gap": self.gap, "min_budget": self.min_budget,
                "solve_time_s": self.solve_time_s, "scope": self.scope, "message": self.message}

    def to_pandas(self) -> Any:
        """A one-row DataFrame of `row`."""
        import pandas as pd

        return _numbers_read_as_float(pd.DataFrame([self.row()], columns=list(ROW_COLUMNS)))

    def to_json(self) -> dict[str, Any]:
        """The ``memsched solve --json`` object. For a pipeline (solved or replayed), ``memsched partition
        --json``'s object (`_pipeline_json`): ``period``, ``lower_bound``, the stage times and an exact solver's
        ``log`` and ``fast`` periods in **seconds**, as on the command line (unlike the `period` attribute, in
        the file's time unit), with ``period_file_units`` and ``time_unit_s`` (seconds per file time unit);
        its ``schedule`` is the partition object (times in the file's unit), which records the machine the
        partition was solved with (``weight_factor``, ``bandwidth``, ``latency``, ``time_unit_s``), so that
        `memsched.simulate` (and ``memsched simulate``) of this JSON replays it on that machine."""
        if isinstance(self.schedule, (list, tuple)):  # a replay's plain list that names no schedule object
            return self._plain_schedule_json()
        if self.problem == "pipeline":
            return self._pipeline_json()
        return self.raw.to_json(objective_key=self.objective_name)

    def _pipeline_json(self) -> dict[str, Any]:
        """`to_json` of a pipeline result: the object ``memsched partition --json`` prints for it (the
        command's own `partition.to_json`, so that the two never drift apart; a replay's top-level keys
        then equal ``memsched simulate --json``'s ``period``, ``period_file_units``, ``time_unit_s``,
        ``peak_memory``, ``budget`` and machine). A period or bound that is not finite (the replay of a
        malformed partition: inf) is null, as in the other problems' JSON; such a partition, which the
        simulator gives no stage times, has no top-level ``stages`` and keeps its own JSON (`_partition_json`)."""
        import dataclasses

        from memsched.experiments.commands.partition import to_json as partition_json

        raw = self.raw
        infinite = {key: None for key in ("objective", "lower_bound")
                    if isinstance(getattr(raw, key), float) and not math.isfinite(getattr(raw, key))}
        evaluated = self.schedule is None or all(getattr(s, "time", None) is not None for s in self.schedule.stages)
        out = partition_json(dataclasses.replace(raw, **infinite, **({} if evaluated else {"schedule": None})),
                             self.instance)
        if not evaluated:
            out["schedule"] = self._partition_json(self.schedule.to_json())
        return out

    def _partition_json(self, plain: dict[str, Any]) -> dict[str, Any]:
        """The partition object of a pipeline result (`to_json`): ``memsched partition --json``'s, with the
        machine it was solved on. A partition the simulator gives no stage times (a malformed one, replayed
        "invalid": a gap between stages) keeps its `plain` JSON (times null) with that machine added."""
        if any(getattr(stage, "time", None) is None for stage in self.schedule.stages):
            inst = self.instance
            return {**plain, "time_unit_s": inst.time_unit, "weight_factor": inst.weight_factor,
                    "bandwidth": inst.bandwidth, "latency": inst.latency}
        from memsched.experiments.commands.partition import to_json as partition_json

        return dict(partition_json(self.raw, self.instance)["schedule"])

    def _plain_schedule_json(self) -> dict[str, Any]:
        """`to_json` of a replay whose schedule stayed the plain list it was given (a graph's node indices
        of which one names no node: `memsched.simulate` keeps it, and the replay is "invalid"): the same
        object, its ``schedule`` the list as given (``{"problem", "order"}``; indices as ints)."""
        import dataclasses

        out = dataclasses.replace(self.raw, schedule=None).to_json(objective_key=self.objective_name)
        out["schedule"] = {"problem": self.problem, "order": [_plain_entry(v) for v in self.schedule]}
        return out

    def timeline(self) -> Any:
        """The figure's data (`experiments.plotting.Timeline`), from the simulator."""
        from memsched.experiments.plotting import timeline_for

        return timeline_for(self.problem, self.instance, self._need_schedule(), self.budget)

    def plot(self, *, title: str | None = None, figsize: tuple[float, float] | None = None, **unknown: Any) -> Any:
        """Memory over time (budget and peak marked) above the operation chart. `title` a str,
        `figsize` (width, height) in inches; another keyword argument is an `InputError`."""
        from memsched.experiments.plotting import plot_schedule

        _check_plot("Result.plot", ("title", "figsize"), unknown, title, figsize)
        return plot_schedule(self.problem, self.instance, self._need_schedule(), budget=self.budget,
                             title=title if title is not None else f"{self.name} — {self.solver}", figsize=figsize)

    def _need_schedule(self) -> Any:
        if self.schedule is None:
            raise InputError(f"{self.solver}: no schedule ({self.status}) to draw")
        return self.schedule

    def summary(self) -> list[tuple[str, str]]:
        """(field, text) pairs for the rich display; sizes in binary units converted from the
        instance's memory unit (``meta["units"]["memory"]``: bytes unless it says e.g. KiB or MB),
        then as the instance states them; the makespan (period) and lower bound with their time unit, as the
        command line prints them (`_time`: "0.0195 s"; a pipeline's period in seconds, then in its file's unit)."""
        pairs = [("instance", f"{self.name} ({self.problem})"), ("solver", self.solver), ("status", self.status)]
        if self.scope:
            pairs.append(("scope", self.scope))
        unit = memory_unit(self.instance)
        if self.found:
            pairs += [(self.objective_name, _time(self.objective, self.problem, self.instance)),
                      ("peak memory", _size(self.peak_memory, unit))]
        if self.budget is not None:
            pairs.append(("budget", _size(self.budget, unit)))
        pairs.append(("lower bound", _time(self.lower_bound, self.problem, self.instance)))
        if self.gap is not None:
            pairs.append(("gap", f"{100 * self.gap:.2f} %"))
        if self.min_budget is not None and not self.found:
            pairs.append(("smallest feasible budget", _size(self.min_budget, unit, raw=False)))
        pairs.append(("solve time", f"{self.solve_time_s:.3f} s"))
        if self.message:
            pairs.append(("message", self.message))
        return pairs

    def _repr_html_(self) -> str:
        out = _table(self.summary())
        if self.schedule is not None:
            out += _figure_or_note(lambda: self.plot(figsize=(8.0, 4.2)))
        return f"<div>{out}</div>"

    def __repr__(self) -> str:
        obj = f"{self.objective_name}={_num(self.objective)}, peak={self.peak_memory}" if self.found else ""
        return f"<Result {self.problem} {self.name} {self.solver}: {self.status}{', ' + obj if obj else ''}>"


def _plain_entry(value: Any) -> Any:
    """One entry of a plain-list schedule as JSON: an integer (a numpy one too) as an int, an operation
    (a tuple or list) as a list of its entries, anything else as its text."""
    if isinstance(value, (tuple, list)):
        return [_plain_entry(v) for v in value]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value if isinstance(value, (str, bool, float)) or value is None else str(value)


#: The fields of the registry's SolveResult that a `Result` shows as its own (read-only).
RAW_FIELDS = ("solver", "status", "objective", "peak_memory", "lower_bound", "gap", "budget", "solve_time_s",
              "schedule", "min_budget", "scope", "message")
for _name in RAW_FIELDS:
    setattr(Result, _name, property(operator.attrgetter(f"raw.{_name}"), doc=f"The SolveResult's ``{_name}``."))


def _position(key: Any) -> int | None:
    """`key` as a position (`operator.index`: an int, a numpy integer), or None when it is no integer
    (a solver name) or a bool (True is no position, nor a name; numpy's bool has no index)."""
    if isinstance(key, (bool, str)):
        return None
    try:
        return operator.index(key)
    except TypeError:
        return None


class Comparison:
    """Several solvers on one instance at one budget (`memsched.solve(..., solver=[...])`), in the order
    named; a solver that refused the instance is there as a `Result` of status "unsupported" (its
    ``message`` says why; no schedule)."""

    def __init__(self, results: Sequence[Result]) -> None:
        self.results = list(results)

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, key: int | str) -> Result:
        """The result at position `key` (an integer: an int, a numpy integer, anything `operator.index`
        takes, but not a bool) or of the solver named `key`. A missing one is an `InputError` that is also
        an `IndexError` (a position) or a `KeyError` (a name)."""
        position = _position(key)
        if position is not None:
            key = position
            if not -len(self.results) <= key < len(self.results):
                raise _MissingIndex(f"no result at position {key} (this comparison has {len(self.results)})",
                                    field="key")
            return self.results[key]
        for r in self.results:
            if r.solver == key:
                return r
        raise _MissingKey(f"no result of solver {key!r} (solvers: {', '.join(r.solver for r in self.results)})"[:300],
                          field="key")

    @property
    def best(self) -> Result | None:
        """The found schedule with the smallest objective (None when none was found)."""
        found = [r for r in self.results if r.found]
        return min(found, key=lambda r: r.objective) if found else None

    def to_pandas(self) -> Any:
        """One row per solver, with ``ratio_to_best`` (1.0 = best found)."""
        import pandas as pd

        frame = pd.DataFrame([r.row() for r in self.results], columns=list(ROW_COLUMNS))
        best = self.best
        frame["ratio_to_best"] = frame["objective"] / best.objective if best and best.objective else None
        return _numbers_read_as_float(frame)

    def plot(self, *, title: str | None = None, figsize: tuple[float, float] | None = None, **unknown: Any) -> Any:
        """The found schedules stacked on the same time and memory scales (`title`, `figsize` as
        in `Result.plot`; another keyword argument is an `InputError`)."""
        from memsched.experiments.plotting import plot_comparison

        _check_plot("Comparison.plot", ("title", "figsize"), unknown, title, figsize)
        found = [r for r in self.results if r.found]
        if not found:
            raise InputError("no solver found a schedule: nothing to draw")
        first = found[0]
        return plot_comparison(first.problem, first.instance, {r.solver: r.schedule for r in found},
                               budget=first.budget, title=title, figsize=figsize)

    def _repr_html_(self) -> str:
        frame = self.to_pandas()[["solver", "status", "objective", "peak_memory", "lower_bound", "solve_time_s",
                                  "ratio_to_best"]]
        # peaks in the instance's memory unit, scaled as the summaries of single results show them
        unit = memory_unit(self.results[0].instance) if self.results else None
        frame["peak_memory"] = [_size(v, unit, raw=False) if v is not None and v == v else "–"
                                for v in frame["peak_memory"]]
        # times with their unit, as the summaries of single results show them (`_time`)
        for column in ("objective", "lower_bound"):
            frame[column] = [_time(v, r.problem, r.instance) for v, r in zip(frame[column], self.results)]
        for column in ("solve_time_s", "ratio_to_best"):
            frame[column] = [_num(v) for v in frame[column]]  # None and NaN alike as "–"
        out = frame.to_html(index=False)
        if any(r.found for r in self.results):
            out += _figure_or_note(self.plot)
        return f"<div>{out}</div>"

    def __repr__(self) -> str:
        return "<Comparison " + ", ".join(f"{r.solver}: {r.status}" for r in self.results) + ">"


class SweepResult:
    """Rows of a grid of (instance, budget, solver) runs: the sweep engine's rows (a sweep
    file) or the facade's (an instance and lists of budgets and solvers). Key columns:
    instance, solver, budget (in the instance's memory unit: bytes unless the file states meta.units.memory),
    budget_fraction (of the reference peak), status,
    objective (makespan or period), overhead (objective / no-savings objective - 1),
    peak_memory, lower_bound, solve_time_s.

    `units` maps an instance's name to its (time unit, memory unit) (``meta.units``; a memory unit of
    None is bytes, a time unit of None one the instance does not state): `plot` labels and scales its
    axes with them (a sweep file's run names each of its instances). An instance it does not name (rows
    read back from a table) is drawn in its own units,
    unscaled, and the labels say so."""

    def __init__(self, rows: Sequence[dict[str, Any]], *, source: str = "",
                 units: Mapping[str, tuple[str | None, str | None]] | None = None) -> None:
        self.rows = list(rows)
        self.source = source
        self.units = dict(units or {})

    def __len__(self) -> int:
        return len(self.rows)

    def to_pandas(self) -> Any:
        """The sweep's rows as a pandas DataFrame; its `_NUMBER_COLUMNS` as floats where a value is missing (NaN:
        a run that found no schedule, a solver with no lower bound)."""
        import pandas as pd

        return _numbers_read_as_float(pd.DataFrame(self.rows))

    def pivot(self, values: str = "objective") -> Any:
        """`values` (a column of the rows) per (instance, budget) and solver, in grid order; a
        column the rows do not have is an `InputError` listing theirs. A numeric column (bool
        included, True 1 and False 0: ``grad_check`` gives the share of a cell's runs that passed;
        numbers, bools and None, or None only, read as floats with NaN for the missing: a cell
        without a schedule is NaN, never None) gives the mean of a cell's rows; any other (status,
        scope, message: text) its
        first non-missing value. A cell holds one row unless the grid repeats a run."""
        from pandas.api.types import is_numeric_dtype

        frame = self.to_pandas()
        self._need_column(frame, values, "values")
        column = "solver_label" if "solver_label" in frame else "solver"
        index = ["instance", "budget_spec"] if "budget_spec" in frame else ["instance", "budget"]
        frame[values] = _numbers_as_float(frame[values], bools=True)
        aggfunc = "mean" if is_numeric_dtype(frame[values]) else "first"
        return frame.pivot_table(index=index, columns=column, values=values, aggfunc=aggfunc, sort=False,
                                 dropna=False)

    def plot(self, *, y: str | None = None, title: str | None = None,
             figsize: tuple[float, float] | None = None, **unknown: Any) -> Any:
        """`y` (default: overhead in % when the rows have it, else the objective; rows made by hand with neither
        column need a `y`, an `InputError` otherwise) versus the budget as a percentage of the reference peak,
        one line per solver, one panel per instance. A line holds only the budgets where its solver found a
        schedule (the row has an objective) and the row has a value of `y`, whatever `y` is: a solve time or a
        lower bound of a run that found no schedule (infeasible, a time limit without a schedule, unsupported)
        is not drawn (it is in `to_pandas`).
        Each series (`_series_labels`: a sweep file's ``solver_label``, else the solver's name, followed by
        the model its ``optimal`` rows are optimal in when their ``scope`` names one, as in the command-line
        figures: "cpsat (phase model)", "rotor (persistent)")
        keeps one colour and marker in every panel (`_series_styles`, distinct for the first 90 series), and
        one legend beside the panels names every series drawn. Each axis names its
        unit (`_axis`): the objective in the instance's time unit ("period (ms)"), sizes in the binary unit
        that suits them ("peak memory (MiB)", converted from the instance's memory unit), solve times in
        s, fractions in %. A `y` the rows do not have, a bad `title` or `figsize` or another keyword
        argument is an `InputError`, as is a sweep in which no run found a schedule ("no solver found a
        schedule: nothing to draw", as `Comparison.plot` says) and a `y` with no number to draw (text, or
        no value at a budget with a schedule: "nothing to draw").
        A series every point of which is also a point of a series drawn after it in its panel (madpipe and
        cpsat at the same periods) gets larger hollow markers on a wider, paler line, and a note under the
        panels names it and the series over it, by the rule of the command-line figures
        (`experiments.plotting.coincide.mark_coinciding`); the legend keeps each series' own style."""
        from memsched.experiments.plotting.coincide import coinciding_note, mark_coinciding
        from memsched.experiments.plotting.draw import literal_text  # names and titles drawn as written ("$")

        _check_plot("SweepResult.plot", ("y", "title", "figsize"), unknown, title, figsize)
        frame = self.to_pandas()
        if frame.empty:
            raise InputError("an empty sweep: nothing to draw")
        if "objective" in frame and not frame["objective"].notna().any():
            raise InputError("no solver found a schedule: nothing to draw")
        if y is not None:
            self._need_column(frame, y, "y")
        else:
            y = _default_y(frame)
        if y is None:  # rows made by hand, without either column: no default to draw
            columns = ", ".join(str(c) for c in frame.columns)
            raise InputError(f"the rows have no overhead or objective column: name the column to draw (columns: "
                             f"{columns})"[:400], field="y")
        x = "budget_fraction" if "budget_fraction" in frame and frame["budget_fraction"].notna().any() else "budget"
        frame[_SERIES] = _series_labels(frame)
        styles = _series_styles(frame[_SERIES])
        drawn = _drawn_rows(frame, x, y)
        instances = list(dict.fromkeys(frame["instance"]))
        fig = _figure(figsize or (4.2 * min(len(instances), 3) + 1.0 + _legend_width(drawn[_SERIES]),
                                  3.4 * math.ceil(len(instances) / 3)))
        axes = fig.subplots(math.ceil(len(instances) / 3), min(len(instances), 3), squeeze=False).ravel()
        handles: dict[str, Any] = {}
        drawn_lines: list[list[tuple[str, Any]]] = []  # each panel's (series, line), in drawing order
        for ax, name in zip(axes, instances):
            drawn_lines.append([])
            units = self.units.get(str(name))
            x_scale, x_label = _axis(frame[frame["instance"] == name], x, units)
            part = drawn[drawn["instance"] == name]
            y_scale, y_label = _axis(part, y, units)
            for series, group in part.groupby(_SERIES, sort=False):
                group = group.sort_values(x)
                (line,) = ax.plot(_scaled(group[x], x_scale), _scaled(group[y], y_scale), ms=4, label=str(series),
                                  **styles[str(series)])
                handles.setdefault(str(series), line)
                drawn_lines[-1].append((str(series), line))
            if part.empty:
                ax.text(0.5, 0.5, literal_text(f"no {y} to draw"), transform=ax.transAxes, ha="center", va="center",
                        fontsize=8, color="#868e96")
            if len(instances) > 1:
                ax.set_title(literal_text(str(name)), fontsize=10)
            ax.set_xlabel(literal_text(x_label))
            ax.set_ylabel(literal_text(y_label))
            ax.grid(alpha=0.3)
        for ax in axes[len(instances):]:
            ax.set_visible(False)
        ordered = [label for label in styles if label in handles]  # the frame's order, as the styles
        fig.legend([handles[label] for label in ordered], [literal_text(label) for label in ordered],
                   loc="outside right upper", fontsize=8, frameon=False)
        # after the legend, which keeps the series' own style
        note = coinciding_note([m for lines in drawn_lines for m in mark_coinciding(lines)], len(instances))
        if note:
            _note_below(fig, literal_text(note.strip()))
        if title or self.source:
            fig.suptitle(literal_text(title or self.source), fontsize=11)
        return fig

    @staticmethod
    def _need_column(frame: Any, name: Any, field: str) -> None:
        if not isinstance(name, str) or name not in frame.columns:
            columns = ", ".join(str(c) for c in frame.columns) or "none: an empty sweep"
            raise InputError(f"no column {name!r} in the rows (columns: {columns})"[:400], field=field)

    def _repr_html_(self) -> str:
        """The overhead (else the objective) per budget and solver, and `plot`'s figure when a schedule was
        found; rows that have neither column, or not the grid's (instance, budget, solver), are shown as the
        plain table of their columns, without a figure (`plot` then needs a `y`): this never raises."""
        if not self.rows:  # a grid of no cell (every one filtered out): nothing to tabulate or draw
            return "<div><p>0 runs</p></div>"
        frame = self.to_pandas()
        values = _default_y(frame)
        if values is None or not _is_grid(frame):
            out = f"<p>{len(self.rows)} runs</p>"
            return f"<div>{out}{frame.to_html(index=False, float_format=lambda v: f'{v:.4g}', na_rep='–')}</div>"
        out = f"<p>{len(self.rows)} runs; {values} per budget and solver</p>"
        out += self.pivot(values).to_html(float_format=lambda v: f"{v:.4g}", na_rep="–")
        if "objective" not in frame or frame["objective"].notna().any():
            out += _figure_or_note(self.plot)
        return f"<div>{out}</div>"

    def __repr__(self) -> str:
        return f"<SweepResult {self.source}: {len(self.rows)} rows>"


def _note_below(fig: Any, text: str) -> None:
    """`text` in small grey type under the panels of `fig` (a constrained-layout figure, which makes room for it:
    drawn as the figure's ``supxlabel``), wrapped to the figure's width (about 7 pt characters per line)."""
    import textwrap

    fontsize = 7.5
    width = max(int(fig.get_figwidth() * 72 / (0.55 * fontsize)), 40)  # characters per line at `fontsize`
    fig.supxlabel("\n".join(textwrap.fill(part, width) for part in text.split("\n")), fontsize=fontsize,
                  color="#555555")


def _default_y(frame: Any) -> str | None:
    """The column a sweep's figure and rich display show by default: ``overhead`` when some row has one,
    else ``objective`` when the rows have that column, else None (rows made by hand: nothing to choose)."""
    if "overhead" in frame and frame["overhead"].notna().any():
        return "overhead"
    return "objective" if "objective" in frame else None


def _is_grid(frame: Any) -> bool:
    """The rows of `frame` name the cells of a grid (an instance, a budget, a solver), as `SweepResult.pivot`
    and `plot` index them."""
    return "instance" in frame and "budget" in frame and ("solver_label" in frame or "solver" in frame)


#: the column `SweepResult.plot` adds to its frame for the series label of each row
_SERIES = "__series__"
#: colours (matplotlib's tab10) and filled markers of `SweepResult.plot`'s series: series i gets colour i mod 10
#: and marker i mod 9 (10 and 9 are coprime: the first 90 series differ in their pair), a dash per further 90
_SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf")
_SERIES_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*", "h")
_SERIES_DASHES = ("-", "--", "-.", ":")


def _series_styles(labels: Any) -> dict[str, dict[str, Any]]:
    """matplotlib line keywords (color, marker, linestyle) of each distinct label of `labels` (the series
    column of a whole sweep frame), given in order of first appearance: one style per label in every panel,
    whichever labels a panel lacks; distinct (colour, marker) pairs for the first 90 labels."""
    out: dict[str, dict[str, Any]] = {}
    for i, label in enumerate(dict.fromkeys(str(v) for v in labels)):
        out[label] = {"color": _SERIES_COLOURS[i % len(_SERIES_COLOURS)],
                      "marker": _SERIES_MARKERS[i % len(_SERIES_MARKERS)],
                      "linestyle": _SERIES_DASHES[i // 90 % len(_SERIES_DASHES)]}
    return out


def _series_labels(frame: Any) -> Any:
    """The series label of each row of `frame` (a pandas Series): its ``solver_label`` (a sweep file's label),
    else its ``solver``, with the model the solver's ``optimal`` rows of its problem are optimal in when their
    scopes name one (`experiments.plotting.labels.row_labels`, as the command-line figures: "cpsat (phase
    model)", "rotor (persistent)"; in a grid of several problems each problem's series names its own)."""
    from memsched.experiments.plotting.labels import row_labels

    return row_labels(frame)


def _drawn_rows(frame: Any, x: str, y: str) -> Any:
    """The rows of `frame` that `SweepResult.plot` draws: a schedule found (an objective, when the rows have
    that column) and a number in `y` and in `x`; `y` read as floats (`_numbers_as_float`). A `y` that is
    no number column, or has no value in those rows, is an `InputError` ("nothing to draw")."""
    from pandas.api.types import is_numeric_dtype

    rows = frame[frame["objective"].notna()] if "objective" in frame else frame
    values = _numbers_as_float(rows[y])
    if not is_numeric_dtype(values):
        raise InputError(f"column {y!r} holds no numbers (e.g. {values.dropna().iloc[0]!r}): nothing to draw",
                         field="y")
    rows = rows.assign(**{y: values})
    rows = rows[rows[y].notna() & rows[x].notna()]
    if rows.empty:
        raise InputError(f"no run that found a schedule has a value of {y!r}: nothing to draw", field="y")
    return rows


def _legend_width(labels: Any) -> float:
    """Inches the legend beside the panels needs for `labels` (8 pt text: about 0.065 in a character, the
    line and marker 0.6 in); 0 when there is none."""
    return 0.6 + 0.065 * max((len(str(v)) for v in labels), default=0) if len(labels) else 0.0


def _numbers_as_float(column: Any, *, bools: bool = False) -> Any:
    """`column` (a pandas Series) as floats when every value it holds is a number or missing (all missing
    included: a sweep that found nothing has an object column of None, which a table would show as
    "None" and not as missing); unchanged otherwise (text, or already a numeric dtype). With `bools`, a
    bool (numpy's too) counts as a number (True 1.0, False 0.0: ``grad_check`` with a None among its rows)."""
    from pandas.api.types import is_numeric_dtype

    if is_numeric_dtype(column):
        return column
    present = column.dropna()
    if all(_is_number(v, bools) for v in present):
        return column.astype(float)
    return column


def _is_number(value: Any, bools: bool) -> bool:
    """Whether `value` is a real number; a bool (Python's or numpy's, which is no `numbers.Real`) only
    when `bools`."""
    import numpy as np  # (pandas is loaded: numpy is too)

    if isinstance(value, (bool, np.bool_)):
        return bools
    return isinstance(value, numbers.Real)


def _numbers_read_as_float(frame: Any) -> Any:
    """`frame` with each of its `_NUMBER_COLUMNS` as `_numbers_as_float` reads it (a missing value NaN, never None);
    other columns (text: status, scope, message) as they are."""
    for column in _NUMBER_COLUMNS:
        if column in frame:
            frame[column] = _numbers_as_float(frame[column])
    return frame


def _scaled(column: Any, scale: float) -> Any:
    """`column` divided by `scale`; unchanged when `scale` is 1 (a column of text is drawn as it is)."""
    return column if scale == 1.0 else column.astype(float) / scale


#: sweep columns in the instance's time unit (the objective: makespan or period), in its memory unit, in a
#: fixed time unit; and the labels of the other columns `plot` scales
_PAIRS = ("time", "memory", "independent")  # the comparisons of a run (`RunResult.compared`)
_TIME_COLUMNS = ("objective", "lower_bound", "baseline_objective")
_MEMORY_COLUMNS = ("peak_memory", "budget", "min_budget", "reference_peak", "measured_peak")
_FIXED_UNITS = {"solve_time_s": "solve time (s)", "measured_time_ms": "measured time (ms)"}
_PERCENT = {"overhead": "overhead (%)", "budget_fraction": "budget (% of the reference peak)"}


def _axis(part: Any, column: str, units: tuple[str | None, str | None] | None) -> tuple[float, str]:
    """(divisor, axis label with its unit) of `column` of the rows `part` of one instance, whose (time
    unit, memory unit) are `units` (None: not known). Sizes are scaled to the binary unit that suits
    their largest value, as the timeline figures scale them (`plotting.draw._memory_scale`); an
    instance's unit that is no byte unit ("slots") is kept; fractions are drawn in %."""
    if column in _PERCENT:
        return 0.01, _PERCENT[column]
    if column in _FIXED_UNITS:
        return 1.0, _FIXED_UNITS[column]
    if column in _TIME_COLUMNS:
        names = part["objective_name"].dropna().unique() if "objective_name" in part else []
        name = str(names[0]) if len(names) == 1 else "objective"
        text = name if column == "objective" else column.replace("_", " ")
        unit = units[0] if units is not None else None
        return 1.0, f"{text} ({unit or 'time unit of the instance'})"
    if column in _MEMORY_COLUMNS:
        text = column.replace("_", " ")
        if units is None:
            return 1.0, f"{text} (size unit of the instance)"
        from memsched.experiments.plotting.draw import _memory_scale

        values = part[column].astype(float)
        top = float(values.max()) if values.notna().any() else 1.0
        scale, unit = _memory_scale(units[1] or "bytes", top)
        return scale, f"{text} ({unit})"
    return 1.0, column


_PREDICTED, _MEASURED = "#4f9bd9", "#2f9e44"


def _bar(ax: Any, x: float, value: float | None, colour: str, scale: float = 1.0) -> None:
    """One bar of height `value` / `scale` at `x`; a missing `value` (None, NaN) is no bar but the word
    "missing" (never a bar of height 0, which would read as a measured 0)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        ax.text(x, 0, "missing", ha="center", va="bottom", fontsize=8, color="#868e96")
    else:
        ax.bar([x], [value / scale], color=colour)


def _bars(ax: Any, values: Sequence[float | None], label: str, scale: float = 1.0,
          ticks: Sequence[str] = ("predicted", "measured")) -> None:
    """Pairs of predicted beside measured on one axis (`values`: predicted, measured, predicted, ...; all
    in the unit `label` names, after dividing by `scale`; a missing value is no bar, `_bar`), each bar
    named by its entry of `ticks`."""
    for x, value in enumerate(values):
        _bar(ax, x, value, (_PREDICTED, _MEASURED)[x % 2], scale)
    ax.set_xticks(list(range(len(values))), list(ticks), **({"fontsize": 7} if len(values) > 2 else {}))
    ax.set_xlim(-0.6, len(values) - 0.4)
    ax.set_ylabel(label)
    ax.grid(axis="y", alpha=0.3)


def _bars_two_units(ax: Any, predicted: float | None, unit: str, measured_ms: float | None) -> None:
    """The predicted makespan (in `unit`, e.g. MFLOP) and the measured time (ms) are not one quantity:
    each bar gets its own y axis, labelled with its unit (predicted left, measured right; a missing
    value is no bar, `_bar`)."""
    _bar(ax, 0, predicted, _PREDICTED)
    ax.set_ylabel(f"predicted makespan ({unit})", color=_PREDICTED)
    ax.tick_params(axis="y", labelcolor=_PREDICTED)
    twin = ax.twinx()
    _bar(twin, 1, measured_ms, _MEASURED)
    ax.set_xticks([0, 1], [f"predicted ({unit})", "measured (ms)"])
    ax.set_xlim(-0.6, 1.6)
    twin.set_ylabel("measured time (ms)", color=_MEASURED)
    twin.tick_params(axis="y", labelcolor=_MEASURED)


#: the keys of a run's ``predicted`` and ``measured`` blocks (`models.measure.measured_vs_predicted`, with
#: the solver's ``model_peak_memory``): the flat columns of `RunResult.row`, None in a run that found no schedule;
#: an offloading run also predicts the replay's `_OFFLOAD_PREDICTED` (`models.run`); `_RUN_TEXT_COLUMNS` hold text
_RUN_BLOCKS = {"predicted": ("makespan", "peak_memory", "tracker_peak_memory", "model_peak_memory"),
               "measured": ("time", "time_min", "time_max", "time_runs", "peak_memory", "independent_peak",
                            "independent_method")}
_OFFLOAD_PREDICTED = ("host_peak", "sequential_peak", "tracker_sequential_peak", "sequential_makespan")
_RUN_TEXT_COLUMNS = ("measured_independent_method",)


class RunResult:
    """A schedule executed for real (`memsched.run`): the dictionary ``memsched run --json``
    prints (model, budget, solver, status, predicted {makespan, peak_memory}, measured {time,
    peak_memory}, grad_check, device), readable as attributes and items."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = dict(data)

    def __getitem__(self, key: str) -> Any:
        """Item `key` of the run's dictionary; one the run lacks is an `InputError` naming ``key`` that is also
        a `KeyError` (`_MissingKey`, as `Comparison` raises for a solver it lacks)."""
        try:
            return self.data[key]
        except KeyError:
            raise _MissingKey(f"no item {key!r} in this run (items: {', '.join(map(str, self.data))})"[:300],
                              field="key") from None

    def __contains__(self, key: object) -> bool:
        """``"grad_message" in run``: whether the run has that item (without it, `in` would index 0, 1, ...)."""
        return key in self.data

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__dict__["data"][key]
        except KeyError:
            raise AttributeError(key) from None

    def row(self) -> dict[str, Any]:
        """Flat: predicted_* and measured_* columns beside the scalars (other nested fields left out). A run
        that found no schedule (``predicted`` / ``measured`` None: infeasible, timeout) has the same
        predicted_* and measured_* columns as one that did (`_RUN_BLOCKS`), each None, so that the rows of
        both make one table."""
        out: dict[str, Any] = {}
        for k, v in self.data.items():
            if k in _RUN_BLOCKS and (isinstance(v, dict) or v is None):
                block = v if isinstance(v, dict) else dict.fromkeys(self._block_keys(k))
                out.update({f"{k}_{kk}": vv for kk, vv in block.items()})
            elif not isinstance(v, (dict, list)):
                out[k] = v
        return out

    def _block_keys(self, block: str) -> tuple[str, ...]:
        """The keys a found run of this problem has in its `block` ("predicted" or "measured")."""
        extra = _OFFLOAD_PREDICTED if block == "predicted" and self.data.get("problem") == "offload" else ()
        return _RUN_BLOCKS[block] + extra

    def to_pandas(self) -> Any:
        """This run as a one-row pandas DataFrame of `row` (measured and predicted memory and time); a
        predicted_* or measured_* number that the run lacks is NaN (never an object column of None)."""
        import pandas as pd

        frame = pd.DataFrame([self.row()])
        for column in frame.columns:
            if column.startswith(("predicted_", "measured_")) and column not in _RUN_TEXT_COLUMNS:
                frame[column] = _numbers_as_float(frame[column])
        return frame

    def plot(self, *, title: str | None = None, figsize: tuple[float, float] = (7.0, 3.0), **unknown: Any) -> Any:
        """Predicted (simulator) beside measured: step time and peak memory (`title`, `figsize` as
        in `Result.plot`; another keyword argument is an `InputError`). Each pair is the one the run's
        ``ratio`` compares (`compared`): the measured peak (the tracker on CPU) beside the prediction by the
        same definition (``tracker_peak_memory`` when the run has one, else ``peak_memory``), and, when the
        run has an independent measurement (``independent_peak``, the allocator probe on CPU), that beside
        ``peak_memory`` (the allocator's definition), each bar labelled with its definition; a synchronous
        offloading run (CPU) is compared with its one-op-at-a-time replay (``sequential_makespan``,
        ``sequential_peak``). A predicted makespan not in ms
        (`predicted_time_unit`, e.g. MFLOP for a graph exported with ``--cost flops``) is not drawn on
        the measured ms scale: each time bar gets its own y axis labelled with its unit. A run that found no
        schedule (no prediction: infeasible, timeout) is an `InputError`, as `Result.plot` of one; a value
        missing from a run that has one is drawn as no bar, never as 0."""
        from memsched.experiments.plotting.draw import literal_text  # the model's name drawn as written ("$")

        _check_plot("RunResult.plot", ("title", "figsize"), unknown, title, figsize)
        if not isinstance(self.data.get("predicted"), dict):
            raise InputError(f"{self.data.get('solver')}: no schedule ({self.data.get('status')}) to draw")
        fig = _figure(figsize)
        axes = fig.subplots(1, 2)
        pairs = self.compared()
        unit = self.predicted_time_unit
        if unit == "ms":
            what = pairs["time"][0]
            _bars(axes[0], list(pairs["time"][1:]), "time (ms)",
                  ticks=[f"predicted\n({what})" if what else "predicted", "measured"])
        else:
            _bars_two_units(axes[0], pairs["time"][1], unit, pairs["time"][2])
        memory = [pairs["memory"]] + ([pairs["independent"]] if pairs["independent"][2] is not None else [])
        ticks = [f"{side}\n({name})" for name, _, _ in memory for side in ("predicted", "measured")] \
            if len(memory) > 1 or memory[0][0] else ["predicted", "measured"]
        _bars(axes[1], [v for _, predicted, measured in memory for v in (predicted, measured)], "peak memory (MiB)",
              2**20, ticks)
        fig.suptitle(literal_text(title or f"{self.data.get('model')} — {self.data.get('solver')} on "
                                           f"{self.data.get('device')}"), fontsize=10)
        return fig

    def compared(self) -> dict[str, tuple[str, Any, Any]]:
        """The (what, predicted, measured) pairs the run's ``ratio`` divides: ``time`` (measured ms
        against the predicted makespan, in `predicted_time_unit`), ``memory`` (the measuring method's
        peak against the prediction by its definition) and ``independent`` (the allocator probe's peak
        against the allocator's prediction; measured None when the run made none), as the run wrote them
        (``compared``, `models.measure.StepResult.comparisons`, the one rule of which prediction each
        measurement meets). `what` names the definition ("" for a plain pair). A run without that block
        (a hand-made or older dict) gives the plain pairs: ``predicted.makespan`` / ``peak_memory``
        beside ``measured.time`` / ``peak_memory`` / ``independent_peak``."""
        written = self.data.get("compared")
        if isinstance(written, dict) and all(isinstance(written.get(k), dict) for k in _PAIRS):
            return {k: (str(written[k].get("what") or ""), written[k].get("predicted"), written[k].get("measured"))
                    for k in _PAIRS}
        pred, meas = self.data.get("predicted") or {}, self.data.get("measured") or {}
        return {"time": ("", pred.get("makespan"), meas.get("time")),
                "memory": ("", pred.get("peak_memory"), meas.get("peak_memory")),
                "independent": ("", pred.get("peak_memory"), meas.get("independent_peak"))}

    @property
    def predicted_time_unit(self) -> str:
        """The unit of the predicted makespan: the instance's time unit (``data["units"]["time"]``;
        "ms" when the run does not record one, as for profiled chains). The measured time is in ms."""
        units = self.data.get("units")
        unit = units.get("time") if isinstance(units, dict) else None
        return str(unit) if unit else "ms"

    def _repr_html_(self) -> str:
        missing = [k for k in _RUN_BLOCKS if k in self.data and self.data[k] is None]
        pairs: dict[str, str] = {}
        for k, v in self.row().items():
            block = next((b for b in missing if k.startswith(f"{b}_")), None)
            if block is not None:  # a block the run lacks is one line "–", not one line of None per key
                pairs.setdefault(block, "–")
            else:
                pairs[k] = _num(v) if isinstance(v, float) else str(v)
        out = _table(list(pairs.items()))
        if self.data.get("predicted") and self.data.get("measured"):
            out += _figure_or_note(self.plot)
        return f"<div>{out}</div>"

    def __repr__(self) -> str:
        return f"<RunResult {self.data.get('model')} {self.data.get('solver')}: {self.data.get('status')}>"


__all__ = ["Result", "Comparison", "SweepResult", "RunResult", "ROW_COLUMNS", "check_figsize", "check_title",
           "no_options"]
