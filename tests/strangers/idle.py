"""A block that defines a LayerNorm it never runs (a leftover of an edit), beside the two it
does."""

from __future__ import annotations

import torch
from torch import nn

from strangers.parts import D, Ff, Mha, Out, Stem


class Blk(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n1, self.a, self.n2, self.f = nn.LayerNorm(D), Mha(), nn.LayerNorm(D), Ff()
        self.n3 = nn.LayerNorm(D)  # never runs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.a(self.n1(x))
        return x + self.f(self.n2(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.u = nn.Sequential(Blk(), Blk())
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.s(image)))
