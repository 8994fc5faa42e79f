"""Is a sweep's table what the code at HEAD computes? Re-solve its rows from the stored instances.

`verify_sweep` rebuilds the grid of a sweep file from ``<output>/instances/`` (a profiled
``model`` instance must be stored there: verifying never profiles), re-runs the solver of every
stored row in this process (never executing a schedule, never writing the journal or the
table), and compares the status, the objective and the ``min_budget`` with the stored row
(`differing`).

Verdicts (`Check.verdict`):

- ``same``: equal status and objective (relative tolerance `REL_TOL`: replays are
  deterministic, so only float noise is allowed), and equal ``min_budget`` where the stored row has
  one (exactly for integers: sizes are counted, never measured; `REL_TOL` otherwise; a stored one
  HEAD no longer gives differs);
- ``differs``: the table is stale or a solver changed: the row no longer is what HEAD computes;
  so is a stored ``error`` row (a worker that died: no answer) that HEAD answers, whatever the
  time limit (an error is no answer, never ``time-limited``);
- ``time-limited``: the two runs differ, but one of them stopped at its time limit (an exact
  solver's "feasible" / "timeout" depends on the machine's speed), so they are not comparable. A
  run stopped at its limit when it says ``timeout``, or took at least `LIMIT_SHARE` of its
  ``time_limit``, or is an exact solver's ``feasible`` answer with its ``lower_bound`` below its
  objective (no proof yet) that took at least `UNPROVEN_SHARE` of the limit (`_limited`);
- ``missing``: a cell of the grid without a stored row (the sweep is unfinished).

The stored rows are the journal's (``<name>.jsonl``) when there is one, else the table's
(``<name>.csv``): journals are not committed, so a fresh clone verifies the committed table.
They are the rows a run resumes (`rekeyed`, strict; a damaged table row left out, `stored_rows`):
``--list``, ``--verify``, ``--update`` and the run agree on which cells are done.
- ``error``: the solver raised now.

A figure drawn from a table with a ``differs`` row is stale. `update_stale` (``--verify
--update``) journals the recomputed row of every ``differs`` row (and of a ``time-limited`` row
that HEAD now beats, or whose stored ``infeasible`` HEAD no longer proves, and of every stored
``error`` row, whatever HEAD answers) in place of the stored one and
rewrites the table (rows judged ``same`` are what HEAD computes already), so only the stale
cells are solved again; then redraw the figure (``memsched figures``). Sweeps that execute
schedules are refused there: their rows hold measurements, rerun them with ``--fresh``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError, first_line

from .cell import run_task
from .config import SweepConfig, load_config
from .grid import Task, build_tasks
from .instance_store import InstanceStore
from .lock import SweepLock
from .store import (
    NUMERIC_COLUMNS,
    UNSUPPORTED,
    Journal,
    journal_path,
    plain_row,
    read_journal,
    read_table_csv,
    table_path,
    valid_row,
    write_table,
)

#: Relative tolerance on objectives (time units): replays of one schedule agree to float noise.
REL_TOL = 1e-9
#: A run counts as stopped by its time limit when it took at least this share of the limit (or its status
#: says so, whatever time it took: `_limited`).
LIMIT_SHARE = 0.9
#: An exact solver's unproven answer counts as stopped by its limit from this share of it on: the exact layer's
#: model runs after the fast solvers' first half, so one the deadline stopped took at least that (a loaded machine's
#: run stopped at a 1 s limit was timed at 0.898 s); one that took less ended unproven for a reason that does not
#: depend on the machine (the model's optimum, proven for its scope, lost to a fast solver's schedule; the CP-SAT
#: objective's rounding), and another run gives the same answer.
UNPROVEN_SHARE = 0.5
VERDICTS = ("same", "differs", "time-limited", "missing", "error")


@dataclass(frozen=True)
class Check:
    """The verdict on one cell: the stored and the recomputed status, objective and ``min_budget``
    (the smallest budget the solver needs, in the instance's memory unit), and the columns among
    those that differ (`differing`)."""

    instance: str
    budget_spec: str
    solver_label: str
    verdict: str
    stored_status: str | None = None
    new_status: str | None = None
    stored_objective: float | None = None
    new_objective: float | None = None
    message: str = ""
    key: str = ""
    new_row: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    #: whether the stored and recomputed rows word their ``scope`` differently (a ``same`` row whose
    #: solver now names its model or discretisation otherwise: `update_stale` refreshes it)
    scope_changed: bool = False
    stored_min_budget: float | None = None
    new_min_budget: float | None = None
    #: the compared columns whose stored and recomputed values differ (`differing`), in that order
    columns: tuple[str, ...] = ()

    def line(self) -> str:
        """The line ``--verify`` prints for a check that is not ``same``: verdict, cell, stored and
        recomputed status and objective, then each other compared column that differs, by name
        (``min_budget stored 21 now 22``: alone, the status and objective would read alike)."""
        text = (f"{self.verdict:<12} {self.instance:<28} {self.budget_spec:>10} {self.solver_label:<24} "
                f"stored {self.stored_status} {self.stored_objective}  now {self.new_status} {self.new_objective}")
        if "min_budget" in self.columns:
            text += f"  min_budget stored {_as_written(self.stored_min_budget)} now {_as_written(self.new_min_budget)}"
        return text


def _same_objective(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-12)


def _absent(value: Any) -> bool:
    """Whether a number cell holds nothing: None, or NaN (as pandas reads an empty cell)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _as_written(value: Any) -> Any:
    """A whole-number budget as an int (a CSV column with empty cells reads back as floats: 999.0)."""
    return int(value) if _integral(value) else value


def _integral(value: Any) -> bool:
    """Whether `value` is a whole number (an int, or a float such as 21.0 that a CSV column with
    empty cells reads an integer as)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _same_min_budget(stored: Any, new: Any) -> bool:
    """Whether two ``min_budget`` cells (the instance's memory unit) agree: a stored one that HEAD no
    longer gives differs (the table claims a least budget the solver no longer stands behind); a
    stored row without one is not judged on it (written before its solver gave one); where both
    have one, exactly for whole numbers (sizes are counted, not measured), else within `REL_TOL` as
    objectives are."""
    if _absent(stored):
        return True
    if _absent(new):
        return False
    if _integral(stored) and _integral(new):
        return int(stored) == int(new)
    return _same_objective(stored, new)


#: statuses whose rows hold no objective to compare
_NO_OBJECTIVE = (UNSUPPORTED, "infeasible", "error")


def differing(stored: dict[str, Any], new: dict[str, Any]) -> tuple[str, ...]:
    """The compared columns whose values differ between the stored row and the recomputed one, in
    the order ``status``, ``objective``, ``min_budget``: the objective where either status holds one
    (`REL_TOL`), ``min_budget`` where the stored row has one (`_same_min_budget`)."""
    out = []
    if stored.get("status") != new.get("status"):
        out.append("status")
    if not (stored.get("status") in _NO_OBJECTIVE and new.get("status") in _NO_OBJECTIVE) \
            and not _same_objective(stored.get("objective"), new.get("objective")):
        out.append("objective")
    if not _same_min_budget(stored.get("min_budget"), new.get("min_budget")):
        out.append("min_budget")
    return tuple(out)


def _limited(row: dict[str, Any]) -> bool:
    """Whether `row`'s run stopped at its time limit (its answer depends on the machine's speed): it says
    ``timeout``, or it took at least `LIMIT_SHARE` of its ``time_limit`` (s), or it is an exact solver's
    unproven answer (`_unproven`) that took at least `UNPROVEN_SHARE` of it."""
    if row.get("status") == "timeout":
        return True
    limit, took = row.get("time_limit"), row.get("solve_time_s")
    if not limit or took is None:
        return False
    share = float(took) / float(limit)
    return share >= LIMIT_SHARE or (share >= UNPROVEN_SHARE and _unproven(row))


def _unproven(row: dict[str, Any]) -> bool:
    """Whether `row` is a ``feasible`` answer of a solver that proves optimality (`_exact_solver`) with
    a positive gap: its ``lower_bound`` below its ``objective`` (the same unit). Such an answer is the
    time limit's when the run took most of it (`_limited`); it can also be a deterministic one, the model's
    optimum for its scope lost to a fast solver's schedule, which a quick run shows."""
    objective, bound = row.get("objective"), row.get("lower_bound")
    if row.get("status") != "feasible" or _absent(objective) or _absent(bound):
        return False
    try:
        below = float(bound) < float(objective) and not math.isclose(float(bound), float(objective),
                                                                     rel_tol=REL_TOL, abs_tol=1e-12)
    except (TypeError, ValueError):  # text in a number cell: a damaged row, not a proof of anything
        return False
    return below and _exact_solver(row.get("problem"), row.get("solver"))


def _exact_solver(problem: Any, solver: Any) -> bool:
    """Whether `solver` (a row's solver name) of `problem` (any problem when the row names none) is an
    exact solver (``exact_layer``: it proves optimality, or stops at its time limit); False for a
    name no problem here knows (an optional dependency missing, a solver since removed)."""
    from memsched.solvers.registry import PROBLEMS, get_solver

    problems = [str(problem)] if isinstance(problem, str) and problem else list(PROBLEMS)
    for name in problems:
        try:
            if getattr(get_solver(name, str(solver)), "exact_layer", False):
                return True
        except (InputError, ImportError):
            continue
    return False


def judge(stored: dict[str, Any], new: dict[str, Any]) -> str:
    """The verdict on a cell from its stored row and its recomputed row (see the module docstring)."""
    if new.get("status") == "error" and stored.get("status") != "error":
        return "error"
    if stored.get("status") == "error" and new.get("status") != "error":
        return "differs"  # a stored error is no answer: nothing a time limit could explain
    if stored.get("status") == "error" or not differing(stored, new):  # (two errors: no answer either way)
        return "same"
    if _limited(stored) or _limited(new):
        return "time-limited"
    return "differs"


def _check_stored_models(config: SweepConfig, store: InstanceStore) -> None:
    """Verifying reads profiled instances, never builds them: each ``model`` entry must be stored."""
    for spec in config.instances:
        if spec.kind == "model" and store.built(spec, threads=config.measure["threads"]) is None:
            raise InputError(f"instance {spec.where} ({spec.params.get('model')}) is not stored under "
                             f"{store.folder}; run the sweep first", path=str(config.path), field=spec.where)


def verify_sweep(config: SweepConfig | str | Path, *, output: str | Path | None = None,
                 solvers: Iterable[str] | None = None, progress: bool = True) -> list[Check]:
    """Re-solve every stored row of a sweep (or only those of the solver labels `solvers`)
    from its stored instances and judge each against the stored row; cells of the grid with no
    row are ``missing``. Nothing is written."""
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    out_dir = config.output_dir(output)
    store = InstanceStore(out_dir / "instances", readonly=True)
    _check_stored_models(config, store)
    tasks = build_tasks(config, store=store)
    wanted = set(solvers) if solvers is not None else None
    if wanted is not None:
        unknown = wanted - {t.solver.label for t in tasks}
        if unknown:
            raise InputError(f"no solver labelled {sorted(unknown)[0]!r} in the grid", path=str(config.path),
                             field="--solvers")
        tasks = [t for t in tasks if t.solver.label in wanted]
    done = rekeyed(stored_rows(out_dir, config.name), tasks, strict=True)  # the rows a run resumes
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc=f"verify {config.name}", unit="row", file=sys.stderr)
    checks = []
    for task in tasks:
        checks.append(_check(task, done.get(task.key)))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return checks


