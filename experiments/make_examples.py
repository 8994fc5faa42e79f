"""Regenerate the example chain files in solvers/data/examples (python -m memsched.experiments.make_examples)."""

from __future__ import annotations

from pathlib import Path

from memsched.experiments.script_args import ScriptParser
from memsched.solvers.chain.generate import random_chain
from memsched.solvers.chain.instance import Chain

EXAMPLES = Path(__file__).resolve().parent.parent / "solvers" / "data" / "examples"


def tiny_chain() -> Chain:
    """Four hand-made stages with small integer sizes: easy to check by hand."""
    fields = ("name", "fwd_time", "bwd_time", "out_size", "tape_size", "fwd_overhead", "bwd_overhead")
    rows = [("conv1", 1.0, 2.0, 4, 8, 0, 0), ("conv2", 2.0, 4.0, 2, 6, 1, 1),
            ("conv3", 1.0, 2.0, 2, 4, 0, 2), ("fc", 0.5, 1.0, 1, 2, 0, 0)]
    stages = [dict(zip(fields, row)) for row in rows]
    return Chain.from_stages(4, stages, {"bwd_time": 0.5, "bwd_overhead": 0}, name="tiny",
                             meta={"units": {"time": "ms", "memory": "bytes"}, "source": "hand-made"})


def cnn_like_chain() -> Chain:
    """A 12-stage CNN-shaped chain (activations shrink, times grow with depth), sizes in bytes
    of a batch of 32 224x224 images in float32; hand-made, not profiled."""
    stages = []
    channels, side = 64, 112
    for i in range(12):
        if i in (3, 6, 9):
            channels, side = channels * 2, side // 2
        out = 32 * channels * side * side * 4
        stages.append({"name": f"block{i}", "fwd_time": 2.0 + 0.1 * i, "bwd_time": 4.0 + 0.2 * i,
                       "out_size": out, "tape_size": 3 * out, "fwd_overhead": out // 4, "bwd_overhead": out // 2})
    return Chain.from_stages(32 * 3 * 224 * 224 * 4, stages, {"bwd_time": 0.2, "bwd_overhead": 0},
                             name="cnn12", meta={"units": {"time": "ms", "memory": "bytes"}, "source": "hand-made"})


def main(argv: list[str] | None = None) -> int:
    """Write the example chains (tiny, cnn12, homogeneous20, random10, random30) to solvers/data/examples; print each
    path; exit 0. It takes no arguments: any is a usage error (one line on stderr, exit 2) before a file is written."""
    ScriptParser(description=__doc__).parse_args(argv)
    EXAMPLES.mkdir(parents=True, exist_ok=True)
    chains = [
        tiny_chain(),
        cnn_like_chain(),
        Chain.homogeneous(20, u_f=1.0, u_b=2.0, x=1_000_000, xbar=2_000_000, name="homogeneous20"),
        random_chain(10, seed=1, size_range=(1_000_000, 8_000_000), name="random10"),
        random_chain(30, seed=2, size_range=(1_000_000, 8_000_000), overhead=0.3, name="random30"),
    ]
    for chain in chains:
        chain.save(EXAMPLES / f"{chain.name}.json")
        print(EXAMPLES / f"{chain.name}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
