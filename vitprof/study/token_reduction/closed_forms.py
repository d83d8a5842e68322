"""Token reduction in closed form: the tokens each method keeps and the MACs of a block, of
DynamicViT's predictor, EViT's fusion and ToMe's matching, as arithmetic on the widths and the
token counts. The page writes them beside vitprof's counts, which they must equal.

Conventions: MACs of matmuls and linears (a bias is no MAC); D the width, M the MLP's hidden
width, d a head's width; N counts the class token.
"""

from __future__ import annotations

import math


def block_macs(attention_tokens: int, mlp_tokens: int, width: int, mlp_width: int) -> int:
    """A pre-norm ViT block whose attention sees ``attention_tokens`` (Na) and whose MLP sees
    ``mlp_tokens`` (Nm): q, k, v and output projections 4 Na D^2, QK^T and AV 2 Na^2 D, MLP
    2 Nm D M."""
    na, nm, d = attention_tokens, mlp_tokens, width
    return 4 * na * d * d + 2 * na * na * d + 2 * nm * d * mlp_width


def predictor_macs(patches: int, width: int) -> int:
    """DynamicViT's predictor on ``patches`` tokens: Linear(D, D), Linear(D, D/2),
    Linear(D/2, D/4), Linear(D/4, 2) per token."""
    d = width
    return patches * (d * d + d * (d // 2) + (d // 2) * (d // 4) + (d // 4) * 2)


def fusion_macs(dropped: int, width: int) -> int:
    """EViT's fused token: the ``dropped`` tokens summed with their attention as weights."""
    return dropped * width


def matching_macs(tokens: int, head_width: int) -> int:
    """ToMe's bipartite matching on ``tokens``: the cosine similarity of every pair of set A
    (ceil(N/2) tokens) and set B (floor(N/2)), on keys of a head's width."""
    return math.ceil(tokens / 2) * (tokens // 2) * head_width


def dynamic_vit_kept(patches: int, rho: float, stages: int = 3) -> list[int]:
    """DynamicViT's patch tokens kept at stages 1..``stages``: ``int(patches * rho ** s)``."""
    return [int(patches * rho ** s) for s in range(1, stages + 1)]


def evit_kept(patches: int, keep_rate: float, fuse: bool, stages: int = 3) -> list[int]:
    """EViT's tokens (class token included) after each of ``stages`` reorganizations:
    ``ceil(keep_rate * (N - 1))`` of the N - 1 tokens besides the class token, and the fused
    token when fusing."""
    tokens, after = 1 + patches, []
    for _ in range(stages):
        tokens = 1 + math.ceil(keep_rate * (tokens - 1)) + (1 if fuse else 0)
        after.append(tokens)
    return after


def tome_kept(patches: int, r: int, blocks: int) -> list[int]:
    """ToMe's tokens after each block's merge: ``r`` fewer, at most half of those besides the
    class token."""
    tokens, after = 1 + patches, []
    for _ in range(blocks):
        tokens -= min(r, (tokens - 1) // 2)
        after.append(tokens)
    return after
