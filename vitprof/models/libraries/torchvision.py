"""torchvision's vision transformers: component tables (``VisionTransformer``, Swin and Swin V2,
MaxViT), the ``VisionTransformer`` spec inferrer, the zoo's models (named with or without
``torchvision:``), ``VisionTransformer`` rebuilt at another depth or width for a sweep, and
``vit_22b``: a torchvision ``VisionTransformer`` at ViT-22B's sizes, not ViT-22B's own blocks
(:mod:`vitprof.models.vit22b` has those).
The spec inferrer and the rebuilder take ``model: Any``: they read attributes torch types as
``Tensor | Module``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vitprof.core.records import Component as C
from vitprof.core.vocab import AttentionImpl, SweepAxis
from vitprof.models.libraries.base import (
    ComponentTable,
    Factory,
    ModelLibrary,
    Published,
    Variant,
    ZooEntry,
    from_package,
    heads,
    is_class,
)
from vitprof.models.libraries.describe import require

if TYPE_CHECKING:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

NAME = "torchvision"

TABLE = ComponentTable(
    name=NAME,
    detect=from_package("torchvision.models.vision_transformer"),
    blocks=r"encoder\.layers\.encoder_layer_\d+",
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

SWIN_TABLE = ComponentTable(
    name=NAME,
    detect=from_package("torchvision.models.swin_transformer"),
    # features.0 is the patch embedding, then stages of blocks (odd) and patch merging (even)
    blocks=r"features\.[1-9]\d*\.\d+",
    rules=(
        (r"^features\.0\.0($|\.)", C.PATCH_EMBED),  # the patch conv (features.0.1 is a Permute)
        (r"^features\.0\.2($|\.)|(^|\.)norm\d?($|\.)", C.NORM),
        (r"\.reduction($|\.)", C.PATCH_EMBED),  # patch merging between stages
        (r"\.attn\.qkv($|\.)", C.ATTN_QKV),
        (r"\.attn\.proj($|\.)", C.ATTN_PROJ),
        # the scores' bias (V1's table, V2's continuous position MLP cpb_mlp) and V2's
        # cosine-attention logit_scale belong to the core
        (r"\.attn($|\.)", C.ATTN_CORE),
        (r"\.mlp($|\.)", C.MLP),
        (r"^(avgpool|head)($|\.)", C.HEAD),
    ),
)

MAXVIT_TABLE = ComponentTable(
    name=NAME,
    detect=from_package("torchvision.models.maxvit"),
    # a MaxVitLayer is an MBConv then two transformer blocks (window, then grid attention),
    # each with its own attention and MLP residuals; the MBConv, outside them, is conv
    blocks=r"blocks\.\d+\.layers\.\d+\.layers\.(?:window|grid)_attention",
    rules=(
        (r"^stem\.0\.1($|\.)|\.pre_norm($|\.)|\.conv_[ab]\.1($|\.)|\.(attn|mlp)_layer\.0($|\.)"
         r"|^classifier\.2($|\.)", C.NORM),
        (r"^stem($|\.)", C.PATCH_EMBED),
        (r"\.MBconv($|\.)", C.CONV),
        (r"\.to_qkv($|\.)", C.ATTN_QKV),
        (r"\.merge($|\.)", C.ATTN_PROJ),
        (r"\.attn_layer\.1($|\.)", C.ATTN_CORE),  # with its relative position bias table
        (r"\.mlp_layer($|\.)", C.MLP),
        (r"^classifier($|\.)", C.HEAD),
    ),
)


def infer_spec(model: Any) -> ViTSpec:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

    require(isinstance(model.conv_proj, nn.Conv2d), model, "a conv stem instead of a patch conv")
    require(model.representation_size is None, model, "a representation (pre-logits) layer")
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


VITS = {"vit_b_16": 16, "vit_b_32": 32, "vit_l_16": 16, "vit_l_32": 32, "vit_h_14": 14}
"""torchvision's ViT builders and their patch sizes."""

HIERARCHICAL = {
    "swin_t": 224, "swin_s": 224, "swin_b": 224, "swin_v2_t": 256, "swin_v2_s": 256,
    "swin_v2_b": 256, "maxvit_t": 224,
}
"""torchvision's other vision transformers (Swin, Swin V2, MaxViT) and the image size of their
published weights. Swin takes any image size as it is (it pads to its windows); MaxViT is built
for its ``input_size``. Either takes a non-square size."""


