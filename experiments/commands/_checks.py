"""Checks of command-line input made before any work starts, each failing with one line.

- argparse types for numbers (`seconds`, `latency`, `count`, `cost`): finite, in range, so
  that NaN, infinities, negative or zero time limits are usage errors (exit 2);
- `check_output_file` / `check_output_dir`: an output path is checked before a long solve
  (not empty, not a folder, its folder exists and is writable), so nothing is half written;
  `check_outputs`: also none of the command's input files, nor the file of another output;
- `check_not_empty`: a name or path given as an empty string (an input path would read as ".");
- `check_options`: ``--option KEY=VALUE`` pairs against the keyword parameters of the solver
  (unknown keys list the valid ones; values must have the parameter's type);
- `check_work`: instances too large for the solvers to finish in minutes are refused with the
  limit and the reason (`MAX_STAGES`, `MAX_DP_STEPS`), never left to run for hours.
"""

from __future__ import annotations

import argparse
import inspect
import math
import numbers
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsched.solvers.errors import InputError, flag
from memsched.solvers.exact.options import MAX_SECONDS
from memsched.solvers.exact.options import MAX_SEED as MAX_SOLVER_SEED
from memsched.solvers.exact.options import MAX_WORKERS as MAX_SOLVER_WORKERS
from memsched.solvers.units import MAX_BYTES

if TYPE_CHECKING:  # at run time read from there when asked (`__getattr__`): a chain solve loads no pipeline module
    from memsched.solvers.pipeline.limits import MAX_DP_STEPS, dp_steps  # noqa: F401 (re-exported)

#: the most stages (sum over branches for joins) the chain, join and offload solvers accept:
#: the rotor DP's least-memory table costs O(L^3) (about 14 s at L = 2000 on one core; Revolve
#: takes 12 s at L = 900 and 87 s at L = 2000)
MAX_STAGES = 1000
#: the most nodes of a graph for the heuristics (dtr, sqrt, greedy: about 7 s at 2000 nodes;
#: dtr overflows Python's recursion limit near 6000) ...
MAX_NODES = 2000
#: ... and for the solvers that build a model with about n^2 variables (checkmate, cpsat,
#: checkmate-approx: 67 s at 1000 nodes) or recurse along the forward spine (griewank)
MAX_MODEL_NODES = 1000
_MODEL_SOLVERS = ("checkmate", "cpsat", "checkmate-approx", "griewank")
# (the pipeline DPs' limit, `MAX_DP_STEPS`, and `dp_steps` live in `solvers.pipeline.limits`, where the
# pipeline runner of models/ reads them too; they are read from there when asked: `__getattr__`)
#: the largest H-Revolve chain (its table costs about O(L^3): 19 s at L = 1000 on one core)
MAX_HREVOLVE_LENGTH = 500
#: the most H-Revolve storage levels: each keeps its own tables of about (L + 1) x (L + 1) floats
#: (4 MB at L = 500), so the level count, not only L, bounds the memory (real hierarchies have 2-4)
MAX_HREVOLVE_LEVELS = 16
#: the largest integer option or count accepted (sizes of tables and loops) ...
MAX_COUNT = 10**6
#: the most relaxed budgets of rotor-offload's ``grid`` (`offload.combined.MAX_GRID`: one rotor DP
#: each, about 0.05 s on the 101-stage LSTM bench chain: 500 take about 30 s without ``--time-limit``)
MAX_GRID = 500
#: ... but for these options: the join `exact` solver's A* keeps up to `max_states` states (about
#: 0.5 KB and 20 us each: its default 2 * 10^6 is about 1 GB and 45 s; 10^7 about 5 GB and 4 min);
#: the exact solvers' backend threads (``workers``: CP-SAT's ``num_workers`` range, `MAX_SOLVER_WORKERS`)
#: and their ``seed`` (CP-SAT's ``random_seed``, a 32-bit signed integer; 0..`MAX_SOLVER_SEED` for
#: every solver that takes one), rotor-offload's ``grid``
MAX_INT_OPTION = {"max_states": 10**7, "workers": MAX_SOLVER_WORKERS, "seed": MAX_SOLVER_SEED, "grid": MAX_GRID}
#: integer options whose least value is 1, not 0 (counts of things that must exist: the solvers
#: refuse 0 too, and the message then gives the range they accept)
MIN_INT_OPTION = {"max_computations": 1, "max_stages": 1, "max_states": 1, "workers": 1,
                  "grid": 1,  # rotor-offload's relaxed budgets: 0 would try none
                  "segments": 1,  # periodic checkpointing's segment count
                  "lookahead": 1, "max_lookahead": 1}  # vdnn's, offload-prefix's backward steps ahead
