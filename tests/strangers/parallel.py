"""Parallel blocks: one LayerNorm feeds both the attention and the feed-forward, whose outputs are
added to the residual together."""

from __future__ import annotations

import torch
from torch import nn

from strangers.parts import D, Ff, Mha, Out, Stem


class Par(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n, self.a, self.f = nn.LayerNorm(D), Mha(), Ff()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.n(x)
        return x + self.a(y) + self.f(y)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.u = nn.Sequential(Par(), Par())
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.s(image)))
