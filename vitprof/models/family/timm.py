"""timm's ``VisionTransformer`` (and ``VisionTransformerDistilled``): component table and spec
inferrer. timm models are built by name (``timm:NAME``, :mod:`vitprof.models.zoo`), so the
zoo lists none. The spec inferrer takes ``model: Any``: it reads attributes torch types as
``Tensor | Module``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vitprof.core.records import Component as C
from vitprof.count.families.base import ComponentTable
from vitprof.models.family.base import ModelFamily, is_class
from vitprof.models.family.describe import gelu, identity, image_size, require, square
from vitprof.models.spec_kinds import AttentionImpl, FinalNorm, HeadKind

if TYPE_CHECKING:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

NAME = "timm"


def _timm_vit(model: nn.Module) -> bool:
    return type(model).__module__.startswith("timm.") and any(
        cls.__name__ == "VisionTransformer" for cls in type(model).__mro__
    )


TABLE = ComponentTable(
    name=NAME,
    detect=_timm_vit,
    blocks=r"blocks\.\d+",
    rules=(
        # a hybrid's CNN backbone (R26/R50, HybridEmbed): its stem conv embeds the image, its
        # stages are convolutional stages (conv), its GroupNorms are norms
        # (ViTamin's MBConv blocks' pre_norm too: a norm wherever it runs, as the graph says)
        (r"^patch_embed\.backbone\.(.*\.)?(pre_)?norm\d?(\.weight|\.bias)?$", C.NORM),
        (r"^patch_embed\.backbone\.stages($|\.)", C.CONV),
        (r"^patch_embed", C.PATCH_EMBED),
        (r"^(cls_token|dist_token|reg_token|pos_embed)$", C.TOKENS),
        (r"\.attn\.(q_norm|k_norm|norm|sub_norm)($|\.)", C.NORM),
        (r"\.attn\.(qkv|q_proj|k_proj|v_proj|q|k|v|kv)($|\.)", C.ATTN_QKV),
        (r"\.attn\.proj($|\.)", C.ATTN_PROJ),
        (r"\.attn$", C.ATTN_CORE),
        # layer scales: a Block's ls1 / ls2, a ParallelThingsBlock's attns.i.ls / ffns.i.ls
        (r"\.(ls1|attns\.\d+\.ls)($|\.)", C.ATTN_PROJ),
        (r"\.(ls2|ffns\.\d+\.ls)($|\.)", C.MLP),
        (r"(^|\.)(norm|norm1|norm2|norm_pre|fc_norm)($|\.)", C.NORM),
        # the attention-pooling head's products and softmax (in attn_pool's own forward) are an
        # attention core outside the blocks; its latent, projections and MLP are head
        (r"^attn_pool$", C.ATTN_CORE),
        # before the MLP rule: the attention-pooling head's own MLP is head, not a block's mlp
        (r"^(head|head_dist|attn_pool|head_drop)($|\.)", C.HEAD),
        (r"\.mlp($|\.)", C.MLP),
    ),
)


def _blocks(model: Any) -> tuple[int, int, bool, AttentionImpl]:
    """Heads, MLP width, qkv bias and attention implementation, the same in every block."""
    found = set()
    for block in model.blocks:
        attn, mlp = block.attn, block.mlp
        require(type(block).__name__ == "Block", model, f"a {type(block).__name__} block")
        require(identity(block.ls1) and identity(block.ls2), model, "layer scale")
        require(type(attn).__name__ == "Attention", model, f"a {type(attn).__name__}")
        require(
            all(identity(getattr(attn, n, None)) for n in ("q_norm", "k_norm", "norm", "gate")),
            model, "q/k norms, an attention-output norm or a gate",
        )
        require(attn.attn_dim == model.embed_dim, model, "an attention width other than D")
        require(type(mlp).__name__ == "Mlp" and gelu(mlp.act), model, "an MLP other than GELU")
        require(identity(getattr(mlp, "norm", None)), model, "a norm inside the MLP")
        impl = AttentionImpl.SDPA if attn.fused_attn else AttentionImpl.SCALED_QUERY
        found.add((attn.num_heads, mlp.fc1.out_features, attn.qkv.bias is not None, impl))
    require(len(found) == 1, model, "blocks that differ from one another")
    return found.pop()


def infer_spec(model: Any) -> ViTSpec:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

    embed = model.patch_embed
    require(isinstance(embed.proj, nn.Conv2d) and embed.proj.bias is not None, model,
            "a patch embedding other than a biased Conv2d")
    require(identity(embed.norm) and identity(model.norm_pre), model, "a pre-norm")
    require(model.pos_embed is not None and not model.dynamic_img_size, model,
            "no or a resampled position embedding")
    require(model.attn_pool is None and not model.pool_include_prefix, model,
            "attention pooling, or pooling over the prefix tokens")
    require(model.global_pool in ("token", "avg"), model, f"global pool '{model.global_pool}'")
    heads, mlp_width, qkv_bias, impl = _blocks(model)
    distilled = getattr(model, "dist_token", None) is not None
    if distilled:
        require(model.reg_token is None and identity(model.fc_norm), model,
                "registers or fc_norm with a distillation head (timm ignores them)")
    head = (
        HeadKind.DISTILLED if distilled
        else HeadKind.GAP if model.global_pool == "avg" else HeadKind.TOKEN
    )
    final_norm = (
        FinalNorm.TOKENS if not identity(model.norm)
        else FinalNorm.POOLED if not identity(model.fc_norm) else FinalNorm.NONE
    )
    return ViTSpec(
        image_size=image_size(embed.img_size),
        patch_size=square(embed.patch_size, model, "patch size"),
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


FAMILY = ModelFamily(
    name=NAME,
    tables=(TABLE,),
    inferrers=((is_class("timm.models.vision_transformer", "VisionTransformer"), infer_spec),),
    known="timm VisionTransformer(Distilled)",
)
