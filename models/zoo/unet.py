"""U-Net (Ronneberger et al. 2015) as a three-element chain, the skips nested in the middle block."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import ConvBNReLU


# --------------------------------------------------------------------------- U-Net
class DoubleConv(nn.Sequential):
    """(3x3 conv, BN, ReLU) twice."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(ConvBNReLU(cin, cout, 3, padding=1), ConvBNReLU(cout, cout, 3, padding=1))


class UNetLevel(nn.Module):
    """One U-Net level with everything inside it: encoder convs, 2x2 max-pool, the inner levels
    (or the bottleneck), 2x2 transposed conv up, concatenation with the skip, decoder convs."""

    def __init__(self, cin: int, c: int, levels: int) -> None:
        super().__init__()
        self.enc = DoubleConv(cin, c)
        self.inner: nn.Module = UNetLevel(c, 2 * c, levels - 1) if levels > 1 else DoubleConv(c, 2 * c)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec = DoubleConv(2 * c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One U-Net level: encode, pool, inner levels, upsample, decode with the skip concatenated."""
        skip = self.enc(x)
        y = self.up(self.inner(F.max_pool2d(skip, 2)))
        return self.dec(torch.cat([skip, y], 1))


def unet_blocks(*, width: int = 64, depth: int = 4, classes: int = 2, in_channels: int = 3) -> list[nn.Module]:
    """U-Net (Ronneberger et al. 2015) with `depth` pooling levels: chain of three blocks:
    input conv (in -> width), the nested U (all skips inside), 1x1 output conv. Image sizes
    must be multiples of 2**depth."""
    return [ConvBNReLU(in_channels, width, 3, padding=1), UNetLevel(width, width, depth),
            nn.Conv2d(width, classes, 1)]
