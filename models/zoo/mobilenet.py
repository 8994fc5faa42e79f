"""MobileNet v2 (Sandler et al. 2018) as a chain: stem, one element per inverted residual block,
the last 1x1 convolution, head. 3,504,872 parameters at width 64 (multiplier 1.0), 1000 classes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# (expansion t, channels c, repeats n, first stride s), Table 2 of the paper
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))


class ConvBNReLU6(nn.Sequential):
    """conv (no bias, optionally depthwise) -> batch norm -> ReLU6 (or nothing when `act` is False)."""

    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1,
                 act: bool = True) -> None:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                                   nn.BatchNorm2d(cout)]
        if act:
            layers.append(nn.ReLU6())
        super().__init__(*layers)


class InvertedResidual(nn.Module):
    """1x1 expand (t x), 3x3 depthwise (stride s), 1x1 linear projection; identity shortcut when
    the stride is 1 and the channels agree."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [] if expand == 1 else [ConvBNReLU6(cin, hidden, 1)]
        layers += [ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden), ConvBNReLU6(hidden, cout, 1, act=False)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}: expand, depthwise conv, project; the input added back when shapes match."""
        y = self.conv(x)
        return x + y if self.residual else y


class MobileNetHead(nn.Module):
    """Global average pool, dropout, linear layer to `classes` logits."""

    def __init__(self, cin: int, classes: int, dropout: float) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Feature maps (N, C, H, W) -> logits: global average pool, dropout, linear."""
        return self.fc(self.drop(F.adaptive_avg_pool2d(x, 1).flatten(1)))


def _channels(c: int, width: int) -> int:
    """c * width / 64 rounded to a multiple of 8 (the paper's rounding), never down by more than 10%."""
    v = c * width / 64
    r = max(8, int(v + 4) // 8 * 8)
    return r + 8 if r < 0.9 * v else r


def mobilenet_v2_blocks(*, width: int = 64, classes: int = 1000, in_channels: int = 3,
                        dropout: float = 0.2) -> list[nn.Module]:
    """MobileNet v2 with width multiplier width/64; the last convolution keeps 1280 channels
    below multiplier 1 (as in the paper)."""
    cin = _channels(32, width)
    blocks: list[nn.Module] = [ConvBNReLU6(in_channels, cin, 3, 2)]
    for t, c, n, s in MOBILENET_V2:
        cout = _channels(c, width)
        for k in range(n):
            blocks.append(InvertedResidual(cin, cout, s if k == 0 else 1, t))
            cin = cout
    last = _channels(1280, max(width, 64))
    blocks.append(ConvBNReLU6(cin, last, 1))
    blocks.append(MobileNetHead(last, classes, dropout))
    return blocks
