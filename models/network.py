"""Your own network as a chain: the objects themselves, or a factory named on the command line.

A chain network is a sequence of blocks (block i maps the tensor a_i to a_{i+1}), an example
input a_0 (its batch fixes every size the profile measures), and a loss ``loss_fn(output,
target)`` returning a scalar tensor. Three ways to hand one to memsched:

- a `Network` (``Network(model, example_input, target, loss_fn, name)``), where `model` is an
  ``nn.Sequential`` (its children are the blocks), a list of modules, or one module (a chain of
  one block);
- a tuple ``(model, example_input)``, ``(model, example_input, target)`` or
  ``(model, example_input, target, loss_fn)``;
- a factory spec ``FILE.py:FUNCTION`` or ``package.module:FUNCTION`` (the command line's
  MODEL): the function returns one of the two above. The sizing options given on the command
  line (``--batch``, ``--image-size``, ``--seq-len``, ``--width``, ``--depth``, ...) are passed
  to it as keyword arguments of those names, and so are ``device``, ``seed`` and ``dtype``
  when it takes them; a network it builds elsewhere is moved to the device.

Without a loss, the loss is the mean of the output (`mean_output_loss`): a stand-in that
back-propagates through every block, for networks whose real loss is elsewhere; a target given
without a loss is bad input (the stand-in would ignore it). Before anything is profiled the
network runs once, its blocks one at a time with autograd on, each on its input detached: a
block that fails, or does not return a tensor, is bad input naming the block (`InputError`), as is
a loss that fails, does not return a scalar, or does not depend on the output through autograd (a
detached value, an argmax, a constant: nothing to back-propagate), a network whose loss has no
gradient path at all in plain autograd (a last block that detaches or returns integers with
nothing trainable after it, an integer input into frozen blocks: ``loss.backward()`` would fail),
and a block that modifies its input in place. A zoo
network is not run beforehand; when profiling or running one fails, the same dry run tells bad
sizes (a block that cannot run at them) from a bug (`diagnosed`). Everything built here is a
`models.zoo.ZooModel`, so every command and executor that takes a zoo network takes these.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError, first_line, flag

__all__ = ["Network", "is_factory_spec", "mean_output_loss", "as_zoo_model", "build_network", "checked_blocks",
           "schedule_and_instance", "first_line", "checked_loss_fn", "step_input_error",
           "check_input_like", "check_step_arguments", "diagnosed", "refused_sizes", "factory_defaults",
           "stage_output_bytes", "network_source", "check_factory_file"]

#: the keyword arguments `build_network` may pass to a factory (the zoo's sizes and placement)
FACTORY_KEYS = ("batch", "image_size", "seq_len", "width", "depth", "vocab", "classes", "dropout", "device", "seed",
                "dtype", "granularity")


@dataclass
class Network:
    """A network to profile, solve and run as a chain.

    `model`: an ``nn.Sequential`` (its children are the blocks F^0..F^{L-1}), a list of modules,
    or one module; `example_input`: the tensor a_0 (the batch every size is measured at);
    `target`: what the loss compares the output with (any object; None by default; a target
    needs a `loss_fn`); `loss_fn`: ``loss_fn(output, target) -> scalar tensor`` that depends on
    the output through autograd (default `mean_output_loss`); `name`: the chain's name (default
    "custom")."""

    model: Any
    example_input: Any
    target: Any = None
    loss_fn: Callable[[Any, Any], Any] | None = None
    name: str | None = None


def mean_output_loss(output: Any, target: Any = None) -> Any:
    """The stand-in loss: the mean of the output (float), `target` unused."""
    return output.float().mean()


@dataclass(frozen=True)
class _Source:
    """Where the network spec being built was written: `field` (``--model``, ``meta.model``) of the
    instance file `path` (None: the command line); a relative ``FILE.py`` not in the working folder
    is looked up in `folder` (None: nowhere else)."""

    field: str
    path: str | None = None
    folder: Path | None = None


#: set by `network_source` (the command line's `memsched run` when MODEL is an instance file)
_SOURCE: contextvars.ContextVar[_Source | None] = contextvars.ContextVar("memsched_network_source", default=None)


@contextlib.contextmanager
def network_source(field: str, *, path: str | None = None) -> Iterator[None]:
    """Inside, the network spec comes from `field` of the instance file `path` (``meta.model``), or
    from the option `field` when `path` is None (``--model``): `model_field` names it, and an error
    about the spec names the file too; a relative ``FILE.py`` the working folder lacks is looked up
    in the folder of `path` (a chain file records the factory as the profile was given it,
    relative to the folder it was profiled in, usually the file's own)."""
    folder = None if path is None else Path(path).parent
    token = _SOURCE.set(_Source(field, path, folder))
    try:
        yield
    finally:
        _SOURCE.reset(token)


def model_field() -> str:
    """The field naming the network argument in a message: ``MODEL`` (the positional argument) on the
    command line, or the field `network_source` names (``--model``, ``meta.model``); ``model`` in Python
    (inside `errors.python_spelling`: `memsched.run`, `memsched.profile`, `ScheduledChain`, `ScheduledGraph`)."""
    if flag("model") == "model":
        return "model"
    source = _SOURCE.get()
    return "MODEL" if source is None else source.field


def _spec_error(message: str, path: str | None = None) -> InputError:
    """Bad input about the network spec: names `model_field`, and the instance file of a `network_source`
    (else `path`, the factory's file where there is one)."""
    source = _SOURCE.get()
    if source is not None and source.path is not None and flag("model") != "model":
        if path is not None and path not in message:  # the factory's file is no longer the message's path
            message = f"{path}: {message}"
        path = source.path
    return InputError(message, path=path, field=model_field())


def factory_file(where: str) -> Path:
    """The file ``FILE.py`` (`where`, a factory spec's head) names: relative to the working folder, else,
    when relative, to the folder of a `network_source`'s instance file; bad input when neither holds it.
    Imports nothing."""
    path = Path(where)
    if path.is_file():
        return path
    source = _SOURCE.get()
    folder = None if source is None or path.is_absolute() else source.folder
    if folder is not None and folder.resolve() == Path.cwd().resolve():
        folder = None  # the working folder, already looked in
    if folder is not None and (folder / path).is_file():
        return folder / path
    beside = "" if folder is None else f" (nor in {str(folder)!r}, the instance file's folder)"
    raise _spec_error(f"no such file {where!r}{beside}", path=where)


def check_factory_file(spec: str) -> None:
    """Bad input (`factory_file`'s) when `spec` is ``FILE.py:FUNCTION`` and its file is not found; else
    nothing, the file not imported (a zoo name or ``package.module:FUNCTION`` is left to building)."""
    where = str(spec).rpartition(":")[0]
    if is_factory_spec(spec) and where.endswith(".py"):
        factory_file(where)


def is_factory_spec(name: str) -> bool:
    """True when the MODEL text names a factory (``FILE.py:FUNCTION``, ``package.module:FUNCTION``)."""
    head, sep, func = str(name).rpartition(":")
    return bool(sep and head and func.isidentifier())


def spec_beside(spec: str, out: str | Path) -> str:
    """`spec` as the instance file `out` records it: a relative ``FILE.py`` taken from the working folder
    becomes relative to `out`'s folder, where `factory_file` looks beside the file (so the project folder
    can be moved, and run from anywhere); any other spec (a zoo name, ``package.module:FUNCTION``, an
    absolute path, a file not found) is kept as it is."""
    head, _, func = str(spec).rpartition(":")
    if not is_factory_spec(spec) or not head.endswith(".py") or Path(head).is_absolute() or not Path(head).is_file():
        return spec
    folder = Path(out).parent.resolve()
    return f"{Path(os.path.relpath(Path(head).resolve(), folder)).as_posix()}:{func}"


def load_factory(spec: str) -> tuple[Callable[..., Any], str]:
    """The function a spec names and a short name for it (``file.function``)."""
    if not is_factory_spec(spec):
        raise _spec_error(f"{spec!r} is not FILE.py:FUNCTION or package.module:FUNCTION")
    where, _, func = spec.rpartition(":")
    if where.endswith(".py"):
        path = factory_file(where)
        module_name = f"memsched_network_{path.stem}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise _spec_error(f"cannot import {where!r}", path=where)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
        try:
            loader_spec.loader.exec_module(module)
        except (Exception, SystemExit) as err:  # a script's sys.exit() is not memsched's exit
            sys.modules.pop(module_name, None)
            raise _spec_error(f"importing it failed: {type(err).__name__}: {first_line(err)}", path=where) from None
        short = path.stem
    else:
        try:
            module = importlib.import_module(where)
        except (Exception, SystemExit) as err:
            raise _spec_error(f"cannot import module {where!r}: {type(err).__name__}: {first_line(err)}") from None
        short = where.rpartition(".")[2]
    fn = getattr(module, func, None)
    if not callable(fn):
        raise _spec_error(f"{where} has no function {func!r}")
    return fn, f"{short}.{func}"


#: the `FACTORY_KEYS` `build_network` itself takes (placement, and the split of the blocks): passed on only when
#: the factory takes them, never refused
PLACEMENT_KEYS = ("device", "seed", "dtype", "granularity")
#: the `FACTORY_KEYS` the command line's sizing options set (``--batch``, ``--width``, ...): the sizes a factory's
#: network is built at, which a profile's meta records (`factory_defaults` for those left to the factory)
SIZE_KEYS = tuple(k for k in FACTORY_KEYS if k not in PLACEMENT_KEYS)


def refused_sizes(spec: str) -> frozenset[str]:
    """The sizes (`FACTORY_KEYS` but `PLACEMENT_KEYS`) the factory `spec` names takes no argument
    for, which `build_network` refuses when given: none for a function with ``**kwargs``. Imports
    the factory's module (`InputError` as `build_network` for a bad spec)."""
    fn, _ = load_factory(spec)
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return frozenset()
    return frozenset(k for k in FACTORY_KEYS if k not in PLACEMENT_KEYS and k not in params)


def factory_defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    """The defaults of the parameters of the factory `fn` named as a size (`SIZE_KEYS`), as a chain
    file's meta keeps them (`_plain`): the sizes its network is built at when the command line leaves
    them out, which a profile must record as it records the given ones (else a run at other sizes
    would be planned with these costs). Only plain values the network can be built at again by the
    zoo's rules (`_buildable_size`) and that reach the factory unchanged when a run passes them back are
    kept: a default of None, a tensor or a width of 0.5 is not one the run could pass back, nor an image
    size that is not an (h, w) tuple (a given size reaches a factory as one), so it is left out (a run
    still refuses a chain whose stage sizes are another network's: `models.run`)."""
    params = inspect.signature(fn).parameters  # `build_network` has read it already
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    found: dict[str, Any] = {}
    for key in SIZE_KEYS:
        p = params.get(key)
        if p is None or p.kind not in kinds or p.default is inspect.Parameter.empty:
            continue
        if key == "image_size" and not isinstance(p.default, tuple):
            continue
        value = _plain(p.default)
        if _buildable_size(key, value):
            found[key] = value
    return found


def _buildable_size(key: str, value: Any) -> bool:
    """True when `value` (plain: an int, a float, a string) is a size `key` the network can be built at
    by the zoo's rules (`models.zoo.registry`: `SIZE_RANGES`, `parse_image_size`, a dropout in 0..1),
    as a run checks a recorded size (`models.run._check_recorded`) before passing it back."""
    from memsched.models.zoo.registry import SIZE_RANGES, check_sizes, parse_image_size

    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return False
    try:
        if key in SIZE_RANGES:
            check_sizes(**{key: value})
        elif key == "image_size":
            parse_image_size(value)
        elif key == "dropout":
            return not isinstance(value, str) and 0 <= value <= 1
        else:
            return False
    except InputError:
        return False
    return True


def _plain(value: Any) -> Any:
    """A size as a chain file's meta keeps it: an (h, w) image size as "HxW"."""
    return f"{value[0]}x{value[1]}" if isinstance(value, tuple) and len(value) == 2 else value


def build_network(spec: str, *, device: Any = "cpu", seed: int = 0, dtype: Any = None, granularity: str = "block",
                  **sizes: Any) -> Any:
    """Call the factory `spec` names with the given `sizes` (those not None) and return its
    network as a `models.zoo.ZooModel` on `device` (the spec is its ``name``, so a chain file
    profiled from it names it in its meta). `seed` seeds torch before the call; `device`, `seed`
    and `dtype` are passed when the function takes them. A size the function does not take, or
    a function that raises, is bad input naming the option or the spec."""
    import torch

    fn, short = load_factory(spec)
    given = {k: v for k, v in sizes.items() if v is not None}
    unknown = sorted(set(given) - set(FACTORY_KEYS))
    if unknown:
        raise InputError(f"unknown size {unknown[0]!r}", field=unknown[0])
    if "image_size" in given:  # as the command line parses it: (height, width)
        from memsched.models.zoo import parse_image_size

        given["image_size"] = parse_image_size(given["image_size"])
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for key in given:
        if key not in params and not takes_all:
            raise InputError(f"{spec} takes no argument {key!r}", field=flag(key))
    device = torch.device(device)
    placement = {"device": device, "seed": seed, **({} if dtype is None else {"dtype": dtype})}
    kwargs = dict(given, **{k: v for k, v in placement.items() if k in params or takes_all})
    torch.manual_seed(seed)
    try:
        made = fn(**kwargs)
    except InputError:
        raise
    except (Exception, SystemExit) as err:
        raise _spec_error(f"{short}(...) failed: {type(err).__name__}: {first_line(err)}") from None
    from memsched.models.zoo import ZooModel

    if not isinstance(made, (Network, tuple, ZooModel)):
        raise _spec_error(f"{short} returned a {type(made).__name__}; expected (model, example_input[, target"
                          "[, loss_fn]]) or a memsched.Network")
    built = as_zoo_model(made, name=short, what=spec, device=device, dtype=dtype)
    built.name = spec
    # the sizes left to the factory are recorded too, at its defaults: a profile fixes every size it was built at
    built.config.update({"factory": spec, **factory_defaults(fn),
                         **{k: _plain(v) for k, v in given.items() if k != "device"}})
    if granularity != "block":
        from memsched.models.zoo.split import split_model

        built.blocks, built.loss_fn = split_model(built.blocks, built.loss_fn, granularity)
        built.config["granularity"] = granularity
    return built


def as_zoo_model(obj: Any, *, example_input: Any = None, target: Any = None, loss_fn: Any = None,
                 name: str | None = None, what: str = "", device: Any = None, dtype: Any = None) -> Any:
    """`obj` (a `Network`, a tuple, a `ZooModel`, or a model with `example_input`) as a checked
    `models.zoo.ZooModel`. `device` / `dtype`: move the blocks, the input and a tensor target
    there. `what` names the source in messages (a factory spec). Bad input (a model that is not
    blocks, an input that is not a tensor, a target without a loss, a loss that is not callable,
    or that fails the dry run `_dry_run`) raises `InputError`, as does `example_input`, `target` or
    `loss_fn` given for a `Network` or tuple that already holds it (or for a `ZooModel`, which holds all
    three): one of the two would be ignored; what a `Network` or tuple leaves None, they give."""
    import torch
    from memsched.models.zoo import ZooModel

    given = {"example_input": example_input, "target": target, "loss_fn": loss_fn}
    if isinstance(obj, ZooModel):
        _not_twice(given, {key: True for key in given}, "built model")
        return obj
    if isinstance(obj, Network):
        net = obj
    elif isinstance(obj, tuple):
        if not 2 <= len(obj) <= 4:
            raise InputError(f"{_of(what)}a tuple of {len(obj)} items; expected (model, example_input"
                             "[, target[, loss_fn]])", field=model_field())
        net = Network(*obj)
    else:
        net = Network(obj, example_input, target, loss_fn)
    if isinstance(obj, (Network, tuple)):
        kind = "Network" if isinstance(obj, Network) else "tuple"
        _not_twice(given, {key: getattr(net, key) is not None for key in given}, kind)
        net = Network(net.model, *(getattr(net, key) if given[key] is None else given[key] for key in given),
                      name=net.name)  # what the Network leaves None, the keyword arguments give
    blocks = checked_blocks(net.model, what)
    x = net.example_input
    if not isinstance(x, torch.Tensor):
        raise InputError(f"the example input must be a torch.Tensor (a_0), got {type(x).__name__}",
                         field="example_input")
    if net.loss_fn is None and net.target is not None:  # the stand-in loss would ignore it
        raise InputError(f"{_of(what)}a target needs the loss: give loss_fn(output, target) too (without one the "
                         "loss is the mean of the output, which ignores the target)", field="loss_fn")
    loss = checked_loss_fn(net.loss_fn)
    tgt = net.target
    if device is not None:
        from memsched.models.zoo.registry import moved_to

        device = torch.device(device)
        blocks = [moved_to(b, device, dtype) for b in blocks]
        x = x.to(device=device) if dtype is None or not x.is_floating_point() else x.to(device=device, dtype=dtype)
        if isinstance(tgt, torch.Tensor):
            tgt = tgt.to(device=device)
    _dry_run(blocks, x, loss, tgt, what, block_field=model_field())
    label = net.name or name or "custom"
    return ZooModel(blocks, x, loss, tgt, label, {"batch": int(x.shape[0]) if x.dim() else None}, title=label)


def _not_twice(given: dict[str, Any], held: dict[str, bool], kind: str) -> None:
    """A keyword argument of `as_zoo_model` (``example_input``, ``target``, ``loss_fn``: `given`, None when
    not given) that the `kind` of network object passed (a `Network`, a tuple, a built model) already
    holds (`held`) is an `InputError` naming the argument: one of the two would be ignored without a word."""
    for key, value in given.items():
        if value is not None and held[key]:
            raise InputError(f"the {kind} given as the model already holds its {key}; give it once (in the "
                             f"{kind} or as {key}=)", field=key)


def checked_blocks(model: Any, what: str) -> list[Any]:
    """The blocks of `model` (`models.chain.executor.as_blocks`), each checked to be a module."""
    from memsched.models.chain.executor import as_blocks
    from torch import nn

    if isinstance(model, nn.Module) or (isinstance(model, Sequence) and not isinstance(model, (str, bytes))):
        blocks = as_blocks(model)
    else:
        raise InputError(f"{_of(what)}the model must be an nn.Sequential, a list of modules or a module, got "
                         f"{type(model).__name__}", field=model_field())
    if not blocks:
        raise InputError(f"{_of(what)}the model has no blocks", field=model_field())
    for i, b in enumerate(blocks):
        if not isinstance(b, nn.Module):
            raise InputError(f"{_of(what)}block {i} is a {type(b).__name__}, not an nn.Module", field=model_field())
    return blocks


def schedule_and_instance(schedule: Any, instance: Any, schedule_class: type | tuple[type, ...]) -> tuple[Any, Any]:
    """(schedule, instance) of what a trainer is given: a schedule as is, or a solver's result
    (`memsched.Result`, or the registry's `SolveResult`, not a `schedule_class` or one of them) whose schedule
    is taken, and its instance when `instance` is None. A result without a schedule is bad input."""
    raw = getattr(schedule, "raw", schedule)  # a memsched.Result wraps the registry's SolveResult
    if hasattr(raw, "schedule") and not isinstance(raw, schedule_class):
        instance = instance if instance is not None else getattr(schedule, "instance", None)
        schedule = raw.schedule
        if schedule is None:
            raise InputError("the result holds no schedule (infeasible budget?)", field="schedule")
    return schedule, instance


def checked_loss_fn(loss_fn: Any) -> Any:
    """`loss_fn` when it is callable, the stand-in `mean_output_loss` when it is None; anything
    else is bad input naming ``loss_fn``."""
    if loss_fn is None:
        return mean_output_loss
    if not callable(loss_fn):
        raise InputError(f"the loss must be callable as loss_fn(output, target), got {type(loss_fn).__name__}",
                         field="loss_fn")
    return loss_fn


def _dry_run(blocks: list[Any], x: Any, loss_fn: Any, target: Any, what: str, *, block_field: str = "model",
             target_field: str = "loss_fn") -> None:
    """One forward, block by block with autograd on, then the loss with autograd on (a copy of) the
    output: every block returns a tensor without modifying its input in place (the executors refuse
    that: `models.chain.executor.forward_block`) and the loss a scalar that depends on the output
    through autograd and has a gradient path in plain autograd (`_check_blocks_and_loss`), or bad
    input. A failing block, or the one that ends every gradient path, is named under `block_field`,
    a loss that raises under `target_field`, a loss of the wrong kind under ``loss_fn``. The
    modules' buffers (BatchNorm's running statistics) and torch's random generators (dropout draws
    from them) are put back afterwards: a check is not a step."""
    import torch
    from memsched.models.buffers import restore_buffers, snapshot_buffers

    devices = [x.device] if isinstance(x, torch.Tensor) and x.device.type == "cuda" else []
    saved = snapshot_buffers([m for m in (*blocks, loss_fn) if isinstance(m, torch.nn.Module)])
    try:
        with torch.random.fork_rng(devices=devices):
            _check_blocks_and_loss(blocks, x, loss_fn, target, what, block_field=block_field,
                                   target_field=target_field)
    finally:
        restore_buffers(saved)


def _check_blocks_and_loss(blocks: list[Any], x: Any, loss_fn: Any, target: Any, what: str, *, block_field: str,
                           target_field: str) -> None:
    """`_dry_run`'s checks, which may update the modules' buffers. The blocks run one at a time, each on
    its input detached, with autograd on (so at most one block's saved tensors are alive, each
    block's graph dropped with its output's; a block that differentiates inside its forward, a
    gradient penalty, runs as in plain autograd): the input of block i requires grad exactly when a_i
    does in plain autograd (`models.chain.executor.reference_step`: a floating a_0 does, then whatever
    a parameter or a_0 reaches), so the loss of the last output tells whether plain autograd can back-propagate anything
    (`_no_gradient_path`)."""
    import torch
    from memsched.models.chain.executor import InPlaceInputError, forward_block

    a = x
    grad = x.is_floating_point()  # as plain autograd's reference step: a floating input gets a gradient
    stop: int | None = None  # the last block whose input has a gradient and whose output none
    with torch.enable_grad():
        for i, block in enumerate(blocks):
            inp = a.detach().requires_grad_(True) if grad else a.detach()
            try:
                a = forward_block(block, i, inp)
            except InPlaceInputError:
                raise InPlaceInputError(i, block, what=what, field=block_field) from None
            except Exception as err:
                raise InputError(f"{_of(what)}block {i} ({type(block).__name__}) fails on its input "
                                 f"{_shape(inp)}: {type(err).__name__}: {first_line(err)}", field=block_field) from None
            if not isinstance(a, torch.Tensor):
                raise InputError(f"{_of(what)}block {i} ({type(block).__name__}) returns a {type(a).__name__}; a chain "
                                 "passes one tensor from block to block", field=block_field)
            if grad and not a.requires_grad:
                stop = i
            grad = a.requires_grad
    differentiable = a.is_floating_point() or a.is_complex()
    out = a.detach().requires_grad_(True).clone() if differentiable else a.detach()  # not a leaf: in-place allowed
    value = _checked_loss(loss_fn, out, target, what, target_field)
    if differentiable and not value.requires_grad:
        raise InputError(f"{_of(what)}the loss does not depend on the output through autograd (a detached value, an "
                         "argmax, a constant?): there is nothing to back-propagate", field="loss_fn")
    if not grad and differentiable:  # the output has no gradient in plain autograd: has the loss one of its own?
        value = _checked_loss(loss_fn, a.detach().clone(), target, what, target_field)
    if not grad and not value.requires_grad:
        raise _no_gradient_path(blocks, x, stop, what, block_field)


def _checked_loss(loss_fn: Any, out: Any, target: Any, what: str, target_field: str) -> Any:
    """``loss_fn(out, target)`` with autograd on, a scalar tensor, or bad input naming `target_field`
    (the loss fails) or ``loss_fn`` (it returns something else)."""
    import torch

    with torch.enable_grad():
        try:
            value = loss_fn(out, target)
        except Exception as err:
            raise InputError(f"{_of(what)}the loss fails on the output {_shape(out)}: {type(err).__name__}: "
                             f"{first_line(err)}", field=target_field) from None
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise InputError(f"{_of(what)}the loss must return a scalar tensor, got {shape}", field="loss_fn")
    return value


def _no_gradient_path(blocks: list[Any], x: Any, stop: int | None, what: str, field: str) -> InputError:
    """Bad input under `field`: in plain autograd the loss requires no gradient (``loss.backward()`` raises),
    as nothing trainable reaches it. `stop` is the last block whose input has a gradient and whose output
    none (None: no a_i has one, the input is not floating and no block has trainable parameters it uses)."""
    why = "the loss has no gradient path, so plain autograd cannot back-propagate this network"
    if stop is not None:
        return InputError(f"{_of(what)}block {stop} ({type(blocks[stop]).__name__}) returns a tensor without gradient "
                          "(detached, integer, or made under no_grad) and nothing after it has trainable parameters "
                          f"the loss depends on: {why}", field=field)
    return InputError(f"{_of(what)}the input is {str(x.dtype).replace('torch.', '')} (no gradient) and no block has "
                      f"trainable parameters the loss depends on (all frozen, or none): {why}", field=field)



def stage_output_bytes(blocks: list[Any], x: Any) -> list[int]:
    """The bytes of each block's output a_{i+1} (its distinct storages, `models.memory.unique_bytes`, as
    a profile's ``out_size``) in one forward of `blocks` on `x` under no_grad. A check is not a step:
    the RNG state and the modules' buffers are put back. A block that fails raises as it does."""
    import torch
    from memsched.models.buffers import restore_buffers, snapshot_buffers
    from memsched.models.chain.executor import forward_block
    from memsched.models.memory import unique_bytes

    devices = [x.device] if isinstance(x, torch.Tensor) and x.device.type == "cuda" else []
    saved = snapshot_buffers([b for b in blocks if isinstance(b, torch.nn.Module)])
    found: list[int] = []
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            a = x
            for i, block in enumerate(blocks):
                a = forward_block(block, i, a)
                found.append(unique_bytes(a))
    finally:
        restore_buffers(saved)
    return found


def step_input_error(blocks: list[Any], loss_fn: Any, inputs: Any, target: Any, what: str, *,
                     block_field: str = "inputs", target_field: str = "target") -> InputError | None:
    """Why a training step of `blocks` and `loss_fn` on `inputs` and `target` failed, when the
    user's input is the cause: the plain forward (block by block) and the loss (`_dry_run`) run again on
    them, with the RNG state restored afterwards, and their failure is returned as bad input
    naming ``inputs`` (a block fails), ``target`` (the loss fails) or ``loss_fn`` (not a scalar,
    or no gradient). None when they run: the failure was not the input's (a bug, re-raise it)."""
    try:
        _dry_run(blocks, inputs, loss_fn, target, what, block_field=block_field, target_field=target_field)
    except InputError as err:
        return err
    return None


@contextlib.contextmanager
def diagnosed(built: Any) -> Iterator[None]:
    """Inside (profiling or running the network `built`, a `models.zoo.ZooModel`), a failure that
    is not an `InputError` becomes one when the network fails its dry run on its own example input
    and target (`step_input_error`): a block that cannot run at these sizes (BatchNorm at batch 1
    on a 1x1 feature map) is bad input naming the network and its sizes, under ``MODEL`` (``model``
    in Python, `model_field`); any other failure (a bug) is raised as it is. Costs nothing unless something fails."""
    try:
        yield
    except InputError:
        raise
    except Exception as err:
        sizes = ", ".join(f"{k} {_plain(v)}" for k, v in built.config.items() if v is not None and k != "factory")
        what = f"{built.name} with {sizes}" if sizes else str(built.name)
        blocks = list(built.blocks)
        found = step_input_error(blocks, built.loss_fn, built.example_input, built.target, what,
                                 block_field=model_field(), target_field=model_field())
        if found is None:  # the forward runs: does plain autograd fail too (a saved tensor modified in place)?
            found = backward_error(blocks, built.loss_fn, built.example_input, built.target, what, field=model_field())
        if found is None:
            raise
        raise found from err


def backward_error(blocks: list[Any], loss_fn: Any, inputs: Any, target: Any, what: str, *,
                   field: str = "model") -> InputError | None:
    """Why plain autograd cannot train `blocks`: one forward with autograd, the loss and its
    ``backward()``, as a user would run them without memsched; when that fails, bad input under
    `field` naming the first block whose own forward and backward fail (`_failing_block`), or the
    network when none does alone, and the error's first line. None when it runs (the failure
    was not the network's). A check is not a step: the RNG state, the modules' buffers and the
    parameters' gradients (the same tensor objects) are put back."""
    import torch
    from memsched.models.buffers import restore_buffers, snapshot_buffers

    modules = [m for m in (*blocks, loss_fn) if isinstance(m, torch.nn.Module)]
    grads = {p: p.grad for m in modules for p in m.parameters()}
    buffers = snapshot_buffers(modules)
    devices = [inputs.device] if isinstance(inputs, torch.Tensor) and inputs.device.type == "cuda" else []
    try:
        for p in grads:
            p.grad = None
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            try:
                _forward_backward(blocks, inputs, loss_fn, target)
            except Exception as err:
                where = _failing_block(blocks, inputs)
                return InputError(f"{_of(what)}{where or 'the network'} fails in plain autograd (forward and "
                                  f"loss.backward()): {type(err).__name__}: {first_line(err)}", field=field)
    finally:
        for p, g in grads.items():
            p.grad = g
        restore_buffers(buffers)
    return None


def _forward_backward(blocks: list[Any], x: Any, loss_fn: Any, target: Any) -> None:
    """One plain training step without an optimizer: the blocks in turn, the loss, its backward
    (skipped when nothing in it requires a gradient)."""
    a = x
    for block in blocks:
        a = block(a)
    value = loss_fn(a, target)
    if value.requires_grad:
        value.backward()


def _failing_block(blocks: list[Any], x: Any) -> str | None:
    """"block i (Class)" for the first block whose forward and backward fail on their own (its input
    a detached copy of the previous output, gradient of ones on its output), None when none does."""
    import torch

    a = x
    for i, block in enumerate(blocks):
        differentiable = isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex())
        inp = a.detach().clone().requires_grad_(True) if differentiable else a
        try:
            out = block(inp)
            if isinstance(out, torch.Tensor) and out.requires_grad:
                torch.autograd.backward(out, torch.ones_like(out))
        except Exception:
            return f"block {i} ({type(block).__name__})"
        if not isinstance(out, torch.Tensor):
            return None
        a = out.detach()
    return None


