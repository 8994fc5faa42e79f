"""Weights per stage for the paper-size pipeline instances (figure ``paper_pipeline``).

    python -m memsched.experiments.paper_instances CHAIN.json [CHAIN.json ...]

A chain file written by ``memsched profile`` records only the network's total weight bytes
(``meta.parameter_bytes``); the pipeline problem (docs/pipeline.md) charges each device the
weights W_l of its layers, read from ``meta.param_sizes`` (one byte count per stage, 0 without
it). This rebuilds the zoo network named in the file's meta (``meta.model`` and its sizes) on
fake tensors (`models.costs.shape_exact_model`: nothing allocated) and writes, per block, the
bytes of the parameters that block holds (a parameter shared by several blocks is counted once,
in the first), checking that they sum to ``meta.parameter_bytes`` and that the blocks match the
stages. The file is rewritten in place (atomically) with ``meta.param_sizes`` added; nothing else
changes. A file that is missing, not JSON or not a chain file of a zoo network is one line on stderr
naming it and exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from memsched.experiments.script_args import ScriptParser
from memsched.solvers.errors import InputError, first_line
from memsched.solvers.jsonio import write_atomic

#: sizes of `models.zoo.build_model` that a profiled chain's meta may carry
_SIZES = ("batch", "image_size", "seq_len", "width", "depth", "classes", "vocab", "dropout")


def param_sizes(meta: dict[str, Any]) -> list[int]:
    """Bytes of weights held by each block of the zoo network that ``meta`` describes (``model``
    plus its sizes), each parameter counted once, in the first block that holds it."""
    from memsched.models.costs import shape_exact_model
    from memsched.models.zoo import build_model

    sizes = {k: meta[k] for k in _SIZES if meta.get(k) is not None}
    if isinstance(sizes.get("image_size"), list):
        sizes["image_size"] = tuple(sizes["image_size"])
    seen: set[int] = set()
    out = []
    with shape_exact_model():
        model = build_model(str(meta["model"]), device="cpu", **sizes)
        for block in model.blocks:
            total = 0
            for p in block.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    total += p.numel() * p.element_size()
            out.append(int(total))
    return out


def read_chain(path: Path) -> dict[str, Any]:
    """The JSON object of the chain file at `path`, with a ``meta`` object naming the zoo network
    (``meta.model``) and a ``stages`` list; an unreadable file, bad JSON or another shape is an
    `InputError` naming `path`."""
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise InputError(f"cannot read ({err.strerror or err})", path=str(path)) from None
    except ValueError as err:  # json.JSONDecodeError, or text that is not UTF-8
        raise InputError(f"not JSON ({first_line(err)})", path=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("stages"), list):
        raise InputError("not a chain file (no stages list; written by `memsched profile`?)", path=str(path))
    meta = data.get("meta")
    if not isinstance(meta, dict) or not meta.get("model"):
        raise InputError("no meta.model: the zoo network to rebuild is not named", path=str(path))
    return data


def add_param_sizes(path: Path) -> list[int]:
    """Add ``meta.param_sizes`` to the chain file at `path` (rewritten in place, atomically: a failure
    leaves it as it was); returns them. Raises `InputError` (a ValueError) naming `path` when the file
    is not a chain file (`read_chain`), its network cannot be rebuilt, the blocks do not match the stages
    or the bytes do not sum to ``meta.parameter_bytes``."""
    data = read_chain(path)
    meta = data["meta"]
    try:
        sizes = param_sizes(meta)
    except InputError as err:
        raise InputError(f"meta: {err}", path=str(path)) from None
    except (KeyError, TypeError, ValueError) as err:  # a size of the wrong kind in meta
        raise InputError(f"cannot rebuild meta.model {meta['model']!r} ({first_line(err)})", path=str(path)) from None
    if len(sizes) != len(data["stages"]):
        raise InputError(f"{len(sizes)} blocks but {len(data['stages'])} stages", path=str(path))
    try:
        total = int(meta["parameter_bytes"]) if "parameter_bytes" in meta else None
    except (TypeError, ValueError):
        raise InputError(f"meta.parameter_bytes is not a number: {meta['parameter_bytes']!r}", path=str(path)) from None
    if total is not None and sum(sizes) != total:
        raise InputError(f"blocks hold {sum(sizes)} bytes of weights, meta says {meta['parameter_bytes']}",
                         path=str(path))
    meta["param_sizes"] = sizes
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=2) + "\n"))
    return sizes


def main(argv: list[str] | None = None) -> int:
    """Add per-stage weights to each chain file given; exit 0, 2 on a file that is not a chain file of a zoo
    network (one line naming it; the files before it are rewritten, it and those after are not), 130 on
    Ctrl-C (one line; each file is rewritten whole or not at all)."""
    from memsched.experiments.benchtable import guarded

    parser = ScriptParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="chain files written by `memsched profile`")
    args = parser.parse_args(argv)
    return guarded("paper_instances", lambda: _main(args),
                   interrupted="interrupted: the files named before it are rewritten, the others as they were")


def _main(args: argparse.Namespace) -> int:
    """The body of `main`: each file of `args.files` given its ``meta.param_sizes`` and said so."""
    for f in args.files:
        sizes = add_param_sizes(f)
        print(f"{f}: {len(sizes)} stages, {sum(sizes) / 1e6:.1f} MB of weights")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
