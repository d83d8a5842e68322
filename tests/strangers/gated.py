"""Gated attention: a sigmoid gate, projected from the attention's input like q/k/v, multiplies
the attention's output before the output linear."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from strangers.parts import D, Plain, merge, split


class G(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.g, self.b = nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (split(t) for t in self.a(x).chunk(3, -1))
        y = merge(F.scaled_dot_product_attention(q, k, v))
        return self.b(y * torch.sigmoid(self.g(x)))


Net = partial(Plain, G)  # Stem, two units of G, Out
