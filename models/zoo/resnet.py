"""ResNet (He et al. 2016) as a chain: stem, one element per residual block, head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import ClassifierHead, ConvBNReLU


# --------------------------------------------------------------------------- ResNet
class ResNetStem(nn.Module):
    """conv 7x7 stride 2, BN, ReLU, max-pool 3x3 stride 2."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = ConvBNReLU(cin, cout, 7, 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Image (N, 3, H, W) -> a_1: conv 7x7/2 with BN-ReLU, then 3x3/2 max pool (H/4, W/4)."""
        return F.max_pool2d(self.conv(x), 3, 2, 1)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and the identity (or 1x1 projection) shortcut."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}: two 3x3 convs with BN, plus the (projected) shortcut, ReLU."""
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), and the shortcut."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}: 1x1, 3x3, 1x1 convs with BN, plus the (projected) shortcut, ReLU."""
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _projection(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


RESNET_LAYERS = {
    18: (BasicBlock, (2, 2, 2, 2)), 34: (BasicBlock, (3, 4, 6, 3)), 50: (Bottleneck, (3, 4, 6, 3)),
    101: (Bottleneck, (3, 4, 23, 3)), 152: (Bottleneck, (3, 8, 36, 3)),
}


def resnet_blocks(variant: int, *, width: int = 64, classes: int = 1000, in_channels: int = 3,
                  depth: int | None = None) -> list[nn.Module]:
    """ResNet-`variant` (He et al. 2016): stem, one chain element per residual block, head.

    `depth` (optional) caps the number of residual blocks per stage (tiny test models).
    """
    kind, counts = RESNET_LAYERS[variant]
    if depth is not None:
        counts = tuple(min(c, depth) for c in counts)
    blocks: list[nn.Module] = [ResNetStem(in_channels, width)]
    cin = width
    for stage, n in enumerate(counts):
        planes = width * 2 ** stage
        for b in range(n):
            block = kind(cin, planes, 2 if (b == 0 and stage > 0) else 1)
            blocks.append(block)
            cin = planes * kind.expansion
    blocks.append(ClassifierHead(cin, classes))
    return blocks
