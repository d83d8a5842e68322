"""What one model library declares, and the helpers its declaration is written with.

A library is the knowledge vitprof has of one implementation of Vision Transformers (torchvision,
timm, Hugging Face, the source notes, a user's factory): how to name the component of each of its
modules (a component table), how to read its :class:`~vitprof.models.closed_form.ViTSpec` (spec
inferrers), which of its models the zoo builds by name (zoo entries), how it names the rest
(``timm:NAME``), checks and builds them, what its models declare of their input, how a sweep
rebuilds one at another depth or width, and its deploy step. Each lives in one file of
:mod:`vitprof.models.libraries`, listed once in its registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vitprof.core.errors import UserError
from vitprof.core.overrides import Override

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
class ComponentTable:
    """A library's component table, a fact about the classes ``detect`` accepts: regexes
    searched in module paths and parameter names.

    ``blocks`` must fully match a block's module path; blocks are numbered in the order
    ``named_modules`` yields them (registration order, which is execution order in the models
    the tables describe), across stages: Swin's fourth stage's first block follows the third's
    last. The first rule whose regex is found in a path wins; a parameter no rule names takes the
    component of its nearest ancestor module that has one. The recognize layer reads the tables
    (:mod:`vitprof.recognize.tables`) and compares them with the breakdown.
    """

    name: str
    detect: Detect
    blocks: str
    rules: Sequence[Override]


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
    overrides: tuple[Override, ...] = ()
    published: Callable[[int, int], Published | None] = field(default=lambda size, classes: None)
    # the square image sizes the model's published weights are made for, where known
    published_sizes: Callable[[], tuple[int, ...]] = field(default=lambda: ())
    non_square: bool = False  # build takes (height, width) too


ImageSize = int | tuple[int, int]  # an int: a square image; a pair: (height, width)


def size_text(image_size: ImageSize) -> str:
    """``224`` or ``224x320``."""
    return str(image_size) if isinstance(image_size, int) else "x".join(map(str, image_size))


def square_side(image_size: ImageSize) -> ImageSize:
    """A square pair as its side (what a builder taking one int understands)."""
    return image_size if isinstance(image_size, int) or image_size[0] != image_size[1] \
        else image_size[0]


@dataclass(frozen=True)
class BuildSizes:
    """The input sizes a model is built for; None: its own."""

    image_size: ImageSize | None = None
    frames: int | None = None
    in_chans: int | None = None

    def keywords(self) -> dict[str, tuple[tuple[str, ...], Any]]:
        """Each size asked for, with the keywords a factory may take it as."""
        sizes = {
            "image size": (("image_size", "img_size"), self.image_size),
            "frames": (("num_frames", "frames"), self.frames),
            "channels": (("in_chans", "in_channels", "num_channels"), self.in_chans),
        }
        return {what: given for what, given in sizes.items() if given[1] is not None}

    def naming(self, name: str) -> str:
        """``name`` with the sizes asked for, as a failed build names it: ``vit_b_16 at image
        size 225``."""
        asked = [f"{what} {size_text(value) if what == 'image size' else value}"
                 for what, (_, value) in self.keywords().items()]
        return f"{name} at {', '.join(asked)}" if asked else name


Builder = Callable[[str, BuildSizes, "int | None"], "Callable[[], nn.Module] | None"]
"""A library's build of a name it claims, with the sizes and classes asked for: a factory of no
arguments (the zoo calls it on the device asked for), or None where the name is one of the zoo's
entries."""


@dataclass(frozen=True)
class Declaration:
    """What a model says of its input in one place (``source``): its channels, its size
    (height, width) and, for a video model, its frames; None where it says nothing."""

    source: str
    channels: int | None
    size: tuple[int, ...] | None
    frames: int | None = None


Variant = Callable[[int], "nn.Module"]
"""A depth or width of a sweep -> the model rebuilt with it."""

@dataclass(frozen=True)
class ZooSweep:
    """A library's part of the zoo sweep (``benchmarks/zoo_sweep.py``), which runs every model
    of a library against independent oracles. ``source`` is the short name its rows carry
    (``timm``); ``models(per_group)`` yields ``(group, model)`` for each model, the first
    ``per_group`` of each group where given (timm's model modules); ``build(model)`` returns a
    fresh model, built on the default device without weights, and the input it declares as
    ``(channels, height, width)``, or None where it declares none."""

    source: str
    models: Callable[[int | None], Iterator[tuple[str, str]]]
    build: Callable[[str], tuple[nn.Module, tuple[int, ...] | None]]

    def listed(self, per_group: int | None) -> list[tuple[str, str, str]]:
        """``(source, group, model)`` of each of :attr:`models`' models, in its order."""
        return [(self.source, group, name) for group, name in self.models(per_group)]

    def build_on(self, name: str, device: str = "meta"
                 ) -> tuple[nn.Module, tuple[int, ...] | None]:
        """:attr:`build` on ``device`` (meta: no weights). A tensor made apart from the default
        device (ImageGPT's LayerNorm calls ``torch.Tensor()``) is moved there too."""
        import torch

        with torch.device(device):
            model, declared = self.build(name)
        return model.to(device), declared


ModelFile = tuple[str, str, str]
"""A model name that holds a file's path, as ``(prefix, path, suffix)``: ``hf:cfg/config.json``
is ``("hf:", "cfg/config.json", "")``, ``models.py:build`` is ``("", "models.py", ":build")``."""


@dataclass(frozen=True)
class ModelLibrary:
    """One implementation's component tables, spec inferrers, zoo entries and names.

    ``tables`` holds one table per module layout (torchvision's ViT, Swin and MaxViT each have
    their own); the first whose detector accepts a model places it. ``tables`` is empty for a
    library whose models the graph recognizer (:mod:`vitprof.recognize.graph`)
    places, component by component, with nothing left in ``other``. ``known`` names what the
    inferrers read, for the error that lists them. Every zoo entry's ``family`` is ``name``.

    The names it builds outside the zoo's table are those ``claims`` accepts (by default, those
    that start with ``prefix``); ``names`` shows them in ``vitprof models``. ``check`` refuses a
    claimed name it cannot build, without building anything, and returns False for one of the
    zoo's entries; ``build`` builds the others (:class:`Builder`). ``declares`` reads what a
    model says of its input (:mod:`vitprof.models.declared_input`), ``variant`` rebuilds a model
    at another depth or width (``axis``) for a sweep, or says None for a model not its own, and
    ``deploy`` re-parameterises a model in place for inference (:mod:`vitprof.models.deploy`).
    ``zoo_sweep`` is its part of the zoo sweep, if any (:class:`ZooSweep`).
    ``model_file`` splits a claimed name that holds a file's path (:data:`ModelFile`), None for
    one that does not. Where ``prefixes_entries``, ``prefix`` + a zoo entry's name names that
    entry too (``torchvision:vit_b_16``: :meth:`entry_name`).
    """

    name: str
    tables: tuple[ComponentTable, ...]
    inferrers: tuple[Inferrer, ...]
    known: str
    entries: tuple[ZooEntry, ...] = ()
    prefix: str = ""
    names: tuple[str, ...] = ()
    check: Callable[[str], bool] = field(default=lambda name: False)
    build: Builder | None = None
    declares: Callable[[nn.Module], Declaration | None] | None = None
    variant: Callable[[str, nn.Module, str], Variant | None] | None = None
    deploy: Callable[[nn.Module], None] | None = None
    claims_name: Callable[[str], bool] | None = None
    model_file: Callable[[str], ModelFile | None] = field(default=lambda name: None)
    prefixes_entries: bool = False
    zoo_sweep: ZooSweep | None = None

    def claims(self, name: str) -> bool:
        """Whether ``name`` is this library's to check and build."""
        if self.claims_name is not None:
            return self.claims_name(name)
        return bool(self.prefix) and name.startswith(self.prefix)

    def entry_name(self, name: str) -> str:
        """The zoo entry's name a claimed ``name`` stands for: without the prefix where
        ``prefixes_entries``, else ``name`` itself."""
        return name.removeprefix(self.prefix) if self.prefixes_entries else name


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


def heads(width: int, head_dim: int) -> int:
    """The heads of a width rebuilt with heads of ``head_dim``; a UserError if none fits."""
    if width % head_dim:
        raise UserError(f"width {width} is not a multiple of the head width {head_dim}")
    return width // head_dim


def declared_pair(value: Any) -> tuple[int, ...] | None:
    """A declared image size as (height, width): a positive int (a square) or a pair of them;
    None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return (value, value)
    if isinstance(value, tuple | list) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
    ):
        return (int(value[0]), int(value[1]))
    return None


def declared_count(value: Any) -> int | None:
    """A declared count (channels, frames): a positive int; None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
