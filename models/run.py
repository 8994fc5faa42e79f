"""One end-to-end run: a network and a budget -> costs -> a schedule -> executed for real -> report.

    out = run("resnet18", "60%", problem="chain", solver="rotor", sizes={"batch": 4, "width": 8})

Steps: build the network (`models.zoo` / `models.join.zoo`), get its costs (profile it, or
load an instance: a chain, join or graph file), solve through `solvers.registry.solve` (the
simulator's replay gives the predicted makespan and peak), execute the schedule and the
store-all schedule with the problem's executor (`models.<problem>.executor`), check the
gradients against plain autograd, and return the ``memsched run --json`` object:

    model, problem, instance, budget (bytes), solver, status, device, clock (what timed the steps:
    "thread" or "wall" on CPU, `default_clock` unless given, "cuda events"), units, store_all_peak,
    predicted {makespan, peak_memory (bytes: the executor's prediction, the allocator's definition;
    each ratio's pair is in ``compared``),
    tracker_peak_memory, model_peak_memory (the solver's)}, measured {time (ms, the median of the
    time_runs timed runs; time_min, time_max: their range), peak_memory
    (bytes, the tracker on CPU / torch.cuda.max_memory_allocated on CUDA), independent_peak
    (bytes, `models.alloc_probe` on CPU, else None)}, ratio, store_all, vs_store_all,
    grad_check, grad_message, memory_method, recomputations, loss, solve_time_s

plus the problem's extras (offload: bandwidth, latency, transfers, predicted host_peak,
sequential_peak, tracker_sequential_peak and sequential_makespan, the one-op-at-a-time replay's
makespan that ratio.time compares with on CPU; graph: the graph's time unit). When no schedule
fits: message, min_budget, and None for predicted / measured / grad_check.

`prepare` (network + costs -> a `Target`) and `execute_schedule` (one schedule on a
`Target` -> the measured fields) are the pieces the sweep and the benchmarks reuse.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.models.buffers import from_buffers, restore_buffers, snapshot_buffers, step_modules
from memsched.models.measure import StepResult, measured_vs_predicted, ratio, tolerances
from memsched.solvers import registry
from memsched.solvers.errors import InputError, first_line, flag
from memsched.solvers.units import format_bytes, memory_unit, parse_positive_budget, unit_bytes

__all__ = ["PROBLEMS", "DEFAULT_SOLVERS", "Target", "prepare", "execute_schedule", "run", "describe"]

PROBLEMS = ("chain", "offload", "join", "graph")
DEFAULT_SOLVERS = {"chain": "rotor", "offload": "offload-prefix", "join": "dp", "graph": "checkmate"}


@dataclass
class Target:
    """A network ready to run schedules of `problem` on `instance` (its costs).

    `step(schedule, seed=, time_repeats=, independent=)` -> a `StepResult` with the simulator's
    prediction; `reference(seed, schedule)` -> the plain-autograd (grads, input gradient(s)) it is
    checked against (a join's runs the branches' forwards in the order `schedule` first runs them);
    `store_all` the schedule that keeps everything; `extras(step, schedule)` the problem's own report
    fields.
    """

    problem: str
    model: str
    instance: Any
    name: str
    device: torch.device
    step: Callable[..., StepResult]
    reference: Callable[[int, Any], tuple[dict[str, torch.Tensor], Any]]
    store_all: Any
    extras: Callable[[StepResult, Any], dict[str, Any]] = field(default=lambda step, schedule: {})
    info: dict[str, Any] = field(default_factory=dict)
    #: the modules whose buffers a step updates (`models.buffers.step_modules`): the reference starts from
    #: the buffers the step started from
    modules: list[torch.nn.Module] = field(default_factory=list)
    #: writes the instance profiled for this target (a chain, an offloading instance with its host link, a
    #: join or a graph) to the file it is given (``--profile-file``), atomically; None when an instance gave
    #: the costs. `prepare` writes nothing itself: `run` calls it once the budget and the solver took the
    #: instance, so that a run refused as bad input leaves the file as it was
    save_profile: Callable[[str], None] | None = None

    @property
    def time_unit(self) -> str:
        """The unit of the instance's times and of every predicted makespan (``info["units"]["time"]``;
        ms when the instance does not say, as for profiled chains)."""
        units = self.info.get("units")
        return str(units.get("time") or "ms") if isinstance(units, dict) else "ms"


def _sizes(sizes: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (sizes or {}).items() if v is not None}


def _zoo(model: Any, sizes: dict[str, Any] | None) -> Any:
    """A built `models.zoo.ZooModel` from a name, a ZooModel, or (blocks, input, loss_fn, target)."""
    from memsched.models.chain.executor import as_blocks
    from memsched.models.zoo import ZooModel, build_model

    if isinstance(model, ZooModel):
        return model
    if isinstance(model, (tuple, list)):
        blocks, example, loss_fn, tgt = model
        return ZooModel(as_blocks(blocks), example, loss_fn, tgt, "custom", {})
    return build_model(str(model), **_sizes(sizes))


def _load(problem: str, instance: Any) -> Any:
    if isinstance(instance, str):
        return registry.problem_module("chain" if problem == "offload" else problem).load(instance)
    return instance


def meta_field(problem: str) -> str:
    """Where an instance file of `problem` keeps its meta, as error messages name its fields: a
    graph file's is ``graph.meta``, every other file's the top-level ``meta``."""
    return "graph.meta" if problem == "graph" else "meta"


def _check_in_bytes(instance: Any, problem: str, path: str | None) -> None:
    """The network runs in bytes, so must the instance's sizes be: an instance whose
    ``meta.units.memory`` is another unit (KiB, slots) is an `InputError` naming `path` (the instance
    file) and the field (``graph.meta.units.memory`` in a graph file), before anything is built (its
    budget, predictions and input check would otherwise read its numbers as bytes)."""
    if unit_bytes(instance) != 1:
        where = meta_field(problem)
        raise InputError(f"a run executes the network in bytes and compares its sizes with the network's: the "
                         f"instance's sizes must be in bytes, got {memory_unit(instance)!r:.80} (profile the "
                         "network again, or convert the file's sizes)", path=path, field=f"{where}.units.memory")


#: the sizes a profiled instance's meta records (the built network's config, `models.zoo.build_model`):
#: with its "model" they fix the network the costs were measured on
RECORDED_SIZES = ("batch", "image_size", "seq_len", "width", "depth", "vocab", "classes", "dropout", "dtype",
                  "granularity")
#: the dtype of a graph file whose meta names its model but no dtype: older exports recorded a dtype
#: only away from the export's default, float32 (`models.graph.export` now always records it)
GRAPH_DEFAULT_DTYPE = "float32"
#: the join networks' own sizes (`models.join.zoo.build_join_model`), recorded in a join's meta too
JOIN_RECORDED_SIZES = ("embed_dim", "encoder", "text_width", "text_depth")


def instance_sizes(instance: Any, model: Any, sizes: dict[str, Any] | None, problem: str, *,
                   path: str | None = None) -> dict[str, Any]:
    """`sizes` (the caller's; None: not given) completed from the meta of `instance`, the costs
    `model` (a zoo name or factory spec) is run with, when that meta says it was profiled from
    `model`: each `RECORDED_SIZES` entry it records (a join's `JOIN_RECORDED_SIZES` too) and the
    caller left out is taken from it (a chain profiled at batch 2, 32 px runs at batch 2, 32 px,
    not at the zoo's defaults). A recorded value the network cannot be built at ("two" for the
    batch, an unknown dtype) is an `InputError` naming `path` and the field (``meta.batch``,
    `_check_recorded`); a factory's recorded dtype may be any dtype torch knows (float64 too, its own
    choice), passed back as `factory_dtype` says and compared with the rebuilt network's
    (`_check_built_dtype`), where a zoo network's must be one of the zoo's; a size the
    caller gives that contradicts the record is one naming the size (and `path`, the instance file).
    Unchanged for an instance profiled from another network (its stage count and input bytes are
    checked later) or without a record. A chain's "granularity" is the zoo's split (block or layer,
    `models.zoo.split`; none: block); a graph's is the export's (op or module), its split is
    ``meta.split`` (`graph_split`), filled in and compared as the chain's. A graph naming its
    model but no dtype (exported before the export always recorded it) was exported at
    `GRAPH_DEFAULT_DTYPE`, one with no split recorded at block: a given dtype or granularity is compared
    with that (none is filled in)."""
    out = dict(sizes or {})
    meta = _profiled_meta(instance, model, problem)
    if meta is None:
        return out
    keys = RECORDED_SIZES + (JOIN_RECORDED_SIZES if problem == "join" else ())
    recorded = {key: meta.get(key) for key in keys if meta.get(key) is not None}
    factory = _is_factory(model)
    if problem == "graph":
        recorded.pop("granularity", None)  # the export's (op|module), or the split in a file written before "split"
        split_key, split = graph_split(meta)
        if split is not None:
            _check_recorded("granularity", split, path, where=meta_field(problem), field=split_key)
            recorded["granularity"] = split
    elif problem in ("chain", "offload"):
        recorded.setdefault("granularity", "block")
    for key, value in recorded.items():
        if not (problem == "graph" and key == "granularity"):
            _check_recorded(key, value, path, where=meta_field(problem), factory=factory)
    unfilled: set[str] = set()
    if factory and "dtype" in recorded:
        dtype = factory_dtype(recorded["dtype"], model)
        if dtype is None:  # the factory's own choice: compared with the rebuilt network's
            unfilled.add("dtype")
        else:  # passed back as --dtype reaches a factory (a torch dtype: float64 is none of the zoo's names)
            recorded["dtype"] = dtype
    # an older graph export names no dtype nor split: a given one is compared with the default, none filled in
    compared = {**recorded, "dtype": recorded.get("dtype", GRAPH_DEFAULT_DTYPE),
                "granularity": recorded.get("granularity", "block")} if problem == "graph" else recorded
    refused = _refused_sizes(model, recorded, out) | unfilled
    for key, value in compared.items():
        given = out.get(key)
        if given is None:
            if key in recorded and key not in refused:
                out[key] = value
        elif _size_value(key, given) != _size_value(key, value):
            from memsched.models.zoo.registry import size_field

            raise InputError(f"the instance was profiled at {key} {_size_text(key, value)}, not "
                             f"{_size_text(key, given)} (leave it out to use the instance's, or profile again)",
                             path=path, field=size_field(key))
    return out


def graph_split(meta: dict[str, Any]) -> tuple[str, Any]:
    """(field, value) of the zoo split (`models.zoo.split`: "block" or "layer", ``--granularity`` of
    ``memsched run``) a graph file's `meta` records, value None when it records none: its ``split``
    (`models.graph.export` writes it for a zoo network), else, in a file exported before that key
    existed, a ``granularity`` of "block" or "layer" (the zoo's config then overwrote the export's op|module,
    which is unknown). The field is the key read, for messages naming ``graph.meta.<field>``."""
    if meta.get("split") is not None:
        return "split", meta["split"]
    from memsched.models.zoo.split import GRANULARITIES

    legacy = meta.get("granularity")
    return "granularity", legacy if isinstance(legacy, str) and legacy in GRANULARITIES else None


def _profiled_meta(instance: Any, model: Any, problem: str) -> dict[str, Any] | None:
    """The meta of `instance` (an offloading instance's chain's) when it records that it was profiled
    from `model` (a zoo name or factory spec: its ``model``), else None."""
    target = getattr(instance, "chain", instance) if problem == "offload" else instance
    meta = getattr(target, "meta", None)
    if not isinstance(model, str) or not isinstance(meta, dict) or meta.get("model") != model:
        return None
    return meta


def _is_factory(model: Any) -> bool:
    """True when `model` is a factory spec (``FILE.py:FUNCTION``), not a zoo name."""
    from memsched.models.network import is_factory_spec
    from memsched.models.zoo import MODELS

    return isinstance(model, str) and model not in MODELS and is_factory_spec(model)


def _torch_dtype(value: Any) -> torch.dtype:
    """The torch dtype a factory's file records by name (``"float64"``; ``"torch.float64"`` too): any
    dtype torch knows, as the factory chose it; another value is an `InputError`."""
    found = getattr(torch, str(value).replace("torch.", ""), None) if isinstance(value, str) else None
    if not isinstance(found, torch.dtype):
        raise InputError(f"unknown dtype {value!r:.80} (a torch dtype: float32, float64, bfloat16, ...)")
    return found


def factory_dtype(value: Any, spec: str) -> torch.dtype | None:
    """The dtype a run passes back to the factory `spec` whose file records `value` (a name torch
    knows) as its ``meta.dtype``, as ``--dtype`` reaches it (`models.network.build_network`: its
    ``dtype`` argument when it takes one, else its network is cast to it), or None: left to the
    factory. A dtype ``--dtype`` takes (`models.zoo.registry.DTYPES`) is passed back, as ``profile
    --dtype`` may have cast the network to it (float32 is the factory's own choice again, as
    ``--dtype float32``); another (float64) only the factory chose, so it goes back only to a factory
    that takes ``dtype``, as a size to a factory that takes it (`_refused_sizes`). Either way the
    rebuilt network's dtype is compared with the record (`_check_built_dtype`)."""
    from memsched.models.zoo.registry import DTYPES

    dtype = _torch_dtype(value)
    if str(dtype).replace("torch.", "") in DTYPES:
        return dtype
    return dtype if dtype.is_floating_point and _takes_dtype(spec) else None


def _takes_dtype(spec: str) -> bool:
    """True when the factory `spec` names takes a ``dtype`` argument (or ``**kwargs``), as
    `models.network.build_network` passes it one."""
    import inspect

    from memsched.models.network import load_factory

    params = inspect.signature(load_factory(spec)[0]).parameters
    return "dtype" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _check_built_dtype(instance: Any, model: Any, built: Any, problem: str, path: str | None) -> None:
    """A factory's network `built` again for `instance` (profiled from the factory spec `model`) has the
    dtype its meta records (``meta.dtype``, by the profile's rule: its first parameter's, else its
    input's, `models.chain.profiler.network_dtype`): a factory building float64 for a file recording
    float32 would run another network than the one profiled, so it is an `InputError` naming `path`
    (the instance file) and the field. A zoo network is built at its recorded dtype; none recorded:
    nothing to compare."""
    meta = _profiled_meta(instance, model, problem)
    if meta is None or meta.get("dtype") is None or not _is_factory(model):
        return
    from memsched.models.chain.profiler import network_dtype

    made = str(network_dtype(built.blocks, built.example_input)).replace("torch.", "")
    recorded = _size_value("dtype", meta["dtype"])
    if made != recorded:
        raise InputError(f"the instance was profiled at dtype {recorded} but {model} builds a {made} network: "
                         "profile it again, or make the factory build the recorded dtype", path=path,
                         field=f"{meta_field(problem)}.dtype")


def _check_recorded(key: str, value: Any, path: str | None, *, where: str = "meta", factory: bool = False,
                    field: str | None = None) -> None:
    """The size `key` an instance's meta records (`value`, as read) is one the network can be built
    at, by the zoo's own rules (`models.zoo.registry`: `SIZE_RANGES`, `parse_image_size`,
    `parse_dtype`, a dropout in 0..1, a granularity of `models.zoo.split.GRANULARITIES`; a join
    size in `models.join.zoo.JOIN_SIZE_RANGES`): else an `InputError` naming `path` (the instance file) and the
    field ``<where>.<key>`` (``graph.meta.<key>`` in a graph file, `meta_field`; `field` in place of
    `key` where the meta keeps the size under another name: a graph's split), never the
    command-line option the caller did not give. A `factory`'s dtype is its own choice: any dtype
    torch knows (`_torch_dtype`: float64 too), not only the zoo's."""
    from memsched.models.join.zoo import JOIN_SIZE_RANGES
    from memsched.models.zoo.registry import SIZE_RANGES, check_sizes, parse_dtype, parse_image_size
    from memsched.models.zoo.split import GRANULARITIES
    from memsched.solvers.units import check_int

    try:
        if key in SIZE_RANGES:
            check_sizes(**{key: value})
        elif key in JOIN_SIZE_RANGES:
            check_int(value, key, *JOIN_SIZE_RANGES[key])
        elif key == "image_size":
            parse_image_size(tuple(value) if isinstance(value, list) else value)
        elif key == "dtype":
            (_torch_dtype if factory else parse_dtype)(value)
        elif key == "dropout" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                   or not 0 <= value <= 1):
            raise InputError(f"must be a probability in 0..1, got {value!r:.80}")
        elif key == "granularity" and value not in GRANULARITIES:
            raise InputError(f"unknown granularity {value!r:.80} (one of {', '.join(GRANULARITIES)})")
    except InputError as err:
        raise InputError(err.message, path=path, field=f"{where}.{field or key}") from None