#: the largest float option accepted (a cost, factor or ratio: `cost` has the same range) ...
MAX_FLOAT_OPTION = 1e15
#: ... and the float options that must be > 0, not >= 0 (the exact offloading models' ticks per time unit)
POSITIVE_FLOAT_OPTIONS = frozenset({"scale"})
#: integer options that are sizes in the instance's memory unit (bytes by default), not counts: here in
#: 1..`units.MAX_BYTES`, the widest range of any unit; the solver then checks 1 PiB in the instance's unit
#: (rotor's ``table_budget``: `solvers.chain.dp.check_table_budget`, with this wording for a file in bytes)
BYTES_OPTIONS = frozenset({"table_budget"})
#: options whose values only the solver checks, on the command line (`check_options`) as in Python
#: (`memsched.api`): a size's range and wording depend on the instance's memory unit, which
#: `option_type_error` does not know (``table_budget=0`` on a file in kB is "a number of kB")
SOLVER_CHECKED = BYTES_OPTIONS
#: the most timed executions of a step (``run --time-repeats``, a sweep file's ``[measure]
#: time_repeats``) and unwatched warm-up runs (``[measure] warmup``)
MAX_TIME_REPEATS = 10**4
#: the largest batch of every command (profile, run, export-graph ``--batch``, a sweep's ``batch``) and
#: max-batch's largest ``--limit``, so that a batch max-batch answers is one `run --batch` takes (2^24:
#: beyond, the networks' sizes overflow torch's); `models.zoo.registry.SIZE_RANGES` gives a recorded
#: ``meta.batch`` the same range
MAX_BATCH = 2**24
#: the largest seed (``--seed``, a sweep's ``seed``), as ``memsched.run(seed=)`` takes it
MAX_SEED = 2**32 - 1
#: the most torch CPU threads (``--threads``, a sweep file's ``[measure] threads``): above the
#: hardware threads of the largest machines
MAX_THREADS = 1024
#: the most local worker processes of a sweep (``sweep --workers``, a sweep file's ``workers``,
#: ``memsched.sweep(workers=)``): each is a process of its own (about 35 MB once memsched is
#: imported, hundreds with the exact solvers' libraries), so a typo (10000) would start
#: thousands; 512 is above the cores of the largest machines
MAX_WORKERS = 512
#: keyword parameters that are not user options (the solver's plumbing)
_PLUMBING = {"options", "deadline", "seed", "slots", "time_limit"}


# --------------------------------------------------------------------------- argparse types
def seconds(text: str) -> float:
    """A time limit: a positive finite number of seconds (at most a week)."""
    return _float(text, "seconds", low=0.0, strict=True, high=MAX_SECONDS)


def latency(text: str) -> float:
    """A link latency: a finite number of seconds >= 0 (at most a day)."""
    return _float(text, "seconds", low=0.0, strict=False, high=86400.0)


def cost(text: str) -> float:
    """A cost or factor: a finite number >= 0."""
    return _float(text, None, low=0.0, strict=False, high=MAX_FLOAT_OPTION)


