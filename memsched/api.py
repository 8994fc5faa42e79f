"""The facade behind ``import memsched``: load, profile, solve, simulate, run, sweep, plot.

Every function takes instances as the problem packages define them (`solvers.chain.Chain`,
`solvers.join.Join`, `solvers.graph.Graph`, `solvers.offload.OffloadInstance`,
`solvers.pipeline.Pipeline`) or a path to an instance file, and budgets as bytes (an int),
a size string ("1.5GB", "800MiB") or a percentage of the problem's reference peak ("60%":
the store-all peak for chains, joins and offloading, the one-pass peak for graphs, the
one-device memory for pipelines). Times are in the instance's unit (ms for profiled chains).

Solving always goes through `solvers.registry.solve`: each schedule is replayed by the
problem's simulator, and the makespan (period for pipelines) and peak memory reported are
the simulator's. This module imports numpy and the solver registry only; torch, pandas and
matplotlib are imported by the calls that need them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError
from memsched.solvers.exact.interrupt import answer_on_interrupt

from .live import line_limit, progress_line
from .results import Comparison, Result, RunResult, SweepResult

PathLike = str | Path
#: (problem, class name) pairs, most specific first: how `problem_of` recognises an instance.
_CLASSES = (("offload", "OffloadInstance"), ("join", "Join"), ("graph", "Graph"), ("pipeline", "Pipeline"),
            ("chain", "Chain"))
_CONFIG_SUFFIXES = (".toml", ".yaml", ".yml")


# ---------------------------------------------------------------------------- instances
def load(path: PathLike, *, problem: str | None = None, bandwidth: str | float | None = None,
         latency: float | None = None) -> Any:
    """The instance in the file at `path`: a chain (``memsched.chain/1``), a join network, a
    node-link graph (Checkmate / Moccasin), or a PipeDream ``graph.txt`` (a pipeline).

    `problem` reads a chain file as another problem ("pipeline", "offload"); `bandwidth`
    (bytes/s or "12GB/s") and `latency` (s) make a chain file an offloading instance, as does
    a ``host_link`` in the file. Bad files raise `InputError` naming the file and the field."""
    from memsched.solvers.formats import detect_problem, load_instance

    if not isinstance(path, (str, Path)):
        raise InputError(f"must be the path of an instance file (str or Path), got {path!r}", field="path")
    path = Path(path)
    found = detect_problem(path)
    if problem is None and found == "chain":
        from memsched.solvers.jsonio import read_json

        data = read_json(path)
        problem = "offload" if isinstance(data, dict) and "host_link" in data else None  # a host link: offloading
    if bandwidth is not None or problem == "offload":
        if found != "chain":
            raise InputError(f"a bandwidth applies to chain files, not to a {found} instance", path=str(path),
                             field="bandwidth")
        from memsched.solvers.offload import OffloadInstance
        from memsched.solvers.units import parse_bandwidth

        bw = parse_bandwidth(bandwidth, field="bandwidth") if bandwidth is not None else None
        return OffloadInstance.load(path, bw, latency)
    return load_instance(path, problem or found)[1]


def data_path(*parts: str) -> Path:
    """A file among the instances shipped with memsched (``solvers/data``): e.g.
    ``data_path("examples", "cnn12.json")``, ``data_path("pipeline", "vgg16-b32.graph.txt")``."""
    from memsched import solvers

    path = Path(solvers.__file__).resolve().parent / "data"
    return path.joinpath(*parts)


def problem_of(instance: Any) -> str:
    """The problem an instance object states ("chain", "join", "graph", "offload", "pipeline")."""
    for problem, cls_name in _CLASSES:
        try:
            cls = getattr(registry.problem_module(problem), cls_name)
        except (ImportError, AttributeError):
            continue
        if isinstance(instance, cls):
            return problem
    raise InputError(f"not a memsched instance: {type(instance).__name__} (use memsched.load(path))")


def as_problem(instance: Any, problem: str | None = None, *, bandwidth: str | float | None = None,
               latency: float | None = None) -> tuple[str, Any]:
    """(problem, instance) from an instance or a path; a chain becomes an offloading instance
    when `bandwidth` is given or `problem` is "offload", a pipeline when `problem` is "pipeline"."""
    if isinstance(instance, (str, Path)):
        instance = load(instance, problem=problem, bandwidth=bandwidth, latency=latency)
        bandwidth = None
    found = problem_of(instance)
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
    if found == "chain" and problem == "pipeline":
        from memsched.solvers.pipeline import from_chain

        return "pipeline", from_chain(instance)
    if problem is not None and problem != found:
        raise InputError(f"a {found} instance cannot be read as {problem}", field="problem")
    return found, instance


def budget(instance: Any, spec: int | float | str, *, problem: str | None = None) -> int:
    """Bytes from a budget: an int (bytes), a size ("1.5GB", "800MiB") or "X%" of the
    problem's reference peak."""
    from memsched.solvers.units import parse_positive_budget

    problem = problem or problem_of(instance)
    reference = None
    if isinstance(spec, str) and spec.strip().endswith("%"):
        reference = registry.problem_module(problem).reference_peak(instance)
    return parse_positive_budget(spec, reference, field="budget")


