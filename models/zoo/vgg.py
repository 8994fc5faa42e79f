"""VGG-16 / VGG-19 (Simonyan & Zisserman 2015) as chains: one element per conv (pools merged), three linear."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M")


class VGGConv(nn.Module):
    """3x3 conv + ReLU, followed by a 2x2 max-pool when `pool`."""

    def __init__(self, cin: int, cout: int, pool: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}: 3x3 conv, ReLU, then a 2x2 max pool when this layer ends a block."""
        x = F.relu(self.conv(x))
        return F.max_pool2d(x, 2) if self.pool else x


class VGGFC(nn.Module):
    """(Adaptive pool + flatten,) linear, and ReLU + dropout unless last."""

    def __init__(self, cin: int, cout: int, *, pool: int | None = None, last: bool = False,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.pool = pool
        self.fc = nn.Linear(cin, cout)
        self.last = last
        self.drop = nn.Dropout(dropout) if dropout and not last else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}: (adaptive pool and flatten for the first), linear, then ReLU and dropout unless last."""
        if self.pool is not None:
            x = F.adaptive_avg_pool2d(x, self.pool).flatten(1)
        x = self.fc(x)
        return x if self.last else self.drop(F.relu(x))


def vgg_convs(cfg: tuple[int | str, ...], *, width: int = 64, in_channels: int = 3) -> tuple[list[nn.Module], int]:
    """The convolutional part of a VGG configuration ("M" = 2x2 max-pool, merged into the conv
    before it): the blocks and their output channels. Channels scale by width/64."""
    blocks: list[nn.Module] = []
    cin = in_channels
    for k, v in enumerate(cfg):
        if v == "M":
            continue
        cout = max(1, int(v) * width // 64)
        blocks.append(VGGConv(cin, cout, pool=k + 1 < len(cfg) and cfg[k + 1] == "M"))
        cin = cout
    return blocks, cin


def vgg_blocks(cfg: tuple[int | str, ...] = VGG16, *, width: int = 64, classes: int = 1000, image_size: int = 224,
               in_channels: int = 3, dropout: float = 0.5) -> list[nn.Module]:
    """VGG-16 (`VGG16`, 13 convs) or VGG-19 (`VGG19`, 16 convs): conv blocks (pools merged), 3 linear blocks.

    Channels scale by width/64; the classifier's hidden size is 64 * width (4096 at width 64)
    and the pooled map is min(7, image_size // 32) squared.
    """
    blocks, cin = vgg_convs(cfg, width=width, in_channels=in_channels)
    pool = max(1, min(7, image_size // 32))
    hidden = 64 * width
    blocks.append(VGGFC(cin * pool * pool, hidden, pool=pool, dropout=dropout))
    blocks.append(VGGFC(hidden, hidden, dropout=dropout))
    blocks.append(VGGFC(hidden, classes, last=True))
    return blocks


def vgg16_blocks(**kw: int | float) -> list[nn.Module]:
    """VGG-16: `vgg_blocks` with `VGG16` (138,357,544 parameters at width 64, 1000 classes)."""
    return vgg_blocks(VGG16, **kw)  # type: ignore[arg-type]


def vgg19_blocks(**kw: int | float) -> list[nn.Module]:
    """VGG-19: `vgg_blocks` with `VGG19` (143,667,240 parameters at width 64, 1000 classes)."""
    return vgg_blocks(VGG19, **kw)  # type: ignore[arg-type]
