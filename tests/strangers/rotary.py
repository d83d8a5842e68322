"""Rotary position embedding in complex numbers (LLaMA style): q and k, viewed as DH/2 complex
pairs per head, are multiplied by unit complex rotations, made in the forward on the input's
device, before the attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from strangers.parts import DH, D, N, Out, P, Unit, merge, split, tiles


def rotations(device: torch.device) -> torch.Tensor:
    """(N, DH/2) complex, made on ``device``: position n turned by n * 10000^(-2i/DH)."""
    steps = torch.arange(0, DH, 2, device=device).float() / DH
    angles = torch.outer(torch.arange(N, device=device).float(), 10000**-steps)
    return torch.polar(torch.ones_like(angles), angles)


def turn(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(pairs * r).flatten(-2).type_as(x)


class Rot(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = rotations(x.device)
        q, k, v = (split(t) for t in self.a(x).chunk(3, -1))
        q, k = turn(q, r), turn(k, r)
        return self.b(merge(F.scaled_dot_product_attention(q, k, v)))


class Net(nn.Module):
    block: type[nn.Module] = Rot

    def __init__(self) -> None:
        super().__init__()
        self.e = nn.Linear(P, D)
        self.u = nn.Sequential(Unit(self.block), Unit(self.block))
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.e(tiles(image))))
