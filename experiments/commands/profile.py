"""`memsched profile MODEL [options] -o FILE`: profile a network into a chain file.

MODEL is a zoo network or your own, named by a factory ``FILE.py:FUNCTION`` /
``package.module:FUNCTION`` (`models.network`: the sizing options are its keyword arguments).

The chain file (format memsched.chain/1) holds per-block forward/backward times (ms), sizes of
activations and tapes, and transient overheads (bytes), measured by `models.chain.profiler`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memsched.models.timing import TIMINGS
from memsched.solvers.errors import InputError, first_line, flag
from memsched.solvers.units import MAX_BYTES, MAX_TIME

from ._checks import MAX_BATCH, MAX_SEED, MAX_THREADS, check_outputs, count
from ._common import set_help

ZOO_NAMES = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "densenet121", "inception_v3", "vgg16",
             "vgg19", "mobilenet_v2", "vit_b16", "gpt2", "gpt2_medium", "unet", "fcn8", "lstm")


#: the precisions `--dtype` offers (`models.zoo.registry.DTYPES`, spelled here so that parsing needs no torch)
DTYPES = ("float32", "bfloat16", "float16")


#: the timed repetitions per block (or node) when ``--repeats`` is left out (its parser default is None,
#: so that a command can tell it was given: `refuse_timing`)
PROFILE_REPEATS = 5

#: the options that time the network, without effect under a counted cost model (`refuse_timing`)
TIMING_OPTIONS = ("repeats", "timing")

#: how MODEL's help names what it takes
MODEL_HELP = f"zoo model ({', '.join(ZOO_NAMES)}) or your own: FILE.py:FUNCTION, package.module:FUNCTION"


def check_model(name: str) -> None:
    """A zoo name or a factory spec (`models.network`), else bad input; imports no torch."""
    from memsched.models.network import is_factory_spec

    if name not in ZOO_NAMES and not is_factory_spec(name):
        raise InputError(f"unknown model {name!r} (one of {', '.join(ZOO_NAMES)}, or FILE.py:FUNCTION)",
                         field="MODEL")


def model_inputs(name: str, *, packages: bool = True) -> list[tuple[str, str]]:
    """The source files a MODEL reads, as ``(role, path)`` for `check_outputs`: the FILE of a
    ``FILE.py:FUNCTION`` factory, or for ``package.module:FUNCTION`` the ``.py`` files that the module
    would be on the `sys.path` entries (looked up, not imported: a finder of an installed package
    is not consulted) and, with `packages`, the ``__init__.py`` of each of its parent packages there
    (``a/__init__.py`` and ``a/b/__init__.py`` for ``a.b.c``), which importing the module runs, so that
    no output replaces them; none for a zoo network."""
    from memsched.models.network import is_factory_spec

    if name in ZOO_NAMES or not is_factory_spec(name):
        return []
    where = name.rpartition(":")[0]
    if where.endswith(".py"):
        return [("MODEL", where)]
    parts = where.split(".")
    if not all(part.isidentifier() for part in parts):
        return []
    found: list[tuple[str, str]] = []
    for entry in sys.path:
        root = Path(entry or ".")
        base = root.joinpath(*parts)
        candidates = [base.with_name(base.name + ".py"), base / "__init__.py"]
        if packages:
            candidates += [root.joinpath(*parts[:k], "__init__.py") for k in range(1, len(parts))]
        found.extend(("MODEL", str(candidate)) for candidate in candidates if candidate.is_file())
    return found


def parse_seed(text: str) -> int:
    """An argparse type for ``--seed``: an integer in 0..`MAX_SEED` (a usage error, exit 2, naming
    ``--seed`` otherwise), the range the facade's ``seed=`` accepts."""
    return count(0, MAX_SEED)(text)


