"""Instances of a sweep: load, generate or profile each `[[instances]]` entry once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsched.solvers import registry
from memsched.solvers.errors import InputError, first_line, python_spelling

from .config import EXAMPLES, MODEL_PROBLEMS, MODEL_SIZES, ROOT, InstanceSpec, SweepConfig, generator
from .instance_store import InstanceStore, Stored, digest, document
from .instance_store import _safe as safe_name


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
    digest: str | None = None               # content hash of the instance file (`instance_store`)
    stored: str | None = None               # the stored instance file
    overrides: dict[str, Any] | None = None  # what the entry changes in its file (`instance_overrides`)


def resolve_path(text: str, config_path: Path) -> Path:
    """A path from a sweep file: against the file's folder, then the current folder."""
    p = Path(text).expanduser()
    if p.is_absolute():
        return p
    for base in (config_path.resolve().parent, Path.cwd()):
        if (base / p).exists():
            return base / p
    return config_path.resolve().parent / p


def load_instance_spec(spec: InstanceSpec, config: SweepConfig, store: InstanceStore | None = None) -> LoadedInstance:
    """Load (or generate, or profile) one instance; `InputError` names the sweep key.

    With a `store`, a built instance (generated or profiled) is read from its stored file when
    there is one, else built, stored and read back from the file (so every run solves exactly the
    stored instance); a file instance is read and a copy of its bytes stored."""
    p = str(config.path)
    where = spec.where
    model = None
    stored: Stored | None = None
    data: bytes | None = None
    own_problem: str | None = None  # the problem of the file or generator itself, before the entry's `problem`
    own_link: tuple[float, float] | None = None  # the host link of an offloading file itself
    if spec.kind == "model":
        sizes = {k: v for k, v in spec.params.items() if k not in ("model", "repeats", "warmup", "bandwidth")}
        model = {"name": spec.params["model"], "sizes": sizes}
    threads = config.measure["threads"]
    hit = store.built(spec, threads=threads) if store is not None and spec.kind in ("generate", "model") else None
    if hit is not None:
        problem, instance = _load_stored(hit, where, p)
        source, label, stored = hit.source, spec.label or hit.label, hit
        if spec.kind == "generate":
            own_problem = generator(spec.params["generate"], f"{where}.generate",
                                    lambda k, m: InputError(m, path=p, field=k))[0]
    elif spec.kind in ("file", "example"):
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
                problem, instance = "offload", registry.get_problem("offload").load(str(path), bw)
            else:
                problem, instance = load_instance(path, spec.problem)
        except InputError as err:
            raise InputError(f"cannot load: {err}", path=p, field=key) from None
        source = file_source(path)
        label = spec.label or getattr(instance, "name", None) or path.stem
        own_problem, own_link = _own_problem_and_link(path, spec)
        data = path.read_bytes()
        if store is not None:
            stored = store.put(spec, data, label=label, problem=problem, source=source,
                               ext=path.suffix or ".json")
    elif spec.kind == "generate":
        problem, func = generator(spec.params["generate"], f"{where}.generate",
                                   lambda k, m: InputError(m, path=p, field=k))
        link = problem == "chain" and spec.problem == "offload"  # a chain given the entry's host link
        kwargs = {k: v for k, v in spec.params.items() if k != "generate" and not (link and k == "bandwidth")}
        instance = _generate(func, kwargs, where, p)
        if link:
            instance = _with_host_link(instance, spec.params.get("bandwidth"), where, p)
        own_problem, problem = problem, spec.problem or problem
        source = f"{func.__module__}.{func.__name__}({json.dumps(kwargs, sort_keys=True)})"
        if link:
            source += f" + host_link {json.dumps({'bandwidth': instance.bandwidth, 'latency': instance.latency})}"
        label = spec.label or _generated_name(instance, spec, p)
    elif spec.problem in ("join", "graph", "offload"):
        with pinned_threads(threads):  # profile as the cells execute: same torch threads
            problem, instance, source, label = _profile_problem(spec, sizes, p)
    elif spec.problem not in (None, "chain"):  # config.MODEL_PROBLEMS refuses it in a file; a spec built in code
        raise InputError(f"a model instance is profiled for one of {', '.join(MODEL_PROBLEMS)}, not {spec.problem!r}",
                         path=p, field=f"{where}.problem")
    else:
        try:
            from memsched.models.chain.profiler import profile_model
            from memsched.models.run import default_clock
        except ImportError as err:
            raise InputError(f"profiling zoo networks needs PyTorch and models.chain.profiler ({err})", path=p,
                             field=f"{where}.model") from None
        with pinned_threads(threads), profiling_errors(p, where):  # as the cells execute: same torch threads
            instance, built = profile_model(spec.params["model"], repeats=spec.params.get("repeats", 3),
                                            warmup=spec.params.get("warmup", 1), clock=default_clock(), **sizes)
        problem = "chain"
        source = f"memsched.models.chain.profiler.profile_model({json.dumps(spec.params, sort_keys=True)})"
        label = spec.label or built.label
    if hit is None and spec.kind in ("generate", "model"):
        data = document(instance)
        if data is not None:  # the format's loader checks it as it will check the stored file (also read-only)
            problem, instance = _validated(data, problem, label, spec, p)
        if store is not None and data is not None:
            stored = store.put(spec, data, label=label, problem=problem, source=source, built=True, threads=threads)
            if stored is not None:  # solve what was stored, bit for bit
                problem, instance = _load_stored(stored, where, p)
    desc = registry.get_problem(problem)
    try:
        reference = int(desc.reference_peak(instance))
    except Exception:  # noqa: BLE001  (a problem without a meaningful reference)
        reference = None
    baseline = None if problem == "pipeline" else _baseline_objective(instance)
    h = stored.hash if stored is not None else (digest(data) if data is not None else None)
    return LoadedInstance(spec, label, problem, instance, source, _size_of(instance), reference, baseline, model,
                          h, str(stored.path) if stored is not None else None,
                          instance_overrides(spec, problem, instance, own_problem, own_link))


