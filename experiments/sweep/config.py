"""The sweep file: read a TOML or YAML grid and check every key (`load_config`).

The format is described in `memsched.experiments.sweep` (the package docstring). Bad files
raise `InputError` naming the file and the offending key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import memsched.solvers as _solvers_pkg
from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.exact.options import MAX_SECONDS
from memsched.solvers.units import parse_budget, parse_size

from ..commands._checks import MAX_BATCH, MAX_SEED, MAX_THREADS, MAX_TIME_REPEATS, MAX_WORKERS

#: The repository root (in a source checkout); results/ is relative to the current folder.
ROOT = Path(__file__).resolve().parents[2]
#: The built-in example instances (``example = "cnn12"``).
EXAMPLES = Path(_solvers_pkg.__file__).resolve().parent / "data" / "examples"
#: The committed sweep files (``memsched sweep default``).
CONFIGS = Path(__file__).resolve().parents[1] / "configs"

_TOP_KEYS = {"name", "description", "output", "budgets", "repeats", "workers", "execute", "defaults",
             "instances", "solvers", "figure", "measure"}
#: How executed cells are measured (``[measure]``): timed repeats (median and spread recorded),
#: unwatched warm-up runs before them, torch CPU threads pinned in the executing process.
MEASURE_DEFAULTS = {"time_repeats": 5, "warmup": 1, "threads": 1}
#: the range of each ``[measure]`` setting: the command line's (``run --time-repeats``, a model
#: instance's ``warmup``, ``--threads``)
MEASURE_RANGES = {"time_repeats": (1, MAX_TIME_REPEATS), "warmup": (0, MAX_TIME_REPEATS), "threads": (1, MAX_THREADS)}
_SOLVER_KEYS = {"name", "label", "slots", "time_limit", "options", "max_length", "problems", "shared_table"}
#: Solvers that can read many budgets of one instance from one table (``shared_table = true``).
SHARED_TABLE_SOLVERS = {("chain", "rotor")}
#: Solver options that the sweep sets itself (``shared_table``): refused in a file, never listed as options.
SWEEP_SET_OPTIONS = frozenset({"table_budget"})
_INSTANCE_KINDS = ("file", "example", "generate", "model")
_INSTANCE_COMMON = {"label", "budgets", "execute", "problem", "bandwidth"}
#: the keys a ``model`` instance entry takes besides ``model`` (the profile's sizes and settings)
MODEL_SIZES = {"batch", "image_size", "seq_len", "width", "depth", "classes", "vocab", "dropout", "device", "seed",
               "repeats", "warmup"}
#: the problems a ``model`` instance can be profiled for (`instances.load_instance_spec`; chain by default)
MODEL_PROBLEMS = ("chain", "join", "offload", "graph")
#: ``generate = "chain"`` means ``chain.random_chain``; other generators are "<problem>.<function>".
_GENERATOR_ALIASES = {"chain": "chain.random_chain", "graph": "graph.random_layered", "join": "join.random_join"}
#: the most runs of each cell (``repeats``): a grid is listed and run cell by cell
MAX_REPEATS = 1000
#: the most slots (``slots``), as the command line's --slots
MAX_SLOTS = 10**9
#: the longest sweep ``name`` (UTF-8 bytes): it names the journal, the tables and their temporary
#: files (``.<name>.parquet.XXXXXXXX.tmp``), which must stay within a file name's 255 bytes
MAX_NAME_BYTES = 200


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
        """Where this spec sits in the sweep file (``instances[i]``), for error messages."""
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
    shared_table: bool = False     # rotor: one DP table (of the largest budget) for all budgets of an instance


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
    measure: dict[str, int] = field(default_factory=lambda: dict(MEASURE_DEFAULTS))

    def output_dir(self, override: str | Path | None = None, *, option: str = "output") -> Path:
        """Where rows go: `override`, else the file's ``output``, else ``results/<name>``. An empty
        `override` ("") is bad input naming `option` (``--output`` on the command line), as the
        file's ``output = ""`` is, not a request for the default folder."""
        if isinstance(override, str) and not override:
            raise InputError("is empty, expected a folder name", field=option)
        return Path(override or self.output or Path("results") / self.name)


def read_sweep_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a TOML (tomllib, or tomli on Python 3.10) or YAML sweep file."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such sweep file", path=str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a sweep file (.toml or .yaml)", path=str(path))
    from memsched.solvers.jsonio import read_text

    text = read_text(path)  # one-line InputError for unreadable or non-UTF-8 files
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.load(text, Loader=_unique_key_loader())  # noqa: S506  (a SafeLoader subclass)
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
    _check_string_keys(data, "", str(path))
    return data


