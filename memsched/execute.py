"""`memsched.run`: solve, then execute the schedule for real (PyTorch), as ``memsched run`` does.

The work is `memsched.models.run.run`, the end-to-end run behind the ``run`` command: build
the zoo network, take its costs (profile it, or a given chain / join / graph instance), solve
under the budget through the solver registry (the simulator's replay is the prediction),
execute the schedule and the store-all schedule, and compare measured time and peak memory
with the prediction and the gradients with plain autograd. This module only maps the
facade's keyword arguments onto it, so the facade and the command line never disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memsched.models.timing import TIMINGS  # torch-free: a run checks its timing before anything is built
from memsched.solvers.errors import InputError, article, flag

#: Keyword sizes of the zoo networks (`models.zoo.build_model`), ``granularity`` ("block" or "layer", the
#: stages of the chain: ``memsched run --granularity``) among them, as `memsched.profile` takes it.
SIZE_KEYS = ("batch", "image_size", "seq_len", "width", "depth", "vocab", "classes", "dropout", "device", "seed",
             "dtype", "granularity")
#: Join networks of the zoo (run as the join problem).
JOIN_NAMES = ("siamese", "triplet", "clip")


def run_model(model: str, budget: int | float | str, solver: str | None = None, *, problem: str | None = None,
              instance: Any = None, bandwidth: str | float | None = None, latency: float | None = None,
              slots: int = 500, time_limit: float | None = None, time_repeats: int = 3, repeats: int = 3, seed: int = 0,
              timing: str | None = None, options: dict[str, Any] | None = None, early_release: bool = False,
              instance_field: str = "instance", **sizes: Any) -> dict[str, Any]:
    """The ``memsched run MODEL --json`` object for these arguments (see `memsched.api.run`).

    `problem` defaults to "join" for siamese / triplet / clip, "offload" when a bandwidth is
    given, the problem of `instance` when one is given, else "chain". An offloading instance gives
    its link (`bandwidth`, `latency`, s) where none is given. `bandwidth`, `latency` and `options`
    are checked against the problem and solver (`api.check_run_solver_args`). An infeasible budget
    gives status "infeasible" with ``message`` and ``min_budget``; bad input raises
    `InputError`. `early_release` (``memsched run --early-release``, checked by `memsched.api.run`: a
    chain profiled here) measures B(i) releasing early and executes it so. A network given as modules
    (your own `nn.Module`, as a checked `ZooModel`) keeps its parameters and buffers:
    `memsched.models.run.run` puts back the buffers its profiling and steps updated (BatchNorm's
    running statistics), also when it raises. `instance_field` is the argument that gave `instance`
    (``instance`` or ``chain`` in `memsched.api.run`): the errors about the instance as a whole (its
    problem, exact-combined's length) name it, and the file when `instance` is a path."""
    from .api import check_run_solver_args

    unknown = sorted(set(sizes) - set(SIZE_KEYS))
    if unknown:
        raise InputError(f"unknown option {unknown[0]!r} (sizes: {', '.join(SIZE_KEYS)})", field=unknown[0])
    path = str(instance) if isinstance(instance, (str, Path)) else None
    if path is not None:
        from .api import load

        instance = load(path)  # the file's own problem: a graph, a join, an offloading chain (host_link), ...
    problem = problem or _default_problem(model, instance, bandwidth)
    check_join_network(model, problem)
    host_link = problem == "chain" and _is_offload_instance(instance)  # set aside below: an offloading solver says so
    if problem == "offload" and _is_offload_instance(instance):
        bandwidth = instance.bandwidth if bandwidth is None else bandwidth
        latency = instance.latency if latency is None else latency
        instance = instance.chain
    elif problem == "chain" and _is_offload_instance(instance):
        instance = instance.chain  # the chain problem named: the costs without the link
    options = options or {}
    from memsched.models.run import DEFAULT_SOLVERS, run

    if problem not in DEFAULT_SOLVERS:  # a pipeline instance
        raise InputError(f"run executes {', '.join(DEFAULT_SOLVERS)} instances, not {article(problem)} one",
                         path=path, field=instance_field)
    _check_instance_problem(instance, problem, path=path, field=instance_field)
    check_run_solver_args(problem, solver or DEFAULT_SOLVERS[problem], bandwidth, latency, options,
                          host_link=host_link)
    if instance is not None:
        from memsched.experiments.commands._checks import check_exact_combined

        check_exact_combined(problem, solver, path, chain=instance)
    if bandwidth is not None:
        from memsched.solvers.units import parse_bandwidth

        bandwidth = parse_bandwidth(bandwidth, field="bandwidth")
    if isinstance(budget, float) and budget.is_integer():
        budget = int(budget)
    return run(model, budget, problem=problem, solver=solver, instance=instance, sizes=dict(sizes, seed=seed),
               slots=slots, time_limit=time_limit, options=options, seed=seed, time_repeats=time_repeats,
               profile_repeats=repeats, timing=timing, bandwidth=bandwidth, latency=latency or 0.0,
               early_release=early_release)


def _default_problem(model: Any, instance: Any, bandwidth: Any) -> str:
    """The problem `run_model` solves when none is named (its docstring); `instance` is None or an
    instance object (a file is loaded first). Only a name (a str) names a zoo join network: an object
    (your own network) runs as a chain, whatever its ``str`` says."""
    if isinstance(model, str) and model in JOIN_NAMES:
        return "join"
    if bandwidth is not None:
        return "offload"
    if instance is not None:
        from .api import problem_of

        return problem_of(instance)
    return "chain"


def _is_offload_instance(instance: Any) -> bool:
    if instance is None:
        return False
    from .api import problem_of

    return problem_of(instance) == "offload"


def check_join_network(model: Any, problem: str | None) -> None:
    """A join network of the zoo named by `model` (a str in `JOIN_NAMES`) runs as the join problem:
    another `problem` (None: not named, the default applies) is an `InputError` naming ``problem``
    as the caller spelt it (``--problem`` on the command line, `errors.flag`), not an unknown model.
    Shared by ``memsched run`` and `memsched.run`."""
    if isinstance(model, str) and model in JOIN_NAMES and problem not in (None, "join"):
        raise InputError(f"{model} is a join network, not run as {problem}: use {flag('problem', 'join')} or "
                         f"leave {flag('problem')} out", field=flag("problem"))


def check_timing(timing: Any) -> None:
    """`timing` is None (the profiler's default) or one of `TIMINGS`, else an `InputError` naming ``timing``
    as the caller spelt it (`errors.flag`), with the message the profilers give. No torch: `memsched.run`
    checks it before anything is built (``memsched run --timing`` has argparse's choices)."""
    if timing is not None and (not isinstance(timing, str) or timing not in TIMINGS):
        raise InputError(f"unknown timing {timing!r:.80} (one of {', '.join(TIMINGS)})", field=flag("timing"))


def refuse_profiling_options(source: str, *, repeats: Any, timing: Any) -> None:
    """The profiling options of a run whose costs come from `source` (an instance given: "the instance
    file f.json", ...) are bad input when given (not None), as nothing is profiled: an `InputError`
    naming ``repeats`` or ``timing`` as the caller spelt it (``--repeats`` on the command line,
    `errors.flag`), the executed steps being timed by ``time_repeats``. Shared by ``memsched run``
    and `memsched.run`; no torch."""
    for option, value in (("repeats", repeats), ("timing", timing)):
        if value is not None:
            raise InputError(f"is a profiling option and this run profiles nothing: the costs come from {source} "
                             f"({flag('time_repeats')} times the executed steps)", field=flag(option))


def _check_instance_problem(instance: Any, problem: str, *, path: str | None = None,
                            field: str = "instance") -> None:
    """`instance` (None, or the object left once an offloading instance gave its chain and link)
    can be run as `problem`: its own problem, or a chain for offloading. `InputError` naming the
    file `path` (None: given as an object) and the argument `field` that gave it otherwise (a graph
    file read as a chain would fail on its format, field by field)."""
    if instance is None:
        return
    from .api import problem_of

    found = problem_of(instance)
    if found != problem and not (problem == "offload" and found == "chain"):
        raise InputError(f"{article(found)} instance cannot be run as {problem}", path=path, field=field)


__all__ = ["run_model", "check_join_network", "check_timing", "refuse_profiling_options", "SIZE_KEYS", "JOIN_NAMES",
           "TIMINGS"]
