"""A factorised video encoder (ViViT model 2): a spatial stack runs on each frame's tiles with a
class token per frame, then a temporal stack runs on the frames' class tokens and a temporal
class token. Clips are 1x3x2x16x16; a Conv3d with 1x4x4 tubes makes 16 tokens per frame."""

from __future__ import annotations

import torch
from torch import nn

from strangers.parts import TILE, D, K, Mha, Unit

T = 2  # frames


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e = nn.Conv3d(3, D, (1, TILE, TILE), (1, TILE, TILE))
        self.t1, self.t2 = nn.Parameter(torch.zeros(1, 1, D)), nn.Parameter(torch.zeros(1, 1, D))
        self.a = nn.Sequential(Unit(Mha), Unit(Mha))
        self.b = nn.Sequential(Unit(Mha))
        self.n, self.c = nn.LayerNorm(D), nn.Linear(D, K)

    def forward(self, clip: torch.Tensor) -> torch.Tensor:
        x = self.e(clip)  # (B, D, T, 4, 4)
        b, d, t = x.shape[:3]
        x = x.flatten(3).permute(0, 2, 3, 1).reshape(b * t, -1, d)  # (B*T, 16, D)
        x = self.a(torch.cat([self.t1.expand(b * t, -1, -1), x], 1))
        x = x[:, 0].reshape(b, t, d)
        x = self.b(torch.cat([self.t2.expand(b, -1, -1), x], 1))
        return self.c(self.n(x[:, 0]))