def _refused_sizes(model: str, recorded: dict[str, Any], given: dict[str, Any]) -> frozenset[str]:
    """The recorded sizes the caller left out that the factory `model` names takes no argument for
    (`models.network.refused_sizes`; none for a zoo name, or when every recorded size is given):
    not passed to it, as it cannot be built at them. A factory's file records the batch of its
    example input whether or not the factory takes one; the instance's input bytes
    (`_check_input_bytes`) still tell a network built at other sizes."""
    from memsched.models.network import is_factory_spec, refused_sizes

    if not is_factory_spec(model) or all(given.get(key) is not None for key in recorded):
        return frozenset()
    from memsched.models.zoo import MODELS

    return frozenset() if model in MODELS else refused_sizes(model)


def _size_value(key: str, value: Any) -> Any:
    """`value` of size `key` in one comparable form: (height, width) pixels, a dtype's name."""
    if key == "image_size":
        from memsched.models.zoo import parse_image_size

        return parse_image_size(tuple(value) if isinstance(value, list) else value)
    if key == "dtype":
        return str(value).replace("torch.", "")
    if key == "dropout":
        return float(value)
    return value


def _size_text(key: str, value: Any) -> str:
    """`value` of size `key` as a message shows it (32, 416x608, bfloat16)."""
    v = _size_value(key, value)
    if key == "image_size":
        return str(v[0]) if v[0] == v[1] else f"{v[0]}x{v[1]}"
    return str(v)


