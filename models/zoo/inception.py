"""Inception-v3 (Szegedy et al. 2016) as a chain: stem convs, one element per mixed module, head."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .common import ClassifierHead, ConvBNReLU


# --------------------------------------------------------------------------- Inception-v3
class _Branches(nn.Module):
    """Runs branches on the same input and concatenates their outputs along channels."""

    def __init__(self, branches: list[nn.Module]) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


class _Pool(nn.Module):
    def __init__(self, kind: str, stride: int, then: nn.Module | None = None) -> None:
        super().__init__()
        self.kind, self.stride = kind, stride
        self.then = then if then is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "avg":
            x = F.avg_pool2d(x, 3, self.stride, 1 if self.stride == 1 else 0)
        else:
            x = F.max_pool2d(x, 3, self.stride)
        return self.then(x)


class _Split(nn.Module):
    """A stem conv then two parallel convolutions whose outputs are concatenated."""

    def __init__(self, stem: nn.Module, a: nn.Module, b: nn.Module) -> None:
        super().__init__()
        self.stem, self.a, self.b = stem, a, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        return torch.cat([self.a(x), self.b(x)], 1)


def _cbr(cin: int, cout: int, k: Any = 1, stride: int = 1, padding: Any = 0) -> ConvBNReLU:
    return ConvBNReLU(cin, cout, k, stride, padding, eps=1e-3)


def _inception_a(cin: int, pool: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b1 = _cbr(cin, c(64))
    b5 = nn.Sequential(_cbr(cin, c(48)), _cbr(c(48), c(64), 5, padding=2))
    b3 = nn.Sequential(_cbr(cin, c(64)), _cbr(c(64), c(96), 3, padding=1), _cbr(c(96), c(96), 3, padding=1))
    bp = _Pool("avg", 1, _cbr(cin, c(pool)))
    return _Branches([b1, b5, b3, bp]), c(64) + c(64) + c(96) + c(pool)


def _inception_b(cin: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b3 = _cbr(cin, c(384), 3, 2)
    bd = nn.Sequential(_cbr(cin, c(64)), _cbr(c(64), c(96), 3, padding=1), _cbr(c(96), c(96), 3, 2))
    return _Branches([b3, bd, _Pool("max", 2)]), c(384) + c(96) + cin


def _inception_c(cin: int, c7: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b1 = _cbr(cin, c(192))
    b7 = nn.Sequential(_cbr(cin, c7), _cbr(c7, c7, (1, 7), padding=(0, 3)), _cbr(c7, c(192), (7, 1), padding=(3, 0)))
    bd = nn.Sequential(_cbr(cin, c7), _cbr(c7, c7, (7, 1), padding=(3, 0)), _cbr(c7, c7, (1, 7), padding=(0, 3)),
                       _cbr(c7, c7, (7, 1), padding=(3, 0)), _cbr(c7, c(192), (1, 7), padding=(0, 3)))
    bp = _Pool("avg", 1, _cbr(cin, c(192)))
    return _Branches([b1, b7, bd, bp]), 4 * c(192)


def _inception_d(cin: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b3 = nn.Sequential(_cbr(cin, c(192)), _cbr(c(192), c(320), 3, 2))
    b7 = nn.Sequential(_cbr(cin, c(192)), _cbr(c(192), c(192), (1, 7), padding=(0, 3)),
                       _cbr(c(192), c(192), (7, 1), padding=(3, 0)), _cbr(c(192), c(192), 3, 2))
    return _Branches([b3, b7, _Pool("max", 2)]), c(320) + c(192) + cin


def _inception_e(cin: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b1 = _cbr(cin, c(320))
    b3 = _Split(_cbr(cin, c(384)), _cbr(c(384), c(384), (1, 3), padding=(0, 1)),
                _cbr(c(384), c(384), (3, 1), padding=(1, 0)))
    bd = _Split(nn.Sequential(_cbr(cin, c(448)), _cbr(c(448), c(384), 3, padding=1)),
                _cbr(c(384), c(384), (1, 3), padding=(0, 1)), _cbr(c(384), c(384), (3, 1), padding=(1, 0)))
    bp = _Pool("avg", 1, _cbr(cin, c(192)))
    return _Branches([b1, b3, bd, bp]), c(320) + 2 * c(384) + 2 * c(384) + c(192)


class _ConvPool(nn.Sequential):
    """A stem convolution optionally followed by a 3x3 stride-2 max-pool."""

    def __init__(self, conv: nn.Module, pool: bool) -> None:
        super().__init__(conv, _Pool("max", 2) if pool else nn.Identity())


def inception_v3_blocks(*, width: int = 64, classes: int = 1000, in_channels: int = 3,
                        dropout: float = 0.5) -> list[nn.Module]:
    """Inception-v3 (Szegedy et al. 2016) without the auxiliary classifier: 5 stem convs (pools
    merged), mixed 5b-5d, 6a-6e, 7a-7c, head. Channels scale by width/64; images >= 75 pixels."""
    def c(n: int) -> int:
        return max(1, round(n * width / 64))

    blocks: list[nn.Module] = [
        _ConvPool(_cbr(in_channels, c(32), 3, 2), False),
        _ConvPool(_cbr(c(32), c(32), 3), False),
        _ConvPool(_cbr(c(32), c(64), 3, padding=1), True),
        _ConvPool(_cbr(c(64), c(80), 1), False),
        _ConvPool(_cbr(c(80), c(192), 3), True),
    ]
    cin = c(192)
    for pool in (32, 64, 64):
        block, cin = _inception_a(cin, pool, c)
        blocks.append(block)
    block, cin = _inception_b(cin, c)
    blocks.append(block)
    for c7 in (128, 160, 160, 192):
        block, cin = _inception_c(cin, c(c7), c)
        blocks.append(block)
    block, cin = _inception_d(cin, c)
    blocks.append(block)
    for _ in range(2):
        block, cin = _inception_e(cin, c)
        blocks.append(block)
    blocks.append(ClassifierHead(cin, classes, dropout=dropout))
    return blocks
