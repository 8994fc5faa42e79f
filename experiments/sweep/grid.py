"""The grid of a sweep: instances x budgets x solvers x repeats, each cell a `Task` with a stable key."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError, article
from memsched.solvers.units import format_size, memory_unit, parse_budget, unit_bytes

from .config import SHARED_TABLE_SOLVERS, SolverSpec, SweepConfig, size_error
from .instance_store import InstanceStore
from .instances import LoadedInstance, load_instance_spec


@dataclass
class Task:
    """One cell of the grid (picklable: it travels to worker processes)."""

    position: int
    key: str
    sweep: str
    loaded: LoadedInstance
    budget_spec: str
    budget: int
    solver: SolverSpec
    repeat: int
    execute: bool
    options: dict[str, Any] | None = None   # the solver's options for this cell (None: the entry's)
    measure: dict[str, int] | None = None   # executed cells: time_repeats, warmup, threads (`config.measure`)

    @property
    def solver_options(self) -> dict[str, Any]:
        """The options passed to the solver: the task's own, else the solver spec's."""
        return self.solver.options if self.options is None else self.options

def canonical(obj: Any) -> str:
    """Canonical JSON of `obj` (sorted keys, no spaces), used for keys and hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def key_source(source: str) -> str | None:
    """The part of an instance's ``source`` that enters its row key: a path relative to the
    repository, a generator's or profiler's call as it is; None (left out of the key) for the
    absolute path of a file outside the repository (`instances.file_source`), so that moving a
    folder holding sweep file, instance file and output keeps the keys (the content hash in the
    key names the file's bytes)."""
    return None if Path(source).is_absolute() else source


def row_key(sweep: str, loaded: LoadedInstance, budget_spec: str, solver: SolverSpec, repeat: int,
            execute: bool, options: dict[str, Any] | None = None, measure: dict[str, int] | None = None, *,
            source: str | None = None, sourceless: bool = False) -> str:
    """A stable id of one cell: changes exactly when a parameter of the run changes, the content
    hash of its instance file included (two profiles of one network never share a key), and what
    the ``[[instances]]`` entry changes in that file (`instances.instance_overrides`: a `problem`
    other than the file's own, an offloading host link from its ``bandwidth``), so that a resumed
    sweep never takes the rows of another problem or link for this cell's. The overrides (like the
    measurement settings of executed cells) enter the hashed identity only when there are any:
    entries without them keep the keys that committed tables were written with. The instance's
    source enters as `key_source` says (not where a file outside the repository lies); `source`:
    hash this source as it is instead (the key a row stored under that source was given before,
    for `verify.rekeyed`); `sourceless`: leave the source out whatever it is (the key of a cell
    whose file lay outside the repository, `key_source`)."""
    ident: dict[str, Any] = {"sweep": sweep, "instance": loaded.label,
                             "source": key_source(loaded.source) if source is None else source,
                             "hash": loaded.digest, "budget": budget_spec,
                             "solver": solver.name, "label": solver.label, "slots": solver.slots,
                             "time_limit": solver.time_limit, "options": solver.options if options is None else options,
                             "repeat": repeat, "execute": execute}
    if ident["source"] is None or sourceless:
        del ident["source"]
    if execute and measure:
        ident["measure"] = measure
    if loaded.overrides:
        ident["overrides"] = loaded.overrides
    return hashlib.sha1(canonical(ident).encode()).hexdigest()[:16]


def task_key(task: Task, source: str | None = None, *, sourceless: bool = False) -> str:
    """`row_key` of `task`'s cell (`source`, `sourceless`: as for `row_key`)."""
    return row_key(task.sweep, task.loaded, task.budget_spec, task.solver, task.repeat, task.execute, task.options,
                   task.measure, source=source, sourceless=sourceless)


def keys_under_source(task: Task, source: str) -> set[str]:
    """The keys `task`'s cell is given when its instance's ``source`` is `source` (a stored row's,
    another than the task's) and every other parameter is the task's: `source` hashed as it is (as
    keys were before sources were relative to the repository) and as `key_source` takes it (left
    out for an absolute path: a file outside the repository). A stored row under one of these
    keys differs from the task in its source alone: it is the same cell (`verify.rekeyed`)."""
    keys = {task_key(task, source)}
    if key_source(source) is None:
        keys.add(task_key(task, sourceless=True))
    return keys


