"""Experiment sweeps: a grid of (instance, budget, solver) runs, one row each, resumable.

A sweep file (TOML, or YAML by extension) states the grid::

    name = "fig_a_chains"            # rows' "sweep" column and the file names (default: the stem)
    description = "..."
    output = "results/fig_a"         # default results/<name>; --output overrides
    budgets = ["40%", "60%", "1GiB"] # bytes, units, or a percentage of the reference peak
    repeats = 1                      # runs of each cell (repeat index is part of the row key)
    workers = 2                      # default parallelism (--workers overrides)
    execute = false                  # run each schedule for real (model instances only)

    [defaults]                       # applied to every solver entry
    slots = 500
    time_limit = 30

    [[instances]]
    example = "cnn12"                # solvers/data/examples/cnn12.json
    [[instances]]
    file = "path/to/chain.json"      # chain, graph, join, pipeline files (solvers.formats)
    [[instances]]
    generate = "chain"               # solvers.chain.generate.random_chain(L, seed, ...)
    L = 20
    seed = 0
    [[instances]]
    model = "resnet18"               # a zoo network, profiled by models.chain.profiler (needs torch)
    batch = 2
    image_size = 64
    budgets = ["50%"]                # any instance may override the sweep's budgets

    [[solvers]]
    name = "rotor"
    slots = 500
    time_limit = 10
    options = { }                    # solver-specific keyword options
    max_length = 12                  # optional: skip instances with more stages / nodes
    label = "rotor-500"              # optional: distinguishes two entries of one solver

Relative file paths are read against the sweep file's folder, then the current folder.

Every run gives one row (`ROW_COLUMNS` first, then any extra keys): its parameters, the
status, objective (makespan, or period for pipelines), lower bound, gap, peak memory, solve
time, measured values when executed, the versions of memsched, numpy, ortools, torch and
Python, the host and a UTC timestamp. Each finished row is appended to ``<name>.jsonl`` in
the output folder at once (flushed and fsync'ed); a rerun reads that journal, ignores a torn
last line, and runs only the cells whose key is not there. The table ``<name>.csv`` (and
``<name>.parquet`` when pyarrow is present) is rewritten atomically (temporary file, then
rename) from the journal, in grid order, whenever the sweep ends or is interrupted.

Runs go to local processes (`concurrent.futures.ProcessPoolExecutor`) or, given a scheduler
address, to a Dask cluster (`dask.distributed.Client`); the rows are the same either way.
Bad sweep files raise `InputError` naming the file and the key.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import math
import os
import platform
import socket
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsched.solvers import __version__ as MEMSCHED_VERSION
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.units import parse_budget

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "solvers" / "data" / "examples"
CONFIGS = Path(__file__).resolve().parent / "configs"

#: Columns every row has, in table order (extra keys follow, sorted).
ROW_COLUMNS = [
    "sweep", "key", "instance", "problem", "source", "size", "budget_spec", "budget", "reference_peak",
    "budget_fraction", "solver", "solver_label", "slots", "time_limit", "options", "repeat", "execute",
    "status", "objective", "objective_name", "baseline_objective", "overhead", "lower_bound", "gap",
    "peak_memory", "min_budget", "solve_time_s", "scope", "message",
    "measured_time_ms", "measured_peak", "memory_ratio", "time_ratio", "grad_check", "device",
    "memsched_version", "numpy_version", "ortools_version", "torch_version", "python_version",
    "host", "pid", "timestamp",
]
#: Status of a row whose solver rejected the instance (besides the solvers' own statuses and "error").
UNSUPPORTED = "unsupported"
#: Columns that change from one run of the same cell to the next (ignored when comparing tables).
VOLATILE_COLUMNS = ("solve_time_s", "measured_time_ms", "time_ratio", "memory_ratio", "measured_peak", "host",
                    "pid", "timestamp")

_TOP_KEYS = {"name", "description", "output", "budgets", "repeats", "workers", "execute", "defaults",
             "instances", "solvers", "figure"}
_SOLVER_KEYS = {"name", "label", "slots", "time_limit", "options", "max_length", "problems"}
_INSTANCE_KINDS = ("file", "example", "generate", "model")
_INSTANCE_COMMON = {"label", "budgets", "execute", "problem", "bandwidth"}
_MODEL_SIZES = {"batch", "image_size", "seq_len", "width", "depth", "classes", "vocab", "dropout", "device", "seed",
                "repeats", "warmup"}
#: ``generate = "chain"`` means ``chain.random_chain``; other generators are "<problem>.<function>".
_GENERATOR_ALIASES = {"chain": "chain.random_chain", "graph": "graph.random_layered", "join": "join.random_join"}


# ============================================================================ the sweep file
@dataclass(frozen=True)
class InstanceSpec:
    """One `[[instances]]` entry: how to obtain the instance, and its overrides."""

    index: int
    kind: str                       # file | example | generate | model
    params: dict[str, Any]
    label: str | None = None
    budgets: tuple[Any, ...] | None = None
    execute: bool | None = None
    problem: str | None = None

    @property
    def where(self) -> str:
        return f"instances[{self.index}]"


@dataclass(frozen=True)
class SolverSpec:
    """One `[[solvers]]` entry (defaults applied)."""

    index: int
    name: str
    label: str
    slots: int
    time_limit: float | None
    options: dict[str, Any]
    max_length: int | None = None
    problems: tuple[str, ...] | None = None


@dataclass
class SweepConfig:
    """A parsed and checked sweep file."""

    path: Path
    name: str
    description: str
    instances: list[InstanceSpec]
    solvers: list[SolverSpec]
    budgets: list[Any]
    repeats: int = 1
    workers: int | None = None
    execute: bool = False
    output: str | None = None
    figure: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    def output_dir(self, override: str | Path | None = None) -> Path:
        """Where rows go: `override`, else the file's ``output``, else ``results/<name>``."""
        return Path(override or self.output or Path("results") / self.name)


