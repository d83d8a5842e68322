"""CaiT style: two self-attention blocks on the tiles alone, then a class-attention stage where a
learned class token, concatenated to the tiles only there, is the one query; the class token
alone then goes through the feed-forward and the classifier."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strangers.parts import D, Ff, K, Mha, Stem, Unit, merge, split


class Ca(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.f = Ff()

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        y = self.n1(torch.cat([t, x], 1))
        a = F.scaled_dot_product_attention(split(self.q(y[:, :1])), split(self.k(y)),
                                           split(self.v(y)))
        t = t + self.o(merge(a))
        return t + self.f(self.n2(t))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.u = nn.Sequential(Unit(Mha), Unit(Mha))
        self.t = nn.Parameter(torch.zeros(1, 1, D))
        self.c = Ca()
        self.n, self.z = nn.LayerNorm(D), nn.Linear(D, K)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.u(self.s(image))
        t = self.c(x, self.t.expand(x.shape[0], -1, -1))
        return self.z(self.n(t[:, 0]))
