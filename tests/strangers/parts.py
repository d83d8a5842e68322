"""The pieces every stranger's model shares: sizes, a tiling stem, a two-layer feed-forward, a
residual pre-normalised block around any token mixer, and a pooled classifier. Names are
neutral on purpose (no "attn", "mlp", "norm", "proj", "head", "patch" anywhere)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

SIDE, TILE, D, HEADS, F_WIDTH, K = 16, 4, 32, 4, 64, 10
N = (SIDE // TILE) ** 2  # 16 tiles
P = 3 * TILE * TILE  # 48 values per tile
DH = D // HEADS  # 8 per head


def tiles(image: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C*TILE*TILE), by reshapes alone."""
    b, c, h, w = image.shape
    x = image.reshape(b, c, h // TILE, TILE, w // TILE, TILE).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // TILE) * (w // TILE), c * TILE * TILE)


def split(x: torch.Tensor) -> torch.Tensor:
    """(B, L, D) -> (B, HEADS, L, DH)."""
    return x.unflatten(-1, (HEADS, DH)).transpose(1, 2)


def merge(x: torch.Tensor) -> torch.Tensor:
    """(B, HEADS, L, DH) -> (B, L, D)."""
    return x.transpose(1, 2).flatten(2)


class Stem(nn.Module):
    """A 4x4 stride-4 convolution to D maps, flattened to tokens, plus a learned (1, N, D)
    table: 48*D + D = 1_568 params and N*48*D = 24_576 MACs, and N*D = 512 params."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, D, TILE, TILE)
        self.w0 = nn.Parameter(torch.zeros(1, N, D))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.a(image).flatten(2).transpose(1, 2) + self.w0


class Ff(nn.Module):
    """D -> F_WIDTH -> D with biases and a GELU: 2*D*F_WIDTH + F_WIDTH + D = 4_192 params,
    2*D*F_WIDTH = 4_096 MACs per token."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(D, F_WIDTH), nn.Linear(F_WIDTH, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(F.gelu(self.a(x)))


class Unit(nn.Module):
    """``x + mixer(n1(x))``, then ``x + ff(n2(x))``: two LayerNorms (4*D = 128 params) around
    a token mixer made by ``make`` and an :class:`Ff`."""

    def __init__(self, make: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.n1, self.m, self.n2, self.f = nn.LayerNorm(D), make(), nn.LayerNorm(D), Ff()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.m(self.n1(x))
        return x + self.f(self.n2(x))


class Out(nn.Module):
    """A LayerNorm (2*D = 64 params), the mean over tokens and a linear to K classes
    (D*K + K = 330 params, D*K = 320 MACs)."""

    def __init__(self) -> None:
        super().__init__()
        self.n, self.c = nn.LayerNorm(D), nn.Linear(D, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.n(x).mean(1))


class Plain(nn.Module):
    """A :class:`Stem`, two :class:`Unit` around the token mixer ``make`` makes, an :class:`Out`:
    the model of every style that differs from the others by its token mixer alone."""

    def __init__(self, make: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.s = Stem()
        self.u = nn.Sequential(Unit(make), Unit(make))
        self.o = Out()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.o(self.u(self.s(image)))


class Mha(nn.Module):
    """Plain multi-head self-attention: one fused q/k/v linear (3*D*D + 3*D = 3_168 params),
    SDPA, an output linear (D*D + D = 1_056 params)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (split(t) for t in self.a(x).chunk(3, -1))
        return self.b(merge(F.scaled_dot_product_attention(q, k, v)))
