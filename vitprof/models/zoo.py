"""Model names to ``nn.Module`` factories. Weights are never loaded: random init, or meta.

The zoo dispatches over the registered model libraries (:data:`vitprof.models.libraries.LIBRARIES`):
a name goes to the first library that claims it, which checks and builds it; any other name,
or one a library hands back, is one of the libraries' zoo entries. Accepted names:

* every torchvision ViT (``vit_b_16``, ``torchvision:vit_b_16``, ...) and ``vit_22b``
  (torchvision's class at ViT-22B's sizes);
* ``timm:NAME`` (needs the ``timm`` extra);
* ``hf:vit-base-patch16-224`` style built-in configs, ``hf:path/to/config.json`` and
  ``hf:path/to/dir`` holding a ``config.json`` (need the ``transformers`` extra);
* the models of the source notes (``note001_vit_b16``, ``note002_cifar_vit``, ...) and
  ``vit_22b_parallel``, vitprof's ViT-22B-style model (:mod:`vitprof.models.vit22b`);
* ``path/to/file.py:factory`` and ``package.module:factory`` for anything else;
* the names of any other library file (``vitprof models`` lists them).
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain

import torch
from torch import nn

from vitprof.core.errors import UserError
from vitprof.core.slow_notice import notice_if_slow
from vitprof.core.validate import check_image_size, check_int
from vitprof.core.vocab import Device
from vitprof.count.running import ZERO_ELEMENT_WARNING, meta_caused, one_line
from vitprof.models.declared_input import declared_input
from vitprof.models.libraries import ENTRIES, library_of, model_file, torchvision
from vitprof.models.libraries.base import (
    BuildSizes,
    Factory,
    ImageSize,
    Published,
    ZooEntry,
    size_text,
    square_side,
)

__all__ = [
    "DEFAULT_FRAMES", "DEFAULT_IMAGE_SIZE", "TORCHVISION_VITS", "ZOO", "BuiltModel", "Factory",
    "Published", "ZooEntry", "build", "build_sized", "check_zoo_size", "default_image_size",
    "infer_image_size", "infer_patch_size", "library_of", "lookup", "model_file",
    "published_sizes", "validate_name", "zoo_entry",
]


@dataclass(frozen=True)
class BuiltModel:
    """A model ready to be analyzed, with what is known about its input."""

    name: str
    module: nn.Module
    image_size: int | tuple[int, int]  # an int: a square image; a pair: (height, width)
    entry: ZooEntry | None
    warnings: tuple[str, ...] = ()  # what the build noticed and the analysis should say


DEFAULT_IMAGE_SIZE = 224  # the input size of a model that does not say its own
# the frames of a model with a 3-D patch embedding that does not say its own: the clip length of
# transformers' VideoMAEConfig
DEFAULT_FRAMES = 16

TORCHVISION_VITS = tuple(torchvision.VITS)

ZOO: dict[str, ZooEntry] = {entry.name: entry for entry in ENTRIES}


def _entry_key(name: str) -> str:
    """The zoo entry's name ``name`` stands for: a library's prefix taken off where its entries
    go without it (``torchvision:vit_b_16``:
    :meth:`~vitprof.models.libraries.base.ModelLibrary.entry_name`)."""
    library = library_of(name)
    return library.entry_name(name) if library is not None else name


def zoo_entry(name: str) -> ZooEntry | None:
    """The zoo entry ``name`` names, or None where it names none (``timm:NAME``, a file)."""
    return ZOO.get(_entry_key(name))


def lookup(name: str) -> ZooEntry:
    """The zoo entry for ``name`` (``torchvision:`` prefix optional) or a UserError."""
    key = _entry_key(name)
    if key in ZOO:
        return ZOO[key]
    close = difflib.get_close_matches(key, list(ZOO), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see 'vitprof models'"
    raise UserError(f"unknown model '{name}'{hint}")


def published_sizes(name: str) -> tuple[int, ...]:
    """The square image sizes the published weights of the zoo model ``name`` are made for
    (torchvision's weights: 224 and 384 for vit_b_16), or () when vitprof knows none."""
    entry = zoo_entry(name)
    return entry.published_sizes() if entry is not None else ()


def infer_patch_size(module: nn.Module) -> int | None:
    """Kernel of the first convolution whose kernel equals its stride (a patchify conv)."""
    for child in module.modules():
        if isinstance(child, nn.Conv2d) and child.kernel_size == child.stride:
            return int(child.kernel_size[0])
    return None


def infer_image_size(module: nn.Module) -> int | None:
    """Height of the image a model was built for, read by
    :func:`vitprof.models.declared_input.declared_input` (declared first, then guessed)."""
    size = declared_input(module).size
    return size[0] if size else None


def default_image_size(module: nn.Module) -> int:
    """The image size a model was built for (:func:`infer_image_size`), else
    :data:`DEFAULT_IMAGE_SIZE`."""
    return infer_image_size(module) or DEFAULT_IMAGE_SIZE


def _construct(name: str, factory: Callable[[], nn.Module], device: str) -> nn.Module:
    """Call ``factory`` with ``device`` as the default device; on meta, when the constructor
    itself needs data (``.item()`` in an init: :func:`~vitprof.count.running.meta_caused`), fall
    back to a CPU build moved to meta: the one case where a factory runs twice. A head of zero
    classes (``num_classes=0``, no head) is built without torch's zero-element warning. The
    legacy constructor ``torch.Tensor(n, m)`` (older code: ``nn.Parameter(torch.Tensor(n, m))``
    then ``reset_parameters``) ignores the default device: what it makes on the CPU in a meta
    build is moved to meta with the rest (:func:`_on_one_device`), so that a run with real
    tensors materialises the whole model alike."""
    try:
        module = _quietly(factory, device)
    except UserError:
        raise
    except Exception as error:
        if device != Device.META or not meta_caused(error):
            raise _build_failed(name, error) from None
        try:
            module = _quietly(factory, "cpu").to("meta")
        except Exception as cpu_error:
            raise _build_failed(name, cpu_error) from None
    if not isinstance(module, nn.Module):
        raise UserError(f"factory for {name} returned {type(module).__name__}, not an nn.Module")
    return _on_one_device(module, device)


def _on_one_device(module: nn.Module, device: str) -> nn.Module:
    """``module`` built on ``device``; on meta, its parameters and buffers made elsewhere (by the
    legacy ``torch.Tensor(shape)`` constructor) moved to meta, in place."""
    if device == Device.META and any(t.device.type != Device.META
                                for t in chain(module.parameters(), module.buffers())):
        module.to("meta")
    return module


def _build_failed(name: str, error: Exception) -> UserError:
    """The one line for a build that raised: a missing optional package (an ImportError: ``No
    module named 'natten'``, or transformers' ``X requires the natten library but it was not
    found in your environment. You can install it ...``) named as one, by its first sentence."""
    if isinstance(error, ImportError):
        first = " ".join(str(error).split()).partition(". ")[0].rstrip(".")
        return UserError(f"building {name} failed: a missing optional package: {first}")
    return UserError(f"building {name} failed: {one_line(error)}")


def _quietly(factory: Callable[[], nn.Module], device: str) -> nn.Module:
    with torch.device(device), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=ZERO_ELEMENT_WARNING)
        return factory()


