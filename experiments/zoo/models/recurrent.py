"""An LSTM-like recurrent model: gates written out with linears, unrolled over time.

`nn.LSTM` exports to one fused `aten.lstm` the portable runtime lacks; the cell
written out keeps the shape memory planning cares about: every step makes
small gate tensors that die at once, while the hidden and cell states of each
layer are read by the next step (long-lived, accessed often).
"""

from __future__ import annotations

import torch
from torch import nn

from memplan.experiments.zoo.models.common import ZooModel, seeded, single_method, zoo_recipe


class LSTMCell(nn.Module):
    def __init__(self, inputs: int, hidden: int) -> None:
        super().__init__()
        self.gates = nn.Linear(inputs + hidden, 4 * hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i, f, g, o = self.gates(torch.cat([x, h], dim=-1)).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class UnrolledLSTM(nn.Module):
    """`layers` stacked cells over a sequence (batch x steps x inputs), then a linear head."""

    def __init__(self, inputs: int = 32, hidden: int = 64, layers: int = 2, outputs: int = 16) -> None:
        super().__init__()
        self.hidden = hidden
        self.cells = nn.ModuleList(LSTMCell(inputs if k == 0 else hidden, hidden) for k in range(layers))
        self.head = nn.Linear(hidden, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, steps = x.shape[0], x.shape[1]
        states = [(x.new_zeros(batch, self.hidden), x.new_zeros(batch, self.hidden)) for _ in self.cells]
        outs = []
        for t in range(steps):
            y = x[:, t]
            for k, cell in enumerate(self.cells):
                h, c = cell(y, *states[k])
                states[k] = (h, c)
                y = h
            outs.append(self.head(y))
        return torch.stack(outs, dim=1)


def lstm() -> ZooModel:
    with seeded():
        return single_method(
            "lstm",
            "2-layer LSTM (hidden 64) written out with linears, unrolled over 8 steps, batch 4",
            UnrolledLSTM(),
            lambda: (torch.randn(4, 8, 32),),
            tags=("recurrent",),
            **zoo_recipe(
                convert_linear=False
            ),  # a cell reused every step: ConvertToLinearPass expects one use
        )