def _hierarchical_builder(name: str) -> Factory:
    def build(image_size: int | tuple[int, int], num_classes: int) -> nn.Module:
        import torchvision.models as tvm

        sized = {"input_size": _pair(image_size)} if name.startswith("maxvit") else {}
        return getattr(tvm, name)(weights=None, num_classes=num_classes, **sized)

    return build


def _pair(image_size: int | tuple[int, int]) -> tuple[int, int]:
    return (image_size, image_size) if isinstance(image_size, int) else image_size


def _builder(name: str) -> Factory:
    def build(image_size: int, num_classes: int) -> nn.Module:
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, image_size=image_size, num_classes=num_classes)

    return build


def _crop_size(weights: Any) -> Any:
    """The image size a torchvision weights enum is made for: an int for a square crop."""
    crop = weights.transforms.keywords.get("crop_size")
    return crop[0] if isinstance(crop, list | tuple) and len(set(crop)) == 1 else crop


def _published_sizes(name: str) -> Callable[[], tuple[int, ...]]:
    def sizes() -> tuple[int, ...]:
        import torchvision.models as tvm

        crops = {_crop_size(weights) for weights in tvm.get_model_weights(name)}
        return tuple(sorted(crop for crop in crops if isinstance(crop, int)))

    return sizes


def _published(name: str) -> Callable[[int, int], Published | None]:
    def published(image_size: int, num_classes: int) -> Published | None:
        import torchvision.models as tvm

        for weights in tvm.get_model_weights(name):
            if _crop_size(weights) == image_size and len(weights.meta["categories"]) == num_classes:
                return Published(
                    f"torchvision {weights}", weights.meta["num_params"], weights.meta["_ops"]
                )
        return None

    return published


def _vit_22b(image_size: int, num_classes: int) -> nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(
        image_size=image_size, patch_size=14, num_layers=48, num_heads=48, hidden_dim=6144,
        mlp_dim=24576, num_classes=num_classes,
    )


ENTRIES = (
    *(
        ZooEntry(name, NAME, f"torchvision {name}", _builder(name), 224, 1000, patch,
                 published=_published(name), published_sizes=_published_sizes(name))
        for name, patch in VITS.items()
    ),
    *(
        ZooEntry(name, NAME, f"torchvision {name}", _hierarchical_builder(name), size, 1000,
                 4 if name.startswith("swin") else None, published=_published(name),
                 published_sizes=_published_sizes(name), non_square=True)
        for name, size in HIERARCHICAL.items()
    ),
    ZooEntry("vit_22b", NAME, "torchvision's VisionTransformer at ViT-22B's sizes "
             "(48 layers, width 6144, 48 heads, MLP 24576, patch 14); not ViT-22B itself, "
             "which has parallel blocks, QK-norm, no q/k/v biases and norms without bias "
             "(see vit_22b_parallel)",
             _vit_22b, 224, 1000, 14),
)

def _variant(name: str, module: Any, axis: str) -> Variant | None:
    """A ``VisionTransformer`` rebuilt at another depth, or another width with the same head
    width and MLP ratio."""
    if not type(module).__module__.startswith("torchvision.models.vision_transformer"):
        return None
    from torchvision.models.vision_transformer import VisionTransformer

    first = module.encoder.layers[0].self_attention
    config = {
        "image_size": module.image_size, "patch_size": module.patch_size,
        "num_layers": len(module.encoder.layers), "num_heads": first.num_heads,
        "hidden_dim": module.hidden_dim, "mlp_dim": module.mlp_dim,
        "num_classes": module.num_classes,
    }
    head_dim = module.hidden_dim // first.num_heads

    def make(value: int) -> nn.Module:
        changed = dict(config)
        if axis == SweepAxis.DEPTH:
            changed["num_layers"] = value
        else:
            changed.update(hidden_dim=value, num_heads=heads(value, head_dim),
                           mlp_dim=value * module.mlp_dim // module.hidden_dim)
        return VisionTransformer(**changed)

    return make


LIBRARY = ModelLibrary(
    name=NAME,
    tables=(TABLE, SWIN_TABLE, MAXVIT_TABLE),
    inferrers=((is_class("torchvision.models.vision_transformer", "VisionTransformer"),
                infer_spec),),
    known="torchvision VisionTransformer",
    entries=ENTRIES,
    prefix="torchvision:",
    variant=_variant,
    prefixes_entries=True,
)
