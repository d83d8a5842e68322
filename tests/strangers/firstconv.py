"""Twins style: a depthwise 3x3 convolution on the token map (a position generator, D channels)
runs as a residual between the first and the second block, but is registered before the stem,
the convolution the 3-channel image reaches."""

from __future__ import annotations

import torch
from torch import nn

from strangers.parts import SIDE, TILE, D, Mha, Out, Stem, Unit


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Conv2d(D, D, 3, padding=1, groups=D)
        self.s = Stem()
        self.u = nn.ModuleList([Unit(Mha), Unit(Mha)])
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.u[0](self.s(image))
        side = SIDE // TILE
        y = self.g(x.transpose(1, 2).unflatten(2, (side, side))).flatten(2).transpose(1, 2)
        return self.o(self.u[1](x + y))
