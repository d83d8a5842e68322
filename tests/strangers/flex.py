"""flex_attention with a causal block mask that the forward builds itself, on the input's
device."""

from __future__ import annotations

from functools import partial

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from strangers.parts import D, N, Plain, merge, split


def _causal(b: torch.Tensor, h: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    return i >= j


class Fx(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = create_block_mask(_causal, None, None, N, N, device=x.device)
        q, k, v = (split(t) for t in self.a(x).chunk(3, -1))
        return self.b(merge(flex_attention(q, k, v, block_mask=mask)))


Net = partial(Plain, Fx)  # Stem, two units of Fx, Out