def reference_peak(instance: Any, *, problem: str | None = None) -> int:
    """What "X%" budgets refer to (bytes)."""
    problem = problem or problem_of(instance)
    return int(registry.problem_module(problem).reference_peak(instance))


def list_solvers(problem: str | None = None) -> list[tuple[str, str, str]]:
    """(problem, solver, summary) for every solver importable here."""
    return registry.solver_table(problem)


def default_solver(problem: str) -> str:
    """The problem's preferred solver (rotor for chains, dp for joins, ...)."""
    module = registry.problem_module(problem)
    names = [n for _, n, _ in registry.solver_table(problem)]
    preferred = getattr(module, "DEFAULT_SOLVER", None)
    if preferred in names:
        return preferred
    if not names:
        raise InputError(f"no solver is available for {problem}")
    return names[0]


# ---------------------------------------------------------------------------- solving
def solve(instance: Any, budget: int | float | str, solver: str | Sequence[str] | None = None, *,
          problem: str | None = None, slots: int = 500, time_limit: float | None = None,
          bandwidth: str | float | None = None, latency: float | None = None, devices: int | None = None,
          progress: bool = False, **options: Any) -> Result | Comparison:
    """Solve `instance` under `budget` (memory per device for pipelines) with `solver`.

    One solver name gives a `Result`; a list of names gives a `Comparison` of all of them at
    the same budget. `devices` (P) is required for pipelines; `bandwidth` turns a chain into an
    offloading instance; `slots` discretises memory for the solvers that need it (0: exact);
    `time_limit` (s) bounds exact solvers; `progress` draws a live line on stderr while each
    solver runs (stage, best, bound, gap: `memsched.live`); other keyword options go to the solver
    (one that none of the named solvers takes is an `InputError`: a misspelt option is not ignored).
    A Ctrl-C (a notebook's interrupt) during an exact solver's search returns what it had, marked
    ``details["interrupted"]`` (with a list, the comparison ends there)."""
    problem, instance = as_problem(instance, problem, bandwidth=bandwidth, latency=latency)
    if problem == "pipeline":
        if devices is None:
            raise InputError("a pipeline needs devices=P", field="devices")
        options["devices"] = int(devices)
    if isinstance(slots, bool) or not isinstance(slots, numbers.Integral) or slots < 0:
        raise InputError(f"must be an integer >= 0, got {slots!r}", field="slots")
    bytes_ = _budget(instance, budget, problem)
    names = _solver_names(problem, solver)
    _check_option_names(problem, names, options)

    def one(name: str) -> Result:
        limit = line_limit(registry.get_solver(problem, name), time_limit, options) if progress else None
        with answer_on_interrupt(), progress_line(progress, label=name, limit=limit):
            raw = registry.solve(problem, instance, name, bytes_, slots=slots, time_limit=time_limit, **options)
        return Result(problem, instance, raw)

    if solver is None or isinstance(solver, str):
        return one(names[0])
    results = []
    for name in names:
        results.append(one(name))
        if results[-1].raw.details.get("interrupted"):
            break  # a Ctrl-C stops the comparison: the solvers that ran, the interrupted one last
    return Comparison(results)


