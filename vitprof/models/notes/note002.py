"""Note 002's CIFAR-ViT, its size table, and its two lightweight variants.

* :class:`CifarViT` follows sections 1-2: a strided ``Conv2d`` patch embedding (2.1), a CLS token
  and a learned position embedding, pre-norm blocks whose attention uses SEPARATE ``q``, ``k``,
  ``v`` and ``proj`` linears with an explicit ``softmax(q @ k^T * scale) @ v`` (2.2) and whose
  feed-forward is ``fc1`` (D -> 4D), GELU, dropout, ``fc2`` (4D -> D), dropout (2.3); a final
  LayerNorm; the head reads the CLS token. Initialisation follows "初始化策略".
* :data:`CIFAR_VIT_SIZES` is the "模型缩放" table (Tiny / Small / Base / Large).
* :class:`LinearAttention` is section 3.2 read per head (vitprof's reading): ReLU feature maps,
  ``context = k^T @ v`` per head, ``out = q @ context``, no softmax and no scaling. The note
  writes ``Context = K.T @ V # (D, D)`` and splits no heads: that is ``num_heads=1``.
* :class:`DynamicCifarViT` is section 3.1 (Dynamic ViT): before selected blocks a token-importance
  predictor scores the patch tokens and ``torch.topk`` keeps the best ``k`` of them (the CLS
  token is always kept), gathered with ``tokens.gather``. The note gives neither the predictor's
  layers nor the keep ratios: :class:`TokenPredictor` and :data:`DEFAULT_KEEP_RATIOS` are
  vitprof's assumptions (DynamicViT's usual choices), not note 002's.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import torch
from torch import nn

# vitprof's assumption, not note 002's (section 3.1 gives no ratios): 0.7 kept twice.
DEFAULT_KEEP_RATIOS: tuple[float, ...] = (1.0, 1.0, 0.7, 0.7, 0.49, 0.49)

CIFAR_VIT_SIZES: dict[str, dict[str, int]] = {
    "tiny": {"embed_dim": 192, "depth": 12, "num_heads": 3},
    "small": {"embed_dim": 384, "depth": 12, "num_heads": 6},
    "base": {"embed_dim": 512, "depth": 6, "num_heads": 8},
    "large": {"embed_dim": 768, "depth": 12, "num_heads": 12},
}


class PatchEmbed(nn.Module):
    """Section 2.1: ``Conv2d(3, D, kernel_size=p, stride=p)``, flatten, transpose."""

    def __init__(
        self, image_size: int = 32, patch_size: int = 4, in_chans: int = 3, embed_dim: int = 512
    ) -> None:
        super().__init__()
        self.num_patches = (image_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, num_patches, D)."""
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    """Section 2.2: multi-head self-attention with separate ``q``, ``k``, ``v`` linears."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, num_heads, N, head_dim)."""
        batch, tokens, _ = x.shape
        return x.reshape(batch, tokens, self.num_heads, self.head_dim).transpose(1, 2)

    def mix(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Softmax attention per head: ``softmax(q @ k^T * scale) @ v``."""
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        return attn @ v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        batch, tokens, dim = x.shape
        q = self.split_heads(self.q(x))
        k = self.split_heads(self.k(x))
        v = self.split_heads(self.v(x))
        out = self.mix(q, k, v)
        out = out.transpose(1, 2).reshape(batch, tokens, dim)
        return self.proj(out)


class LinearAttention(Attention):
    """Section 3.2: linear attention, O(N D^2) instead of O(N^2 D); same linears as softmax."""

    def mix(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``relu(q) @ (relu(k)^T @ v)`` per head, with no softmax and no scaling."""
        q = torch.relu(q)
        k = torch.relu(k)
        context = k.transpose(-2, -1) @ v  # (B, num_heads, head_dim, head_dim)
        return q @ context


class FeedForward(nn.Module):
    """Section 2.3: ``fc1`` (D -> hidden), GELU, dropout, ``fc2`` (hidden -> D), dropout."""

    def __init__(self, dim: int, hidden_dim: int, drop: float = 0.1) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.drop = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        x = self.drop(self.act(self.fc1(x)))
        return self.drop(self.fc2(x))


class Block(nn.Module):
    """Pre-norm encoder block: ``x + attn(norm1(x))`` then ``x + mlp(norm2(x))``."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        drop: float = 0.1,
        attn_layer: type[Attention] = Attention,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = attn_layer(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = FeedForward(dim, int(dim * mlp_ratio), drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def init_weights(module: nn.Module) -> None:
    """The note's "初始化策略": trunc-normal(0.02) Linear weights, zero biases, unit LayerNorm."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.constant_(module.bias, 0)
    elif isinstance(module, nn.LayerNorm):
        nn.init.constant_(module.weight, 1.0)
        nn.init.constant_(module.bias, 0)


class CifarViT(nn.Module):
    """Note 002's Vision Transformer for 32x32 images (section 1, "整体架构")."""

    def __init__(
        self,
        image_size: int = 32,
        patch_size: int = 4,
        in_chans: int = 3,
        num_classes: int = 10,
        embed_dim: int = 512,
        depth: int = 6,
        num_heads: int = 8,
        mlp_ratio: float = 4.0,
        drop_rate: float = 0.1,
        attn_layer: type[Attention] = Attention,
    ) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(image_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        self.blocks = nn.ModuleList(
            [Block(embed_dim, num_heads, mlp_ratio, drop_rate, attn_layer) for _ in range(depth)]
        )
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.apply(init_weights)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, num_patches + 1, D): patches, CLS token, positions, dropout."""
        x = self.patch_embed(x)
        cls_token = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls_token, x], dim=1)
        return self.pos_drop(x + self.pos_embed)

    def forward_blocks(self, x: torch.Tensor) -> torch.Tensor:
        """Run the encoder blocks in order."""
        for block in self.blocks:
            x = block(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, num_classes), classifying from the CLS token."""
        x = self.forward_blocks(self.embed(x))
        x = self.norm(x)
        return self.head(x[:, 0])


def keep_count(num_patches: int, ratio: float) -> int:
    """Patch tokens kept when a fraction ``ratio`` of the original ``num_patches`` is kept."""
    return max(1, int(num_patches * ratio))


def tokens_per_block(num_patches: int, keep_ratios: Sequence[float]) -> list[int]:
    """Patch tokens (CLS excluded) that each block sees under a keep-ratio schedule."""
    return [keep_count(num_patches, ratio) for ratio in keep_ratios]


def pruning_blocks(keep_ratios: Sequence[float]) -> list[int]:
    """Indices of the blocks preceded by a predictor: those where the keep ratio drops."""
    previous = [1.0, *keep_ratios[:-1]]
    pairs = zip(previous, keep_ratios, strict=True)
    return [i for i, (before, ratio) in enumerate(pairs) if ratio < before]


def check_keep_ratios(keep_ratios: Sequence[float], depth: int) -> None:
    """Refuse a schedule of the wrong length, outside (0, 1], or increasing."""
    if len(keep_ratios) != depth:
        raise ValueError(f"need {depth} keep ratios, one per block, got {len(keep_ratios)}")
    if any(not 0.0 < ratio <= 1.0 for ratio in keep_ratios):
        raise ValueError(f"keep ratios must lie in (0, 1], got {tuple(keep_ratios)}")
    if any(later > earlier for earlier, later in pairwise(keep_ratios)):
        raise ValueError(f"keep ratios must be non-increasing, got {tuple(keep_ratios)}")


class TokenPredictor(nn.Sequential):
    """Section 3.1's token-importance predictor, as vitprof assumes it (the note names
    ``predictor(tokens)`` but gives no layers): LayerNorm, Linear(D, D//4), GELU, Linear(D//4, 1).

    Applied to every patch token; returns one importance score per token, shape (B, N).
    """

    def __init__(self, dim: int) -> None:
        super().__init__(
            nn.LayerNorm(dim), nn.Linear(dim, dim // 4), nn.GELU(), nn.Linear(dim // 4, 1)
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N)."""
        return super().forward(tokens).squeeze(-1)


def prune_tokens(tokens: torch.Tensor, predictor: nn.Module, keep: int) -> torch.Tensor:
    """Keep the CLS token and the ``keep`` patch tokens the predictor scores highest."""
    cls_token, patches = tokens[:, :1], tokens[:, 1:]
    importance = predictor(patches)  # (B, N)
    top_k_indices = torch.topk(importance, keep, dim=1).indices  # (B, keep)
    index = top_k_indices.unsqueeze(-1).expand(-1, -1, patches.shape[-1])
    patches = patches.gather(1, index)
    return torch.cat([cls_token, patches], dim=1)


class DynamicCifarViT(CifarViT):
    """Section 3.1: CIFAR-ViT with Dynamic-ViT token pruning under a keep-ratio schedule.

    ``keep_ratios[i]`` is the fraction of the ORIGINAL patch tokens kept before block ``i``;
    block ``i`` sees ``1 + keep_count(num_patches, keep_ratios[i])`` tokens. A predictor (in the
    ModuleList ``predictors``, in the order of :attr:`prune_at`) precedes each block where the
    ratio drops. The schedule is kept as attributes for closed-form counts: ``keep_ratios``,
    ``keep_tokens`` (patch tokens before each block, :func:`tokens_per_block`) and ``prune_at``.
    """

    def __init__(self, keep_ratios: Sequence[float] = DEFAULT_KEEP_RATIOS, **kwargs: Any) -> None:
        depth = kwargs.setdefault("depth", len(keep_ratios))
        check_keep_ratios(keep_ratios, depth)
        super().__init__(**kwargs)
        embed_dim = self.cls_token.shape[-1]
        self.keep_ratios = tuple(keep_ratios)
        self.keep_tokens = tuple(tokens_per_block(self.patch_embed.num_patches, keep_ratios))
        self.prune_at = tuple(pruning_blocks(keep_ratios))
        self.predictors = nn.ModuleList([TokenPredictor(embed_dim) for _ in self.prune_at])
        self.predictors.apply(init_weights)

    def forward_blocks(self, x: torch.Tensor) -> torch.Tensor:
        """Run the blocks, pruning patch tokens before each block listed in ``prune_at``."""
        predictor_before = dict(zip(self.prune_at, self.predictors, strict=True))
        for i, block in enumerate(self.blocks):
            if i in predictor_before:
                x = prune_tokens(x, predictor_before[i], self.keep_tokens[i])
            x = block(x)
        return x


def build_cifar_vit(
    image_size: int = 32,
    num_classes: int = 10,
    patch_size: int = 4,
    embed_dim: int = 512,
    depth: int = 6,
    num_heads: int = 8,
    mlp_ratio: float = 4.0,
) -> CifarViT:
    """Note 002's CIFAR-ViT; the defaults are the note's Base model (D=512, depth 6, 8 heads)."""
    return CifarViT(
        image_size=image_size,
        patch_size=patch_size,
        num_classes=num_classes,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        mlp_ratio=mlp_ratio,
    )


def build_cifar_vit_size(size: str, image_size: int = 32, num_classes: int = 10) -> CifarViT:
    """One row of the note's "模型缩放" table: ``tiny``, ``small``, ``base`` or ``large``."""
    if size not in CIFAR_VIT_SIZES:
        raise ValueError(f"unknown size {size!r}; known: {', '.join(CIFAR_VIT_SIZES)}")
    return build_cifar_vit(image_size=image_size, num_classes=num_classes, **CIFAR_VIT_SIZES[size])


def build_linear_attention_vit(
    image_size: int = 32,
    num_classes: int = 10,
    patch_size: int = 4,
    embed_dim: int = 512,
    depth: int = 6,
    num_heads: int = 8,
    mlp_ratio: float = 4.0,
) -> CifarViT:
    """Section 3.2: the CIFAR-ViT with :class:`LinearAttention` in every block."""
    return CifarViT(
        image_size=image_size,
        patch_size=patch_size,
        num_classes=num_classes,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        mlp_ratio=mlp_ratio,
        attn_layer=LinearAttention,
    )


def build_dynamic_vit(
    keep_ratios: Sequence[float] = DEFAULT_KEEP_RATIOS,
    image_size: int = 32,
    num_classes: int = 10,
    patch_size: int = 4,
    embed_dim: int = 512,
    depth: int | None = None,
    num_heads: int = 8,
    mlp_ratio: float = 4.0,
) -> DynamicCifarViT:
    """Section 3.1: the CIFAR-ViT with token pruning; ``depth`` defaults to ``len(keep_ratios)``.

    The other arguments are :func:`build_cifar_vit`'s.
    """
    return DynamicCifarViT(
        keep_ratios,
        image_size=image_size,
        patch_size=patch_size,
        num_classes=num_classes,
        embed_dim=embed_dim,
        depth=len(keep_ratios) if depth is None else depth,
        num_heads=num_heads,
        mlp_ratio=mlp_ratio,
    )
