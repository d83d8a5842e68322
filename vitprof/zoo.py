"""Model names to ``nn.Module`` factories. Weights are never loaded: random init, or meta.

Accepted names:

* every torchvision ViT (``vit_b_16``, ``torchvision:vit_b_16``, ...) and ``vit_22b``;
* ``timm:NAME`` (needs the ``timm`` extra);
* ``hf:vit-base-patch16-224`` style built-in configs, ``hf:path/to/config.json`` and
  ``hf:path/to/dir`` holding a ``config.json`` (need the ``transformers`` extra);
* the models of the source notes (``note001_vit_b16``, ``note002_cifar_vit``, ...);
* ``path/to/file.py:factory`` and ``package.module:factory`` for anything else.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vitprof.errors import UserError
from vitprof.families import Rule
from vitprof.records import Component
from vitprof.slow_notice import notice_if_slow

Factory = Callable[..., nn.Module]


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


@dataclass(frozen=True)
class BuiltModel:
    """A model ready to be analyzed, with what is known about its input."""

    name: str
    module: nn.Module
    image_size: int
    in_chans: int
    entry: ZooEntry | None


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
        factory = getattr(importlib.import_module(f"vitprof.models.{module}"), function)
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
        ZooEntry("vit_22b", "torchvision", "22B-parameter ViT: 48 layers, width 6144, 48 heads, "
                 "MLP 24576, patch 14 (torchvision VisionTransformer)", _vit_22b, 224, 1000, 14),
        ZooEntry("note001_vit_b16", "notes", "note 001: from-scratch ViT-B/16 with "
                 "nn.MultiheadAttention and a hidden-layer MLPHead, 10 classes",
                 _note("note001", "build_note001_vit"), 224, 10, 16),
        ZooEntry("note002_cifar_vit", "notes", "note 002: CIFAR-ViT, 32px, patch 4, D=512, "
                 "depth 6, 8 heads, separate Q/K/V linears",
                 _note("note002", "build_cifar_vit"), 32, 10, 4),
        ZooEntry("note002_linear_attention", "notes", "note 002 section 3.2: the CIFAR-ViT "
                 "with ReLU linear attention (K^T V first)",
                 _note("note002", "build_linear_attention_vit"), 32, 10, 4),
        ZooEntry("note002_dynamic_vit", "notes", "note 002 section 3.1: the CIFAR-ViT with "
                 "Dynamic-ViT token pruning (predictors counted as other)",
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


def _require(package: str, extra: str) -> Any:
    try:
        return importlib.import_module(package)
    except ImportError:
        raise UserError(
            f"this model needs {package}: pip install 'vitprof[{extra}]'"
        ) from None


def _hf_builtin(name: str, attn_implementation: str = "sdpa") -> Factory:
    width, depth, heads, mlp, patch = HF_CONFIGS[name]

    def build(image_size: int, num_classes: int) -> nn.Module:
        transformers = _require("transformers", "transformers")
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


def _check_size(name: str, image_size: int, patch_size: int | None) -> None:
    if image_size <= 0:
        raise UserError(f"image size must be positive, got {image_size}")
    if patch_size and image_size % patch_size:
        raise UserError(
            f"image size {image_size} is not divisible by the patch size {patch_size} of {name}"
        )


def infer_patch_size(module: nn.Module) -> int | None:
    """Kernel of the first convolution whose kernel equals its stride (a patchify conv)."""
    for child in module.modules():
        if isinstance(child, nn.Conv2d) and child.kernel_size == child.stride:
            return int(child.kernel_size[0])
    return None


def infer_image_size(module: nn.Module) -> int | None:
    """Image size a model was built for: from its attributes or config, else from the length
    of its position embedding (patches = tokens - prefix tokens, a square grid) and patch size,
    else from timm's ``pretrained_cfg["input_size"]`` (channels, height, width)."""
    for candidate in (
        getattr(module, "image_size", None),
        getattr(module, "img_size", None),
        getattr(getattr(module, "config", None), "image_size", None),
        getattr(getattr(module, "patch_embed", None), "img_size", None),
    ):
        if isinstance(candidate, int):
            return candidate
        if isinstance(candidate, tuple | list) and candidate:
            return int(candidate[0])
    from_embedding = _size_from_position_embedding(module)
    if from_embedding is not None:
        return from_embedding
    input_size = (getattr(module, "pretrained_cfg", None) or {}).get("input_size")
    return int(input_size[-2]) if isinstance(input_size, tuple | list) and input_size else None


def _size_from_position_embedding(module: nn.Module) -> int | None:
    patch = infer_patch_size(module)
    if patch is None:
        return None
    for name, param in module.named_parameters():
        if "pos" in name.rpartition(".")[2] and param.dim() == 3:
            tokens = int(param.shape[1])
            for prefix in range(6):
                side = math.isqrt(max(tokens - prefix, 0))
                if side and side * side == tokens - prefix:
                    return side * patch
    return None


def infer_in_chans(module: nn.Module) -> int:
    for child in module.modules():
        if isinstance(child, nn.Conv2d):
            return int(child.in_channels)
    return 3


