"""An MLP-Mixer: each block mixes the tokens with a feed-forward across the token axis, then the
channels with one across the feature axis. No attention anywhere."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strangers.parts import D, Ff, N, Out, Stem

S = 32  # hidden width of the token-mixing feed-forward


class Mx(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.a, self.b = nn.Linear(N, S), nn.Linear(S, N)
        self.f = Ff()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.n1(x).transpose(1, 2)
        x = x + self.b(F.gelu(self.a(y))).transpose(1, 2)
        return x + self.f(self.n2(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.s = Stem()
        self.u = nn.Sequential(Mx(), Mx())
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.s(image)))