def simulate(instance: Any, schedule: Any, budget: int | float | str | None = None, *,
             problem: str | None = None, bandwidth: str | float | None = None) -> Result:
    """Replay `schedule` (a schedule object, a `Result`, its JSON dict, or a path to a schedule
    JSON) on `instance` with the problem's simulator; the Result's status is "valid" or
    "invalid" (``.violation`` says why), its makespan and peak are the replay's."""
    from memsched.solvers.result import SolveResult

    if isinstance(schedule, Result):
        problem = problem or schedule.problem
        if instance is None:
            instance = schedule.instance
        schedule = schedule.schedule
    problem, instance = as_problem(instance, problem, bandwidth=bandwidth)
    module = registry.problem_module(problem)
    if isinstance(schedule, (str, Path)):
        from memsched.solvers.jsonio import read_json

        schedule = module.schedule_from_json(read_json(schedule), instance, path=str(schedule))
    elif isinstance(schedule, dict):
        schedule = module.schedule_from_json(schedule, instance)
    if schedule is None:
        raise InputError("no schedule to replay", field="schedule")
    bytes_ = _budget(instance, budget, problem) if budget is not None else None
    try:
        replay = module.replay(instance, schedule, bytes_)
    except (TypeError, AttributeError):
        if type(schedule).__module__.startswith("memsched."):
            raise  # one of ours: a bug, not bad input
        raise InputError(f"not a {problem} schedule: {type(schedule).__name__} (give a schedule, a Result, its JSON "
                         "dict or the path of a schedule file)", field="schedule") from None
    valid = replay.violation is None
    raw = SolveResult(problem=problem, solver="replay", status="valid" if valid else "invalid",
                      objective=replay.objective, peak_memory=replay.peak_memory, budget=bytes_,
                      schedule=schedule, message=replay.violation or "", scope="the simulator's replay")
    return Result(problem, instance, raw)


def sweep(target: Any, budgets: Iterable[int | float | str] | None = None, solvers: Sequence[str] | None = None,
          *, problem: str | None = None, output: PathLike | None = None, workers: int = 1, fresh: bool = False,
          slots: int = 500, time_limit: float | None = None, bandwidth: str | float | None = None,
          devices: int | None = None, **options: Any) -> SweepResult:
    """A grid of budgets x solvers, one row each, as a `SweepResult` (``.to_pandas()``,
    ``.plot()``: overhead or period versus budget).

    `target` is either a sweep file (TOML / YAML, or the name of a committed config such as
    "fig_a_chains"), run by the sweep engine exactly as ``memsched sweep`` would (resumable,
    into `output`, default the file's), or an instance (or instance file), solved here in
    this process for every budget in `budgets` and solver in `solvers` (default: the
    problem's default solver). A solver that rejects the instance gives rows of status
    "unsupported" (as in the sweep engine)."""
    if _is_config(target):
        from memsched.experiments.sweep import find_config, run_sweep

        outcome = run_sweep(find_config(str(target)), output=output, workers=workers, progress=False, fresh=fresh)
        return SweepResult(list(outcome.rows), source=str(target))
    if budgets is None:
        raise InputError("an instance sweep needs budgets (e.g. ['40%', '60%', '80%'])", field="budgets")
    if isinstance(budgets, (str, int, float)):  # one budget ("50%" would otherwise be read as "5", "0", "%")
        budgets = [budgets]
    elif not isinstance(budgets, Iterable) or isinstance(budgets, (bytes, dict)):
        raise InputError(f"must be a budget or a list of budgets, got {budgets!r}", field="budgets")
    problem, instance = as_problem(target, problem, bandwidth=bandwidth)
    names = _solver_names(problem, solvers or None)
    _check_option_names(problem, names, options)
    reference = reference_peak(instance, problem=problem)
    baseline = baseline_objective(problem, instance)
    rows = []
    for spec in budgets:
        bytes_ = _budget(instance, spec, problem)
        for name in names:
            try:
                result = solve(instance, bytes_, name, problem=problem, slots=slots, time_limit=time_limit,
                               devices=devices, **options)
            except InputError as err:  # a solver that rejects this instance (e.g. revolve, heterogeneous)
                rows.append({"instance": getattr(instance, "name", "") or problem, "problem": problem,
                             "solver": name, "status": "unsupported", "objective": None, "budget": bytes_,
                             "budget_spec": str(spec), "reference_peak": reference,
                             "budget_fraction": bytes_ / reference, "overhead": None, "message": str(err)})
                continue
            row = result.row()
            row.update(budget_spec=str(spec), reference_peak=reference, budget_fraction=bytes_ / reference,
                       baseline_objective=baseline, devices=devices,
                       overhead=(result.objective / baseline - 1.0) if (baseline and result.found) else None)
            rows.append(row)
    return SweepResult(rows, source=getattr(instance, "name", "") or problem)


