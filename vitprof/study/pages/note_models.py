"""What the note models with a page of their own are: the "About this model" paragraphs of
their pages, read from the built model's attributes (nothing is counted here)."""

from __future__ import annotations

from typing import Any


def _listed(values: tuple[float, ...] | tuple[int, ...]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def dynamic_vit_about(model: Any) -> list[str]:
    """``note002_dynamic_vit`` (``model``, a :class:`~vitprof.models.notes.note002.
    DynamicCifarViT`; ``Any``, as torch types its submodules' attributes ``Tensor | Module``):
    the model, its keep ratios and the tokens each block sees,
    what is vitprof's assumption, where the predictors are counted, why its crossover is
    not the closed form's N* = M, and the token-reduction page whose first row it is.

    With block i seeing a fraction r_i of the input's tokens, the attention cores of the model
    grow as N^2 sum(r_i^2) and its MLPs as N sum(r_i): core = MLP at N* = M sum(r_i) /
    sum(r_i^2) input tokens (before the predictors' own Linears, counted as MLP)."""
    ratios, patches = model.keep_ratios, model.patch_embed.num_patches
    block = model.blocks[0]
    width, mlp_width = model.cls_token.shape[-1], block.mlp.fc1.out_features
    tokens = tuple(1 + kept for kept in model.keep_tokens)
    crossover = mlp_width * sum(ratios) / sum(r * r for r in ratios)
    prune_at = ", ".join(map(str, model.prune_at))
    return [
        f"Note 002 section 3.1's Dynamic ViT as vitprof builds it "
        f"(`vitprof.models.notes.note002.DynamicCifarViT`): the note's CIFAR-ViT ({patches} "
        f"patch tokens and a CLS token, D = {width}, {len(model.blocks)} blocks, "
        f"{block.attn.num_heads} heads, MLP {mlp_width}) with token pruning. Before a block "
        "whose keep ratio drops, a token-importance predictor scores the patch tokens and "
        "torch.topk keeps the best; the CLS token is always kept. The keep ratios, of the "
        f"{patches} patch tokens before each block, are {_listed(ratios)}: the blocks see "
        f"{_listed(tokens)} tokens.",
        "The note gives neither the predictor's layers nor the keep ratios: the predictor "
        "(LayerNorm, Linear(D, D/4), GELU, Linear(D/4, 1)) and the ratios are vitprof's "
        "assumptions (DynamicViT's usual choices), not the note's. A predictor is counted in "
        f"the block whose input it prunes (blocks {prune_at}): its LayerNorm as `norm`, the "
        "rest as `mlp`.",
        "Two crossovers appear under Cost against image size, both right. The closed form's "
        f"N* = M = {mlp_width} is per block, for a block that sees all N tokens. The whole "
        "model's is in the tokens of its input: block i sees a fraction r_i of them, so its "
        "attention cores grow as N^2 sum(r_i^2) and its MLPs as N sum(r_i), and they meet at "
        f"N* = M sum(r_i) / sum(r_i^2) = {crossover:,.1f} input tokens, a little more with the "
        "predictors' Linears counted as MLP (the sweep measures it).",
        "This model is the first row of [token_reduction.md](token_reduction.md), where the "
        "family the note's section follows (DynamicViT, EViT and ToMe, written on timm's DeiT) "
        "is counted block by block, the predictors' and the matching's MACs apart, against "
        "the papers' published rows.",
    ]
