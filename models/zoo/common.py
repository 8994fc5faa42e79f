"""Shared pieces of the zoo: the losses and small building blocks (conv-BN-ReLU, classifier head)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


# --------------------------------------------------------------------------- losses
def classification_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of logits (N, C) against class indices (N,)."""
    return F.cross_entropy(output, target)


def lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of logits (N, T, V) against token ids (N, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def segmentation_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean per-pixel cross-entropy of logits (N, C, H, W) against labels (N, H, W)."""
    return F.cross_entropy(output, target)


# --------------------------------------------------------------------------- helpers
class ConvBNReLU(nn.Sequential):
    """conv (no bias) -> batch norm -> ReLU."""

    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int] = 3, stride: int = 1,
                 padding: int | tuple[int, int] = 0, eps: float = 1e-5) -> None:
        super().__init__(nn.Conv2d(cin, cout, kernel, stride, padding, bias=False), nn.BatchNorm2d(cout, eps=eps),
                         nn.ReLU())
        self.out_channels = cout


class ClassifierHead(nn.Module):
    """Global average pool, (dropout,) flatten, linear layer to `classes` logits."""

    def __init__(self, cin: int, classes: int, dropout: float = 0.0, pre: nn.Module | None = None) -> None:
        super().__init__()
        self.pre = pre if pre is not None else nn.Identity()
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map feature maps (N, C, H, W) to class logits (N, classes): global average pool, dropout, linear."""
        x = self.pre(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(self.drop(x))