def _generate(func: Any, kwargs: dict[str, Any], where: str, config_path: str) -> Any:
    """``func(**kwargs)``, a generator called with an ``[[instances]]`` entry's arguments: any
    exception it raises (a TypeError of a misnamed argument, an IndexError of a string where a
    number goes, ...) is bad input, an `InputError` naming the entry `where`."""
    try:
        return func(**kwargs)
    except InputError as err:
        raise InputError(f"cannot generate: {err.message}", path=config_path, field=where) from None
    except Exception as err:  # noqa: BLE001  (any failure of the generator is about its arguments)
        raise InputError(f"cannot generate: {type(err).__name__}: {first_line(err) or 'no message'}",
                         path=config_path, field=where) from None


def _with_host_link(chain: Any, bandwidth: Any, where: str, config_path: str) -> Any:
    """The offload instance of a generated `chain` with the entry's host link: `bandwidth`
    (bytes/s, or a string like "12GB/s"), latency 0 s, as a chain file read with a ``bandwidth``."""
    from memsched.solvers.units import parse_bandwidth

    try:
        bw = parse_bandwidth(bandwidth, field=f"{where}.bandwidth")
        from memsched.solvers.offload.instance import OffloadInstance

        return OffloadInstance(chain, bw, 0.0)
    except InputError as err:
        raise InputError(err.message, path=config_path, field=f"{where}.bandwidth") from None


def _generated_name(instance: Any, spec: InstanceSpec, config_path: str) -> str:
    """The name of a generated instance (its label in rows and stored file names): a non-empty
    string, else an `InputError` naming the entry's ``name`` (or the entry)."""
    name = getattr(instance, "name", None)
    if not isinstance(name, str) or not name:
        field = f"{spec.where}.name" if "name" in spec.params else spec.where
        raise InputError(f"the generated instance's name must be a non-empty string, got {name!r}",
                         path=config_path, field=field)
    return name


