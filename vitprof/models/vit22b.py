"""A ViT-22B-style Vision Transformer (Dehghani et al. 2023, "Scaling Vision Transformers to 22
Billion Parameters"), hand-written for vitprof: what sets its blocks apart from a ViT's.

* **Parallel blocks**: one norm feeds both the attention and the MLP, and both outputs are added
  to the residual: ``x + attn(norm(x)) + mlp(norm(x))``, not two sequential sub-layers.
* **QK-norm**: a norm over the head width d on the queries and on the keys of every head (one
  pair per block, shared by its heads), before ``q k^T``. The paper writes it as a LayerNorm and
  applies its LayerNorms "without bias and centering"; an RMSNorm here is vitprof's choice
  (a bias-free LayerNorm has the same d weights and no MACs either: the counts are the same).
* **Biases only in the MLP**: the paper removes the biases of the q, k, v projections and keeps
  those of the two MLP linears ("in- and out-"); the output projection, fused with the MLP's
  second linear in the paper's parallel form, has none of its own here.
* **Norms without bias and centering** (the paper's LayerNorms "without bias and centering",
  Zhang & Sennrich 2019): ``nn.RMSNorm``, a weight of D (or d) and no bias.

At ViT-22B's sizes (width 6144, depth 48, 48 heads of d = 128, MLP 24576, patch 14, 224 px) a
block holds 4 D^2 + 2 D F weights, F + D MLP biases and D + 2 d norm weights. The stem and head
are vitprof's choice, a plain ViT's: a patch convolution with a bias, a class token, a position
embedding over every token, a final RMSNorm and a linear head on the class token.
"""

from __future__ import annotations

import torch
from torch import nn


class ParallelAttention(nn.Module):
    """Multi-head self-attention with a bias-free fused ``qkv``, QK-norm (RMSNorm) and a
    bias-free ``proj``; the scores are ``(q k^T) * d^-0.5``."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.q_norm = nn.RMSNorm(self.head_dim)
        self.k_norm = nn.RMSNorm(self.head_dim)
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        B, N, D = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = self.q_norm(qkv[0]), self.k_norm(qkv[1]), qkv[2]
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, D))


class Mlp(nn.Module):
    """``fc2(GELU(fc1(x)))``, both linears with biases (the paper keeps them)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        return self.fc2(self.act(self.fc1(x)))


class ParallelBlock(nn.Module):
    """``x + attn(norm(x)) + mlp(norm(x))``: one RMSNorm, both branches summed."""

    def __init__(self, dim: int, num_heads: int, mlp_dim: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.attn = ParallelAttention(dim, num_heads)
        self.mlp = Mlp(dim, mlp_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        y = self.norm(x)
        return x + self.attn(y) + self.mlp(y)


class ParallelViT(nn.Module):
    """Patch convolution, class token, position embedding, parallel blocks, final RMSNorm
    and a linear head on the class token."""

    def __init__(self, image_size: int, patch_size: int, width: int, depth: int,
                 num_heads: int, mlp_dim: int, num_classes: int) -> None:
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, width))
        self.blocks = nn.ModuleList(
            ParallelBlock(width, num_heads, mlp_dim) for _ in range(depth))
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, num_classes)."""
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def build_vit_22b_parallel(image_size: int = 224, num_classes: int = 1000) -> ParallelViT:
    """ViT-22B's sizes: width 6144, depth 48, 48 heads, MLP 24576, patch 14."""
    return ParallelViT(image_size, 14, 6144, 48, 48, 24576, num_classes)