def count(low: int = 1, high: int = MAX_COUNT) -> Callable[[str], int]:
    """An argparse type for an integer in low..high."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def _float(text: str, unit: str | None, *, low: float, strict: bool, high: float) -> float:
    """`text` as a float in [low, high] (above `low` when `strict`; "-0" is 0.0); else an `argparse.ArgumentTypeError`
    saying "expected a number of `unit`" ("expected a number" when `unit` is None: a plain number)."""
    try:
        value = float(text)
    except ValueError:
        what = "a number" if unit is None else f"a number of {unit}"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value) or value < low or (strict and value == low) or value > high:
        side = f"> {low:g}" if strict else f">= {low:g}"
        raise argparse.ArgumentTypeError(f"must be a finite number {side} and <= {high:g}, got {text!r}")
    return value + 0.0  # "-0" is 0.0, not -0.0 (which a result or JSON would print as -0.0)


# --------------------------------------------------------------------------- names
def check_not_empty(value: str | None, field: str, expected: str, *, name: bool = False) -> None:
    """`value` (None: not given) is no empty string (with `name`, no blank one either: a solver or network
    name; a path of spaces is a file name like another): an `InputError` "FIELD: is empty, expected
    `expected`" otherwise, exit 2. An empty path would be read as the current folder (".: is a directory")
    and an empty name would fall back to a default or be named as the unknown value '' (or None)."""
    if value is not None and (value == "" or (name and not value.strip())):
        raise InputError(f"is empty, expected {expected}", field=field)


# --------------------------------------------------------------------------- outputs
def check_output_file(path: str | None, field: str) -> None:
    """`path` can be written: not empty, not a folder, in an existing writable folder. ``-`` is an
    ordinary file name here (no output option writes to standard output: `--json` and the commands
    without ``-o`` print there). A link is followed as `jsonio.write_atomic` follows it: the file it
    names (dangling or not) must lie in an existing writable folder, so that a link into a missing
    or read-only folder is refused here, naming `field`, not after the work. An existing target that
    is no regular file (``/dev/null``, ``/dev/stdout``, a pipe: ``-o >(cmd)``) is written directly
    and accepted as it is."""
    if path is None:
        return
    if path == "":
        raise InputError("is empty, expected a file name", field=field)
    if _is_special_file(path):
        return
    target = Path(path)
    try:  # a name the system refuses (over 255 bytes: ENAMETOOLONG) is bad input, not an internal error
        if target.is_dir() or str(path).endswith(os.sep):
            raise InputError("is a folder, expected a file name", path=str(path), field=field)
        link = target.is_symlink()
        if link:  # the file replaced is the link's target (write_atomic), in the target's folder
            target = Path(os.path.realpath(path))
        folder = target.parent if str(target.parent) else Path(".")
        missing = not folder.is_dir()
    except OSError as err:
        raise InputError(f"cannot be used as a file name ({err.strerror or err})", path=_shown(path),
                         field=field) from None
    where = f"links to {str(target)!r}, whose folder" if link else "folder"
    if missing:
        raise InputError(f"{where} {str(folder)!r} does not exist", path=str(path), field=field)
    if not os.access(folder, os.W_OK) or not _can_create_in(folder):
        raise InputError(f"{where} {str(folder)!r} is not writable", path=str(path), field=field)


def _can_create_in(folder: Path) -> bool:
    """Whether a file can be created in the existing folder `folder`, tried as `jsonio.write_atomic` will
    write: a fresh temporary file made there and removed at once (never left behind). `os.access` alone
    says yes to root for any folder, and to anyone for ``/proc`` or ``/sys``, where nothing can be made."""
    import contextlib
    import tempfile  # (here: the rest of this module needs neither)

    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".memsched-probe.", suffix=".tmp")
    except OSError:
        return False
    try:
        os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return True


def _shown(path: str, limit: int = 80) -> str:
    """`path` as an error message names it: cut to `limit` characters with an ellipsis when longer (a name
    the system refuses as too long would fill the line)."""
    return path if len(path) <= limit else f"{path[:limit - 3]}..."


def _is_special_file(path: str) -> bool:
    """True when `path` (links followed) exists and is neither a regular file nor a folder: a device
    or a pipe (``/dev/null``, ``/dev/stdout``, ``/dev/fd/63``), which `jsonio.write_atomic` writes
    directly. ``os.stat``, not `os.path.realpath`: a ``/dev/fd`` link to a pipe resolves to no path."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a link loop, a NUL in the name: checked as a file name
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_output_dir(path: str | None, field: str, *, writable: bool = True) -> None:
    """`path` is a folder or can be made one: not empty, not an existing file, nor under one, and
    (`writable`) its innermost existing folder can be written. ``writable=False`` for a command
    that only reads the folder (``memsched sweep --list``, ``--verify``): a read-only one is fine."""
    if path is None:
        return
    if path == "":
        raise InputError("is empty, expected a folder name", field=field)
    for p in [Path(path), *Path(path).parents]:
        try:
            exists = p.exists()
        except OSError as err:  # a name too long: no folder can be made there
            raise InputError(f"not a usable folder: {err.strerror}", path=str(path)[:80], field=field) from None
        if exists:
            if not p.is_dir():
                raise InputError(f"{str(p)!r} is a file, expected a folder", path=str(path), field=field)
            if writable and (not os.access(p, os.W_OK) or not _can_create_in(p)):
                raise InputError(f"folder {str(p)!r} is not writable", path=str(path), field=field)
            return


