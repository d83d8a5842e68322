"""DynamicViT, EViT and ToMe on timm's DeiT, written from the papers' descriptions of their
algorithms (vitprof's own code: nothing is copied from the papers' repositories).

Each builder takes a timm ``VisionTransformer`` with a class token (``deit_small_patch16_224``
and the like, ``pretrained=False``) and returns a :class:`ReducedViT` that reuses its patch
embedding, class token, position table, blocks' layers, final norm and head. The reduction's own
modules are children of the block they act in, so that vitprof counts them apart from the
backbone by module path:

* **DynamicViT** (Rao et al., NeurIPS 2021): before the first block of each stage (blocks 3, 6, 9
  of 12) a prediction module scores the patch tokens: LayerNorm, Linear(D, D), GELU, whose first
  half of channels is the local feature and the mean over tokens of the second half the global
  feature; their concatenation goes through Linear(D, D/2), GELU, Linear(D/2, D/4), GELU,
  Linear(D/4, 2) and a softmax, keep or drop. At inference ``torch.topk`` keeps
  ``int(patches * rho ** s)`` of the original patch tokens at stage s (the class token always
  stays). Module: ``blocks.i.predictor``.
* **EViT** (Liang et al., ICLR 2022): in blocks 4, 7 and 10 (1-based; 3, 6, 9 here) the
  attention runs on every token; between it and the MLP the ``ceil(keep_rate * (N - 1))``
  patch tokens the class token attends to most (attention averaged over heads) are kept and,
  with fusion, the others are fused into one token, their sum weighted by that attention.
  Module: ``blocks.i.reorganize``.
* **ToMe** (Bolya et al., ICLR 2023): in every block, between the attention and the MLP,
  bipartite soft matching splits the tokens alternately into sets A and B, scores every A-B
  pair by the cosine similarity of the tokens' keys (averaged over heads), and merges the ``r``
  A tokens with the best match into their B token (a size-weighted mean); the class token is
  never merged. The attention is proportional: each key's logit gains ``log(size)``, the number
  of patches the token stands for. ``r`` is at most half the tokens, class token aside.
  Module: ``blocks.i.merge``.

The attention is written with explicit matmuls (EViT needs the class token's row of the
attention map, ToMe the keys and a logit bias), from the timm block's own ``qkv`` and ``proj``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

DYNAMICVIT_STAGES = (3, 6, 9)  # blocks before which DynamicViT's predictors prune (of 12)
EVIT_BLOCKS = (3, 6, 9)  # EViT's blocks 4, 7, 10 (1-based): where it reorganizes (of 12)


def attention(attn: Any, x: torch.Tensor, bias: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """timm ``Attention`` ``attn`` on ``x`` (B, N, D) with explicit matmuls: its output (B, N,
    D), the attention map (B, heads, N, N) and the keys (B, heads, N, head_dim). ``bias``
    (B, N), added to every query's logit of each key, is ToMe's proportional attention."""
    batch, tokens, dim = x.shape
    qkv = attn.qkv(x).reshape(batch, tokens, 3, attn.num_heads, attn.head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    logits = (q * attn.scale) @ k.transpose(-2, -1)
    if bias is not None:
        logits = logits + bias[:, None, None, :]
    probs = logits.softmax(dim=-1)
    out = (probs @ v).transpose(1, 2).reshape(batch, tokens, dim)
    return attn.proj(out), probs, k


class ReducedViT(nn.Module):
    """A DeiT whose blocks reduce tokens: patch embedding, class token and positions, the
    blocks, final norm, the head on the class token (timm's ``global_pool="token"``)."""

    def __init__(self, deit: Any, blocks: Sequence[nn.Module], method: str) -> None:
        """``deit``: a timm ``VisionTransformer`` (``Any``: torch types its submodules
        ``Tensor | Module``), whose layers ``blocks`` reuse."""
        super().__init__()
        self.method = method
        self.patch_embed = deit.patch_embed
        self.cls_token = deit.cls_token
        self.pos_embed = deit.pos_embed
        self.blocks = nn.ModuleList(blocks)
        self.norm = deit.norm
        self.head = deit.head

    @property
    def num_patches(self) -> int:
        return int(self.pos_embed.shape[1]) - 1

    def forward_blocks(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.forward_blocks(x))
        return self.head(x[:, 0])


# ----------------------------------------------------------------------------- DynamicViT


class TokenPredictor(nn.Module):
    """DynamicViT's prediction module on the patch tokens (B, N, D): the keep probability of
    each, (B, N), from its local feature and the global feature of all of them."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.embed = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU())
        self.decide = nn.Sequential(
            nn.Linear(dim, dim // 2), nn.GELU(), nn.Linear(dim // 2, dim // 4), nn.GELU(),
            nn.Linear(dim // 4, 2))

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        features = self.embed(patches)
        half = features.shape[-1] // 2
        local, pooled = features[..., :half], features[..., half:].mean(dim=1, keepdim=True)
        both = torch.cat([local, pooled.expand(-1, patches.shape[1], -1)], dim=-1)
        return self.decide(both).softmax(dim=-1)[..., 0]


class PrunedBlock(nn.Module):
    """A DeiT block preceded, at the start of a DynamicViT stage, by a predictor and the top-k
    that keeps ``keep`` patch tokens (the class token always stays)."""

    def __init__(self, block: Any, keep: int | None = None) -> None:
        super().__init__()
        self.keep = keep
        device = next(block.parameters()).device  # the predictor where the block is (meta)
        width = block.norm1.normalized_shape[0]
        self.predictor = TokenPredictor(width).to(device) if keep else None
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.predictor is not None and self.keep is not None:
            cls_token, patches = x[:, :1], x[:, 1:]
            kept = self.predictor(patches).topk(self.keep, dim=1).indices
            index = kept.unsqueeze(-1).expand(-1, -1, patches.shape[-1])
            x = torch.cat([cls_token, patches.gather(1, index)], dim=1)
        return self.block(x)


def dynamic_vit(deit: Any, rho: float, stages: Sequence[int] = DYNAMICVIT_STAGES
                ) -> ReducedViT:
    """DynamicViT with keep ratio ``rho``: stage s (before block ``stages[s-1]``) keeps
    ``int(patches * rho ** s)`` of the original patch tokens."""
    patches = int(deit.pos_embed.shape[1]) - 1
    keep = {at: int(patches * rho ** (s + 1)) for s, at in enumerate(stages)}
    blocks = [PrunedBlock(block, keep.get(i)) for i, block in enumerate(deit.blocks)]
    return ReducedViT(deit, blocks, f"DynamicViT rho={rho:g}")


# ----------------------------------------------------------------------------------- EViT


class Reorganize(nn.Module):
    """EViT's token reorganization between attention and MLP: keep the ``ceil(keep_rate *
    (N - 1))`` patch tokens the class token attends to most; with ``fuse``, add one token, the
    others' sum weighted by that attention."""

    def __init__(self, keep_rate: float, fuse: bool) -> None:
        super().__init__()
        self.keep_rate, self.fuse = keep_rate, fuse

    def forward(self, x: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        cls_token, patches = x[:, :1], x[:, 1:]
        keep = math.ceil(self.keep_rate * patches.shape[1])
        cls_attention = probs[:, :, 0, 1:].mean(dim=1)  # (B, N - 1)
        order = cls_attention.argsort(dim=1, descending=True)
        kept, dropped = order[:, :keep], order[:, keep:]
        width = patches.shape[-1]
        tokens = [cls_token, patches.gather(1, kept.unsqueeze(-1).expand(-1, -1, width))]
        if self.fuse:
            weights = cls_attention.gather(1, dropped).unsqueeze(1)  # (B, 1, dropped)
            others = patches.gather(1, dropped.unsqueeze(-1).expand(-1, -1, width))
            tokens.append(weights @ others)
        return torch.cat(tokens, dim=1)


class EViTBlock(nn.Module):
    """A DeiT block whose attention map feeds a :class:`Reorganize` before its MLP."""

    def __init__(self, block: Any, reorganize: Reorganize | None = None) -> None:
        super().__init__()
        self.norm1, self.attn = block.norm1, block.attn
        self.norm2, self.mlp = block.norm2, block.mlp
        self.reorganize = reorganize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, probs, _ = attention(self.attn, self.norm1(x))
        x = x + out
        if self.reorganize is not None:
            x = self.reorganize(x, probs)
        return x + self.mlp(self.norm2(x))


def evit(deit: Any, keep_rate: float, fuse: bool = True,
         at: Sequence[int] = EVIT_BLOCKS) -> ReducedViT:
    """EViT with ``keep_rate`` in the blocks ``at``, fusing the inattentive tokens if ``fuse``."""
    blocks = [EViTBlock(block, Reorganize(keep_rate, fuse) if i in at else None)
              for i, block in enumerate(deit.blocks)]
    return ReducedViT(deit, blocks, f"EViT keep={keep_rate:g}{' fused' if fuse else ''}")


# ----------------------------------------------------------------------------------- ToMe


class BipartiteMerge(nn.Module):
    """ToMe's bipartite soft matching: merge ``r`` tokens of set A (even positions) into their
    most similar token of set B (odd positions), by the cosine similarity of their keys; the
    class token (position 0) is never merged. Sizes (B, N) say how many patches each token
    stands for; a merge is the size-weighted mean."""

    def __init__(self, r: int) -> None:
        super().__init__()
        self.r = r

    def forward(self, x: torch.Tensor, keys: torch.Tensor, size: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        r = min(self.r, (x.shape[1] - 1) // 2)
        if r <= 0:
            return x, size
        metric = keys.mean(dim=1)
        metric = metric / metric.norm(dim=-1, keepdim=True)
        scores = metric[:, ::2] @ metric[:, 1::2].transpose(-2, -1)  # (B, |A|, |B|)
        scores[:, 0, :] = -math.inf  # the class token is A's first
        return merge_by_scores(x, scores, size, r)


def merge_by_scores(x: torch.Tensor, scores: torch.Tensor, size: torch.Tensor, r: int
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``r`` tokens of set A (even positions of ``x``) whose best ``scores`` (B, |A|, |B|)
    are highest, each added into its best match in set B (odd positions) as the size-weighted
    mean, the rest of A kept; the new tokens (A's kept, then B) and their sizes. The matches
    are chosen by indices (a max's, an argsort's): no score's value reaches the tokens."""
    best, match = scores.max(dim=-1)
    order = best.argsort(dim=-1, descending=True)
    merged, kept = order[:, :r], order[:, r:].sort(dim=-1).values
    weighted, width = x * size.unsqueeze(-1), x.shape[-1]
    a_x, b_x = weighted[:, ::2], weighted[:, 1::2]
    a_size, b_size = size[:, ::2], size[:, 1::2]
    into = match.gather(1, merged)
    b_x = b_x.scatter_add(1, into.unsqueeze(-1).expand(-1, -1, width),
                          a_x.gather(1, merged.unsqueeze(-1).expand(-1, -1, width)))
    b_size = b_size.scatter_add(1, into, a_size.gather(1, merged))
    a_x = a_x.gather(1, kept.unsqueeze(-1).expand(-1, -1, width))
    new_size = torch.cat([a_size.gather(1, kept), b_size], dim=1)
    return torch.cat([a_x, b_x], dim=1) / new_size.unsqueeze(-1), new_size


class ToMeBlock(nn.Module):
    """A DeiT block with proportional attention and a :class:`BipartiteMerge` before its MLP."""

    def __init__(self, block: Any, r: int) -> None:
        super().__init__()
        self.norm1, self.attn = block.norm1, block.attn
        self.norm2, self.mlp = block.norm2, block.mlp
        self.merge = BipartiteMerge(r)

    def forward(self, x: torch.Tensor, size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, _, keys = attention(self.attn, self.norm1(x), size.log())
        x, size = self.merge(x + out, keys, size)
        return x + self.mlp(self.norm2(x)), size


class ToMeViT(ReducedViT):
    """The blocks carry each token's size from block to block."""

    def forward_blocks(self, x: torch.Tensor) -> torch.Tensor:
        size = x.new_ones(x.shape[:2])
        for block in self.blocks:
            x, size = block(x, size)
        return x


def tome(deit: Any, r: int) -> ReducedViT:
    """ToMe merging ``r`` tokens in every block."""
    return ToMeViT(deit, [ToMeBlock(block, r) for block in deit.blocks], f"ToMe r={r}")
