"""An LSTM unrolled over time steps: the backpropagation-through-time chain of Revolve (Griewank &
Walther 2000), one element per time step.

Activation a_t is the state (h_t, c_t) concatenated, (N, 2H); block t runs one shared
`nn.LSTMCell` on the input x_t and the state. The input sequence (N, T, F) is data held by the
blocks as a buffer (resident throughout, like the weights, so not an activation); the example
input is the initial state (zeros). A last block maps h_T to `classes` logits (many-to-one).
Parameters: 4H(F + H) + 8H for the cell (as `torch.nn.LSTM`), H * classes + classes for the head.
"""

from __future__ import annotations

import torch
from torch import nn


class Sequence(nn.Module):
    """The input sequence (N, T, F), a buffer shared by the time steps."""

    def __init__(self, x: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("x", x)


class LSTMStep(nn.Module):
    """Time step t: state (N, 2H) -> state (N, 2H) with the shared cell on x[:, t]."""

    def __init__(self, cell: nn.LSTMCell, data: Sequence, t: int) -> None:
        super().__init__()
        self.cell = cell
        self.data = data
        self.t = t

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """One time step t: state [h, c] (N, 2h) -> next state [h, c], reading input x_t from the shared data."""
        h, c = state.chunk(2, dim=1)
        h, c = self.cell(self.data.x[:, self.t], (h.contiguous(), c.contiguous()))
        return torch.cat([h, c], 1)


class LSTMHead(nn.Module):
    """h_T (the first half of the state) -> logits."""

    def __init__(self, hidden: int, classes: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.fc = nn.Linear(hidden, classes)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Final state [h, c] -> logits from h only."""
        return self.fc(state[:, :self.hidden])


def lstm_blocks(x: torch.Tensor, *, hidden: int, classes: int = 10) -> list[nn.Module]:
    """T = x.shape[1] steps of one LSTM cell (input x.shape[2], hidden `hidden`), then the head."""
    cell = nn.LSTMCell(x.shape[2], hidden)
    data = Sequence(x)
    return [LSTMStep(cell, data, t) for t in range(x.shape[1])] + [LSTMHead(hidden, classes)]
