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
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memsched.solvers.errors import InputError, first_line

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
    p.add_argument("--timing", choices=("isolated", "in_step"), default=None,
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


def register(subparsers: Any) -> None:
    """Add the ``profile`` subcommand (zoo network -> chain file, memsched.chain/1)."""
    p = subparsers.add_parser("profile", help="profile a zoo network into a chain file (memsched.chain/1)",
                              description=__doc__)
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
    from memsched.models.chain.profiler import profile_model
    from memsched.models.run import default_clock
    from memsched.solvers.chain import reference_peak
    from memsched.solvers.units import format_bytes

    with fits_in_memory():
        sizes = counted_sizes(args, "profile")  # sets --threads, which the clock depends on
        repeats = PROFILE_REPEATS if args.repeats is None else args.repeats
        chain, _ = profile_model(args.model, repeats=repeats, out=args.output, timing=args.timing,
                                 cost=args.cost, release=args.early_release, clock=default_clock(), **sizes)
    if args.output is None:
        json.dump(chain.to_dict(), sys.stdout, indent=1)
        print()
    else:
        unit = chain.meta.get("units", {}).get("time", "ms")
        print(f"{chain.name}: {chain.length} stages, forward+backward {chain.total_time():.2f} {unit} "
              f"({chain.meta.get('cost', 'measured')}), "
              f"store-all peak {format_bytes(reference_peak(chain))}, on {chain.meta.get('device')} -> {args.output}")
    return 0