def _check_input_bytes(recorded: Any, built: int, name: str, what: str, *, sized: bool = True) -> None:
    """The example input `name` was built with has the bytes (`built`) the instance recorded
    (`recorded`, bytes; None: no record): an instance profiled at other sizes predicts another
    network's memory, so it is an `InputError` naming the instance option, never a run that
    compares the wrong numbers. `sized`: the instance records the network it was profiled from
    (meta "model"), whose sizes the run takes unless given (`instance_sizes`); without one the
    message asks for the sizes it was profiled at."""
    if recorded is None:
        return
    if int(recorded) != built:
        hint = (f"or leave the sizes to the {what}'s" if sized else
                f"or give the sizes it was profiled at (the {what} records no meta.model to take them from)")
        raise InputError(f"the {what} was profiled on an input of {int(recorded)} bytes but {name} with these sizes "
                         f"takes {built} bytes: profile it again at these sizes, {hint}", field=flag("chain"))


def _check_output_bytes(chain: Any, built: Any, path: str | None) -> None:
    """Each stage's recorded output bytes (``stages[i].out_size``, x[i+1]: bytes, `_check_in_bytes`) of a
    chain profiled from a network (its meta "model") are those of block i's output in the network `built`
    (`models.network.stage_output_bytes`, one forward under no_grad): a chain profiled at other sizes with
    the same input and stage count (a factory's default width, which no file profiled before
    `models.network.factory_defaults` records) predicts another network's memory, so it is an
    `InputError` naming `path` (the chain's file; None: not from one) and the stage's ``out_size``, as
    `_check_input_bytes` refuses another input. A chain without a meta "model" (hand-made costs) is not
    checked by its caller: its sizes need not be a profile's."""
    _check_stage_outputs(chain.x, list(built.blocks), built.example_input, built.name, "chain", path, "")


def _check_stage_outputs(x: Sequence[Any], blocks: list[Any], example: Any, name: str, what: str,
                         path: str | None, where: str) -> None:
    """The recorded output bytes ``x[i + 1]`` of each stage i of a chain (or a join branch) equal those of
    block i of `blocks` run on `example` (`models.network.stage_output_bytes`); else an `InputError`
    naming `path` and the field ``<where>stages[i].out_size`` (`where`: ``branches[b].`` in a join
    file, empty in a chain file). `name` names the network (and branch) in the message, `what` the file
    kind whose sizes the run may take instead ("chain", "join")."""
    from memsched.models.network import stage_output_bytes

    for i, made in enumerate(stage_output_bytes(blocks, example)):
        recorded = int(x[i + 1])
        if recorded != made:
            raise InputError(f"stage {i} was profiled with an output of {recorded} bytes but block {i} of "
                             f"{name} with these sizes outputs {made} bytes: profile it again at these sizes, "
                             f"or leave the sizes to the {what}'s", path=path, field=f"{where}stages[{i}].out_size")


def _prepare_chain(built: Any, chain: Any, problem: str, *, bandwidth: float | None, latency: float,
                   profile_repeats: int, timing: str | None, clock: str,
                   early_release: bool = False, path: str | None = None) -> Target:
    """The chain or offload `Target` of the built network `built`: `chain` (None: profile it here, and
    the target's `Target.save_profile` writes the whole instance, an offloading one with its host link)
    gives the costs; `path`, the file `chain` was loaded from (None: not from a file), is named by
    the errors about the chain's own fields."""
    from memsched.models.chain.executor import ChainExecutor, reference_step
    from memsched.models.chain.profiler import profile_chain
    from memsched.solvers.chain.baselines import store_all_schedule

    profiled = chain is None
    if chain is None:
        chain = profile_chain(built.blocks, built.loss_fn, built.example_input, built.target, repeats=profile_repeats,
                              name=built.label, meta={"model": built.name, **built.config}, timing=timing,
                              clock=clock, release=early_release and problem == "chain")
        cpu = built.example_input.device.type == "cpu"
        if problem == "offload" and (timing or ("in_step" if cpu else "isolated")) == "in_step":
            from memsched.models.offload.executor import retime_offload

            chain = retime_offload(chain, built.blocks, built.loss_fn, built.example_input, built.target,
                                   repeats=profile_repeats, clock=clock)
    else:
        if chain.length != len(built.blocks):
            raise InputError(f"the chain has {chain.length} stages but {built.name} with these sizes has "
                             f"{len(built.blocks)} blocks", field=flag("chain"))
        # x[0] is the input's bytes in every chain file run (sizes are bytes, `_check_in_bytes`): a profiled
        # chain's is the profiled input's unique bytes (`profile_chain`), with or without its meta "model"
        from memsched.models.memory import unique_bytes

        _check_input_bytes(chain.x[0], unique_bytes(built.example_input), built.name, "chain",
                           sized=chain.meta.get("model") is not None)
        if chain.meta.get("model") is not None:  # profiled from a network: its stage sizes are that network's
            _check_output_bytes(chain, built, path)
    x, tgt = built.example_input, built.target

    def reference(seed: int, schedule: Any = None) -> tuple[dict[str, torch.Tensor], Any]:
        _, grads, input_grad = reference_step(built.blocks, built.loss_fn, x, tgt, seed=seed)
        return grads, input_grad

    units = _time_units(chain.meta)
    if problem == "chain":
        executor = ChainExecutor(built.blocks, built.loss_fn)
        return Target("chain", built.name, chain, chain.name, x.device,
                      lambda schedule, **kw: executor.step(schedule, x, tgt, chain=chain, **kw), reference,
                      store_all_schedule(chain.length), info={"units": units},
                      modules=step_modules(built.blocks, built.loss_fn), save_profile=_saver(chain, profiled))
    from memsched.models.offload.executor import CPU_MEASUREMENT, OffloadExecutor

    if bandwidth is None:
        raise InputError("the offload problem needs a bandwidth", field=flag("bandwidth"))
    inst = _offload_instance(chain, float(bandwidth), float(latency), path)
    off = OffloadExecutor(built.blocks, built.loss_fn)

    def extras(step: Any, schedule: Any) -> dict[str, Any]:
        out = {"bandwidth": inst.bandwidth, "latency": float(latency), "transfers": len(schedule.transfers()),
               "predicted_extra": {"host_peak": step.predicted_host_peak, "sequential_peak": step.sequential_peak,
                                   "tracker_sequential_peak": step.tracker_sequential_peak,
                                   "sequential_makespan": step.sequential_makespan}}
        if x.device.type == "cpu":
            out["measurement"] = CPU_MEASUREMENT
        return out

    return Target("offload", built.name, inst, chain.name, x.device,
                  lambda schedule, **kw: off.step(schedule, x, tgt, inst=inst, **kw), reference,
                  store_all_schedule(chain.length).ops, extras, {"units": {**units, "bandwidth": "bytes/s"}},
                  modules=step_modules(built.blocks, built.loss_fn),
                  # with its host_link: `memsched run FILE` runs it as the offloading instance it is
                  save_profile=_saver(inst, profiled))


def _saver(instance: Any, profiled: bool) -> Callable[[str], None] | None:
    """A `Target.save_profile` writing `instance` (a chain, offloading instance or join) with
    `_save_beside` when it was `profiled` by this run, else None (an instance gave the costs)."""
    return (lambda out: _save_beside(instance, out)) if profiled else None


