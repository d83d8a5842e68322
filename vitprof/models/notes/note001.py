"""Note 001's ViT-B/16 implemented from scratch (Codeblocks 4-17), with its quirks kept.

The note configures everything through module-level constants (Codeblock 2); here they are
constructor arguments whose defaults are the note's values. Everything else follows the note:
the module and parameter names, ``nn.MultiheadAttention`` called as ``(x, x, x)[0]`` with
``need_weights`` left at its default, an MLP head with a hidden layer, and 10 classes.

Kept on purpose, because vitprof must count the model the note actually built:

* ``PosEmbedding.class_token`` and ``PosEmbedding.pos_embedding`` are shaped
  ``(batch_size, ...)``: the class token is concatenated without ``expand``, so the model only
  accepts batches of exactly ``batch_size`` images, and its parameter count grows with it.
* With ``batch_size=1`` the parameter count is torchinfo's "Total params: 86,396,938"
  (Codeblock 19 output).

The note's ``print`` calls in every ``forward`` are left out (its own closing remark says to
comment them out).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

PatcherKind = Literal["conv", "unfold"]


class PatcherUnfold(nn.Module):
    """Patch flattening with ``nn.Unfold`` then a linear projection (Codeblocks 4-5)."""

    def __init__(self, in_channels: int = 3, patch_size: int = 16, embed_dim: int = 768) -> None:
        super().__init__()
        self.unfold = nn.Unfold(kernel_size=patch_size, stride=patch_size)
        self.linear_projection = nn.Linear(
            in_features=in_channels * patch_size * patch_size, out_features=embed_dim
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, num_patches, embed_dim)."""
        x = self.unfold(x)
        x = x.permute(0, 2, 1)
        return self.linear_projection(x)


class PatcherConv(nn.Module):
    """Patch flattening and projection in one strided ``nn.Conv2d`` (Codeblock 7)."""

    def __init__(self, in_channels: int = 3, patch_size: int = 16, embed_dim: int = 768) -> None:
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels=in_channels,
            out_channels=embed_dim,
            kernel_size=patch_size,
            stride=patch_size,
        )
        self.flatten = nn.Flatten(start_dim=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, num_patches, embed_dim)."""
        x = self.conv(x)
        x = self.flatten(x)
        return x.permute(0, 2, 1)


class PosEmbedding(nn.Module):
    """Class token and learned position embedding (Codeblocks 9-10).

    Both parameters carry a leading ``batch_size`` axis, as in the note, so the class token is
    concatenated as is and the input batch must have exactly ``batch_size`` images.
    """

    def __init__(
        self,
        batch_size: int = 1,
        num_patches: int = 196,
        embed_dim: int = 768,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.class_token = nn.Parameter(
            torch.randn(size=(batch_size, 1, embed_dim)), requires_grad=True
        )
        self.pos_embedding = nn.Parameter(
            torch.randn(size=(batch_size, num_patches + 1, embed_dim)), requires_grad=True
        )
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch_size, num_patches, D) -> (batch_size, num_patches + 1, D)."""
        x = torch.cat([self.class_token, x], dim=1)
        x = self.pos_embedding + x
        return self.dropout(x)


class TransformerEncoder(nn.Module):
    """Pre-norm encoder block around ``nn.MultiheadAttention`` (Codeblocks 12-13)."""

    def __init__(
        self,
        embed_dim: int = 768,
        num_heads: int = 12,
        mlp_size: int = 3072,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.norm_0 = nn.LayerNorm(embed_dim)
        self.multihead_attention = nn.MultiheadAttention(
            embed_dim, num_heads=num_heads, batch_first=True, dropout=dropout
        )
        self.norm_1 = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(
            nn.Linear(in_features=embed_dim, out_features=mlp_size),
            nn.GELU(),
            nn.Dropout(p=dropout),
            nn.Linear(in_features=mlp_size, out_features=embed_dim),
            nn.Dropout(p=dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D) with two residual connections."""
        residual = x
        x = self.norm_0(x)
        x = self.multihead_attention(x, x, x)[0]
        x = x + residual
        residual = x
        x = self.norm_1(x)
        x = self.mlp(x)
        return x + residual


class MLPHead(nn.Module):
    """Classification head with a hidden layer: LayerNorm, Linear, GELU, Linear (Codeblock 15)."""

    def __init__(self, embed_dim: int = 768, num_classes: int = 10) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(embed_dim)
        self.linear_0 = nn.Linear(in_features=embed_dim, out_features=embed_dim)
        self.gelu = nn.GELU()
        self.linear_1 = nn.Linear(in_features=embed_dim, out_features=num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D) -> (B, num_classes)."""
        x = self.norm(x)
        x = self.linear_0(x)
        x = self.gelu(x)
        return self.linear_1(x)


def make_patcher(
    patcher: PatcherKind, in_channels: int, patch_size: int, embed_dim: int
) -> PatcherConv | PatcherUnfold:
    """The note's two interchangeable patchers, chosen by name (Codeblock 17, line #(1))."""
    if patcher == "conv":
        return PatcherConv(in_channels, patch_size, embed_dim)
    if patcher == "unfold":
        return PatcherUnfold(in_channels, patch_size, embed_dim)
    raise ValueError(f"patcher must be 'conv' or 'unfold', not {patcher!r}")


class ViT(nn.Module):
    """Note 001's whole ViT (Codeblock 17): patcher, embeddings, encoders, head on ``x[:, 0]``."""

    def __init__(
        self,
        batch_size: int = 1,
        image_size: int = 224,
        in_channels: int = 3,
        patch_size: int = 16,
        num_heads: int = 12,
        num_encoders: int = 12,
        embed_dim: int = 768,
        mlp_size: int = 3072,
        dropout: float = 0.1,
        num_classes: int = 10,
        patcher: PatcherKind = "conv",
    ) -> None:
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.patcher = make_patcher(patcher, in_channels, patch_size, embed_dim)
        self.pos_embedding = PosEmbedding(batch_size, num_patches, embed_dim, dropout)
        self.transformer_encoders = nn.Sequential(
            *[
                TransformerEncoder(embed_dim, num_heads, mlp_size, dropout)
                for _ in range(num_encoders)
            ]
        )
        self.mlp_head = MLPHead(embed_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch_size, C, H, W) -> (batch_size, num_classes)."""
        x = self.patcher(x)
        x = self.pos_embedding(x)
        x = self.transformer_encoders(x)
        x = x[:, 0]
        return self.mlp_head(x)


def build_note001_vit(
    image_size: int = 224,
    num_classes: int = 10,
    batch_size: int = 1,
    patcher: PatcherKind = "conv",
) -> nn.Module:
    """Note 001's ViT-B/16 (patch 16, 12 heads, 12 encoders, D=768, MLP 3072, dropout 0.1).

    The model accepts only batches of exactly ``batch_size`` images (see the module docstring).
    """
    return ViT(
        batch_size=batch_size, image_size=image_size, num_classes=num_classes, patcher=patcher
    )
