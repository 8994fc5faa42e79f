"""Zoo networks as layer DAGs for `dag_runner`: a ResNet of `memsched.models.zoo.resnet` cut
into its operations, so that a stage boundary can fall inside a residual block and carry the
block's main path and its shortcut (two tensors).

`ModuleDag` is the runner's network interface (``spec``, ``layers``, ``node``, ``forward``)
over arbitrary modules: node k applies ``layers[str(k)]`` to the outputs of its inputs.
`resnet_dag` takes the zoo's ResNet blocks and splits every residual block into
conv1, bn1, relu, conv2, bn2, the projection shortcut when there is one, and add + ReLU; the
stem into conv, bn, relu, max-pool; the head is one node. Batch norm runs in eval mode (its
running statistics), so that a batch split into micro-batches gives the gradients of the whole
batch, which the runner checks against one process.
"""

from __future__ import annotations

import torch
from torch import nn

from ..zoo.resnet import BasicBlock, Bottleneck, ResNetStem, resnet_blocks


class Add(nn.Module):
    """Sum of the inputs (saves nothing for backward)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        """x_1 + ... + x_k."""
        out = xs[0]
        for t in xs[1:]:
            out = out + t
        return out


class AddReLU(Add):
    """ReLU of the sum of the inputs (a residual block's output)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        """relu(x_1 + ... + x_k)."""
        return torch.relu(super().forward(*xs))


class MaxPool(nn.Module):
    """The ResNet stem's 3x3 stride-2 max pool."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """max_pool2d(x, 3, 2, 1)."""
        return nn.functional.max_pool2d(x, 3, 2, 1)


class ModuleDag(nn.Module):
    """A network given as nodes (name, module, inputs) in a topological order; input -1 is the
    network's input, the last node its output."""

    def __init__(self, nodes: list[tuple[str, nn.Module, list[int]]]):
        super().__init__()
        self.spec = [(name, list(ins)) for name, _, ins in nodes]
        self.layers = nn.ModuleDict({str(k): mod for k, (_, mod, _) in enumerate(nodes)})

    def node(self, k: int, inputs: list[torch.Tensor]) -> torch.Tensor:
        """Node k applied to its inputs."""
        return self.layers[str(k)](*inputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every node on one device: input x -> output of the last node."""
        env = {-1: x}
        for k, (_, ins) in enumerate(self.spec):
            env[k] = self.node(k, [env[i] for i in ins])
        return env[len(self.spec) - 1]


def _block_nodes(block: nn.Module, x: int, start: int) -> list[tuple[str, nn.Module, list[int]]]:
    """The nodes of one residual block reading node x; the new nodes are numbered from `start`."""
    out: list[tuple[str, nn.Module, list[int]]] = []

    def add(name: str, mod: nn.Module, ins: list[int]) -> int:
        out.append((name, mod, ins))
        return start + len(out) - 1

    convs = [(block.conv1, block.bn1), (block.conv2, block.bn2)]
    if isinstance(block, Bottleneck):
        convs.append((block.conv3, block.bn3))
    h = x
    for n, (conv, bn) in enumerate(convs):
        h = add(f"conv{n + 1}", conv, [h])
        h = add(f"bn{n + 1}", bn, [h])
        if n < len(convs) - 1:
            h = add(f"relu{n + 1}", nn.ReLU(), [h])
    short = x if isinstance(block.shortcut, nn.Identity) else add("shortcut", block.shortcut, [x])
    add("add_relu", AddReLU(), [h, short])
    return out


def resnet_dag(variant: int = 18, *, width: int = 8, classes: int = 10, in_channels: int = 3, depth: int | None = 1,
               seed: int = 0) -> ModuleDag:
    """The zoo's ResNet-`variant` (``depth`` residual blocks per stage at most) as a `ModuleDag`
    of its operations (module docstring), batch norm in eval mode, weights from `seed`."""
    torch.manual_seed(seed)
    blocks = resnet_blocks(variant, width=width, classes=classes, in_channels=in_channels, depth=depth)
    nodes: list[tuple[str, nn.Module, list[int]]] = []
    for b in blocks:
        x = len(nodes) - 1
        if isinstance(b, ResNetStem):
            conv, bn, relu = b.conv
            nodes += [("stem.conv", conv, [x]), ("stem.bn", bn, [x + 1]), ("stem.relu", relu, [x + 2]),
                      ("stem.pool", MaxPool(), [x + 3])]
        elif isinstance(b, (BasicBlock, Bottleneck)):
            nodes += _block_nodes(b, x, len(nodes))
        else:
            nodes.append(("head", b, [x]))
    return ModuleDag(nodes).eval()


def sample_shape(in_channels: int = 3, size: int = 32) -> tuple[int, ...]:
    """The input shape (without the batch) of `resnet_dag` images: (C, H, W)."""
    return (in_channels, size, size)


__all__ = ["Add", "AddReLU", "MaxPool", "ModuleDag", "resnet_dag", "sample_shape"]