def add_model_options(p: argparse.ArgumentParser) -> None:
    """The sizing options shared by `profile` and `run`."""
    p.add_argument("--batch", type=count(1, MAX_BATCH), default=None,
                   help=f"batch size, 1..{MAX_BATCH} (default: the model's)")
    p.add_argument("--image-size", default=None, help="image side in pixels, or HxW (416x608) (image models)")
    p.add_argument("--seq-len", type=count(1, 10**6), default=None,
                   help="sequence length in tokens (gpt2), time steps (lstm)")
    p.add_argument("--width", type=count(1, 10**6), default=None,
                   help="base channels (CNNs, unet: 64), model dimension (gpt2, vit_b16: 768; gpt2_medium: 1024) or "
                        "lstm hidden size (512)")
    p.add_argument("--depth", type=count(1, 10**4), default=None,
                   help="gpt2 layers, unet levels, or a cap on blocks per stage (resnet, densenet)")
    p.add_argument("--vocab", type=count(1, 10**7), default=None, help="gpt2 vocabulary size (50257)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="weights and activations in this precision (default float32; bfloat16 / float16 halve "
                        "every activation, as pure half-precision training does)")
    p.add_argument("--repeats", type=count(1, 10**4), default=None,
                   help=f"timed repetitions per block (median; {PROFILE_REPEATS} when left out)")
    p.add_argument("--seed", type=parse_seed, default=0,
                   help=f"seed for the weights, the batch and dropout (an integer in 0..{MAX_SEED})")
    p.add_argument("--threads", type=count(1, MAX_THREADS), default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--timing", choices=TIMINGS, default=None,
                   help="time each block alone, or each op inside store-all steps (default: in_step on cpu, "
                        "isolated on cuda; in_step needs store-all's memory)")


def add_granularity_option(p: argparse.ArgumentParser) -> None:
    """``--granularity block|layer`` (`models.zoo.split`) for the chain commands (profile, run)."""
    p.add_argument("--granularity", choices=("block", "layer"), default=None,
                   help="chain stages: whole blocks (default), or blocks split into their sequential parts "
                        "(transformer: attention and MLP halves; GPT-2's head: norm and projection)")


def add_cost_option(p: argparse.ArgumentParser, default: str) -> None:
    """``--cost measured|flops|roofline:v100|a100|h100`` (`models.costs`)."""
    p.add_argument("--cost", default=default, metavar="MODEL",
                   help="where times come from: measured (run the network), flops (counted MFLOP) or "
                        "roofline:v100|a100|h100 (ms of a roofline model); the counted ones build the network on "
                        f"fake tensors (exact sizes, nothing allocated). Default: {default}")


def refuse_timing(args: argparse.Namespace, command: str) -> None:
    """Under a counted cost model (``--cost flops``, ``roofline:*``) nothing is timed, so ``--repeats``
    or ``--timing`` given to `command` would be ignored: an `InputError` naming the option. An option
    left out is None (its parser default), never refused."""
    for option in TIMING_OPTIONS:
        if getattr(args, option, None) is not None:
            raise InputError(f"{command} times nothing with a counted cost model (--cost {args.cost}), so this "
                             "option would be ignored", field=f"--{option}")


def counted_sizes(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """`model_sizes`, with the CPU as device when the cost model is counted (fake CPU tensors); then
    ``--repeats`` and ``--timing`` given to `command` are refused (`refuse_timing`)."""
    from memsched.models.costs import parse_cost

    if parse_cost(args.cost).measured:
        return model_sizes(args)
    refuse_timing(args, command)
    if args.device not in (None, "cpu"):
        raise InputError("a counted cost model profiles fake CPU tensors: leave --device out or use cpu",
                         field="--device")
    args.device = "cpu"
    return model_sizes(args)


def model_sizes(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of `models.zoo.build_model` from the parsed options."""
    from memsched.models.zoo import resolve_device

    if args.repeats is not None and args.repeats < 1:
        raise InputError(f"must be at least 1, got {args.repeats}", field="--repeats")
    if args.threads is not None:
        if args.threads < 1:
            raise InputError(f"must be at least 1, got {args.threads}", field="--threads")
        import torch

        torch.set_num_threads(args.threads)
    from memsched.models.zoo import parse_image_size

    return {"batch": args.batch, "image_size": parse_image_size(args.image_size), "seq_len": args.seq_len,
            "width": args.width, "depth": args.depth, "vocab": args.vocab, "device": resolve_device(args.device),
            "seed": args.seed,
            **({"dtype": args.dtype} if getattr(args, "dtype", None) else {}),
            # the chain commands' --granularity (export-graph has its own, op|module, not a size)
            **({"granularity": args.granularity} if getattr(args, "granularity", None) in ("block", "layer")
               else {})}


@contextlib.contextmanager
def fits_in_memory() -> Iterator[None]:
    """Turn the allocator's failure on a network too large for this machine into bad input
    (one line naming the sizing options) instead of an internal error."""
    try:
        yield
    except (MemoryError, RuntimeError) as err:
        text = str(err)
        if not isinstance(err, MemoryError) and "allocate" not in text and "out of memory" not in text:
            raise
        first = first_line(err, 160) or type(err).__name__
        raise InputError(f"the network at these sizes does not fit in memory ({first})",
                         field="--batch/--image-size") from None


#: the options of `add_model_options` that size the network (Python spelling): every size and time of its
#: chain grows with them, so a chain beyond the format's limits is theirs to lower (`within_chain_format`)
SIZING_OPTIONS = ("batch", "image_size", "seq_len", "width", "depth", "vocab")

#: a chain's arrays as `Chain.check` names them (``xbar[1]``), with what each holds, for messages;
#: sizes in bytes (at most `MAX_BYTES`, 1 PiB), times in the profile's unit (at most `MAX_TIME`)
CHAIN_SIZES = {"x": "activation size", "xbar": "tape size", "o_f": "forward overhead", "o_fa": "forward overhead",
               "o_fn": "forward overhead", "o_b": "backward overhead", "o_bh": "backward overhead"}
CHAIN_TIMES = {"u_f": "forward time", "u_fa": "forward time", "u_fn": "forward time", "u_b": "backward time"}

#: a field of `Chain.check`'s range errors, ``xbar[1]``, and the value its message quotes last (``got 1.2e15``)
_ENTRY = re.compile(r"(?P<array>[a-z_]+)\[(?P<index>\d+)\]")
_GOT = re.compile(r", got (?P<value>[^,\s]+)$")

#: torch's failure on a tensor of more than 2**63 bytes (sizes far beyond the chain format's limits)
_OVERFLOW = "size calculation overflowed"

#: how messages word the size limit of a chain file
_SIZE_LIMIT = f"the chain format's limit of 1 PiB ({MAX_BYTES} bytes)"


def sizing_field(args: argparse.Namespace) -> tuple[str, str]:
    """(field, hint) of bad input caused by the network's sizes: the sizing options given with their
    values (``--batch 16777216 --image-size 640``) and "lower --batch or --image-size"; with none given,
    ``MODEL`` (the network at its default sizes) and a hint to give a smaller ``--batch``."""
    given = [name for name in SIZING_OPTIONS if getattr(args, name, None) is not None]
    if not given:
        return "MODEL", f"{args.model} at its default sizes is too large: give a smaller {flag('batch')}"
    field = " ".join(flag(name, getattr(args, name)) for name in given)
    names = [flag(name) for name in given]
    return field, "lower " + (names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}")


def beyond_limit(err: InputError) -> tuple[str, int, float] | None:
    """(array, index, value) when `err` is `Chain.check`'s refusal of one entry of a chain above the format's limit
    (``xbar[1]`` at 1.2e15 bytes > `MAX_BYTES`; ``u_f[3]`` above `MAX_TIME`): the network was profiled, but
    its chain cannot be written. None for any other error (a negative or NaN entry is a bug, not a size)."""
    entry = _ENTRY.fullmatch(err.field or "")
    got = _GOT.search(err.message)
    if entry is None or got is None or err.path is not None:
        return None
    limit = MAX_BYTES if entry["array"] in CHAIN_SIZES else MAX_TIME if entry["array"] in CHAIN_TIMES else None
    try:
        value = float(got["value"])
    except ValueError:
        return None
    return (entry["array"], int(entry["index"]), value) if limit is not None and value > limit else None


@contextlib.contextmanager
def within_chain_format(args: argparse.Namespace, time_unit: str) -> Iterator[None]:
    """Inside (profiling the network), a chain beyond the chain format's limits (a size over `MAX_BYTES`,
    1 PiB, or a time over `MAX_TIME` in `time_unit`: `Chain.check`), or tensors whose bytes overflow
    torch's int64 sizes, becomes bad input under the sizing options that caused it (`sizing_field`),
    one line, instead of naming an internal array (``xbar[1]``) or failing as an internal error."""
    try:
        yield
    except InputError as err:
        found = beyond_limit(err)
        if found is None:
            if _OVERFLOW not in err.message:
                raise
            raise _overflow_error(args, err) from None
        array, index, value = found
        entry = f"{array}[{index}]"
        field, hint = sizing_field(args)
        if array in CHAIN_SIZES:
            what = f"{CHAIN_SIZES[array]} {entry} = {int(value)} bytes exceeds {_SIZE_LIMIT}"
        else:
            what = (f"{CHAIN_TIMES[array]} {entry} = {value:g} {time_unit} exceeds the chain format's limit of "
                    f"{MAX_TIME:g} {time_unit}")
        raise InputError(f"{what}; {hint}", field=field) from None
    except RuntimeError as err:
        if _OVERFLOW not in str(err):
            raise
        raise _overflow_error(args, err) from None


def _overflow_error(args: argparse.Namespace, err: BaseException) -> InputError:
    """Bad input for tensors whose bytes overflow torch's int64 sizes (`_OVERFLOW`), under `sizing_field`,
    quoting torch's message (also where `models.network.diagnosed` wrapped it: ``...: RuntimeError: ...``)."""
    field, hint = sizing_field(args)
    text = first_line(err, 1000)
    quoted = text[text.rfind("RuntimeError: ") + len("RuntimeError: "):] if "RuntimeError: " in text else text
    return InputError(f"a tensor's size overflows 64 bits, far beyond {_SIZE_LIMIT} ({quoted[:160]}); {hint}",
                      field=field)


def checked_chain_file(chain: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The chain file (memsched.chain/1, a JSON object) of `chain`, checked as its loader checks it
    (`Chain.from_dict`) before anything is written: every size in bytes, and their sum (``input_size``
    and each stage's and the loss's sizes, `SIZE_FIELDS`), at most `MAX_BYTES` (1 PiB). A sum above it
    is bad input under the sizing options (`sizing_field`), not a file that no command could load."""
    from memsched.solvers.chain import Chain
    from memsched.solvers.chain.instance import SIZE_FIELDS

    data = chain.to_dict()
    total = (data["input_size"] + sum(stage[f] for stage in data["stages"] for f in SIZE_FIELDS)
             + data["loss"]["bwd_overhead"])
    if total > MAX_BYTES:
        field, hint = sizing_field(args)
        raise InputError(f"the chain's sizes add up to {total} bytes, more than {_SIZE_LIMIT}; {hint}", field=field)
    Chain.from_dict(data, path=args.output or "<stdout>")  # what is written loads again
    return data


def _import_models() -> None:
    """Import torch (seconds), or bad input where it is not installed. A Ctrl-C (SIGTERM, SIGHUP) meanwhile
    is raised once the import is done (`cli.interrupts_deferred`): raised inside torch's C++ initialisation,
    it was swallowed (the command ran on) or aborted the process (exit 134) instead of exit 130."""
    from memsched.experiments.cli import interrupts_deferred

    try:
        with interrupts_deferred():
            import torch  # noqa: F401
    except ImportError:
        raise InputError("this command needs PyTorch (pip install torch)") from None


#: the description of ``memsched profile --help`` (the rules in full: docs/cli.md; the implementation: this
#: module's docstring). Lines of at most 79 characters, kept as they are.
DESCRIPTION = """\
Profile a network block by block into a chain file (format memsched.chain/1):
per-block forward/backward times (ms), sizes of activations and tapes, and
transient overheads (bytes). MODEL is a zoo network or your own factory,
FILE.py:FUNCTION or package.module:FUNCTION (the sizing options given are its
keyword arguments). Needs PyTorch.
Exit: 0; 2 bad input (an unknown model, bad sizes).
Details: docs/cli.md, "memsched profile".
"""


def register(subparsers: Any) -> None:
    """Add the ``profile`` subcommand (zoo network -> chain file, memsched.chain/1)."""
    p = subparsers.add_parser("profile", help="profile a zoo network into a chain file (memsched.chain/1)",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    add_model_options(p)
    add_granularity_option(p)
    add_cost_option(p, "measured")
    set_help(p, "--repeats", f"with --cost measured: timed repetitions per block (median; {PROFILE_REPEATS} when left "
             "out); refused with a counted --cost (flops, roofline:*), which times nothing")
    set_help(p, "--timing", "with --cost measured: time each block alone (isolated), or each op inside store-all "
             "steps (in_step; default: in_step on cpu, isolated on cuda; in_step needs store-all's memory); refused "
             "with a counted --cost")
    p.add_argument("--early-release", action="store_true",
                   help="also measure each backward B(i) releasing delta_{i+1} and its output early, as one "
                        "loss.backward() does (bwd_overhead_released: solvers charge it, `memsched run` executes so)")
    p.add_argument("-o", "--output", default=None, help="chain file to write (default: print it on stdout)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Profile the model (u_f, u_b, x, xbar per stage) and write the chain file; exit 0, 2 on bad input."""
    check_model(args.model)  # before importing torch (seconds)
    check_outputs([("--output", args.output)], model_inputs(args.model))  # not the factory's source file
    _import_models()
    from memsched.models.chain.profiler import profile_model, save_profiled
    from memsched.models.costs import parse_cost
    from memsched.models.run import default_clock
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.units import format_bytes

    with within_chain_format(args, parse_cost(args.cost).unit), fits_in_memory():
        sizes = counted_sizes(args, "profile")  # sets --threads, which the clock depends on
        repeats = PROFILE_REPEATS if args.repeats is None else args.repeats
        # written here, once checked (`checked_chain_file`): nothing is written beyond the format's limits
        chain, _ = profile_model(args.model, repeats=repeats, out=None, timing=args.timing,
                                 cost=args.cost, release=args.early_release, clock=default_clock(), **sizes)
    data = checked_chain_file(chain, args)
    if args.output is None:
        json.dump(data, sys.stdout, indent=1)
        print()
    else:
        save_profiled(chain, args.output)
        unit = chain.meta.get("units", {}).get("time", "ms")
        print(f"{chain.name}: {chain.length} stages, forward+backward {chain.total_time():.2f} {unit} "
              f"({chain.meta.get('cost', 'measured')}), "
              f"store-all peak {format_bytes(reference_peak(chain))}, on {chain.meta.get('device')} -> {args.output}")
    return 0