def _save_beside(instance: Any, out: str) -> None:
    """Write the profiled chain, offloading instance or join `instance` (its ``to_dict()``, a ``meta``
    object at the top) to `out`, its ``meta`` ``model`` / ``factory`` specs recorded relative to `out`'s
    folder when they name a factory file (`models.network.spec_beside`, as `memsched profile` writes
    them), so that `memsched run` finds the factory again from that folder or after it moved. The
    instance in memory keeps its specs (relative to the working folder, which this run uses)."""
    from memsched.models.network import spec_beside
    from memsched.solvers.jsonio import write_json_atomic

    data = instance.to_dict()
    meta = data.get("meta") or {}
    for key in ("model", "factory"):
        if isinstance(meta.get(key), str):
            meta[key] = spec_beside(meta[key], out)
    write_json_atomic(out, data)


def _offload_instance(chain: Any, bandwidth: float, latency: float, path: str | None) -> Any:
    """`solvers.offload.OffloadInstance` of `chain` over a link of `bandwidth` bytes/s and `latency`
    s. An `InputError` about the chain itself (its time unit, MFLOP, or its memory unit: no transfer
    times) names `path`, the file the chain came from (as ``memsched solve`` does); one about the
    link (``host_link.*``: the caller's bandwidth or latency) does not."""
    from memsched.solvers.offload import OffloadInstance

    try:
        return OffloadInstance(chain, bandwidth, latency)
    except InputError as err:
        if path is None or err.path is not None or str(err.field or "").startswith("host_link."):
            raise
        raise InputError(err.message, path=path, field=err.field) from None


def _prepare_join(model: Any, join: Any, sizes: dict[str, Any] | None, *, seed: int, profile_repeats: int,
                  timing: str | None, clock: str, path: str | None = None,
                  recorded: frozenset[str] = frozenset()) -> Target:
    """The join `Target` of `model` (a join zoo name built at `sizes`, or a built `JoinModel`): `join`
    (None: profile it here, and `Target.save_profile` writes it) gives the costs; `path`, the file
    `join` was loaded from (None: not from a file), and `recorded`, the sizes taken from its meta
    (`instance_sizes`), name the file's fields in the errors about them (`_build_join`, `_check_branch_outputs`)."""
    from memsched.models.join.executor import JoinExecutor, first_forwards, reference_join_step
    from memsched.models.join.profiler import profile_join
    from memsched.models.join.zoo import diagnosed_join
    from memsched.solvers.join import store_all_schedule

    built = model if not isinstance(model, str) else _build_join(model, sizes, seed, path, recorded)
    lengths = [len(b) for b in built.branches]
    profiled = join is None
    if join is None:
        join = profile_join(built, repeats=profile_repeats, timing=timing, name=built.label, clock=clock)
    elif join.lengths != lengths:
        raise InputError(f"the join has branches of {join.lengths} stages but {built.name} with these sizes has "
                         f"{lengths} blocks", field=flag("chain"))
    else:
        _check_branch_inputs(join, built)
        if join.meta.get("model") is not None:  # profiled from a network: its stage sizes are that network's
            _check_branch_outputs(join, built, path)
    executor = JoinExecutor(built.branches, built.loss_fn)
    xs, tgt = built.inputs, built.target

    def reference(seed: int, schedule: Any = None) -> tuple[dict[str, torch.Tensor], Any]:
        # the plain forwards in the order the schedule first runs them (branches sharing a module whose
        # output reads the buffers its forward updates, spectral_norm's u: the order changes the gradients)
        order = None if schedule is None else first_forwards(getattr(schedule, "ops", schedule))
        with diagnosed_join(built):
            _, grads, input_grads = reference_join_step(built.branches, built.loss_fn, xs, tgt, seed=seed,
                                                        order=order)
        return grads, input_grads

    def step(schedule: Any, **kw: Any) -> Any:
        with diagnosed_join(built):  # a branch that cannot run at these sizes is bad input, not an internal error
            return executor.step(schedule, xs, tgt, join=join, **{"clock": clock, **kw})

    return Target("join", built.name, join, join.name, xs[0].device, step, reference, store_all_schedule(join),
                  info={"units": _time_units(join.meta)},
                  modules=step_modules([b for branch in built.branches for b in branch], built.loss_fn),
                  save_profile=_saver(join, profiled))


def _build_join(model: str, sizes: dict[str, Any] | None, seed: int, path: str | None,
                recorded: frozenset[str]) -> Any:
    """`models.join.zoo.build_join_model` of `model` at `sizes`. A size taken from the join file's meta
    (`recorded`) that the network cannot be built at (a ResNet encoder 51, a text width no multiple of
    its heads) is an `InputError` naming `path` and ``meta.<key>``, never an option the caller did not
    give; one the caller gave keeps its own field."""
    from memsched.models.join.zoo import build_join_model
    from memsched.models.zoo.registry import size_field

    join_sizes = _sizes(sizes)
    if "dtype" in join_sizes:
        from memsched.models.zoo.registry import parse_dtype

        join_sizes["dtype"] = parse_dtype(join_sizes["dtype"])
    try:
        return build_join_model(model, **{"seed": seed, **join_sizes})
    except InputError as err:
        key = next((k for k in sorted(recorded) if err.field in (k, flag(k), size_field(k))), None)
        if key is None or err.path is not None:
            raise
        raise InputError(err.message, path=path, field=f"meta.{key}") from None


def _check_branch_outputs(join: Any, built: Any, path: str | None) -> None:
    """Each branch's recorded stage outputs (``branches[b].stages[i].out_size``, bytes) of a join profiled
    from a network (its meta "model") are those of the blocks of branch b of `built` on its input, as a
    chain's (`_check_output_bytes`): a join profiled at other sizes with the same inputs and stage counts
    (an embedding size its meta no longer records) predicts another network's memory, so it is an
    `InputError` naming `path` and the field. A branch that cannot run at these sizes is bad input
    (`models.join.zoo.diagnosed_join`)."""
    from memsched.models.join.zoo import diagnosed_join

    names = list(built.branch_names) if len(built.branch_names) == built.k else [f"branch{b}" for b in range(built.k)]
    with diagnosed_join(built):
        for b, (branch, blocks, x) in enumerate(zip(join.branches, built.branches, built.inputs)):
            _check_stage_outputs(branch.x, list(blocks), x, f"branch {b} ({names[b]}) of {built.name}", "join",
                                 path, f"branches[{b}].")


def _time_units(meta: dict[str, Any]) -> dict[str, str]:
    """``{"time": unit}``: a chain or join file's own time unit (``meta.units.time``: "s", MFLOP for
    ``--cost flops``, ms when the file does not say, as for profiled instances), as the predicted
    makespan is in it and `time_ratio` converts or drops it."""
    units = meta.get("units")
    return {"time": str(units.get("time") or "ms") if isinstance(units, dict) else "ms"}


def _check_branch_inputs(join: Any, built: Any) -> None:
    """Each branch's recorded input bytes (its ``input_size``: bytes, as every size of a join
    file; a profiled join's is the profiled input's unique bytes) are those of the input `built`
    gives that branch, with or without the join's meta ``model``: a join profiled at other sizes
    predicts another network's memory, so it is an `InputError` naming the instance option, as for
    chains and graphs (`_check_input_bytes`)."""
    from memsched.models.memory import unique_bytes

    sized = join.meta.get("model") is not None
    for b, (branch, x) in enumerate(zip(join.branches, built.inputs)):
        _check_input_bytes(branch.x[0], unique_bytes(x), f"branch {b} ({branch.name}) of {built.name}", "join",
                           sized=sized)


def _graph_input_bytes(graph: Any) -> Any:
    """The input bytes a graph file records (``meta.input_size``), or None when they are not bytes:
    a graph exported from a network (`models.graph.export`: meta ``model``, memory in bytes) or
    any graph whose ``meta.units.memory`` is "bytes". The generated graphs (`solvers.graph.generate`)
    count memory in KiB and a foreign file may use any unit, so theirs is not compared."""
    units = graph.meta.get("units")
    in_bytes = isinstance(units, dict) and units.get("memory") == "bytes"
    return graph.meta.get("input_size") if in_bytes or graph.meta.get("model") is not None else None


