"""CvT style: the tokens go back to their map and through a depthwise 3x3 convolution before the
separate q, k and v linears."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strangers.parts import SIDE, TILE, D, Out, Stem, Unit, merge, split


class Cv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(D, D, 3, padding=1, groups=D)
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.o = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = SIDE // TILE
        y = self.c(x.transpose(1, 2).unflatten(2, (side, side))).flatten(2).transpose(1, 2)
        a = F.scaled_dot_product_attention(split(self.q(y)), split(self.k(y)), split(self.v(y)))
        return self.o(merge(a))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.u = nn.ModuleList([Unit(Cv), Unit(Cv)])
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.s(image)
        for unit in self.u:
            x = unit(x)
        return self.o(x)
