"""Hugging Face ``transformers``: ViT's and DeiT's component table and spec inferrer, the zoo's
built-in ``hf:`` configs, the ``hf:path/to/config.json`` and ``hf:path/to/dir`` names (a
directory holding a ``config.json``), and the input a model's ``config`` declares.
The spec inferrer takes ``model: Any``: it reads a config torch types as ``Tensor | Module``."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from vitprof.core.errors import UserError, one_line
from vitprof.core.records import Component as C
from vitprof.core.vocab import AttentionImpl, HeadKind
from vitprof.models.libraries.base import (
    BuildSizes,
    ComponentTable,
    Declaration,
    Factory,
    ModelFile,
    ModelLibrary,
    ZooEntry,
    ZooSweep,
    declared_count,
    declared_pair,
    from_package,
    missing_package,
    require_package,
    square_side,
)
from vitprof.models.libraries.describe import image_size, require, square

if TYPE_CHECKING:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

NAME = "huggingface"
PREFIX = "hf:"


def _hugging_face_vit(model: nn.Module) -> bool:
    """The transformers packages that share ViT's module layout; others are generic."""
    return type(model).__module__.startswith(tuple(
        f"transformers.models.{package}." for package in ("vit", "deit", "vit_mae", "vit_msn")
    ))


TABLE = ComponentTable(
    name=NAME,
    detect=_hugging_face_vit,
    # transformers 4.x: encoder.layer.N with attention.attention.{query,key,value},
    # attention.output.dense, intermediate, output; 5.x: layers.N with attention.{q,k,v,o}_proj
    # and mlp.{fc1,fc2}. ViTMAE's pre-training decoder: decoder.decoder_layers.N, numbered on
    # after the encoder's.
    blocks=r"(?:vit\.|deit\.)?(?:encoder\.layer|layers)\.\d+|decoder\.decoder_layers\.\d+",
    rules=(
        (r"^decoder\.(mask_token|decoder_pos_embed)$", C.TOKENS),
        (r"^decoder\.decoder_embed($|\.)", C.PATCH_EMBED),  # encoder width to decoder width
        (r"^decoder\.decoder_norm($|\.)", C.NORM),
        (r"^decoder\.decoder_pred($|\.)", C.HEAD),  # the patches' pixels
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


_HEADS = {
    "ViTModel": None,
    "DeiTModel": None,
    "ViTForImageClassification": HeadKind.TOKEN,
    "DeiTForImageClassification": HeadKind.TOKEN,
    "DeiTForImageClassificationWithTeacher": HeadKind.DISTILLED,
}
_ATTENTION = {"sdpa": AttentionImpl.SDPA, "eager": AttentionImpl.SCALED_SCORES}


def infer_spec(model: Any) -> ViTSpec:
    """From the config, so the 4.x and 5.x module layouts alike."""
    from vitprof.models.closed_form import ViTSpec

    config = model.config
    kind = type(model).__name__
    require(config.model_type in ("vit", "deit") and kind in _HEADS, model,
            f"a {config.model_type} {kind} (known: {', '.join(_HEADS)})")
    base = getattr(model, config.model_type, model)
    require(config.hidden_act == "gelu", model, f"activation '{config.hidden_act}'")
    implementation = config._attn_implementation
    require(implementation in _ATTENTION, model, f"attention '{implementation}'")
    heads = config.num_attention_heads
    require(getattr(config, "head_dim", None) in (None, config.hidden_size // heads), model,
            "a head width other than D / H")
    head = _HEADS[kind]
    if head is None:
        pooled = base.pooler is not None
        if pooled:
            require(config.pooler_act == "tanh", model, f"pooler '{config.pooler_act}'")
            require(config.pooler_output_size == config.hidden_size, model,
                    "a pooler wider or narrower than D")
        head = HeadKind.POOLER if pooled else HeadKind.TOKEN
    return ViTSpec(
        image_size=image_size(config.image_size),
        patch_size=square(config.patch_size, model, "patch size"),
        width=config.hidden_size,
        depth=config.num_hidden_layers,
        heads=heads,
        mlp_width=config.intermediate_size,
        num_classes=0 if kind.endswith("Model") else config.num_labels,
        in_chans=config.num_channels,
        dist_token=config.model_type == "deit",
        qkv_bias=config.qkv_bias,
        head=head,
        attention_impl=_ATTENTION[implementation],
        mask_token=getattr(base.embeddings, "mask_token", None) is not None,
    )


class HFConfig(NamedTuple):
    """The shape of a built-in ``ViTForImageClassification`` config."""

    width: int
    depth: int
    heads: int
    mlp_width: int
    patch_size: int


HF_CONFIGS: dict[str, HFConfig] = {
    "vit-base-patch16-224": HFConfig(width=768, depth=12, heads=12, mlp_width=3072, patch_size=16),
    "vit-base-patch32-224": HFConfig(width=768, depth=12, heads=12, mlp_width=3072, patch_size=32),
    "vit-large-patch16-224": HFConfig(width=1024, depth=24, heads=16, mlp_width=4096,
                                      patch_size=16),
    "vit-huge-patch14-224": HFConfig(width=1280, depth=32, heads=16, mlp_width=5120,
                                     patch_size=14),
}


def _builtin(config: HFConfig) -> Factory:
    def build(image_size: int | tuple[int, int], num_classes: int) -> nn.Module:
        transformers = require_package("transformers", "transformers")
        vit_config = transformers.ViTConfig(
            hidden_size=config.width, num_hidden_layers=config.depth,
            num_attention_heads=config.heads, intermediate_size=config.mlp_width,
            patch_size=config.patch_size, image_size=image_size, num_labels=num_classes,
            attn_implementation="sdpa",
        )
        return transformers.ViTForImageClassification(vit_config)

    return build


ENTRIES = tuple(
    ZooEntry(f"hf:{name}", NAME, f"Hugging Face ViTForImageClassification (D={c.width}, "
             f"depth {c.depth}, {c.heads} heads, MLP {c.mlp_width}, patch {c.patch_size})",
             _builtin(c), 224, 1000, c.patch_size, non_square=True)
    for name, c in HF_CONFIGS.items()
)

def _config_file(name: str) -> str | None:
    """The config file an ``hf:`` name names: a ``*.json`` path, or a directory's
    ``config.json`` (a directory without one is a UserError); None for a built-in name."""
    target = name.removeprefix(PREFIX)
    if target.endswith(".json"):
        return target
    if not Path(target).is_dir():
        return None
    in_directory = Path(target, "config.json")
    if not in_directory.is_file():
        raise UserError(f"no config.json in {target}")
    return str(in_directory)


def _model_file(name: str) -> ModelFile | None:
    """``hf:cfg/config.json`` as ``("hf:", "cfg/config.json", "")``; None for a built-in name
    or a directory."""
    target = name.removeprefix(PREFIX)
    return (PREFIX, target, "") if target.endswith(".json") else None


def _check(name: str) -> bool:
    """transformers installed (found, not imported: a slow import); a config file that exists,
    or False for a built-in name (a zoo entry)."""
    if importlib.util.find_spec("transformers") is None:
        raise missing_package("transformers", "transformers")
    config_file = _config_file(name)
    if config_file is None:
        return False
    if not Path(config_file).is_file():
        raise UserError(f"no such file: {config_file}")
    return True


def _build(name: str, sizes: BuildSizes, num_classes: int | None) -> Callable[[], nn.Module] | None:
    config_file = _config_file(name)
    return None if config_file is None else _from_config(config_file, num_classes, sizes)


def _from_config(path: str, num_classes: int | None, sizes: BuildSizes) -> Callable[[], nn.Module]:
    transformers = require_package("transformers", "transformers")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # a BOM is skipped
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8
        raise UserError(f"malformed Hugging Face config {path}: {one_line(error)}") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise UserError(f"malformed Hugging Face config {path}: no 'model_type' key")
    try:
        config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    except Exception as error:  # transformers validates fields with its own error classes
        raise UserError(f"malformed Hugging Face config {path}: {one_line(error)}") from None
    if num_classes is not None:
        config.num_labels = num_classes
    if sizes.image_size is not None:
        config.image_size = square_side(sizes.image_size)
    if sizes.frames is not None:
        config.num_frames = sizes.frames
    if sizes.in_chans is not None:
        config.num_channels = sizes.in_chans
    auto = _auto_class(transformers, config)
    return lambda: auto.from_config(config)


_AUTO_CLASSES = ("AutoModelForImageClassification", "AutoModelForVideoClassification",
                 "AutoModel")


def _auto_class(transformers: Any, config: Any) -> Any:
    """The first auto class that maps ``config`` to a model: an image classifier, else a video
    classifier (VideoMAE, ViViT, TimeSformer), else the bare model."""
    for name in _AUTO_CLASSES:
        auto = getattr(transformers, name)
        if type(config) in auto._model_mapping:
            return auto
    raise UserError(f"transformers has no model for a {config.model_type} config")


def _declares(module: nn.Module) -> Declaration | None:
    """A model's ``config``: ``image_size`` (an int or a pair), ``num_channels`` and, for a
    video model, ``num_frames`` (:func:`_frames`)."""
    config = getattr(module, "config", None)
    if config is None:
        return None
    return Declaration("config", declared_count(getattr(config, "num_channels", None)),
                       declared_pair(getattr(config, "image_size", None)), _frames(module))


def _frames(module: nn.Module) -> int | None:
    """A config's ``num_frames``, for a transformers model only where transformers maps its
    type to a video classifier (VideoMAE, ViViT, TimeSformer, ...): Perceiver's config has
    ``num_frames`` for its multimodal autoencoder, yet its image classifiers take images."""
    config = getattr(module, "config", None)
    frames = declared_count(getattr(config, "num_frames", None))
    if frames is None or not type(module).__module__.startswith("transformers."):
        return frames
    from transformers.models.auto.modeling_auto import MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES

    return frames if getattr(config, "model_type", None) in \
        MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES else None


def _sweep_models(per_type: int | None) -> Iterator[tuple[str, str]]:
    """Every transformers model type with an image-classification head, one model per type:
    ``(type, type)``."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES,
    )

    for model_type in sorted(MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES):
        yield model_type, model_type


def _sweep_build(model_type: str) -> tuple[nn.Module, tuple[int, ...] | None]:
    """The image classifier of ``model_type``'s default config, and the config's
    ``(num_channels, *image_size)`` where it has an image size (3 channels where it says none)."""
    import transformers
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES,
    )

    config = transformers.AutoConfig.for_model(model_type)
    # the first class the type maps to: a type mapped to several (DeiT, LeViT with a teacher,
    # Perceiver) makes AutoModelForImageClassification read config.architectures, None here
    classes = MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES[model_type]
    model = getattr(transformers, classes if isinstance(classes, str) else classes[0])(config)
    size = getattr(config, "image_size", None)
    size = (size, size) if isinstance(size, int) else tuple(size) if size else None
    chans = getattr(config, "num_channels", 3)
    return model, (chans, *size) if size else None


LIBRARY = ModelLibrary(
    name=NAME,
    tables=(TABLE,),
    inferrers=((from_package("transformers."), infer_spec),),
    known="Hugging Face ViT/DeiT",
    entries=ENTRIES,
    prefix=PREFIX,
    names=("hf:path/to/config.json",),
    check=_check,
    build=_build,
    declares=_declares,
    model_file=_model_file,
    zoo_sweep=ZooSweep("hf", _sweep_models, _sweep_build),
)
