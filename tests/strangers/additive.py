"""Additive attention (Fastformer style): a learned vector scores each query token, the softmax
of the scores pools the queries into one global query, which multiplies the keys element-wise
before the output linear. No N x N product anywhere."""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from strangers.parts import D, Plain


class Ad(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(D, D), nn.Linear(D, D)
        self.w = nn.Linear(D, 1, bias=False)
        self.o = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q(x)
        s = (self.w(q).squeeze(-1) * D**-0.5).softmax(-1)  # (B, N)
        g = s.unsqueeze(1) @ q  # (B, 1, D): a product of two activations
        return self.o(g * self.k(x))


Net = partial(Plain, Ad)  # Stem, two units of Ad, Out
