"""Token reduction counted by vitprof, block by block: each model of
:mod:`vitprof.study.token_reduction.models` built on the meta device and analysed at batch 1 at
its backbone's image size (224 px for every backbone of :data:`BACKBONES`),
its MACs grouped by module path, the tokens each block's attention and MLP see read from the
shapes of a meta forward.

Block i is everything under the module ``blocks.i``; the reduction's own modules in it
(``predictor``, ``reorganize``, ``merge``: :data:`REDUCTION_MODULES`) are counted apart from the
backbone's layers. Outside the blocks: the patch embedding and the head (the final norm has no
MACs).

ToMe's merge adds tokens into their match with ``aten.scatter_add``, priced by vitprof's formula
table as one add per element added.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
from torch import nn

from vitprof.analysis import analyze
from vitprof.study.token_reduction.models import dynamic_vit, evit, tome

REDUCTION_MODULES = ("predictor", "reorganize", "merge")
_MODULE = re.compile(rf"^blocks\.(\d+)(?:\.({'|'.join(REDUCTION_MODULES)}))?(?:\.|$)")


def _timm(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import timm

        return timm.create_model(name, pretrained=False)

    return build


def _deit_256() -> nn.Module:
    """DynamicViT's DeiT-256: DeiT with D = 256, 4 heads, 12 blocks, MLP 4D (its ``infer.py``)."""
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(embed_dim=256, depth=12, num_heads=4)


# The backbones vitprof builds (timm, no weights); any other backbone of a published row is
# named by the page as not built.
BACKBONES: dict[str, Callable[[], nn.Module]] = {
    "deit_tiny_patch16_224": _timm("deit_tiny_patch16_224"),
    "deit_256": _deit_256,
    "deit_small_patch16_224": _timm("deit_small_patch16_224"),
    "deit_base_patch16_224": _timm("deit_base_patch16_224"),
}


def with_reduction(deit: nn.Module, setting: str) -> nn.Module:
    """``deit`` with the reduction ``setting`` names: ``dense`` (as it is), ``rho=R``
    (DynamicViT), ``keep=K`` or ``keep=K fuse`` (EViT), ``r=R`` (ToMe)."""
    key, _, rest = setting.partition("=")
    if setting == "dense":
        return deit
    if key == "rho":
        return dynamic_vit(deit, float(rest))
    if key == "keep":
        rate, _, fuse = rest.partition(" ")
        return evit(deit, float(rate), fuse == "fuse")
    if key == "r":
        return tome(deit, int(rest))
    raise ValueError(f"unknown token-reduction setting {setting!r}")


@dataclass(frozen=True)
class BlockCount:
    """One block: the tokens its attention and its MLP see, its layers' MACs and those of the
    reduction module in it, and the reduction's element-wise work (vector FLOPs: scores'
    softmax and pooling, the merges' weighting and adds; its top-k, sorts and gathers move
    data and cost nothing)."""

    index: int
    attention_tokens: int
    mlp_tokens: int
    backbone_macs: int
    reduction_macs: int
    reduction_vector_flops: int = 0

    @property
    def macs(self) -> int:
        return self.backbone_macs + self.reduction_macs


@dataclass(frozen=True)
class ReducedCount:
    """A backbone under one reduction setting, counted by vitprof."""

    backbone: str
    setting: str
    width: int  # D
    mlp_width: int  # the MLP's hidden width
    heads: int
    patches: int
    patch_size: int
    classes: int
    blocks: tuple[BlockCount, ...]
    outside_macs: int  # patch embedding and head
    params: int
    warnings: tuple[str, ...]

    @property
    def reduction_macs(self) -> int:
        return sum(b.reduction_macs for b in self.blocks)

    @property
    def backbone_macs(self) -> int:
        return sum(b.backbone_macs for b in self.blocks) + self.outside_macs

    @property
    def macs(self) -> int:
        return self.backbone_macs + self.reduction_macs


def _tokens_seen(model: nn.Module, image_size: int) -> dict[tuple[int, str], int]:
    """(block, "attention" or "mlp") -> tokens of the input of its q/k/v projection and of its
    MLP, from a forward on the meta device."""
    seen: dict[tuple[int, str], int] = {}
    handles = []
    for name, module in model.named_modules():
        match = re.match(r"^blocks\.(\d+)\.(?:block\.)?(attn\.qkv|mlp)$", name)
        if match:
            part = "attention" if match[2] == "attn.qkv" else "mlp"
            key = (int(match[1]), part)

            def record(_: nn.Module, args: tuple[Any, ...], key: tuple[int, str] = key) -> None:
                seen[key] = int(args[0].shape[1])

            handles.append(module.register_forward_pre_hook(record))
    try:
        with torch.no_grad():
            model(torch.empty(1, 3, image_size, image_size, device="meta"))
    finally:
        for handle in handles:
            handle.remove()
    return seen


@cache
def count(backbone: str, setting: str) -> ReducedCount:
    """``backbone`` (a key of :data:`BACKBONES`) under ``setting`` (:func:`with_reduction`),
    built on meta and counted (:func:`count_built`)."""
    deit: Any
    with torch.device("meta"):
        deit = BACKBONES[backbone]()
    return count_built(deit, setting, backbone)


def count_built(deit: Any, setting: str, backbone: str) -> ReducedCount:
    """``deit`` (a timm ``VisionTransformer`` with a class token, on meta) under ``setting``,
    counted by vitprof at batch 1 at its own image size; ``backbone`` names it."""
    deit.eval()
    first = deit.blocks[0]
    width, heads = int(deit.embed_dim), int(first.attn.num_heads)
    mlp_width, classes = int(first.mlp.fc1.out_features), int(deit.head.out_features)
    patch_size, image_size = int(deit.patch_embed.patch_size[0]), int(deit.patch_embed.img_size[0])
    model = with_reduction(deit, setting).eval()
    profile = analyze(model, image_size=image_size, device="meta",
                      name=f"{backbone} {setting}")
    macs: dict[tuple[int, bool], int] = {}
    vector: dict[int, int] = {}  # the reduction's, per block
    outside = 0
    for op in profile.ops:
        match = _MODULE.match(op.module)
        if match is None:
            outside += op.macs
            continue
        index, reduction = int(match[1]), match[2] is not None
        macs[index, reduction] = macs.get((index, reduction), 0) + op.macs
        if reduction:
            vector[index] = vector.get(index, 0) + op.vector_flops
    tokens = _tokens_seen(model, image_size)
    blocks = tuple(BlockCount(i, tokens[i, "attention"], tokens[i, "mlp"], macs.get((i, False), 0),
                              macs.get((i, True), 0), vector.get(i, 0))
                   for i in range(len(deit.blocks)))
    return ReducedCount(backbone, setting, width, mlp_width, heads,
                        int(deit.patch_embed.num_patches), patch_size, classes, blocks, outside,
                        profile.totals.params, profile.warnings)
