"""OpenCLIP (``open_clip``, the ``open-clip-torch`` package): the image tower of any model of
``open_clip.list_models()``, named ``open_clip:NAME`` (``open_clip:ViT-B-32``).

Only the image tower is built (the ``visual`` of the CLIP model, from the model's config's
``vision_cfg`` and ``embed_dim``, with ``open_clip.model._build_vision_tower``, the builder
``open_clip.create_model`` calls), so no text tower and no tokenizer is made and nothing is
downloaded (no ``pretrained`` tag is read). The tower declares its input itself: its
``image_size`` attribute, from the config (224 for ViT-B-32), or the size asked for. Its output
is the embedding (``embed_dim`` wide): it has no classifier, so a class count is refused. The
graph recognizer places its modules (no component table).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vitprof.core.errors import UserError
from vitprof.models.libraries.base import BuildSizes, ModelLibrary, require_package

if TYPE_CHECKING:
    from torch import nn

NAME = "open_clip"
PREFIX = "open_clip:"


def _config(name: str) -> tuple[Any, dict[str, Any]]:
    """open_clip and the config of ``open_clip:NAME``, or a UserError for an unknown name."""
    open_clip = require_package("open_clip", "open_clip")
    model_name = name.removeprefix(PREFIX)
    known = open_clip.list_models()
    if model_name not in known:
        close = difflib.get_close_matches(model_name, known, n=3)
        hint = f"; did you mean {', '.join(PREFIX + c for c in close)}?" if close else ""
        raise UserError(f"unknown open_clip model '{model_name}'{hint}")
    return open_clip, open_clip.get_model_config(model_name)  # a copy of it


def _check(name: str) -> bool:
    _config(name)
    return True


def _build(name: str, sizes: BuildSizes, num_classes: int | None) -> Callable[[], nn.Module]:
    """The image tower at the image size asked for (the config's ``vision_cfg.image_size``);
    frames and channels are not the tower's to take: the input has them, and the tower's own
    forward refuses what it cannot run."""
    if num_classes is not None:
        raise UserError(f"{name} is an image tower without a classifier (its output is the "
                        f"embedding): cannot build it with {num_classes} classes")
    open_clip, config = _config(name)
    vision = dict(config["vision_cfg"])
    if sizes.image_size is not None:
        vision["image_size"] = sizes.image_size
    return lambda: open_clip.model._build_vision_tower(
        config["embed_dim"], vision, quick_gelu=config.get("quick_gelu", False))


LIBRARY = ModelLibrary(
    name=NAME,
    tables=(),
    inferrers=(),
    known="",
    prefix=PREFIX,
    names=("open_clip:NAME",),
    check=_check,
    build=_build,
)