def graph_note(graph: Any) -> str | None:
    """Why a run of `graph` (a `solvers.graph.Graph` as loaded, before `with_workspace`) measures more
    than the budget and the predicted peak count, or None: node sizes that are outputs only (meta
    ``ram`` "output": what autograd saves is missing), and costs without the nodes' temporaries (no
    ``meta["temporaries"]`` and no workspace: only ``cost="measured"`` with ``ram="tape"``, timed in
    the executor's step, ``timing="in_step"``, records them; counted costs such as the default ``flops``
    never do, nor ``timing="isolated"``). Both are fixed by exporting with measured costs and tapes,
    timed in the step, as `prepare` profiles a network itself unless asked for isolated timing."""
    missing = []
    if graph.meta.get("ram") == "output":
        missing.append("the graph's node sizes are outputs only (exported with ram 'output'): what autograd saves "
                       "is not in them")
    isolated = graph.meta.get("cost") == "measured" and graph.meta.get("timing") == "isolated"
    if not graph.meta.get("temporaries") and not graph.has_workspace:
        how = f"exported with cost {graph.meta['cost']!r}: " if graph.meta.get("cost") else ""
        if isolated:  # each op timed alone: only the executor's step (timing "in_step") records temporaries
            how = "exported with cost 'measured' and timing 'isolated': "
        missing.append(f"the graph records no temporaries ({how}no meta.temporaries or workspaces): parameter "
                       "gradients before they are accumulated and kernel scratch buffers are not in its costs")
    if not missing:
        return None
    timing = (" and timing 'in_step'", " --timing in_step") if isolated else ("", "")
    return (f"the budget and the predicted peak under-count the step's memory (the measured peak may exceed them): "
            f"{'; '.join(missing)}; export it with cost 'measured' and ram 'tape'{timing[0]} (memsched export-graph "
            f"--cost measured --ram tape{timing[1]}) to run it")


def _prepare_graph(built: Any, graph: Any, *, profile_repeats: int, timing: str | None,
                   path: str | None = None) -> Target:
    """The graph problem's target: `graph` (an instance, from the file `path` when one) or, when None, the
    network's training graph exported with measured costs (ms, the median of `profile_repeats`, each node
    timed as `timing` says: "in_step", the default on every device, inside the graph executor's store-all
    step, or "isolated", each op alone; `models.graph.export`) and tapes in its node sizes, which
    `Target.save_profile` writes as exported (`save_graph`, without the workspaces the solvers plan with). A given graph
    whose forward nodes record other output bytes than the built network's nodes compute (the same node
    names at other widths) is an `InputError` naming `path` and the node (`models.graph.plan.output_size_mismatch`)."""
    from memsched.models.chain.executor import reference_step
    from memsched.models.graph.executor import GraphExecutor
    from memsched.models.graph.export import export_training_graph, save_graph
    from memsched.models.graph.profile import with_workspace
    from memsched.solvers.graph import GraphSchedule

    given = graph is not None
    save_profile: Callable[[str], None] | None = None
    if graph is None:
        graph = export_training_graph(built, cost="measured", ram="tape", repeats=profile_repeats,
                                      timing=timing or "in_step")
        # the graph executor may train a network plain autograd cannot (a saved tensor modified in place), whose
        # gradient check would fail after the file is written: refuse it first, as profiling a chain does
        _check_plain_autograd(built)
        save_profile = functools.partial(save_graph, graph)  # its factory spec relative to the file's folder
    else:
        x0 = built.example_input  # the export records numel x element size (`models.graph.export`)
        _check_input_bytes(_graph_input_bytes(graph), x0.numel() * x0.element_size(), built.name, "graph",
                           sized=graph.meta.get("model") is not None)
    note = graph_note(graph)
    graph = with_workspace(graph)  # the profiled temporaries as workspaces: the solvers plan with them
    try:
        executor = GraphExecutor(built.blocks, built.loss_fn, graph, built.example_input)
    except InputError:  # the network itself is refused (`models.graph.plan.check_state_updates`)
        raise
    except ValueError as err:  # a graph of another network (its nodes are not this one's)
        raise InputError(f"{first_line(err)} ({built.name} with these sizes)", field=flag("chain")) from None
    if given:
        _check_graph_outputs(graph, executor, built.name, path)
    units = graph.meta.get("units")
    info: dict[str, Any] = {"units": {"time": units.get("time", "?") if isinstance(units, dict) else "?"}}
    if note:
        info["note"] = note
    x, tgt = built.example_input, built.target

    def reference(seed: int, schedule: Any = None) -> tuple[dict[str, torch.Tensor], Any]:
        _, grads, input_grad = reference_step(built.blocks, built.loss_fn, x, tgt, seed=seed)
        return grads, input_grad

    return Target("graph", built.name, graph, graph.name, x.device,
                  lambda schedule, **kw: executor.step(schedule, x, tgt, **kw), reference,
                  GraphSchedule.from_indices(graph, range(graph.n)), info=info,
                  modules=step_modules(built.blocks, built.loss_fn), save_profile=save_profile)


def _check_plain_autograd(built: Any) -> None:
    """Nothing when plain autograd trains `built` (one forward, the loss and ``loss.backward()`` on its
    example input and target, state put back: `models.network.backward_error`), else the bad input
    `models.network.diagnosed` makes of it (``MODEL: ... fails in plain autograd ...``), as a chain's
    profiling meets it: a graph run compares its gradients with plain autograd's."""
    from memsched.models.network import backward_error, diagnosed

    found = backward_error(list(built.blocks), built.loss_fn, built.example_input, built.target, str(built.name))
    if found is not None:
        with diagnosed(built):  # names the network with its sizes, as every other failure of it
            raise RuntimeError(found.message)


def _check_graph_outputs(graph: Any, executor: Any, name: str, path: str | None) -> None:
    """Each forward node of the given `graph` records the output bytes the network's node computes on
    its example input (`models.graph.plan.output_size_mismatch`), else an `InputError` naming `path` and
    the node: a graph of the same node names at other widths would predict another network's memory."""
    from memsched.models.graph.plan import output_size_mismatch

    try:
        found = output_size_mismatch(executor.plan, graph)
    except InputError as err:  # a malformed meta.outputs: the file's field
        raise InputError(err.message, path=path, field=err.field) from None
    if found is not None:
        node, recorded, made = found
        raise InputError(f"node {node} was exported with an output of {recorded} bytes but {name} with these sizes "
                         f"outputs {made} bytes there: export the graph again from this network at these sizes",
                         path=path, field=flag("chain"))


def prepare(problem: str, model: Any, *, instance: Any = None, sizes: dict[str, Any] | None = None,
            bandwidth: float | str | None = None, latency: float = 0.0, seed: int = 0, profile_repeats: int = 5,
            timing: str | None = None, profile_file: str | None = None, clock: str | None = None,
            early_release: bool = False) -> Target:
    """Build `model` (a zoo name with `sizes`, a built model, or a (blocks, input, loss_fn, target)
    tuple) and get its costs: `instance` (an instance or its file) or profiling (chain, offload,
    join: `models.chain.profiler` / `models.join.profiler`, `profile_repeats` runs per op;
    graph: `models.graph.export` with measured costs in ms and tapes in the node sizes),
    saved to `profile_file` when given (`Target.save_profile`, once the target is ready: `run` passes
    none and saves it itself only once the budget and the solver took the instance); `clock` (CPU:
    "wall" or "thread"; None: `default_clock`, thread CPU time when torch runs one thread, as sweeps
    time) for profiling and the schedules' steps (of every problem: a graph file's ``meta.clock`` says how
    its costs were timed, not how this run times), recorded
    in ``info["clock"]`` (`step_clock`: "cuda events" on CUDA). `bandwidth` (bytes/s or "12GB/s") and `latency` (s)
    for offloading. `early_release` (chain problem): profile B(i) with early release too
    (`models.chain.profiler.profile_chain`). The network runs in bytes: an instance in another memory
    unit is bad input naming its ``meta.units.memory`` (`_check_in_bytes`). Bad input raises `InputError`, a
    network that fails at
    these sizes too (profiling, a step or the plain-autograd reference of the gradient check:
    `models.network.diagnosed`; a graph profiled here is refused so before `profile_file` is written)."""
    target = _prepare(problem, model, instance=instance, sizes=sizes, bandwidth=bandwidth, latency=latency, seed=seed,
                      profile_repeats=profile_repeats, timing=timing, clock=clock, early_release=early_release)
    if profile_file and target.save_profile is not None:
        target.save_profile(profile_file)
    return target