def _check(task: Task, stored: dict[str, Any] | None) -> Check:
    """Re-run one cell (solver only) and judge it against its stored row."""
    where = dict(instance=task.loaded.label, budget_spec=task.budget_spec, solver_label=task.solver.label,
                 key=task.key)
    if stored is None:
        return Check(**where, verdict="missing")
    new = run_task(Task(task.position, task.key, task.sweep, task.loaded, task.budget_spec, task.budget,
                        task.solver, task.repeat, False, task.options, None))
    return Check(**where, verdict=judge(stored, new), stored_status=stored.get("status"),
                 new_status=new.get("status"), stored_objective=stored.get("objective"),
                 new_objective=new.get("objective"), message=str(new.get("message") or "")[:200], new_row=new,
                 scope_changed=_text(stored.get("scope")) != _text(new.get("scope")),
                 stored_min_budget=None if _absent(stored.get("min_budget")) else stored.get("min_budget"),
                 new_min_budget=new.get("min_budget"), columns=differing(stored, new))


def _text(value: Any) -> str:
    """A text cell as written: "" for a missing one (None, or NaN as pandas reads an empty cell)."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def summary(checks: list[Check]) -> dict[str, int]:
    """Count of checks per verdict, in `VERDICTS` order."""
    return {v: sum(c.verdict == v for c in checks) for v in VERDICTS}


def _better(new: Any, stored: Any) -> bool:
    """Whether objective `new` is strictly better (lower) than `stored`; a schedule beats none."""
    if new is None:
        return False
    return stored is None or float(new) < float(stored) * (1 - REL_TOL)


def _settled(stored: str | None, new: str | None) -> bool:
    """Whether a stored timeout (no answer) is now settled: a schedule or a proof of infeasibility."""
    return stored == "timeout" and new not in (None, "timeout", "error")


def _unbacked(stored: str | None, new: str | None) -> bool:
    """Whether a stored proof of infeasibility is one HEAD does not make again within the limit
    (a timeout now: e.g. a model whose rounded sizes were infeasible and that HEAD solves again at
    exact sizes): the table must not keep a claim the code no longer backs."""
    return stored == "infeasible" and new == "timeout"


def update_stale(config: SweepConfig | str | Path, checks: list[Check], *, output: str | Path | None = None) -> int:
    """Journal the recomputed row of every ``differs`` check, and of every ``time-limited`` one
    whose recomputed objective is better or that settles a stored timeout (HEAD found more than
    the stored run) or that no longer backs a stored ``infeasible`` (`_unbacked`), and (a sweep that
    executes nothing) of every ``same`` one whose ``scope`` HEAD words otherwise or that is a stored
    ``error`` (an error now too: its message is HEAD's; a stored error HEAD answers is ``differs``), in place of the
    stored row (a later row of a key wins); rewrite the table in grid order; returns the number
    of rows replaced. Rows stored under an older key of the same cell (`rekeyed`, strict: those a
    run resumes) take the current key. Refused (`InputError`) for sweeps that execute schedules."""
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    stale = [c for c in checks if c.new_row is not None and (c.verdict == "differs" or (
        c.verdict == "time-limited" and (_better(c.new_objective, c.stored_objective)
                                         or _settled(c.stored_status, c.new_status)
                                         or _unbacked(c.stored_status, c.new_status))))]
    executes = config.execute or any(spec.execute for spec in config.instances)
    if stale and executes:
        raise InputError("rows of a sweep that executes schedules hold measurements: rerun it with --fresh",
                         path=str(config.path), field="--update")
    if not executes:  # a `same` row whose scope HEAD words otherwise, or an error row: refreshed (same answer)
        stale += [c for c in checks if c.new_row is not None and c.verdict == "same"
                  and (c.scope_changed or c.stored_status == "error")]
    out_dir = config.output_dir(output)
    jpath = journal_path(out_dir, config.name)
    with SweepLock(out_dir, config.name):
        tasks = build_tasks(config, store=InstanceStore(out_dir / "instances", readonly=True))
        stored = stored_rows(out_dir, config.name)
        rows = rekeyed(stored, tasks, strict=True)
        if jpath.exists():
            with Journal(jpath) as journal:
                for key in rows.keys() - stored.keys():  # re-keyed rows, so that a resumed sweep finds them
                    journal.append(rows[key])
                for c in stale:
                    assert c.new_row is not None
                    journal.append(c.new_row)
        rows.update({c.key: c.new_row for c in stale if c.new_row is not None})
        write_table([rows[t.key] for t in tasks if t.key in rows], out_dir, config.name)
    return len(stale)


def _identity(sweep: Any, instance: Any, digest: Any, problem: Any, budget_spec: Any, solver: Any, label: Any,
              slots: Any, time_limit: Any, options: Any, repeat: Any, execute: Any) -> tuple[Any, ...]:
    """A cell's parameters as its row shows them, all but its instance's ``source`` (numbers as
    floats: a CSV reads them back so): the sweep, the instance's label and content hash, the
    problem it is read as, the budget, the solver entry (its solver's ``name`` and its ``label``:
    one label may be given to another solver, whose rows are no rows of this cell), slots, time
    limit, options, repeat and execute. `problem`: None for a row that does not say (it then
    matches a task of any problem, `rekeyed`); it is the third element (`_ANY_PROBLEM`)."""
    def num(v: Any) -> Any:
        return None if v is None else float(v)

    return (str(sweep), str(instance), None if problem is None else str(problem), str(digest), str(budget_spec),
            str(solver), str(label), num(slots), num(time_limit), str(options), int(repeat or 0), bool(execute))


#: where `_identity` holds the problem
_ANY_PROBLEM = 2


def _row_identity(row: dict[str, Any]) -> tuple[Any, ...]:
    """`_identity` of a stored row, from its columns."""
    return _identity(row.get("sweep"), row.get("instance"), row.get("instance_hash"), row.get("problem"),
                     row.get("budget_spec"), row.get("solver"), row.get("solver_label"), row.get("slots"),
                     row.get("time_limit"), row.get("options"), row.get("repeat"), row.get("execute"))


def _task_identity(task: Task) -> tuple[Any, ...]:
    """`_identity` of a task's cell, as its row would show it."""
    from .grid import canonical

    return _identity(task.sweep, task.loaded.label, task.loaded.digest, task.loaded.problem, task.budget_spec,
                     task.solver.name, task.solver.label, task.solver.slots, task.solver.time_limit,
                     canonical(task.solver_options), task.repeat, task.execute)


def rekeyed(rows: dict[str, dict[str, Any]], tasks: list[Task], taken: dict[str, str] | None = None, *,
            strict: bool = False) -> dict[str, dict[str, Any]]:
    """`rows` by the keys of `tasks`: a stored row whose key is not the task's but whose parameters
    are (`_identity`: same sweep, instance label and content hash, budget, solver entry (solver
    name and label), slots, time limit, options, repeat, execute: only the ``source`` differs, as
    in tables written before sources were relative to the repository, or keyed with the absolute
    path of a file outside it, `grid.key_source`, or a generator's call given a default argument
    that leaves its instance's bytes as they were) takes the task's key and source. Rows of no task
    keep their key. `taken`, when given, receives each task key given to a stored row, mapped to
    that row's stored key. Where several rows qualify, the last one (as a journal's later row of a
    key wins), one that names the task's problem before one that names none.

    A row that names its ``problem`` is only taken for a task of that problem (a chain file's rows
    never stand for the same file read as an offload instance).

    `strict` (a run resuming, which then solves nothing for the cell, and so ``--list``,
    ``--verify`` and ``--update``, which judge the rows a run resumes): a row is taken only when
    it is the same cell (`_same_cell`): its key is the task's key under the row's own source
    (`grid.keys_under_source`: nothing else differs, the parameters no column shows included), or
    its key is of an older form (not the task's under its source, as the keys of rows stored
    with an absolute path as their source could be) and the task's key holds no entry overrides
    nor measurement settings, which no column would show; a row of the task's own source under
    another key differs in something the parameters compared here do not show (a host link,
    measurement settings)."""
    by_identity: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows.values():
        by_identity.setdefault(_row_identity(row), []).append(row)
    out = dict(rows)
    for t in tasks:
        if t.key in out:
            continue
        ident = _task_identity(t)
        anyp = ident[:_ANY_PROBLEM] + (None,) + ident[_ANY_PROBLEM + 1:]
        found = [*reversed(by_identity.get(ident, [])), *(reversed(by_identity.get(anyp, [])) if anyp != ident else [])]
        row = next((r for r in found if not strict or _same_cell(r, t)), None)
        if row is None:
            continue
        out[t.key] = {**row, "key": t.key, "source": t.loaded.source}
        if taken is not None:
            taken[t.key] = str(row.get("key"))
    return out


def _same_cell(row: dict[str, Any], task: Task) -> bool:
    """`rekeyed`'s strict test of a stored `row` whose parameters (`_identity`) are `task`'s: whether it
    is the same cell, differing from it in its instance's ``source`` alone. So when the row's key
    is one the task's cell is given under the row's source (`grid.keys_under_source`); else only a
    row whose source is an absolute path, whose key may be of an older form (keyed by an absolute
    path before sources were relative to the repository), is taken, and only for a task whose key
    holds nothing its row's columns do not show (entry overrides, an executed cell's measurement
    settings). A generator's or profiler's call, or a path relative to the repository, was always
    hashed as it is: a row under such a source whose key is none of those is another cell (another
    solver, host link, ...), never taken."""
    from .grid import keys_under_source

    source = row.get("source")
    if source is None:
        return False
    if row.get("key") in keys_under_source(task, str(source)):
        return True
    return (source != task.loaded.source and Path(str(source)).is_absolute() and not task.loaded.overrides
            and not (task.execute and task.measure))


def stored_rows(out_dir: Path, name: str) -> dict[str, dict[str, Any]]:
    """The sweep's rows by key: the journal's when it exists, else the table's (empty cells as None),
    as a run resumes them: a damaged row of the table (fewer or more fields than the header,
    `table_rows`; text or a non-finite number in a number column, a fractional repeat, no key: not
    `store.valid_row`) is left out, with a
    warning on stderr, so that its cell counts as not done (the run solves it again, as ``--list``
    and ``--verify`` say). A table that cannot be read as a sweep table (empty, no ``key`` column,
    not CSV) is an `InputError` naming it (exit 2), as for a run resuming it."""
    jpath = journal_path(out_dir, name)
    if jpath.exists():
        return read_journal(jpath)
    csv = table_path(out_dir, name)
    if not csv.exists():
        return {}
    good, damaged = resumable_rows(csv, "cannot read the sweep's table")
    if damaged:
        print(f"warning: {csv}: {damaged} damaged rows ignored (fewer or more fields than the header, text or a "
              f"non-finite number in a number column, a fractional repeat, or no key): their cells are not done",
              file=sys.stderr)
    return {r["key"]: r for r in good}


def resumable_rows(csv: Path, what: str) -> tuple[list[dict[str, Any]], int]:
    """The rows of the sweep table `csv` a run resumes (`table_rows`, numbers as Python numbers, only
    `store.valid_row` ones) and how many damaged rows were left out (those too, of `table_rows`, with
    fewer or more fields than the header); a file that cannot be read as a sweep table is an
    `InputError` naming it, `what` its message's start."""
    try:
        rows, torn = table_rows(csv)
    except (OSError, ValueError) as err:
        raise InputError(f"{what} ({first_line(err)}); rerun the sweep with --fresh to run every cell",
                         path=str(csv)) from None
    found = [plain_row(r) for r in rows]
    good = [r for r in found if valid_row(r)]
    return good, len(found) - len(good) + torn


def _number(value: Any) -> Any:
    """One cell of a number column that pandas read as text (another cell of the column holds
    text): the number it spells (an int when it is an integer literal, as pandas reads a clean
    column), else the text as it is, so that `store.valid_row` refuses that row alone."""
    if not isinstance(value, str) or "_" in value:
        return value
    for parse in (int, float):
        try:
            return parse(value.strip())
        except ValueError:
            pass
    return value


def well_formed_records(csv: Path) -> tuple[str, int]:
    """The text of the sweep table `csv` without its records whose number of fields is not the
    header's, and how many such records were left out. A record is counted by the `csv` module (a
    quoted field may span lines); blank lines are dropped (pandas skips them). Pandas would fill a
    short record with NaN (an ``objective`` cut from ``55.84`` to ``55`` read as a finished row)
    and stop at a long one; each is a damaged row of its own. `ValueError` for a file that is not
    UTF-8 text or not CSV."""
    import csv as csv_module

    with open(csv, newline="", encoding="utf-8-sig") as f:  # (pandas drops a BOM too)
        lines = f.readlines()
    reader = csv_module.reader(lines)
    kept: list[str] = []
    torn = 0
    width: int | None = None  # the header's number of fields
    start = 0  # the first line of the next record
    try:
        for record in reader:
            text = "".join(lines[start:reader.line_num])
            start = reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if width is None:
                width = len(record)
            elif len(record) != width:
                torn += 1
                continue
            kept.append(text if text.endswith(("\n", "\r")) else text + "\n")
    except csv_module.Error as err:
        raise ValueError(f"not a readable CSV ({err})") from None
    return "".join(kept), torn


def table_rows(csv: Path) -> tuple[list[dict[str, Any]], int]:
    """The rows of a sweep table, in its order (`store.read_table_csv`: empty cells as None; text cells as
    written, even all digits or ``NA``; ``nan`` in a number column is text, a damaged row for `valid_row`),
    and how many records were left out for having fewer or more fields than the header
    (`well_formed_records`: damaged rows, whose cells are not done).
    Number columns are read cell by cell (`_number`): one damaged cell (``abc`` as an objective)
    leaves the other rows' numbers numbers. `ValueError` for a file that is no sweep table (empty,
    no ``key`` column, not CSV; pandas' errors are ValueErrors)."""
    import io

    kept, torn = well_formed_records(csv)
    frame = read_table_csv(io.StringIO(kept))  # text as written ("NA", "0123"); "nan" in a number column is text
    if "key" not in frame.columns:
        raise ValueError("it has no 'key' column")
    frame = frame.astype(object).where(frame.notna(), None)
    rows = list(frame.to_dict("records"))
    numbers = [c for c in NUMERIC_COLUMNS if c in frame.columns]
    for row in rows:
        for col in numbers:
            row[col] = _number(row[col])
    return rows, torn


def table_stale(out_dir: Path, name: str, tasks: list[Task]) -> str | None:
    """Why the table ``<name>.csv`` is not the journal's rows of the grid `tasks` in grid order
    (the table a sweep writes when it ends), or None when it is. A table can fall behind its
    journal: a sweep of an edited instance file writes that file's rows, and once the file is
    reverted the journal holds the old rows again (the cells are done) while the table still holds
    the edited file's. Rows are compared by key, status and objective (not by order). No journal (a fresh clone
    of a committed table): None, the table is the record."""
    jpath = journal_path(out_dir, name)
    if not jpath.exists():
        return None
    journal = rekeyed(read_journal(jpath), tasks, strict=True)
    want = [t.key for t in tasks if t.key in journal]
    csv = table_path(out_dir, name)
    if not csv.exists():
        return f"there is no table {csv} for the {len(want)} journaled rows" if want else None
    try:
        rows, torn = table_rows(csv)
    except (OSError, ValueError) as err:  # an empty or torn file, no key column: the run rewrites it
        return f"the table {csv} cannot be read ({first_line(err)}): rerun the sweep to rewrite it from the journal"
    found = [plain_row(r) for r in rows]
    good = [r for r in found if valid_row(r)]
    table = rekeyed({r["key"]: r for r in good}, tasks, strict=True)
    have = {t.key for t in tasks if t.key in table}
    missing = sum(k not in have for k in want)
    other = len(good) - sum(k in have for k in want)  # rows of other cells (or a cell's row twice)
    differ = sum(k in have and (journal[k].get("status") != table[k].get("status")
                                or not _same_objective(journal[k].get("objective"), table[k].get("objective")))
                 for k in want)
    why = [f"{n} {what}" for n, what in ((missing, "journaled rows missing"), (differ, "rows not the journal's"),
                                         (other, "rows of other cells"),
                                         (len(found) - len(good) + torn, "damaged rows"))
           if n > 0]
    if not why:
        return None
    return (f"the table {csv} is stale ({', '.join(why)}): "
            f"rerun the sweep to rewrite it from the journal")
