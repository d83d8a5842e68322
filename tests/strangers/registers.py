"""A class token and R = 4 register tokens joined to the tiles; the classifier reads the class
token."""

from __future__ import annotations

import torch
from torch import nn

from strangers.parts import D, K, Mha, Stem, Unit

R = 4


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.t = nn.Parameter(torch.zeros(1, 1, D))
        self.r = nn.Parameter(torch.zeros(1, R, D))
        self.u = nn.Sequential(Unit(Mha), Unit(Mha))
        self.n, self.c = nn.LayerNorm(D), nn.Linear(D, K)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.s(image)
        b = x.shape[0]
        x = self.u(torch.cat([self.t.expand(b, -1, -1), self.r.expand(b, -1, -1), x], 1))
        return self.c(self.n(x)[:, 0])
