"""Note 004's timm-style ViT-B/16, transcribed from its code (sections 2.4, 3.5, 4.4, 5.4, 6.3).

``PatchEmbed`` (a strided ``Conv2d`` named ``proj``), ``Attention`` (ONE ``qkv`` Linear with
``qkv_bias=False`` by default, an explicit ``q @ k^T``, and a ``proj`` Linear with bias), ``MLP``
(``fc1``, ``act``, ``drop1``, ``fc2``, ``drop2``), pre-norm ``Block`` and ``VisionTransformer``
(``cls_token`` and ``pos_embed`` initialised to zeros as in sections 6.1-6.2, a final ``norm``
and a ``head`` on ``x[:, 0]``). The note shows no ``VisionTransformer.__init__``; its arguments
here follow the note's ``PatchEmbed`` and ``Block`` arguments.

The note's tally (section 6.4) counts weight matrices only: it leaves out every bias and the
blocks' LayerNorms, and gives the final LayerNorm 768 parameters where it has 2 x 768.
"""

from __future__ import annotations

import torch
from torch import nn


class PatchEmbed(nn.Module):
    """Section 2.4: image to patch tokens with ``Conv2d(in_chans, D, patch, stride=patch)``."""

    def __init__(
        self, img_size: int = 224, patch_size: int = 16, in_chans: int = 3, embed_dim: int = 768
    ) -> None:
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, 224, 224) -> (B, 196, 768)."""
        x = self.proj(x)
        x = x.flatten(2)
        return x.transpose(1, 2)


class Attention(nn.Module):
    """Section 3.5: multi-head self-attention from one fused ``qkv`` projection."""

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, C) -> (B, N, C)."""
        B, N, C = x.shape
        qkv = self.qkv(x)
        qkv = qkv.reshape(B, N, 3, self.num_heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        x = attn @ v
        x = x.transpose(1, 2)
        x = x.reshape(B, N, C)
        x = self.proj(x)
        return self.proj_drop(x)


class MLP(nn.Module):
    """Section 4.4: ``fc1``, activation, dropout, ``fc2``, dropout."""

    def __init__(
        self,
        in_features: int,
        hidden_features: int | None = None,
        out_features: int | None = None,
        act_layer: type[nn.Module] = nn.GELU,
        drop: float = 0.0,
    ) -> None:
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, in_features) -> (B, N, out_features)."""
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.fc2(x)
        return self.drop2(x)


class Block(nn.Module):
    """Section 5.4: pre-norm block, ``x + attn(norm1(x))`` then ``x + mlp(norm2(x))``."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = False,
        drop: float = 0.0,
        attn_drop: float = 0.0,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(
            dim, num_heads=num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=drop
        )
        self.norm2 = nn.LayerNorm(dim)
        mlp_hidden_dim = int(dim * mlp_ratio)
        self.mlp = MLP(
            in_features=dim, hidden_features=mlp_hidden_dim, act_layer=nn.GELU, drop=drop
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """Section 6: patch embedding, CLS token, position embedding, blocks, norm, head."""

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        num_classes: int = 1000,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = False,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
    ) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        self.blocks = nn.ModuleList(
            [
                Block(embed_dim, num_heads, mlp_ratio, qkv_bias, drop_rate, attn_drop_rate)
                for _ in range(depth)
            ]
        )
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Section 6.3: (B, 3, 224, 224) -> (B, num_classes)."""
        B = x.shape[0]
        x = self.patch_embed(x)
        cls_token = self.cls_token.expand(B, -1, -1)
        x = torch.cat([cls_token, x], dim=1)
        x = x + self.pos_embed
        x = self.pos_drop(x)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        cls_output = x[:, 0]
        return self.head(cls_output)


def build_note004_vit(
    image_size: int = 224, num_classes: int = 1000, qkv_bias: bool = False
) -> VisionTransformer:
    """Note 004's ViT-B/16: patch 16, D=768, depth 12, 12 heads, MLP ratio 4, no dropout."""
    return VisionTransformer(img_size=image_size, num_classes=num_classes, qkv_bias=qkv_bias)
