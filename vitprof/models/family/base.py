"""What one model family declares, and the helpers its declaration is written with.

A family is the knowledge vitprof has of one implementation of Vision Transformers (torchvision,
timm, Hugging Face, the source notes): how to name the component of each of its modules (a
component table), how to read its :class:`~vitprof.models.closed_form.ViTSpec` (spec
inferrers), and which of its models the zoo builds by name (zoo entries). Each lives in one file
of :mod:`vitprof.models.family`, listed once in its registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vitprof.core.errors import UserError
from vitprof.count.families.base import ComponentTable, Rule

if TYPE_CHECKING:
    from torch import nn

    from vitprof.models.closed_form import ViTSpec

# torch and the closed form are named for types only: the zoo's entries are read without them
Factory = Callable[..., "nn.Module"]
Detect = Callable[["nn.Module"], bool]
Inferrer = tuple[Detect, Callable[["nn.Module"], "ViTSpec"]]
"""``(detect, infer)``: ``infer`` reads the spec of a model ``detect`` accepts."""


@dataclass(frozen=True)
class Published:
    """A parameter count and a GMAC figure published by a model's authors."""

    source: str
    params: int
    gmacs: float


@dataclass(frozen=True)
class ZooEntry:
    """How to build one named model; ``build(image_size, num_classes)`` returns the module.

    ``image_size`` is an int (a square), or ``(height, width)`` where ``non_square``."""

    name: str
    family: str
    description: str
    build: Factory
    image_size: int
    num_classes: int
    patch_size: int | None = None
    overrides: tuple[Rule, ...] = ()
    published: Callable[[int, int], Published | None] = field(default=lambda size, classes: None)
    # the square image sizes the model's published weights are made for, where known
    published_sizes: Callable[[], tuple[int, ...]] = field(default=lambda: ())
    non_square: bool = False  # build takes (height, width) too


@dataclass(frozen=True)
class ModelFamily:
    """One implementation's component tables, spec inferrers and zoo entries.

    ``tables`` holds one table per module layout (torchvision's ViT, Swin and MaxViT each have
    their own); the first whose detector accepts a model places it. ``tables`` is empty for a
    family whose models the graph recognizer (:mod:`vitprof.count.graph`)
    places, component by component, with nothing left in ``other``. ``known`` names what the
    inferrers read, for the error that lists them. Every zoo entry's ``family`` is ``name``.
    """

    name: str
    tables: tuple[ComponentTable, ...]
    inferrers: tuple[Inferrer, ...]
    known: str
    entries: tuple[ZooEntry, ...] = ()


def from_package(prefix: str) -> Detect:
    """A detector for the models whose class is defined in a module under ``prefix``."""

    def detect(model: nn.Module) -> bool:
        return type(model).__module__.startswith(prefix)

    return detect


def is_class(module_name: str, class_name: str) -> Detect:
    """A detector for instances of ``module_name.class_name`` or of its subclasses."""

    def detect(model: nn.Module) -> bool:
        return any(
            cls.__module__ == module_name and cls.__name__ == class_name
            for cls in type(model).__mro__
        )

    return detect


def require_package(package: str, extra: str) -> Any:
    """The optional ``package``, imported, or a UserError naming the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise missing_package(package, extra) from None


def missing_package(package: str, extra: str) -> UserError:
    return UserError(f"this model needs {package}: pip install 'vitprof[{extra}]'")
