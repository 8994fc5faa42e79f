"""The facade behind ``import memsched``: load, profile, solve, simulate, run, sweep, plot.

Every function takes instances as the problem packages define them (`solvers.chain.Chain`,
`solvers.join.Join`, `solvers.graph.Graph`, `solvers.offload.OffloadInstance`,
`solvers.pipeline.Pipeline`) or a path to an instance file, and budgets as a number in the
instance's memory unit (bytes unless the file states meta.units.memory), a size string ("1.5GB",
"800MiB", converted into that unit) or a percentage of the problem's reference peak ("60%":
the store-all peak for chains, joins and offloading, the one-pass peak for graphs, the
one-device memory for pipelines). Sizes returned (budgets, peaks) are in the instance's memory
unit too; times in its time unit (ms for profiled chains).

Solving always goes through `solvers.registry.solve`: each schedule is replayed by the
problem's simulator, and the makespan (period for pipelines) and peak memory reported are
the simulator's. This module imports numpy and the solver registry only; torch, pandas and
matplotlib are imported by the calls that need them.
"""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from memsched.solvers import registry
from memsched.solvers.errors import InputError, article, flag, option_field, python_spelling
from memsched.solvers.exact.interrupt import answer_on_interrupt
from memsched.solvers.units import check_int

from .live import line_limit, progress_line
from .results import Comparison, Result, RunResult, SweepResult, check_figsize, check_title, no_options

PathLike = str | Path
#: (problem, class name) pairs, most specific first: how `problem_of` recognises an instance.
_CLASSES = (("offload", "OffloadInstance"), ("join", "Join"), ("graph", "Graph"), ("pipeline", "Pipeline"),
            ("chain", "Chain"))
#: (problem, class name) of each problem's schedule, most specific first: how `_schedule_problem` tells them apart.
_SCHEDULE_CLASSES = (("offload", "OffloadSchedule"), ("join", "JoinSchedule"), ("graph", "GraphSchedule"),
                     ("pipeline", "Partition"), ("chain", "Schedule"))
_CONFIG_SUFFIXES = (".toml", ".yaml", ".yml")
#: the most devices of a pipeline (the command line's ``--devices`` range, `_checks.MAX_COUNT`)
MAX_DEVICES = 10**6
#: the most memory slots (the command line's ``--slots`` range)
MAX_SLOTS = 10**9
#: `slots` when none is given
DEFAULT_SLOTS = 500


class _DefaultSlots(int):
    """`DEFAULT_SLOTS` as `solve`'s default: equal to it (and shown as it), but told apart by identity from
    the same number given by the caller (`_SLOTS_NOT_GIVEN`), whose slots error a `Comparison` raises."""