def read_sweep_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a TOML (tomllib, or tomli on Python 3.10) or YAML sweep file."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such sweep file", path=str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a sweep file (.toml or .yaml)", path=str(path))
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise InputError(f"invalid YAML{where}: {getattr(err, 'problem', err)}", path=str(path)) from None
    else:
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            try:
                import tomli as tomllib  # type: ignore[no-redef]
            except ModuleNotFoundError:
                raise InputError("reading TOML on Python 3.10 needs the 'tomli' package (or use a .yaml file)",
                                 path=str(path)) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise InputError(f"invalid TOML: {err}", path=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a table of keys at the top level", path=str(path))
    return data


def load_config(path: str | Path) -> SweepConfig:
    """Parse and check a sweep file; `InputError` names the file and the offending key."""
    path = Path(path)
    data = read_sweep_file(path)
    p = str(path)

    def bad(key: str, msg: str) -> InputError:
        return InputError(msg, path=p, field=key)

    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise bad(unknown[0], f"unknown key (expected one of {', '.join(sorted(_TOP_KEYS))})")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name or any(c in name for c in "/\\") or name.startswith("."):
        raise bad("name", f"must be a plain non-empty string usable as a file name, got {name!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise bad("description", "must be a string")
    repeats = _int(data.get("repeats", 1), "repeats", bad, minimum=1)
    workers = data.get("workers")
    if workers is not None:
        workers = _int(workers, "workers", bad, minimum=1)
    execute = _bool(data.get("execute", False), "execute", bad)
    output = data.get("output")
    if output is not None and (not isinstance(output, str) or not output):
        raise bad("output", "must be a folder path (a string)")
    figure = data.get("figure")
    if figure is not None and not isinstance(figure, str):
        raise bad("figure", "must be a string")
    budgets = _budgets(data.get("budgets"), "budgets", bad, required=False)

    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise bad("defaults", "must be a table")
    for k in defaults:
        if k not in _SOLVER_KEYS - {"name", "label"}:
            raise bad(f"defaults.{k}", "unknown key (expected one of slots, time_limit, options, max_length, "
                                       "problems)")

    raw_instances = data.get("instances")
    if not isinstance(raw_instances, list) or not raw_instances:
        raise bad("instances", "must be a non-empty list of tables ([[instances]])")
    instances = [_instance_spec(i, entry, bad) for i, entry in enumerate(raw_instances)]
    for spec in instances:
        if spec.budgets is None and not budgets:
            raise bad("budgets", f"missing: give the sweep's budgets (or budgets in {spec.where})")
        if spec.kind != "model" and (spec.execute or (spec.execute is None and execute)):
            key = f"{spec.where}.execute" if spec.execute else "execute"
            raise bad(key, f"execution needs a zoo network: {spec.where} is a {spec.kind} instance "
                           f"(use model = \"...\")")

    raw_solvers = data.get("solvers")
    if not isinstance(raw_solvers, list) or not raw_solvers:
        raise bad("solvers", "must be a non-empty list of tables ([[solvers]])")
    solvers = [_solver_spec(i, entry, defaults, bad) for i, entry in enumerate(raw_solvers)]
    labels = [s.label for s in solvers]
    for s in solvers:
        if labels.count(s.label) > 1:
            raise bad(f"solvers[{s.index}].label", f"two solver entries are both labelled {s.label!r}; "
                                                   f"give each a distinct label")
    return SweepConfig(path=path, name=name, description=description, instances=instances, solvers=solvers,
                       budgets=budgets or [], repeats=repeats, workers=workers, execute=execute, output=output,
                       figure=figure, raw=data)


def _int(v: Any, key: str, bad: Callable[[str, str], InputError], *, minimum: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise bad(key, f"must be an integer >= {minimum}, got {v!r}")
    return v


def _bool(v: Any, key: str, bad: Callable[[str, str], InputError]) -> bool:
    if not isinstance(v, bool):
        raise bad(key, f"must be true or false, got {v!r}")
    return v


def _budgets(v: Any, key: str, bad: Callable[[str, str], InputError], *, required: bool) -> list[Any] | None:
    if v is None:
        if required:
            raise bad(key, "missing")
        return None
    if not isinstance(v, list) or not v:
        raise bad(key, "must be a non-empty list of budgets (bytes, \"1.5GB\", \"800MiB\" or \"60%\")")
    for j, b in enumerate(v):
        if isinstance(b, bool) or not isinstance(b, (int, float, str)):
            raise bad(f"{key}[{j}]", f"must be a number of bytes or a string like \"60%\" or \"1GiB\", got {b!r}")
        try:
            parse_budget(b, 100, field=f"{key}[{j}]")  # syntax only; the reference comes later
        except InputError as err:
            raise bad(f"{key}[{j}]", str(err).split(": ", 1)[-1]) from None
        if isinstance(b, (int, float)) and b <= 0:
            raise bad(f"{key}[{j}]", f"must be positive, got {b!r}")
    return list(v)


def _instance_spec(i: int, entry: Any, bad: Callable[[str, str], InputError]) -> InstanceSpec:
    where = f"instances[{i}]"
    if not isinstance(entry, dict):
        raise bad(where, "must be a table")
    kinds = [k for k in _INSTANCE_KINDS if k in entry]
    if len(kinds) != 1:
        raise bad(where, f"needs exactly one of {', '.join(_INSTANCE_KINDS)} (got {', '.join(kinds) or 'none'})")
    kind = kinds[0]
    allowed = _INSTANCE_COMMON | {kind}
    if kind == "model":
        allowed |= _MODEL_SIZES
    elif kind == "generate":
        allowed = set(entry)  # the generator's own keyword arguments (checked when it is called)
    for k in entry:
        if k not in allowed:
            raise bad(f"{where}.{k}", f"unknown key for a {kind} instance")
    params = {k: v for k, v in entry.items() if k not in _INSTANCE_COMMON - {"bandwidth"}}
    if not isinstance(entry[kind], str) or not entry[kind]:
        raise bad(f"{where}.{kind}", "must be a non-empty string")
    if kind == "generate":
        _generator(entry["generate"], f"{where}.generate", bad)
        if entry["generate"] == "chain":
            _int(entry.get("L"), f"{where}.L", bad, minimum=1)
        if "seed" in entry:
            _int(entry["seed"], f"{where}.seed", bad)
    if "bandwidth" in entry and entry.get("problem") != "offload":
        raise bad(f"{where}.bandwidth", "a host bandwidth is only for offload instances (add problem = \"offload\")")
    label = entry.get("label")
    if label is not None and (not isinstance(label, str) or not label):
        raise bad(f"{where}.label", "must be a non-empty string")
    budgets = _budgets(entry.get("budgets"), f"{where}.budgets", bad, required=False)
    execute = entry.get("execute")
    if execute is not None:
        _bool(execute, f"{where}.execute", bad)
    problem = entry.get("problem")
    if problem is not None and problem not in registry.PROBLEMS:
        raise bad(f"{where}.problem", f"unknown problem {problem!r} (one of {', '.join(registry.PROBLEMS)})")
    return InstanceSpec(i, kind, params, label, tuple(budgets) if budgets else None, execute, problem)


def _generator(name: Any, key: str, bad: Callable[[str, str], InputError]) -> tuple[str, Callable[..., Any]]:
    """(problem, function) of a generator name: "chain", "graph", "join" or "<problem>.<function>"
    of ``solvers.<problem>.generate``."""
    import importlib

    full = _GENERATOR_ALIASES.get(name, name)
    problem, _, fn = str(full).partition(".")
    if problem not in registry.PROBLEMS or not fn or fn.startswith("_"):
        raise bad(key, f"unknown generator {name!r} (\"chain\", \"graph\", \"join\" or \"<problem>.<function>\" "
                       f"of solvers.<problem>.generate)")
    try:
        module = importlib.import_module(f"memsched.solvers.{problem}.generate")
    except ImportError:
        raise bad(key, f"memsched.solvers.{problem}.generate is not available in this installation") from None
    func = getattr(module, fn, None)
    if not callable(func):
        raise bad(key, f"memsched.solvers.{problem}.generate has no generator {fn!r}")
    return problem, func


def _solver_spec(i: int, entry: Any, defaults: dict[str, Any], bad: Callable[[str, str], InputError]) -> SolverSpec:
    where = f"solvers[{i}]"
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict):
        raise bad(where, "must be a table with at least a name")
    for k in entry:
        if k not in _SOLVER_KEYS:
            raise bad(f"{where}.{k}", f"unknown key (expected one of {', '.join(sorted(_SOLVER_KEYS))})")
    merged = {**defaults, **entry}
    name = merged.get("name")
    if not isinstance(name, str) or not name:
        raise bad(f"{where}.name", "missing or not a string")
    known = {n for p in registry.PROBLEMS if _has_problem(p) for n in registry.problem_module(p).SOLVERS}
    if name not in known:
        raise bad(f"{where}.name", f"unknown solver {name!r} (known: {', '.join(sorted(known))})")
    src = lambda k: where if k in entry else "defaults"  # noqa: E731  (which table set the key)
    slots = _int(merged.get("slots", 500), f"{src('slots')}.slots", bad)
    time_limit = merged.get("time_limit")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or time_limit <= 0):
        raise bad(f"{src('time_limit')}.time_limit", f"must be a positive number of seconds, got {time_limit!r}")
    options = merged.get("options", {})
    if not isinstance(options, dict):
        raise bad(f"{src('options')}.options", "must be a table of solver options")
    if defaults.get("options") and "options" in entry:
        options = {**defaults["options"], **entry["options"]}
    reserved = {"slots", "time_limit"} & set(options)
    if reserved:
        raise bad(f"{src('options')}.options.{sorted(reserved)[0]}", "set it as a solver key, not an option")
    max_length = merged.get("max_length")
    if max_length is not None:
        max_length = _int(max_length, f"{src('max_length')}.max_length", bad, minimum=1)
    problems = merged.get("problems")
    if problems is not None:
        if isinstance(problems, str):
            problems = [problems]
        if not isinstance(problems, list) or any(p not in registry.PROBLEMS for p in problems):
            raise bad(f"{src('problems')}.problems", f"must list problems among {', '.join(registry.PROBLEMS)}")
        problems = tuple(problems)
    label = entry.get("label", name)
    if not isinstance(label, str) or not label:
        raise bad(f"{where}.label", "must be a non-empty string")
    return SolverSpec(i, name, label, slots, None if time_limit is None else float(time_limit), dict(options),
                      max_length, problems)


def _has_problem(problem: str) -> bool:
    try:
        return hasattr(registry.problem_module(problem), "SOLVERS")
    except ImportError:
        return False


# ============================================================================ the grid
@dataclass
class LoadedInstance:
    """An instance ready to solve: its label, problem, the object and its reference peak."""

    spec: InstanceSpec
    label: str
    problem: str
    instance: Any
    source: str
    size: int | None
    reference_peak: int | None
    baseline_objective: float | None
    model: dict[str, Any] | None = None     # zoo name and sizes, for execution


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


def resolve_path(text: str, config_path: Path) -> Path:
    """A path from a sweep file: against the file's folder, then the current folder."""
    p = Path(text).expanduser()
    if p.is_absolute():
        return p
    for base in (config_path.resolve().parent, Path.cwd()):
        if (base / p).exists():
            return base / p
    return config_path.resolve().parent / p


def load_instance_spec(spec: InstanceSpec, config: SweepConfig) -> LoadedInstance:
    """Load (or generate, or profile) one instance; `InputError` names the sweep key."""
    p = str(config.path)
    where = spec.where
    model = None
    if spec.kind in ("file", "example"):
        if spec.kind == "file":
            path = resolve_path(spec.params["file"], config.path)
            key = f"{where}.file"
        else:
            path = EXAMPLES / f"{spec.params['example']}.json"
            key = f"{where}.example"
            if not path.exists():
                names = ", ".join(sorted(q.stem for q in EXAMPLES.glob("*.json")))
                raise InputError(f"no built-in example {spec.params['example']!r} (one of {names})", path=p, field=key)
        from memsched.solvers.formats import load_instance

        try:
            if spec.problem == "offload" and "bandwidth" in spec.params:
                from memsched.solvers.units import parse_bandwidth

                bw = parse_bandwidth(spec.params["bandwidth"], field=f"{where}.bandwidth")
                problem, instance = "offload", registry.problem_module("offload").load(str(path), bw)
            else:
                problem, instance = load_instance(path, spec.problem)
        except InputError as err:
            raise InputError(f"cannot load: {err}", path=p, field=key) from None
        source = str(path)
        label = spec.label or getattr(instance, "name", None) or path.stem
    elif spec.kind == "generate":
        problem, func = _generator(spec.params["generate"], f"{where}.generate",
                                   lambda k, m: InputError(m, path=p, field=k))
        kwargs = {k: v for k, v in spec.params.items() if k != "generate"}
        try:
            instance = func(**kwargs)
        except (TypeError, ValueError, KeyError) as err:
            raise InputError(f"cannot generate: {err}", path=p, field=where) from None
        problem = spec.problem or problem
        source = f"{func.__module__}.{func.__name__}({json.dumps(kwargs, sort_keys=True)})"
        label = spec.label or instance.name
    else:
        sizes = {k: v for k, v in spec.params.items() if k not in ("model", "repeats", "warmup")}
        try:
            from memsched.models.chain.profiler import profile_model
        except ImportError as err:
            raise InputError(f"profiling zoo networks needs PyTorch and models.chain.profiler ({err})", path=p,
                             field=f"{where}.model") from None
        try:
            instance, built = profile_model(spec.params["model"], repeats=spec.params.get("repeats", 3),
                                            warmup=spec.params.get("warmup", 1), **sizes)
        except InputError as err:
            raise InputError(str(err), path=p, field=f"{where}.model") from None
        except (TypeError, ValueError, RuntimeError) as err:
            raise InputError(f"cannot profile this network: {type(err).__name__}: {err}", path=p,
                             field=where) from None
        problem = "chain"
        source = f"memsched.models.chain.profiler.profile_model({json.dumps(spec.params, sort_keys=True)})"
        label = spec.label or built.label
        model = {"name": spec.params["model"], "sizes": sizes}
    module = registry.problem_module(problem)
    try:
        reference = int(module.reference_peak(instance))
    except Exception:  # noqa: BLE001  (a problem without a meaningful reference)
        reference = None
    baseline = None if problem == "pipeline" else _baseline_objective(instance)
    return LoadedInstance(spec, label, problem, instance, source, _size_of(instance), reference, baseline, model)


def _size_of(instance: Any) -> int | None:
    """Stages of a chain or pipeline, nodes of a graph, stages of all branches of a join."""
    lengths = getattr(instance, "lengths", None)
    if isinstance(lengths, (list, tuple)) and lengths:
        return int(sum(lengths))
    chain = getattr(instance, "chain", None)
    if chain is not None and isinstance(getattr(chain, "length", None), int):
        return chain.length
    for attr in ("length", "num_nodes", "n", "size"):
        v = getattr(instance, attr, None)
        if isinstance(v, int):
            return v
    try:
        return len(instance)
    except TypeError:
        return None


def _baseline_objective(instance: Any) -> float | None:
    """The objective without memory savings (chain: sum of u_f and u_b; graph: sum of cost_cpu;
    offload: its chain's), for the overhead column."""
    chain = getattr(instance, "chain", None)
    if chain is not None and callable(getattr(chain, "total_time", None)):
        return float(chain.total_time())
    for attr in ("total_time", "total_cpu", "total_cost", "total_compute"):
        fn = getattr(instance, attr, None)
        if callable(fn):
            try:
                return float(fn())
            except Exception:  # noqa: BLE001
                return None
        if isinstance(fn, (int, float)):
            return float(fn)
    return None


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def row_key(sweep: str, loaded: LoadedInstance, budget_spec: str, solver: SolverSpec, repeat: int,
            execute: bool) -> str:
    """A stable id of one cell: changes exactly when a parameter of the run changes."""
    ident = {"sweep": sweep, "instance": loaded.label, "source": loaded.source, "budget": budget_spec,
             "solver": solver.name, "label": solver.label, "slots": solver.slots, "time_limit": solver.time_limit,
             "options": solver.options, "repeat": repeat, "execute": execute}
    return hashlib.sha1(_canonical(ident).encode()).hexdigest()[:16]


def build_tasks(config: SweepConfig, *, notes: list[str] | None = None,
                loaded: list[LoadedInstance] | None = None) -> list[Task]:
    """The grid in its fixed order (instances x budgets x solvers x repeats), skipping solvers
    that do not apply (another problem, too long an instance) or are not importable here;
    each skip is described once in `notes`."""
    notes = notes if notes is not None else []
    if loaded is None:
        loaded = [load_instance_spec(spec, config) for spec in config.instances]
    available = {(p, n) for p, n, _ in registry.solver_table()}
    labels = [li.label for li in loaded]
    for li in loaded:
        if labels.count(li.label) > 1:
            raise InputError(f"two instances are labelled {li.label!r}; give them distinct labels",
                             path=str(config.path), field=f"{li.spec.where}.label")
    tasks: list[Task] = []
    seen_notes: set[str] = set()

    def note(text: str) -> None:
        if text not in seen_notes:
            seen_notes.add(text)
            notes.append(text)

    for li in loaded:
        specs = li.spec.budgets or tuple(config.budgets)
        bkey = f"{li.spec.where}.budgets" if li.spec.budgets else "budgets"
        budgets = []
        for j, b in enumerate(specs):
            spec_text = str(b)
            try:
                value = parse_budget(b, li.reference_peak, field=f"{bkey}[{j}]")
            except InputError as err:
                raise InputError(str(err), path=str(config.path)) from None
            if value <= 0:
                raise InputError(f"budget {spec_text!r} is zero for instance {li.label}", path=str(config.path),
                                 field=f"{bkey}[{j}]")
            budgets.append((spec_text, value))
        execute = li.spec.execute if li.spec.execute is not None else config.execute
        for spec_text, value in budgets:
            for s in config.solvers:
                if s.problems is not None and li.problem not in s.problems:
                    continue
                if s.name not in registry.problem_module(li.problem).SOLVERS:
                    note(f"solver {s.label}: not a {li.problem} solver, skipped for {li.problem} instances")
                    continue
                if (li.problem, s.name) not in available:
                    note(f"solver {s.label}: not importable in this installation, skipped")
                    continue
                if s.max_length is not None and li.size is not None and li.size > s.max_length:
                    note(f"solver {s.label}: skipped on {li.label} (size {li.size} > max_length {s.max_length})")
                    continue
                for r in range(config.repeats):
                    key = row_key(config.name, li, spec_text, s, r, execute)
                    tasks.append(Task(len(tasks), key, config.name, li, spec_text, value, s, r, execute))
    return tasks


# ============================================================================ one run
@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """Versions of memsched, numpy, ortools, torch (None when absent) and Python, and the host."""
    out: dict[str, str | None] = {"memsched_version": MEMSCHED_VERSION}
    for mod in ("numpy", "ortools", "torch"):
        try:
            out[f"{mod}_version"] = __import__(mod).__version__
        except Exception:  # noqa: BLE001  (absent or broken: recorded as missing)
            out[f"{mod}_version"] = None
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


def run_task(task: Task) -> dict[str, Any]:
    """Solve one cell (and execute its schedule when asked); always returns a row.

    Solver errors do not stop the sweep: they give a row with status ``error`` and the message;
    a solver that rejects the instance (`InputError`: outside its model) gives ``unsupported``.
    """
    li, s = task.loaded, task.solver
    row: dict[str, Any] = {
        "sweep": task.sweep, "key": task.key, "instance": li.label, "problem": li.problem, "source": li.source,
        "size": li.size, "budget_spec": task.budget_spec, "budget": task.budget, "reference_peak": li.reference_peak,
        "budget_fraction": (task.budget / li.reference_peak) if li.reference_peak else None,
        "solver": s.name, "solver_label": s.label, "slots": s.slots, "time_limit": s.time_limit,
        "options": _canonical(s.options), "repeat": task.repeat, "execute": task.execute,
        "objective_name": "period" if li.problem == "pipeline" else "makespan",
        "baseline_objective": li.baseline_objective,
    }
    result = None
    try:
        result = registry.solve(li.problem, li.instance, s.name, task.budget, slots=s.slots,
                                time_limit=s.time_limit, **s.options)
    except InputError as err:  # the solver does not apply to this instance (e.g. Revolve, heterogeneous)
        row.update(status=UNSUPPORTED, message=str(err)[:500])
    except Exception as err:  # noqa: BLE001  (recorded in the row; the sweep goes on)
        row.update(status="error", message=f"{type(err).__name__}: {err}"[:500])
    if result is not None:
        row.update(status=result.status, objective=result.objective, lower_bound=result.lower_bound,
                   gap=result.gap, peak_memory=result.peak_memory, min_budget=result.min_budget,
                   solve_time_s=result.solve_time_s, scope=result.scope, message=result.message[:500])
        if result.objective is not None and li.baseline_objective:
            overhead = result.objective / li.baseline_objective - 1.0
            row["overhead"] = 0.0 if abs(overhead) < 1e-12 else overhead
        if task.execute and result.schedule is not None:
            try:
                row.update(_execute(li, result.schedule))
            except Exception as err:  # noqa: BLE001
                row["message"] = (row.get("message") or "") + f" execution failed: {type(err).__name__}: {err}"
    row.update(versions())
    row["pid"] = os.getpid()
    row["timestamp"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return {k: _finite(v) for k, v in row.items()}


def _execute(li: LoadedInstance, schedule: Any) -> dict[str, Any]:
    """Run `schedule` for real on the zoo network of `li` (models.chain.executor)."""
    from memsched.models.chain.executor import execute
    from memsched.models.zoo import build_model

    assert li.model is not None
    model = build_model(li.model["name"], **li.model["sizes"])
    result, grad_check = execute(model.blocks, model.loss_fn, schedule, model.example_input, model.target,
                                 chain=li.instance)
    return {"measured_time_ms": result.time_ms, "measured_peak": result.peak_memory,
            "memory_ratio": result.memory_ratio, "time_ratio": result.time_ratio, "grad_check": grad_check,
            "device": result.device}


# ============================================================================ journal and table
def journal_path(out_dir: Path, name: str) -> Path:
    return out_dir / f"{name}.jsonl"


def table_path(out_dir: Path, name: str, ext: str = "csv") -> Path:
    return out_dir / f"{name}.{ext}"


def read_journal(path: Path) -> dict[str, dict[str, Any]]:
    """Finished rows by key; a torn (unterminated or unreadable) last line is ignored, a later
    row of the same key wins."""
    rows: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return rows
    with path.open("rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            if n == len(lines) - 1:
                continue  # torn last line of a killed run
            print(f"warning: {path}: unreadable line {n + 1} ignored", file=sys.stderr)
            continue
        if isinstance(row, dict) and "key" in row:
            rows[row["key"]] = row
    return rows


class Journal:
    """Append-only JSON-lines file of finished rows; each append is flushed and fsync'ed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._f = path.open("ab")

    def _repair(self) -> None:
        """Cut a torn last line (a run killed mid-write) so that appends start on a fresh line."""
        if not self.path.exists():
            return
        with self.path.open("rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                cut = data.rfind(b"\n") + 1
                f.truncate(cut)
                f.flush()
                os.fsync(f.fileno())

    def append(self, row: dict[str, Any]) -> None:
        self._f.write((json.dumps(row, sort_keys=True, default=str) + "\n").encode())
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def rows_frame(rows: Iterable[dict[str, Any]]):
    """A pandas DataFrame with `ROW_COLUMNS` first, then any other keys (sorted)."""
    import pandas as pd

    rows = list(rows)
    extra = sorted({k for r in rows for k in r} - set(ROW_COLUMNS))
    return pd.DataFrame(rows, columns=ROW_COLUMNS + extra)


def write_table(rows: list[dict[str, Any]], out_dir: Path, name: str) -> list[Path]:
    """Write ``<name>.csv`` (and ``.parquet`` with pyarrow) atomically; returns the paths."""
    frame = rows_frame(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    csv = table_path(out_dir, name)
    _atomic(csv, lambda tmp: frame.to_csv(tmp, index=False))
    written.append(csv)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    else:
        pq = table_path(out_dir, name, "parquet")
        pframe = frame.copy()
        for col in pframe.columns:  # mixed object columns (None and str) as strings
            if pframe[col].dtype == object:
                pframe[col] = pframe[col].map(lambda v: None if v is None else str(v))
        _atomic(pq, lambda tmp: pframe.to_parquet(tmp, index=False))
        written.append(pq)
    return written


def _atomic(path: Path, write: Callable[[Path], Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# ============================================================================ running
@dataclass
class SweepOutcome:
    """What `run_sweep` did: every row of the grid that is done, in grid order, and counts."""

    rows: list[dict[str, Any]]
    total: int
    resumed: int
    ran: int
    errors: int
    notes: list[str]
    paths: list[Path]
    interrupted: bool = False


def _local_results(tasks: list[Task], workers: int) -> Iterator[dict[str, Any]]:
    if workers <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield run_task(t)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")  # portable, and safe with threads (torch, ortools)
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx)
    futures = [pool.submit(run_task, t) for t in tasks]
    try:
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _dask_results(tasks: list[Task], scheduler: str) -> Iterator[dict[str, Any]]:
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError("a Dask scheduler needs dask.distributed (pip install 'dask[distributed]')",
                         field="--scheduler") from None
    try:
        client = Client(scheduler, timeout=30) if isinstance(scheduler, str) else scheduler
    except OSError as err:
        raise InputError(f"cannot reach the Dask scheduler {scheduler!r}: {err}", field="--scheduler") from None
    own = isinstance(scheduler, str)
    futures = [client.submit(run_task, t, pure=False, key=f"memsched-{t.key}-{t.position}") for t in tasks]
    try:
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        client.cancel(futures)
        if own:
            client.close()


def run_sweep(config: SweepConfig | str | Path, *, output: str | Path | None = None, workers: int | None = None,
              scheduler: Any = None, progress: bool = True, fresh: bool = False,
              on_row: Callable[[dict[str, Any]], None] | None = None) -> SweepOutcome:
    """Run (or resume) a sweep: the rows of every cell not yet in the journal, then the table.

    `workers`: local processes (default: the file's ``workers``, else the CPU count; 1 runs in
    this process). `scheduler`: a Dask scheduler address ("tcp://host:8786") or a
    `dask.distributed.Client`. `on_row(row)` is called after each row is journaled (tests use
    it to simulate a crash). `fresh` discards the journal first (everything is run again).
    The table is written even when the sweep is interrupted.
    """
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    notes: list[str] = []
    tasks = build_tasks(config, notes=notes)
    out_dir = config.output_dir(output)
    jpath = journal_path(out_dir, config.name)
    if fresh and jpath.exists():
        jpath.unlink()
    done = read_journal(jpath)
    grid_keys = {t.key for t in tasks}
    stale = sum(1 for k in done if k not in grid_keys)
    if stale:
        notes.append(f"{stale} journal rows are not in this grid (parameters changed); kept in {jpath.name}, "
                     f"left out of the table")
    todo = [t for t in tasks if t.key not in done]
    resumed = len(tasks) - len(todo)
    if workers is None:
        workers = config.workers or os.cpu_count() or 1
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), initial=resumed, desc=config.name, unit="run", file=sys.stderr)
    ran = errors = 0
    interrupted = False
    try:
        with Journal(jpath) as journal:
            results = _dask_results(todo, scheduler) if scheduler is not None else _local_results(todo, workers)
            if todo:
                for row in results:
                    journal.append(row)
                    done[row["key"]] = row
                    ran += 1
                    errors += row.get("status") == "error"
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix_str(f"{row['instance']} {row['solver_label']} {row['status']}", refresh=False)
                    if on_row is not None:
                        on_row(row)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if bar is not None:
            bar.close()
        rows = [done[t.key] for t in tasks if t.key in done]
        paths = write_table(rows, out_dir, config.name) if (rows or jpath.exists()) else []
        if interrupted:
            print(f"interrupted: {len(rows)}/{len(tasks)} rows kept in {jpath}; rerun to resume", file=sys.stderr)
    return SweepOutcome(rows, len(tasks), resumed, ran, errors, notes, paths)


def compare_tables(a, b, ignore: Iterable[str] = VOLATILE_COLUMNS):
    """Rows of two sweep tables (DataFrames) without the volatile columns, sorted by key,
    for equality checks; returns the two normalised frames."""
    cols = [c for c in a.columns if c not in set(ignore)]
    na = a[cols].sort_values("key").reset_index(drop=True)
    nb = b[[c for c in cols if c in b.columns]].sort_values("key").reset_index(drop=True)
    return na, nb


def find_config(name: str) -> Path:
    """A sweep file by path, or by name among the committed configs (experiments/configs)."""
    p = Path(name)
    if p.exists():
        return p
    for ext in (".toml", ".yaml", ".yml"):
        q = CONFIGS / f"{name}{ext}"
        if q.exists():
            return q
    return p


__all__ = ["SweepConfig", "InstanceSpec", "SolverSpec", "Task", "SweepOutcome", "load_config", "read_sweep_file",
           "build_tasks", "run_task", "run_sweep", "read_journal", "write_table", "rows_frame", "compare_tables",
           "find_config", "versions", "ROW_COLUMNS", "VOLATILE_COLUMNS"]
