"""Gated attention: a sigmoid gate, projected from the attention's input like q/k/v, multiplies
the attention's output before the output linear."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strangers.parts import D, Out, Stem, Unit, merge, split


class G(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.g, self.b = nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (split(t) for t in self.a(x).chunk(3, -1))
        y = merge(F.scaled_dot_product_attention(q, k, v))
        return self.b(y * torch.sigmoid(self.g(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.u = nn.Sequential(Unit(G), Unit(G))
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.s(image)))