def check_outputs(outputs: Sequence[tuple[str, str | None]], inputs: Sequence[tuple[str, str | None]] = ()) -> None:
    """Each output ``(option, path)`` (path None: not given) can be written (`check_output_file`), is
    none of the command's input files ``(role, path)`` (writing it would destroy the input; ``-``,
    standard input, and a missing input are skipped) and not the file of an output before it (one
    would replace the other), compared with `same_file`. `InputError` naming the option otherwise:
    called before any work, so that nothing is read, solved or written first. An input given as an
    empty string is refused first, naming its role (`check_not_empty`): read, it would be the
    current folder ("."), a message that names neither the file nor the option."""
    for role, source in inputs:
        check_not_empty(source, role, "a file name")
    given: list[tuple[str, str]] = []
    for field, path in outputs:
        if path is None:
            continue
        check_output_file(path, field)
        for role, source in inputs:
            if source is not None and source != "-" and os.path.exists(source) and same_file(path, source):
                which = f"the input {role}" if source == path else f"the input {role} {source!r} under another name"
                raise InputError(f"is {which}: writing it would destroy the input", path=path, field=field)
        for other_field, other in given:
            if same_file(path, other):
                raise InputError(f"same file as {other_field}", path=path, field=field)
        given.append((field, path))


def same_file(path: str, other: str) -> bool:
    """True when writing `path` replaces the file `other`: equal once resolved (links followed), or
    one existing file under two names (`os.path.samefile`: hard links, case-insensitive systems). An
    existing `path` that is no regular file (``/dev/null``, ``/dev/stdout``, a pipe) is written,
    never replaced (`jsonio.write_atomic`), so it is never the same file."""
    try:
        if os.path.exists(path) and not os.path.isfile(path):
            return False
        if Path(path).resolve() == Path(other).resolve():
            return True
        return os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other)
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL in the name: not comparable
        return False


# --------------------------------------------------------------------------- solver options
def solver_parameters(problem: str, solver: str) -> dict[str, str]:
    """The options a solver takes: name -> type ("int", "float", "bool", "str" or another
    annotation), read from its keyword parameters (and the exact layer's `ExactOptions`)."""
    from memsched.solvers import registry

    fn = registry.get_solver(problem, solver)
    out: dict[str, str] = {}
    exact = getattr(fn, "exact_layer", False)
    if exact:
        from memsched.solvers.exact.options import ALIASES, ExactOptions

        # the declared type ("float | None" -> "float"), not the default's (None for memory_gb)
        out.update({k: str(f.type).split("|")[0].strip() for k, f in ExactOptions.__dataclass_fields__.items()})
        out.update({alias: out[name] for alias, name in ALIASES.items()})
    for target in (fn, getattr(fn, "__wrapped__", None)):
        if target is None:
            continue
        for p in list(inspect.signature(target).parameters.values())[2:]:  # after (instance, budget)
            text = str(p.annotation) if p.annotation is not p.empty else type(p.default).__name__
            plumbing = p.name in _PLUMBING and not (p.name == "seed" and "SolveResult" not in text)
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and not plumbing:
                out[p.name] = text.split("|")[0].strip()
    for name in options_not_taken(problem, solver):
        out.pop(name, None)
    for key in ("slots", "time_limit"):
        out.pop(key, None)  # the command's own --slots and --time-limit
    return out


def options_not_taken(problem: str, solver: str) -> set[str]:
    """The shared options of the exact layer (`ExactOptions`) that `solver` declares it does not use
    (``options_not_taken``: join `exact`'s ``workers``, ``seed``, ``verbose`` and ``memory_gb``, no backend
    and one thread; ``memory_gb`` on every CP-SAT model, whose memory limit does not hold), with their
    older spellings (`ALIASES`); empty for a solver outside the exact layer."""
    from memsched.solvers import registry
    from memsched.solvers.exact.options import ALIASES

    fn = registry.get_solver(problem, solver)
    if not getattr(fn, "exact_layer", False):
        return set()
    keys = set(getattr(fn, "options_not_taken", ()))
    return keys | {alias for alias, target in ALIASES.items() if target in keys}


