"""Perceiver style: M = 8 learned latents cross-attend to the N tiles (queries from the latents,
keys and values from the tiles), then one self-attention block runs on the latents."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strangers.parts import D, Ff, Mha, Out, Stem, Unit, merge, split

M = 8


class X(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n1, self.n2, self.n3 = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.f = Ff()

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y, c = self.n1(z), self.n2(x)
        a = F.scaled_dot_product_attention(split(self.q(y)), split(self.k(c)), split(self.v(c)))
        z = z + self.o(merge(a))
        return z + self.f(self.n3(z))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.z = nn.Parameter(torch.zeros(1, M, D))
        self.x = X()
        self.u = Unit(Mha)
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.s(image)
        z = self.x(self.z.expand(x.shape[0], -1, -1), x)
        return self.o(self.u(z))