def _prepare(problem: str, model: Any, *, instance: Any, sizes: dict[str, Any] | None, bandwidth: float | str | None,
             latency: float, seed: int, profile_repeats: int, timing: str | None, clock: str | None,
             early_release: bool) -> Target:
    """`prepare` without saving the profile: its `Target.save_profile` writes it."""
    from memsched.solvers.units import parse_bandwidth

    if problem not in PROBLEMS:
        raise InputError(f"unknown problem {problem!r} (one of {', '.join(PROBLEMS)})", field=flag("problem"))
    clock = clock or default_clock()  # after the caller set torch's threads (`memsched run --threads`)
    inst = _load(problem, instance)
    path = instance if isinstance(instance, str) else None
    recorded: frozenset[str] = frozenset()
    if inst is not None:
        given = _sizes(sizes)
        sizes = instance_sizes(inst, model, sizes, problem, path=path)
        recorded = frozenset(k for k, v in sizes.items() if v is not None and k not in given)
        _check_in_bytes(inst, problem, path)  # before anything is built
    if problem == "join":
        target = _prepare_join(model, inst, sizes, seed=seed, profile_repeats=profile_repeats, timing=timing,
                               clock=clock, path=path, recorded=recorded)
        target.info["clock"] = step_clock(target, clock)
        return target
    from memsched.models.network import diagnosed

    built = _zoo(model, {"seed": seed, **_sizes(sizes)} if isinstance(model, str) else None)
    if inst is not None:
        _check_built_dtype(inst, model, built, problem, path)
    bw = parse_bandwidth(bandwidth) if isinstance(bandwidth, str) else bandwidth
    with diagnosed(built):  # a network that cannot run at these sizes is bad input, not an internal error
        if problem == "graph":
            target = _prepare_graph(built, inst, profile_repeats=profile_repeats, timing=timing, path=path)
        else:
            target = _prepare_chain(built, inst, problem, bandwidth=bw, latency=latency,
                                    profile_repeats=profile_repeats, timing=timing, clock=clock,
                                    early_release=early_release, path=path)
    step, reference = target.step, target.reference

    def diagnosed_step(schedule: Any, **kw: Any) -> Any:
        with diagnosed(built):
            return step(schedule, **{"clock": clock, **kw})

    def diagnosed_reference(seed: int, schedule: Any = None) -> tuple[dict[str, torch.Tensor], Any]:
        with diagnosed(built):  # plain autograd failing on this network is bad input too (the gradient check)
            return reference(seed, schedule)

    target.step, target.reference = diagnosed_step, diagnosed_reference
    target.info["clock"] = step_clock(target, clock)
    return target


def step_clock(target: Target, clock: str) -> str:
    """The clock that times `target`'s executed steps, as a run reports it (``clock``): "cuda events"
    on CUDA (as a CUDA profile's ``meta.clock``); else `clock`, the run's ("wall" or "thread", every
    problem's: a graph's steps too, whatever clock its file records, since the thread's CPU time only
    sees the work of one of torch's threads)."""
    if target.device.type == "cuda":
        return "cuda events"
    return clock


def _grad_line(check: bool | None, message: str) -> str:
    """The text of a run's gradient check: ok, FAILED with why, or the message of a check that compared
    nothing (None)."""
    if check is None:
        return message or "not checked"
    return "ok" if check else f"FAILED {message}"


def _gradients_ok(step: StepResult, reference: tuple[dict[str, torch.Tensor], Any], device: torch.device
                  ) -> tuple[bool | None, str]:
    """(gradients match plain autograd's, message): None when nothing was compared (every reference
    gradient zero, `measure.VACUOUS_CHECK`)."""
    from memsched.models.measure import compare_gradients, gradients_match

    ref_grads, ref_input = reference
    rtol, atol = tolerances(device)
    if isinstance(ref_input, list):  # join: one input gradient per branch
        from memsched.models.join.executor import compare_input_gradients, join_gradient_check

        ok, msg = compare_gradients(step.grads, ref_grads, rtol=rtol, atol=atol)
        ok_in, msg_in = compare_input_gradients(getattr(step, "input_grads", []), ref_input, rtol=rtol, atol=atol)
        verdict = join_gradient_check(ok, ok_in, ref_input)
        # a passing input check makes the parameters' vacuous-check message moot
        message = msg_in if verdict is True and ok is None else "; ".join(m for m in (msg, msg_in) if m)
        return verdict, message
    return gradients_match(step.grads, step.input_grad, ref_grads, ref_input, rtol=rtol, atol=atol)


def execute_schedule(target: Target, schedule: Any, *, seed: int = 0, time_repeats: int = 3,
                     independent: bool = True, check: bool = True) -> tuple[StepResult, dict[str, Any]]:
    """Execute `schedule` on `target` once for memory (tracker), once under the independent
    probe (CPU, when `independent`), `time_repeats` times for time; check its gradients
    against plain autograd (when `check`). Returns (the step, the flat row the sweep stores:
    measured_time_ms, measured_peak, independent_peak, predicted_peak (the solver's schedule replayed
    by the simulator, bytes), predicted_makespan, memory_ratio, independent_ratio, time_ratio,
    grad_check, grad_message, memory_method, device; and the divisors of the ratios, the step's
    `comparisons`: tracker_predicted_peak and independent_predicted_peak (bytes), the peaks the
    primary method's and the independent probe's are compared with, and compared_makespan, the
    makespan the time is compared with; offloading on CPU: the sequential replay's). Invariants:
    ``measured_peak / tracker_predicted_peak == memory_ratio`` and ``independent_peak /
    independent_predicted_peak == independent_ratio`` (when both are measured)."""
    before = snapshot_buffers(target.modules) if check else []
    step = target.step(schedule, seed=seed, time_repeats=time_repeats, independent=independent)
    ok, msg = None, ""
    if check:
        with from_buffers(before):  # plain autograd from the buffers the step started from
            ok, msg = _gradients_ok(step, target.reference(seed, schedule), target.device)
    compared = step.comparisons()
    compared_makespan = compared["time"].predicted  # the instance's time unit
    row = {"measured_time_ms": step.time_ms, "measured_peak": step.peak_memory,
           "independent_peak": step.independent_peak, "predicted_peak": step.predicted_peak,
           "predicted_makespan": step.predicted_makespan, "memory_ratio": compared["memory"].ratio,
           "tracker_predicted_peak": compared["memory"].predicted, "independent_ratio": compared["independent"].ratio,
           "independent_predicted_peak": compared["independent"].predicted, "compared_makespan": compared_makespan,
           "time_ratio": time_ratio(target.time_unit, step.time_ms, compared_makespan), "grad_check": ok,
           "grad_message": msg or None,
           "memory_method": step.memory_method, "device": step.device}
    return step, row


def run(model: Any, budget: int | str, *, problem: str = "chain", solver: str | None = None, instance: Any = None,
        sizes: dict[str, Any] | None = None, slots: int = 500, time_limit: float | None = None,
        options: dict[str, Any] | None = None, seed: int = 0, time_repeats: int = 3, profile_repeats: int = 5,
        timing: str | None = None, profile_file: str | None = None, bandwidth: float | str | None = None,
        latency: float = 0.0, independent: bool = True, store_all: bool = True,
        early_release: bool = False) -> dict[str, Any]:
    """The end-to-end run (module docstring): `prepare`, solve at `budget` (bytes, "1.5MB" or
    "X%" of the store-all peak) with `solver` (default `DEFAULT_SOLVERS[problem]`; `slots`,
    `time_limit` in s and `options` go to the solver), execute the schedule (and store-all,
    when `store_all`) with `execute_schedule`; the ``memsched run --json`` object. `early_release`:
    a chain profiled here also measures B(i) with early release, and the executor runs it so.
    `profile_file`: the instance profiled here is written there (atomically) once the budget is
    turned into bytes and the solver returned, infeasible or not; a run refused as bad input before
    (the budget, an instance the solver refuses) writes nothing and leaves an existing file as it was.

    A network passed as modules (a built `ZooModel`, a (blocks, input, loss_fn, target) tuple or a
    built join model) keeps its parameters and buffers: profiling and the executed steps run it in
    its own mode, so in training mode they would count their batches in BatchNorm's running
    statistics; its buffers are saved first and put back when the run ends, also when it raises
    (`models.buffers`). Parameters are never stepped; their ``.grad`` are left as the executors
    leave them (None here; `memsched.run` puts the caller's back, `memsched.api._state_kept`).
    The caller's torch RNG is kept too (`caller_rng_kept`): the run seeds torch's generators with
    `seed` for reproducible steps, and the state they had is put back when it ends, also when it raises."""
    if slots < 0:
        raise InputError(f"must be >= 0, got {slots}", field=flag("slots"))
    saved = snapshot_buffers(_caller_modules(model))
    try:
        with caller_rng_kept(model, sizes):
            return _run(model, budget, problem=problem, solver=solver, instance=instance, sizes=sizes, slots=slots,
                        time_limit=time_limit, options=options, seed=seed, time_repeats=time_repeats,
                        profile_repeats=profile_repeats, timing=timing, profile_file=profile_file,
                        bandwidth=bandwidth, latency=latency, independent=independent, store_all=store_all,
                        early_release=early_release)
    finally:
        restore_buffers(saved)


@contextlib.contextmanager
def caller_rng_kept(model: Any, sizes: dict[str, Any] | None = None) -> Iterator[None]:
    """Put torch's global RNG back as it was when the block ends, also when it raises: the CPU
    generator and the CUDA generators of `_rng_devices` (`torch.random.fork_rng`). Building a zoo
    network, profiling and the executed steps call ``torch.manual_seed`` (reproducible weights and
    dropout masks), which would otherwise leave the caller's script reseeded."""
    with torch.random.fork_rng(devices=_rng_devices(model, sizes)):
        yield