def instance_overrides(spec: InstanceSpec, problem: str, instance: Any, own_problem: str | None,
                       own_link: tuple[float, float] | None) -> dict[str, Any] | None:
    """What an ``[[instances]]`` entry changes in the instance its file (or generator) gives, for
    the row key (`grid.row_key`): the content hash covers the file's bytes, not how the entry
    reads them. ``problem``: the entry's `problem` when it is not the file's own (`own_problem`,
    detected from the file, or the generator's); ``link``: the host link ``[bandwidth (bytes/s),
    latency (s)]`` of an offloading instance whose entry gives a ``bandwidth``, when it is not the
    file's own (`own_link`: None for a chain file). None when the entry changes neither (no
    ``problem`` or the file's own, no ``bandwidth``), so that such rows keep the keys they had
    before these overrides counted. (A ``model`` entry's problem and bandwidth are in its
    ``source``, and a generator's ``bandwidth`` in its arguments, or in the ``host_link`` of a
    generated chain's source.)"""
    out: dict[str, Any] = {}
    if spec.kind in ("file", "example", "generate") and spec.problem is not None and spec.problem != own_problem:
        out["problem"] = problem
    if spec.kind in ("file", "example") and problem == "offload" and "bandwidth" in spec.params:
        link = (float(instance.bandwidth), float(instance.latency))
        if link != own_link:
            out["link"] = list(link)
    return out or None


def _own_problem_and_link(path: Path, spec: InstanceSpec) -> tuple[str | None, tuple[float, float] | None]:
    """(problem, host link) of the file at `path` read as it is, for `instance_overrides`; only
    looked up when the entry overrides one of them (None when it cannot be told: the override then
    counts). The link is (bandwidth in bytes/s, latency in s) of an offloading file, else None."""
    if spec.problem is None:
        return None, None
    from memsched.solvers.formats import detect_problem

    try:
        own = detect_problem(path)
    except InputError:
        return None, None
    link = None
    if own == "offload" and "bandwidth" in spec.params:
        try:
            inst = registry.get_problem("offload").load(str(path))
            link = (float(inst.bandwidth), float(inst.latency))
        except (InputError, ImportError):
            link = None
    return own, link


@contextmanager
def profiling_errors(path: str | Path, where: str) -> Iterator[None]:
    """Profiling a zoo network inside: its `InputError` names the sweep file `path` and the key
    of the instance `where` it is about, spelt as sweep files spell it (``instances[0].depth: lstm
    takes no depth``, not the command line's ``--depth``: `entry_key`); an error naming no key of
    the entry names its ``model``. A TypeError, ValueError or RuntimeError becomes an `InputError`
    "cannot profile this network" naming the instance `where`."""
    try:
        with python_spelling():  # a sweep file's keys are the Python names (seq_len, image_size)
            yield
    except InputError as err:
        key = entry_key(err.field)
        if key is None:
            raise InputError(str(err), path=str(path), field=f"{where}.model") from None
        flag = str(err.field)  # the command line's words: "takes no --depth" -> "takes no depth"
        message = err.message.replace(flag, key) if flag.startswith("--") else err.message
        if err.path is not None:  # another file at fault (a factory's): it stays named
            message = f"{err.path}: {message}"
        raise InputError(message, path=str(path), field=f"{where}.{key}") from None
    except (TypeError, ValueError, RuntimeError) as err:
        raise InputError(f"cannot profile this network: {type(err).__name__}: {first_line(err)}", path=str(path),
                         field=where) from None


def entry_key(field: str | None) -> str | None:
    """The key of a ``model`` entry that an error's `field` names, in either spelling (``--seq-len``
    or ``seq_len``, ``MODEL`` or ``model``), e.g. ``seq_len``; None for no field or one that is no
    key of such an entry (the error is then about the network as a whole)."""
    if field is None:
        return None
    key = field[2:].replace("-", "_") if field.startswith("--") else field
    key = "model" if key == "MODEL" else key
    return key if key in MODEL_SIZES | {"model"} else None