def _solver_names(problem: str, solver: Any) -> list[str]:
    """The solver names asked for: the problem's default for None, one name, or a sequence of
    names (`InputError` for anything else, or an empty sequence)."""
    if solver is None:
        return [default_solver(problem)]
    if isinstance(solver, str):
        return [solver]
    if isinstance(solver, Iterable) and not isinstance(solver, (bytes, dict)):
        names = list(solver)
        if names and all(isinstance(n, str) for n in names):
            return names
        if not names:
            raise InputError("no solver named", field="solver")
    raise InputError(f"must be a solver name or a list of names, got {solver!r}", field="solver")


def _check_option_names(problem: str, names: Sequence[str], options: dict[str, Any]) -> None:
    """Each keyword option is taken by at least one of the solvers `names` (their keyword
    parameters, as ``--option`` lists them): a misspelt one would be ignored without a word.
    Values are checked by the solvers themselves."""
    from memsched.experiments.commands._checks import options_taken

    taken = options_taken((problem, name) for name in names) | {"devices"}
    for key in options:
        if key not in taken:
            raise InputError(f"no option {key!r} for {', '.join(names)} (their options: "
                             f"{', '.join(sorted(taken - {'devices'})) or 'none'})", field=key)


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
def profile(model: Any, *, example_input: Any = None, target: Any = None, loss_fn: Any = None, repeats: int = 3,
            out: PathLike | None = None, timing: str | None = None, problem: str = "chain", **sizes: Any) -> Any:
    """Profile a network into a chain: u_f, u_b per stage (ms), x, xbar, o_f, o_b (bytes); with
    ``problem="graph"``, into its torch.fx training graph (`models.graph.export`: measured times
    in ms, node sizes with what autograd keeps), the instance of the graph solvers.

    `model`: a zoo name ("resnet18", "densenet121", "gpt2", ...; sizes as ``batch=``,
    ``image_size=``, ``seq_len=``, ``width=``, ``depth=``, ``device=``), a factory spec
    ("mynet.py:build", sizes passed to it), or your own network: an ``nn.Sequential`` / list of
    blocks with `example_input` (the tensor a_0, whose batch the sizes are measured at),
    `target` and `loss_fn(output, target)` (default: the mean of the output), or a
    `memsched.Network` holding them (`models.network`). Needs torch; `out` also saves the
    chain file."""
    _need_torch()
    from memsched.models.chain.profiler import profile_chain, profile_model

    if problem not in ("chain", "graph"):
        raise InputError(f"must be chain or graph, got {problem!r}", field="problem")
    if problem == "graph":
        return _profile_graph(model, example_input, target, loss_fn, repeats, out, sizes)
    if isinstance(model, str):
        _check_zoo(model)
        _no_network_args(example_input, target, loss_fn)
        chain, _ = profile_model(model, repeats=repeats, out=str(out) if out is not None else None, timing=timing,
                                 **sizes)
        return chain
    built = _own_network(model, example_input, target, loss_fn, sizes)
    chain = profile_chain(built.blocks, built.loss_fn, built.example_input, built.target, repeats=repeats,
                          name=built.label, meta={"model": built.name}, timing=timing)
    if out is not None:
        chain.save(str(out))
    return chain


def _profile_graph(model: Any, example_input: Any, target: Any, loss_fn: Any, repeats: int, out: PathLike | None,
                   sizes: dict[str, Any]) -> Any:
    """`profile` with ``problem="graph"``: the training graph, as `memsched run --problem graph` profiles it."""
    from memsched.models.graph.export import export_training_graph

    if isinstance(model, str):
        _check_zoo(model)
        _no_network_args(example_input, target, loss_fn)
        from memsched.models.zoo import build_model

        model = build_model(model, **sizes)
    else:
        model = _own_network(model, example_input, target, loss_fn, sizes)
    return export_training_graph(model, cost="measured", ram="tape", repeats=repeats,
                                 out=str(out) if out is not None else None)


