"""Recognizers written as tables for the ViT implementations vitprof knows by name."""

from __future__ import annotations

from torch import nn

from vitprof.core.records import Component as C
from vitprof.count.families.base import Family


def _from_package(prefix: str):
    def detect(model: nn.Module) -> bool:
        return type(model).__module__.startswith(prefix)

    return detect


TORCHVISION = Family(
    name="torchvision",
    detect=_from_package("torchvision.models.vision_transformer"),
    blocks=r"encoder\.layers\.encoder_layer_(\d+)",
    rules=(
        (r"^conv_proj", C.PATCH_EMBED),
        (r"^class_token$|^encoder\.pos_embedding$", C.TOKENS),
        (r"self_attention\.(in_proj_weight|in_proj_bias)$", C.ATTN_QKV),
        (r"self_attention\.out_proj", C.ATTN_PROJ),
        (r"self_attention$", C.ATTN_CORE),
        (r"\.ln(_\d)?($|\.)", C.NORM),
        (r"\.mlp($|\.)", C.MLP),
        (r"^heads", C.HEAD),
    ),
)

def _timm_vit(model: nn.Module) -> bool:
    return type(model).__module__.startswith("timm.") and any(
        cls.__name__ == "VisionTransformer" for cls in type(model).__mro__
    )


TIMM = Family(
    name="timm",
    detect=_timm_vit,
    blocks=r"blocks\.(\d+)",
    rules=(
        (r"^patch_embed", C.PATCH_EMBED),
        (r"^(cls_token|dist_token|reg_token|pos_embed)$", C.TOKENS),
        (r"\.attn\.(q_norm|k_norm|norm)($|\.)", C.NORM),
        (r"\.attn\.(qkv|q_proj|k_proj|v_proj|q|k|v|kv)($|\.)", C.ATTN_QKV),
        (r"\.attn\.proj($|\.)", C.ATTN_PROJ),
        (r"\.attn$", C.ATTN_CORE),
        (r"\.ls1($|\.)", C.ATTN_PROJ),
        (r"\.ls2($|\.)", C.MLP),
        (r"(^|\.)(norm|norm1|norm2|norm_pre|fc_norm)($|\.)", C.NORM),
        (r"\.mlp($|\.)", C.MLP),
        (r"^(head|head_dist|attn_pool|head_drop)($|\.)", C.HEAD),
    ),
)


def _hugging_face_vit(model: nn.Module) -> bool:
    """The transformers packages that share ViT's module layout; others are generic."""
    return type(model).__module__.startswith(tuple(
        f"transformers.models.{package}." for package in ("vit", "deit", "vit_mae", "vit_msn")
    ))


HUGGING_FACE = Family(
    name="huggingface",
    detect=_hugging_face_vit,
    # transformers 4.x: encoder.layer.N with attention.attention.{query,key,value},
    # attention.output.dense, intermediate, output; 5.x: layers.N with attention.{q,k,v,o}_proj
    # and mlp.{fc1,fc2}.
    blocks=r"(?:vit\.|deit\.)?(?:encoder\.layer|layers)\.(\d+)",
    rules=(
        (r"embeddings\.patch_embeddings", C.PATCH_EMBED),
        (r"embeddings\.(cls_token|position_embeddings|mask_token|distillation_token)$", C.TOKENS),
        (r"(^|\.)embeddings$", C.TOKENS),
        (r"attention\.attention\.(query|key|value)($|\.)", C.ATTN_QKV),
        (r"attention\.(q_proj|k_proj|v_proj)($|\.)", C.ATTN_QKV),
        (r"attention\.(output|o_proj)($|\.)", C.ATTN_PROJ),
        (r"\.attention(\.attention)?$", C.ATTN_CORE),
        (r"(layernorm_before|layernorm_after|layernorm)($|\.)", C.NORM),
        (r"\.(intermediate|output|mlp)($|\.)", C.MLP),
        (r"(^|\.)(classifier|pooler|cls_classifier|distillation_classifier)($|\.)", C.HEAD),
    ),
)

TABLES: tuple[Family, ...] = (TORCHVISION, TIMM, HUGGING_FACE)