def options_taken(solvers: Iterable[tuple[str, str]]) -> set[str]:
    """The option names that at least one of the (problem, solver) pairs takes (`solver_parameters`):
    an option outside it is misspelt, as every one of those solvers would ignore it."""
    return {key for problem, name in solvers for key in solver_parameters(problem, name)}


#: options that the commands set with their own flags
FLAGS = {"slots": "--slots", "time_limit": "--time-limit", "devices": "--devices", "schedule": "--schedule",
         "micro_batches": "--micro-batches"}


def option_list(names: Iterable[str]) -> str:
    """The option names for a message, sorted, without the older spellings (`ALIASES`)."""
    from memsched.solvers.exact.options import ALIASES

    return ", ".join(sorted(set(names) - set(ALIASES))) or "none"


def check_options(problem: str, solver: str, options: dict[str, Any]) -> None:
    """Every ``--option`` key is a parameter of the solver (not one the command sets with its
    own flag, `FLAGS`) and its value has the parameter's type. A shared option of the exact layer
    that the solver declares it does not use (`options_not_taken`: ``memory_gb`` for a CP-SAT model)
    is refused naming ``--option KEY``, as an unknown one. The value of a `SOLVER_CHECKED` option is left to
    the solver, whose message names the instance's memory unit."""
    valid = solver_parameters(problem, solver)
    takes = option_list(set(valid) - set(FLAGS))  # what --option takes: not the keys the command's flags set
    for key, value in options.items():
        field = f"--option {key}"
        if key in FLAGS:
            raise InputError(f"{key} is set with {FLAGS[key]}, not --option", field="--option")
        if key not in valid and key in options_not_taken(problem, solver):  # a shared option it does not use
            raise InputError(f"unknown option {key!r} for {solver}, which does not use it (its options: "
                             f"{takes})", field=field)
        if key not in valid:
            raise InputError(f"unknown option {key!r} for {solver} (its options: {takes})",
                             field="--option")
        if key in SOLVER_CHECKED:  # the solver checks it in the instance's memory unit, as memsched.solve does
            continue
        want = option_type_error(valid[key], key, value)
        if want is not None:
            raise InputError(f"must be {want}, got {value!r}", field=field)
        options[key] = plain_option(valid[key], value)


def option_type_error(kind: str, key: str, value: Any) -> str | None:
    """None when `value` has the option's type `kind` (as `solver_parameters` gives it) and range;
    else what it must be, stating the range checked: "an integer in 0..1000000" (integers from 0,
    or the option's `MIN_INT_OPTION`, up to `MAX_COUNT`, or its `MAX_INT_OPTION`: ``workers`` 1..10000,
    ``seed`` 0..2^31-1, ``grid`` 1..`MAX_GRID`; an older spelling,
    `ALIASES`, has the range of its option), "a finite number >= 0 and <= 1e+15" (floats up to
    `MAX_FLOAT_OPTION`, > 0 for `POSITIVE_FLOAT_OPTIONS`), sizes in bytes (`BYTES_OPTIONS`) in
    1..`MAX_BYTES` with the solvers' own wording. Other kinds are not checked. Numbers are any
    `numbers.Integral` ("int") or `numbers.Real` ("float"), numpy's included, never a bool; a "bool" is
    a bool or a numpy bool (`is_bool`); `plain_option` turns an accepted one into a Python int, float
    or bool for the solver."""
    from memsched.solvers.exact.options import ALIASES

    name = ALIASES.get(key, key)  # num_workers, threads: workers; random_seed: seed
    integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)  # np.int64 too, never a bool
    if kind == "bool":
        ok, want = is_bool(value), "true or false"
    elif kind == "int" and name in BYTES_OPTIONS:
        ok = integral and 1 <= value <= MAX_BYTES
        want = f"a number of bytes, an integer in 1..{MAX_BYTES}"
    elif kind == "int":
        low = MIN_INT_OPTION.get(name, 0)
        high = MAX_INT_OPTION.get(name, MAX_COUNT)
        ok = integral and low <= value <= high
        want = f"an integer in {low}..{high}"
    elif kind == "float":  # np.float32, np.int64 too; NaN fails the comparisons
        positive = name in POSITIVE_FLOAT_OPTIONS
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value <= MAX_FLOAT_OPTION \
            and not (positive and value == 0)
        want = f"a finite number {'>' if positive else '>='} 0 and <= {MAX_FLOAT_OPTION:g}"
    elif kind == "str":
        ok, want = isinstance(value, str), "a string"
    else:
        return None
    return None if ok else want