def check_step_arguments(trainer: str, blocks: list[Any], inputs: Any, target: Any, own_loss: bool) -> None:
    """The arguments of a trainer's ``step``: a tensor input like the first block's parameters
    (`check_input_like`), and a target only with the trainer's own loss (the stand-in loss, the
    output's mean, would ignore it); else bad input naming ``inputs`` or ``loss_fn``."""
    import torch

    if not isinstance(inputs, torch.Tensor):
        raise InputError(f"the input must be a torch.Tensor, got {type(inputs).__name__}", field="inputs")
    if target is not None and not own_loss:
        raise InputError(f"a target needs the loss: {trainer}(model, schedule, loss_fn=...)", field="loss_fn")
    check_input_like(blocks, inputs, "")


def check_input_like(blocks: list[Any], inputs: Any, what: str) -> None:
    """Cheap checks of a step's input against the first block's parameters: a floating input of
    another floating dtype, or on another device, is bad input naming ``inputs``."""
    first = [p for p in blocks[0].parameters()] if blocks else []
    devices = {p.device for p in first}
    if len(devices) == 1 and inputs.device not in devices:
        raise InputError(f"{_of(what)}the input is on {inputs.device}, the parameters of block 0 on "
                         f"{next(iter(devices))}", field="inputs")
    dtypes = {p.dtype for p in first if p.is_floating_point()}
    if len(dtypes) == 1 and inputs.is_floating_point() and inputs.dtype not in dtypes:
        raise InputError(f"{_of(what)}the input is {str(inputs.dtype).replace('torch.', '')}, the parameters of "
                         f"block 0 {str(next(iter(dtypes))).replace('torch.', '')}", field="inputs")


def _of(what: str) -> str:
    """The prefix naming a network's source in a message ("" for objects given directly)."""
    return f"{what}: " if what else ""


def _shape(t: Any) -> str:
    return f"of shape {tuple(t.shape)}" if hasattr(t, "shape") else f"({type(t).__name__})"
