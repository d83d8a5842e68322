"""``spec_from_model``: the :class:`~vitprof.models.closed_form.ViTSpec` of a built Vision
Transformer.

Known implementations, read from their attributes (or their config):

* torchvision ``VisionTransformer`` (MHA without weights, so SDPA);
* timm ``VisionTransformer`` and ``VisionTransformerDistilled``: class / distillation / register
  tokens, ``no_embed_class``, token or ``avg`` pooling, ``norm`` or ``fc_norm``, fused or
  non-fused attention;
* Hugging Face ``ViTModel``, ``ViTForImageClassification`` and their DeiT twins, from the config
  (so the 4.x and 5.x module layouts alike), sdpa or eager attention;
* the note models of :mod:`vitprof.models` and the reference ViT.

Anything a spec cannot describe (layer scale, q/k norms, another activation or norm, a conv
stem, attention pooling...) is a :class:`~vitprof.core.errors.UserError`, and so is a model whose
parameter count differs from the spec's closed form.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from torch import nn

from vitprof.core.errors import UserError
from vitprof.count.families.generic import is_norm
from vitprof.models.closed_form import (
    AttentionImpl,
    AttentionKind,
    FinalNorm,
    HeadKind,
    ViTSpec,
    closed_form,
)

_GELU_CLASSES = ("GELU", "GELUTanh")  # nn.GELU and timm's GELU / GELUTanh: aten.gelu, 5 each


def _require(condition: bool, model: nn.Module, what: str) -> None:
    if not condition:
        raise UserError(f"cannot describe {type(model).__name__} as a ViTSpec: {what}")


def _square(value: int | Iterable[int], model: nn.Module, what: str) -> int:
    values = [value] if isinstance(value, int) else [int(v) for v in value]
    _require(len(set(values)) == 1, model, f"non-square {what} {tuple(values)}")
    return values[0]


def _identity(module: nn.Module | None) -> bool:
    return module is None or isinstance(module, nn.Identity)


def _gelu(module: nn.Module) -> bool:
    return type(module).__name__ in _GELU_CLASSES


# --------------------------------------------------------------------------------------------
# torchvision


def _torchvision(model: nn.Module) -> ViTSpec:
    _require(isinstance(model.conv_proj, nn.Conv2d), model, "a conv stem instead of a patch conv")
    _require(model.representation_size is None, model, "a representation (pre-logits) layer")
    layers = list(model.encoder.layers)
    attention = layers[0].self_attention
    return ViTSpec(
        image_size=model.image_size,
        patch_size=model.patch_size,
        width=model.hidden_dim,
        depth=len(layers),
        heads=attention.num_heads,
        mlp_width=model.mlp_dim,
        num_classes=model.heads.head.out_features,
        in_chans=model.conv_proj.in_channels,
        qkv_bias=attention.in_proj_bias is not None,
        attention_impl=AttentionImpl.SDPA,  # called with need_weights=False
    )


# --------------------------------------------------------------------------------------------
# timm


def _timm_blocks(model: nn.Module) -> tuple[int, int, bool, AttentionImpl]:
    """Heads, MLP width, qkv bias and attention implementation, the same in every block."""
    found = set()
    for block in model.blocks:
        attn, mlp = block.attn, block.mlp
        _require(type(block).__name__ == "Block", model, f"a {type(block).__name__} block")
        _require(_identity(block.ls1) and _identity(block.ls2), model, "layer scale")
        _require(type(attn).__name__ == "Attention", model, f"a {type(attn).__name__}")
        _require(
            all(_identity(getattr(attn, n, None)) for n in ("q_norm", "k_norm", "norm", "gate")),
            model, "q/k norms, an attention-output norm or a gate",
        )
        _require(attn.attn_dim == model.embed_dim, model, "an attention width other than D")
        _require(type(mlp).__name__ == "Mlp" and _gelu(mlp.act), model, "an MLP other than GELU")
        _require(_identity(getattr(mlp, "norm", None)), model, "a norm inside the MLP")
        impl = AttentionImpl.SDPA if attn.fused_attn else AttentionImpl.SCALED_QUERY
        found.add((attn.num_heads, mlp.fc1.out_features, attn.qkv.bias is not None, impl))
    _require(len(found) == 1, model, "blocks that differ from one another")
    return found.pop()


def _timm(model: nn.Module) -> ViTSpec:
    embed = model.patch_embed
    _require(isinstance(embed.proj, nn.Conv2d) and embed.proj.bias is not None, model,
             "a patch embedding other than a biased Conv2d")
    _require(_identity(embed.norm) and _identity(model.norm_pre), model, "a pre-norm")
    _require(model.pos_embed is not None and not model.dynamic_img_size, model,
             "no or a resampled position embedding")
    _require(model.attn_pool is None and not model.pool_include_prefix, model,
             "attention pooling, or pooling over the prefix tokens")
    _require(model.global_pool in ("token", "avg"), model, f"global pool '{model.global_pool}'")
    heads, mlp_width, qkv_bias, impl = _timm_blocks(model)
    distilled = getattr(model, "dist_token", None) is not None
    if distilled:
        _require(model.reg_token is None and _identity(model.fc_norm), model,
                 "registers or fc_norm with a distillation head (timm ignores them)")
    head = (
        HeadKind.DISTILLED if distilled
        else HeadKind.GAP if model.global_pool == "avg" else HeadKind.TOKEN
    )
    final_norm = (
        FinalNorm.TOKENS if not _identity(model.norm)
        else FinalNorm.POOLED if not _identity(model.fc_norm) else FinalNorm.NONE
    )
    return ViTSpec(
        image_size=_square(embed.img_size, model, "image size"),
        patch_size=_square(embed.patch_size, model, "patch size"),
        width=model.embed_dim,
        depth=len(model.blocks),
        heads=heads,
        mlp_width=mlp_width,
        num_classes=model.num_classes,
        in_chans=embed.proj.in_channels,
        class_token=model.cls_token is not None,
        dist_token=distilled,
        reg_tokens=model.num_reg_tokens,
        pos_embed_covers_prefix=not model.no_embed_class,
        qkv_bias=qkv_bias,
        head=head,
        final_norm=final_norm,
        attention_impl=impl,
    )


# --------------------------------------------------------------------------------------------
# Hugging Face


_HF_HEADS = {
    "ViTModel": None,
    "DeiTModel": None,
    "ViTForImageClassification": HeadKind.TOKEN,
    "DeiTForImageClassification": HeadKind.TOKEN,
    "DeiTForImageClassificationWithTeacher": HeadKind.DISTILLED,
}
_HF_ATTENTION = {"sdpa": AttentionImpl.SDPA, "eager": AttentionImpl.SCALED_SCORES}


def _hugging_face(model: nn.Module) -> ViTSpec:
    config = model.config
    kind = type(model).__name__
    _require(config.model_type in ("vit", "deit") and kind in _HF_HEADS, model,
             f"a {config.model_type} {kind} (known: {', '.join(_HF_HEADS)})")
    base = getattr(model, config.model_type, model)
    _require(getattr(base.embeddings, "mask_token", None) is None, model, "a mask token")
    _require(config.hidden_act == "gelu", model, f"activation '{config.hidden_act}'")
    implementation = config._attn_implementation
    _require(implementation in _HF_ATTENTION, model, f"attention '{implementation}'")
    heads = config.num_attention_heads
    _require(getattr(config, "head_dim", None) in (None, config.hidden_size // heads), model,
             "a head width other than D / H")
    head = _HF_HEADS[kind]
    if head is None:
        pooled = base.pooler is not None
        if pooled:
            _require(config.pooler_act == "tanh", model, f"pooler '{config.pooler_act}'")
            _require(config.pooler_output_size == config.hidden_size, model,
                     "a pooler wider or narrower than D")
        head = HeadKind.POOLER if pooled else HeadKind.TOKEN
    return ViTSpec(
        image_size=_square(config.image_size, model, "image size"),
        patch_size=_square(config.patch_size, model, "patch size"),
        width=config.hidden_size,
        depth=config.num_hidden_layers,
        heads=heads,
        mlp_width=config.intermediate_size,
        num_classes=0 if kind.endswith("Model") else config.num_labels,
        in_chans=config.num_channels,
        dist_token=config.model_type == "deit",
        qkv_bias=config.qkv_bias,
        head=head,
        attention_impl=_HF_ATTENTION[implementation],
    )


# --------------------------------------------------------------------------------------------
# the note models and the reference ViT


def _image_size(rows: int, patch_size: int, model: nn.Module) -> int:
    side = math.isqrt(rows)
    _require(side * side == rows, model, f"{rows} patches do not make a square grid")
    return side * patch_size


def _note001(model: nn.Module) -> ViTSpec:
    from vitprof.models.notes.note001 import PatcherConv

    tokens = model.pos_embedding
    _require(tokens.class_token.shape[0] == 1, model,
             "note 001's tokens built for a batch above 1 (their params grow with it)")
    if isinstance(model.patcher, PatcherConv):
        conv = model.patcher.conv
        patch, in_chans = int(conv.kernel_size[0]), conv.in_channels
    else:
        patch = int(model.patcher.unfold.kernel_size)
        in_chans = model.patcher.linear_projection.in_features // (patch * patch)
    encoders = list(model.transformer_encoders)
    return ViTSpec(
        image_size=_image_size(tokens.pos_embedding.shape[1] - 1, patch, model),
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


def _timm_style_note(model: nn.Module, qkv_bias: bool, **fields: object) -> ViTSpec:
    """Notes 002 and 004: ``patch_embed.proj``, ``blocks[i].attn`` / ``.mlp.fc1``, ``head``,
    a class token and a position embedding over every token, ``(q @ k^T) * scale``."""
    conv = model.patch_embed.proj
    patch = int(conv.kernel_size[0])
    return ViTSpec(
        image_size=_image_size(model.patch_embed.num_patches, patch, model),
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


def _note002(model: nn.Module) -> ViTSpec:
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


def _note004(model: nn.Module) -> ViTSpec:
    return _timm_style_note(model, qkv_bias=model.blocks[0].attn.qkv.bias is not None)


def _is(module_name: str, class_name: str) -> Callable[[nn.Module], bool]:
    def detect(model: nn.Module) -> bool:
        return any(
            cls.__module__ == module_name and cls.__name__ == class_name
            for cls in type(model).__mro__
        )

    return detect


def _from_package(prefix: str) -> Callable[[nn.Module], bool]:
    return lambda model: type(model).__module__.startswith(prefix)


_INFERRERS: tuple[tuple[Callable[[nn.Module], bool], Callable[[nn.Module], ViTSpec]], ...] = (
    (_is("torchvision.models.vision_transformer", "VisionTransformer"), _torchvision),
    (_is("timm.models.vision_transformer", "VisionTransformer"), _timm),
    (_from_package("transformers."), _hugging_face),
    (_is("vitprof.models.notes.note001", "ViT"), _note001),
    (_is("vitprof.models.notes.note002", "CifarViT"), _note002),
    (_is("vitprof.models.notes.note004", "VisionTransformer"), _note004),
    (_is("vitprof.models.reference", "ReferenceViT"), lambda model: model.spec),
)
KNOWN = (
    "torchvision VisionTransformer, timm VisionTransformer(Distilled), Hugging Face ViT/DeiT, "
    "the vitprof note models and the reference ViT"
)


def _check_norms(model: nn.Module) -> None:
    for name, module in model.named_modules():
        if is_norm(module):
            affine = isinstance(module, nn.LayerNorm) and module.weight is not None
            _require(affine and module.bias is not None, model,
                     f"{name} is a {type(module).__name__}, not an affine LayerNorm")


def spec_from_model(model: nn.Module, image_size: int | None = None) -> ViTSpec:
    """The spec of ``model``; ``image_size``, if given, must be the one its position embedding
    was built for. Raises :class:`UserError` for a model a spec cannot describe."""
    if not isinstance(model, nn.Module):
        raise UserError(f"expected an nn.Module, got {type(model).__name__}")
    infer = next((infer for detect, infer in _INFERRERS if detect(model)), None)
    if infer is None:
        raise UserError(
            f"cannot infer a ViTSpec from {type(model).__name__}; known: {KNOWN}"
        )
    _check_norms(model)
    spec = infer(model)
    if image_size is not None and image_size != spec.image_size:
        raise UserError(
            f"{type(model).__name__} was built for {spec.image_size}px images, not {image_size}px"
        )
    params = sum(p.numel() for p in model.parameters())
    expected = closed_form(spec).totals.params
    _require(params == expected, model,
             f"it has {params:,} params where its spec has {expected:,} (parts a spec lacks)")
    return spec