def plain_option(kind: str, value: Any) -> Any:
    """`value` (accepted by `option_type_error` for the option's type `kind`) as the solver should get it:
    a numpy integer, float or bool (``np.int64(3)`` from ``np.arange``, ``np.True_`` from a comparison)
    as a Python int, float or bool, so that solvers, their details and JSON see plain values; anything
    else unchanged."""
    if is_bool(value):
        return bool(value)
    if kind == "int" and isinstance(value, numbers.Integral):
        return int(value)
    if kind == "float" and isinstance(value, numbers.Real):
        return float(value)
    return value


def is_bool(value: Any) -> bool:
    """True for a bool or a numpy bool (``np.True_``: an element of a boolean array, a comparison of numpy
    numbers), which is no `numbers.Integral` and no subclass of bool. numpy is not imported for it: a value
    can be a numpy bool only once numpy is (the command line's start stays free of it)."""
    if isinstance(value, bool):
        return True
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.bool_)


# --------------------------------------------------------------------------- sizes
def stage_count(problem: str, instance: Any) -> int:
    """L (chains, offloading), the sum of L_b (joins), the nodes (graphs), the layers (pipelines)."""
    if problem == "join":
        return int(sum(instance.lengths))
    if problem == "graph":
        return int(instance.n)
    return int(instance.length)


def work_limit(problem: str, solver: str, devices: int | None = None, *, replication: bool = False) -> int | None:
    """The most stages (chain, offload; join: of all branches), graph nodes or pipeline layers
    (`stage_count`) that `solver` handles in minutes: `MAX_STAGES`, `MAX_NODES` (`MAX_MODEL_NODES`
    for the solvers that build a model), and for a pipeline on `devices` devices the most layers
    whose DPs take at most `MAX_DP_STEPS` steps: layers^2 x min(devices, layers) (a straight
    pipeline uses at most one device per layer, and the DPs stop there: `pipeline.dp.useful_devices`),
    or layers^2 x devices^2 with `replication` (the DPs try every replica count r <= d for every
    d <= devices: O(L^2 P^2)). None: no limit (store-all, checkpoint-all, a pipeline without a
    device count)."""
    if problem in ("chain", "offload", "join"):
        return None if solver == "store-all" else MAX_STAGES
    if problem == "graph":
        if solver == "checkpoint-all":
            return None
        return MAX_MODEL_NODES if solver in _MODEL_SOLVERS else MAX_NODES
    if problem == "pipeline" and devices is not None:
        from memsched.solvers.pipeline.limits import layer_limit  # (loads the pipeline package: only when asked)

        return layer_limit(devices, replication=replication)
    return None


def check_exact_combined(problem: str, solver: str | None, path: str | None, chain: Any = None) -> None:
    """exact-combined's hard limit (`_check_exact_combined_length`) for a run or solve of `problem` with
    `solver`, before anything is built: on `chain` (anything with the chain's ``length``), else on the
    chain read from the file `path`, naming `path` where there is one. Nothing to check without either."""
    if problem != "offload" or solver != "exact-combined" or (chain is None and path is None):
        return
    if chain is None:
        from memsched.solvers import registry

        chain = registry.problem_module("chain").load(path)
    _check_exact_combined_length(int(chain.length), path)


def _check_exact_combined_length(stages: int, path: str | None) -> None:
    """exact-combined's hard limit (it enumerates compute sequences: `exact_combined.MAX_LENGTH` stages),
    checked before any work so that the error names the file (`memsched solve`; a sweep writes the
    solver's own `unsupported` row for that cell instead)."""
    from memsched.solvers.offload.exact_combined import MAX_LENGTH  # (imports ortools: only when asked)

    if stages > MAX_LENGTH:
        raise InputError(f"the chain has {stages} stages; exact-combined enumerates compute sequences, "
                         f"L <= {MAX_LENGTH} (offload-exact or pofo take longer chains)", path=path, field="stages")


