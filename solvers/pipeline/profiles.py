"""Synthetic but realistic pipeline profiles (VGG-16, ResNet-50, a GPT-style transformer); random
and scaled chains are in `solvers.pipeline.generate`.

Times come from floating-point operation counts at a nominal throughput (``tflops``, default
10 TFLOP/s, backward = 2 x forward), sizes from fp32 tensor shapes (4 bytes per element) for a
micro-batch of ``batch`` samples. The times are in ms (``time_unit = 1e-3``), as in PipeDream.
They are models, not measurements: use them to compare solvers, not to predict a GPU.
"""

from __future__ import annotations

import numpy as np

from .instance import Pipeline

BYTES = 4


def _build(name: str, layers: list[tuple[str, float, int, int]], input_size: int, tflops: float) -> Pipeline:
    """layers: (name, forward flops, output elements, parameter count) for the whole micro-batch."""
    fwd = np.array([fl / (tflops * 1e12) * 1e3 for _, fl, _, _ in layers], dtype=float)
    act = np.array([BYTES * o for _, _, o, _ in layers], dtype=np.int64)
    params = np.array([BYTES * p for _, _, _, p in layers], dtype=np.int64)
    return Pipeline(fwd=fwd, bwd=2 * fwd, act=act, params=params, input_size=BYTES * input_size, name=name,
                    layer_names=[n for n, _, _, _ in layers], time_unit=1e-3,
                    meta={"source": f"synthetic {name} (solvers.pipeline.profiles)"})


def vgg16(batch: int = 32, image: int = 224, tflops: float = 10.0) -> Pipeline:
    """VGG-16: 13 conv(+ReLU) layers, 5 max-pools, 3 fully connected layers (21 layers)."""
    cfg: list[int | str] = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers: list[tuple[str, float, int, int]] = []
    c, h = 3, image
    for k, v in enumerate(cfg):
        if isinstance(v, str):  # "M": a max-pool
            h //= 2
            layers.append((f"pool{k}", batch * c * h * h * 4.0, batch * c * h * h, 0))
        else:
            layers.append((f"conv{k}", 2.0 * batch * c * v * 9 * h * h, batch * v * h * h, (c * 9 + 1) * v))
            c = v
    for k, (a, b) in enumerate([(c * h * h, 4096), (4096, 4096), (4096, 1000)]):
        layers.append((f"fc{k}", 2.0 * batch * a * b, batch * b, (a + 1) * b))
    return _build(f"vgg16-b{batch}", layers, batch * 3 * image * image, tflops)


def resnet50(batch: int = 32, image: int = 224, tflops: float = 10.0) -> Pipeline:
    """ResNet-50 at bottleneck-block granularity: stem, 16 blocks, head (18 layers)."""
    h = image // 2
    layers = [("stem", 2.0 * batch * 3 * 64 * 49 * h * h, batch * 64 * (h // 2) ** 2, 3 * 64 * 49)]
    h //= 2
    cin = 64
    for stage, (width, blocks) in enumerate(zip([64, 128, 256, 512], [3, 4, 6, 3])):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            ho = h // stride
            out = 4 * width
            flops = 2.0 * batch * (cin * width * h * h + width * width * 9 * ho * ho + width * out * ho * ho)
            params = cin * width + 9 * width * width + width * out
            if b == 0:
                flops += 2.0 * batch * cin * out * ho * ho
                params += cin * out
            layers.append((f"layer{stage + 1}.{b}", flops, batch * out * ho * ho, params))
            cin, h = out, ho
    layers.append(("head", 2.0 * batch * cin * 1000 + batch * cin * h * h, batch * 1000, (cin + 1) * 1000))
    return _build(f"resnet50-b{batch}", layers, batch * 3 * image * image, tflops)


def transformer(layers: int = 24, hidden: int = 1024, seq: int = 1024, batch: int = 4, vocab: int = 50257,
                tflops: float = 10.0) -> Pipeline:
    """GPT-style decoder: embedding, ``layers`` blocks (12 h^2 weights each), LM head."""
    tokens = batch * seq
    block_flops = 24.0 * tokens * hidden**2 + 4.0 * batch * seq**2 * hidden
    out = [("embed", 2.0 * tokens * hidden, tokens * hidden, (vocab + seq) * hidden)]
    out += [(f"block{k}", block_flops, tokens * hidden, 12 * hidden**2 + 13 * hidden) for k in range(layers)]
    out.append(("lm_head", 2.0 * tokens * hidden * vocab, tokens * vocab, hidden * vocab))
    return _build(f"gpt-{layers}x{hidden}-b{batch}", out, tokens, tflops)