def _rng_devices(model: Any, sizes: dict[str, Any] | None) -> list[int]:
    """The CUDA device indices whose generator a run or profile of `model` may reseed: the device
    it runs on (a zoo name's ``sizes["device"]``, default CPU; the caller's modules' parameters and
    buffers) when that is CUDA, and the current device when the caller already uses CUDA
    (``torch.manual_seed`` reseeds every initialised CUDA generator). [] on a machine without CUDA;
    CUDA is not initialised for a run that does not use it."""
    if not torch.cuda.is_available():
        return []
    if isinstance(model, str):
        try:
            used = [torch.device((sizes or {}).get("device") or "cpu")]
        except (RuntimeError, TypeError, ValueError):  # a bad device: the zoo refuses it later (`InputError`)
            used = []
    else:
        modules = _caller_modules(model)
        used = [t.device for m in modules for t in (*m.parameters(), *m.buffers())]
    found = {d.index if d.index is not None else torch.cuda.current_device() for d in used if d.type == "cuda"}
    if torch.cuda.is_initialized():
        found.add(torch.cuda.current_device())
    return sorted(found)


def _caller_modules(model: Any) -> list[torch.nn.Module]:
    """The modules of `model` the caller built and keeps (none for a zoo name or factory spec, which
    `run` builds itself): a module, a `ZooModel`'s blocks, a tuple's first item, a join model's branches."""
    if isinstance(model, str):
        return []
    parts = getattr(model, "blocks", None)
    if parts is None:
        parts = getattr(model, "branches", None)
    if parts is None and isinstance(model, (tuple, list)) and model:
        parts = model[0]
    found: list[torch.nn.Module] = []
    stack = [model if parts is None else parts]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.nn.Module):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
    return found


def _refuse_empty_budget(budget: int | str) -> None:
    """The `parse_positive_budget` errors that need no reference peak, raised before anything is built or
    profiled: malformed, zero or negative budgets, and a share (0%) below one byte of any peak up to
    `MAX_BYTES`."""
    from memsched.solvers.units import MAX_BYTES, parse_budget

    text = budget.strip() if isinstance(budget, str) else None
    if text is None or not text.endswith("%"):
        parse_positive_budget(budget, None)
        return
    parse_budget(text, 0)  # unreadable, negative, infinite shares
    if MAX_BYTES * float(text[:-1]) / 100.0 < 1:
        raise InputError(f"{text} of the reference peak is less than one byte; give a larger share",
                         field=flag("budget"))


def _run(model: Any, budget: int | str, *, problem: str, solver: str | None, instance: Any,
         sizes: dict[str, Any] | None, slots: int, time_limit: float | None, options: dict[str, Any] | None,
         seed: int, time_repeats: int, profile_repeats: int, timing: str | None, profile_file: str | None,
         bandwidth: float | str | None, latency: float, independent: bool, store_all: bool,
         early_release: bool) -> dict[str, Any]:
    """`run` without the buffer restore."""
    _refuse_empty_budget(budget)  # before profiling: a refused budget profiles nothing
    target = prepare(problem, model, instance=instance, sizes=sizes, bandwidth=bandwidth, latency=latency, seed=seed,
                     profile_repeats=profile_repeats, timing=timing, early_release=early_release)
    graph_hint = _graph_accepts(problem, solver, instance, options, early_release)
    solver = solver or DEFAULT_SOLVERS[problem]
    reference = int(registry.problem_module(problem).reference_peak(target.instance))
    limit = parse_positive_budget(budget, reference)
    opts: dict[str, Any] = {**(options or {}), "slots": slots}
    if time_limit is not None:
        opts["time_limit"] = time_limit
    save = target.save_profile if profile_file else None
    try:
        result = registry.solve(problem, target.instance, solver, limit, **opts)
    except KeyboardInterrupt:  # the profile is finished work: an interrupted solve keeps it
        if save is not None:
            save(str(profile_file))
        raise
    if save is not None:
        # only now: a budget ("X%" of the profiled peak) or an instance the solver refuses is bad input, which
        # writes nothing and keeps an existing file; an infeasible budget still writes the (whole) profile
        save(str(profile_file))
    out: dict[str, Any] = {"model": target.model, "problem": problem, "instance": target.name,
                           problem if problem != "offload" else "chain": target.name, "budget": limit,
                           "solver": solver, "status": result.status, "device": str(target.device),
                           "clock": target.info.get("clock"),
                           "units": {"time": "ms", "memory": "bytes", **target.info.get("units", {})},
                           "store_all_peak": reference, "solve_time_s": result.solve_time_s}
    if target.info.get("note"):
        out["note"] = target.info["note"]
    if not result.found:
        msg = no_schedule_message(result, limit, time_limit)
        if problem in ("chain", "offload") and getattr(target.instance, "length", None) == 1:
            msg += _one_block_hint(graph_hint)
        out.update(message=msg, min_budget=None if result.min_budget is None else int(result.min_budget),
                   predicted=None, measured=None, grad_check=None)
        return out
    schedule = result.schedule
    base = target.step(target.store_all, seed=seed, time_repeats=time_repeats) if store_all else None
    step, row = execute_schedule(target, schedule, seed=seed, time_repeats=time_repeats, independent=independent)
    out.update(measured_vs_predicted(result.objective, _predicted_peak(step, result), step, base))
    out["ratio"]["time"] = time_ratio(target.time_unit, out["measured"]["time"], out["compared"]["time"]["predicted"])
    out["predicted"]["model_peak_memory"] = int(result.peak_memory)
    extras = target.extras(step, schedule)
    out["predicted"].update(extras.pop("predicted_extra", {}))
    out.update(extras)
    recomputations = getattr(schedule, "recomputations", None)
    out.update(grad_check=row["grad_check"], memory_method=step.memory_method,
               recomputations=recomputations() if callable(recomputations) else _repeats(schedule),
               loss=step.loss if math.isfinite(step.loss) else None, schedule=schedule.to_json())
    if row["grad_message"]:
        out["grad_message"] = row["grad_message"]
    warning = step_warning(problem, out["predicted"], limit, step)
    if warning:
        out["warning"] = warning
    return out


def _graph_accepts(problem: str, solver: str | None, instance: Any, options: dict[str, Any] | None,
                   early_release: bool) -> bool:
    """True when the same run as the graph problem (``--problem graph``) would take the options it was
    given: a chain run (a graph run offloads nothing) of a network profiled here (a chain file's costs
    are no graph's), without a solver named, solver options or an early release (all the chain's)."""
    return problem == "chain" and instance is None and solver is None and not options and not early_release


def _one_block_hint(graph: bool) -> str:
    """What an infeasible run of a chain of one stage adds to its message: the chain planned its one
    block whole, and where `graph` (the same run as the graph problem would take its options,
    `_graph_accepts`) that the graph problem plans inside it."""
    hint = ("; the chain has one block, which its schedules plan as a whole (the blocks are an nn.Sequential's "
            "children; any other module is one block)")
    return hint + (f": {flag('problem', 'graph')} plans inside it" if graph else "")


def _executed_prediction(step: StepResult) -> dict[str, Any]:
    """`over_budget_warning`'s `peak` and `run_as` for `step`: the allocator's prediction (bytes) of
    the step as it ran (`StepResult.comparisons`' ``independent``; an offloading step on the CPU runs
    one op at a time, so its sequential replay's) and, for that case, "one op at a time"."""
    synchronous = bool(getattr(step, "synchronous", False))
    return {"peak": step.comparisons()["independent"].predicted, "run_as": "one op at a time" if synchronous else ""}


def step_warning(problem: str, predicted: dict[str, Any], budget: int, step: StepResult) -> str | None:
    """`over_budget_warning` of an executed `step` of `problem`: a chain or offloading step passes its
    count of recomputed random stages; a join step's ``rng_states`` counts the forwards of random stages
    (each holds a copy of the generator's state while it runs), so its warning gives the bytes beyond the
    model instead, as a graph step's does."""
    kept = getattr(step, "rng_states", None) if problem in ("chain", "offload") else None
    return over_budget_warning(predicted, budget, kept, **_executed_prediction(step))