def _unique_key_loader() -> type:
    """A `yaml.SafeLoader` that refuses a key given twice in one mapping (the last one silently
    won; TOML refuses it too): a `yaml.constructor.ConstructorError` "duplicate key 'budgets'"
    marked at the second one. Keys merged in by ``<<`` may still be overridden."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=deep)
                    try:
                        again = key in seen
                    except TypeError:  # an unhashable key: SafeLoader's own error says so
                        continue
                    if again:
                        raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}",
                                                                key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _check_string_keys(value: Any, where: str, path: str) -> None:
    """Every key of every table in `value` (a YAML file's mapping, read at `where`) is a string:
    YAML allows ``1: 2``, which no key of a sweep file is (sorting the keys with strings failed
    as an internal error); `InputError` naming the key's place, e.g. ``instances[0].1``."""
    if isinstance(value, dict):
        for k, v in value.items():
            field = f"{where}.{k}" if where else str(k)
            if not isinstance(k, str):
                raise InputError(f"keys must be strings, got {k!r}", path=path, field=field)
            _check_string_keys(v, field, path)
    elif isinstance(value, list):
        for j, v in enumerate(value):
            _check_string_keys(v, f"{where}[{j}]", path)


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
    if not isinstance(name, str) or not name or any(c in name for c in "/\\\0") or name.startswith("."):
        raise bad("name", f"must be a plain non-empty string usable as a file name, got {_shown(name)}")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise bad("name", f"is {len(name.encode('utf-8', 'surrogatepass'))} bytes long: at most {MAX_NAME_BYTES} "
                          f"(it names the sweep's files)")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise bad("description", "must be a string")
    repeats = _int(data.get("repeats", 1), "repeats", bad, minimum=1, maximum=MAX_REPEATS)
    workers = data.get("workers")
    if workers is not None:
        workers = _int(workers, "workers", bad, minimum=1, maximum=MAX_WORKERS)
    execute = _bool(data.get("execute", False), "execute", bad)
    output = data.get("output")
    if output is not None and (not isinstance(output, str) or not output):
        raise bad("output", "must be a folder path (a string)")
    if output is not None and "\0" in output:
        raise bad("output", f"must be a folder path without a NUL character, got {_shown(output)}")
    figure = data.get("figure")
    if figure is not None and not isinstance(figure, str):
        raise bad("figure", "must be a string")
    budgets = _budgets(data.get("budgets"), "budgets", bad, required=False)
    measure = _measure(data.get("measure", {}), bad)

    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise bad("defaults", "must be a table")
    for k in defaults:
        if k not in _SOLVER_KEYS - {"name", "label"}:
            raise bad(f"defaults.{k}", "unknown key (expected one of slots, time_limit, options, max_length, "
                                       "problems, shared_table)")

    raw_instances = data.get("instances")
    if not isinstance(raw_instances, list) or not raw_instances:
        raise bad("instances", "must be a non-empty list of tables ([[instances]])")
    instances = [_instance_spec(i, entry, bad) for i, entry in enumerate(raw_instances)]
    for spec in instances:
        if spec.budgets is None and not budgets:
            raise bad("budgets", f"missing: give the sweep's budgets (or budgets in {spec.where})")
        if spec.kind != "model" and (spec.execute or (spec.execute is None and execute)):
            key = f"{spec.where}.execute" if spec.execute else "execute"
            raise bad(key, f"execution needs a zoo network: {spec.where} is an instance of kind {spec.kind!r} "
                           f"(use model = \"...\")")

    raw_solvers = data.get("solvers")
    if not isinstance(raw_solvers, list) or not raw_solvers:
        raise bad("solvers", "must be a non-empty list of tables ([[solvers]])")
    solvers = [_solver_spec(i, entry, defaults, bad) for i, entry in enumerate(raw_solvers)]
    _check_default_options(defaults, solvers, bad)
    _check_pipeline_devices(instances, solvers, path, bad)
    _check_generated_sizes(instances, solvers, bad)
    _check_distinct_labels(solvers, bad)
    return SweepConfig(path=path, name=name, description=description, instances=instances, solvers=solvers,
                       budgets=budgets or [], repeats=repeats, workers=workers, execute=execute, output=output,
                       figure=figure, raw=data, measure=measure)


def _check_distinct_labels(solvers: list[SolverSpec], bad: Callable[[str, str], InputError]) -> None:
    """Each solver entry's label is its own: the first entry that repeats an earlier one's label is
    bad input, named (``solvers[j].label``) with the earlier entry it repeats."""
    first: dict[str, int] = {}
    for s in solvers:
        if s.label in first:
            raise bad(f"solvers[{s.index}].label", f"two solver entries are both labelled {s.label!r} "
                                                   f"(this one and solvers[{first[s.label]}]); "
                                                   f"give each a distinct label")
        first[s.label] = s.index


def _measure(v: Any, bad: Callable[[str, str], InputError]) -> dict[str, int]:
    """The ``[measure]`` table: `MEASURE_DEFAULTS` with the file's integers, each in its
    `MEASURE_RANGES` range (time_repeats 1..10^4, warmup 0..10^4, threads 1..1024)."""
    if not isinstance(v, dict):
        raise bad("measure", "must be a table (time_repeats, warmup, threads)")
    out = dict(MEASURE_DEFAULTS)
    for k, value in v.items():
        if k not in MEASURE_DEFAULTS:
            raise bad(f"measure.{k}", f"unknown key (expected one of {', '.join(MEASURE_DEFAULTS)})")
        least, most = MEASURE_RANGES[k]
        out[k] = _int(value, f"measure.{k}", bad, minimum=least, maximum=most)
    return out


def _int(v: Any, key: str, bad: Callable[[str, str], InputError], *, minimum: int = 0,
         maximum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum or (maximum is not None and v > maximum):
        shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
        within = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise bad(key, f"must be an integer {within}, got {shown}")
    return v


def _shown(v: Any) -> str:
    """`v` as repr, cut to 60 characters for a one-line message."""
    return repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."


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
        same = [k for k, a in enumerate(v[:j]) if budget_identity(a) == budget_identity(b)]
        if same:  # one cell twice: the table would hold its row twice (under two keys)
            raise bad(f"{key}[{j}]", f"budget {str(b)!r} is already in the list (as {key}[{same[0]}], "
                                     f"{str(v[same[0]])!r}); give each budget once")
    return list(v)


def budget_identity(budget: int | float | str) -> tuple[str, float]:
    """What a budget of a sweep file (already checked by `_budgets`) means for every instance, so
    that two budgets with one identity are one budget whatever the instance: ``("%", percent)`` for
    a share of the reference peak (``"50%"`` and ``"50.0%"``), ``("size", bytes)`` for a size with
    a unit (``"1KiB"`` and ``"1024B"``), ``("number", n)`` for a plain number, in the instance's
    memory unit (``meta.units.memory``) and rounded down as `parse_budget` rounds it (``20`` and
    ``"20.5"``). Budgets of two kinds are never one here: ``20`` is ``"20MB"`` for a file in MB but
    not for one in bytes, and a share is a size for one instance only (`grid.build_tasks` refuses
    those, in the instance's unit)."""
    if isinstance(budget, str) and budget.strip().endswith("%"):
        return "%", float(budget.strip()[:-1])
    if isinstance(budget, str) and budget.strip()[-1:].isalpha():  # checked: "1.5GB", "800 MiB", "20B"
        return "size", float(parse_size(budget))
    return "number", float(parse_size(budget))


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
        allowed |= MODEL_SIZES
    elif kind == "generate":
        allowed = set(entry)  # the generator's own keyword arguments (checked when it is called)
    for k in entry:
        if k not in allowed:
            raise bad(f"{where}.{k}", f"unknown key for an instance of kind {kind!r}")
    params = {k: v for k, v in entry.items() if k not in _INSTANCE_COMMON - {"bandwidth"}}
    if not isinstance(entry[kind], str) or not entry[kind]:
        raise bad(f"{where}.{kind}", "must be a non-empty string")
    if kind == "model":
        _model_sizes(entry, where, bad)
    if kind == "generate":
        generator(entry["generate"], f"{where}.generate", bad)
        if entry["generate"] == "chain":
            _int(entry.get("L"), f"{where}.L", bad, minimum=1)
        if "seed" in entry:
            _int(entry["seed"], f"{where}.seed", bad)
        name = entry.get("name")
        if "name" in entry and (not isinstance(name, str) or not name):
            raise bad(f"{where}.name", f"must be a non-empty string (the instance's name), got {_shown(name)}")
        _generated_offload(entry, where, bad)
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
    if kind == "model" and problem is not None and problem not in MODEL_PROBLEMS:
        raise bad(f"{where}.problem", f"a model instance is profiled for one of {', '.join(MODEL_PROBLEMS)}, "
                                      f"not {problem!r}")
    return InstanceSpec(i, kind, params, label, tuple(budgets) if budgets else None, execute, problem)


def _generated_offload(entry: dict[str, Any], where: str, bad: Callable[[str, str], InputError]) -> None:
    """A ``generate`` entry with ``problem = "offload"``: an offload generator's instance as it is,
    or a generated chain given the entry's host ``bandwidth`` (bytes/s or "12GB/s", latency 0, as
    a chain file's entry is: `instances.load_instance_spec`); refused, naming the key, when a chain
    has no ``bandwidth`` or the generator makes no chain."""
    if entry.get("problem") != "offload":
        return
    own = generator(entry["generate"], f"{where}.generate", bad)[0]
    if own == "offload":
        return
    hint = "or use generate = \"offload.random_offload\", whose link is derived from the chain"
    if own != "chain":
        raise bad(f"{where}.problem", f"a {own} generator makes no offload instance ({hint})")
    if "bandwidth" not in entry:
        raise bad(f"{where}.bandwidth", f"an offload instance of a generated chain needs a host bandwidth "
                                        f"(e.g. bandwidth = \"12GB/s\"), {hint}")
    from memsched.solvers.units import parse_bandwidth

    try:
        parse_bandwidth(entry["bandwidth"], field=f"{where}.bandwidth")
    except InputError as err:
        raise bad(f"{where}.bandwidth", err.message) from None


#: a zoo network's integer sizes and their ranges (as `memsched profile`'s options)
_MODEL_COUNTS = {"batch": (1, MAX_BATCH), "seq_len": (1, 10**6), "width": (1, 10**6), "depth": (1, 10**4),
                 "classes": (1, 10**6), "vocab": (1, 10**7), "repeats": (1, 10**4), "warmup": (0, 10**4)}


def _model_sizes(entry: dict[str, Any], where: str, bad: Callable[[str, str], InputError]) -> None:
    """The sizes of a ``model`` instance have their types before anything is profiled (a batch of
    ``true`` used to reach torch, whose error was many lines long)."""
    for key, (least, most) in _MODEL_COUNTS.items():
        if key in entry:
            _int(entry[key], f"{where}.{key}", bad, minimum=least)
            if entry[key] > most:
                raise bad(f"{where}.{key}", f"must be at most {most}, got {entry[key]!r}")
    if "seed" in entry:
        _int(entry["seed"], f"{where}.seed", bad, maximum=MAX_SEED)
    side = entry.get("image_size")
    if side is not None and not (isinstance(side, str) and side) and \
            (isinstance(side, bool) or not isinstance(side, int) or side < 1):
        raise bad(f"{where}.image_size", f"must be a positive integer or \"HxW\", got {side!r}")
    dropout = entry.get("dropout")
    if dropout is not None and (isinstance(dropout, bool) or not isinstance(dropout, (int, float))
                                or not 0 <= dropout < 1):
        raise bad(f"{where}.dropout", f"must be a number in [0, 1), got {dropout!r}")
    if "device" in entry and not isinstance(entry["device"], str):
        raise bad(f"{where}.device", f"must be a string (cpu, cuda), got {entry['device']!r}")


def generator(name: Any, key: str, bad: Callable[[str, str], InputError]) -> tuple[str, Callable[..., Any]]:
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
    known = {n for p in registry.PROBLEMS if _has_problem(p) for n in registry.get_problem(p).solvers}
    if name not in known:
        raise bad(f"{where}.name", f"unknown solver {name!r} (known: {', '.join(sorted(known))})")
    src = lambda k: where if k in entry else "defaults"  # noqa: E731  (which table set the key)
    slots = _int(merged.get("slots", 500), f"{src('slots')}.slots", bad, maximum=MAX_SLOTS)
    time_limit = merged.get("time_limit")
    # as --time-limit (`commands._checks.seconds`): finite, > 0, at most a week
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or not 0 < time_limit <= MAX_SECONDS):  # (NaN fails both)
        raise bad(f"{src('time_limit')}.time_limit", f"must be a finite number of seconds > 0 and <= "
                                                     f"{MAX_SECONDS:g} (a week), got {time_limit!r}")
    for table, given in (("defaults", defaults), (where, entry)):  # each table's own, merged or not
        if "options" in given and not isinstance(given["options"], dict):
            raise bad(f"{table}.options", "must be a table of solver options")
    options = merged.get("options", {})
    for table, given in (("defaults", defaults.get("options")), (where, entry.get("options"))):
        if given is not None:
            _spelled_once(given, f"{table}.options", bad)
    if defaults.get("options") and "options" in entry:
        options = {**_not_set_by(defaults["options"], entry["options"]), **entry["options"]}
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
        if not isinstance(problems, list) or not problems or any(p not in registry.PROBLEMS for p in problems):
            raise bad(f"{src('problems')}.problems", f"must list problems among {', '.join(registry.PROBLEMS)}")
        problems = tuple(problems)
        if not _problems_of(name, problems):  # no cell would ever run it
            own = ", ".join(_problems_of(name)) or "none here"
            raise bad(f"{src('problems')}.problems", f"{name} runs on none of {', '.join(problems)} (its problems: "
                                                     f"{own}), so it would run no cell")
    label = entry.get("label", name)
    if not isinstance(label, str) or not label:
        raise bad(f"{where}.label", "must be a non-empty string")
    shared = _bool(merged.get("shared_table", False), f"{src('shared_table')}.shared_table", bad)
    if shared and "shared_table" in entry and \
            not any((p, name) in SHARED_TABLE_SOLVERS for p in _problems_of(name, problems)):
        takers = ", ".join(f"{s} ({p})" for p, s in sorted(SHARED_TABLE_SOLVERS))
        raise bad(f"{where}.shared_table", f"{name} reads no shared table (only {takers} does); remove it")
    if "table_budget" in options:
        raise bad(f"{src('options')}.options.table_budget", "set by the sweep (see shared_table), not an option")
    own = entry.get("options", {}) if isinstance(entry.get("options", {}), dict) else {}
    _check_solver_options(name, options, problems, bad, strict=set(own), where=where)
    return SolverSpec(i, name, label, slots, None if time_limit is None else float(time_limit), dict(options),
                      max_length, problems, shared)


def _spelled_once(options: dict[str, Any], table: str, bad: Callable[[str, str], InputError]) -> None:
    """Each option of the table `table` (``solvers[0].options``) is spelt once: ``workers`` and ``num_workers``
    (or ``seed`` and ``random_seed``) are one option of the exact solvers, refused as ``--option`` refuses
    them (`exact.options.check_spelled_once`), naming the option's name (``solvers[0].options.workers``)."""
    from memsched.solvers.exact.options import check_spelled_once

    try:
        check_spelled_once(options, field=lambda name: f"{table}.{name}")
    except InputError as err:
        raise bad(err.field or table, err.message) from None


def _not_set_by(defaults: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """The options of ``[defaults]`` that a solver entry's `own` options leave as they are: one the entry
    sets, in any spelling (``num_workers`` for ``workers``: `exact.options.ALIASES`), is the entry's."""
    from memsched.solvers.exact.options import ALIASES

    mine = {ALIASES.get(key, key) for key in own}
    return {key: value for key, value in defaults.items() if ALIASES.get(key, key) not in mine}


def _problems_of(name: str, problems: tuple[str, ...] | None = None) -> list[str]:
    """The problems solver `name` runs on: `problems`, else every problem with a solver of that name."""
    return [p for p in registry.PROBLEMS
            if _has_problem(p) and name in registry.get_problem(p).solvers and (problems is None or p in problems)]


def _check_solver_options(name: str, options: dict[str, Any], problems: tuple[str, ...] | None,
                          bad: Callable[[str, str], InputError], *, strict: set[str], where: str) -> None:
    """The options of solver entry `where`: each one it sets itself (`strict`) is a parameter of the
    solver in a problem it runs on, and every known one has that parameter's type. A misspelt option
    would otherwise be ignored by every cell, and a value of the wrong type fail in every cell. An
    option from ``[defaults]`` that this solver does not take is for other solvers (checked in
    `_check_default_options`)."""
    from ..commands._checks import option_list, option_type_error, solver_parameters

    runs_on = _problems_of(name, problems)
    params = [solver_parameters(p, name) for p in runs_on]
    for key, value in options.items():
        field = f"{where if key in strict else 'defaults'}.options.{key}"
        kinds = [ps[key] for ps in params if key in ps]
        if not kinds:
            if key in strict:
                known = option_list(k for ps in params for k in ps if k not in SWEEP_SET_OPTIONS)
                raise bad(field, f"unknown option for {name} (its options: {known})")
            continue
        want = option_type_error(kinds[0], key, value)
        if want is not None:
            raise bad(field, f"must be {want}, got {value!r}")
        for problem in runs_on:
            try:
                check_option_value(problem, name, key, value, options=options)
            except InputError as err:
                raise bad(field, err.message) from None


OptionCheck = Callable[[Any, str, dict[str, Any]], None]
"""A solver's check of one option's value, called as ``check(value, key, options)``; `options`: the
other options given to the same solver (``devices``, ``schedule``), for the checks that read them."""


def _instance_free_checks() -> dict[tuple[str, str, str], OptionCheck]:
    """(problem, solver, option) -> the solver's own check of the option's value that needs no
    instance (`check_option_value`), called as ``check(value, key, options)``; imported when first used."""
    from memsched.solvers.chain.milp import check_backend as chain_backend
    from memsched.solvers.exact.cpsat_runner import check_parameters
    from memsched.solvers.exact.milp_runner import check_backend_name
    from memsched.solvers.graph.milp import check_backend as graph_backend
    from memsched.solvers.offload.baselines import _at_least_one
    from memsched.solvers.offload.cpsat import check_scale_value
    from memsched.solvers.offload.milp import BACKENDS as OFFLOAD_MILP_BACKENDS
    from memsched.solvers.pipeline import SOLVERS as PIPELINE_SOLVERS
    from memsched.solvers.pipeline.dp import _defaults as pipeline_settings
    from memsched.solvers.pipeline.interleave import positive_count
    from memsched.solvers.pipeline.milp import BACKENDS as PIPELINE_MILP_BACKENDS

    def parameters(value: Any, _key: str, _options: dict[str, Any]) -> None:
        check_parameters(value)

    def scale(value: Any, _key: str, _options: dict[str, Any]) -> None:
        check_scale_value(value)

    def devices(value: Any, _key: str, _options: dict[str, Any]) -> None:
        pipeline_settings(value, "1f1b", None)  # >= 1 (the other two are checked under their own keys)

    def schedule(value: Any, _key: str, _options: dict[str, Any]) -> None:
        pipeline_settings(1, value, None)  # one of `pipeline.schedule.SCHEDULES`, in any case

    def micro_batches(value: Any, _key: str, options: dict[str, Any]) -> None:
        # >= 1, and under 1F1B >= devices whatever the instance: the devices and schedule given with
        # it when valid (each refused under its own key otherwise), else 1 device (no comparison)
        # and the solvers' default schedule
        pipeline_settings(*_valid_pipeline_settings(options, pipeline_settings), value)

    def pipeline_backend(value: Any, _key: str, _options: dict[str, Any]) -> None:
        check_backend_name(value, PIPELINE_MILP_BACKENDS)

    def one(check: Callable[[Any, str], None]) -> OptionCheck:
        return lambda value, key, _options: check(value, key)

    return {("chain", "cpsat", "parameters"): parameters, ("offload", "offload-exact", "parameters"): parameters,
            ("chain", "periodic", "segments"): one(positive_count),
            ("offload", "vdnn", "lookahead"): one(_at_least_one),
            ("offload", "offload-prefix", "max_lookahead"): one(_at_least_one),
            **{("offload", name, "scale"): scale for name in ("cpsat", "milp", "exact-combined", "offload-exact")},
            **{("pipeline", name, key): check for name in PIPELINE_SOLVERS
               for key, check in (("devices", devices), ("schedule", schedule), ("micro_batches", micro_batches))},
            ("chain", "milp", "backend"): lambda value, _key, _options: chain_backend(value),
            ("join", "milp", "backend"): lambda value, _key, _options: chain_backend(value),  # the chain's backends
            ("offload", "milp", "backend"):
                lambda value, _key, _options: check_backend_name(value, OFFLOAD_MILP_BACKENDS),
            **{("pipeline", name, "backend"): pipeline_backend for name in ("milp", "dag-milp")},
            ("graph", "checkmate", "backend"): lambda value, _key, _options: graph_backend(value)}


def _valid_pipeline_settings(options: dict[str, Any],
                             check: Callable[[Any, Any, Any], tuple[int, str, int | None]]) -> tuple[int, str]:
    """(devices, schedule) of a pipeline solver's `options` for checking its ``micro_batches``: each
    one given that the solvers' own `check` (`pipeline.dp._defaults`) takes, else 1 device (then
    any count >= 1 passes) and the solvers' default schedule, 1F1B."""
    devices, schedule = options.get("devices", 1), options.get("schedule", "1f1b")
    try:
        devices = check(devices, "1f1b", None)[0]
    except (InputError, TypeError, ValueError):
        devices = 1
    try:
        schedule = check(1, schedule, None)[1]
    except (InputError, TypeError, ValueError):
        schedule = "1f1b"
    return devices, schedule


def check_option_value(problem: str, solver: str, key: str, value: Any, *,
                       options: dict[str, Any] | None = None) -> None:
    """The part of a solver's check of option `key` that needs no instance, by the solver's own
    code (what ``memsched solve --option`` meets when it calls the solver): CP-SAT ``parameters``
    (`exact.cpsat_runner.check_parameters`: names, types, CP-SAT's ranges), periodic's
    ``segments`` (1..L for a chain of L stages: at least 1 for every chain,
    `pipeline.interleave.positive_count`), vdnn's ``lookahead`` and offload-prefix's
    ``max_lookahead`` (`offload.baselines._at_least_one`), the offload CP-SAT models' ``scale``
    (positive and finite: `offload.cpsat.check_scale_value`; its upper limit depends on the
    instance's durations), the MILP ``backend`` of every milp and of graph checkmate, and a pipeline
    solver's ``devices`` (at least 1), ``schedule`` (one of `pipeline.schedule.SCHEDULES`, in any
    case) and ``micro_batches`` (at least 1, and under 1F1B, the default ``schedule``, at least its
    ``devices``), by the pipeline solvers' own check of them (`pipeline.dp._defaults`), the
    ``devices`` and ``schedule`` that ``micro_batches`` is held to read from `options`, the other
    options given to the same solver (not compared without a valid ``devices``). A value wrong
    for every instance is then refused when a sweep file is read (`InputError` of the solver,
    naming the option) instead of making every cell ``unsupported``; one wrong for some instances
    only (more segments than a chain's stages) is left to the cells. Values already of the
    option's type (`option_type_error`); other options are not checked here."""
    check = _instance_free_checks().get((problem, solver, key))
    if check is not None:
        check(value, key, options or {})


def _check_default_options(defaults: dict[str, Any], solvers: list[SolverSpec],
                           bad: Callable[[str, str], InputError]) -> None:
    """Each option of ``[defaults]`` is taken by at least one solver of the file (else it is misspelt)."""
    options = defaults.get("options", {})
    if not isinstance(options, dict):
        return
    from ..commands._checks import options_taken

    known = options_taken((p, s.name) for s in solvers for p in _problems_of(s.name, s.problems)) - SWEEP_SET_OPTIONS
    for key in options:
        if key not in known:
            raise bad(f"defaults.options.{key}", f"no solver of this file takes this option (theirs: "
                                                 f"{', '.join(sorted(known)) or 'none'})")


def _instance_problem(spec: InstanceSpec, config_path: Path, bad: Callable[[str, str], InputError]) -> str | None:
    """The problem of instance `spec` as known before it is loaded: its entry's ``problem``, else its
    generator's, chain for a zoo network (profiled for the chain unless told), or that of its file,
    read from the file's head as the loader reads it (`formats.detect_problem`); None when the file
    cannot be read here (a missing file: its loader says so when the sweep runs)."""
    if spec.problem is not None:
        return spec.problem
    if spec.kind == "model":
        return "chain"
    if spec.kind == "generate":
        return generator(spec.params["generate"], f"{spec.where}.generate", bad)[0]
    from memsched.solvers.formats import detect_problem

    from .instances import resolve_path

    text = str(spec.params[spec.kind])
    path = EXAMPLES / f"{text}.json" if spec.kind == "example" else resolve_path(text, config_path)
    if text == "-" or not path.is_file():
        return None
    try:
        return detect_problem(path)
    except (InputError, OSError, ValueError):  # not an instance file: its loader says why when the sweep runs
        return None


def _may_run_on(spec: InstanceSpec, problem: str | None, solver: SolverSpec,
                bad: Callable[[str, str], InputError]) -> bool:
    """Whether solver entry `solver` may run on instance `spec` of `problem` (None: not known before
    it is loaded, so it may): a solver of that problem, among the entry's ``problems``, and not
    skipped by its ``max_length`` (read from a generated instance's parameters; other sizes are only
    known once loaded)."""
    if problem is None:
        return True
    if problem not in _problems_of(solver.name, solver.problems):
        return False
    found = _generated_size(spec, bad) if spec.kind == "generate" and solver.max_length is not None else None
    return found is None or solver.max_length is None or found[1] <= solver.max_length


def _check_pipeline_devices(instances: list[InstanceSpec], solvers: list[SolverSpec], config_path: Path,
                            bad: Callable[[str, str], InputError]) -> None:
    """A solver entry that runs on pipeline instances only (at least one) has ``devices`` among its
    options, its own or those of ``[defaults]``: every pipeline solver refuses to run without it
    (`pipeline.dp._defaults`), so each of its cells would be ``unsupported``. Refused naming
    ``solvers[i].options.devices``. An entry that may also run on an instance of another problem
    (``cpsat`` on chain and pipeline instances, or on a file that cannot be read before the sweep
    runs) is left to its cells, as a value that only some instances cannot take."""
    from memsched.solvers.pipeline.dp import _defaults as pipeline_settings

    unset = [s for s in solvers if "devices" not in s.options and "pipeline" in _problems_of(s.name, s.problems)]
    if not unset:  # no instance file is read
        return
    problems = [_instance_problem(spec, config_path, bad) for spec in instances]
    for s in unset:
        runs_on = {p for spec, p in zip(instances, problems) if _may_run_on(spec, p, s, bad)}
        if runs_on != {"pipeline"}:
            continue
        try:
            pipeline_settings(None, "1f1b", None)
        except InputError as err:
            raise bad(f"solvers[{s.index}].options.devices",
                      f"missing: every instance {s.label} runs on is a pipeline instance, and {err.message} "
                      f"(give devices = P in this entry's options or in [defaults] options)") from None


def _generated_size(spec: InstanceSpec, bad: Callable[[str, str], InputError]) -> tuple[str, int] | None:
    """(key, size) of a generated instance read from its parameters, before anything is built:
    ``lengths`` (a join: the stages of all branches), ``L`` (stages; a graph's ``linear_graph``
    has 2L + 1 nodes) or ``n`` (nodes); None when it has none of them."""
    where, params = spec.where, spec.params
    if "lengths" in params:
        lengths = params["lengths"]
        if not isinstance(lengths, list) or not lengths:
            raise bad(f"{where}.lengths", f"must be a non-empty list of branch lengths, got {lengths!r}")
        for j, v in enumerate(lengths):
            _int(v, f"{where}.lengths[{j}]", bad, minimum=1)
        return "lengths", int(sum(lengths))
    for key in ("L", "n"):
        if key in params:
            size = _int(params[key], f"{where}.{key}", bad, minimum=1)
            if key == "L" and str(params["generate"]).endswith("linear_graph"):
                size = 2 * size + 1
            return key, size
    return None


def _check_generated_sizes(instances: list[InstanceSpec], solvers: list[SolverSpec],
                           bad: Callable[[str, str], InputError]) -> None:
    """A generated instance is held to the limits of a file given to `memsched solve`
    (`size_error`) for every solver of the file that runs on it (not skipped by its
    ``max_length``), read from its parameters before anything is built, so that no cell is left
    to run for hours or fill the memory. (Instances read from files are held to the same limits
    once read, and so is every generated instance once built, those of a generator without ``L``,
    ``n`` or ``lengths`` included: `grid.check_file_sizes`.)"""
    for spec in instances:
        if spec.kind != "generate":
            continue
        found = _generated_size(spec, bad)
        if found is None:  # its size is only known once built: `grid.check_file_sizes` holds it to the limits
            continue
        key, size = found
        problem = spec.problem or generator(spec.params["generate"], f"{spec.where}.generate", bad)[0]
        for s in solvers:
            if problem not in _problems_of(s.name, s.problems) or (s.max_length is not None and size > s.max_length):
                continue
            why = size_error(problem, size, s, "generate a smaller instance")
            if why is not None:
                raise bad(f"{spec.where}.{key}", why)


def size_error(problem: str, size: int, solver: SolverSpec, hint: str) -> str | None:
    """Why `solver` is not run on a `problem` instance of `size` stages, nodes or layers: more than
    `memsched solve` (or `memsched partition`) allows (`commands._checks.work_limit`: 1000 chain,
    join or offload stages, 2000 graph nodes, 1000 for the graph solvers that build a model, the
    pipeline layers whose DPs take at most 10^7 steps on the entry's ``devices``, its ``replication``
    counted); None when
    within them. `hint`: what else to do than giving the solver a ``max_length``."""
    from ..commands._checks import work_limit

    devices = solver.options.get("devices") if problem == "pipeline" else None
    replication = problem == "pipeline" and bool(solver.options.get("replication"))
    limit = work_limit(problem, solver.name, devices, replication=replication)
    if limit is None or size <= limit:
        return None
    if problem == "graph":
        what = f"{size} graph nodes, more than the {limit}"
    elif problem == "pipeline":
        steps = ("layers^2 x devices^2 DP steps, with replication" if replication
                 else "layers^2 x min(devices, layers) DP steps")
        what = f"{size} pipeline layers, more than the {limit} (on {devices} devices: {steps})"
    else:
        what = f"{'the branches have' if problem == 'join' else 'the chain has'} {size} stages, more than the {limit}"
    return f"{what} that {solver.label} handles in minutes (give it a max_length, or {hint})"


def _has_problem(problem: str) -> bool:
    try:
        registry.get_problem(problem)
    except ImportError as err:
        if isinstance(err.__cause__ or err.__context__, KeyboardInterrupt):  # Ctrl-C in a native module's init
            raise KeyboardInterrupt from err
        return False
    return True


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
