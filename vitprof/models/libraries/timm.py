"""timm: ``VisionTransformer``'s (and ``VisionTransformerDistilled``'s) component table and spec
inferrer, the ``timm:NAME`` names (any model of ``timm.list_models()``, a pretrained tag
allowed; the zoo lists none), the input a timm model declares (its ``pretrained_cfg``), its ViTs
rebuilt at another depth or width, and timm's re-parameterisation as the deploy step. The spec
inferrer and the rebuilder take ``model: Any``: they read attributes torch types as
``Tensor | Module``."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vitprof.core.errors import UserError
from vitprof.core.records import Component as C
from vitprof.core.vocab import AttentionImpl, FinalNorm, HeadKind, SweepAxis
from vitprof.models.libraries.base import (
    BuildSizes,
    ComponentTable,
    Declaration,
    ModelLibrary,
    Variant,
    ZooSweep,
    declared_count,
    declared_pair,
    heads,
    is_class,
    require_package,
)
from vitprof.models.libraries.describe import gelu, identity, image_size, require, square

if TYPE_CHECKING:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

NAME = "timm"
PREFIX = "timm:"


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


def _model(name: str) -> tuple[Any, str]:
    """timm and the model name of ``timm:NAME``, or a UserError for an unknown architecture."""
    timm = require_package("timm", "timm")
    model_name = name.removeprefix(PREFIX)
    # a pretrained tag (``vit_base_patch16_224.augreg_in21k``) selects that checkpoint's
    # architecture settings (its class count, say); no weights are loaded either way
    architecture = model_name.partition(".")[0]
    if architecture not in timm.list_models():
        close = difflib.get_close_matches(architecture, timm.list_models(), n=3)
        hint = f"; did you mean {', '.join(PREFIX + c for c in close)}?" if close else ""
        raise UserError(f"unknown timm model '{model_name}'{hint}")
    return timm, model_name


def _check(name: str) -> bool:
    _model(name)
    return True


def _build(name: str, sizes: BuildSizes, num_classes: int | None) -> Callable[[], nn.Module]:
    """``timm.create_model`` without weights, with the image size, channels and classes asked
    for (timm's ``img_size``, ``in_chans``, ``num_classes``)."""
    timm, model_name = _model(name)
    kwargs: dict[str, Any] = {}
    if sizes.image_size is not None:
        kwargs["img_size"] = sizes.image_size
    if sizes.in_chans is not None:
        kwargs["in_chans"] = sizes.in_chans
    if num_classes is not None:
        kwargs["num_classes"] = num_classes
    return lambda: timm.create_model(model_name, pretrained=False, **kwargs)


def _declares(module: nn.Module) -> Declaration | None:
    """timm's ``pretrained_cfg["input_size"]``: ``(channels, height, width)``."""
    cfg = getattr(module, "pretrained_cfg", None)
    input_size = cfg.get("input_size") if isinstance(cfg, dict) else None
    if not isinstance(input_size, tuple | list) or len(input_size) != 3:
        return None
    return Declaration("timm pretrained_cfg['input_size']", declared_count(input_size[0]),
                       declared_pair(input_size[1:]))


def _variant(name: str, module: Any, axis: str) -> Variant | None:
    """A ``timm:`` ViT (``blocks`` and ``embed_dim``) rebuilt at another depth, or another
    width with the same head width."""
    if not name.startswith(PREFIX) or not hasattr(module, "blocks") \
            or not hasattr(module, "embed_dim"):
        return None
    import timm

    head_dim = module.embed_dim // module.blocks[0].attn.num_heads

    def make(value: int) -> nn.Module:
        kwargs: dict[str, Any]
        if axis == SweepAxis.DEPTH:
            kwargs = {"depth": value}
        else:
            kwargs = {"embed_dim": value, "num_heads": heads(value, head_dim)}
        return timm.create_model(name.removeprefix(PREFIX), pretrained=False, **kwargs)

    return make


# timm's modules that hold attention (transformers and hybrids), read from timm.list_modules()
SWEPT_MODULES = (
    "beit", "byoanet", "cait", "coat", "convit", "crossvit", "csatv2", "davit", "deepseek_vit",
    "deit", "edgenext", "efficientformer", "efficientformer_v2", "efficientvit_mit",
    "efficientvit_msra", "eva", "fastvit", "gcvit", "gemma4_vit", "hiera", "hieradet_sam2",
    "iformer", "levit", "lowformer", "maxxvit", "metaformer", "mobilenetv5", "mobilevit",
    "mvitv2", "naflexvit", "nest", "nextvit", "pit", "pvt_v2", "qwen3_vit", "shvit",
    "swiftformer", "swin_transformer", "swin_transformer_v2", "swin_transformer_v2_cr",
    "tiny_vit", "tnt", "twins", "visformer", "vision_transformer", "vision_transformer_hybrid",
    "vision_transformer_relpos", "vision_transformer_sam", "vitamin", "volo", "xcit",
)


def _sweep_models(per_module: int | None) -> Iterator[tuple[str, str]]:
    """``(module, model)`` of every model of :data:`SWEPT_MODULES`, the first ``per_module``
    of each where given."""
    import timm

    for module in SWEPT_MODULES:
        names = timm.list_models(module=module)
        for name in names[:per_module] if per_module else names:
            yield module, name


def _sweep_build(name: str) -> tuple[nn.Module, tuple[int, ...] | None]:
    """``timm.create_model(name)`` without weights, and its ``pretrained_cfg["input_size"]``
    where the configuration is this architecture's."""
    import timm

    model = timm.create_model(name, pretrained=False)
    cfg: dict[str, Any] = getattr(model, "pretrained_cfg", {})
    # a configuration of another architecture declares nothing of this one (timm gives
    # vitamin_xlarge_336, built at 336, the 256 px configuration of vitamin_xlarge_256)
    declared = cfg.get("input_size") if cfg.get("architecture") in (None, name) else None
    return model, tuple(declared) if declared else None


def _deploy(model: nn.Module) -> None:
    """timm's re-parameterisation, in place (``fuse()``, ``reparameterize()`` or
    ``switch_to_deploy()`` on every child that defines one); nothing without timm."""
    try:
        from timm.utils import reparameterize_model
    except ImportError:
        return
    reparameterize_model(model, inplace=True)


LIBRARY = ModelLibrary(
    name=NAME,
    tables=(TABLE,),
    inferrers=((is_class("timm.models.vision_transformer", "VisionTransformer"), infer_spec),),
    known="timm VisionTransformer(Distilled)",
    prefix=PREFIX,
    names=("timm:NAME",),
    check=_check,
    build=_build,
    declares=_declares,
    variant=_variant,
    deploy=_deploy,
    zoo_sweep=ZooSweep(NAME, _sweep_models, _sweep_build),
)