def build_tasks(config: SweepConfig, *, notes: list[str] | None = None,
                loaded: list[LoadedInstance] | None = None, store: InstanceStore | None = None) -> list[Task]:
    """The grid in its fixed order (instances x budgets x solvers x repeats), skipping solvers
    that do not apply (another problem, too long an instance) or are not importable here;
    each skip is described once in `notes`. `store`: where instances are kept as files
    (`instance_store`). An instance (read from a file, profiled or generated) that is too large for
    a solver that runs on it is an `InputError` (`check_file_sizes`), so before any cell runs, and so is a grid with no
    cell (every solver skipped on every instance: `check_not_empty`)."""
    notes = notes if notes is not None else []
    if loaded is None:
        loaded = [load_instance_spec(spec, config, store) for spec in config.instances]
    importable: dict[tuple[str, str], bool] = {}

    def available(problem: str, name: str) -> bool:
        """Whether the solver's module imports here (only the solvers the sweep names are imported)."""
        if (problem, name) not in importable:
            try:
                registry.get_problem(problem).solver(name)
                importable[problem, name] = True
            except InputError:
                importable[problem, name] = False
        return importable[problem, name]

    first: dict[str, str] = {}  # each label's first instance entry (``instances[i]``)
    for li in loaded:
        if li.label in first:
            raise InputError(f"two instances are labelled {li.label!r} (this one and {first[li.label]}); "
                             f"give them distinct labels", path=str(config.path), field=f"{li.spec.where}.label")
        first[li.label] = li.spec.where
    tasks: list[Task] = []
    skips: list[str] = []  # the skip notes of this grid, in order

    def note(text: str) -> None:
        if text not in skips:
            skips.append(text)
            notes.append(text)

    for li in loaded:
        specs = li.spec.budgets or tuple(config.budgets)
        bkey = f"{li.spec.where}.budgets" if li.spec.budgets else "budgets"
        budgets = []
        for j, b in enumerate(specs):
            spec_text = str(b)
            try:
                value = parse_budget(b, li.reference_peak, field=f"{bkey}[{j}]", per_unit=unit_bytes(li.instance))
            except InputError as err:
                raise InputError(str(err), path=str(config.path)) from None
            if value <= 0:
                raise InputError(f"budget {spec_text!r} is zero for instance {li.label}", path=str(config.path),
                                 field=f"{bkey}[{j}]")
            _check_repeat(config, li, budgets, spec_text, value, f"{bkey}[{j}]")
            budgets.append((spec_text, value))
        execute = li.spec.execute if li.spec.execute is not None else config.execute
        # budgets below the reference peak, read from one table of the largest (shared_table)
        below = [v for _, v in budgets if li.reference_peak is None or v < li.reference_peak]
        table_budget = max(below) if len(below) >= 2 else None
        solvers = [s for s in config.solvers if _runs_on(li, s, available, note)]
        check_file_sizes(config, li, solvers)
        for spec_text, value in budgets:
            for s in solvers:
                options = None
                if (s.shared_table and table_budget is not None and value <= table_budget and s.slots > 0
                        and (li.problem, s.name) in SHARED_TABLE_SOLVERS):
                    options = {**s.options, "table_budget": table_budget}
                for r in range(config.repeats):
                    measure = config.measure if execute else None
                    key = row_key(config.name, li, spec_text, s, r, execute, options, measure)
                    tasks.append(Task(len(tasks), key, config.name, li, spec_text, value, s, r, execute, options,
                                      measure))
    check_not_empty(config, tasks, skips)
    return tasks


def check_not_empty(config: SweepConfig, tasks: list[Task], skips: list[str]) -> None:
    """A grid holds at least one cell: when every ``[[solvers]]`` entry is skipped on every instance
    (another problem, a ``max_length`` below each instance's size, not importable here) the sweep
    would write an empty table and report success. `InputError` naming the sweep file and
    ``solvers``, saying why each entry was skipped (`skips`, the notes of `_runs_on`)."""
    if tasks:
        return
    why = "; ".join(skips) if skips else "each entry's `problems` leaves out the problems of the instances"
    raise InputError(f"no solver runs on any instance, so the grid has no cell ({why})", path=str(config.path),
                     field="solvers")