def _construct(name: str, factory: Callable[[], nn.Module], device: str) -> nn.Module:
    """Call ``factory`` with ``device`` as the default device; on meta, fall back to a CPU build
    moved to meta when the constructor itself needs data (``.item()`` in an init)."""
    try:
        with torch.device(device):
            module = factory()
    except UserError:
        raise
    except Exception as error:
        if device != "meta":
            raise UserError(f"building {name} failed: {_one_line(error)}") from None
        try:
            module = factory().to("meta")
        except Exception as cpu_error:
            raise UserError(f"building {name} failed: {_one_line(cpu_error)}") from None
    if not isinstance(module, nn.Module):
        raise UserError(f"factory for {name} returned {type(module).__name__}, not an nn.Module")
    return module


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _load_factory(spec: str) -> Callable[..., Any]:
    target, _, attribute = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise UserError(f"no such file: {target}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
        try:
            module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception as error:
            raise UserError(f"cannot import {target}: {_one_line(error)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except Exception as error:
            raise UserError(f"cannot import {target}: {_one_line(error)}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UserError(f"{target} has no callable named '{attribute}'")
    return factory


def _call_factory(factory: Callable[..., Any], image_size: int | None, classes: int | None):
    accepted = inspect.signature(factory).parameters
    kwargs: dict[str, int] = {}
    for key in ("image_size", "img_size"):
        if image_size is not None and key in accepted:
            kwargs[key] = image_size
    if classes is not None and "num_classes" in accepted:
        kwargs["num_classes"] = classes
    return lambda: factory(**kwargs)


def _hf_from_config(path: str, num_classes: int | None, image_size: int | None) -> Factory:
    transformers = _require("transformers", "transformers")
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"malformed Hugging Face config {path}: {_one_line(error)}") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise UserError(f"malformed Hugging Face config {path}: no 'model_type' key")
    try:
        config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    except Exception as error:  # transformers validates fields with its own error classes
        raise UserError(f"malformed Hugging Face config {path}: {_one_line(error)}") from None
    if num_classes is not None:
        config.num_labels = num_classes
    if image_size is not None:
        config.image_size = image_size
    return lambda: transformers.AutoModelForImageClassification.from_config(config)


def _hf_config_file(target: str) -> str | None:
    """The config file an ``hf:`` target names: a ``*.json`` path, or a directory's
    ``config.json``; None for a built-in name."""
    if target.endswith(".json"):
        return target
    in_directory = Path(target, "config.json")
    return str(in_directory) if in_directory.is_file() else None


def build(
    name: str,
    *,
    image_size: int | None = None,
    num_classes: int | None = None,
    device: str = "meta",
) -> BuiltModel:
    """Build the model called ``name`` on ``device`` without loading any weights; a build still
    running after 2 s says so once on stderr, if that is a terminal."""
    with notice_if_slow(f"building {name} ..."):
        return _build(name, image_size=image_size, num_classes=num_classes, device=device)


def _build(
    name: str, *, image_size: int | None, num_classes: int | None, device: str
) -> BuiltModel:
    if name.startswith("timm:"):
        timm = _require("timm", "timm")
        model_name = name.removeprefix("timm:")
        # a pretrained tag (``vit_base_patch16_224.augreg_in21k``) selects that checkpoint's
        # architecture settings (its class count, say); no weights are loaded either way
        architecture = model_name.partition(".")[0]
        if architecture not in timm.list_models():
            close = difflib.get_close_matches(architecture, timm.list_models(), n=3)
            hint = f"; did you mean {', '.join('timm:' + c for c in close)}?" if close else ""
            raise UserError(f"unknown timm model '{model_name}'{hint}")
        kwargs: dict[str, int] = {}
        if image_size is not None:
            kwargs["img_size"] = image_size
        if num_classes is not None:
            kwargs["num_classes"] = num_classes
        module = _construct(
            name, lambda: timm.create_model(model_name, pretrained=False, **kwargs), device
        )
        return _finish(name, module, image_size, None)
    config_file = _hf_config_file(name.removeprefix("hf:")) if name.startswith("hf:") else None
    if config_file is not None:
        factory = _hf_from_config(config_file, num_classes, image_size)
        return _finish(name, _construct(name, factory, device), image_size, None)
    if ":" in name and not name.startswith(("hf:", "torchvision:")):
        factory = _call_factory(_load_factory(name), image_size, num_classes)
        return _finish(name, _construct(name, factory, device), image_size, None)
    entry = lookup(name)
    size = image_size or entry.image_size
    _check_size(entry.name, size, entry.patch_size)
    classes = num_classes or entry.num_classes
    module = _construct(entry.name, lambda: entry.build(size, classes), device)
    return BuiltModel(entry.name, module, size, infer_in_chans(module), entry)


def _finish(
    name: str, module: nn.Module, image_size: int | None, entry: ZooEntry | None
) -> BuiltModel:
    size = image_size or infer_image_size(module) or 224
    _check_size(name, size, infer_patch_size(module))
    return BuiltModel(name, module, size, infer_in_chans(module), entry)
