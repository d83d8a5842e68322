"""vitprof's hand-written models: the source notes' (:mod:`vitprof.models.notes`), the
ViT-22B-style model (:mod:`vitprof.models.vit22b`) and the reference ViT
(:mod:`vitprof.models.reference`): spec inferrers and the zoo's entries. Their module names
follow timm's, and the graph recognizer places every one of them: no component table.
The spec inferrers take ``model: Any``: they read attributes torch types as ``Tensor | Module``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vitprof.core.vocab import AttentionImpl, AttentionKind, FinalNorm, HeadKind
from vitprof.models.libraries.base import Factory, ModelLibrary, ZooEntry, is_class
from vitprof.models.libraries.describe import grid_image_size, require

if TYPE_CHECKING:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

NAME = "notes"


def _note001(model: Any) -> ViTSpec:
    from vitprof.models.closed_form import ViTSpec
    from vitprof.models.notes.note001 import PatcherConv

    tokens = model.pos_embedding
    require(tokens.class_token.shape[0] == 1, model,
            "note 001's tokens built for a batch above 1 (their params grow with it)")
    if isinstance(model.patcher, PatcherConv):
        conv = model.patcher.conv
        patch, in_chans = int(conv.kernel_size[0]), conv.in_channels
    else:
        patch = int(model.patcher.unfold.kernel_size)
        in_chans = model.patcher.linear_projection.in_features // (patch * patch)
    encoders = list(model.transformer_encoders)
    return ViTSpec(
        image_size=grid_image_size(tokens.pos_embedding.shape[1] - 1, patch, model),
        patch_size=patch,
        width=tokens.class_token.shape[-1],
        depth=len(encoders),
        heads=encoders[0].multihead_attention.num_heads,
        mlp_width=encoders[0].mlp[0].out_features,
        num_classes=model.mlp_head.linear_1.out_features,
        in_chans=in_chans,
        head=HeadKind.HIDDEN,
        final_norm=FinalNorm.POOLED,
        attention_impl=AttentionImpl.MHA_WEIGHTS,  # called as (x, x, x) with need_weights
    )


def _timm_style_note(model: Any, qkv_bias: bool, **fields: Any) -> ViTSpec:
    """Notes 002 and 004: ``patch_embed.proj``, ``blocks[i].attn`` / ``.mlp.fc1``, ``head``,
    a class token and a position embedding over every token, ``(q @ k^T) * scale``."""
    from vitprof.models.closed_form import ViTSpec

    conv = model.patch_embed.proj
    patch = int(conv.kernel_size[0])
    return ViTSpec(
        image_size=grid_image_size(model.patch_embed.num_patches, patch, model),
        patch_size=patch,
        width=conv.out_channels,
        depth=len(model.blocks),
        heads=model.blocks[0].attn.num_heads,
        mlp_width=model.blocks[0].mlp.fc1.out_features,
        num_classes=model.head.out_features,
        in_chans=conv.in_channels,
        qkv_bias=qkv_bias,
        attention_impl=AttentionImpl.SCALED_SCORES,
        **fields,
    )


def _note002(model: Any) -> ViTSpec:
    from vitprof.models.notes.note002 import DynamicCifarViT, LinearAttention

    attn = model.blocks[0].attn
    linear = isinstance(attn, LinearAttention)
    pruned = isinstance(model, DynamicCifarViT)
    return _timm_style_note(
        model,
        qkv_bias=attn.q.bias is not None,
        attention=AttentionKind.LINEAR if linear else AttentionKind.SOFTMAX,
        tokens_per_block=model.keep_tokens if pruned else None,
        prune_at=model.prune_at if pruned else None,
    )


def _note004(model: Any) -> ViTSpec:
    return _timm_style_note(model, qkv_bias=model.blocks[0].attn.qkv.bias is not None)


def _parallel(model: Any) -> ViTSpec:
    """No spec describes the ViT-22B-style model: refused with what it lacks."""
    require(False, model, "parallel attention/MLP blocks, QK-norm, bias-free q/k/v/out "
            "linears and RMSNorms (a ViTSpec is a sequential pre-norm ViT with LayerNorms)")
    raise AssertionError("unreachable")


def _reference(model: Any) -> ViTSpec:
    """The reference ViT keeps the spec it was built from."""
    return model.spec


def _lazy(module: str, function: str, **fixed: Any) -> Factory:
    """A factory that imports ``module`` (and torch) only when it builds; ``options``: further
    keywords of the note's builder (note 001's ``batch_size``, note 002's ``num_heads``), over
    the ``fixed`` ones."""
    def build(image_size: int, num_classes: int, **options: Any) -> nn.Module:
        factory = getattr(importlib.import_module(module), function)
        return factory(image_size=image_size, num_classes=num_classes, **{**fixed, **options})

    return build


def _note(module: str, function: str, **fixed: Any) -> Factory:
    return _lazy(f"vitprof.models.notes.{module}", function, **fixed)


ENTRIES = (
    ZooEntry("note001_vit_b16", NAME, "note 001: from-scratch ViT-B/16 with "
             "nn.MultiheadAttention and a hidden-layer MLPHead, 10 classes",
             _note("note001", "build_note001_vit"), 224, 10, 16),
    ZooEntry("note002_cifar_vit", NAME, "note 002: CIFAR-ViT, 32px, patch 4, D=512, "
             "depth 6, 8 heads, separate Q/K/V linears",
             _note("note002", "build_cifar_vit"), 32, 10, 4),
    ZooEntry("note002_linear_attention", NAME, "note 002 section 3.2: the CIFAR-ViT "
             "with ReLU linear attention (K^T V first), per head: vitprof's reading; the "
             "note's one (D, D) context is num_heads=1",
             _note("note002", "build_linear_attention_vit"), 32, 10, 4),
    ZooEntry("note002_dynamic_vit", NAME, "note 002 section 3.1: the CIFAR-ViT with "
             "Dynamic-ViT token pruning; the predictor layers and keep ratios are vitprof's "
             "assumptions, the note gives neither",
             _note("note002", "build_dynamic_vit"), 32, 10, 4),
    ZooEntry("note004_vit_b16", NAME, "note 004: timm-style ViT-B/16 with "
             "qkv_bias=False by default", _note("note004", "build_note004_vit"), 224, 1000, 16),
    *(
        ZooEntry(f"note002_cifar_vit_{size}", NAME, f"note 002 scaling table: {size}",
                 _note("note002", "build_cifar_vit_size", size=size), 32, 10, 4)
        for size in ("tiny", "small", "base", "large")
    ),
    ZooEntry("vit_22b_parallel", NAME, "ViT-22B-style (Dehghani et al. 2023), written by "
             "vitprof: parallel attention/MLP blocks on one norm, QK-norm, bias-free "
             "q/k/v/out linears, RMSNorms (no bias, no centering), MLP biases kept, at "
             "ViT-22B's sizes (48 layers, width 6144, 48 heads, "
             "MLP 24576, patch 14); a plain ViT's stem and head (vitprof's choice)",
             _lazy("vitprof.models.vit22b", "build_vit_22b_parallel"), 224, 1000, 14),
)

LIBRARY = ModelLibrary(
    name=NAME,
    tables=(),
    inferrers=(
        (is_class("vitprof.models.notes.note001", "ViT"), _note001),
        (is_class("vitprof.models.notes.note002", "CifarViT"), _note002),
        (is_class("vitprof.models.notes.note004", "VisionTransformer"), _note004),
        (is_class("vitprof.models.reference", "ReferenceViT"), _reference),
        (is_class("vitprof.models.vit22b", "ParallelViT"), _parallel),
    ),
    known="the vitprof note models and the reference ViT",
    entries=ENTRIES,
)
