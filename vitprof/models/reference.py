"""A plain Vision Transformer built from a :class:`~vitprof.models.closed_form.ViTSpec`, field by
field.

The model the closed form describes, written out: a strided-conv patch embedding, prefix tokens
(class, distillation, registers) and a position embedding, pre-norm blocks (``norm1``, ``attn``
with one ``qkv`` Linear and a ``proj`` Linear, ``norm2``, ``mlp`` with ``fc1``, GELU, ``fc2``),
a final norm, pooling and a head. Names follow timm (the graph recognizer reads none of
them); a note 002 token predictor runs in the block whose input it prunes
(``blocks[i].predictor``), where the closed form counts it (its LayerNorm ``norm``, the rest
``mlp``) and where the graph recognizer places one run before the block. It builds and runs on
the meta device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vitprof.models.closed_form import AttentionImpl, AttentionKind, FinalNorm, HeadKind, ViTSpec
from vitprof.models.notes.note002 import TokenPredictor


class PatchEmbed(nn.Module):
    """``Conv2d(C, D, P, stride=P)``, then (B, D, h, w) -> (B, Np, D)."""

    def __init__(self, spec: ViTSpec) -> None:
        super().__init__()
        p = spec.patch_size
        self.proj = nn.Conv2d(spec.in_chans, spec.width, kernel_size=p, stride=p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    """Self-attention from one ``qkv`` Linear, in the implementation the spec names."""

    def __init__(self, spec: ViTSpec) -> None:
        super().__init__()
        self.heads = spec.heads
        self.scale = spec.head_dim**-0.5
        self.kind = spec.attention
        self.impl = spec.attention_impl
        self.qkv = nn.Linear(spec.width, 3 * spec.width, bias=spec.qkv_bias)
        self.proj = nn.Linear(spec.width, spec.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N, D)."""
        batch, tokens, width = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.heads, width // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, N, d)
        out = self.mix(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, width))

    def mix(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.kind is AttentionKind.LINEAR:
            return torch.relu(q) @ (torch.relu(k).transpose(-2, -1) @ v)
        if self.impl is AttentionImpl.SDPA:
            return F.scaled_dot_product_attention(q, k, v)
        if self.impl is AttentionImpl.SCALED_QUERY:
            scores = (q * self.scale) @ k.transpose(-2, -1)
        else:
            scores = (q @ k.transpose(-2, -1)) * self.scale
        return scores.softmax(dim=-1) @ v


class MultiheadAttention(nn.MultiheadAttention):
    """``nn.MultiheadAttention`` called on ``(x, x, x)`` with its default ``need_weights``."""

    def __init__(self, spec: ViTSpec) -> None:
        super().__init__(spec.width, spec.heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(x, x, x)[0]


class Mlp(nn.Module):
    """``fc1`` (D -> M), GELU, ``fc2`` (M -> D)."""

    def __init__(self, spec: ViTSpec) -> None:
        super().__init__()
        self.fc1 = nn.Linear(spec.width, spec.mlp_width)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(spec.mlp_width, spec.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def prune(x: torch.Tensor, predictor: nn.Module, prefix: int, keep: int) -> torch.Tensor:
    """Keep the ``prefix`` tokens and the ``keep`` patch tokens ``predictor`` scores highest."""
    prefix_tokens, patches = x[:, :prefix], x[:, prefix:]
    best = torch.topk(predictor(patches), keep, dim=1).indices
    patches = patches.gather(1, best.unsqueeze(-1).expand(-1, -1, patches.shape[-1]))
    return torch.cat([prefix_tokens, patches], dim=1)


class Block(nn.Module):
    """Pre-norm block: ``x + attn(norm1(x))`` then ``x + mlp(norm2(x))``; block ``index`` first
    prunes its input's patch tokens when the spec puts a predictor before it."""

    def __init__(self, spec: ViTSpec, index: int) -> None:
        super().__init__()
        self.prefix = spec.prefix_tokens
        self.keep = spec.block_patches[index]
        pruned = index in spec.predictor_blocks
        self.predictor = TokenPredictor(spec.width) if pruned else None
        uses_mha = (
            spec.attention is AttentionKind.SOFTMAX
            and spec.attention_impl is AttentionImpl.MHA_WEIGHTS
        )
        self.norm1 = nn.LayerNorm(spec.width)
        self.attn = MultiheadAttention(spec) if uses_mha else Attention(spec)
        self.norm2 = nn.LayerNorm(spec.width)
        self.mlp = Mlp(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.predictor is not None:
            x = prune(x, self.predictor, self.prefix, self.keep)
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def _prefix(spec: ViTSpec, count: int) -> nn.Parameter | None:
    return nn.Parameter(torch.zeros(1, count, spec.width)) if count else None


class ReferenceViT(nn.Module):
    """The ViT a :class:`ViTSpec` describes; see the module docstring."""

    def __init__(self, spec: ViTSpec) -> None:
        super().__init__()
        self.spec = spec
        self.image_size = spec.image_size
        d, n_prefix = spec.width, spec.prefix_tokens
        self.patch_embed = PatchEmbed(spec)
        self.cls_token = _prefix(spec, int(spec.class_token))
        self.dist_token = _prefix(spec, int(spec.dist_token))
        self.reg_token = _prefix(spec, spec.reg_tokens)
        rows = spec.num_patches + (n_prefix if spec.pos_embed_covers_prefix else 0)
        self.pos_embed = nn.Parameter(torch.zeros(1, rows, d))
        self.blocks = nn.ModuleList([Block(spec, i) for i in range(spec.depth)])
        self.norm = nn.LayerNorm(d) if spec.final_norm is FinalNorm.TOKENS else nn.Identity()
        self.fc_norm = nn.LayerNorm(d) if spec.final_norm is FinalNorm.POOLED else nn.Identity()
        self.pre_logits: nn.Module = nn.Identity()
        if spec.head is HeadKind.HIDDEN:
            self.pre_logits = nn.Sequential(nn.Linear(d, d), nn.GELU())
        elif spec.head is HeadKind.POOLER:
            self.pre_logits = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        k = spec.num_classes
        self.head = nn.Linear(d, k) if k else nn.Identity()
        if spec.head is HeadKind.DISTILLED:
            self.head_dist = nn.Linear(d, k) if k else nn.Identity()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, T + Np, D): patches, prefix tokens, position embedding."""
        x = self.patch_embed(x)
        prefix = [
            t.expand(x.shape[0], -1, -1)
            for t in (self.cls_token, self.dist_token, self.reg_token)
            if t is not None
        ]
        if self.spec.pos_embed_covers_prefix:
            return torch.cat([*prefix, x], dim=1) + self.pos_embed
        return torch.cat([*prefix, x + self.pos_embed], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, K), or (B, D) without a classifier."""
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        if self.spec.head is HeadKind.DISTILLED:
            pooled = self.fc_norm(x[:, :2])
            return (self.head(pooled[:, 0]) + self.head_dist(pooled[:, 1])) / 2
        if self.spec.head is HeadKind.GAP:
            x = x[:, self.spec.prefix_tokens :].mean(dim=1)
        else:
            x = x[:, 0]
        return self.head(self.pre_logits(self.fc_norm(x)))


def build_reference_vit(spec: ViTSpec) -> ReferenceViT:
    """The reference ViT of ``spec`` on the current default device (``torch.device('meta')``)."""
    return ReferenceViT(spec)
