"""A video ViT: a Conv3d cuts 1x3x4x16x16 clips into 2x4x4 tubes (2 x 16 = 32 tokens)."""

from __future__ import annotations

import torch
from torch import nn

from strangers.parts import TILE, D, Mha, Out, Unit

T = 4  # frames
TUBE = 2  # frames per tube


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e = nn.Conv3d(3, D, (TUBE, TILE, TILE), (TUBE, TILE, TILE))
        self.u = nn.Sequential(Unit(Mha), Unit(Mha))
        self.o = Out()

    def forward(self, clip: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.e(clip).flatten(2).transpose(1, 2)))