def validate_name(name: str) -> ZooEntry | None:
    """Check, without building anything or running a factory, that :func:`build` knows
    ``name``: a zoo name, or a name its library checks (``timm:NAME``: timm installed, a known
    architecture; ``hf:``: transformers installed, a built-in name or a config file that
    exists; ``FILE.py:factory`` or ``package.module:factory``: the source defines ``factory``).
    Returns the zoo entry where ``name`` is one, else None; raises UserError naming what is
    wrong."""
    library = library_of(name)
    if library is not None and library.check(name):
        return None
    return lookup(name)


def _check_square(entry: ZooEntry, image_size: ImageSize) -> None:
    """Refuse a non-square size for a zoo entry whose builder takes one int. Any other size is
    the model's to take or refuse: a patch size that does not divide it is no refusal of
    vitprof's (a strided convolution floors it, :mod:`vitprof.count.flooring`); a model that
    refuses it (torchvision's ViT asserts) fails to build, with its own reason."""
    if not isinstance(image_size, int) and image_size[0] != image_size[1] \
            and not entry.non_square:
        raise UserError(f"{entry.name} takes a square image size only (its builder takes one "
                        f"int); got {size_text(image_size)}")


def check_zoo_size(entry: ZooEntry, image_size: ImageSize) -> None:
    """Refuse, before anything is analysed, an image size the zoo model ``entry`` refuses: a
    non-square size where its builder takes one int, or a size its constructor raises on, with
    its own reason (built on meta: torchvision's ViT asserts that its patch size divides the
    image). vitprof refuses nothing else: a size the model takes is counted as it computes."""
    build(entry.name, image_size=image_size, device="meta")