def run(model: Any, budget: int | float | str, solver: str | None = None, *, problem: str | None = None,
        chain: Any = None, instance: Any = None, bandwidth: str | float | None = None, slots: int = 500,
        time_limit: float | None = None, time_repeats: int = 3, repeats: int = 3, seed: int = 0,
        example_input: Any = None, target: Any = None, loss_fn: Any = None, **sizes: Any) -> RunResult:
    """Solve, then execute the schedule for real as one training step of `model`: a zoo network
    (siamese / triplet / clip run as join networks), a factory spec, or your own network with
    `example_input`, `target`, `loss_fn` (as in `profile`; one module that is not an
    ``nn.Sequential`` runs as the graph problem by default, its torch.fx training graph planned by
    Checkmate's solvers): the simulator's prediction
    (makespan in ms, peak in bytes) beside the measured time and peak memory, and whether every
    gradient matches plain autograd (``grad_check``). `chain` / `instance` give the costs (an
    instance or a file) instead of profiling; `bandwidth` runs an offloading schedule; sizes as
    in `profile`. Needs torch."""
    _need_torch()
    from .execute import run_model

    if isinstance(model, str):
        _no_network_args(example_input, target, loss_fn)
    else:
        if problem == "join":
            raise InputError("your own network runs as a chain (problem chain, offload or graph); the join networks "
                             "are the zoo's siamese, triplet and clip", field="problem")
        model = _own_network(model, example_input, target, loss_fn, sizes)
        if problem is None and len(model.blocks) == 1 and bandwidth is None:
            problem = "graph"  # one module (not an nn.Sequential): its torch.fx graph, not a chain of one stage
    return RunResult(run_model(model, budget, solver, problem=problem, instance=instance if chain is None else chain,
                               bandwidth=bandwidth, slots=slots, time_limit=time_limit, time_repeats=time_repeats,
                               repeats=repeats, seed=seed, **sizes))


def _own_network(model: Any, example_input: Any, target: Any, loss_fn: Any, sizes: dict[str, Any]) -> Any:
    """`model` and its arguments as a checked `models.zoo.ZooModel` (`models.network.as_zoo_model`)."""
    from memsched.models.network import as_zoo_model

    if sizes:
        raise InputError(f"sizes ({', '.join(sorted(sizes))}) apply to zoo names and factories; your own network's "
                         "sizes are its example input's", field=sorted(sizes)[0])
    return as_zoo_model(model, example_input=example_input, target=target, loss_fn=loss_fn)


def _no_network_args(example_input: Any, target: Any, loss_fn: Any) -> None:
    for name, value in (("example_input", example_input), ("target", target), ("loss_fn", loss_fn)):
        if value is not None:
            raise InputError("applies to your own network (an nn.Module), not to a zoo name or factory, which "
                             "builds its own", field=name)


# ---------------------------------------------------------------------------- figures
def plot(obj: Any, schedule: Any = None, *, budget: int | float | str | None = None, problem: str | None = None,
         title: str | None = None, **kwargs: Any) -> Any:
    """A matplotlib figure: ``plot(result)`` (any `Result`, `Comparison` or `SweepResult`),
    ``plot(instance, schedule)`` (memory timeline above the operations) or
    ``plot(instance, {"rotor": s1, "periodic": s2})`` (stacked on shared scales)."""
    if isinstance(obj, (Result, Comparison, SweepResult)):
        return obj.plot(title=title, **kwargs) if title is not None else obj.plot(**kwargs)
    if schedule is None:
        raise InputError("plot(instance, schedule): no schedule given", field="schedule")
    from memsched.experiments.plotting import plot_comparison, plot_schedule

    problem, instance = as_problem(obj, problem)
    bytes_ = _budget(instance, budget, problem) if budget is not None else None
    if isinstance(schedule, dict) and schedule and all(isinstance(k, str) for k in schedule) \
            and not ("ops" in schedule or "format" in schedule or "stages" in schedule):
        schedules = {k: (v.schedule if isinstance(v, Result) else v) for k, v in schedule.items()}
        return plot_comparison(problem, instance, schedules, budget=bytes_, title=title)
    if isinstance(schedule, Result):
        schedule = schedule.schedule
    return plot_schedule(problem, instance, schedule, budget=bytes_, title=title)


# ---------------------------------------------------------------------------- helpers
def _budget(instance: Any, spec: int | float | str, problem: str) -> int:
    if isinstance(spec, bool):
        raise InputError(f"not a budget: {spec!r}", field="budget")
    if isinstance(spec, (int, float)) and not isinstance(spec, str):
        from memsched.solvers.units import MAX_BYTES

        if not math.isfinite(spec) or spec <= 0:
            raise InputError(f"budget must be positive, got {spec!r}", field="budget")
        if spec < 1:  # 0.5 meant as a share would otherwise be 0 bytes, "infeasible"
            raise InputError(f"{spec!r} is less than one byte (a number is bytes; write \"50%\" for a share of "
                             f"the reference peak)", field="budget")
        if spec > MAX_BYTES:
            raise InputError(f"{spec!r} is too large (at most {MAX_BYTES} bytes, 1 PiB)", field="budget")
        return int(spec)
    return budget(instance, spec, problem=problem)


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
