"""FCN-8s (Long, Shelhamer & Darrell 2015) on VGG-16 as a chain: the convolutions up to pool3, one
element each, then one block holding the rest, whose skips (pool3, pool4) stay inside it.

The fully connected layers are convolutions (fc6: 7x7, 4096; fc7: 1x1, 4096), scores are 1x1
convolutions, upsampling is by bias-free transposed convolutions (x2, x2, x8), and the scores
of pool4 and pool3 are added on the way up. Convolutions are "same"-padded (the paper pads the
first by 100 and crops), so image sides must be multiples of 32; 134.5M parameters with 21
classes (the paper: 134M).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .vgg import VGG16, vgg_convs


class FCNInner(nn.Module):
    """pool4 -> conv5 stage (pooled) -> fc6, fc7 -> scores -> x2 up: the coarsest level."""

    def __init__(self, c: int, hidden: int, classes: int, dropout: float) -> None:
        super().__init__()
        self.convs = nn.Sequential(*vgg_convs((c, c, c, "M"), width=64, in_channels=c)[0])
        self.fc6 = nn.Conv2d(c, hidden, 7, padding=3)
        self.fc7 = nn.Conv2d(hidden, hidden, 1)
        self.drop = nn.Dropout2d(dropout)
        self.score = nn.Conv2d(hidden, classes, 1)
        self.up = nn.ConvTranspose2d(classes, classes, 4, stride=2, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """pool4 features -> upsampled class scores: conv block, fc6/fc7 as convolutions, score, 2x up."""
        x = self.convs(x)
        x = self.drop(F.relu(self.fc6(x)))
        x = self.drop(F.relu(self.fc7(x)))
        return self.up(self.score(x))


class FCNHead(nn.Module):
    """pool3 -> conv4 stage (pool4) -> inner level; adds the scores of pool4 and pool3, x2 and x8 up."""

    def __init__(self, c3: int, c4: int, hidden: int, classes: int, dropout: float) -> None:
        super().__init__()
        self.convs = nn.Sequential(*vgg_convs((c4, c4, c4, "M"), width=64, in_channels=c3)[0])
        self.inner = FCNInner(c4, hidden, classes, dropout)
        self.score_pool4 = nn.Conv2d(c4, classes, 1)
        self.up_pool4 = nn.ConvTranspose2d(classes, classes, 4, stride=2, padding=1, bias=False)
        self.score_pool3 = nn.Conv2d(c3, classes, 1)
        self.up8 = nn.ConvTranspose2d(classes, classes, 16, stride=8, padding=4, bias=False)

    def forward(self, pool3: torch.Tensor) -> torch.Tensor:
        """pool3 features -> per-pixel class scores at input size, fusing the pool4 and pool3 skips (FCN-8s)."""
        pool4 = self.convs(pool3)
        x = self.inner(pool4) + self.score_pool4(pool4)
        x = self.up_pool4(x) + self.score_pool3(pool3)
        return self.up8(x)


def fcn8_blocks(*, width: int = 64, classes: int = 21, in_channels: int = 3, dropout: float = 0.5) -> list[nn.Module]:
    """FCN-8s: 7 conv blocks of VGG-16 (up to pool3), then `FCNHead`. Channels scale by width/64,
    fc6/fc7 have 64 * width channels (4096 at width 64)."""
    blocks, c3 = vgg_convs(VGG16[:10], width=width, in_channels=in_channels)
    c4 = max(1, 512 * width // 64)
    return blocks + [FCNHead(c3, c4, 64 * width, classes, dropout)]
