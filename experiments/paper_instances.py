"""Weights per stage for the paper-size pipeline instances (figure ``paper_pipeline``).

    python -m memsched.experiments.paper_instances CHAIN.json [CHAIN.json ...]

A chain file written by ``memsched profile`` records only the network's total weight bytes
(``meta.parameter_bytes``); the pipeline problem (docs/pipeline.md) charges each device the
weights W_l of its layers, read from ``meta.param_sizes`` (one byte count per stage, 0 without
it). This rebuilds the zoo network named in the file's meta (``meta.model`` and its sizes) on
fake tensors (`models.costs.shape_exact_model`: nothing allocated) and writes, per block, the
bytes of the parameters that block holds (a parameter shared by several blocks is counted once,
in the first), checking that they sum to ``meta.parameter_bytes`` and that the blocks match the
stages. The file is rewritten in place with ``meta.param_sizes`` added; nothing else changes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

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


def add_param_sizes(path: Path) -> list[int]:
    """Add ``meta.param_sizes`` to the chain file at `path` (rewritten in place); returns them.
    Raises ValueError when the blocks do not match the stages or the bytes do not sum to
    ``meta.parameter_bytes``."""
    data = json.loads(path.read_text())
    meta = data["meta"]
    sizes = param_sizes(meta)
    if len(sizes) != len(data["stages"]):
        raise ValueError(f"{path}: {len(sizes)} blocks but {len(data['stages'])} stages")
    if "parameter_bytes" in meta and sum(sizes) != int(meta["parameter_bytes"]):
        raise ValueError(f"{path}: blocks hold {sum(sizes)} bytes of weights, meta says {meta['parameter_bytes']}")
    meta["param_sizes"] = sizes
    path.write_text(json.dumps(data, indent=2) + "\n")
    return sizes


def main(argv: list[str] | None = None) -> int:
    """Add per-stage weights to each chain file given; exit 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="chain files written by `memsched profile`")
    args = parser.parse_args(argv)
    for f in args.files:
        sizes = add_param_sizes(f)
        print(f"{f}: {len(sizes)} stages, {sum(sizes) / 1e6:.1f} MB of weights")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