def check_work(problem: str, solver: str, instance: Any, *, path: str | None = None, devices: int | None = None,
               replication: bool = False, replication_given: str | None = None) -> None:
    """Refuse, with the limit and why, an instance the solvers would not finish in minutes (`work_limit`;
    `replication`: a pipeline solver allowed to replicate stages, however the caller allowed it, named
    `replication_given` in the message: ``--replication`` (the default, `flag`), ``--option replication=true``).
    A pipeline over the limit is refused naming the devices when fewer would do, and naming the file
    (`path`, field ``layers``) when even one device takes more than `MAX_DP_STEPS` steps (L^2 > 10^7):
    then only a coarser profile helps. Step counts are printed as whole numbers (``16,000,000``), so a
    count above the limit never reads as the limit."""
    n = stage_count(problem, instance)
    if problem == "offload" and solver == "exact-combined":
        _check_exact_combined_length(n, path)
    if problem == "pipeline" and solver == "interleave-v":
        # the V-shaped DP's tables grow as L^4 P: its hard limit, named with the file (`memsched partition`)
        from memsched.solvers.pipeline.interleave import check_v_length  # (imports ortools: only when asked)

        check_v_length(n, path)
    limit = work_limit(problem, solver, devices, replication=replication)
    if limit is None or n <= limit:
        return
    if problem == "graph":
        raise InputError(f"the graph has {n} nodes, more than the {limit} that {solver} handles in minutes; "
                         "export it at module granularity (export-graph --granularity module) or use "
                         "checkpoint-all", path=path, field="nodes")
    if problem == "pipeline":
        from memsched.solvers.pipeline.limits import MAX_DP_STEPS, dp_steps

        devices = devices or 1  # (a pipeline has a limit only with a device count)
        given = (replication_given or flag("replication")) if replication else None
        steps = dp_steps(n, devices, replication=replication)
        formula = "layers^2 x devices^2" if replication else "layers^2 x min(devices, layers)"
        on = f"{devices} device{'s' if devices != 1 else ''}" + (f" with {given}" if given else "")
        over = f"{n} layers on {on} is {steps:,} DP steps ({formula}), more than {MAX_DP_STEPS:,} (minutes)"
        if n * n > MAX_DP_STEPS:  # one device is over too (both formulas give L^2 there): no device count fits,
            if devices > 1:  # only a coarser profile does
                over += f", and {n * n:,} even on 1 device"
            raise InputError(f"{over}: the pipeline DPs take at most {math.isqrt(MAX_DP_STEPS)} layers; merge layers "
                             "into blocks (a coarser profile)", path=path, field="layers")
        if replication:
            most = math.isqrt(MAX_DP_STEPS // (n * n))  # >= 1, as n^2 <= MAX_DP_STEPS here
            raise InputError(f"{over}; use fewer devices (at most {most}) or no {given}", field=flag("devices"))
        # >= 1 as above, and < min(devices, n): with n^3 <= MAX_DP_STEPS no device count would be over
        raise InputError(f"{over}; use fewer devices (at most {MAX_DP_STEPS // (n * n)})", field=flag("devices"))
    what = "the branches have" if problem == "join" else "the chain has"
    raise InputError(f"{what} {n} stages, more than the {MAX_STAGES} the solvers handle in minutes (the rotor "
                     "DP's tables grow as L^3); merge stages into blocks (a coarser profile) or use store-all",
                     path=path, field="stages")


#: the names this module re-exports from `solvers.pipeline.limits` (importing that loads the pipeline package)
_PIPELINE_LIMITS = ("MAX_DP_STEPS", "dp_steps")


def __getattr__(name: str) -> Any:
    """`MAX_DP_STEPS` and `dp_steps` of `solvers.pipeline.limits`, imported on first use (PEP 562), so
    that ``from ._checks import MAX_DP_STEPS`` keeps working without a chain solve loading the pipeline package."""
    if name in _PIPELINE_LIMITS:
        from memsched.solvers.pipeline import limits

        return getattr(limits, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
