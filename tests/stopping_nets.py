"""Networks whose gradient flow stops in the middle (shared by the executor edge-case tests):
a block under ``torch.no_grad()``, a ``detach``, or an integer output (``argmax``) feeding an
embedding. Plain autograd leaves the blocks before the stop without gradient. Needs torch."""

from __future__ import annotations

import torch
from torch import nn


class Frozen(nn.Module):
    """A feature extractor run under ``torch.no_grad()``: its output does not depend on its input
    (nor on its weights) through autograd."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.tanh(self.lin(x))


class Detach(nn.Module):
    """Cuts the graph: its output is a function of its input's values only."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.detach() * 2


class Argmax(nn.Module):
    """Integer output: no gradient flows back through it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.argmax(dim=1)


def stopped(kind: str) -> nn.Sequential:
    """Five blocks (inputs of width 8) whose third stops the gradient (`kind`: frozen, detach or argmax)."""
    torch.manual_seed(0)
    if kind == "argmax":
        return nn.Sequential(nn.Linear(8, 5), nn.Tanh(), Argmax(), nn.Embedding(5, 8), nn.Linear(8, 4))
    middle = Frozen() if kind == "frozen" else Detach()
    return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), middle, nn.Linear(8, 8), nn.Linear(8, 4))