#: `solve`'s default `slots`: ``slots is _SLOTS_NOT_GIVEN`` when the caller gave none
_SLOTS_NOT_GIVEN = _DefaultSlots(DEFAULT_SLOTS)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _python_names(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """`fn`, whose errors name arguments as Python spells them (``time_limit``, the option ``scale``)
    and not as the command line does (``--time-limit``, ``--option scale``): the checks shared with
    the command line spell them with `errors.flag` / `errors.option_field` (`errors.python_spelling`)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with python_spelling():
            return fn(*args, **kwargs)

    return wrapper


# ---------------------------------------------------------------------------- instances
@_python_names
def load(path: PathLike, *, problem: str | None = None, bandwidth: str | float | None = None,
         latency: float | None = None, weight_factor: float | None = None, **unknown: Any) -> Any:
    """The instance in the file at `path`: a chain (``memsched.chain/1``), a join network, a
    node-link graph (Checkmate / Moccasin), or a PipeDream ``graph.txt`` (a pipeline).

    `problem` reads a chain file as another problem ("pipeline", "offload"); `bandwidth`
    (bytes/s or "12GB/s") and `latency` (s) make a chain file an offloading instance, as does
    a ``host_link`` in the file (whose latency `latency` replaces). A latency without a bandwidth
    (nor a host link) is an `InputError`, as is a bandwidth with another `problem`. For a pipeline
    (a ``graph.txt``, or ``problem="pipeline"``) `bandwidth`, `latency` and `weight_factor` are its
    machine, as ``memsched partition`` and `solve` read them (`_pipeline_machine`); a `weight_factor`
    for another problem is an `InputError`. Bad files raise `InputError` naming the file and the field, an
    unknown keyword one naming it."""
    from memsched.solvers.formats import detect_problem, load_instance

    _refuse_unknown(load, unknown)
    if not isinstance(path, (str, Path)):
        raise InputError(f"must be the path of an instance file (str or Path), got {path!r}", field="path")
    _check_not_empty(path, "path", "the path of an instance file")
    _check_problem(problem)
    _check_latency(latency)
    path = Path(path)
    if _reads_as_pipeline(path, problem):
        pipeline = load_instance(path, "pipeline")[1]
        return _pipeline_machine(pipeline, bandwidth=bandwidth, latency=latency, weight_factor=weight_factor)
    _bandwidth_problem(bandwidth, problem)
    found = detect_problem(path)
    if weight_factor is not None:
        raise InputError(f"applies to pipelines, not to {article(problem or found)} instance", path=str(path),
                         field="weight_factor")
    if problem is None and found == "chain":
        from memsched.solvers.jsonio import read_json

        data = read_json(path)
        problem = "offload" if isinstance(data, dict) and "host_link" in data else None  # a host link: offloading
    if bandwidth is not None or problem == "offload":
        if found != "chain":
            raise InputError(f"a bandwidth applies to chain files, not to {article(found)} instance", path=str(path),
                             field="bandwidth")
        from memsched.solvers.offload import OffloadInstance
        from memsched.solvers.units import parse_bandwidth

        bw = parse_bandwidth(bandwidth, field="bandwidth") if bandwidth is not None else None
        return OffloadInstance.load(path, bw, latency)
    if latency is not None:
        raise InputError(_LATENCY_ALONE, path=str(path), field="latency")
    return load_instance(path, problem or found)[1]


@_python_names
def data_path(*parts: str) -> Path:
    """A file among the instances shipped with memsched (``solvers/data``): e.g.
    ``data_path("examples", "cnn12.json")``, ``data_path("pipeline", "vgg16-b32.graph.txt")``.
    Each part is a str or a path (`InputError` naming ``parts`` otherwise)."""
    from memsched import solvers

    for part in parts:
        if not isinstance(part, (str, os.PathLike)):
            raise InputError(f"each part must be a str (a folder or file name), got {part!r}", field="parts")

    path = Path(solvers.__file__).resolve().parent / "data"
    return path.joinpath(*parts)


@_python_names
def problem_of(instance: Any) -> str:
    """The problem an instance object states ("chain", "join", "graph", "offload", "pipeline")."""
    problem = _problem_of_class(instance, _CLASSES)
    if problem is None:
        raise InputError(f"not a memsched instance: {type(instance).__name__} (use memsched.load(path))")
    return problem


def _problem_of_class(obj: Any, classes: Any) -> str | None:
    """The first problem of `classes` ((problem, class name in its module) pairs) whose class
    `obj` is an instance of; None when none is."""
    for problem, cls_name in classes:
        try:
            cls = getattr(registry.problem_module(problem), cls_name)
        except (ImportError, AttributeError):
            continue
        if isinstance(obj, cls):
            return problem
    return None


@_python_names
def as_problem(instance: Any, problem: str | None = None, *, bandwidth: str | float | None = None,
               latency: float | None = None, **unknown: Any) -> tuple[str, Any]:
    """(problem, instance) from an instance or a path; a chain becomes an offloading instance
    when `bandwidth` is given or `problem` is "offload", a pipeline when `problem` is "pipeline".
    `InputError` for an instance that cannot be read as `problem`, a bandwidth for anything but a
    chain (or an offloading instance, whose link it replaces), a latency without a bandwidth, or an unknown
    keyword."""
    _refuse_unknown(as_problem, unknown)
    _check_problem(problem)
    _check_latency(latency)
    _bandwidth_problem(bandwidth, problem)
    if isinstance(instance, (str, Path)):
        _check_not_empty(instance, "instance", "an instance or the path of an instance file")
        instance = load(instance, problem=problem, bandwidth=bandwidth, latency=latency)
        bandwidth = latency = None  # applied by load
    try:
        found = problem_of(instance)
    except InputError as err:  # not an instance at all: the argument is what is wrong
        raise InputError(err.message, field=err.field or "instance") from None
    _check_instance(found, instance)  # built or edited in Python: the file's rules still hold
    if bandwidth is not None and found not in ("chain", "offload"):
        raise InputError(f"a bandwidth applies to chains, not to {article(found)} instance", field="bandwidth")
    if latency is not None and found != "offload" and bandwidth is None:
        raise InputError(_LATENCY_ALONE, field="latency")
    if found == "chain" and (bandwidth is not None or problem == "offload"):
        from memsched.solvers.offload import OffloadInstance
        from memsched.solvers.units import parse_bandwidth

        if bandwidth is None:
            raise InputError("an offloading instance needs a bandwidth (bytes/s or '12GB/s')", field="bandwidth")
        instance = OffloadInstance(instance, parse_bandwidth(bandwidth, field="bandwidth"), latency or 0.0)
        return "offload", instance
    if found == "offload" and bandwidth is not None:
        from memsched.solvers.offload import OffloadInstance
        from memsched.solvers.units import parse_bandwidth

        bw = parse_bandwidth(bandwidth, field="bandwidth")
        return "offload", OffloadInstance(instance.chain, bw, instance.latency if latency is None else latency)
    if found == "offload" and latency is not None and problem in (None, "offload"):
        from memsched.solvers.offload import OffloadInstance

        return "offload", OffloadInstance(instance.chain, instance.bandwidth, latency)
    if found == "chain" and problem == "pipeline":
        from memsched.solvers.pipeline import from_chain

        return "pipeline", from_chain(instance)
    if problem is not None and problem != found:
        raise InputError(f"{article(found)} instance cannot be read as {problem}", field="problem")
    return found, instance


def _check_not_empty(path: Any, field: str, expected: str) -> None:
    """A path argument given as ``""`` is an `InputError` naming the argument `field` ("path: is empty,
    expected ..."), as the commands refuse an empty FILE (`_checks.check_not_empty`): ``Path("")`` is the
    current folder, which would be refused as ".: is a directory". Anything else (a Path, an object) passes."""
    from memsched.experiments.commands._checks import check_not_empty

    if isinstance(path, str):
        check_not_empty(path, field, expected)


def _check_instance(problem: str, instance: Any) -> None:
    """`instance` (of `problem`), perhaps built or edited in Python, meets the rules its file's loader
    applies, so that a NaN time or a negative size is an `InputError` naming the array and index instead
    of a false "infeasible" or a bare IndexError from a solver: the instance's own ``check`` (`Chain.check`,
    `OffloadInstance.check`, `Join.check`, `Graph.check`, `Pipeline.check`). A graph's error
    drops the path ``<graph>`` that `Graph.check` names as its loader does (the object is no file)."""
    if problem == "graph":
        try:
            instance.check()
        except InputError as err:  # the graph object is no file: the error names the node and field only
            raise InputError(err.message, field=err.field) from None
    elif problem in ("chain", "offload", "join", "pipeline"):
        instance.check()


def _target_instance(target: Any, problem: str | None, *, bandwidth: str | float | None, latency: float | None,
                     weight_factor: float | None, devices: Any = None, field: str = "instance") -> tuple[str, Any]:
    """(problem, instance) of `solve`'s or `sweep`'s `target` (`as_problem`) on the machine its arguments
    give: for a pipeline, `bandwidth`, `latency` and `weight_factor` are its links and weights, as
    ``memsched partition`` reads them (`_pipeline_machine`); for the other problems `bandwidth` and `latency`
    are the host link that makes a chain an offloading instance (`as_problem`, unchanged) and a
    `weight_factor` is an `InputError`. `devices` (P, given: not None) applies to pipelines only, so with no
    `problem` named it reads a chain file as a pipeline, as ``memsched partition FILE --devices P`` reads it
    (`_devices_make_pipeline`); an instance object keeps its own problem. `field`: the caller's name of
    `target` (``target`` in `sweep`), which an error about it names."""
    with _argument_named(field):
        return _target_problem(target, problem, bandwidth=bandwidth, latency=latency, weight_factor=weight_factor,
                               devices=devices)


@contextlib.contextmanager
def _argument_named(field: str) -> Iterator[None]:
    """Re-raise an `InputError` naming ``instance`` (`as_problem`'s argument) as naming `field`, the caller's
    argument that gave it (``target``, ``obj``)."""
    try:
        yield
    except InputError as err:
        if err.field != "instance" or field == "instance":
            raise
        raise InputError(err.message, path=err.path, field=field) from None


def _target_problem(target: Any, problem: str | None, *, bandwidth: str | float | None, latency: float | None,
                    weight_factor: float | None, devices: Any) -> tuple[str, Any]:
    """`_target_instance` for the argument called ``instance``."""
    if problem is None and _devices_make_pipeline(target, devices):
        problem = "pipeline"
    if not _reads_as_pipeline(target, problem):
        problem, instance = as_problem(target, problem, bandwidth=bandwidth, latency=latency)
        if weight_factor is not None:
            raise InputError(f"applies to pipelines, not to {article(problem)} instance"
                             f"{_PIPELINE_HINTS.get(problem, '')}", field="weight_factor")
        return problem, instance
    problem, instance = as_problem(target, problem)
    return problem, _pipeline_machine(instance, bandwidth=bandwidth, latency=latency, weight_factor=weight_factor)


def _host_link_set_aside(target: Any, problem: str | None) -> bool:
    """True when `problem` "chain" is named for an offloading `target` (an `OffloadInstance`, or a chain
    file with a ``host_link``), whose link the chain problem drops: an offloading solver named then is
    refused by saying so (`registry.get_solver`), not by asking for a link the instance has. A path
    that cannot be read is False (`as_problem` raises its own error), and so is an object (`as_problem`
    refuses an `OffloadInstance` read as a chain)."""
    if problem != "chain" or not isinstance(target, (str, Path)):
        return False
    from memsched.experiments.commands._common import has_host_link

    try:
        return has_host_link(str(target))
    except (InputError, OSError):
        return False


def _devices_make_pipeline(target: Any, devices: Any) -> bool:
    """True when `devices` is given (not None) and `target` is the path of a chain file: `devices` is a
    pipeline's argument only, and ``memsched partition`` reads a chain file as a pipeline (one layer per
    stage, `solvers.pipeline.load`), so `solve` and `sweep` read it so too when no problem is named. A path
    that cannot be read is False (`as_problem` raises its own error); a chain object stays a chain."""
    if devices is None or not isinstance(target, (str, Path)):
        return False
    from memsched.solvers.formats import detect_problem

    try:
        return detect_problem(target) == "chain"
    except (InputError, OSError):
        return False


#: what a pipeline-only argument refused for a problem adds to its message: how a chain is read as a pipeline
_PIPELINE_HINTS = {"chain": " (give problem='pipeline' to partition a chain over devices)",
                  "offload": " (give problem='pipeline' to partition its chain over devices; bandwidth and latency "
                             "are then the pipeline's links)"}


def _reads_as_pipeline(target: Any, problem: str | None) -> bool:
    """True when `as_problem` reads `target` as a pipeline: asked for (``problem="pipeline"``), a
    `Pipeline`, or the path of a PipeDream ``graph.txt``. A path that cannot be read is False: `as_problem`
    then raises its own error for it."""
    if problem is not None:
        return problem == "pipeline"
    if isinstance(target, (str, Path)):
        from memsched.solvers.formats import detect_problem

        try:
            return detect_problem(target) == "pipeline"
        except (InputError, OSError):
            return False
    return _problem_of_class(target, _CLASSES) == "pipeline"


def _pipeline_machine(instance: Any, *, bandwidth: str | float | None, latency: float | None,
                      weight_factor: float | None) -> Any:
    """Pipeline `instance` with the machine of ``memsched partition --bandwidth --latency --weight-factor``
    (`Pipeline.with_machine`), each value read by that command's own parsers (`units.parse_bandwidth`: bytes/s
    or "12GB/s"; `_checks.latency`: s in 0..86400; `_checks.cost`: >= 0), its errors naming the Python
    argument. A value not given keeps the instance's (a file's: communication not charged, latency 0,
    weight factor 4); a non-zero latency without a bandwidth is an `InputError`, as on the command line."""
    given = _machine_given(bandwidth=bandwidth, latency=latency, weight_factor=weight_factor)
    return _on_given_machine(instance, given) if given else instance


def _machine_given(*, bandwidth: str | float | None, latency: float | None,
                   weight_factor: float | None) -> dict[str, float]:
    """The pipeline machine values given (not None), keyed as a partition's JSON records them
    (`solvers.pipeline.schedule.MACHINE_KEYS`): ``bandwidth`` in bytes/s, ``latency`` in s per tensor
    crossing a stage boundary, ``weight_factor`` in bytes kept per weight byte, each read by the command
    line's parser of its flag (`units.parse_bandwidth`: bytes/s or "12GB/s"; `_checks.latency`: s in
    0..86400; `_checks.cost`: >= 0), its errors naming the Python argument."""
    from memsched.experiments.commands._checks import cost
    from memsched.experiments.commands._checks import latency as seconds_of_latency
    from memsched.solvers.units import parse_bandwidth

    given: dict[str, float] = {}
    if bandwidth is not None:
        given["bandwidth"] = parse_bandwidth(bandwidth, field="bandwidth")
    for key, parse, value in (("latency", seconds_of_latency, latency), ("weight_factor", cost, weight_factor)):
        number = _cli_number(parse, value, key)
        if number is not None:
            given[key] = number
    return given


def _on_given_machine(instance: Any, machine: dict[str, float | None]) -> Any:
    """Pipeline `instance` on `machine` (`_machine_given`'s keys; those absent keep the instance's), as
    `Pipeline.with_machine`: a non-zero latency without a bandwidth (the machine's, else the instance's)
    is an `InputError` naming ``latency``, as ``memsched partition --latency`` without ``--bandwidth``."""
    from memsched.solvers.pipeline.schedule import on_machine

    return on_machine(instance, machine, path=None, field="latency", hint="give bandwidth=...")


def _refuse_unknown(fn: Callable[..., Any], unknown: dict[str, Any]) -> None:
    """`InputError` naming the first keyword of `unknown` (those that facade function `fn` gathered in its
    ``**unknown``) and listing the arguments `fn` takes (`results.no_options`, as `plot` refuses them): a
    misspelt keyword is bad input, not a bare TypeError."""
    if unknown:
        import inspect

        params = inspect.signature(fn).parameters.values()
        no_options(unknown, fn.__name__, [p.name for p in params if p.kind is not p.VAR_KEYWORD])


def _cli_number(parse: Callable[[str], float], value: Any, field: str) -> float | None:
    """None, or `value` (a real number, not a bool) read by the command line's argparse type `parse`
    (`_checks.cost`, `_checks.latency`: their ranges and messages); an `InputError` naming `field` otherwise."""
    import argparse

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"must be a number, got {_show(value)}", field=field)
    try:
        text = repr(float(value))
    except OverflowError:  # an int beyond floats: out of every range
        text = "inf"
    try:
        return parse(text)
    except argparse.ArgumentTypeError as err:
        raise InputError(str(err).replace(repr(text), _show(value)), field=field) from None


@_python_names
def budget(instance: Any, spec: int | float | str, *, problem: str | None = None, **unknown: Any) -> int:
    """A budget in the instance's memory unit (bytes unless the file states meta.units.memory): a
    number in that unit, a size ("1.5GB", "800MiB", converted into it) or "X%" of the problem's
    reference peak. `instance` is an instance or a path, read as `problem` (as in `as_problem`:
    "pipeline" makes a chain a pipeline; another problem is an `InputError`, as is an unknown keyword)."""
    _refuse_unknown(budget, unknown)
    problem, instance = as_problem(instance, problem)
    return _budget(instance, spec, problem)


@_python_names
def reference_peak(instance: Any, *, problem: str | None = None, **unknown: Any) -> int:
    """What "X%" budgets refer to, in the instance's memory unit (bytes unless the file states
    meta.units.memory), for an instance or a path read as `problem` (`as_problem`; an unknown keyword is
    an `InputError`)."""
    _refuse_unknown(reference_peak, unknown)
    problem, instance = as_problem(instance, problem)
    return int(registry.problem_module(problem).reference_peak(instance))


@_python_names
def list_solvers(problem: str | None = None) -> list[tuple[str, str, str]]:
    """(problem, solver, summary) for every solver importable here, or for `problem`'s only (one of
    chain, graph, join, offload, pipeline; another name is an `InputError` naming ``problem``)."""
    _check_problem(problem)
    return registry.solver_table(problem)


@_python_names
def default_solver(problem: str) -> str:
    """The problem's preferred solver (rotor for chains, dp for joins, ...); an unknown `problem`
    is an `InputError` naming ``problem``."""
    if problem not in registry.PROBLEMS:  # None too: there is no default problem here (no "(or None)")
        raise InputError(f"must be one of {', '.join(registry.PROBLEMS)}, got {_show(problem)}", field="problem")
    module = registry.problem_module(problem)
    names = [n for _, n, _ in registry.solver_table(problem)]
    preferred = getattr(module, "DEFAULT_SOLVER", None)
    if preferred in names:
        return preferred
    if not names:
        raise InputError(f"no solver is available for {problem}")
    return names[0]


# ---------------------------------------------------------------------------- solving
@_python_names
def solve(instance: Any, budget: int | float | str, solver: str | Sequence[str] | None = None, *,
          problem: str | None = None, slots: int = _SLOTS_NOT_GIVEN, time_limit: float | None = None,
          bandwidth: str | float | None = None, latency: float | None = None, devices: int | None = None,
          weight_factor: float | None = None, progress: bool = False, **options: Any) -> Result | Comparison:
    """Solve `instance` under `budget` (memory per device for pipelines) with `solver`.

    One solver name gives a `Result`; a list of names gives a `Comparison` of all of them at
    the same budget. `devices` (P, an int in 1..10^6) is required for pipelines and refused for
    the other problems (with no `problem` named, it reads a chain *file* as a pipeline, as ``memsched
    partition FILE --devices P`` does; a chain object needs ``problem="pipeline"``); `bandwidth` turns
    a chain into an offloading instance (`latency`, s per
    transfer, needs one); for a pipeline, `bandwidth` (bytes/s or "12GB/s": its links; without one,
    communication is not charged), `latency` (s per tensor crossing a stage boundary, each way; a
    non-zero one needs a bandwidth) and `weight_factor` (bytes kept per weight byte, default 4) are
    ``memsched partition``'s ``--bandwidth``, ``--latency`` and ``--weight-factor``, read as it reads them
    (`weight_factor` for another problem is an `InputError`); `slots` discretises memory for the
    solvers that need it (0: exact; at most 10^9); `time_limit` (s: None or a positive number, at
    most a week) bounds exact solvers and is checked whichever solver is named; `progress` (a bool)
    draws a live line on stderr while each solver runs (stage, best, bound, gap: `memsched.live`); other keyword
    options go to the solver (one that none of the named solvers takes, or a value not of the
    option's type, is an `InputError`: a misspelt option is not ignored).
    With a list, the names, options and budget are checked before any solver runs (option values that
    no instance takes too, as `sweep` checks them: a CP-SAT ``parameters`` name CP-SAT does not know),
    and an option value that does not fit this instance (``segments`` above the chain's stages) is the
    `InputError` naming the option that one name gives, not an "unsupported" entry (so is a `slots` given
    that a solver cannot use, ``slots=0`` making its table too large; with the default `slots`, that is
    the solver refusing the instance); but whether a solver accepts the instance (Revolve needs a
    homogeneous chain, say) is known only by running it (the solvers have no separate applicability
    check): a solver that refuses it takes its place in
    the `Comparison` as a `Result` of status "unsupported" whose ``message`` says why (as a sweep's
    rows do), and the results of the others are kept; when every solver of the list refuses, that is
    the first one's `InputError`. One name (a str) raises its solver's `InputError`.
    An ``infeasible`` answer without its smallest feasible budget is completed as ``memsched solve``
    completes it (not for a pipeline, as ``memsched partition`` does not): the solver is run again at
    other budgets (`experiments.commands._infeasible.find_min_budget`: at most 10 s, 1 s per exact
    solve), and ``min_budget`` with ``details["min_budget_method"]``, or ``details["min_budget_note"]``
    saying why it is unknown, are what ``memsched solve --json`` writes (`Result.to_json`).
    A Ctrl-C (a notebook's interrupt) during an exact solver's search returns what it had, marked
    ``details["interrupted"]`` (with a list, the comparison ends there); during the search for the smallest
    budget, the answer with what that search knew (its note says it was interrupted; a list ends there too)."""
    return _solve(instance, budget, solver, problem=problem, slots=slots, time_limit=time_limit, bandwidth=bandwidth,
                  latency=latency, devices=devices, weight_factor=weight_factor, progress=progress, options=options,
                  search=True)


def _solve(instance: Any, budget: int | float | str, solver: str | Sequence[str] | None, *, problem: str | None,
           slots: int, time_limit: float | None, bandwidth: str | float | None, latency: float | None,
           devices: int | None, weight_factor: float | None, progress: bool, options: dict[str, Any],
           search: bool) -> Result | Comparison:
    """`solve`, whose keyword `options` are the dict `options`; `search`: complete an ``infeasible`` answer
    with its smallest feasible budget (`_search_min_budget`; `sweep` passes False, as the sweep engine's
    cells search none)."""
    link_set_aside = _host_link_set_aside(instance, problem)
    problem, instance = _target_instance(instance, problem, bandwidth=bandwidth, latency=latency,
                                         weight_factor=weight_factor, devices=devices)
    devices = _check_devices(problem, devices)
    if devices is not None:
        options["devices"] = devices
    slots_given = slots is not _SLOTS_NOT_GIVEN
    slots = _check_slots(slots)
    time_limit = _check_time_limit(time_limit)
    progress = _check_bool(progress, "progress")
    bytes_ = _budget(instance, budget, problem)
    names = _each_once(_solver_names(problem, solver, host_link=link_set_aside), "solver")
    _check_options(problem, names, options)
    check_option_values(problem, names, options)  # a value no instance takes: an InputError, as with one name

    def one(name: str) -> tuple[Result, bool]:
        """(the result of solver `name`, whether a Ctrl-C stopped the search for its smallest budget)."""
        mine = _options_of(problem, name, options)  # each solver its own options
        limit = line_limit(registry.get_solver(problem, name), time_limit, options) if progress else None
        with answer_on_interrupt(), progress_line(progress, label=name, limit=limit):
            raw = registry.solve(problem, instance, name, bytes_, slots=slots, time_limit=time_limit, **mine)
        stopped = search and _search_min_budget(problem, instance, raw, slots, time_limit, mine)
        return Result(problem, instance, raw), stopped

    if solver is None or isinstance(solver, str):
        return one(names[0])[0]
    results: list[Result] = []
    refusals: list[InputError] = []
    for name in names:
        try:
            result, stopped = one(name)
            results.append(result)
        except InputError as err:  # this solver refuses the instance: the others' results are kept
            if _names_option(err, options) or (slots_given and err.field == flag("slots")):
                raise  # a bad value of an option given (more segments than stages, too many slots), as with one name
            refusals.append(err)
            results.append(_unsupported(problem, instance, name, bytes_, err))
            continue
        if stopped or results[-1].raw.details.get("interrupted"):
            break  # a Ctrl-C stops the comparison: the solvers that ran, the interrupted one last
    if len(refusals) == len(results):
        raise refusals[0]  # no solver of the list accepts the instance: nothing to compare
    return Comparison(results)


def _search_min_budget(problem: str, instance: Any, raw: Any, slots: int, time_limit: float | None,
                       options: dict[str, Any]) -> bool:
    """Complete `raw` (the registry's `SolveResult` of `instance` read as `problem`) in place as ``memsched
    solve`` does after its solve, with the same search (`find_min_budget`, given the solve's `slots`,
    `time_limit` and solver `options`): an ``infeasible`` answer without ``min_budget`` gets it (or
    ``details["min_budget_note"]``); nothing after a Ctrl-C stopped the solve (``details["interrupted"]``),
    nor for a pipeline (``memsched partition`` searches none). True when a Ctrl-C stopped the search."""
    if problem == "pipeline" or raw.details.get("interrupted"):
        return False
    from memsched.experiments.commands._infeasible import find_min_budget

    return find_min_budget(problem, instance, raw, {"slots": slots, "time_limit": time_limit, **options})


def _names_option(err: InputError, options: dict[str, Any]) -> bool:
    """`err` names one of the solver `options` given (``segments``, ``segments=1000``, ``orders``: the
    solvers' `errors.option_field`), not ``devices``: a value of the caller's that does not fit this
    instance, which a `Comparison` reports as `solve` with one name does (an `InputError`), not as
    the solver refusing the instance."""
    field = err.field or ""
    return any(field == option_field(key) or field.startswith(option_field(key) + "=") or
               field.startswith(option_field(key) + "[") for key in options if key != "devices")


#: the status of a solver that refuses the instance (a `Comparison`'s entry, a sweep's row), as the sweep engine's
UNSUPPORTED = "unsupported"


def _unsupported(problem: str, instance: Any, name: str, bytes_: int, err: InputError) -> Result:
    """The `Result` of solver `name` that refused `instance` with `err`: status `UNSUPPORTED`, no
    schedule, the refusal as its message (a `Comparison` keeps the other solvers' results)."""
    from memsched.solvers.result import SolveResult

    raw = SolveResult(problem=problem, solver=name, status=UNSUPPORTED, budget=bytes_, message=str(err))
    return Result(problem, instance, raw)


@_python_names
def simulate(instance: Any, schedule: Any, budget: int | float | str | None = None, *,
             problem: str | None = None, bandwidth: str | float | None = None, latency: float | None = None,
             weight_factor: float | None = None, **unknown: Any) -> Result:
    """Replay `schedule` (a schedule object, a `Result`, its JSON dict, a path to a schedule
    JSON, or a plain list: a graph's node ids, as in the graph file and a schedule file's ``sequence``,
    not node indices, an id naming no node being an `InputError` naming ``schedule``; a chain's or
    join's operations) on `instance` with the problem's simulator; the Result's status is "valid" or
    "invalid" (``.violation`` says why), its makespan and peak are the replay's. A schedule object
    or `Result` of another problem (a chain ``Schedule`` on an offloading instance, say) is an
    `InputError`; a chain schedule's JSON (a dict or a file) on an offloading instance (a
    `bandwidth`, an `OffloadInstance`, or a host link with a `latency`) is read, on purpose, as the
    offloading schedule of the same operations that transfers nothing. A chain schedule (an object, or
    JSON declaring ``"problem": "chain"``) on the path of a chain file with a host link, with neither a
    `bandwidth` nor a `latency`, replays on the chain, the link set aside, as ``solve(problem="chain")``
    solved it and ``memsched simulate`` replays it (`_chain_set_aside`); JSON declaring no problem is
    replayed there as offloading. A schedule for another chain length (join: branch lengths)
    is an `InputError` naming ``length`` (``lengths``) in every form. With `problem` None, the schedule
    decides how a file is read as ``memsched simulate`` does (`_instance_for`): a pipeline partition
    (a `Result`, its ``to_json()`` or ``schedule``, ``memsched partition --json``'s output; a dict or a
    file) makes a chain file a pipeline, replayed on the machine the partition records.
    `bandwidth` (bytes/s or "12GB/s") and `latency` (s) are ``memsched simulate``'s ``--bandwidth`` and
    ``--latency``: for a chain, the host link that makes it an offloading instance (a latency needs a
    bandwidth, or a host link); for a pipeline (a partition, or ``problem="pipeline"``), they and
    `weight_factor` (bytes kept per weight byte, ``--weight-factor``; an `InputError` for another problem)
    replace the machine the partition records, to replay it on another machine, each read as ``memsched
    partition`` reads it (`_machine_given`; a non-zero latency needs a bandwidth, given or recorded).
    An unknown keyword is an `InputError` naming it."""
    from memsched.solvers.result import SolveResult

    _refuse_unknown(simulate, unknown)
    _check_latency(latency)
    problem, instance = _instance_for(instance, schedule, problem, bandwidth, "simulated", latency=latency)
    if problem != "pipeline" and weight_factor is not None:
        raise InputError(f"applies to pipeline partitions, not to {article(problem)} schedule", field="weight_factor")
    module = registry.problem_module(problem)
    given = _machine_given(bandwidth=bandwidth, latency=latency, weight_factor=weight_factor) \
        if problem == "pipeline" else {}
    instance = _solved_machine(problem, instance, schedule, given)
    schedule = _as_schedule(problem, instance, schedule, "simulated")
    bytes_ = _budget(instance, budget, problem) if budget is not None else None
    with _schedule_errors(problem, schedule):
        replay = module.replay(instance, schedule, bytes_)
        schedule = _evaluated(problem, instance, schedule)
    valid = replay.violation is None
    raw = SolveResult(problem=problem, solver="replay", status="valid" if valid else "invalid",
                      objective=replay.objective, peak_memory=replay.peak_memory, budget=bytes_,
                      schedule=schedule, message=replay.violation or "", scope="the simulator's replay")
    return Result(problem, instance, raw)


def _evaluated(problem: str, instance: Any, schedule: Any) -> Any:
    """A pipeline partition as `simulate`'s `Result` keeps it: a copy with each stage's time, memory,
    in-flight count and link time (and the period) filled in by the simulator on `instance`
    (`Partition.evaluated`), as a solver's are, so that ``to_json``, the table and the figure have them
    whichever form the partition came in (a JSON dict or file leaves them None; a partition object
    evaluated on another machine holds that machine's); the caller's object is left as it was. A
    malformed partition (an "invalid" replay: a gap between stages, say), which the simulator gives no
    stage times, and any other schedule: unchanged."""
    if problem != "pipeline" or not hasattr(schedule, "evaluated"):
        return schedule
    import copy

    filled = copy.deepcopy(schedule).evaluated(instance)
    return filled if all(stage.time is not None for stage in filled.stages) else schedule


def _instance_for(instance: Any, schedule: Any, problem: str | None, bandwidth: Any, verb: str, *,
                  latency: Any = None, field: str = "instance") -> tuple[str, Any]:
    """(problem, instance) that `simulate` and `plot` replay `schedule` on: as `as_problem` reads
    `instance`, but when `problem` is None the schedule may bring one: a `Result` its problem (a
    pipeline result replays on the chain file it was solved from), a schedule's JSON (a dict or the
    path of a file) the problem it declares as `memsched simulate` reads it (`_declared_problem`: a
    partition makes a chain file a pipeline; `_chain_set_aside`: a chain schedule keeps a chain file with a
    host link a chain when no `bandwidth` nor `latency` is given); a Result also brings its instance when `instance` is
    None. A problem so adopted that does not fit the instance is an `InputError` naming ``schedule``.
    `bandwidth` and `latency` are the host link of a chain (`as_problem`); for a pipeline they are its
    links, left to the caller (`simulate`: `_solved_machine`), as ``memsched simulate`` reads them.
    `field`: the caller's name of `instance` (``obj`` in `plot`), which an error about it names; an error
    about the instance itself (a missing file, a bad cost of an instance of the adopted problem) is raised
    as it is, not as the schedule's."""
    _check_not_empty(schedule, "schedule", "a schedule or the path of a schedule file")
    adopted = None
    if isinstance(schedule, Result):
        if problem is None:
            problem = adopted = schedule.problem
        if instance is None:
            instance = schedule.instance
    elif problem is None:
        problem = adopted = _declared_problem(schedule, bandwidth) or _chain_set_aside(instance, schedule, bandwidth,
                                                                                       latency)
    if problem == "pipeline" or _reads_as_pipeline(instance, problem):
        bandwidth = latency = None  # the pipeline's links, not a host link: the caller's to apply
    try:
        with _argument_named(field):
            return as_problem(instance, problem, bandwidth=bandwidth, latency=latency)
    except InputError as err:
        if adopted is None or _own_problem(instance) in (None, adopted):
            raise  # about the instance itself (a missing file, a NaN cost): not the schedule's problem
        what = "result" if isinstance(schedule, Result) else "schedule"
        raise InputError(f"{article(adopted)} {what} cannot be {verb} on this instance ({err})",
                         field="schedule") from None


def _own_problem(instance: Any) -> str | None:
    """The problem `instance` (an object, or the path of a file) states by itself; None when that cannot be
    told (a missing or unreadable file, not an instance)."""
    from memsched.solvers.formats import detect_problem

    try:
        return detect_problem(instance) if isinstance(instance, (str, Path)) else problem_of(instance)
    except (InputError, OSError):
        return None


def _declared_problem(schedule: Any, bandwidth: Any) -> str | None:
    """The problem that decides how the instance is read for `schedule` when the caller names none, as
    `memsched simulate` and `memsched plot` decide it (`experiments.commands.simulate.load_for_schedule`):
    the problem a schedule's JSON (a dict, or the path of a file, read here) declares (``schedule.problem``,
    ``problem``, or "pipeline" for a partition: `declared_problem`), when that is "pipeline", or "offload"
    without a `bandwidth` (which makes the offloading instance itself); for plot's ``{name: schedule}``, its
    first entry's, as ``memsched plot`` reads its first file. None otherwise: the instance decides (a chain
    schedule's JSON with a `bandwidth` is replayed as offloading; on a chain file with a host link and no
    bandwidth nor latency, the caller's `_chain_set_aside` reads the file as the chain)."""
    from memsched.experiments.commands.simulate import declared_problem
    from memsched.solvers.jsonio import read_json

    if _is_named_schedules(schedule):
        first = next(iter(schedule.values()))
        return first.problem if isinstance(first, Result) else _declared_problem(first, bandwidth)
    if isinstance(schedule, (str, Path)):
        schedule = read_json(schedule)
    if not isinstance(schedule, dict):
        return None
    declared = declared_problem(schedule)
    return declared if declared == "pipeline" or (declared == "offload" and bandwidth is None) else None


def _chain_set_aside(instance: Any, schedule: Any, bandwidth: Any, latency: Any) -> str | None:
    """"chain" when `instance` is the path of a chain file with a ``host_link`` and `schedule` is a chain's
    (a chain ``Schedule`` object, or a schedule's JSON, a dict or the path of a file, that declares "chain";
    for plot's ``{name: schedule}``, its first entry), with neither a `bandwidth` nor a `latency` given: the
    file is then read as the chain, its link set aside, as ``solve(problem="chain")`` read it and ``memsched
    simulate`` reads it (`_common.declared_chain`), so a chain answer replays with the makespan and peak it
    was solved with. None otherwise (a schedule declaring no problem on such a file is replayed as
    offloading)."""
    from memsched.experiments.commands._common import declared_chain
    from memsched.experiments.commands.simulate import declared_problem
    from memsched.solvers.jsonio import read_json

    if not _host_link_set_aside(instance, "chain"):
        return None
    if _is_named_schedules(schedule):
        schedule = next(iter(schedule.values()))
    if isinstance(schedule, (str, Path)):
        schedule = read_json(schedule)
    declared = declared_problem(schedule) if isinstance(schedule, dict) else _schedule_problem(schedule)
    return "chain" if declared_chain(declared, bandwidth, latency) else None


def _is_named_schedules(schedule: Any) -> bool:
    """True for `plot`'s ``{name: schedule}`` (str keys, none of them a key of one schedule's JSON)."""
    return isinstance(schedule, dict) and bool(schedule) and all(isinstance(k, str) for k in schedule) \
        and not _SCHEDULE_KEYS & set(schedule)


@_python_names
def sweep(target: Any, budgets: Iterable[int | float | str] | None = None, solvers: Sequence[str] | None = None,
          *, problem: str | None = None, output: PathLike | None = None, workers: int | None = None,
          fresh: bool = False, slots: int | None = None, time_limit: float | None = None,
          bandwidth: str | float | None = None, latency: float | None = None, devices: int | None = None,
          weight_factor: float | None = None, progress: bool = False, **options: Any) -> SweepResult:
    """A grid of budgets x solvers, one row each, as a `SweepResult` (``.to_pandas()``,
    ``.plot()``: overhead or period versus budget).

    `target` is either a sweep file (TOML / YAML, or the name of a committed config such as
    "fig_a_chains"), run by the sweep engine exactly as ``memsched sweep`` would (resumable,
    into `output`, default the file's, a folder or one that can be made; `workers` local processes,
    1..512, default 1; `fresh` starts again), or an instance (or instance file), solved here in
    this process for every budget in `budgets` (a non-empty list, each budget once, however
    written: "50%" and "50.0%" are one; a bad one is named by its index, ``budgets[2]``) and
    solver in `solvers` (default, None: the problem's default solver; each once; an empty list is an
    `InputError`), with `slots` (default 500), `time_limit`, `bandwidth`, `latency`, `devices`,
    `weight_factor` and solver options as in `solve` (each option taken by at least one of the solvers; each solver is
    given the options it takes).
    `progress` (a bool, default False) draws a progress bar on stderr over the sweep's cells (tqdm: cells
    done out of the grid's, the last cell's budget, solver and status), the bar ``memsched sweep`` draws
    (for a sweep file, the sweep engine's own bar, which counts the cells a resumed sweep had as done).
    Arguments that do not apply to the kind of `target` (budgets for a sweep file, which sets
    its own; output for an instance) are an `InputError`, as are shared arguments with bad
    values (checked before anything runs, as `solve` does) and option values that no instance
    takes (``segments=0``). A solver that rejects the instance gives rows of status
    "unsupported" (as in the sweep engine); an instance whose reference peak is 0 has no
    ``budget_fraction`` (None). A Ctrl-C (a notebook's interrupt) during an exact solver's search
    ends an instance sweep there, as it ends `solve`'s comparison: the rows of the cells that ran
    are returned, the interrupted cell last with what its solver had (its ``message`` says
    "interrupted after ... s"); a Ctrl-C anywhere else raises `KeyboardInterrupt`, as a sweep
    file's does (whose journal keeps the cells done: once its cells run, the `KeyboardInterrupt` is a
    ``SweepInterrupted`` whose message, ``interrupted: N/M rows kept in JOURNAL; rerun to resume``,
    is not printed as well)."""
    _check_not_empty(target, "target", "a sweep file, the name of a committed config or an instance file")
    if _is_config(target):
        return _config_sweep(target, output=output, workers=workers, fresh=fresh, progress=progress,
                             budgets=budgets, solvers=solvers, problem=problem, slots=slots, time_limit=time_limit,
                             bandwidth=bandwidth, latency=latency, devices=devices, weight_factor=weight_factor,
                             options=options)
    _no_such_target(target)
    if output is not None:
        raise InputError("applies to a sweep file (TOML / YAML); an instance sweep runs here, in this process",
                         field="output")
    if workers is not None:  # the sweep's processes; the exact solvers' backend threads are their option num_workers
        raise InputError("applies to a sweep file (TOML / YAML): its worker processes; an instance sweep runs here, "
                         "in this process (the exact solvers' workers option, their backend threads, is given as "
                         "num_workers= here)", field="workers")
    if fresh is not False:
        raise InputError("applies to a sweep file (TOML / YAML); an instance sweep keeps no journal", field="fresh")
    if budgets is None:
        raise InputError("an instance sweep needs budgets (e.g. ['40%', '60%', '80%'])", field="budgets")
    if isinstance(budgets, (str, numbers.Real)):  # one budget (a numpy scalar too; "50%" would be "5", "0", "%")
        budgets = [budgets]
    elif not isinstance(budgets, Iterable) or isinstance(budgets, (bytes, dict)):
        raise InputError(f"must be a budget or a list of budgets, got {budgets!r}", field="budgets")
    budgets = list(budgets)
    if not budgets:  # as a sweep file's empty list: a grid of no cell is a mistake, not an empty table
        raise InputError("must be a non-empty list of budgets (e.g. ['40%', '60%', '80%'])", field="budgets")
    link_set_aside = _host_link_set_aside(target, problem)
    problem, instance = _target_instance(target, problem, bandwidth=bandwidth, latency=latency,
                                         weight_factor=weight_factor, devices=devices, field="target")
    devices = _check_devices(problem, devices)
    slots = _check_slots(DEFAULT_SLOTS if slots is None else slots)
    time_limit = _check_time_limit(time_limit)
    progress = _check_bool(progress, "progress")
    names = _each_once(_solver_names(problem, solvers, field="solvers", host_link=link_set_aside), "solvers")
    _check_options(problem, names, dict(options, devices=devices) if devices is not None else options)
    check_option_values(problem, names, options, devices)
    from memsched.experiments.sweep.cell import overhead_of

    grid = _sweep_budgets(instance, budgets, problem)  # every budget checked before any solve
    reference = reference_peak(instance, problem=problem)
    baseline = baseline_objective(problem, instance)
    rows: list[dict[str, Any]] = []
    with _cell_bar(progress, len(grid) * len(names), getattr(instance, "name", "") or problem) as done:
        for spec, bytes_ in grid:
            for name in names:
                fraction = _budget_fraction(bytes_, reference)
                try:
                    result = _solve(instance, bytes_, name, problem=problem, slots=slots, time_limit=time_limit,
                                    bandwidth=None, latency=None, devices=devices, weight_factor=None,
                                    progress=False, options=_options_of(problem, name, options), search=False)
                except InputError as err:  # a solver that rejects this instance (e.g. revolve, heterogeneous)
                    rows.append({"instance": getattr(instance, "name", "") or problem, "problem": problem,
                                 "solver": name, "status": UNSUPPORTED, "objective": None, "budget": bytes_,
                                 "budget_spec": str(spec), "reference_peak": reference,
                                 "budget_fraction": fraction, "overhead": None, "message": str(err)})
                    done(f"{spec} {name} {UNSUPPORTED}")
                    continue
                row = result.row()
                row.update(budget_spec=str(spec), reference_peak=reference, budget_fraction=fraction,
                           baseline_objective=baseline, devices=devices,
                           overhead=overhead_of(result.objective, baseline) if (baseline and result.found) else None)
                rows.append(row)
                done(f"{spec} {name} {result.status}")
                if result.raw.details.get("interrupted"):
                    return _sweep_result(problem, instance, rows)  # a Ctrl-C ends the sweep, as a solve's comparison
    return _sweep_result(problem, instance, rows)


@contextlib.contextmanager
def _cell_bar(enabled: bool, total: int, label: str) -> Iterator[Callable[[str], None]]:
    """Within the block, a function ``done(text)`` to call after each of an instance sweep's `total` cells:
    when `enabled`, a tqdm bar on stderr named `label` counts them (``unit="run"``, the last cell's `text`
    beside it), as ``memsched sweep`` draws its bar (`experiments.sweep.run`); closed however the block ends."""
    if not enabled:
        yield lambda text: None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=label, unit="run", file=sys.stderr)

    def done(text: str) -> None:
        bar.update(1)
        bar.set_postfix_str(text, refresh=False)

    try:
        yield done
    finally:
        bar.close()


def _budget_fraction(bytes_: int, reference: int) -> float | None:
    """`bytes_` as a fraction of the instance's `reference` peak (both in its memory unit); None when that
    peak is 0 (nothing to be a fraction of), as the sweep engine's rows say (`experiments.sweep.cell`)."""
    return bytes_ / reference if reference else None


def _sweep_result(problem: str, instance: Any, rows: list[dict[str, Any]]) -> SweepResult:
    """The `SweepResult` of an instance sweep's `rows` (one per cell run, in order)."""
    name = getattr(instance, "name", "") or problem
    return SweepResult(rows, source=name, units={name: _instance_units(problem, instance)})


def _instance_units(problem: str, instance: Any) -> tuple[str | None, str | None]:
    """(time unit, memory unit) of `instance` read as `problem`, as its schedule figures name them
    (``meta.units``; an offloading instance's chain's, a join's first branch's when it states none;
    a pipeline's ``time_unit`` in seconds by its name, its sizes in bytes). None: not stated (for the
    memory, bytes)."""
    from memsched.experiments.plotting.timeline import units_of
    from memsched.solvers.units import memory_unit

    if problem == "pipeline":
        from memsched.solvers.pipeline.instance import TIME_UNITS

        seconds = getattr(instance, "time_unit", None)
        time = next((k for k, v in TIME_UNITS.items() if seconds is not None and abs(v - seconds) < 1e-15), None)
        return time, "bytes"
    source = getattr(instance, "chain", None) if problem == "offload" else instance
    time, memory = units_of(source)[0], memory_unit(instance)
    branches = getattr(instance, "branches", None) if problem == "join" else None
    if branches and time is None and memory is None:
        time, memory = units_of(branches[0])[0], memory_unit(branches[0])
    return time, memory


def _options_of(problem: str, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword options of a sweep that solver `name` takes (`_checks.solver_parameters`): each
    option is taken by at least one solver of the sweep (`_check_options`), and each solver is given
    its own, as `solve` with a list of solvers gives them (periodic's ``segments`` is no option of rotor)."""
    from memsched.experiments.commands._checks import solver_parameters

    taken = solver_parameters(problem, name)
    return {key: value for key, value in options.items() if key in taken}


def _no_such_target(target: Any) -> None:
    """`sweep`'s `target`, when it is a path (str or Path) that is neither a sweep file nor a
    committed config: an existing file (an instance file, read later) or a file name with a suffix
    (``chain.json``: `load` says it is missing), else an `InputError` naming ``target`` that lists
    the committed configs (a misspelt config name is not an instance sweep without budgets)."""
    if not isinstance(target, (str, Path)) or Path(target).exists() or Path(target).suffix:
        return
    from memsched.experiments.sweep.config import CONFIGS

    names = sorted({p.stem for p in CONFIGS.iterdir() if p.suffix.lower() in _CONFIG_SUFFIXES}) \
        if CONFIGS.is_dir() else []
    raise InputError(f"no sweep config named {str(target)!r} and no such instance file (the committed configs: "
                     f"{', '.join(names) or 'none'}; or a TOML / YAML sweep file, or an instance file)", field="target")


def _sweep_budgets(instance: Any, budgets: list[Any], problem: str) -> list[tuple[Any, int]]:
    """(spec, size) of each budget of an instance sweep, in order, the size in the instance's memory unit
    (bytes unless the file states meta.units.memory); `InputError` naming the entry (``budgets[2]``)
    for a bad one, or for one given twice: the same size for this instance, however
    written ("50%" and "50.0%", "1KiB" and 1024: a sweep file refuses them too, and the table would
    hold the same rows twice)."""
    grid: list[tuple[Any, int]] = []
    for i, spec in enumerate(budgets):
        try:
            bytes_ = _budget(instance, spec, problem)
        except InputError as err:
            if err.field != "budget" or err.path is not None:
                raise
            raise InputError(str(err).removeprefix("budget: "), field=f"budgets[{i}]") from None
        same = [k for k, (_, earlier) in enumerate(grid) if earlier == bytes_]
        if same:
            raise InputError(f"budget {str(spec)!r} is already in the list (budgets[{same[0]}] "
                             f"{str(grid[same[0]][0])!r} is the same {bytes_} {_memory_unit_name(instance)}); "
                             "give each budget once", field=f"budgets[{i}]")
        grid.append((spec, bytes_))
    return grid


def _memory_unit_name(instance: Any) -> str:
    """The unit of the instance's sizes for a message: its ``meta.units.memory`` ("KiB"), else "bytes"."""
    from memsched.solvers.units import memory_unit

    return memory_unit(instance) or "bytes"


def check_option_values(problem: str, names: Sequence[str], options: dict[str, Any],
                        devices: int | None = None) -> None:
    """Option values that no instance takes (a CP-SAT ``parameters`` name CP-SAT does not know,
    ``segments=0``, a pipeline's ``micro_batches`` below `devices` under 1F1B) are an `InputError`
    naming the option before anything runs, by the solvers' own checks (`sweep.config.check_option_value`,
    as a sweep file is checked): in `solve` and `sweep` instead of a table of ``unsupported`` rows, in
    `run` (`check_run_solver_args`) and ``memsched run`` before the network is profiled or a file written.
    Values already of the option's type (`_check_options`)."""
    from memsched.experiments.sweep.config import check_option_value

    given = dict(options, devices=devices) if devices is not None else options
    for name in names:
        for key, value in options.items():
            check_option_value(problem, name, key, value, options=given)


def _each_once(names: list[str], field: str) -> list[str]:
    """Solver names, each once: a name given twice is an `InputError` naming its entry
    (``solvers[1]``), as a repeated budget is (a sweep's table, or a comparison, would hold the
    same rows twice)."""
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InputError(f"solver {name!r} is already in the list (as {field}[{names.index(name)}]); "
                             f"give each solver once", field=f"{field}[{i}]")
    return names


def _config_sweep(target: PathLike, *, output: Any, workers: Any, fresh: Any, progress: Any,
                  options: dict[str, Any], **instance_args: Any) -> SweepResult:
    """`sweep` of a sweep file: the sweep engine's run (its bar over the cells when `progress`), after
    checking `output`, `workers`, `fresh`, `progress` and that no argument of an instance sweep
    (`instance_args`, `options`) is given."""
    from memsched.experiments.commands._checks import MAX_WORKERS
    from memsched.experiments.sweep import find_config, run_sweep
    from memsched.experiments.sweep.run import say_nothing

    given = [name for name, value in instance_args.items() if value is not None] + list(options)
    if given:
        raise InputError("applies to an instance sweep; a sweep file sets its own budgets, solvers and options",
                         field=given[0])
    if output is not None and not isinstance(output, (str, os.PathLike)):
        raise InputError(f"must be the path of a folder (str or Path), got {output!r}", field="output")
    count = 1 if workers is None else check_int(workers, "workers", 1, MAX_WORKERS)
    fresh = _check_bool(fresh, "fresh")
    progress = _check_bool(progress, "progress")
    # a stop raises `SweepInterrupted`, whose message is the stop's line: said once, by the exception
    outcome = run_sweep(find_config(str(target)), output=output, workers=count, progress=progress, fresh=fresh,
                        say=say_nothing)
    units = {name: _instance_units(problem, instance) for name, (problem, instance) in outcome.instances.items()}
    return SweepResult(list(outcome.rows), source=str(target), units=units)


def _solver_names(problem: str, solver: Any, *, field: str = "solver", host_link: bool = False) -> list[str]:
    """The solver names asked for: the problem's default for None, one name, or a sequence of
    names (`InputError` naming `field` for anything else, or an empty sequence; a list's name that is no
    solver of `problem`, its entry: ``solvers[1]``). `host_link`: the chain `problem` named sets the
    instance's host link aside (`_host_link_set_aside`), which an offloading solver's error then says."""
    if solver is None:
        return [default_solver(problem)]
    if isinstance(solver, str):
        _known_solver(problem, solver, field, host_link)
        return [solver]
    if isinstance(solver, Iterable) and not isinstance(solver, (bytes, dict)):
        names = list(solver)
        if names and all(isinstance(n, str) for n in names):
            for i, name in enumerate(names):
                _known_solver(problem, name, f"{field}[{i}]", host_link)
            return names
        if not names:
            raise InputError("no solver named", field=field)
    raise InputError(f"must be a solver name or a list of names, got {solver!r}", field=field)


def _known_solver(problem: str, name: str, field: str, host_link: bool = False) -> None:
    """Solver `name` of `problem` exists and imports here; else the registry's `InputError` (unknown, not
    available, an offloading solver on a chain: `host_link` as `registry.get_solver` takes it) naming
    `field`, a list's entry (``solvers[1]``)."""
    try:
        registry.get_solver(problem, name, host_link=host_link)
    except InputError as err:
        raise InputError(err.message, path=err.path, field=field) from None


def _check_options(problem: str, names: Sequence[str], options: dict[str, Any]) -> None:
    """Each keyword option is taken by at least one of the solvers `names` (their keyword
    parameters, as ``--option`` lists them): a misspelt one would be ignored without a word;
    and its value has the type (and range) that each of them declares (`_checks.option_type_error`,
    as the command line checks ``--option``), named by its keyword (``KEY``, as the solvers' own
    checks name it in Python: `errors.option_field`). None keeps the default where the solver's parameter
    allows it. Values whose check needs the instance (``table_budget``, in its memory unit, say) are left to
    the solvers (`_checks.SOLVER_CHECKED`, as on the command line)."""
    from memsched.experiments.commands._checks import (
        SOLVER_CHECKED,
        option_type_error,
        options_not_taken,
        options_taken,
        plain_option,
        solver_parameters,
    )
    from memsched.solvers.exact.options import check_spelled_once

    check_spelled_once(options)  # seed and random_seed: one option twice, as --option refuses it
    taken = options_taken((problem, name) for name in names) | {"devices"}
    # a shared exact option a solver does not use (memory_gb for CP-SAT) given as None keeps its default: no value
    unused = set().union(*(options_not_taken(problem, name) for name in names)) if names else set()
    for key, value in options.items():
        if key not in taken and not (value is None and key in unused):
            raise InputError(f"no option {key!r} for {', '.join(names)} (their options: "
                             f"{', '.join(sorted(taken - {'devices'})) or 'none'})", field=key)
    for name in names:
        kinds = solver_parameters(problem, name)
        for key, value in options.items():
            if key not in kinds or key in SOLVER_CHECKED or (value is None and _none_allowed(problem, name, key)):
                continue
            want = option_type_error(kinds[key], key, value)
            if want is not None:
                raise InputError(f"must be {want}, got {_show(value)}", field=option_field(key))
            options[key] = plain_option(kinds[key], value)  # np.int64(3) reaches the solver as 3



def _none_allowed(problem: str, name: str, key: str) -> bool:
    """None is a value of option `key` of the solver: an exact-layer option (None keeps its
    default, `ExactOptions.from_kwargs`), or a parameter whose default or annotation is None."""
    import inspect

    fn = registry.get_solver(problem, name)
    if getattr(fn, "exact_layer", False):
        from memsched.solvers.exact.options import ALIASES, ExactOptions

        if ALIASES.get(key, key) in ExactOptions.__dataclass_fields__:
            return True
    for target in (fn, getattr(fn, "__wrapped__", None)):
        param = inspect.signature(target).parameters.get(key) if target is not None else None
        if param is not None and (param.default is None or "None" in str(param.annotation)):
            return True
    return False


@_python_names
def baseline_objective(problem: str, instance: Any) -> float | None:
    """The objective without memory savings, for overheads: the total forward and backward
    time of a chain, join or offloading chain, the sum of cost_cpu of a graph; None for a
    pipeline (its period has no such baseline)."""
    if problem == "pipeline":
        return None
    target = instance.chain if problem == "offload" else instance
    for attr in ("total_time", "total_cpu"):
        fn = getattr(target, attr, None)
        if callable(fn):
            value = float(fn())
            return value if math.isfinite(value) and value > 0 else None
    return None


# ---------------------------------------------------------------------------- PyTorch side
@_python_names
def profile(model: Any, *, example_input: Any = None, target: Any = None, loss_fn: Any = None,
            repeats: int | None = None, out: PathLike | None = None, timing: str | None = None,
            problem: str = "chain", early_release: bool = False, threads: int | None = None, **sizes: Any) -> Any:
    """Profile a network into a chain: u_f, u_b per stage (ms), x, xbar, o_f, o_b (bytes); with
    ``problem="graph"``, into its torch.fx training graph (`models.graph.export`: measured times
    in ms, node sizes with what autograd keeps), the instance of the graph solvers.

    `model`: a zoo name ("resnet18", "densenet121", "gpt2", ...; sizes as ``batch=``,
    ``image_size=``, ``seq_len=``, ``width=``, ``depth=``, ``device=``, ``seed=``, an int in
    0..2^32-1 as ``memsched profile --seed``), a factory spec ("mynet.py:build", sizes passed
    to it), or your own network: an ``nn.Sequential`` / list of
    blocks with `example_input` (the tensor a_0, whose batch the sizes are measured at),
    `target` and `loss_fn(output, target)` (default: the mean of the output), or a
    `memsched.Network` holding them (`models.network`; one it holds given again as an argument is an
    `InputError` naming the argument, not ignored). A zoo name or factory profiled as a chain
    also takes ``cost=`` (``memsched profile --cost``): "measured" (default), "flops" (counted
    MFLOP) or "roofline:v100|a100|h100", the counted ones on fake CPU tensors, timing nothing, so
    that a `timing` or `repeats` with them is an `InputError` naming it. `repeats` (the timed
    repetitions per operation, an int in 1..10^4) is 3 when left out. Needs torch; `out` also saves the
    chain file (a str or path of a file in an existing folder, not a source file that a factory
    `model` reads, checked before anything is profiled). `early_release` (a bool, chains only:
    ``memsched profile --early-release``) also measures each backward B(i) releasing delta_{i+1} and its
    output early, as one ``loss.backward()`` does (``bwd_overhead_released``: the solvers charge it, `run`
    executes so). `threads` (``--threads``: None keeps torch's, else an int in 1..1024) is torch's number of
    CPU threads during the call, put back after it (one thread times by the thread's CPU clock, `default_clock`).
    Your modules keep their parameters, buffers (BatchNorm's running statistics) and ``.grad``
    (`_state_kept`), and torch's global RNG is put back as it was (building a zoo network and
    profiling seed it), as with `run`."""
    out = _check_out(out, model)
    _check_size_seed(sizes)
    early_release = _check_bool(early_release, "early_release")
    threads = _check_threads(threads)
    _need_torch()
    if problem not in ("chain", "graph"):
        raise InputError(f"must be chain or graph, got {problem!r}", field="problem")
    if early_release and problem != "chain":
        raise InputError("applies to chains (B(i) of a profiled chain), not to the graph problem",
                         field="early_release")
    if isinstance(model, str) and problem == "chain":
        _refuse_timing(sizes.get("cost"), timing, "timing")
        _refuse_timing(sizes.get("cost"), repeats, "repeats")
    repeats = 3 if repeats is None else check_int(repeats, "repeats", 1, MAX_REPEATS)
    from memsched.experiments.sweep.instances import pinned_threads

    with pinned_threads(threads):  # before profiling: the clock depends on it (`default_clock`)
        return _profile(model, example_input, target, loss_fn, repeats, out, timing, problem, early_release, sizes)


def _profile(model: Any, example_input: Any, target: Any, loss_fn: Any, repeats: int, out: str | None,
             timing: str | None, problem: str, early_release: bool, sizes: dict[str, Any]) -> Any:
    """`profile` once its arguments are checked (`repeats` an int, `early_release` a bool for a chain)."""
    from memsched.models.chain.profiler import profile_chain, profile_model
    from memsched.models.run import caller_rng_kept, default_clock

    if isinstance(model, str):
        with caller_rng_kept(model, sizes):  # building the zoo network seeds torch (`models.zoo.build_model`)
            if problem == "graph":
                return _profile_graph(model, example_input, target, loss_fn, repeats, out, sizes, timing)
            _check_zoo(model)
            _no_network_args(example_input, target, loss_fn)
            chain, _ = profile_model(model, repeats=repeats, out=out, timing=timing, clock=default_clock(),
                                     release=early_release, **sizes)
        return chain
    built = _own_network(model, example_input, target, loss_fn, sizes)
    with _state_kept([*built.blocks, built.loss_fn]), caller_rng_kept(built):
        if problem == "graph":
            return _profile_graph(built, None, None, None, repeats, out, {}, timing)
        chain = profile_chain(built.blocks, built.loss_fn, built.example_input, built.target, repeats=repeats,
                              name=built.label, meta={"model": built.name}, timing=timing, clock=default_clock(),
                              release=early_release)
    if out is not None:
        chain.save(out)
    return chain


@contextlib.contextmanager
def _state_kept(objects: Sequence[Any]) -> Iterator[None]:
    """Put the caller's modules among `objects` back as they were when the block ends, also when it
    raises: their buffers with `models.buffers` (as `models.run.run` keeps them), and each
    parameter's ``.grad``, which the profilers reset or accumulate into: None stays None, a
    gradient is the same tensor with its saved values (a copy held meanwhile: one more set of
    gradients in memory while profiling)."""
    import torch

    from memsched.models.buffers import restore_buffers, snapshot_buffers

    modules = [m for m in objects if isinstance(m, torch.nn.Module)]
    saved = snapshot_buffers(modules)
    grads = {id(p): (p, p.grad, None if p.grad is None else p.grad.detach().clone())
             for m in modules for p in m.parameters()}
    try:
        yield
    finally:
        restore_buffers(saved)
        with torch.no_grad():
            for p, grad, values in grads.values():
                p.grad = grad
                if grad is not None and values is not None:
                    grad.copy_(values)


def _check_out(out: Any, model: Any) -> str | None:
    """`profile`'s `out` as a path str (None: not saved): a str or `os.PathLike` naming a file that
    can be written (not a folder, in an existing writable folder) and, for a factory spec `model`,
    none of the source files it reads (``FILE.py``, or the module and its packages' ``__init__.py``:
    `commands.profile.model_inputs`), as ``memsched profile -o`` checks it (`_checks.check_outputs`).
    `InputError` naming ``out`` otherwise, before any profiling, so that nothing is written."""
    if out is None:
        return None
    if not isinstance(out, (str, os.PathLike)):
        raise InputError(f"must be the path of a file (str or Path), got {_show(out)}", field="out")
    from memsched.experiments.commands._checks import check_outputs
    from memsched.experiments.commands.profile import model_inputs

    path = os.fsdecode(os.fspath(out))
    sources = model_inputs(model) if isinstance(model, str) else []
    check_outputs([("out", path)], [("model", source) for _, source in sources])
    return path


def _check_size_seed(sizes: dict[str, Any]) -> None:
    """A ``seed=`` among `profile`'s sizes is an int in 0..`MAX_SEED` (as `run`'s `seed` and
    ``memsched profile --seed``), else `InputError` naming ``seed``; stored back as a plain int."""
    if "seed" in sizes:
        from memsched.experiments.commands._checks import MAX_SEED

        sizes["seed"] = check_int(sizes["seed"], "seed", 0, MAX_SEED)


def _refuse_timing(cost: Any, value: Any, field: str) -> None:
    """A timing argument (`timing`, `repeats`: its `field`) given, `value` not None, with a counted
    `cost` ("flops", "roofline:*": nothing is timed) would be ignored: `InputError` naming `field`, as
    ``memsched profile --cost flops --timing ...`` refuses it (`commands.profile.refuse_timing`,
    which reads parsed flags). A bad `cost` is `models.costs.parse_cost`'s `InputError` naming
    ``cost``. Needs torch (`parse_cost`)."""
    if cost is None or value is None:
        return
    from memsched.models.costs import parse_cost

    if not parse_cost(cost).measured:
        raise InputError(f"profile times nothing with a counted cost model (cost={cost!r}), so this argument "
                         "would be ignored", field=field)


def _profile_graph(model: Any, example_input: Any, target: Any, loss_fn: Any, repeats: int, out: PathLike | None,
                   sizes: dict[str, Any], timing: str | None = None) -> Any:
    """`profile` with ``problem="graph"``: the training graph, as `memsched run --problem graph` profiles it."""
    from memsched.models.graph.export import export_training_graph
    from memsched.models.network import diagnosed

    if isinstance(model, str):
        _check_zoo(model)
        _no_network_args(example_input, target, loss_fn)
        from memsched.models.zoo import build_model

        model = build_model(model, **sizes)
    else:
        model = _own_network(model, example_input, target, loss_fn, sizes)
    with diagnosed(model):  # a zoo network that cannot run at these sizes is bad input, not a bug
        return export_training_graph(model, cost="measured", ram="tape", repeats=repeats,
                                     timing=timing or "in_step", out=out)


@_python_names
def run(model: Any, budget: int | float | str, solver: str | None = None, *, problem: str | None = None,
        chain: Any = None, instance: Any = None, bandwidth: str | float | None = None, latency: float | None = None,
        options: dict[str, Any] | None = None, slots: int = DEFAULT_SLOTS, time_limit: float | None = None,
        time_repeats: int = 3, repeats: int | None = None, seed: int = 0, timing: str | None = None,
        example_input: Any = None, target: Any = None, loss_fn: Any = None, early_release: bool = False,
        threads: int | None = None, **sizes: Any) -> RunResult:
    """Solve, then execute the schedule for real as one training step of `model`: a zoo network
    (siamese / triplet / clip run as join networks), a factory spec, or your own network with
    `example_input`, `target`, `loss_fn` (as in `profile`; one module that is not an
    ``nn.Sequential`` runs as the graph problem by default, its torch.fx training graph planned by
    Checkmate's solvers, unless a `chain` / `instance` or a solver of another problem is given; a
    `ScheduledChain` / `ScheduledGraph` is an `InputError` naming ``model``): the simulator's prediction
    (makespan in the instance's time unit: ms when profiled here, else the file's, e.g. MFLOP for a
    graph exported with ``--cost flops``, as ``data["units"]["time"]`` says; peak in bytes: an instance
    file in another memory unit is an `InputError` naming its ``meta.units.memory``) beside the
    measured time (ms) and peak memory, and whether every
    gradient matches plain autograd (``grad_check``). `chain` / `instance` (one of them) give the costs (an
    instance or a file, read as ``memsched solve`` reads it: a chain file with a ``host_link``, or
    with an offloading `solver` that is no chain solver such as "pofo", is offloading, and without a
    bandwidth from either an `InputError` naming its ``host_link.bandwidth``) instead of
    profiling; `bandwidth` (bytes/s or "12GB/s") runs an offloading
    schedule, over a link of `latency` seconds per transfer (default 0; an offloading instance's own
    link otherwise); `options` is a dict of solver options (``memsched run --option KEY=VALUE``);
    `timing` and sizes as in `profile` (sizes for zoo names and factories only). The arguments are
    checked before anything is built, as ``memsched run`` checks its flags: `budget` as in `solve`
    (the bytes of "X%" once the network is profiled), `solver` one name, `problem` one of chain,
    offload, join, graph, a `bandwidth` only for offloading and a `latency` only with a bandwidth,
    each `options` key one the solver takes (not `slots` nor `time_limit`, which are arguments
    here) with a value of its type, `slots` an int in 0..10^9, `time_limit` as in `solve`,
    `time_repeats` and `repeats` ints in 1..10^4 (`repeats`, the profiling's repetitions per op, 3 when
    left out), `timing` None, "isolated" or "in_step", `seed` an int in 0..2^32-1 (`InputError` naming
    the argument); the profiling arguments `repeats` and `timing` given with a `chain` / `instance`,
    which profiles nothing, are an `InputError` naming the argument, as ``memsched run`` refuses
    ``--repeats`` and ``--timing`` with an instance file. `early_release` (a bool, ``memsched run
    --early-release``): the chain profiled here
    also measures each B(i) releasing delta_{i+1} and its output early and is executed so (the chain
    problem only, and not with a `chain` / `instance`, which runs so when it was profiled so:
    `profile(..., early_release=True)`); `threads` (``--threads``: None keeps torch's, else an int in
    1..1024) is torch's number of CPU threads during the run, put back after it.
    Your modules keep their parameters, buffers (BatchNorm's running statistics:
    the input check, the profiling and the timed steps are put back afterwards) and ``.grad`` (the
    gradients you had, None or accumulated, not the run's: `_state_kept`, as with `profile`), also
    when the run raises or is interrupted (Ctrl-C); torch's global RNG (CPU, and the CUDA device
    used) is put back as it was, though the run seeds it with `seed`. Needs torch."""
    if solver is not None and not isinstance(solver, str):
        raise InputError(f"must be one solver name (a str), got {solver!r}", field="solver")
    if problem is not None and problem not in _RUN_PROBLEMS:
        raise InputError(f"must be one of {', '.join(_RUN_PROBLEMS)} (or None), got {problem!r}", field="problem")
    from .execute import JOIN_NAMES, check_join_network, check_timing, refuse_profiling_options

    check_join_network(model, problem)  # siamese with problem="chain": as ``memsched run --problem`` says it
    bytes_ = budget_bytes(budget)
    _check_latency(latency)
    _bandwidth_problem(bandwidth, problem)
    options = _run_options(options)
    slots = _check_slots(slots)
    time_limit = _check_time_limit(time_limit)
    time_repeats = check_int(time_repeats, "time_repeats", 1, MAX_REPEATS)
    repeats = None if repeats is None else check_int(repeats, "repeats", 1, MAX_REPEATS)
    check_timing(timing)  # before anything is built (the profilers check it only once the network is)
    seed = check_int(seed, "seed", 0, 2**32 - 1)
    early_release = _check_bool(early_release, "early_release")
    threads = _check_threads(threads)
    _instance_object(instance, "instance")
    _instance_object(chain, "chain")
    if chain is not None and instance is not None:  # two sources of costs: one would be dropped without a word
        raise InputError("give chain or instance, not both: each gives the costs", field="instance")
    if early_release and (chain is not None or instance is not None):
        given = "chain" if instance is None else "instance"
        raise InputError(f"applies to a chain profiled by this run; the costs come from the {given} given, which "
                         "is executed releasing early when it was profiled so (profile(..., early_release=True))",
                         field="early_release")
    if chain is not None or instance is not None:  # the costs are given: nothing is profiled
        refuse_profiling_options(_costs_source(chain, instance), repeats=repeats, timing=timing)
    if problem is None and bandwidth is None and not (isinstance(model, str) and model in JOIN_NAMES):
        problem = _solver_offloads(instance if chain is None else chain, solver)  # (a join network runs as join)
    _need_torch()
    from memsched.experiments.sweep.instances import pinned_threads

    from .execute import run_model

    if isinstance(model, str):
        _no_network_args(example_input, target, loss_fn)
    else:
        if problem == "join":
            raise InputError("your own network runs as a chain (problem chain, offload or graph); the join networks "
                             "are the zoo's siamese, triplet and clip", field="problem")
        network = model
        model = _own_network(model, example_input, target, loss_fn, sizes)
        if problem is None and bandwidth is None and len(model.blocks) == 1 and _runs_as_graph(
                network, instance if chain is None else chain, solver):
            problem = "graph"  # one module (not an nn.Sequential): its torch.fx graph, not a chain of one stage
    if early_release:
        _early_release_problem(model, problem, bandwidth)
    kept = [] if isinstance(model, str) else [*model.blocks, model.loss_fn]
    file, file_field = (instance, "instance") if chain is None else (chain, "chain")
    # the caller's .grad and buffers, also after a Ctrl-C (torch's RNG: `models.run.run`); errors name the file
    released = {"early_release": True} if early_release else {}  # (run_model's default: False)
    with _state_kept(kept), _file_named(file), pinned_threads(threads):
        return RunResult(run_model(model, budget if bytes_ is None else bytes_, solver, problem=problem,
                                   instance=file, instance_field=file_field, bandwidth=bandwidth,
                                   latency=latency, slots=slots, time_limit=time_limit, time_repeats=time_repeats,
                                   repeats=3 if repeats is None else repeats, seed=seed, timing=timing,
                                   options=options, **released, **sizes))


def _costs_source(chain: Any, instance: Any) -> str:
    """Where `run`'s costs come from, for its messages: "the instance file PATH" for a path given as
    `chain` or `instance`, else "the chain given" / "the instance given" (an instance object)."""
    value, given = (instance, "instance") if chain is None else (chain, "chain")
    if isinstance(value, (str, os.PathLike)):
        return f"the instance file {os.fsdecode(os.fspath(value))}"
    return f"the {given} given"


def _early_release_problem(model: Any, problem: str | None, bandwidth: Any) -> None:
    """`run`'s `early_release` applies to the chain problem (B(i) of a chain profiled here), as ``memsched run
    --early-release`` does: `problem`, or when None the one `execute.run_model` takes without an instance (a
    join network's "join", "offload" with a `bandwidth`, else "chain": `execute._default_problem`); another is an
    `InputError`."""
    from .execute import _default_problem

    problem = problem or _default_problem(model, None, bandwidth)
    if problem != "chain":
        raise InputError(f"applies to the chain problem (B(i) of a profiled chain), not to {problem}",
                         field="early_release")


def _instance_object(value: Any, field: str) -> None:
    """`run`'s `chain` / `instance` argument (its name: `field`) is None, a path, or an instance
    object (`problem_of`); anything else is `problem_of`'s `InputError`, naming `field`."""
    if value is None or isinstance(value, (str, os.PathLike)) or _problem_of_class(value, _CLASSES) is not None:
        return
    raise InputError(f"not a memsched instance: {type(value).__name__} (use memsched.load(path))", field=field)


#: how the fields of an instance file begin (a chain's or join's meta, a graph's, a chain's stages)
_FILE_FIELDS = ("meta.", "graph.meta.", "stages[")


@contextlib.contextmanager
def _file_named(file: Any) -> Iterator[None]:
    """`run`'s `InputError` about a field of its instance `file` (a path; anything else: unchanged) names
    the file, as ``memsched run`` does (``f.json: meta.dtype: ...``): `execute.run_model` loads the file
    first, so `models.run` sees the instance without its path."""
    try:
        yield
    except InputError as err:
        if err.path is not None or not isinstance(file, (str, Path)) or not str(err.field or "").startswith(
                _FILE_FIELDS):
            raise
        raise InputError(err.message, path=str(file), field=err.field) from None


def _solver_offloads(file: Any, solver: str | None) -> str | None:
    """"offload" when `run`'s instance `file` (a path) is a chain file that `solver` makes an
    offloading instance, as ``memsched solve`` and ``memsched run`` read it (`load_problem`: an
    offloading solver that is no chain solver, pofo but not cpsat; a file without a
    ``host_link.bandwidth`` is then an `InputError` naming it, before anything is built); None
    otherwise (the problem stays `execute.run_model`'s default). No torch."""
    if solver is None or not isinstance(file, (str, Path)):
        return None
    from memsched.experiments.commands._common import load_problem

    return "offload" if load_problem(str(file), solver=solver)[0] == "offload" else None


def _run_options(options: Any) -> dict[str, Any]:
    """`run`'s `options`: None (no options) or a dict of solver options keyed by name, none of them
    an argument of `run` itself (the solver's own checks of each key come with the problem,
    `check_run_solver_args`)."""
    if options is None:
        return {}
    if not isinstance(options, dict) or not all(isinstance(key, str) for key in options):
        raise InputError(f"must be a dict of solver options (name: value), got {_show(options)}", field="options")
    for key in ("slots", "time_limit"):
        if key in options:
            raise InputError(f"{key} is an argument of run ({key}=...), not a solver option", field="options")
    from memsched.solvers.exact.options import check_spelled_once

    check_spelled_once(options)  # workers and num_workers: one option twice, as --option refuses it
    return dict(options)


def check_run_solver_args(problem: str, solver: str, bandwidth: Any, latency: Any, options: dict[str, Any], *,
                          host_link: bool = False) -> None:
    """`run`'s link and solver options once its `problem` is known (a join network's, the problem of
    an instance) and `solver` named (the problem's default when none was): a bandwidth only for
    offloading, a latency only with a bandwidth (given, or an offloading instance's), and each
    option taken by `solver` with a value of its type (`_check_options`) that the solver's own check
    takes without an instance (`check_option_values`: CP-SAT's ``parameters``...), as `solve` checks them.
    `host_link`: the instance has a host link that the chain `problem` named sets aside (an offloading
    `solver` is then refused saying so, `registry.get_solver`). `InputError` naming the argument."""
    registry.get_solver(problem, solver, host_link=host_link)  # an offloading one on a chain: what fixes it
    _bandwidth_problem(bandwidth, problem)
    if latency is not None and bandwidth is None:
        raise InputError("needs a bandwidth: it is the host link's (give bandwidth=..., or an offloading instance)",
                         field="latency")
    _check_devices(problem, options.get("devices"))  # run executes no pipeline
    _check_options(problem, [solver], options)
    check_option_values(problem, [solver], options)  # CP-SAT's parameters...: before the network is profiled


#: the problems `run` executes (``memsched run --problem``)
_RUN_PROBLEMS = ("chain", "offload", "join", "graph")
#: the most timed or profiling repetitions (``memsched run --time-repeats``, ``memsched profile --repeats``)
MAX_REPEATS = 10**4


def _own_network(model: Any, example_input: Any, target: Any, loss_fn: Any, sizes: dict[str, Any]) -> Any:
    """`model` and its arguments as a checked `models.zoo.ZooModel` (`models.network.as_zoo_model`)."""
    from memsched.models.network import as_zoo_model

    _not_scheduled(model)
    if sizes:
        raise InputError(f"sizes ({', '.join(sorted(sizes))}) apply to zoo names and factories; your own network's "
                         "sizes are its example input's", field=sorted(sizes)[0])
    return as_zoo_model(model, example_input=example_input, target=target, loss_fn=loss_fn)


def _runs_as_graph(network: Any, file: Any, solver: str | None) -> bool:
    """Whether `run` plans your own `network` (an nn.Module) as the graph problem when no problem is
    named: a module that is not an ``nn.Sequential`` (one of any length, even one child, is a chain),
    unless a chain / instance `file` (its own problem decides) or a `solver` that is no graph solver
    is given. Needs torch."""
    from torch import nn

    if isinstance(network, nn.Sequential) or file is not None:
        return False
    return solver is None or solver in registry.get_problem("graph").solvers


def _not_scheduled(model: Any) -> None:
    """`run` / `profile` take the network itself: a `ScheduledChain` / `ScheduledGraph` (already
    planned, whose forward runs its schedule) is an `InputError` naming ``model``."""
    from memsched.models.chain.training import ScheduledChain
    from memsched.models.graph.training import ScheduledGraph

    if isinstance(model, (ScheduledChain, ScheduledGraph)):
        raise InputError(f"a {type(model).__name__} runs its own schedule: give the network it trains (its "
                         "modules), not the wrapper", field="model")


def _no_network_args(example_input: Any, target: Any, loss_fn: Any) -> None:
    for name, value in (("example_input", example_input), ("target", target), ("loss_fn", loss_fn)):
        if value is not None:
            raise InputError("applies to your own network (an nn.Module), not to a zoo name or factory, which "
                             "builds its own", field=name)


# ---------------------------------------------------------------------------- figures
@_python_names
def plot(obj: Any, schedule: Any = None, *, budget: int | float | str | None = None, problem: str | None = None,
         title: str | None = None, figsize: tuple[float, float] | None = None, **kwargs: Any) -> Any:
    """A matplotlib figure: ``plot(result)`` (any `Result`, `Comparison`, `SweepResult` or `RunResult`;
    other keyword arguments go to its ``.plot``, e.g. ``y=`` for a sweep), ``plot(instance, schedule)``
    (memory timeline above the operations; the schedule in any form `simulate` takes: a schedule
    object, a `Result`, its JSON dict or a schedule file) or ``plot(instance, {"rotor": s1,
    "periodic": s2})`` (stacked on shared scales). `budget` (marked on the timeline) and `problem`
    apply to an instance (a result is drawn at its own budget); a `Result` as the schedule brings its
    problem when `problem` is None, as in `simulate` (a pipeline result, or a partition's JSON, is drawn on
    the chain file it was solved from); an unknown keyword argument, or one that does not apply, is an `InputError`."""
    if isinstance(obj, (Result, Comparison, SweepResult, RunResult)):
        for name, value in (("schedule", schedule), ("budget", budget), ("problem", problem)):
            if value is not None:
                raise InputError(f"applies to plot(instance, schedule); a {type(obj).__name__} is drawn with its own "
                                 "schedules and budget", field=name)
        sized = {} if figsize is None else {"figsize": figsize}  # None: the result's own default size
        return obj.plot(title=title, **sized, **kwargs)
    no_options(kwargs, "plot(instance, schedule)", ("budget", "problem", "title", "figsize"))
    check_title(title)
    check_figsize(figsize)
    if schedule is None:
        raise InputError("plot(instance, schedule): no schedule given", field="schedule")
    from memsched.experiments.plotting import plot_comparison, plot_schedule

    problem, instance = _instance_for(obj, schedule, problem, None, "drawn", field="obj")
    if _is_named_schedules(schedule):  # {name: schedule}, not one schedule's JSON
        instance = _one_solved_machine(problem, instance, schedule)
        bytes_ = _budget(instance, budget, problem) if budget is not None else None
        schedules = {k: _as_schedule(problem, instance, v, "drawn", field=f"schedule[{k!r}]")
                     for k, v in schedule.items()}
        with _schedule_errors(problem, schedules):
            return plot_comparison(problem, instance, schedules, budget=bytes_, title=title, figsize=figsize)
    instance = _solved_machine(problem, instance, schedule)  # before the budget: "X%" of that machine's peak
    bytes_ = _budget(instance, budget, problem) if budget is not None else None
    schedule = _as_schedule(problem, instance, schedule, "drawn")
    with _schedule_errors(problem, schedule):
        return plot_schedule(problem, instance, schedule, budget=bytes_, title=title, figsize=figsize)


#: keys of one schedule's JSON (or of a ``solve --json`` object holding one), never solver names
_SCHEDULE_KEYS = frozenset({"ops", "format", "stages", "schedule", "problem"})


# ---------------------------------------------------------------------------- helpers
def _budget(instance: Any, spec: Any, problem: str) -> int:
    """The budget `spec` of `instance` (already read as `problem`) in the instance's size unit
    (bytes unless its ``meta.units.memory`` says otherwise): a number in that unit (at least 1, at
    most 1 PiB), a size string converted into it ("1.5GB") or "X%" of the reference peak;
    `InputError` naming ``budget`` for anything else (`budget_bytes`)."""
    from memsched.solvers.units import memory_unit, parse_positive_budget, unit_bytes

    per_unit = unit_bytes(instance)
    unit = memory_unit(instance) if per_unit != 1 else None  # bytes: the messages of `memsched.run` (no instance)
    bytes_ = budget_bytes(spec, per_unit=per_unit, unit=unit)  # the form is checked whatever the unit
    if bytes_ is not None:
        return bytes_
    reference = registry.problem_module(problem).reference_peak(instance)
    return parse_positive_budget(spec, reference, field="budget", per_unit=per_unit, unit=unit)


def budget_bytes(spec: Any, *, field: str = "budget", per_unit: int | None = 1, unit: str | None = None) -> int | None:
    """A budget that needs no reference peak, in the instance's size unit (`per_unit` bytes per unit,
    named `unit`; bytes by default): a number or a size string, checked by the one rule of budgets
    (`units.parse_positive_budget`: at least one unit, at most 1 PiB); None for a share ("60%"),
    whose form is checked here but whose value needs the instance's reference peak. `InputError`
    naming `field` (``budget``; ``memsched run`` checks ``--budget`` so before it builds anything)
    for anything else."""
    from memsched.solvers.units import parse_budget, parse_positive_budget

    if not isinstance(spec, (str, numbers.Real)):
        raise InputError(f"must be bytes (a number), a size (\"1.5GB\") or a share (\"60%\"), got {_show(spec)}",
                         field=field)
    if isinstance(spec, str) and spec.strip().endswith("%"):
        parse_budget(spec, 0, field=field)  # the percentage's form (any share of 0 bytes is 0)
        return None
    return parse_positive_budget(spec, None, field=field, per_unit=per_unit, unit=unit)


def _show(value: Any) -> str:
    """`value` for a message: short (an integer too long to print by its size, a long repr cut)."""
    from memsched.solvers.units import short_number

    if isinstance(value, int) and not isinstance(value, bool):
        return short_number(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_bool(value: Any, field: str) -> bool:
    """`value` as a bool: True or False, or a numpy bool (``np.True_``, `_checks.is_bool`); `InputError`
    naming `field` for anything else (1, "yes", None)."""
    from memsched.experiments.commands._checks import is_bool

    if not is_bool(value):
        raise InputError(f"must be True or False, got {_show(value)}", field=field)
    return bool(value)


def _check_threads(threads: Any) -> int | None:
    """None (torch's own number of CPU threads) or an int in 1..`MAX_THREADS` (``--threads``'s range)."""
    from memsched.experiments.commands._checks import MAX_THREADS

    return None if threads is None else check_int(threads, "threads", 1, MAX_THREADS)


def _check_slots(slots: Any) -> int:
    return check_int(slots, "slots", 0, MAX_SLOTS)


def _check_time_limit(time_limit: Any) -> float | None:
    """None (no limit) or a positive number of seconds, at most a week (`exact.options.MAX_SECONDS`)."""
    from memsched.solvers.exact.options import MAX_SECONDS

    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real) \
            or not 0 < time_limit <= MAX_SECONDS:  # (NaN fails both)
        raise InputError(f"must be None (no limit) or a positive number of seconds, at most a week "
                         f"({MAX_SECONDS:.0f}), got {_show(time_limit)}", field="time_limit")
    return float(time_limit)


def _check_latency(latency: Any) -> None:
    """None, or a number of seconds in 0..`MAX_LATENCY` (not a bool)."""
    from memsched.solvers.offload.instance import MAX_LATENCY

    if latency is None:
        return
    if isinstance(latency, bool) or not isinstance(latency, numbers.Real) or not 0 <= latency <= MAX_LATENCY:
        raise InputError(f"must be a number of seconds in 0..{MAX_LATENCY:g} per transfer, got {_show(latency)}",
                         field="latency")


#: the message for a latency given without a bandwidth (nor a host link)
_LATENCY_ALONE = "needs a bandwidth: it is the host link's (give bandwidth=..., or a chain file with a host_link)"


def _check_problem(problem: Any) -> None:
    if problem is not None and problem not in registry.PROBLEMS:
        raise InputError(f"must be one of {', '.join(registry.PROBLEMS)} (or None), got {_show(problem)}",
                         field="problem")


def _bandwidth_problem(bandwidth: Any, problem: str | None) -> None:
    """A bandwidth makes an offloading instance: with another `problem` it is an `InputError`."""
    if bandwidth is not None and problem not in (None, "offload"):
        raise InputError(f"a bandwidth makes a chain an offloading instance, not {article(problem)} one",
                         field="bandwidth")


def _check_devices(problem: str, devices: Any) -> int | None:
    """`devices` for `problem`: required for a pipeline (an int in 1..`MAX_DEVICES`), refused otherwise
    (for a chain, saying how to read it as a pipeline: `_PIPELINE_HINTS`)."""
    if problem != "pipeline":
        if devices is not None:
            raise InputError(f"applies to pipelines, not to {article(problem)} instance"
                             f"{_PIPELINE_HINTS.get(problem, '')}", field="devices")
        return None
    if devices is None:
        raise InputError("a pipeline needs devices=P", field="devices")
    return check_int(devices, "devices", 1, MAX_DEVICES)


def _schedule_problem(schedule: Any) -> str | None:
    """The problem whose schedule class `schedule` is an instance of (None: not one of ours)."""
    return _problem_of_class(schedule, _SCHEDULE_CLASSES)


def _as_schedule(problem: str, instance: Any, schedule: Any, verb: str, *, field: str = "schedule") -> Any:
    """The schedule object of `problem` in `schedule`: a schedule object, a `Result`, a schedule's
    JSON dict (or a ``solve --json`` object), or the path of a schedule file; the problem's plain
    forms (a graph's list of node ids, read as a schedule file's ``sequence`` is, `_node_ids_schedule`; a
    list of operations: read as the problem's `Op` / `JOp`, `_plain_ops`) are checked for their shape and
    left to the simulator to judge.
    `InputError` for a schedule of another problem ("a chain schedule cannot be simulated as
    pipeline") or anything else; `simulate` and `plot` share it."""
    if isinstance(schedule, Result):
        if schedule.problem != problem:
            raise InputError(f"{article(schedule.problem)} result cannot be {verb} as {problem}", field=field)
        if schedule.schedule is None:
            raise InputError(f"{schedule.solver} found no schedule ({schedule.status})", field=field)
        schedule = schedule.schedule
    module = registry.problem_module(problem)
    if isinstance(schedule, (str, Path)):
        from memsched.solvers.jsonio import read_json

        schedule = module.schedule_from_json(read_json(schedule), instance, path=str(schedule))
    elif isinstance(schedule, dict):
        schedule = module.schedule_from_json(schedule, instance)
    if schedule is None:
        raise InputError("no schedule given", field=field)
    owner = _schedule_problem(schedule)
    if owner is not None and owner != problem:
        raise InputError(f"{article(owner)} schedule cannot be {verb} as {problem} (the instance is read as {problem})",
                         field=field)
    if owner is None and not isinstance(schedule, (list, tuple)):
        raise InputError(f"not {article(problem)} schedule: {type(schedule).__name__} (give a schedule, a Result, its "
                         "JSON dict or the path of a schedule file)", field=field)
    if owner is None and problem == "graph":
        schedule = _node_ids_schedule(instance, schedule, field)
    if owner is None and problem in _PLAIN_OPS:
        schedule = _plain_ops(problem, schedule, field)
    _check_shape(instance, schedule)
    return _as_schedule_object(problem, instance, schedule)


def _as_schedule_object(problem: str, instance: Any, schedule: Any) -> Any:
    """A plain list (already checked) as the problem's schedule object, so that a replay's `Result`
    writes its JSON (``to_json``) like a solver's: chain `Schedule`, join `JoinSchedule` (a graph's
    list is already its `GraphSchedule`, `_node_ids_schedule`); any other schedule unchanged."""
    if not isinstance(schedule, (list, tuple)):
        return schedule
    if problem == "chain":
        from memsched.solvers.chain.schedule import Schedule

        return Schedule(list(schedule), int(instance.length))
    if problem == "join":
        from memsched.solvers.join.schedule import JoinSchedule

        return JoinSchedule(list(schedule), list(instance.lengths))
    return schedule


#: problem -> (the fields of one operation of its plain schedule, an example) for `_plain_ops`
_PLAIN_OPS = {"chain": (("kind", "stage"), '("F_all", 0)'), "join": (("kind", "branch", "stage"), '("F_all", 0, 1)')}


def _plain_ops(problem: str, sequence: Sequence[Any], field: str) -> list[Any]:
    """A chain's or join's plain schedule (a list of operations) as a list of the problem's operations
    (`solvers.chain.schedule.Op`: kind, stage; `solvers.join.schedule.JOp`: kind, branch, stage; the
    join's loss is ``("Loss", -1, -1)``): each entry a tuple or list of that many items, its kind one of
    `KINDS` and its indices integers (a numpy integer is one, a bool is not). Anything else (a string
    such as "F_all(0)", a triple for a chain, a pair for a join) is an `InputError` naming `field` and
    the entry (the simulator would fail with a bare ValueError, or the drawing on a plain tuple).
    Indices out of range are the simulator's to judge (an "invalid" replay)."""
    from memsched.solvers.chain.schedule import KINDS, Op
    from memsched.solvers.join.schedule import JOp

    fields, example = _PLAIN_OPS[problem]
    make = Op if problem == "chain" else JOp
    ops = []
    for i, entry in enumerate(sequence):
        ok = isinstance(entry, (tuple, list)) and len(entry) == len(fields) and entry[0] in KINDS and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in entry[1:])
        if not ok:
            raise InputError(f"{article(problem)} schedule as a list holds operations ({', '.join(fields)}) such as "
                             f"{example}, kind one of {', '.join(KINDS)}; entry {i} is {_show(entry)}", field=field)
        ops.append(make(str(entry[0]), *(int(v) for v in entry[1:])))
    return ops


def _node_ids_schedule(graph: Any, sequence: Sequence[Any], field: str) -> Any:
    """A graph's plain schedule (a list of node ids, as in the graph file and as a schedule file's
    ``sequence`` holds them: `GraphSchedule.indices` reads both) as the `GraphSchedule` of the nodes'
    own ids. An entry that is no id (a bool, None, a list) or names no node of `graph` is an
    `InputError` naming `field` (``schedule``) and the entry; ids are not node indices (0-based
    positions in the file), which differ wherever the file numbers its nodes otherwise."""
    from memsched.solvers.graph.schedule import GraphSchedule

    try:
        indices = GraphSchedule(list(sequence)).indices(graph)
    except InputError as err:
        raise InputError(f"a graph schedule as a list holds node ids (as in the graph file, not node indices); "
                         f"{err.message}"[:300], field=field) from None
    return GraphSchedule.from_indices(graph, indices)


def _check_shape(instance: Any, schedule: Any) -> None:
    """A schedule object is for the instance's chain length (chain, offload: ``length``) or branch
    lengths (join: ``lengths``), as its JSON is checked when read (`chain.schedule.ops_json`): the
    same `InputError`, naming the field, whichever form the schedule came in."""
    for key in ("length", "lengths"):
        mine, theirs = getattr(schedule, key, None), getattr(instance, key, None)
        if mine is None or theirs is None:
            continue
        mine = list(mine) if key == "lengths" else int(mine)
        theirs = list(theirs) if key == "lengths" else int(theirs)
        if mine != theirs:
            raise InputError(f"the schedule is for {key} {mine!r} but the instance has {theirs!r}", field=key)


def _solved_machine(problem: str, instance: Any, schedule: Any, given: dict[str, float] | None = None) -> Any:
    """A pipeline `instance` on the machine `schedule` was solved on (weight factor, link), as a
    partition's JSON records it (a file, a dict, or a `Result`'s ``to_json``), so that `simulate`
    and `plot` replay every form of one result alike, with the values `given` (`_machine_given`:
    `simulate`'s arguments) replacing the recorded ones, as ``memsched simulate --bandwidth --latency
    --weight-factor`` replaces them; any other problem: unchanged."""
    if problem != "pipeline":
        return instance
    if isinstance(schedule, (str, Path, dict, Result)):
        return _on_recorded_machine(instance, schedule.to_json() if isinstance(schedule, Result) else schedule,
                                    given or {})
    if not given:
        return instance
    return _on_given_machine(instance, given)


def _one_solved_machine(problem: str, instance: Any, schedules: dict[str, Any]) -> Any:
    """The pipeline `instance` on the machine every entry of `plot`'s ``{name: schedule}`` is drawn on
    (`_solved_machine` of each entry, as ``plot(instance, entry)`` draws it alone): panels on shared
    scales need one machine, so entries recorded on different machines (weight factor, bandwidth,
    latency) are an `InputError` naming the second one's key; any other problem: `instance`."""
    if problem != "pipeline":
        return instance
    chosen, first = instance, None
    for key, entry in schedules.items():
        mine = _solved_machine(problem, instance, entry)
        if first is None:
            chosen, first = mine, key
        elif _machine(mine) != _machine(chosen):
            raise InputError(f"was solved on another machine ({_machine_text(mine)}) than {first!r} "
                             f"({_machine_text(chosen)}); draw them apart", field=f"schedule[{key!r}]")
    return chosen


def _machine(instance: Any) -> tuple[float, float | None, float]:
    """A pipeline's machine: (weight factor, bandwidth in bytes/s or None, latency in s)."""
    return float(instance.weight_factor), instance.bandwidth, float(instance.latency)


def _machine_text(instance: Any) -> str:
    weight_factor, bandwidth, latency = _machine(instance)
    return f"weight_factor {weight_factor:g}, bandwidth {bandwidth if bandwidth is None else f'{bandwidth:g}'}, " \
           f"latency {latency:g}"


def _on_recorded_machine(instance: Any, schedule: str | Path | dict[str, Any], given: dict[str, float]) -> Any:
    """The pipeline `instance` on the machine a partition's JSON (a dict, or the path of a file)
    records: weight factor, bandwidth (bytes/s), latency (s), as ``memsched partition --json``
    writes them (`solvers.pipeline.schedule.machine_from_json`); unchanged when it records none.
    `memsched simulate` replays a partition file the same way (`on_machine`): a latency without a
    bandwidth is an `InputError` naming the file and ``schedule.latency`` (or ``latency``). The values
    `given` replace the recorded ones (`_solved_machine`); a latency given without a bandwidth (given or
    recorded) is an `InputError` naming ``latency``."""
    from memsched.solvers.jsonio import read_json
    from memsched.solvers.pipeline.schedule import machine_field, machine_from_json, on_machine

    path = str(schedule) if isinstance(schedule, (str, Path)) else "<schedule>"
    data = read_json(schedule) if isinstance(schedule, (str, Path)) else schedule
    machine = {**machine_from_json(data, path=path), **given}
    if not machine:
        return instance
    if "latency" in given:
        return _on_given_machine(instance, machine)
    return on_machine(instance, machine, path=path, field=machine_field(data, "latency"),
                      hint="the partition records no bandwidth: drop its latency or record one")


@contextlib.contextmanager
def _schedule_errors(problem: str, schedule: Any) -> Iterator[None]:
    """A TypeError or AttributeError from a plain form of a schedule (a list of something else
    than operations) as an `InputError`; from one of memsched's own classes it is a bug, re-raised."""
    try:
        yield
    except (TypeError, AttributeError):
        parts = list(schedule.values()) if isinstance(schedule, dict) else [schedule]
        if all(type(part).__module__.startswith("memsched.") for part in parts):
            raise  # ours: a bug, not bad input
        raise InputError(f"not {article(problem)} schedule: {type(schedule).__name__} (give a schedule, a Result, its "
                         "JSON dict or the path of a schedule file)", field="schedule") from None


def _is_config(target: Any) -> bool:
    if not isinstance(target, (str, Path)):
        return False
    path = Path(target)
    if path.suffix.lower() in _CONFIG_SUFFIXES:
        return True
    if path.suffix or path.exists():
        return False
    from memsched.experiments.sweep import find_config

    return find_config(str(target)).exists()


def _need_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise InputError("this needs PyTorch (pip install torch)") from None


def _check_zoo(model: str) -> None:
    from memsched.experiments.commands.profile import ZOO_NAMES
    from memsched.models.network import is_factory_spec

    if model not in ZOO_NAMES and not is_factory_spec(model):
        raise InputError(f"unknown model {model!r} (one of {', '.join(ZOO_NAMES)}, or FILE.py:FUNCTION)",
                         field="model")


__all__ = ["load", "data_path", "problem_of", "as_problem", "budget", "reference_peak", "list_solvers",
           "default_solver", "solve", "simulate", "sweep", "baseline_objective", "profile", "run", "plot"]
