"""The zoo's entries as data: every built-in model's name, family, description, default input
and classes, and a factory that imports torch (and its library) only when it is called.

Nothing here imports torch, so ``vitprof models`` lists the zoo, and a parser names its models,
without it; :mod:`vitprof.models.zoo` builds the modules and re-exports these names.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vitprof.core.errors import UserError
from vitprof.core.records import Component

if TYPE_CHECKING:
    from torch import nn

    from vitprof.count.families import Rule

Factory = Callable[..., "nn.Module"]


@dataclass(frozen=True)
class Published:
    """A parameter count and a GMAC figure published by a model's authors."""

    source: str
    params: int
    gmacs: float


@dataclass(frozen=True)
class ZooEntry:
    """How to build one named model; ``build(image_size, num_classes)`` returns the module."""

    name: str
    family: str
    description: str
    build: Factory
    image_size: int
    num_classes: int
    patch_size: int | None = None
    overrides: tuple[Rule, ...] = ()
    published: Callable[[int, int], Published | None] = field(default=lambda size, classes: None)


TORCHVISION_VITS = ("vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14")


def _torchvision(name: str) -> Factory:
    def build(image_size: int, num_classes: int) -> nn.Module:
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, image_size=image_size, num_classes=num_classes)

    return build


def _torchvision_published(name: str) -> Callable[[int, int], Published | None]:
    def published(image_size: int, num_classes: int) -> Published | None:
        import torchvision.models as tvm

        for weights in tvm.get_model_weights(name):
            crop = weights.transforms.keywords.get("crop_size")
            if crop == image_size and len(weights.meta["categories"]) == num_classes:
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


def _note(module: str, function: str, **fixed: Any) -> Factory:
    def build(image_size: int, num_classes: int) -> nn.Module:
        factory = getattr(importlib.import_module(f"vitprof.models.notes.{module}"), function)
        return factory(image_size=image_size, num_classes=num_classes, **fixed)

    return build


_PATCH_SIZES = {"vit_b_16": 16, "vit_b_32": 32, "vit_l_16": 16, "vit_l_32": 32, "vit_h_14": 14}
_PREDICTORS: tuple[Rule, ...] = ((r"^predictors", Component.OTHER),)


def _builtin_entries() -> dict[str, ZooEntry]:
    entries = [
        ZooEntry(
            name, "torchvision", f"torchvision {name}", _torchvision(name), 224, 1000,
            _PATCH_SIZES[name], published=_torchvision_published(name),
        )
        for name in TORCHVISION_VITS
    ]
    entries += [
        ZooEntry("vit_22b", "torchvision", "torchvision's VisionTransformer at ViT-22B's sizes "
                 "(48 layers, width 6144, 48 heads, MLP 24576, patch 14); not ViT-22B itself, "
                 "which has parallel blocks, QK-norm and no biases", _vit_22b, 224, 1000, 14),
        ZooEntry("note001_vit_b16", "notes", "note 001: from-scratch ViT-B/16 with "
                 "nn.MultiheadAttention and a hidden-layer MLPHead, 10 classes",
                 _note("note001", "build_note001_vit"), 224, 10, 16),
        ZooEntry("note002_cifar_vit", "notes", "note 002: CIFAR-ViT, 32px, patch 4, D=512, "
                 "depth 6, 8 heads, separate Q/K/V linears",
                 _note("note002", "build_cifar_vit"), 32, 10, 4),
        ZooEntry("note002_linear_attention", "notes", "note 002 section 3.2: the CIFAR-ViT "
                 "with ReLU linear attention (K^T V first), per head: vitprof's reading; the "
                 "note's one (D, D) context is num_heads=1",
                 _note("note002", "build_linear_attention_vit"), 32, 10, 4),
        ZooEntry("note002_dynamic_vit", "notes", "note 002 section 3.1: the CIFAR-ViT with "
                 "Dynamic-ViT token pruning (predictors counted as other); the predictor layers "
                 "and keep ratios are vitprof's assumptions, the note gives neither",
                 _note("note002", "build_dynamic_vit"), 32, 10, 4, overrides=_PREDICTORS),
        ZooEntry("note004_vit_b16", "notes", "note 004: timm-style ViT-B/16 with "
                 "qkv_bias=False by default", _note("note004", "build_note004_vit"), 224, 1000, 16),
    ]
    for size in ("tiny", "small", "base", "large"):
        entries.append(
            ZooEntry(f"note002_cifar_vit_{size}", "notes", f"note 002 scaling table: {size}",
                     _note("note002", "build_cifar_vit_size", size=size), 32, 10, 4)
        )
    for name, (width, depth, heads, mlp, patch) in HF_CONFIGS.items():
        entries.append(
            ZooEntry(f"hf:{name}", "huggingface", f"Hugging Face ViTForImageClassification "
                     f"(D={width}, depth {depth}, {heads} heads, MLP {mlp}, patch {patch})",
                     _hf_builtin(name), 224, 1000, patch)
        )
    return {entry.name: entry for entry in entries}


HF_CONFIGS: dict[str, tuple[int, int, int, int, int]] = {
    "vit-base-patch16-224": (768, 12, 12, 3072, 16),
    "vit-base-patch32-224": (768, 12, 12, 3072, 32),
    "vit-large-patch16-224": (1024, 24, 16, 4096, 16),
    "vit-huge-patch14-224": (1280, 32, 16, 5120, 14),
}


def require_package(package: str, extra: str) -> Any:
    try:
        return importlib.import_module(package)
    except ImportError:
        raise missing_package(package, extra) from None


def missing_package(package: str, extra: str) -> UserError:
    return UserError(f"this model needs {package}: pip install 'vitprof[{extra}]'")


def _hf_builtin(name: str, attn_implementation: str = "sdpa") -> Factory:
    width, depth, heads, mlp, patch = HF_CONFIGS[name]

    def build(image_size: int, num_classes: int) -> nn.Module:
        transformers = require_package("transformers", "transformers")
        config = transformers.ViTConfig(
            hidden_size=width, num_hidden_layers=depth, num_attention_heads=heads,
            intermediate_size=mlp, patch_size=patch, image_size=image_size,
            num_labels=num_classes, attn_implementation=attn_implementation,
        )
        return transformers.ViTForImageClassification(config)

    return build


ZOO: dict[str, ZooEntry] = _builtin_entries()


def lookup(name: str) -> ZooEntry:
    """The zoo entry for ``name`` (``torchvision:`` prefix optional) or a UserError."""
    key = name.removeprefix("torchvision:")
    if key in ZOO:
        return ZOO[key]
    close = difflib.get_close_matches(key, list(ZOO), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see 'vitprof models'"
    raise UserError(f"unknown model '{name}'{hint}")
