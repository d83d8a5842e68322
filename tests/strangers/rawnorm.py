"""A LayerNorm on the raw flattened tiles, before the linear that embeds them, and another after
it (lucidrains' layout)."""

from __future__ import annotations

import torch
from torch import nn

from strangers.parts import D, Mha, N, Out, P, Unit, tiles


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e = nn.Sequential(nn.LayerNorm(P), nn.Linear(P, D), nn.LayerNorm(D))
        self.w = nn.Parameter(torch.zeros(1, N, D))
        self.u = nn.Sequential(Unit(Mha), Unit(Mha))
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.e(tiles(image)) + self.w))
