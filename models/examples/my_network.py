"""Your own network for memsched: a small convolutional classifier as a chain of blocks.

    memsched profile memsched.models.examples.my_network:build --batch 16 -o my_network.json
    memsched run memsched.models.examples.my_network:build --budget 60% --solver rotor

(a copy of this file anywhere: ``memsched run path/to/my_network.py:build ...``).

A factory returns ``(model, example_input, target, loss_fn)`` (or a `memsched.Network`); the
sizing options given on the command line (``--batch``, ``--image-size``, ``--width``,
``--depth``) arrive as keyword arguments of the same names (``image_size`` as (height, width)).
Each child of the ``nn.Sequential`` is one stage of the chain: what a block keeps inside (a
residual connection, several layers) stays inside it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def build(batch: int = 8, image_size: tuple[int, int] = (64, 64), width: int = 16, depth: int = 8,
          classes: int = 10) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor, object]:
    """A strided stem (half the resolution), `depth` convolution blocks of `width` channels,
    then a pooled linear head; a random batch and labels."""
    blocks: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, width, 3, stride=2, padding=1), nn.ReLU())]
    blocks += [nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU()) for _ in range(depth)]
    blocks.append(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(width, classes)))
    x = torch.randn(batch, 3, *image_size)
    y = torch.randint(0, classes, (batch,))
    return nn.Sequential(*blocks), x, y, F.cross_entropy