def over_budget_warning(predicted: dict[str, Any], budget: int, rng_states: int | None, *,
                        peak: float | None = None, run_as: str = "") -> str | None:
    """The ``warning`` of a run whose executed step is predicted above the `budget` (bytes): the
    allocator's prediction of the step as it ran, `peak` (bytes; default and fallback
    ``predicted["peak_memory"]``, the executor's prediction; an offloading step on the CPU runs one
    op at a time, `run_as`, and passes its ``sequential_peak``) > budget while the solver's model
    fits it: the run holds what the model does not charge, on the CPU the RNG state (5,056 B) of
    each recomputed random stage (`rng_states` of them, a chain or offloading step's count; None:
    not known, or a join step, whose count is of forwards of random stages: a join or graph step's
    warning gives the bytes beyond the model instead, such as a graph's ``meta["allocator_tape"]``,
    `models.graph.executor.GraphExecutor.allocator_tape_bytes`). None
    when the prediction fits the budget; when the model's peak does not fit it either, says so
    instead."""
    peak = int(predicted["peak_memory"] if peak is None else peak)
    model = int(predicted.get("model_peak_memory") or 0)
    if peak <= budget:
        return None
    what = f"the executed step ({run_as})" if run_as else "the executed step"
    head = f"{what} is predicted above the budget: {peak} B > {budget} B (the solver's model: {model} B)"
    if model > budget:
        return f"{head}: the solver's own model of the schedule is above the budget"
    if rng_states:
        return (f"{head}, as the executor keeps the CPU RNG states of {rng_states} recomputed random stage"
                f"{'s' if rng_states > 1 else ''} (5,056 B each, plus a copy during each recomputation), which the "
                "solver's model does not charge")
    return (f"{head}: the run holds {peak - model} B the model does not charge (on the CPU, the generator states "
            "kept for random stages, 5,056 B each, and the Python scalars autograd saves on tapes, 8 B each)")


def no_schedule_message(result: Any, budget: int, time_limit: float | None = None) -> str:
    """Why the `SolveResult` `result` (solved at `budget` bytes, within `time_limit` s when given)
    has no schedule, from its status as `memsched solve` words it (without the status, which
    ``memsched run`` prints before it: "infeasible: ...", "timeout: ..."): for ``infeasible`` the
    solver's message (else that it finds no schedule within the budget) and the smallest feasible
    budget when the solver knows it; for ``timeout`` that the time limit passed before any schedule,
    never that the budget is too small; another status with the solver's message."""
    from memsched.solvers.result import INFEASIBLE, TIMEOUT

    note = f": {result.message}" if result.message else ""
    if result.status == TIMEOUT:
        within = "the time limit" if time_limit is None else f"the time limit ({time_limit:g} s)"
        return f"{result.solver} found no schedule within {within}{note}"
    if result.status != INFEASIBLE:
        return f"{result.solver} found no schedule ({result.status}{note})"
    msg = result.message or f"{result.solver} finds no schedule within budget {budget} bytes"
    if result.min_budget is not None and "smallest" not in msg:
        msg += f" (smallest feasible budget: {int(result.min_budget)} bytes)"
    return msg


def predicted_ms(unit: str, predicted: float | None) -> float | None:
    """A predicted makespan in the instance's time `unit` ("s", "ms", "us", ...) converted to ms, the
    unit of every measured time; None when `unit` counts work (MFLOP), which no clock measures, or
    when there is no prediction."""
    from memsched.solvers.chain.instance import TIME_UNITS

    per_second = TIME_UNITS.get(unit)
    if per_second is None or predicted is None:
        return None
    return float(predicted) * 1e3 / per_second


def time_ratio(unit: str, measured_ms: float | None, predicted: float | None) -> float | None:
    """Measured time (ms) / predicted makespan (in the instance's time `unit`, `predicted_ms`); None
    when either is missing, the prediction is 0 or counted work."""
    return ratio(measured_ms, predicted_ms(unit, predicted))


def _predicted_peak(step: StepResult, result: Any) -> int:
    """The predicted peak (bytes) reported as ``predicted.peak_memory`` and compared with the
    second, independent measurement (``ratio.independent_memory``; the other ratios' pairs:
    `StepResult.comparisons`): the executor's prediction for the run (`StepResult.predicted_peak`:
    on the CPU it adds the RNG states kept for recomputed random stages, chain and offload; graphs:
    each running node's temporaries as the measuring method sees them, `models.graph.profile`), the
    solver's (``model_peak_memory``) when the executor made none."""
    return int(step.predicted_peak if step.predicted_peak is not None else result.peak_memory)


def default_clock() -> str:
    """The CPU clock of profiles and timed steps: "thread" (the calling thread's CPU time, which
    other processes sharing the cores do not inflate) when torch runs one thread, else "wall"."""
    return "thread" if torch.get_num_threads() == 1 else "wall"


def _repeats(schedule: Any) -> int | None:
    """Computations beyond the first of each node (graph schedules)."""
    seq = getattr(schedule, "sequence", None)
    return None if seq is None else len(seq) - len({str(v) for v in seq})


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "n/a" if v is None else format(v, spec)


def _time_range(measured: dict[str, Any]) -> str:
    """" (min A, max B over N)" (ms) after the median step time when more than one run was timed, else ""."""
    runs = measured.get("time_runs") or 0
    if runs < 2:
        return ""
    return f" (min {measured['time_min']:.2f}, max {measured['time_max']:.2f} over {runs})"


def _differs(value: Any, reference: Any) -> bool:
    return value is not None and value != reference


def _predicted_peaks(out: dict[str, Any]) -> str:
    """The predicted peaks of ``describe``'s line, the first the one ``predicted.peak_memory`` (the
    executor's prediction, every ratio's): the allocator's and the tracker's when they differ (the
    profile charges the allocator's transients and the RNG states the run keeps, the tracker sees
    neither), offloading with two streams and one op at a time, and the solver's model peak
    (``model_peak_memory``) when it differs from the executor's."""
    p = out["predicted"]
    peak, tracker = p["peak_memory"], p.get("tracker_peak_memory")
    if out.get("problem") == "offload":
        seq, tracker_seq = p["sequential_peak"], p.get("tracker_sequential_peak")
        text = f"{format_bytes(peak)} (two streams), {format_bytes(seq)} (one op at a time)"
        if _differs(tracker, peak) or _differs(tracker_seq, seq):
            text += (f" by the allocator, {format_bytes(tracker if tracker is not None else peak)} (two streams), "
                     f"{format_bytes(tracker_seq if tracker_seq is not None else seq)} (one op at a time) by the "
                     "tracker")
        text += f", host {format_bytes(p['host_peak'])}"
    else:
        text = format_bytes(peak)
        if _differs(tracker, peak):
            text += f" (allocator), {format_bytes(tracker)} (tracker)"
    if _differs(p.get("model_peak_memory"), peak):
        text += f"; the solver's model: {format_bytes(p['model_peak_memory'])}"
    return text


def _makespan_text(value: float) -> str:
    """A predicted makespan as the measured time beside it is printed (two decimals), but with four
    significant digits below 1, so that a small one (a roofline graph's 0.0021 ms, 0.0123 MFLOP)
    does not read as 0.00."""
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"


def describe(out: dict[str, Any]) -> str:
    """The human-readable lines of ``memsched run`` for a `run` result."""
    unit = out.get("units", {}).get("time", "ms")
    head = (f"{out['instance']} on {out['device']}, solver {out['solver']} ({out['status']}), "
            f"budget {format_bytes(out['budget'])}")
    if out.get("problem") == "offload":
        head += f", link {out['bandwidth'] / 1e9:g} GB/s"
    if out.get("predicted") is None:
        return f"{head}\n  {out.get('status') or 'infeasible'}: {out.get('message', '')}"
    p, m = out["predicted"], out["measured"]
    pred = f"  predicted: makespan {_makespan_text(p['makespan'])} {unit}, peak {_predicted_peaks(out)}"
    meas = (f"  measured:  time     {_fmt(m['time'], '.2f')} ms{_time_range(m)}, peak {format_bytes(m['peak_memory'])} "
            f"({out['memory_method']})")
    if m.get("independent_peak") is not None:
        meas += f", {format_bytes(m['independent_peak'])} ({m['independent_method']})"
    if out.get("problem") == "offload":
        meas += f", {out['transfers']} transfers"
    lines = [head, pred, meas]
    vs = out.get("vs_store_all")
    if vs:
        lines.append(f"  vs store-all: predicted time x{_fmt(vs['predicted']['time'])}, memory "
                     f"x{_fmt(vs['predicted']['memory'])}; measured time x{_fmt(vs['measured']['time'])}, memory "
                     f"x{_fmt(vs['measured']['memory'])}")
    lines.append(f"  grad check: {_grad_line(out['grad_check'], out.get('grad_message', ''))}")
    if "measurement" in out:
        lines.append(f"  note: {out['measurement']}")
    if out.get("note"):
        lines.append(f"  note: {out['note']}")
    if out.get("warning"):
        lines.append(f"  warning: {out['warning']}")
    return "\n".join(lines)
