"""DenseNet-121 (Huang et al. 2017) as a chain: one element per dense layer and transition."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import ClassifierHead
from .resnet import ResNetStem


# --------------------------------------------------------------------------- DenseNet-121
class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1 (bn_size*k) - BN-ReLU-conv3x3 (k); returns cat([x, new]) (C + k channels)."""

    def __init__(self, cin: int, growth: int, bn_size: int = 4) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}: BN-ReLU-conv 1x1, BN-ReLU-conv 3x3, concatenated to the input (channels grow by the growth
        rate)."""
        new = self.conv1(F.relu(self.bn1(x)))
        new = self.conv2(F.relu(self.bn2(new)))
        return torch.cat([x, new], 1)


class Transition(nn.Module):
    """BN-ReLU-conv1x1 halving the channels, then 2x2 average pool."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}: BN-ReLU-conv 1x1 then 2x2 average pool (halves H and W)."""
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


def densenet121_blocks(*, width: int = 64, classes: int = 1000, in_channels: int = 3,
                       depth: int | None = None) -> list[nn.Module]:
    """DenseNet-121 (Huang et al. 2017): stem, one chain element per dense layer and transition.

    Growth rate 32 * width / 64, initial features 2x that; `depth` caps layers per dense block.
    """
    growth = max(1, 32 * width // 64)
    config = (6, 12, 24, 16)
    if depth is not None:
        config = tuple(min(c, depth) for c in config)
    c = 2 * growth
    blocks: list[nn.Module] = [ResNetStem(in_channels, c)]
    for b, n in enumerate(config):
        for _ in range(n):
            blocks.append(DenseLayer(c, growth))
            c += growth
        if b + 1 < len(config):
            blocks.append(Transition(c, c // 2))
            c //= 2
    blocks.append(ClassifierHead(c, classes, pre=nn.Sequential(nn.BatchNorm2d(c), nn.ReLU())))
    return blocks