def _check_repeat(config: SweepConfig, li: LoadedInstance, budgets: list[tuple[str, int]], spec_text: str,
                  value: int, field: str) -> None:
    """Budget `spec_text` (`value` in the memory unit of instance `li`, bytes unless its file states
    ``meta.units.memory``) is none of the earlier `budgets` of its list ((text, size) pairs, in
    order) for this instance: two texts of one budget ("50%" and "1KiB" for a 2 KiB reference
    peak, or shares that round to the same unit) would run one cell twice under two keys.
    `InputError` naming the sweep file and `field` (``budgets[j]``), the size in the instance's
    unit (`budget_text`)."""
    for k, (earlier, size) in enumerate(budgets):
        if size == value:
            where = field.rsplit("[", 1)[0]
            raise InputError(f"budget {spec_text!r} is already in the list for instance {li.label} ({where}[{k}] "
                             f"{earlier!r} is the same {budget_text(value, li.instance)}); give each budget once",
                             path=str(config.path), field=field)


def budget_text(value: int, instance: Any) -> str:
    """A budget of `value` in the memory unit of `instance` for a message: "2048 bytes" (sizes in
    bytes: no unit stated, or "bytes"), "17 MB (16.21 MiB)" (another byte unit: the number in it and
    its size, as ``memsched solve`` and the figures give it), "17 slots" (a unit that is no byte unit)."""
    unit, per = memory_unit(instance) or "bytes", unit_bytes(instance)
    return f"{value} {unit}" if per in (None, 1) else f"{value} {unit} ({format_size(value, instance)})"


def _runs_on(li: LoadedInstance, s: SolverSpec, available: Callable[[str, str], bool],
             note: Callable[[str], None]) -> bool:
    """Whether solver entry `s` runs on instance `li`: not when it is limited to other problems,
    is not a solver of its problem, is not importable here or is given a ``max_length`` below the
    instance's size (each of the last three skips is described by `note`)."""
    if s.problems is not None and li.problem not in s.problems:
        return False
    if s.name not in registry.get_problem(li.problem).solvers:
        note(f"solver {s.label}: not {article(li.problem)} solver, skipped for {li.problem} instances")
        return False
    if not available(li.problem, s.name):
        note(f"solver {s.label}: not importable in this installation, skipped")
        return False
    if s.max_length is not None and li.size is not None and li.size > s.max_length:
        note(f"solver {s.label}: skipped on {li.label} (size {li.size} > max_length {s.max_length})")
        return False
    return True


def check_file_sizes(config: SweepConfig, li: LoadedInstance, solvers: list[SolverSpec]) -> None:
    """An instance read from a file (``file``, ``example``), profiled from a network (``model``) or
    generated (``generate``) is held to the limits of `memsched solve` on the same file
    (`config.size_error`: `stage_count` stages, nodes or layers against `commands._checks.work_limit`)
    for each solver of `solvers` (those that run on it), before any cell runs: `InputError` naming
    the sweep file and the instance's key (``instances[i].generate`` for a generated one). A
    generated instance is measured on the instance it built: the sweep file's check of its
    parameters (`config._check_generated_sizes`) knows the size of a generator given ``L``, ``n``
    or ``lengths`` only, not that of ``graph.resnet``'s ``blocks`` or a pipeline's
    ``parallel_branches``."""
    if li.spec.kind not in ("file", "example", "model", "generate"):
        return
    from ..commands._checks import stage_count

    size = stage_count(li.problem, li.instance)
    hint = {"model": "profile it at a coarser granularity or a smaller depth",
            "generate": "generate a smaller instance"}.get(li.spec.kind, "give a smaller instance")
    for s in solvers:
        why = size_error(li.problem, size, s, hint)
        if why is not None:
            raise InputError(why, path=str(config.path), field=f"{li.spec.where}.{li.spec.kind}")