@contextmanager
def pinned_threads(threads: int | None) -> Iterator[None]:
    """Inside, torch's CPU threads are `threads` (as the executing cells set them in their worker
    processes, `cell._execute`), so that a network is profiled as its cells run; on exit, also on an
    error, the caller's count is put back (``memsched.sweep`` in a notebook keeps its own threads;
    ``memsched.profile`` and ``memsched.run`` use it for their `threads`). No-op without PyTorch, and
    for None (torch's count unchanged, torch not imported)."""
    from memsched.experiments.cli import interrupts_deferred

    if threads is None:
        yield
        return
    try:
        with interrupts_deferred():  # a Ctrl-C inside torch's native import is raised after it
            import torch
    except ImportError:
        torch = None
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _profile_problem(spec: InstanceSpec, sizes: dict[str, Any], config_path: str) -> tuple[str, Any, str, str]:
    """(problem, instance, source, label) of a zoo network profiled for a join, graph or offload
    run (`models.run.prepare`: join profiler, torch.fx graph with measured costs in ms, or the
    chain profile with the entry's host ``bandwidth``)."""
    where = spec.where
    try:
        from memsched.models.run import prepare
    except ImportError as err:
        raise InputError(f"profiling zoo networks needs PyTorch ({err})", path=config_path,
                         field=f"{where}.model") from None
    link: dict[str, Any] = {}
    if spec.problem == "offload":
        if "bandwidth" not in spec.params:
            raise InputError("an offload instance needs a host bandwidth", path=config_path, field=f"{where}.bandwidth")
        from memsched.solvers.units import parse_bandwidth

        link["bandwidth"] = parse_bandwidth(spec.params["bandwidth"], field=f"{where}.bandwidth")
    from memsched.models.run import default_clock

    with profiling_errors(config_path, where):
        target = prepare(str(spec.problem), spec.params["model"], sizes=sizes,
                         profile_repeats=spec.params.get("repeats", 3), clock=default_clock(), **link)
    source = f"memsched.models.run.prepare({json.dumps({'problem': spec.problem, **spec.params}, sort_keys=True)})"
    return str(spec.problem), target.instance, source, spec.label or target.name


def _validated(data: bytes, problem: str, label: str, spec: InstanceSpec, config_path: str) -> tuple[str, Any]:
    """(problem, instance) of `data`, the file of an instance a ``generate`` or ``model`` entry
    built (`document`), read back by the format's loader as its stored file is read
    (`_load_stored`), so that ``--list`` and ``--verify``, which store nothing, refuse what a run
    refuses (a generator given ``cpu_range = [-5, -1]`` writes negative costs). The loader's
    refusal is an `InputError` naming the sweep file and the entry (``instances[i]``), not a
    temporary or stored file, which no longer exists once the error is printed. The file is named
    as the store names it (`label` and content hash), as a loader names an instance whose file
    gives no name after the file."""
    import tempfile

    from memsched.solvers.formats import load_instance

    what = "generated" if spec.kind == "generate" else "profiled"
    with tempfile.TemporaryDirectory(prefix="memsched-instance-") as folder:
        path = Path(folder) / f"{safe_name(label)}-{digest(data)}.json"
        path.write_bytes(data)
        try:
            return load_instance(path, problem)
        except InputError as err:
            reason = f"{err.field}: {err.message}" if err.field else err.message
            reason = reason.replace(f"{path}: ", "").replace(str(path), "the instance file")
            raise InputError(f"the {what} instance is not a valid {problem} instance: {reason}",
                             path=config_path, field=spec.where) from None


def _load_stored(stored: Stored, where: str, config_path: str) -> tuple[str, Any]:
    """(problem, instance) of a stored instance file."""
    from memsched.solvers.formats import load_instance

    try:
        return load_instance(stored.path, stored.problem)
    except InputError as err:
        raise InputError(f"cannot read the stored instance: {err}", path=config_path, field=where) from None


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


def file_source(path: Path) -> str:
    """The ``source`` of a file instance: its path relative to the repository when it lies inside
    it (so that row keys do not depend on where the repository is checked out), else absolute
    (the row says where the file was read; `grid.key_source` leaves such a path out of the row
    key, so that a moved experiment folder keeps its keys)."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(ROOT).as_posix()
    except ValueError:
        return str(resolved)