def build(
    name: str,
    *,
    image_size: ImageSize | None = None,
    num_classes: int | None = None,
    device: str = "meta",
) -> BuiltModel:
    """Build the model called ``name`` on ``device`` without loading any weights; a build still
    running after 2 s says so once on stderr, if that is a terminal.

    ``image_size`` is a positive int (a square) or ``(height, width)``; ``num_classes=0``
    means no head. The image size is passed to the builder: timm's ``img_size``, a Hugging
    Face config's ``image_size``, a factory's keyword of that name; a zoo entry's image size (a
    non-square one only where the entry takes it). Frames and channels too go through
    :func:`build_sized` (its :class:`BuildSizes`; an :class:`vitprof.workload.InputRequest` is
    one), as every input size does from a request.
    """
    image_size = check_image_size(image_size)
    if num_classes is not None:
        check_int("number of classes", num_classes, 0)
    return build_sized(name, BuildSizes(image_size), num_classes, device)


def build_sized(
    name: str, sizes: BuildSizes, num_classes: int | None = None, device: str = "meta"
) -> BuiltModel:
    """:func:`build` at sizes and classes already checked (an
    :class:`vitprof.workload.InputRequest` checks them once, in its constructor): nothing is
    checked again."""
    with notice_if_slow(f"building {name} ..."):
        return _build(name, sizes=sizes, num_classes=num_classes, device=device)


def _build(name: str, *, sizes: BuildSizes, num_classes: int | None, device: str) -> BuiltModel:
    """Built by the library that claims ``name`` (:func:`library_of`), else the zoo entry."""
    image_size = sizes.image_size
    library = library_of(name)
    if library is not None and library.build is not None:
        factory = library.build(name, sizes, num_classes)
        if factory is not None:
            return _finish(name, _construct(sizes.naming(name), factory, device), image_size)
    entry = lookup(name)
    size = square_side(image_size) if image_size is not None else entry.image_size
    _check_square(entry, size)
    classes = num_classes if num_classes is not None else entry.num_classes
    module = _construct(sizes.naming(entry.name), lambda: entry.build(size, classes), device)
    return BuiltModel(entry.name, module, size, entry)


def _finish(name: str, module: nn.Module, image_size: ImageSize | None) -> BuiltModel:
    """A model built by a library from outside the zoo's table (timm, hf, FILE.py:factory): no
    entry."""
    size = image_size if image_size is not None else default_image_size(module)
    return BuiltModel(name, module, size, None, _head_warnings(module))


def _head_warnings(module: nn.Module) -> tuple[str, ...]:
    """A Hugging Face config whose heads do not divide its width builds (transformers truncates
    each head to ``width // heads``), but no ViT of that shape exists: ``vitprof formula``
    refuses it, so say what was counted instead."""
    config = getattr(module, "config", None)
    width = getattr(config, "hidden_size", None)
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(width, int) or not isinstance(heads, int) or heads < 1 or not width % heads:
        return ()
    return (f"width {width} is not divisible by {heads} heads (vitprof formula refuses this "
            f"shape); the model ran with heads of {width // heads}, {heads * (width // heads)} "
            f"of the {width} channels in q, k and v",)
